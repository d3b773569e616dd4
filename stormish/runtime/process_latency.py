"""Process latency: Storm's time from the start of a tuple's execute to its ack, without
a look at the clock per tuple.

Storm stamps a sampled tuple before `execute` and reads the stamp when the tuple is
acked. Stamping here would cost a clock read and an attribute per tuple on the hot
path, so nothing is done per tuple: the bolt executor reports each executed batch
(when its execute started and ended, how many tuples it took in) with its acked and
failed counters (`settled`), and this matches the counters' growth to the tuples in
arrival order, oldest first:

- a tuple settled during the execute of its own batch (a BasicBolt; a Bolt that acks
  in `execute`) counts the batch's mean execute time per tuple: the execute latency,
  as in Storm, where a BasicBolt's process latency is its execute latency;
- a tuple a Bolt keeps and settles later (on a later tuple, on a tick, when a window
  or a settle batch closes) counts from the start of its batch's execute to the end of
  the execute during which it was settled (or to the moment it was settled outside
  any execute: a settle batch's timer, the end of the run): late by at most the two
  batches' execute times;
- a tuple not settled within `within` seconds (the message timeout: its tree has
  failed at the spout by then) is no longer waited for, and at most `MAX_WAITING`
  batches wait.

Right, within those bounds, for a bolt that settles each tuple it is given once, in
arrival order. A bolt that settles out of order moves time between its tuples (the mean
stays about right, as the sum of the matched spans does not depend on the order); one
that never settles some tuples (a Bolt that forgets to ack) shifts later tuples'
figures until those expire.
Tuples run on concurrent lanes' threads (`topology.lanes.concurrency` > 1) are not
measured: their batches never pass through the executor's loop.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque

from .stats import EXECUTE_BUCKETS

MAX_WAITING = 4096  # batches with tuples a Bolt has not settled yet


class ProcessLatency:
    """Sans-I/O: times come in (the executor's clock), counts go out (`seconds` in all,
    `hist` per bucket of stats.EXECUTE_BUCKETS and one for longer)."""

    __slots__ = ("seconds", "hist", "seen", "waiting", "within")

    def __init__(self, within: float):
        self.seconds = 0.0
        self.hist = [0] * (len(EXECUTE_BUCKETS) + 1)
        self.seen = 0  # the executor's acked + failed when last told
        # [start of the batch's execute, its tuples not settled yet], oldest first
        self.waiting: deque[list] = deque()
        self.within = within

    @property
    def count(self) -> int:
        return sum(self.hist)

    def executed(self, t0: float, t1: float, n: int, settled: int, waits: bool) -> None:
        """A batch of `n` tuples executed from `t0` to `t1`; `settled`: acked + failed
        now; `waits`: the bolt settles these tuples itself and may keep them (a Bolt's),
        rather than the engine settling each as its execute returns."""
        d = settled - self.seen
        self.seen = settled
        per = (t1 - t0) / n if n else 0.0
        waiting = self.waiting
        if d == n and not waiting:  # each settled in its own execute: the common case
            self._add(per, n)
            return
        while waiting and t1 - waiting[0][0] > self.within:
            waiting.popleft()
        d = self._match(d, t1)
        if d:  # this batch's own (or ticks' and untracked tuples' acks): in its execute
            self._add(per, d)
        if waits and d < n:
            waiting.append([t0, n - d])
            if len(waiting) > MAX_WAITING:
                waiting.popleft()

    def outside(self, at: float, settled: int) -> None:
        """Tuples settled outside any execute, at `at` (a settle batch's timer, the end
        of the run); settlements with no tuple waiting are not measured."""
        d = settled - self.seen
        self.seen = settled
        if d:
            self._match(d, at)

    def _match(self, d: int, at: float) -> int:
        """`d` settlements against the oldest tuples waiting, each from its batch's start
        to `at`; returns what is left over."""
        waiting = self.waiting
        while d > 0 and waiting:
            entry = waiting[0]
            k = min(d, entry[1])
            self._add(at - entry[0], k)
            d -= k
            entry[1] -= k
            if not entry[1]:
                waiting.popleft()
        return d

    def _add(self, seconds: float, n: int) -> None:
        self.hist[bisect_right(EXECUTE_BUCKETS, seconds)] += n
        self.seconds += seconds * n
