"""Acking's compiled steps (stormish/_acking.c) against their Python twins, on the same
input: a reliable spout's emit (TreeEmitter against SpoutCollector.bound_emit's closure)
and ack_folder.fold_runs."""

from __future__ import annotations

import gc
import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from stormish import BasicBolt, Spout, Topology
from stormish.runtime import emitters, fastack
from stormish.runtime.ack_folder import announcement, py_fold_runs
from stormish.runtime.acker import AckerBolt
from stormish.runtime.emitters import make_collector
from stormish.runtime.plan import build_plan
from stormish.runtime.queue import ReceiveQueue

compiled = pytest.mark.skipif(
    not fastack.COMPILED, reason="stormish._acking is not built here (no C compiler)"
)


class Src(Spout):
    outputs = ["x"]

    def next_tuple(self):
        pass


class Sink(BasicBolt):
    def execute(self, tup):
        pass


def bound(t: Topology, component: str, batch_size: int, seed: int, basic: bool = False):
    """`component`'s collector on queues of its own (seeded), plan and queues."""
    plan = build_plan(t, t.validate(), AckerBolt())
    (task,) = plan.tasks[component]
    queues = {k: ReceiveQueue(1 << 20) for k in plan.task_component}
    col = make_collector(plan, task, queues, set(queues), batch_size, random.Random(seed), basic)
    return col, queues, plan


def bound_emit(col, compiled_name: str, compile_it: bool):
    """col.bound_emit() with emitters.<compiled_name> as it is, or None (the closure)."""
    saved = getattr(emitters, compiled_name)
    if not compile_it:
        setattr(emitters, compiled_name, None)
    try:
        return col.bound_emit()
    finally:
        setattr(emitters, compiled_name, saved)


def reliable_spout(
    sinks: int, batch_size: int, seed: int, compile_it: bool, takes_roots: bool = False
):
    """A reliable spout's collector as the executor binds it (in-flight head set), its
    bound emit (compiled or the closure), its queues and its in-flight head. With
    `takes_roots`, the sinks' queues take root metas (their consumers set it as they
    begin; ack_folder.py)."""
    t = Topology("fast", config={"topology.acker.executors": 1})
    t.set_spout("src", Src())
    t.set_bolt("sink", Sink(), parallelism=sinks).shuffle_grouping("src")
    col, queues, plan = bound(t, "src", batch_size, seed)
    for task in plan.tasks["sink"]:
        queues[task].takes_roots = takes_roots
    head: dict[int, object] = {}
    col.inflight_head = head
    return col, bound_emit(col, "TreeEmitter", compile_it), queues, head, plan


def delivered(col, queues) -> dict[int, list[tuple]]:
    col.flush_all()
    out: dict[int, list[tuple]] = {}
    for task, q in queues.items():
        while (batches := q.consume()) is not None:
            for _src, stream, values, metas in batches:
                assert len(values) <= col.batch_size
                for i, v in enumerate(values):
                    out.setdefault(task, []).append((stream, v, metas[i] if metas else None))
    return out


CALLS = st.lists(
    st.tuples(
        st.sampled_from(["kw", "positional", "stream_kw", "no_id", "none_id", "wide", "list"]),
        st.integers(0, 10**6),
    ),
    max_size=60,
)


def call(emit, how: str, i: int) -> None:
    if how == "kw":
        emit((i,), msg_id=i)
    elif how == "positional":
        emit((i,), "default", None, i)
    elif how == "stream_kw":
        emit((i,), msg_id=i, stream="default")
    elif how == "no_id":
        emit((i,))
    elif how == "none_id":
        emit((i,), msg_id=None)
    elif how == "list":
        emit([i], msg_id=i)
    else:
        with pytest.raises(Exception, match="values on stream 'default'"):
            emit((i, i), msg_id=i)


@compiled
@settings(max_examples=80, deadline=None)
@given(
    calls=CALLS,
    sinks=st.integers(1, 3),
    batch=st.integers(1, 5),
    seed=st.integers(0, 99),
    roots=st.booleans(),
)
def test_the_compiled_reliable_emit_is_the_closures(calls, sinks, batch, seed, roots):
    """Same roots, same rows and metas in the same tasks' batches (none over the batch
    size), same in-flight entries; the calls it does not take go through the closure.
    Root metas where the consumers take them, written out where they do not."""
    c_col, c_emit, c_queues, c_head, plan = reliable_spout(sinks, batch, seed, True, roots)
    p_col, p_emit, p_queues, p_head, _ = reliable_spout(sinks, batch, seed, False, roots)
    assert type(c_emit) is fastack.TreeEmitter
    assert type(p_emit) is not fastack.TreeEmitter
    for how, i in calls:
        call(c_emit, how, i)
        call(p_emit, how, i)
    got = delivered(c_col, c_queues)
    assert got == delivered(p_col, p_queues)
    assert c_head == p_head
    assert c_col.emitted() == p_col.emitted()
    metas = [m for rows in got.values() for _, _, m in rows if m is not None]
    assert all((m.__class__ is int) == roots for m in metas)  # all tracked: reliable
    if roots:  # a root meta is the tuple's announced tree
        assert set(metas) <= c_head.keys()


@compiled
def test_root_metas_are_what_the_written_out_metas_say():
    """The same emits into queues that take root metas and into queues that do not:
    each root meta is the (root, announcement) pair the other got, row for row."""
    runs = []
    for roots in (True, False):
        col, emit, queues, head, plan = reliable_spout(2, 3, 5, True, roots)
        for i in range(10):
            emit((i,), msg_id=i)
        runs.append(delivered(col, queues))
    ann = announcement(col.task)
    written = {t: [(s, v, ((m, ann),)) for s, v, m in rows] for t, rows in runs[0].items()}
    assert written == runs[1] and sum(map(len, written.values())) == 10


@compiled
def test_the_compiled_reliable_emit_records_an_announced_tree():
    col, emit, queues, head, plan = reliable_spout(1, 4, 7, True)
    emit(("a",), msg_id="m1")
    emit(["b"], "default", None, "m2")
    (root1, root2) = head
    assert head == {root1: "m1", root2: "m2"} and root2 == root1 + col.acks.root_step
    gc.collect()  # the untracked metas are still whole
    (sink,) = plan.tasks["sink"]
    ann = announcement(col.task)
    assert delivered(col, queues)[sink] == [
        ("default", ("a",), ((root1, ann),)),
        ("default", ["b"], ((root2, ann),)),
    ]


@compiled
def test_the_compiled_reliable_emit_passes_the_closures_errors():
    _, emit, _, _, _ = reliable_spout(2, 4, 1, True)
    with pytest.raises(TypeError):
        emit(("a",), msg_id=1, colour="red")
    with pytest.raises(TypeError):
        emit(("a",), "default", stream="default", msg_id=1)
    with pytest.raises(Exception, match="undeclared stream 'other'"):
        emit(("a",), "other", msg_id=1)
    assert "reliable emit" in repr(emit) and "shuffled" in repr(emit)


@compiled
def test_the_tree_emitter_refuses_bad_parts():
    flush = print
    with pytest.raises(TypeError, match="an outbox .* or a shuffle"):
        fastack.TreeEmitter(print, "default", 1, 4, flush, None, None, {}, iter(range(3)), 1, False)
    with pytest.raises(TypeError, match="roots must be an iterator"):
        fastack.TreeEmitter(print, "default", 1, 4, flush, None, object(), {}, range(3), 1, False)
    with pytest.raises(ValueError, match="arity >= 0 and size >= 1"):
        fastack.TreeEmitter(print, "default", -1, 4, flush, None, object(), {}, iter([]), 1, False)


@compiled
def test_a_spout_out_of_roots_says_so():
    class Box(list):
        metas: list

    only = Box()
    only.metas = []
    emit = fastack.TreeEmitter(print, "default", 1, 4, print, only, None, {}, iter(()), 1, False)
    with pytest.raises(RuntimeError, match="ran out of tree roots"):
        emit((1,), msg_id=1)
    assert only == [] and only.metas == []


ROOTS = st.integers(0, 5)
EDGES = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([1 << 64, 3 << 64, 2**70 + 5]))
PAIR = st.tuples(ROOTS, EDGES)
META = st.one_of(
    st.none(),
    ROOTS.map(lambda r: r + 1),  # a root meta (ack_folder.py): (r + 1, announced)
    st.tuples(PAIR),
    st.tuples(PAIR, PAIR),
    st.just(()),
    st.tuples(st.tuples(ROOTS, st.sampled_from([1 << 64]))),  # an announced edge
)
ODD = st.one_of(  # metas the compiled pass leaves to Python
    st.lists(PAIR, min_size=1, max_size=2).map(lambda ps: [list(p) for p in ps]),
    st.tuples(st.tuples(st.booleans(), EDGES)),
)


@compiled
@settings(max_examples=300, deadline=None)
@given(
    metas=st.lists(st.one_of(META, META, META, ODD), max_size=40),
    start=st.dictionaries(ROOTS, EDGES, max_size=3),
    announced=st.sampled_from([-1, 1 << 64]),
    with_done=st.booleans(),
)
def test_the_compiled_fold_is_the_python_fold(metas, start, announced, with_done):
    """Root metas fold as their (root, announced) pair; in a batch not from a spout
    (announced -1) one is an error, raised by both."""
    from stormish.runtime.ack_folder import fold_runs

    c_acks, p_acks = dict(start), dict(start)
    c_done: list | None = [] if with_done else None
    p_done: list | None = [] if with_done else None
    got = outcome(lambda: fold_runs(metas, c_acks, announced, c_done))
    want = outcome(lambda: py_fold_runs(metas, p_acks, announced, p_done))
    assert got == want
    assert (got[0] == "raised") == (announced < 0 and any(m.__class__ is int for m in metas))
    if got[0] == "ok":
        assert c_acks == p_acks and c_done == p_done
        written = [((m, announced),) if m.__class__ is int else m for m in metas]
        w_acks: dict = dict(start)
        w_done: list | None = [] if with_done else None
        py_fold_runs(written, w_acks, announced, w_done)
        assert w_acks == p_acks and w_done == p_done


@compiled
@settings(max_examples=200, deadline=None)
@given(metas=st.lists(st.one_of(META, ODD), max_size=20), task=st.integers(1, 9))
def test_the_compiled_expand_is_the_python_expand(metas, task):
    from stormish.runtime import ack_folder

    ann = announcement(task)
    got = fastack.expand_roots(list(metas), ann)
    saved, ack_folder._c_expand_roots = ack_folder._c_expand_roots, None
    try:
        want = ack_folder.expand_roots(list(metas), ann)
    finally:
        ack_folder._c_expand_roots = saved
    assert got == want
    if any(m.__class__ is int for m in metas):
        assert got == [((m, ann),) if m.__class__ is int else m for m in metas]
    else:
        assert got is None


@compiled
def test_the_compiled_fold_stops_at_what_it_does_not_read():
    acks: dict[int, int] = {}
    metas = [((1, 5),), ((1, 6),), [[2, 7]], ((1, 8),)]
    assert fastack.fold_runs(metas, acks, -1, None, 0) == 2
    assert acks == {1: 5 ^ 6}
    assert fastack.fold_runs(metas, acks, -1, None, 3) == 4
    assert acks == {1: 5 ^ 6 ^ 8}
    with pytest.raises(TypeError, match="done must be a list or None"):
        fastack.fold_runs(metas, acks, -1, (), 0)


@compiled
def test_the_compiled_bolt_loop_hands_back_an_error_with_its_traceback():
    from stormish.tuple import Source, TrackedTuple, Tuple

    seen = []

    def execute(t):
        seen.append(t)
        if t.values[0] == 2:
            raise ValueError("two")  # this line must be in the traceback
        if t.meta:
            t.ack_val ^= 9

    class Col:
        current = None

    col, src = Col(), Source("c", 1, "default", ("x",))
    values, metas = [(1,), (2,), (3,)], [((5, 1),), None, ((6, 2),)]
    anchored: list = []
    at, bad, err = fastack.run_basic(values, metas, 0, src, execute, col, anchored)
    assert (at, type(bad), str(err)) == (1, Tuple, "two")
    tb = err.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_name == "execute"
    assert fastack.run_basic(values, metas, 2, src, execute, col, anchored) is None
    assert [type(t) for t in seen] == [TrackedTuple, Tuple, TrackedTuple]
    assert col.current is seen[-1] and anchored == [(((5, 1),), 9), (((6, 2),), 9)]

    def interrupted(t):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fastack.run_basic(values, None, 0, src, interrupted, None, [])
    with pytest.raises(ValueError, match="as long as values"):
        fastack.run_basic(values, metas[:1], 0, src, execute, col, [])


@compiled
@pytest.mark.parametrize("acking", [True, False])
def test_the_compiled_bolt_loop_reuses_a_tuple_nothing_kept(acking):
    """A tuple its execute did not keep is the next row's (its slots rewritten, its ack
    value back to 0); one it kept stays as it was, and the next row gets a new one."""
    from stormish.tuple import Source

    class Col:
        current = None

    kept, ids, states = [], [], []

    def execute(t):
        ids.append(id(t))
        states.append((t.values, t.meta, t.ack_val) if acking else (t.values,))
        if t.values[0] % 3 == 0:
            kept.append(t)
        if acking and t.values[0] % 2 == 0:
            t.ack_val ^= 4

    col, src = Col(), Source("c", 1, "default", ("x",))
    values = [(i,) for i in range(1, 10)]
    metas = [((100 + i, 7),) for i in range(1, 10)] if acking else None
    anchored: list = []
    assert (
        fastack.run_basic(values, metas, 0, src, execute, col if acking else None, anchored) is None
    )
    if acking:
        assert states == [(v, m, 0) for v, m in zip(values, metas, strict=True)]
        assert anchored == [(m, 4) for v, m in zip(values, metas, strict=True) if v[0] % 2 == 0]
    else:
        assert states == [(v,) for v in values]
    # rows 1, 2 share a tuple; 3 is kept, so 4 gets a new one, shared with 5; 6 kept ...
    assert ids[0] == ids[1] and ids[3] == ids[4] and ids[6] == ids[7]
    assert len({ids[1], ids[3]}) == 2 and len({ids[4], ids[6]}) == 2
    assert [t.values for t in kept] == [(3,), (6,), (9,)]  # what was kept is unchanged
    if acking:
        assert [t.meta for t in kept] == [metas[2], metas[5], metas[8]]


@compiled
@settings(max_examples=100, deadline=None)
@given(
    keys=st.lists(st.integers(0, 30), unique=True, max_size=20),
    roots=st.lists(st.integers(0, 40), max_size=30),
)
def test_the_compiled_pop_is_dict_pop(keys, roots):
    c_head = {k: f"m{k}" for k in keys}
    p_head = dict(c_head)
    entries, missing = fastack.pop_many(c_head, roots)
    want = [p_head.pop(r, None) for r in roots]
    assert entries == want and missing == want.count(None) and c_head == p_head


class Mid(BasicBolt):
    outputs = ["w"]

    def execute(self, tup):
        pass


def anchored(grouping: str, sinks: int, seed: int, compile_it: bool):
    from stormish.tuple import Source, TrackedTuple

    t = Topology("anchored", config={"topology.acker.executors": 1})
    t.set_spout("src", Src())
    t.set_bolt("mid", Mid()).shuffle_grouping("src")
    d = t.set_bolt("sink", Sink(), parallelism=sinks)
    if grouping == "fields":
        d.fields_grouping("mid", ["w"])
    else:
        d.shuffle_grouping("mid")
    col, queues, plan = bound(t, "mid", 3, seed, basic=True)
    emit = bound_emit(col, "AnchoredEmitter", compile_it)
    src = Source("src", plan.tasks["src"][0], "default", ["x"])
    return col, emit, queues, lambda meta, v=("in",): TrackedTuple(v, src, meta)


INPUTS = st.lists(
    st.tuples(
        st.sampled_from(["one", "two", "none", "list", "untracked", "root"]),
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b", "c", 7, 8.5, ("t",)]),
                st.sampled_from(["plain", "kw", "anchors", "wide", "list"]),
            ),
            max_size=5,
        ),
    ),
    max_size=12,
)


@compiled
@settings(max_examples=80, deadline=None)
@given(
    inputs=INPUTS,
    how=st.sampled_from([("fields", 3), ("fields", 1), ("shuffle", 1)]),
    seed=st.integers(0, 99),
)
def test_the_compiled_anchored_emit_is_the_closures(inputs, how, seed):
    """Same edges (the same draws of the task's Random), the same rows and metas in the
    same tasks' batches, the same ack values on the inputs; what the compiled emit does
    not take (explicit anchors, inputs in two trees or none, untracked inputs, keys not
    cached, a wrong width) goes through the closure."""
    from stormish.tuple import Source, Tuple

    grouping, sinks = how
    runs = []
    for compile_it in (True, False):
        col, emit, queues, tracked = anchored(grouping, sinks, seed, compile_it)
        assert (type(emit) is fastack.AnchoredEmitter) == compile_it
        acks = []
        for r, (kind, emits) in enumerate(inputs):
            if kind == "one":
                cur = tracked(((r, r + 100),))
            elif kind == "two":
                cur = tracked(((r, 1), (r + 50, 2)))
            elif kind == "list":
                cur = tracked(((r, 5),), ["in"])
            elif kind == "untracked":
                cur = Tuple(("in",), Source("src", 1, "default", ["x"]))
            elif kind == "root":  # a root meta (ack_folder.py)
                cur = tracked(r + 1)
            else:
                cur = None
            col.current = cur
            for value, call_as in emits:
                if call_as == "plain":
                    emit((value,))
                elif call_as == "kw":
                    emit((value,), stream="default")
                elif call_as == "list":
                    emit([value])
                elif call_as == "anchors":
                    emit((value,), anchors=[tracked(((999, 3),))])
                else:
                    with pytest.raises(Exception, match="values on stream 'default'"):
                        emit((value, value))
            acks.append(getattr(cur, "ack_val", None))
        runs.append((delivered(col, queues), acks, col.emitted()))
    assert runs[0] == runs[1]


# -- Python code running inside a compiled call (a review's proofs, kept): what the
# compiled step holds stays alive, and what it walks is read live
@compiled
def test_a_key_whose_eq_empties_the_metas_does_not_crash_the_fold():
    metas = [((5, 1),), ((5, 2),), ((7, 1),), ((8, 1),)] * 100

    class Evil:
        def __hash__(self):
            return 7

        def __eq__(self, other):
            metas.clear()
            return False

    acks = {Evil(): 0}
    assert fastack.fold_runs(metas, acks, -1, None, 0) <= 400
    assert acks[5] == 1 ^ 2


@compiled
def test_a_root_dropped_by_its_own_hash_is_held_by_the_pop():
    class K:
        def __init__(self, h):
            self.h = h

        def __hash__(self):
            roots.clear()
            return self.h

        def __eq__(self, o):
            return isinstance(o, K) and o.h == self.h

    class Other:
        def __hash__(self):
            return 1

        def __eq__(self, o):
            return getattr(o, "h", None) == 1

    head = {Other(): "x"}
    roots = [K(1), K(2)]
    with pytest.raises(RuntimeError, match="the roots changed"):
        fastack.pop_many(head, roots)
    assert fastack.pop_many({1: None, 2: "m"}, [1, 2]) == ([None, "m"], 1)  # as `None in`


@compiled
def test_an_ack_value_that_rewrites_itself_stays_alive_in_the_loop():
    class V:
        def __init__(self, t):
            self.t = t

        def __bool__(self):
            self.t.ack_val = 0  # drops the slot's reference while it is being read
            return True

    def execute(t):
        t.ack_val = V(t)

    class Col:
        current = None

    anchored: list = []
    assert fastack.run_basic([(1,)], [((1, 2),)], 0, None, execute, Col(), anchored) is None
    gc.collect()
    assert len(anchored) == 1 and isinstance(anchored[0][1], V)

    class Bad:
        def __bool__(self):
            raise ZeroDivisionError("meta")

    with pytest.raises(ZeroDivisionError, match="meta"):  # as the Python loop's `if m:`
        fastack.run_basic([(1,)], [Bad()], 0, None, execute, Col(), [])


@compiled
def test_a_key_that_moves_the_input_into_two_trees_is_read_as_before_its_hash():
    from stormish.runtime.routing import Outbox
    from stormish.tuple import TrackedTuple

    class Col:
        current = None

    col, armed = Col(), []

    class Key:
        def __hash__(self):
            if armed:
                col.current.meta = ((5, 0), (6, 0))
                [(str(i), [i]) for i in range(50)]  # reuse freed memory, if any was
            return 1

        def __eq__(self, o):
            return o is self

    k = Key()
    ob = Outbox(2, "default", None, True)
    emit = fastack.AnchoredEmitter(
        print, col, "default", 1, 100, print, None, {k: ob}, 0, lambda b: 3
    )
    root = int("9" * 25)
    col.current = TrackedTuple((1,), None, ((root, 0),))
    armed.append(1)
    emit((k,))
    assert ob.metas == [((root, 3),)]


@compiled
def test_a_meta_holding_objects_stays_visible_to_the_collector():
    """Untracked from the GC only when its parts are ints: a cycle through an object
    root would never be collected."""
    from stormish.runtime.routing import Outbox
    from stormish.tuple import TrackedTuple

    class Col:
        current = None

    class Root:
        pass

    col = Col()
    ob = Outbox(2, "default", None, True)
    emit = fastack.AnchoredEmitter(print, col, "default", 1, 100, print, ob, None, 0, lambda b: 3)
    r = Root()
    col.current = TrackedTuple((1,), None, ((r, 0),))
    emit(("x",))
    assert gc.is_tracked(ob.metas[0]) and gc.is_tracked(ob.metas[0][0])


@compiled
def test_a_stream_of_no_fields_takes_the_compiled_emit():
    class Bare(Spout):
        outputs: list[str] = []

        def next_tuple(self):
            pass

    t = Topology("bare", config={"topology.acker.executors": 1})
    t.set_spout("src", Bare())
    t.set_bolt("sink", Sink()).shuffle_grouping("src")
    col, _, _ = bound(t, "src", 4, 1)
    col.inflight_head = head = {}
    emit = col.bound_emit()
    assert type(emit) is fastack.TreeEmitter
    emit((), msg_id=1)
    assert list(head.values()) == [1]


# -- what a peer's pickled metas can be (plain data, no classes): the compiled steps
# raise what Python raises, never crash
ATOM = st.sampled_from([0, 1, -1, 1 << 64, -(1 << 80), 2.5, "s", b"b", None, True, (), (1,)])
WIRE_META = st.one_of(
    st.none(),
    ATOM,
    st.tuples(st.tuples(ATOM, ATOM)),
    st.tuples(st.tuples(st.integers(0, 3), ATOM)),
    st.lists(st.tuples(ATOM, ATOM), max_size=3).map(tuple),
    st.just([(1, 2)]),
    st.just(((1, 2, 3),)),
    st.tuples(st.tuples(st.integers(0, 3), st.integers(0, 2**63 - 1))),
)


def outcome(fn):
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return ("raised", type(exc))


@compiled
@settings(max_examples=300, deadline=None)
@given(metas=st.lists(WIRE_META, max_size=12), announced=st.sampled_from([-1, 1 << 64]))
@example(metas=[((0, 0),), ((None, 2.5),)], announced=-1)  # a None root: not "no run"
def test_a_peers_odd_metas_fold_as_python_folds_them(metas, announced):
    from stormish.runtime.ack_folder import fold_runs

    c_acks: dict = {}
    p_acks: dict = {}
    c_done: list = []
    p_done: list = []
    got = outcome(lambda: fold_runs(list(metas), c_acks, announced, c_done))
    want = outcome(lambda: py_fold_runs(list(metas), p_acks, announced, p_done))
    assert got[0] == want[0]
    if got[0] == "ok":
        assert c_acks == p_acks and c_done == p_done


@compiled
@settings(max_examples=200, deadline=None)
@given(metas=st.lists(WIRE_META, min_size=1, max_size=8), fails=st.sets(st.integers(0, 7)))
def test_a_peers_odd_metas_never_crash_the_compiled_loop(metas, fails):
    class Col:
        current = None

    values = [(i,) for i in range(len(metas))]
    seen = []

    def execute(t):
        seen.append(t.values[0])
        if t.values[0] in fails:
            raise ValueError("no")

    anchored: list = []
    i, stopped = 0, []
    try:
        while r := fastack.run_basic(values, metas, i, None, execute, Col(), anchored):
            stopped.append(r[0])
            i = r[0] + 1
    except Exception:  # noqa: BLE001 - a meta's truth test may raise, as `if m:` does
        pass
    assert stopped == sorted(set(stopped)) and set(stopped) <= fails
    # this example's objects are young: a full collection of the whole suite's heap, 200
    # times, took 33 s of the default run
    gc.collect(1)


@compiled
def test_the_compiled_emits_show_the_collector_every_reference_they_hold():
    """One traverse serves every compiled callable (_refs.h): each reference is seen,
    so a cycle through an emit (a bolt holding its emit holding the bolt's collector)
    is collected."""
    from stormish import rowcodec
    from stormish.runtime.routing import Outbox

    class Col:
        current = None

    def py(*a, **k):
        pass

    def flush(ob):
        pass

    def rand(bits):
        return 3

    only = Outbox(2, "default", None, True)
    head: dict = {}
    roots = iter(range(5))
    col = Col()
    tree = fastack.TreeEmitter(py, "default", 1, 4, flush, only, None, head, roots, 1, False)
    assert {id(x) for x in (py, flush, only, only.metas, head, roots)} <= set(
        map(id, gc.get_referents(tree))
    )
    anchored = fastack.AnchoredEmitter(py, col, "default", 1, 4, flush, only, None, 0, rand)
    assert {id(x) for x in (py, flush, only, rand, col.__dict__)} <= set(
        map(id, gc.get_referents(anchored))
    )
    if rowcodec.Emitter is not None:
        plain = rowcodec.Emitter(py, "default", 1, 4, flush, only, None, None, 0)
        assert {id(py), id(flush), id(only)} <= set(map(id, gc.get_referents(plain)))
    col.emit = anchored  # a cycle: col -> emit -> col's dict
    del col, anchored
    assert gc.collect() >= 1


# -- the acker's ACK_ACK loop (acker.py): compiled and Python, message for message
ACK_ROOTS = st.integers(1, 6)
ACK_MSG = st.one_of(
    st.tuples(ACK_ROOTS, st.integers(0, 7)),  # an ack (0: changes nothing)
    st.tuples(ACK_ROOTS, st.integers(1, 3).map(lambda t: t << 64)),  # announced, complete
    st.tuples(  # announced with edges below it
        ACK_ROOTS, st.tuples(st.integers(1, 3), st.integers(1, 7)).map(lambda p: p[0] << 64 | p[1])
    ),
    st.tuples(st.just(-7), st.integers(0, 3)),  # a negative root that is no message: ignored
)
ACK_BATCH = st.one_of(
    st.tuples(st.just("ack"), st.lists(ACK_MSG, max_size=12)),
    st.tuples(st.just("done"), st.tuples(st.integers(1, 3), st.lists(ACK_ROOTS, max_size=4))),
    st.tuples(st.just("fail"), st.tuples(ACK_ROOTS, st.integers(0, 3))),
    st.tuples(st.just("init"), st.tuples(ACK_ROOTS, st.integers(0, 7), st.integers(1, 3))),
    st.tuples(st.just("tick"), st.none()),
)


@compiled
@settings(max_examples=300, deadline=None)
@given(batches=st.lists(ACK_BATCH, max_size=12))
def test_the_compiled_acker_loop_is_the_python_loop(batches):
    """The same batches into two ackers, one with the compiled ACK_ACK loop: the same
    completions and fails told, in the same order, and the same ledger."""
    from stormish.runtime import acker as acker_mod
    from stormish.runtime.plan import ACK_ACK, ACK_FAIL, ACK_INIT, FIRST_DONE
    from stormish.tuple import TICK_STREAM

    def run(compiled: bool):
        saved = acker_mod._c_ack_run
        if not compiled:
            acker_mod._c_ack_run = None
        try:
            bolt = AckerBolt()
            bolt.prepare({}, None)
            told: list = []

            def emit_direct(task, values, stream):
                told.append((task, stream, [list(v) if isinstance(v, list) else v for v in values]))

            for kind, body in batches:
                if kind == "ack":
                    bolt.execute_raw(ACK_ACK, list(body), emit_direct)
                elif kind == "done":
                    task, roots = body
                    bolt.execute_raw(ACK_ACK, [(FIRST_DONE, (task, list(roots)))], emit_direct)
                elif kind == "fail":
                    root, task = body
                    bolt.execute_raw(ACK_FAIL, [(root, ("c", None), task)], emit_direct)
                elif kind == "init":
                    bolt.execute_raw(ACK_INIT, [body], emit_direct)
                else:
                    bolt.execute_raw(TICK_STREAM, [(1,)], emit_direct)
            return told, bolt.ledger.cur, bolt.ledger.old
        finally:
            acker_mod._c_ack_run = saved

    assert run(True) == run(False)


@compiled
def test_the_compiled_acker_loop_takes_the_usual_messages_and_leaves_the_rest():
    from stormish.runtime.plan import FIRST_DONE

    cur: dict = {9: [3, 2, False], 8: [1, 2, "why"]}
    old: dict = {7: [5, -1, False]}
    done: dict = {}
    values = [
        (1, 5),  # no entry: one, spout task unknown
        (2, 1 << 64),  # announced, nothing below: complete
        (3, (2 << 64) | 6),  # announced with edges below: an entry
        (9, 3),  # an entry's last ack: complete
        (1, (3 << 64) | 5),  # the announced ack of an entry: its init, complete
        (8, 1),  # a failed entry: Python's
        (4, 1),
    ]
    assert fastack.ack_run(values, 0, cur, old, done) == 5
    assert cur == {3: [6, 2, False], 8: [1, 2, "why"]} and done == {1: [2], 2: [9], 3: [1]}
    assert fastack.ack_run(values, 6, cur, old, done) == 7 and cur[4] == [1, -1, False]
    assert fastack.ack_run([(7, 1)], 0, cur, old, done) == 0  # the old generation: Python's
    assert fastack.ack_run([(FIRST_DONE, (1, [5]))], 0, cur, old, done) == 0


@compiled
@pytest.mark.parametrize("move", ["none", "other", "delete"])
def test_a_kept_tuple_is_not_reused_when_execute_moved_current(move):
    """A review's proof: execute keeps its tuple and moves `collector.current` on (two
    references again: the loop's and the list's); the kept tuple must stay row 1's."""
    from stormish.tuple import Source

    class Col:
        def __init__(self):
            self.current = None

    col, kept = Col(), []

    def execute(t):
        if t.values[0] == 1:
            kept.append(t)
            if move == "delete":
                del col.current
            else:
                col.current = None if move == "none" else "x"

    metas = [((11, 7),), ((22, 7),), ((33, 7),)]
    src = Source("c", 1, "default", ("x",))
    assert fastack.run_basic([(1,), (2,), (3,)], metas, 0, src, execute, col, []) is None
    assert kept[0].values == (1,) and kept[0].meta == ((11, 7),)


def test_a_root_meta_from_a_bolt_is_an_error_in_every_fold():
    """A root meta in a batch not from a spout: the same ValueError whether every tuple
    of the batch had emits anchored to it or not (a review's proof)."""
    from stormish.runtime.execution.per_tuple import _fold

    with pytest.raises(ValueError, match="not from a spout"):
        _fold([5], [(5, 3)], {}, [], -1)
    with pytest.raises(ValueError, match="not from a spout"):
        _fold([5, 6], [(5, 3)], {}, [], -1)


def test_a_lost_root_meta_fails_its_tree_at_its_spout():
    from stormish.runtime.ack_folder import _trees

    assert _trees([123, ((7, 9 << 64),), ((8, 5),)], 9) == {123: 9, 7: 9, 8: 0}
