"""The sending side of a worker link, without sockets: remote targets and the bounded
transfer queue the worker transfer thread drains.

A collector publishes to a RemoteTarget exactly as to a local receive queue: the publish
is refused (the batch parks in the executor's pendingEmitQ) when the remote task is
flagged under backpressure by its worker's last status, or when the transfer queue is
full. Refusal, never blocking, is what keeps emit non-blocking across workers.
"""

from __future__ import annotations

import threading
from collections import deque

from ..runtime.wakeup import Wakeup


class TransferQueue:
    """Bounded (in batches, `topology.transfer.buffer.size`), many producers, one
    consumer (the transfer thread), which takes everything at once grouped by worker."""

    __slots__ = ("capacity", "_q", "_lock", "_event", "offered", "refused")

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError("transfer queue capacity must be >= 1")
        self.capacity = capacity
        self._q: deque[tuple[int, tuple, int]] = deque()
        self._lock = threading.Lock()
        self._event = Wakeup()
        self.offered = 0
        self.refused = 0

    def try_put(self, worker: int, item: tuple, n: int) -> bool:
        with self._lock:
            if len(self._q) >= self.capacity:
                self.refused += 1
                return False
            self._q.append((worker, item, n))
            self.offered += n
        self._event.set()
        return True

    def drain(self) -> dict[int, list[tuple]]:
        """Everything queued, grouped by destination worker, each group in order."""
        with self._lock:
            items = list(self._q)
            self._q.clear()
            self._event.clear()
        out: dict[int, list[tuple]] = {}
        for worker, item, _ in items:
            out.setdefault(worker, []).append(item)
        return out

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)

    def __len__(self) -> int:
        return len(self._q)


class RemoteTarget:
    """A task on another worker, as a collector's outbox target."""

    __slots__ = ("task", "worker", "transfer", "flagged")

    def __init__(self, task: int, worker: int, transfer: TransferQueue, flagged: set[int]):
        self.task = task
        self.worker = worker
        self.transfer = transfer
        self.flagged = flagged  # RemoteBackpressure.flagged: shared, updated by the receiver

    def try_publish(self, batch: tuple, n: int) -> bool:
        if self.task in self.flagged:
            return False
        src, stream, values, metas = batch
        return self.transfer.try_put(self.worker, (self.task, src, stream, values, metas), n)

    def load(self) -> float:
        return 1.0 if self.task in self.flagged else 0.0
