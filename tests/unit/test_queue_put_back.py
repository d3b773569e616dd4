"""ReceiveQueue.put_back: what a bolt took and did not execute (its emits parked after
some row) goes back to the head of its queue, so that every upstream's tuples are still
executed once each, in the order they were emitted, whatever part of the queue (queue,
overflowQ, an edge's channel) they were taken from."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from stormish.runtime.execution.base import rows_part
from stormish.runtime.queue import ReceiveQueue
from stormish.tuple import StampedRows


def batch(src: int, seq: int, n: int = 1) -> tuple:
    return (src, "default", [(seq, i) for i in range(n)], None)


def test_the_rest_goes_ahead_of_the_overflow_and_of_later_publishes():
    q = ReceiveQueue(4, budget=4)
    a, b = batch(1, 0, 3), batch(7, 0, 1)
    assert q.try_publish(a, 3)
    q.publish_remote(b, 1)
    q.publish_remote(batch(7, 1, 2), 2)  # overflow: no room
    assert q.consume() == [a, b]  # the budget is reached in the queue part
    assert q.taken == 4
    rest = [rows_part(a, 1), b]  # a's first row ran, its emits parked
    q.put_back(rest)
    assert (q.size, q.overflow_size, q.taken) == (3, 2, 1)
    assert q.load() == 1.0  # the overflow waits: producers see a full queue
    assert q.consume() == rest + [batch(7, 1, 2)]
    assert q.consume() is None
    assert q.taken == 6


def test_a_remainder_keeps_its_stamp_and_metas():
    rows = StampedRows([(1,), (2,), (3,)], 12.5)
    part = rows_part((3, "s", rows, ["m1", "m2", "m3"]), 1)
    assert part == (3, "s", [(2,), (3,)], ["m2", "m3"])
    assert part[2].__class__ is StampedRows and part[2].born == 12.5


PRODUCERS = (1, 2, 8, 9)  # 1, 2 local (try_publish); 8, 9 remote (publish_remote)


class PutBackMachine(RuleBasedStateMachine):
    """Producers publish numbered rows; the consumer takes, executes some rows of the
    take (at least one, as a bolt does: it stops after the row whose emits parked) and
    puts the rest back. Executed rows must be each producer's rows, in order, once each;
    the queue's figures must add up to what it holds; nothing is lost at the end."""

    def __init__(self):
        super().__init__()
        self.q = ReceiveQueue(6, budget=4)
        self.next_seq = dict.fromkeys(PRODUCERS, 0)
        self.waiting: dict[int, tuple | None] = dict.fromkeys(PRODUCERS, None)
        self.sent: dict[int, list] = {p: [] for p in PRODUCERS}
        self.executed: dict[int, list] = {p: [] for p in PRODUCERS}
        self.held = 0  # rows in the queue (queue part and overflow)
        self.ran = 0  # rows executed

    @rule(p=st.sampled_from(PRODUCERS), n=st.integers(1, 5))
    def publish(self, p, n):
        b = self.waiting[p]
        if b is None:
            b = batch(p, self.next_seq[p], n)
            self.next_seq[p] += 1
        m = len(b[2])
        if p < 8:
            if not self.q.try_publish(b, m):
                self.waiting[p] = b  # a pendingEmitQ: the same batch first, later
                return
            self.waiting[p] = None
        else:
            self.q.publish_remote(b, m)
        self.sent[p] += [(p, r) for r in b[2]]
        self.held += m

    @precondition(lambda self: self.held > 0)
    @rule(data=st.data())
    def take_and_stop(self, data):
        out = self.q.consume()
        assert out, "rows are held: a take has some"
        total = sum(len(b[2]) for b in out)
        self.held -= total
        k = data.draw(st.integers(1, total), label="rows executed")
        done = 0
        for i, b in enumerate(out):
            n = len(b[2])
            if done + n >= k:
                left = k - done
                for r in b[2][:left]:
                    self.executed[b[0]].append((b[0], r))
                rest = out[i + 1 :]
                if left < n:
                    rest.insert(0, rows_part(b, left))
                if rest:
                    self.q.put_back(rest)
                self.held += total - k
                break
            for r in b[2]:
                self.executed[b[0]].append((b[0], r))
            done += n
        self.ran += k

    @invariant()
    def once_each_in_order(self):
        for p, got in self.executed.items():
            assert got == self.sent[p][: len(got)]

    @invariant()
    def figures_add_up(self):
        q = self.q
        assert len(q) == q.size + q.overflow_size == self.held
        assert q.taken == self.ran

    def teardown(self):
        while (out := self.q.consume()) is not None:
            for b in out:
                self.executed[b[0]] += [(b[0], r) for r in b[2]]
        for p in PRODUCERS:
            assert self.executed[p] == self.sent[p]


PutBackMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)
TestPutBackMachine = PutBackMachine.TestCase
