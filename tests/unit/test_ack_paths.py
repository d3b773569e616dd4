"""Every inlined emit and ack path against `AckFolder`, the one definition of the rules
(issue 27 section 3): a spout's new tree (its root, so its acker, its first edges and
the init's XOR, or none for an announced tree) on the bound emit and the method; a
BasicBolt's anchored emit (the child's edge, the anchor's ack value) on the bound emit
and the method; and the per-tuple executor's folded acks. Each runs beside a twin
collector seeded alike that calls the folder."""

from __future__ import annotations

import random
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish import BasicBolt, Spout, Topology
from stormish.runtime.ack_folder import announcement
from stormish.runtime.acker import AckerBolt
from stormish.runtime.emitters import make_collector
from stormish.runtime.execution import per_tuple
from stormish.runtime.execution.accounting import Accounts
from stormish.runtime.execution.per_tuple import PerTuple
from stormish.runtime.plan import ACK_INIT, ACKER, FIRST_DONE, build_plan
from stormish.runtime.queue import ReceiveQueue
from stormish.runtime.task_counts import TaskCounts
from stormish.tuple import Source, TrackedTuple, Tuple


class Src(Spout):
    outputs = ["x"]

    def next_tuple(self):
        pass


class Two(Spout):
    outputs = {"default": ["x"], "other": ["x"]}

    def next_tuple(self):
        pass


class Mid(BasicBolt):
    outputs = ["x"]

    def __init__(self):
        self.fanout: list[int] = []
        self.seen: list[TrackedTuple] = []

    def execute(self, tup):
        self.seen.append(tup)
        for k in range(self.fanout[len(self.seen) - 1]):
            self.emit((tup.values[0] * 10 + k,))


def make(ackers: int, local: list[bool], mid_tasks: int, grouping: str, two: bool):
    t = Topology("paths", config={"topology.acker.executors": ackers})
    t.set_spout("src", Two() if two else Src())
    d = t.set_bolt("mid", Mid(), parallelism=mid_tasks)
    d.shuffle_grouping("src")
    if two:
        d.shuffle_grouping("src", "other")
    e = t.set_bolt("end", Mid(), parallelism=2)
    if grouping == "fields":
        e.fields_grouping("mid", ["x"])
    else:
        e.shuffle_grouping("mid")
    plan = build_plan(t, t.validate(), AckerBolt())
    acker_tasks = plan.tasks[ACKER]
    local_tasks = {task for task in plan.task_component if task not in acker_tasks} | {
        task for task, here in zip(acker_tasks, local, strict=False) if here
    }

    def pair(component: str, seed: int, basic: bool = False):
        """The collector, and its twin on queues of its own, both seeded `seed`."""
        task = plan.tasks[component][0]
        out = []
        for _ in range(2):
            queues = {k: ReceiveQueue(1 << 20) for k in plan.task_component}
            col = make_collector(
                plan, task, queues, local_tasks, 1 << 20, random.Random(seed), basic
            )
            out.append((col, queues))
        return out

    return plan, pair


@contextmanager
def loop(compiled: bool):
    """PerTuple's BasicBolt loop compiled (fastack.run_basic, where built) or Python."""
    if compiled and per_tuple.run_basic is None:
        pytest.skip("stormish._acking is not built here")
    saved = per_tuple.run_basic
    if not compiled:
        per_tuple.run_basic = None
    try:
        yield
    finally:
        per_tuple.run_basic = saved


def drained(queues) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for task, q in queues.items():
        while (batches := q.consume()) is not None:
            for _src, stream, values, metas in batches:
                for i, v in enumerate(values):
                    m = metas[i] if metas is not None else None
                    out.setdefault(task, []).append((stream, tuple(v), m))
    return out


@settings(max_examples=60, deadline=None)
@given(
    ackers=st.integers(1, 4),
    local=st.lists(st.booleans(), min_size=4, max_size=4),
    mid_tasks=st.integers(1, 3),
    two=st.booleans(),
    bound=st.booleans(),
    emits=st.lists(st.sampled_from(["default", "other"]), min_size=1, max_size=12),
    seed=st.integers(0, 2**32),
)
def test_a_spout_tree_starts_as_the_folder_starts_it(
    ackers, local, mid_tasks, two, bound, emits, seed
):
    """Same root (so the same acker: new_root's local rule, init's routing) and the
    same init XOR as AckFolder.new_root + AckFolder.init with the same draws."""
    plan, pair = make(ackers, local, mid_tasks, "shuffle", two)
    (col, queues), (ref, ref_queues) = pair("src", seed)
    roots: list[int] = []
    col.reliable = lambda root, *_rest: roots.append(root)
    emit = col.bound_emit() if bound else col.emit
    for i, stream in enumerate(emits):
        stream = stream if two else "default"
        emit((i,), stream, msg_id=i)
        got = drained_after(col, queues)
        deliveries = [m for msgs in got.values() for s, _v, m in msgs if s == stream]
        root = ref.acks.new_root()
        assert roots[-1] == root
        # the first deliveries' edges as the folder makes them (one: the announcement)
        edges, xor = ref.acks.first_edges(len(deliveries))
        assert deliveries == [((root, e),) for e in edges]
        if xor is not None:
            ref.acks.init(root, xor)
        want = drained_after(ref, ref_queues)
        inits = {t: [v for s, v, _m in msgs if s == ACK_INIT] for t, msgs in got.items()}
        want_inits = {t: [v for s, v, _m in msgs if s == ACK_INIT] for t, msgs in want.items()}
        assert {t: v for t, v in inits.items() if v} == {t: v for t, v in want_inits.items() if v}


def drained_after(col, queues):
    col.flush_all()
    return drained(queues)


@settings(max_examples=60, deadline=None)
@given(
    ackers=st.integers(1, 3),
    grouping=st.sampled_from(["fields", "shuffle"]),
    bound=st.booleans(),
    rows=st.lists(
        st.tuples(st.integers(0, 2**62), st.integers(0, 2**62), st.integers(0, 3)),
        min_size=1,
        max_size=10,
    ),
    seed=st.integers(0, 2**32),
)
def test_a_basic_bolts_anchored_emit_is_the_folders_anchor(ackers, grouping, bound, rows, seed):
    """The child's meta and the anchor's ack value as AckFolder.anchor makes them."""
    plan, pair = make(ackers, [True] * 4, 1, grouping, False)
    (col, queues), (ref, _ref_queues) = pair("mid", seed, basic=True)
    emit = col.bound_emit() if bound else col.emit
    src = Source("src", plan.tasks["src"][0], "default", ("x",))
    for i, (root, edge, k) in enumerate(rows):
        cur = TrackedTuple((i,), src, ((root, edge),))
        twin = TrackedTuple((i,), src, ((root, edge),))
        col.current = cur
        for j in range(k):
            emit((i * 10 + j,))
        got = {v: m for msgs in drained_after(col, queues).values() for _s, v, m in msgs}
        metas = [got[(i * 10 + j,)] for j in range(k)]  # in the order emitted
        want = [ref.acks.anchor((twin,)) for _ in range(k)]
        assert metas == want
        assert cur.ack_val == twin.ack_val


@settings(max_examples=60, deadline=None)
@given(
    ackers=st.integers(1, 3),
    rows=st.lists(
        st.tuples(
            st.one_of(
                st.none(),
                st.integers(0, 7),  # an announced tuple of the spout: its root
                st.lists(
                    st.tuples(st.integers(0, 7), st.integers(0, 2**62)), min_size=1, max_size=3
                ),
            ),
            st.integers(0, 3),
        ),
        min_size=1,
        max_size=12,
    ),
    seed=st.integers(0, 2**32),
)
@pytest.mark.parametrize("compiled", [True, False])
def test_the_per_tuple_executors_ack_fold_is_the_folders(compiled, ackers, rows, seed):
    """A BasicBolt's batch through PerTuple (its ack fold inlined) tells the ackers what
    AckFolder.ack tells them for the same tuples: the same folded acks, except that an
    announced tuple acked with nothing anchored to it goes in a done list (the same
    message to the acker as its fold, `(root, announcement)`)."""
    plan, pair = make(ackers, [True] * 4, 1, "shuffle", False)
    (col, _queues), (ref, _ref_queues) = pair("mid", seed, basic=True)
    bolt = Mid()
    bolt.fanout = [k for _m, k in rows]
    bolt.emit = col.bound_emit()
    counts = TaskCounts()

    def uncaught(exc):
        raise exc

    ex = SimpleNamespace(
        obj=bolt,
        collector=col,
        counts=counts,
        source=lambda task, stream: Source("src", task, stream, ("x",)),
        accounts=Accounts(counts, {}, lambda key, n: None, True, uncaught),
        screen=None,
        fail_tuple=None,
    )
    src = plan.tasks["src"][0]
    announced = announcement(src)
    metas = [
        None if not m else ((m, announced),) if isinstance(m, int) else tuple(m) for m, _k in rows
    ]
    metas = [None if m == () else m for m in metas]
    values = [(i,) for i in range(len(rows))]
    with loop(compiled):
        PerTuple(ex).run((src, "default", values, metas))
    for t in bolt.seen:
        ref.acks.ack(t)
    told = dict(col.acks.acks)
    for box in col.acks.ack_boxes:
        for root, val in box:
            assert root == FIRST_DONE
            task, roots = val
            assert task == src
            for r in roots:
                told[r] = told.get(r, 0) ^ announced
    assert told == ref.acks.acks
    assert counts.acked == len(rows) and counts.executed == len(rows)


class Raising(Mid):
    """Mid that raises after its emits for the tuples whose index is in `raises`, and
    for those in `late` anchors one more emit to the tuple before (already acked)."""

    def __init__(self):
        super().__init__()
        self.raises: set[int] = set()
        self.late: set[int] = set()

    def execute(self, tup):
        i = len(self.seen)
        super().execute(tup)
        if i in self.late and i > 0:
            self.emit((-1,), anchors=self.seen[i - 1])
        if i in self.raises:
            raise ValueError(f"tuple {i}")


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(
                st.none(),
                st.integers(0, 7),
                st.lists(
                    st.tuples(st.integers(0, 7), st.integers(0, 2**62)), min_size=1, max_size=2
                ),
            ),
            st.integers(0, 2),
            st.booleans(),  # execute raises
            st.booleans(),  # anchors to the tuple before, after that one was acked
        ),
        min_size=1,
        max_size=12,
    ),
    seed=st.integers(0, 2**32),
)
@pytest.mark.parametrize("compiled", [True, False])
def test_the_batch_fold_acks_as_each_execute_returns(compiled, rows, seed):
    """The per-batch fold acks what AckFolder.ack would have acked as each execute
    returned (Storm's BasicBolt): a failed tuple is not acked (its fail is sent), and
    an emit anchored to a tuple acked before (a later execute's) is not in its ack."""
    plan, pair = make(1, [True] * 4, 1, "shuffle", False)
    (col, _queues), (ref, _ref_queues) = pair("mid", seed, basic=True)
    bolt = Raising()
    bolt.fanout = [k for _m, k, _r, _l in rows]
    bolt.raises = {i for i, (_m, _k, r, _l) in enumerate(rows) if r}
    bolt.late = {i for i, (_m, _k, _r, late) in enumerate(rows) if late}
    bolt.emit = col.bound_emit()
    counts = TaskCounts()
    ex = SimpleNamespace(
        obj=bolt,
        collector=col,
        counts=counts,
        source=lambda task, stream: Source("src", task, stream, ("x",)),
        accounts=Accounts(counts, {}, lambda key, n: None, True, lambda exc: None),
        screen=None,
        fail_tuple=None,
    )
    src = plan.tasks["src"][0]
    announced = announcement(src)
    metas = [
        None if not m else ((m, announced),) if isinstance(m, int) else tuple(m)
        for m, _k, _r, _l in rows
    ]
    metas = [None if m == () else m for m in metas]
    values = [(i,) for i in range(len(rows))]
    with loop(compiled):
        PerTuple(ex).run((src, "default", values, metas))
    # the reference: replay the draws on the twin, acking each tuple as execute returns
    twin = Raising()
    twin.fanout, twin.raises, twin.late = bolt.fanout, bolt.raises, bolt.late
    twin.emit = ref.bound_emit()
    for v, m in zip(values, metas, strict=True):
        source = Source("src", src, "default", ("x",))
        t = TrackedTuple(v, source, m) if m else Tuple(v, source)
        ref.current = t
        try:
            twin.execute(t)
        except ValueError:
            continue
        ref.acks.ack(t)
    told = dict(col.acks.acks)
    for box in col.acks.ack_boxes:
        for root, val in box:
            assert root == FIRST_DONE
            task, roots = val
            for r in roots:
                told[r] = told.get(r, 0) ^ announced
    assert {r: x for r, x in told.items() if x} == {r: x for r, x in ref.acks.acks.items() if x}
    failed = len(bolt.raises & set(range(len(rows))))
    assert counts.failed == failed and counts.acked == len(rows) - failed
