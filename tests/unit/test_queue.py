"""ReceiveQueue: capacity in tuples, refusal, overflowQ order, consume order, wake-ups."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from stormish.runtime.queue import ReceiveQueue


def batch(src: int, seq: int, n: int = 1) -> tuple:
    return (src, "default", [(seq, i) for i in range(n)], None)


def poll_for(cond, timeout: float = 5.0) -> bool:
    """Poll a condition with a deadline (never a bare sleep as synchronisation)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    return True


# -- construction and capacity
@pytest.mark.parametrize("capacity", [0, -1])
def test_capacity_must_be_positive(capacity):
    with pytest.raises(ValueError, match="capacity"):
        ReceiveQueue(capacity)


def test_capacity_is_counted_in_tuples_not_batches():
    q = ReceiveQueue(10)
    assert q.try_publish(batch(1, 0, 4), 4)
    assert q.try_publish(batch(1, 1, 6), 6)
    assert q.size == 10
    assert len(q) == 10
    # one more tuple does not fit, even though only two batches are queued
    assert not q.try_publish(batch(1, 2, 1), 1)


def test_try_publish_refusal_places_nothing():
    q = ReceiveQueue(5)
    first = batch(1, 0, 3)
    assert q.try_publish(first, 3)
    before = (q.size, q.overflow_size, q.published, len(q))
    assert q.try_publish(batch(1, 1, 3), 3) is False
    assert (q.size, q.overflow_size, q.published, len(q)) == before
    assert q.consume() == [first]


def test_try_publish_exactly_to_capacity_is_accepted():
    q = ReceiveQueue(5)
    assert q.try_publish(batch(1, 0, 2), 2)
    assert q.try_publish(batch(1, 1, 3), 3)
    assert q.size == 5
    assert q.load() == 1.0


def test_oversize_batch_is_accepted_into_an_empty_queue_only():
    q = ReceiveQueue(4)
    big = batch(1, 0, 9)
    assert q.try_publish(big, 9)  # documented: a batch larger than capacity into empty
    assert q.size == 9
    assert not q.try_publish(batch(1, 1, 1), 1)
    assert q.consume() == [big]
    assert q.try_publish(batch(1, 2, 1), 1)
    assert not q.try_publish(batch(1, 3, 9), 9)  # not empty any more: refused


# -- publish_remote and the overflowQ
def test_publish_remote_goes_to_queue_while_it_fits():
    q = ReceiveQueue(6)
    assert q.publish_remote(batch(7, 0, 3), 3) == 0
    assert q.publish_remote(batch(7, 1, 3), 3) == 0
    assert q.size == 6
    assert q.overflow_size == 0
    assert not q.overflow


def test_publish_remote_overflows_when_full_and_reports_overflow_size():
    q = ReceiveQueue(4)
    assert q.publish_remote(batch(7, 0, 4), 4) == 0
    assert q.publish_remote(batch(7, 1, 2), 2) == 2
    assert q.publish_remote(batch(7, 2, 3), 3) == 5
    assert q.size == 4
    assert q.overflow_size == 5
    assert len(q) == 9


def test_publish_remote_goes_behind_a_non_empty_overflow_even_if_it_would_fit():
    q = ReceiveQueue(10, budget=100)
    a, b, c = batch(7, 0, 8), batch(7, 1, 5), batch(7, 2, 1)
    assert q.publish_remote(a, 8) == 0
    assert q.publish_remote(b, 5) == 5  # does not fit: overflow
    # c would fit in the queue (8 + 1 <= 10) but must queue behind b to keep order
    assert q.publish_remote(c, 1) == 6
    assert q.size == 8
    assert q.consume() == [a, b, c]


def test_publish_remote_oversize_into_empty_queue_goes_to_queue():
    q = ReceiveQueue(3)
    assert q.publish_remote(batch(7, 0, 10), 10) == 0
    assert q.size == 10
    assert q.overflow_size == 0


def test_publish_remote_never_refuses():
    q = ReceiveQueue(1, budget=100)
    for i in range(50):
        q.publish_remote(batch(7, i, 2), 2)
    assert len(q) == 100
    assert q.published == 100
    got = q.consume()
    assert got == [batch(7, i, 2) for i in range(50)]


def test_consume_returns_queue_then_overflow_and_empties_both():
    q = ReceiveQueue(4, budget=100)
    local = batch(1, 0, 3)
    remote1, remote2 = batch(9, 0, 2), batch(9, 1, 1)
    assert q.try_publish(local, 3)
    assert q.publish_remote(remote1, 2) == 2  # 3 + 2 > 4: overflow
    assert q.publish_remote(remote2, 1) == 3  # fits, but overflow is not empty
    assert q.consume() == [local, remote1, remote2]
    assert (q.size, q.overflow_size, len(q)) == (0, 0, 0)
    assert not q.has_data()
    assert q.consume() is None


def test_consume_on_empty_queue_is_none():
    q = ReceiveQueue(3)
    assert q.consume() is None
    assert not q.has_data()


def test_try_publish_after_consume_uses_freed_capacity():
    q = ReceiveQueue(4)
    assert q.try_publish(batch(1, 0, 4), 4)
    assert not q.try_publish(batch(1, 1, 2), 2)
    q.consume()
    assert q.try_publish(batch(1, 1, 2), 2)


def test_overflow_high_is_the_peak_and_survives_consume():
    q = ReceiveQueue(2, budget=100)
    q.publish_remote(batch(7, 0, 2), 2)
    q.publish_remote(batch(7, 1, 3), 3)
    q.publish_remote(batch(7, 2, 4), 4)
    assert q.overflow_high == 7
    q.consume()
    assert q.overflow_size == 0
    assert q.overflow_high == 7
    q.publish_remote(batch(7, 3, 2), 2)
    q.publish_remote(batch(7, 4, 1), 1)
    assert q.overflow_size == 1
    assert q.overflow_high == 7  # a lower peak does not lower the high-water mark


def test_load_is_the_fill_local_producers_see_and_one_with_an_overflow():
    q = ReceiveQueue(8, budget=100)
    assert q.load() == 0.0
    q.try_publish(batch(1, 0, 2), 2)
    assert q.load() == pytest.approx(0.25)
    q.publish_remote(batch(7, 0, 6), 6)
    assert q.load() == pytest.approx(1.0)
    q.publish_remote(batch(7, 1, 4), 4)  # overflow: local producers are refused
    assert q.load() == 1.0
    q.consume()
    assert q.load() == 0.0


def test_publish_force_ignores_capacity():
    q = ReceiveQueue(2, budget=100)
    q.try_publish(batch(1, 0, 2), 2)
    tick = ("tick", "__tick", [("tick",)], None)
    q.publish_force(tick, 1)
    assert q.size == 3
    assert q.consume() == [batch(1, 0, 2), tick]


def test_snapshot_reports_the_figures():
    q = ReceiveQueue(3)
    q.publish_remote(batch(7, 0, 3), 3)
    q.publish_remote(batch(7, 1, 2), 2)
    assert q.snapshot() == {
        "population": 3,
        "capacity": 3,
        "overflow": 2,
        "overflow_high": 2,
    }


# -- the consume budget: a take is bounded, so the capacity bounds
# what a tuple waits behind
def test_default_budget_is_an_eighth_of_the_capacity():
    assert ReceiveQueue(32768).budget == 4096
    assert ReceiveQueue(1024).budget == 128
    assert ReceiveQueue(5).budget == 1  # at least one tuple (and a take: one batch)
    assert ReceiveQueue(64, budget=0).budget == 1


def test_consume_takes_at_most_the_budget_in_whole_batches():
    q = ReceiveQueue(32768)  # the default queue, full of 512-tuple batches
    batches = [batch(1, i, 512) for i in range(64)]
    for b in batches:
        assert q.try_publish(b, 512)
    assert q.size == 32768
    takes = []
    while (out := q.consume()) is not None:
        takes.append(out)
        assert sum(len(b[2]) for b in out) == 4096  # not the whole queue at once
    assert [b for t in takes for b in t] == batches
    assert len(takes) == 8
    assert q.taken == 32768 and q.size == 0


def test_a_batch_larger_than_the_budget_is_taken_whole():
    q = ReceiveQueue(100, budget=4)
    big, small = batch(1, 0, 9), batch(1, 1, 1)
    assert q.try_publish(big, 9)
    assert q.try_publish(small, 1)
    assert q.consume() == [big]
    assert q.consume() == [small]
    assert q.taken == 10


def test_a_take_reaches_the_overflow_only_once_the_queue_part_is_empty():
    q = ReceiveQueue(4, budget=3)
    a, b, c = batch(7, 0, 2), batch(7, 1, 2), batch(7, 2, 2)
    q.publish_remote(a, 2)
    q.publish_remote(b, 2)
    q.publish_remote(c, 2)  # overflow
    assert q.consume() == [a, b]  # the budget is reached inside the queue part
    assert q.overflow_size == 2
    assert q.consume() == [c]
    assert q.consume() is None


def test_local_publish_is_refused_while_the_overflow_waits():
    """With a bounded take, local producers refilling the queue would starve the overflow
    (remote upstreams, stopped by backpressure) for ever: they wait their turn."""
    q = ReceiveQueue(4, budget=2)
    q.publish_remote(batch(7, 0, 4), 4)
    q.publish_remote(batch(7, 1, 1), 1)  # overflow
    assert q.consume() == [batch(7, 0, 4)]
    assert q.size == 0 and q.overflow_size == 1
    assert not q.try_publish(batch(1, 0, 1), 1)  # room, but the overflow is first
    assert q.consume() == [batch(7, 1, 1)]
    assert q.try_publish(batch(1, 0, 1), 1)


@settings(max_examples=80, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=60),
    budget=st.integers(1, 100),
)
def test_takes_are_bounded_ordered_and_lose_nothing(sizes, budget):
    q = ReceiveQueue(10_000, budget=budget)
    batches = [batch(1, i, n) for i, n in enumerate(sizes)]
    for b in batches:
        assert q.try_publish(b, len(b[2]))
    got = []
    while (out := q.consume()) is not None:
        n = [len(b[2]) for b in out]
        assert sum(n[:-1]) < budget  # one batch past the budget at most
        got += out
    assert got == batches
    assert q.taken == sum(sizes)


# -- property: per-producer FIFO and the capacity bound
LOCAL_PRODUCERS = (1, 2)
REMOTE_PRODUCERS = (8, 9)


class QueueMachine(RuleBasedStateMachine):
    """Local producers use try_publish (refused batches stay with the producer, which retries
    the same batch before any later one, as a pendingEmitQ does); remote producers use
    publish_remote. The consumer takes at most the budget (whole batches, at least one),
    queue before overflow. Delivered batches must come out in each producer's publish
    order; the queue part never holds more than capacity tuples unless it holds a single
    oversize batch; a take never holds more than the budget plus one batch; and while the
    overflow waits, local producers are refused (else they could starve it)."""

    def __init__(self):
        super().__init__()
        self.capacity = 5
        self.budget = 3
        self.q = ReceiveQueue(self.capacity, budget=self.budget)
        self.next_seq = {p: 0 for p in LOCAL_PRODUCERS + REMOTE_PRODUCERS}
        self.parked: dict[int, tuple | None] = {p: None for p in LOCAL_PRODUCERS}
        self.sent: dict[int, list[int]] = {p: [] for p in self.next_seq}
        self.delivered: dict[int, list[int]] = {p: [] for p in self.next_seq}
        self.queued: list[tuple] = []  # the model: batches in the queue part ...
        self.overflowed: list[tuple] = []  # ... and in the overflow, in order
        self.taken = 0

    def _new(self, p: int, n: int) -> tuple:
        seq = self.next_seq[p]
        self.next_seq[p] += 1
        return batch(p, seq, n)

    @rule(p=st.sampled_from(LOCAL_PRODUCERS), n=st.integers(1, 7))
    def local_publish(self, p, n):
        b = self.parked[p] or self._new(p, n)
        size, ov = self.q.size, self.q.overflow_size
        m = len(b[2])
        fits = (size + m <= self.capacity or size == 0) and ov == 0
        ok = self.q.try_publish(b, m)
        assert ok == fits
        if ok:
            self.parked[p] = None
            self.sent[p].append(b[2][0][0])
            self.queued.append(b)
            assert self.q.size == size + m
        else:
            self.parked[p] = b
            assert (self.q.size, self.q.overflow_size) == (size, ov)

    @rule(p=st.sampled_from(REMOTE_PRODUCERS), n=st.integers(1, 7))
    def remote_publish(self, p, n):
        b = self._new(p, n)
        size, ov = self.q.size, self.q.overflow_size
        to_queue = ov == 0 and (size + n <= self.capacity or size == 0)
        got = self.q.publish_remote(b, n)
        self.sent[p].append(b[2][0][0])
        if to_queue:
            assert got == 0
            self.queued.append(b)
        else:
            assert got == ov + n
            self.overflowed.append(b)
        assert got == self.q.overflow_size

    @rule()
    def consume(self):
        expected_empty = not self.queued and not self.overflowed
        out = self.q.consume()
        if expected_empty:
            assert out is None
            return
        assert out, "a consume with data takes at least one batch"
        sizes = [len(values) for _src, _stream, values, _metas in out]
        assert sum(sizes[:-1]) < self.budget  # stops once the budget is reached
        for b in out:  # the queue part first, then the overflow, each in order
            model = self.queued if self.queued else self.overflowed
            assert b == model.pop(0)
        for src, _stream, values, _metas in out:
            self.delivered[src].append(values[0][0])
        self.taken += sum(sizes)

    @invariant()
    def fifo_per_producer(self):
        for p, got in self.delivered.items():
            assert got == self.sent[p][: len(got)]

    @invariant()
    def capacity_bound(self):
        assert self.q.size <= self.capacity or len(self.queued) == 1

    @invariant()
    def figures_match_the_model(self):
        assert self.q.size == sum(len(b[2]) for b in self.queued)
        assert self.q.overflow_size == sum(len(b[2]) for b in self.overflowed)
        assert self.q.taken == self.taken
        assert len(self.q) == self.q.size + self.q.overflow_size
        q = self.q
        want = 1.0 if q.overflow_size or q.refused else min(1.0, q.size / q.local_limit)
        assert q.load() == pytest.approx(want)

    def teardown(self):
        while (out := self.q.consume()) is not None:
            for src, _stream, values, _metas in out:
                self.delivered[src].append(values[0][0])
        for p in self.sent:
            assert self.delivered[p] == self.sent[p]


QueueMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestQueueMachine = QueueMachine.TestCase


# -- wait() and wake-ups
def _park_consumer(q: ReceiveQueue, timeout: float):
    started = threading.Event()
    done = threading.Event()
    elapsed: list[float] = []

    def run():
        started.set()
        t0 = time.monotonic()
        q.wait(timeout)
        elapsed.append(time.monotonic() - t0)
        done.set()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    assert started.wait(5.0)
    return th, done, elapsed


@pytest.mark.parametrize("how", ["try_publish", "publish_remote", "publish_force"])
def test_wait_returns_promptly_when_another_thread_publishes(how):
    q = ReceiveQueue(8)
    th, done, elapsed = _park_consumer(q, timeout=30.0)
    assert poll_for(lambda: q.parked), "consumer never parked"
    assert not done.is_set()
    getattr(q, how)(batch(1, 0, 1), 1)
    assert done.wait(5.0), "wait() did not return after a publish"
    th.join(5.0)
    assert not th.is_alive()
    assert elapsed[0] < 5.0
    assert q.parked is False
    assert q.consume() == [batch(1, 0, 1)]


def test_wake_ends_a_wait():
    q = ReceiveQueue(8)
    th, done, _ = _park_consumer(q, timeout=30.0)
    assert poll_for(lambda: q.parked)
    q.wake()
    assert done.wait(5.0)
    th.join(5.0)


def test_wait_does_not_block_when_data_is_already_queued():
    q = ReceiveQueue(8)
    q.try_publish(batch(1, 0, 1), 1)
    t0 = time.monotonic()
    q.wait(30.0)
    assert time.monotonic() - t0 < 5.0
    assert q.parked is False


def test_wait_does_not_block_when_only_overflow_has_data():
    q = ReceiveQueue(1)
    q.publish_remote(batch(7, 0, 1), 1)
    q.publish_remote(batch(7, 1, 1), 1)
    q.consume()
    q.publish_remote(batch(7, 2, 1), 1)
    q.publish_remote(batch(7, 3, 1), 1)
    assert q.overflow
    t0 = time.monotonic()
    q.wait(30.0)
    assert time.monotonic() - t0 < 5.0


def test_wait_times_out_when_nothing_arrives():
    q = ReceiveQueue(8)
    t0 = time.monotonic()
    q.wait(0.02)
    elapsed = time.monotonic() - t0
    assert 0.015 <= elapsed < 5.0
    assert q.parked is False


def test_a_take_that_empties_the_overflow_tells_the_link_at_once():
    """The link's backpressure check runs when a task's overflowQ drains, not a whole
    timer period later (the remote upstreams wait for that all-clear)."""
    q = ReceiveQueue(4, budget=2)  # a take: one batch of the overflow below
    calls = []
    q.on_drain = lambda: calls.append(len(q.overflow))
    q.publish_remote((0, "s", [1, 2, 3, 4], None), 4)
    assert q.publish_remote((0, "s", [5, 6], None), 2) == 2  # to the overflowQ
    assert q.publish_remote((0, "s", [7, 8], None), 2) == 4
    q.consume()  # the queue's batch only (a take is whole batches, at least one)
    assert calls == []
    q.consume()  # the first overflow batch: one left
    assert calls == []
    q.consume()  # the last: drained
    assert calls == [0]
    q.publish_remote((0, "s", [9], None), 1)
    q.consume()
    assert calls == [0]  # a take with no overflow says nothing


def test_local_producers_leave_the_remote_reserve_free():
    """A task fed from other workers keeps headroom for their batches: local producers
    stop at capacity - reserve (and park), remote batches still fit up to the capacity
    instead of overflowing and stopping the other worker."""
    q = ReceiveQueue(8, remote_reserve=2)
    assert q.try_publish((0, "s", [1, 2, 3, 4], None), 4)
    assert q.try_publish((0, "s", [5, 6], None), 2)
    assert not q.try_publish((0, "s", [7], None), 1)  # 6 + 1 > 8 - 2
    assert q.publish_remote((9, "s", [7, 8], None), 2) == 0  # fits: no overflow
    assert len(q.overflow) == 0 and q.size == 8


def test_packed_rows_from_another_worker_are_rows_again_when_consumed():
    from stormish.transport.frames import pack

    q = ReceiveQueue(100, budget=100)
    rows = [(i, "x") for i in range(20)]
    packed = pack(rows)
    assert packed is not None
    q.packed = True  # what the link sets when it places one
    assert q.publish_remote((1, "default", packed, None), 20) == 0
    q.publish_remote((2, "default", [(0, "y")], None), 1)
    assert len(q) == 21  # counted as tuples while packed
    assert q.consume() == [(1, "default", rows, None), (2, "default", [(0, "y")], None)]
    # through the overflowQ as well, in order
    q2 = ReceiveQueue(10, budget=10)
    q2.packed = True
    q2.publish_remote((1, "default", [(0,)] * 10, None), 10)
    assert q2.publish_remote((1, "default", packed, None), 20) == 20
    assert q2.consume() == [(1, "default", [(0,)] * 10, None)]
    assert q2.consume() == [(1, "default", rows, None)]
