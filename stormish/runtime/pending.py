"""The pendingEmitQ: what an executor emitted but could not publish yet.

Emit never blocks (Storm 2.0). A batch its target refuses (a full receive queue, a remote
task under backpressure, a full transfer queue) is parked here, and so is every later
batch of this executor until the queue drains, which keeps the emit order. `flush`
publishes in order and stops at the first refusal.
"""

from __future__ import annotations

from collections import deque

from .seams import Batch, PublishTarget


class PendingEmits:
    """`queue` is the deque itself: executors test its truth on their hot loops (a
    Python `__len__` there would cost a call per check)."""

    __slots__ = ("queue", "count", "transferred")

    def __init__(self) -> None:
        self.queue: deque[tuple[PublishTarget, Batch, int]] = deque()
        self.count = 0  # tuples parked
        self.transferred = 0  # tuples published, ever

    def publish(self, target: PublishTarget, batch: Batch, n: int) -> None:
        if self.queue or not target.try_publish(batch, n):
            self.queue.append((target, batch, n))
            self.count += n
        else:
            self.transferred += n

    def flush(self) -> bool:
        """Publish parked batches in order; stop at the first refusal. True when empty."""
        queue = self.queue
        while queue:
            target, batch, n = queue[0]
            if not target.try_publish(batch, n):
                return False
            queue.popleft()
            self.count -= n
            self.transferred += n
        return True
