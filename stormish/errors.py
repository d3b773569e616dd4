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
    """A worker did not answer a control request in time (hung, stopped, or starved):
    `ident` is its identity on the control channel. Its owner asks it nothing more and
    kills it when the run stops, rather than waiting for each request in turn."""

    def __init__(self, message: str, ident: bytes = b""):
        super().__init__(message)
        self.ident = ident


class Interrupted(WorkerError):
    """A control request cut short because the run is being stopped (Ctrl-C, SIGTERM):
    the worker asked may be fine; the look waiting on it is no longer wanted."""


class FailedException(StormishError):
    """Raise it in `execute` to fail the tuple on purpose (Storm's FailedException): its
    tree fails back to the spout, to be replayed or dead-lettered. It is not an error of
    the topology: it is not reported, and it does not end a `topology.fail.fast` run."""


class ReportedFailedException(FailedException):
    """As FailedException, and reported like an error (counted, shown, in statistics),
    still without ending a fail-fast run (Storm's ReportedFailedException)."""
