"""Channel modes: each mode's channel against a list model, and the checks of the
options that declare them."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish import TopologyError
from stormish.edges import make_policy
from stormish.runtime.channel import EdgeChannel, EdgeStats
from stormish.runtime.modes import LATCHED, BarrierChannel, EpochChannel, LatchedChannel, Latching
from stormish.runtime.queue import ReceiveQueue


def barrier(n: int, queue: int = 64) -> tuple[ReceiveQueue, BarrierChannel]:
    policy = make_policy("test", mode="barrier", capacity=n)
    assert policy is not None and policy.channel
    q = ReceiveQueue(queue)
    ch = BarrierChannel(policy, EdgeStats("src", "default", 1, policy), q.capacity)
    q.add_channel([(1, "default"), (2, "default")], ch)
    return q, ch


barrier_ops = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.integers(1, 2), st.integers(1, 9), st.booleans()),
        st.tuples(st.just("consume")),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 8), ops=barrier_ops, end=st.booleans())
def test_a_barrier_against_a_list_model(n, ops, end):
    """What waits is a list; a consume gives whole batches of n from its front (and, once
    the input has ended, the rest as one short batch); nothing else leaves, nothing is
    lost, and the queue's counts agree (the consumer never sees an unready tuple)."""
    q, ch = barrier(n)
    model: list[tuple[int, int]] = []  # (source task, row) in arrival order
    got: list[list[tuple[int, int]]] = []
    row = 0
    for op in [*ops, ("flush",), ("consume",)] if end else [*ops, ("consume",)]:
        if op[0] == "publish":
            _, src, k, tracked = op
            rows = [(row + i,) for i in range(k)]
            metas = [[(row + i, 1)] for i in range(k)] if tracked else None
            row += k
            if q.try_publish((src, "default", rows, metas), k):
                model += [(src, r[0]) for r in rows]
            else:  # refused only past its capacity (a sender then waits): nothing placed
                assert ch.size + k > ch.capacity
        elif op[0] == "flush":
            q.flush_held()
        else:
            while (out := q.consume()) is not None:
                for src, _, values, metas in out:
                    got.append([(src, v[0]) for v in values])
                    if metas is not None:
                        assert [m and m[0][0] for m in metas] == [
                            v[0] if m else None for v, m in zip(values, metas, strict=True)
                        ]
        assert q.held() == ch.size - ch.ready() and len(q) == ch.ready()
    rows_got = [r for b in got for r in b]
    if end:
        assert [len(b) for b in got] == [n] * (len(model) // n) + (
            [len(model) % n] if len(model) % n else []
        )
        assert ch.size == 0 and q.held() == 0
    else:
        assert all(len(b) == n for b in got)
        assert len(got) == len(model) // n and ch.size == len(model) % n
    # the first row names the batch's source task; each row's number is its order
    assert [r[1] for r in rows_got] == [r[1] for r in model[: len(rows_got)]]
    for b in got:
        assert b[0][0] == next(s for s, r in model if r == b[0][1])
    st_ = ch.stats
    assert st_.arrived == len(model) and st_.queued == ch.size


def test_a_barrier_takes_only_capacity_and_blocks_as_storms_edge():
    with pytest.raises(TopologyError, match="needs capacity=n"):
        make_policy("bolt 'b' on 'src'", mode="barrier")
    with pytest.raises(TopologyError, match="capacity only.*overflow='drop_oldest'"):
        make_policy("b", mode="barrier", capacity=3, overflow="drop_oldest")
    with pytest.raises(TopologyError, match="capacity only.*lifespan_ms"):
        make_policy("b", mode="barrier", capacity=3, lifespan_ms=10)
    with pytest.raises(TopologyError, match="mode='sometimes' is not a mode"):
        make_policy("b", mode="sometimes")
    p = make_policy("b", mode="barrier", capacity=3)
    assert p is not None and p.overflow == "block" and p.as_dict()["mode"] == "barrier"
    assert make_policy("b", mode="queue") is None or not make_policy("b", mode="queue").channel


def test_a_barrier_larger_than_the_queue_still_fills():
    """n above the task's queue: the channel's capacity is n, never less (a barrier that
    refused before it had n would wait for ever)."""
    q, ch = barrier(100, queue=16)
    for i in range(10):
        assert q.try_publish((1, "default", [(i,)] * 10, None), 10)
    assert not q.try_publish((1, "default", [(0,)], None), 1)
    (batch,) = q.consume()
    assert len(batch[2]) == 100


class _Sink:
    """A publish target that takes everything (a sender's view in the latching test)."""

    def __init__(self):
        self.got: list = []

    def try_publish(self, batch, n):
        self.got.append(batch)
        return True

    def load(self):
        return 0.0


latched_ops = st.lists(
    st.one_of(
        st.tuples(st.just("emit"), st.integers(1, 3), st.integers(1, 4)),
        st.tuples(st.just("restart")),
        st.tuples(st.just("reconnect"), st.integers(1, 3)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops=latched_ops)
def test_a_latched_edge_against_a_list_model(ops):
    """Three senders, one task. Model: the task's list of what it executed. An emit
    appends its rows; a reconnect (the link's HELLO) sends each sender's last row again,
    which the task takes only if it has had nothing from that sender since it started;
    a restart gives a fresh task (a new worker process) that then hears the reconnect."""
    policy = make_policy("test", mode="latched")
    senders = {s: Latching(_Sink(), 9, 1, s, "default") for s in (1, 2, 3)}

    def fresh():
        q = ReceiveQueue(64)
        q.add_channel([(s, "default") for s in senders], LatchedChannel(policy, stats, 64))
        return q

    stats = EdgeStats("src", "default", 9, policy)
    q = fresh()
    model: list = []
    heard: set[int] = set()
    last: dict[int, tuple] = {}
    row = 0

    def reconnect(only=None):
        for s, lt in senders.items():
            item = lt.again()
            if only is not None and s != only:
                continue
            if item is None:
                assert s not in last
                continue
            dest, src, stream, values, metas = item
            assert dest == 9 and metas == [LATCHED] and values == [last[s]]
            q.publish_remote((src, stream, values, metas), 1)
            if s not in heard:
                model.append(last[s])
                heard.add(s)

    executed: list = []
    for op in ops:
        if op[0] == "emit":
            _, s, k = op
            rows = [(s, row + i) for i in range(k)]
            row += k
            assert senders[s].try_publish((s, "default", rows, None), k)
            q.publish_remote((s, "default", rows, None), k)
            model.extend(rows)
            heard.add(s)
            last[s] = rows[-1]
        elif op[0] == "restart":
            while (out := q.consume()) is not None:
                executed += [v for b in out for v in b[2]]
            assert executed == model
            q, model, executed, heard = fresh(), [], [], set()
            reconnect()
        else:
            reconnect(op[1])
    while (out := q.consume()) is not None:
        for b in out:
            assert b[3] is None  # a latched tuple sent again carries no tree
            executed += b[2]
    assert executed == model


def test_latched_takes_no_other_option():
    p = make_policy("b", mode="latched")
    assert p is not None and p.channel and p.as_dict()["mode"] == "latched"
    with pytest.raises(TopologyError, match="mode='latched' takes no other option.*capacity"):
        make_policy("b", mode="latched", capacity=3, overflow="drop_oldest")


epoch_ops = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.integers(1, 2), st.integers(1, 6)),
        st.tuples(st.just("advance")),
        st.tuples(st.just("consume")),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ops=epoch_ops)
def test_an_epoch_edge_against_a_list_model(ops):
    """Model: a staged list and a visible one. A publish stages (or is refused when the
    channel is full, staged tuples included); an advance makes every staged tuple
    visible, in order; a consume takes only visible ones; a staged tuple never wakes
    the consumer, a visible one does."""
    policy = make_policy("test", mode="previous_tick")
    q = ReceiveQueue(16)
    ch = EpochChannel(policy, EdgeStats("src", "default", 1, policy), q.capacity)
    q.add_channel([(1, "default"), (2, "default")], ch)
    staged: list = []
    visible: list = []
    got: list = []
    accepted: list = []
    row = 0
    for op in ops:
        if op[0] == "publish":
            _, src, k = op
            rows = [(row + i,) for i in range(k)]
            row += k
            q.parked = True  # the consumer waits: only something it can take wakes it
            q._event.clear()
            if q.try_publish((src, "default", rows, None), k):
                staged += rows
                accepted += rows
            else:
                assert len(staged) + len(visible) + k > ch.capacity
            assert not q._event.is_set()
            q.parked = False
        elif op[0] == "advance":
            q._event.clear()
            released = q.advance_epoch()
            assert released == len(staged) and q._event.is_set() == bool(staged)
            visible += staged
            staged = []
        else:
            while (out := q.consume()) is not None:
                got += [v for b in out for v in b[2]]
            visible = []
        assert q.held() == len(staged) and len(q) == len(visible)
    assert got == accepted[: len(got)]  # in order, nothing twice, nothing lost
    assert len(got) + len(visible) + len(staged) == len(accepted)
    assert ch.stats.queued == len(staged) + len(visible)


multi_ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(1, 7)),
        st.tuples(st.just("read"), st.integers(0, 2), st.integers(1, 9)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(1, 12), ops=multi_ops)
def test_multi_readers_against_a_ring_with_a_cursor_each(capacity, ops):
    """The model: one log, of which a ring keeps the last `capacity`; each reader has a
    cursor and reads what is retained past it, once, in order. The edge: a drop_oldest
    channel of that capacity per reader task (what readers='multi' builds); they agree,
    and a reader that read nothing for a while misses exactly what the ring evicted."""
    policy = make_policy("test", overflow="drop_oldest", capacity=capacity, readers="multi")
    assert policy.readers == "multi" and policy.slow_reader_drop_risk
    chans = [EdgeChannel(policy, EdgeStats("s", "default", r, policy), capacity) for r in range(3)]
    log: list = []
    cursor = [0, 0, 0]
    read = [0, 0, 0]
    for op in ops:
        if op[0] == "write":
            rows = [(len(log) + i,) for i in range(op[1])]
            log += rows
            for ch in chans:
                ch.offer((1, "default", rows, None), len(rows))
        else:
            _, r, budget = op
            out: list = []
            chans[r].take(budget, out)
            got = [v for b in out for v in b[2]]
            start = max(cursor[r], len(log) - capacity)
            retained = log[start:]
            assert got == retained[: len(got)] and bool(got) == bool(retained)
            cursor[r] = start + len(got)
            read[r] += len(got)
    for r, ch in enumerate(chans):
        st_ = ch.stats
        assert ch.size == len(log) - max(cursor[r], len(log) - capacity)
        # the sum check, per reader: what it missed is what the ring evicted unread
        assert st_.arrived == len(log) == read[r] + st_.dropped + ch.size


def test_multi_readers_take_all_grouping_and_a_shared_window():
    from stormish import Bolt, Spout, Topology

    class S(Spout):
        outputs = ["x"]

        def next_tuple(self):
            self.finish()

    class B(Bolt):
        def execute(self, tup):
            pass

    t = Topology("t")
    t.set_spout("s", S())
    with pytest.raises(TopologyError, match="readers='multi'.*subscribe with all_grouping"):
        t.set_bolt("b", B(), parallelism=2).shuffle_grouping("s", readers="multi")
    with pytest.raises(TopologyError, match="readers='multi' with overflow='fail'"):
        make_policy("b", readers="multi", overflow="fail", capacity=3)
    with pytest.raises(TopologyError, match="readers='multi' with mode='latched'"):
        make_policy("b", readers="multi", mode="latched")
    with pytest.raises(TopologyError, match="readers='sometimes' is not"):
        make_policy("b", readers="sometimes")
    block = make_policy("b", readers="multi")
    assert block is not None and not block.channel and not block.slow_reader_drop_risk
    assert block.as_dict()["readers"] == "multi"


def test_config_gives_a_topology_files_edge_a_mode():
    """topology.edge.policies may set mode and readers too, checked as the grouping's."""
    from stormish import Bolt, ConfigError, Spout, Topology

    class S(Spout):
        outputs = ["x"]

        def next_tuple(self):
            self.finish()

    class B(Bolt):
        def execute(self, tup):
            pass

    t = Topology("t")
    t.set_spout("s", S())
    t.set_bolt("b", B(), parallelism=2).shuffle_grouping("s")
    key = "topology.edge.policies"
    got = t.edge_policies({key: {"b <- s": {"mode": "barrier", "capacity": 5}}})
    assert got[("b", "s", "default")].mode == "barrier"
    with pytest.raises(ConfigError, match="readers='multi' needs the edge's grouping to be all"):
        t.edge_policies({key: {"b <- s": {"readers": "multi"}}})


def test_room_reserved_at_emit_is_kept_for_its_sender():
    """A `fail` edge with room reserved by a local sender (its fan-out admitted at emit)
    places that sender's tuples whatever arrives meanwhile; others see only the room
    left, and a rejection at emit is counted on the edge with the reason."""
    policy = make_policy("test", overflow="fail", capacity=4)
    q = ReceiveQueue(64)
    ch = EdgeChannel(policy, EdgeStats("src", "default", 1, policy), 4)
    q.add_channel([(1, "default"), (2, "default"), (3, "default")], ch)
    assert q.reserve(ch, 1, 3)
    assert not q.reserve(ch, 2, 2)  # one left: a fan-out of two does not fit
    q.publish_remote((3, "default", [(30,), (31,)], None), 2)  # another worker's: 1 fits
    assert ch.stats.rejected == 1 and ch.size == 1
    assert q.try_publish((1, "default", [(10,), (11,), (12,)], None), 3)
    assert ch.size == 4 and ch.stats.rejected == 1 and ch.reserved == 0
    q.reject(ch, (2, "default", [(20,), (21,)], [[(7, 1)], [(7, 2)]]), 2, 3)
    st_ = ch.stats
    assert st_.rejected == 3 and st_.arrived == 2 + 3 + 2
    assert st_.last_what.startswith("fail: no room for 2 (4/4 held)")
    assert "3 deliveries to other edges withheld" in st_.last_what
    lost, _ = q.take_lost()
    assert ([[(7, 1)], [(7, 2)]], "overflow") in lost
    out = q.consume()
    assert [v for b in out for v in b[2]] == [(30,), (10,), (11,), (12,)]


def test_a_latch_is_kept_on_disk_when_it_changes_and_restored_by_the_next_incarnation(tmp_path):
    from stormish.runtime.modes import LatchWriter, latch_path

    path = latch_path(str(tmp_path), "top/ology", 3, 7, "rules")
    assert path.startswith(str(tmp_path)) and "top%2Fology" in path
    os.makedirs(os.path.dirname(path))
    writer = LatchWriter()
    lt = Latching(_Sink(), 7, 1, 3, "rules", path, writer)
    writer.latches = [lt]
    lt.try_publish((3, "rules", [("v1",), ("v2",)], None), 2)
    assert lt.dirty and not os.path.exists(path)  # the sender only marks it
    writer.flush()
    assert not lt.dirty and os.path.exists(path) and not os.path.exists(path + ".tmp")
    before = os.stat(path).st_mtime_ns
    lt.try_publish((3, "rules", [("v2",)], None), 1)
    writer.flush()  # unchanged: not written again
    assert os.stat(path).st_mtime_ns == before
    again = Latching(_Sink(), 7, 1, 3, "rules", path, writer)
    assert again.restore() and again.again() == (7, 3, "rules", [("v2",)], [LATCHED])
    first = Latching(_Sink(), 7, 1, 3, "rules", path, writer)
    first.forget()  # a first start: a former run's latch is not ours
    assert not os.path.exists(path) and not first.restore() and first.again() is None
