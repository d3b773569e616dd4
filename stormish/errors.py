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
