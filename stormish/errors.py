"""Errors raised to authors and operators.

Every error carries the place it is about (file, component, stream, field or config
key) in its message, because the person reading it has only the message to go on.
"""


class StormishError(Exception):
    """Base of every error stormish raises on purpose."""


class TopologyError(StormishError):
    """A topology is malformed: unknown component, stream or field, bad parallelism..."""


class ConfigError(StormishError):
    """A configuration value is missing, unknown or out of its range; names the key."""


class TopologyFileError(StormishError):
    """A topology file cannot be loaded: missing, does not import, defines no topology."""


class WorkerError(StormishError):
    """A worker process died or reported a fatal error; names the worker and the cause."""


class WorkerTimeout(WorkerError):
    """Workers did not answer a control request in time (hung, stopped, or starved of
    the GIL): `idents` are the silent ones' identities on the control channel, `got`
    the answers that came (None for the silent ones) when several were asked at once."""

    def __init__(self, message: str, idents: tuple[bytes, ...] = (), got: list | None = None):
        super().__init__(message)
        self.idents = idents
        self.got = got if got is not None else []


class Interrupted(WorkerError):
    """A look (a read-only control request: quiescence, statistics) cut short because
    the run is being stopped (Ctrl-C, SIGTERM, a kill): the worker asked may be fine;
    the look waiting on it is no longer wanted."""


class FailedException(StormishError):
    """Raise it in `execute` to fail the tuple on purpose (Storm's FailedException): its
    tree fails back to the spout, to be replayed or dead-lettered. It is not an error of
    the topology: it is not reported, and it does not end a `topology.fail.fast` run."""


class ReportedFailedException(FailedException):
    """As FailedException, and reported like an error (counted, shown, in statistics),
    still without ending a fail-fast run (Storm's ReportedFailedException)."""
