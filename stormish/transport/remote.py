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
from typing import Any

from .frames import Batch, pack, pack_metas
from .wakeup import Wakeup


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

    def has_room(self) -> bool:
        """Whether a put would be taken now; a refusal is counted when not (the one rule
        for both: `RemoteTarget` asks before it packs a batch, `try_put` under the lock)."""
        if len(self._q) < self.capacity:
            return True
        self.refused += 1
        return False

    def try_put(self, worker: int, item: tuple, n: int) -> bool:
        with self._lock:
            if not self.has_room():
                return False
            self._q.append((worker, item, n))
            self.offered += n
        self._event.set()
        return True

    def put_force(self, worker: int, item: tuple, n: int) -> None:
        """Never refused: a latched tuple sent again to a worker that (re)connected (one
        per latched edge and task, sent by the link's own thread, which must not wait)."""
        with self._lock:
            self._q.append((worker, item, n))
        self._event.set()

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

    def wake(self) -> None:
        """End the consumer's wait (new peers, control messages, stopping)."""
        self._event.set()

    def share_wakeup(self, wakeup: Wakeup) -> None:
        """Signal `wakeup` instead: a scheduler serving the link waits for it and its
        executors' queues at once (as `ReceiveQueue.share_wakeup`)."""
        self._event = wakeup

    def own_wakeup(self) -> None:
        """Back to a wake-up of its own (the link's transfer thread takes over again)."""
        self._event = Wakeup()

    def __len__(self) -> int:
        return len(self._q)


class RemoteTarget:
    """A task on another worker, as a collector's outbox target.

    It refuses while the task is flagged (its worker's status), while its worker is
    `held` (our outbox for that worker is full: it cannot take more) or when the transfer
    queue is full. A worker that is `down` (its connection lost) does not refuse: what is
    sent to it is dropped and counted (its trees replay), so that an executor's traffic to
    healthy workers goes on; its load is 1.0 so load-aware shuffles steer away from it.
    `held` and `down` are the transfer thread's sets (peers.Peers), read here only.
    """

    __slots__ = ("task", "worker", "transfer", "flagged", "held", "down")

    def __init__(
        self,
        task: int,
        worker: int,
        transfer: TransferQueue,
        flagged: set[int],
        held: set[int] | None = None,
        down: set[int] | None = None,
    ):
        self.task = task
        self.worker = worker
        self.transfer = transfer
        self.flagged = flagged  # RemoteBackpressure.flagged: shared, updated by the receiver
        self.held = held if held is not None else set()
        self.down = down if down is not None else set()

    def try_publish(self, batch: Batch, n: int) -> bool:
        if self.task in self.flagged or self.worker in self.held:
            return False
        return self._put(batch, n)

    def _put(self, batch: Batch, n: int) -> bool:
        """Into the transfer queue, whatever the task's flag (refused only when full)."""
        src, stream, values, metas = batch
        transfer = self.transfer
        if not transfer.has_room():  # refused below: not worth packing
            return False
        packed = pack(values)  # pickled now, while the rows are in this CPU's caches
        if packed is None:
            return transfer.try_put(self.worker, (self.task, src, stream, values, metas), n)
        if metas is not None:
            metas = pack_metas(metas)  # tree ids typed too, beside the packed rows
        return transfer.try_put(self.worker, (self.task, src, stream, packed, metas), n)

    def load(self) -> float:
        w = self.worker
        return 1.0 if self.task in self.flagged or w in self.held or w in self.down else 0.0


class CycleTarget(RemoteTarget):
    """A task of another worker on the same cycle of the topology graph as the sending
    task, as that task's outbox target (one per sender and destination).

    Why it exists: a cycle ping -> pong -> ping across two workers deadlocked for good.
    With some fan-out on the cycle, the tuples inside it outgrow both executors' drain
    budgets (no spout pause can prevent that: the tuples are already in the cycle and
    multiply). Then ping's pendingEmitQ holds its whole budget, parked on pong's flag;
    pong's holds its whole budget, parked on ping's flag; neither consumes (the budget is
    spent), so neither overflowQ drains and neither flag ever clears: the wait cycle
    closes across the workers, and pausing spouts frees nothing.

    So once the sender's pendingEmitQ holds its whole `topology.cycle.drain.budget`,
    the task's backpressure flag no longer refuses: the batch goes to the transfer queue
    and lands in the task's overflowQ, which never blocks the receiving worker. The
    sender's pendingEmitQ shrinks below its budget, it consumes again, its own overflowQ
    drains and its flag clears, which frees the other side. The transfer queue and a
    peer's full outbox (`held`) still refuse: they clear by themselves (the transfer
    thread and the peer's receive thread never wait on an executor). Emit order holds:
    the pendingEmitQ flushes in order and the overflowQ keeps arrival order.

    What a cycle holds then sits in the receivers' overflowQs instead of the senders'
    pendingEmitQs: bounded by what the spouts injected times the cycle's fan-out, which
    `topology.max.spout.pending` bounds; `topology.executor.overflow.limit` still drops
    past its limit (DESIGN 4). Edges that are not within a cycle never get one: their
    backpressure stays Storm's. `past_flag` counts the tuples sent past the flag.
    """

    __slots__ = ("parked", "budget", "past_flag")

    def __init__(self, target: RemoteTarget, parked: Any, budget: int):
        super().__init__(
            target.task, target.worker, target.transfer, target.flagged, target.held, target.down
        )
        self.parked = parked  # the sender's PendingEmits (runtime/pending.py): its count
        self.budget = budget
        self.past_flag = 0

    def try_publish(self, batch: Batch, n: int) -> bool:
        if self.worker in self.held:
            return False
        if self.task in self.flagged:
            if self.parked.count < self.budget:  # room in the budget: Storm's rule
                return False
            if not self._put(batch, n):
                return False
            self.past_flag += n
            return True
        return self._put(batch, n)
