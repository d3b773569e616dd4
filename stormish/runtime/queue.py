"""An executor's bounded receive queue, with the overflowQ of Storm's JCQueue.

Items are batches `(src_task, stream, values_list, metas_or_None)`; capacity is counted in
tuples. Producers inside the worker call `try_publish`, which refuses when the batch
does not fit: the caller parks it in its pendingEmitQ (emit never blocks). The receive
path from other workers calls `publish_remote`, which never refuses: a batch that does not
fit, or that arrives while the overflowQ is non-empty (order!), goes to the overflowQ.
`consume` takes the queue, then the overflow up to its size at the start, so a task sees
each upstream task's tuples in the order they were emitted.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from .seams import Batch  # noqa: F401 - (src_task, stream, values, metas)
from .wakeup import Wakeup


class ReceiveQueue:
    __slots__ = (
        "capacity",
        "_q",
        "size",
        "overflow",
        "overflow_size",
        "_lock",
        "_event",
        "parked",
        "overflow_high",
        "published",
    )

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._q: deque[Batch] = deque()
        self.size = 0
        self.overflow: deque[tuple[Batch, int]] = deque()
        self.overflow_size = 0
        self.overflow_high = 0
        self._lock = threading.Lock()
        self._event = Wakeup()
        self.parked = False
        self.published = 0

    def try_publish(self, batch: Batch, n: int) -> bool:
        """Place a batch of n tuples if it fits; False means full (nothing was placed)."""
        with self._lock:
            size = self.size
            if size + n > self.capacity and size:
                return False
            self.size = size + n
            self._q.append(batch)
            self.published += n
        if self.parked:
            self._event.set()
        return True

    def publish_force(self, batch: Batch, n: int) -> None:
        """For system tuples (ticks, local control) that must never be refused or dropped."""
        with self._lock:
            self.size += n
            self._q.append(batch)
            self.published += n
        if self.parked:
            self._event.set()

    def publish_remote(self, batch: Batch, n: int) -> int:
        """Never refuses. Returns the overflow size afterwards (0: it went to the queue)."""
        with self._lock:
            if not self.overflow and (self.size + n <= self.capacity or not self.size):
                self.size += n
                self._q.append(batch)
                self.published += n
                ov = 0
            else:
                self.overflow.append((batch, n))
                ov = self.overflow_size = self.overflow_size + n
                if ov > self.overflow_high:
                    self.overflow_high = ov
                self.published += n
        if self.parked:
            self._event.set()
        return ov

    def consume(self) -> list[Batch] | None:
        """Take everything queued, then the overflow as it is now; None when empty."""
        with self._lock:
            if not self._q and not self.overflow:
                return None
            q = self._q
            out = list(q)
            q.clear()
            self.size = 0
            if self.overflow:
                ov = self.overflow
                out.extend(b for b, _ in ov)
                ov.clear()
                self.overflow_size = 0
        return out

    def __len__(self) -> int:
        return self.size + self.overflow_size

    def has_data(self) -> bool:
        return bool(self._q) or bool(self.overflow)

    def wait(self, timeout: float) -> None:
        """Park the consumer until a publish or `timeout`; safe against lost wake-ups
        because `parked` is set before the emptiness check and producers test it after
        appending."""
        self.parked = True
        if not self._q and not self.overflow:
            self._event.wait(timeout)
        self.parked = False
        self._event.clear()

    def load(self) -> float:
        """Fill ratio, for load-aware shuffle."""
        return (self.size + self.overflow_size) / self.capacity

    def wake(self) -> None:
        self._event.set()

    def snapshot(self) -> dict[str, Any]:
        return {
            "population": self.size,
            "capacity": self.capacity,
            "overflow": self.overflow_size,
            "overflow_high": self.overflow_high,
        }
