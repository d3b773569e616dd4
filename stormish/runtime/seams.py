"""The typed seams between the emitting side of a task and what it publishes to.

A batch crosses threads and processes as one record; a publish target is anything that
takes such batches without blocking: a local `ReceiveQueue`, or a `RemoteTarget` that
hands them to the worker transfer for another worker. Declared here once so that the
collector, the queue and the transport agree on them, and mypy can check it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeAlias

from ..clock import Clock
from ..transport.frames import Batch as QueueBatch

# (source task, stream, value rows, per-row tree ids or None when untracked)
Batch: TypeAlias = QueueBatch


class PublishTarget(Protocol):
    """Where an outbox publishes: never blocks, says no instead (the caller parks)."""

    def try_publish(self, batch: Batch, n: int) -> bool:
        """Take `batch` (n tuples) or refuse it; a refusal is backpressure."""
        ...

    def load(self) -> float:
        """How full the target is, 0 to 1, for load-aware shuffles."""
        ...


class TaskWorker(Protocol):
    """What an executor needs of the worker that runs it (`worker.Worker` is one)."""

    @property
    def index(self) -> int: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def executors(self) -> Mapping[int, Any]:
        """The worker's executors by task (an executor reads its peers' error records)."""
        ...

    @property
    def cycle_congested(self) -> bool:
        """An executor on a cycle is congested: the cycle's spouts hold back."""
        ...

    def executor_failed(self, ex: Any) -> None:
        """`ex` failed fatally (its error is recorded): the worker decides what ends."""
        ...

    def cycle_congestion(self, task: int, congested: bool) -> None: ...

    def spout_settled(self) -> None:
        """A spout finished with no tree in flight, or ended its input: the run may end."""
        ...

    def advance_epoch(self, to: int | None = None, broadcast: bool = False) -> int: ...
