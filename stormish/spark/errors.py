"""Errors of the Spark connectors. Each names the component and the path, table or
key it is about: the person reading it has only the message to go on."""

from __future__ import annotations

from ..errors import StormishError


class SparkSourceError(StormishError):
    """A SparkSpout source cannot be read: not a DataFrame, a missing path or table,
    unknown fields."""


class SparkSinkError(StormishError):
    """A sink cannot write or commit a batch: an unwritable path, a schema conflict,
    a failed Spark job."""


class WouldBlock(Exception):  # noqa: N818 - trio's name for "nothing ready yet"
    """Raised by the `*_nowait` methods when nothing is ready yet; try again later."""


def where(component: str | None) -> str:
    """The prefix of a message about `component` (empty when there is none)."""
    return f"component {component!r}: " if component else ""


PY4J_CALL = "An error occurred while calling"


def short(exc: BaseException, limit: int = 400) -> str:
    """`Type: first line` of an exception; Py4J errors carry a whole Java stack trace,
    whose first line only names the call ("An error occurred while calling o54.save."):
    for those, the Java exception's own line (its class and message) follows it."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    first = lines[0] if lines else ""
    if first.startswith(PY4J_CALL) and len(lines) > 1:
        first = f"{first} {lines[1].lstrip(': ')}"
    if len(first) > limit:
        first = first[:limit] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
