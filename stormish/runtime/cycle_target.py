"""A local task on the same cycle of the topology graph as the sending task, as that
task's outbox target inside one worker (transport/remote.py `CycleTarget` is the same
rule between workers: read its docstring first).

Why it exists: a cycle that multiplies its tuples (fan-out on the cycle: ping emits four
for each it executes, pong one) deadlocked inside one worker too. The tuples already in
the cycle outgrow every executor's drain budget (`topology.cycle.drain.budget`); the
spouts' pause cannot take them out. Then ping's pendingEmitQ holds its whole budget,
parked on pong's full queue, pong's holds its whole budget, parked on ping's, and
neither consumes: stalled for good (20,000 items, fan-out 4 over 4 rounds, default
budget and buffers, acking off).

So once the sender's pendingEmitQ holds its whole budget, a full queue no longer
refuses it: the batch goes to the task's overflowQ (`ReceiveQueue.publish_remote`,
which never refuses and keeps arrival order behind what is queued). The sender's
pendingEmitQ empties, it consumes again, and its own queue drains, which frees the
other side. Below its budget Storm's rule holds (refused: park). What the cycle holds
then sits in the receivers' overflowQs: bounded by what the spouts injected times the
cycle's fan-out, which `topology.max.spout.pending` bounds. The overflow limit is
about messages from other workers and does not apply here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .pending import PendingEmits
    from .queue import ReceiveQueue
    from .seams import Batch


class LocalCycleTarget:
    __slots__ = ("queue", "parked", "budget", "past_flag")

    def __init__(self, queue: ReceiveQueue, parked: PendingEmits, budget: int):
        self.queue = queue
        self.parked = parked  # the sender's pendingEmitQ: its count
        self.budget = budget
        self.past_flag = 0  # tuples placed past a full queue

    def try_publish(self, batch: Batch, n: int) -> bool:
        q = self.queue
        if q.try_publish(batch, n):
            return True
        if self.parked.count < self.budget:  # room in the budget: Storm's rule
            return False
        q.publish_remote(batch, n)
        self.past_flag += n
        return True

    def load(self) -> float:
        return self.queue.load()

    @property
    def takes_roots(self) -> bool:
        return self.queue.takes_roots
