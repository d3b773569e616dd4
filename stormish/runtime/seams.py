"""The typed seams between the emitting side of a task and what it publishes to.

A batch crosses threads and processes as one record; a publish target is anything that
takes such batches without blocking: a local `ReceiveQueue`, or a `RemoteTarget` that
hands them to the worker transfer for another worker. Declared here once so that the
collector, the queue and the transport agree on them, and mypy can check it.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias

# (source task, stream, value rows, per-row tree ids or None when untracked)
Batch: TypeAlias = tuple[int, str, list[Any], list[Any] | None]


class PublishTarget(Protocol):
    """Where an outbox publishes: never blocks, says no instead (the caller parks)."""

    def try_publish(self, batch: Batch, n: int) -> bool:
        """Take `batch` (n tuples) or refuse it; a refusal is backpressure."""
        ...

    def load(self) -> float:
        """How full the target is, 0 to 1, for load-aware shuffles."""
        ...
