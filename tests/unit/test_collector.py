"""The output collector with real ReceiveQueue targets: batching, pendingEmitQ, stream order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish import Topology, TopologyError, rowcodec
from stormish.runtime import fastack
from stormish.runtime.ack_folder import announcement
from stormish.runtime.acker import AckerBolt
from stormish.runtime.emitters import make_collector as collector_for
from stormish.runtime.plan import ACK_INIT, build_plan
from stormish.runtime.queue import ReceiveQueue

from .idle import IdleBolt, IdleSpout


class Src(IdleSpout):
    streams = {"default": ["x"], "other": ["y", "z"], "dir": ["d"]}


class Sink(IdleBolt):
    pass


# Task ids by sorted name: direct 1-2, side 3, sink 4-5, src 6.
DIRECT, SIDE, SINK_A, SINK_B, SRC = (1, 2), 3, 4, 5, 6


def make_plan(acking: bool = False):
    conf = {} if acking else {"topology.acker.executors": 0}
    t = Topology("coll", config=conf)
    t.set_spout("src", Src())
    t.set_bolt("sink", Sink(), parallelism=2).shuffle_grouping("src")
    t.set_bolt("side", Sink()).shuffle_grouping("src", "other")
    t.set_bolt("direct", Sink(), parallelism=2).direct_grouping("src", "dir")
    return build_plan(t, t.validate(), AckerBolt())


def make_collector(capacity: int = 16, batch_size: int = 2, caps=None, acking=False):
    plan = make_plan(acking)
    (src,) = plan.tasks["src"]
    if not acking:  # with acking, '__acker' takes id 1 and shifts the others
        assert src == SRC
    queues = {t: ReceiveQueue((caps or {}).get(t, capacity)) for t in plan.task_component}
    coll = collector_for(plan, src, queues, set(queues), batch_size)
    return coll, queues


def drain(q: ReceiveQueue) -> list[tuple]:
    """The (src, stream, values, metas) batches a queue holds, consumed (a consume takes
    at most the queue's budget: take until it is empty)."""
    out: list[tuple] = []
    while (batches := q.consume()) is not None:
        out += batches
    return out


def values_of(batches) -> list:
    return [v for _src, _stream, values, _metas in batches for v in values]


# -- batching
def test_emit_batches_per_destination_and_flushes_at_batch_size():
    coll, qs = make_collector(batch_size=2)
    coll.emit((0,))
    coll.emit((1,))
    assert not qs[SINK_A].has_data() and not qs[SINK_B].has_data()
    assert coll.buffered() == 2
    coll.emit((2,))  # shuffle is round robin: 0 and 2 to the first sink task
    assert drain(qs[SINK_A]) == [(SRC, "default", [(0,), (2,)], None)]
    assert not qs[SINK_B].has_data()
    coll.emit((3,))
    assert drain(qs[SINK_B]) == [(SRC, "default", [(1,), (3,)], None)]
    assert coll.buffered() == 0
    assert coll.transferred == 4


def test_batch_size_one_publishes_every_emit():
    coll, qs = make_collector(batch_size=1)
    coll.emit((7,))
    assert drain(qs[SINK_A]) == [(SRC, "default", [(7,)], None)]


def test_flush_all_publishes_partial_batches():
    coll, qs = make_collector(batch_size=10)
    for i in range(3):
        coll.emit((i,))
    coll.flush_all()
    assert values_of(drain(qs[SINK_A])) == [(0,), (2,)]
    assert values_of(drain(qs[SINK_B])) == [(1,)]
    assert coll.buffered() == 0
    coll.flush_all()  # nothing left: publishes no empty batch
    assert not qs[SINK_A].has_data()


def test_published_batch_is_a_copy_of_the_outbox():
    coll, qs = make_collector(batch_size=2)
    coll.emit((0,))
    coll.emit((1,))
    coll.emit((2,))
    coll.emit((3,))
    (batch,) = drain(qs[SINK_A])
    coll.emit((4,))
    assert batch[2] == [(0,), (2,)]  # not aliased to the reused outbox


def test_msg_id_with_acking_off_is_acked_on_emit():
    coll, _ = make_collector()
    coll.emit((0,), msg_id="m0")
    coll.emit(("a", "b"), stream="other", msg_id="m1")
    coll.emit((1,))
    assert coll.acked_on_emit == ["m0", "m1"]


def test_emitted_counts_per_user_stream():
    coll, _ = make_collector(batch_size=2)
    for i in range(5):
        coll.emit((i,))
    coll.emit(("a", "b"), stream="other")
    coll.emit_direct(1, ("d",), stream="dir")
    assert coll.emitted() == {"default": 5, "other": 1, "dir": 1}


# -- pendingEmitQ
def test_full_target_parks_the_batch_and_every_later_one_in_order():
    coll, qs = make_collector(batch_size=2, caps={SINK_A: 4})
    foreign = (99, "default", [(-1,)] * 4, None)
    assert qs[SINK_A].try_publish(foreign, 4)  # SINK_A is now full
    for i in range(4):
        coll.emit((i,))
    # (0, 2) was refused by SINK_A; (1, 3) would fit SINK_B but must wait behind it
    assert not qs[SINK_B].has_data()
    assert [(t, b[2], n) for t, b, n in coll.pending] == [
        (qs[SINK_A], [(0,), (2,)], 2),
        (qs[SINK_B], [(1,), (3,)], 2),
    ]
    assert coll.pending_count == 4
    assert coll.transferred == 0
    coll.emit(("a", "b"), stream="other")
    coll.flush_all()
    assert not qs[SIDE].has_data()  # a different stream and target: still behind
    assert len(coll.pending) == 3


def test_flush_pending_stops_at_the_first_refusal():
    coll, qs = make_collector(batch_size=2, caps={SINK_A: 4})
    qs[SINK_A].try_publish((99, "default", [(-1,)] * 4, None), 4)
    for i in range(4):
        coll.emit((i,))
    assert coll.flush_pending() is False
    assert len(coll.pending) == 2
    assert not qs[SINK_B].has_data()  # not published past the refused head
    assert values_of(drain(qs[SINK_A])) == [(-1,)] * 4  # only the foreign batch
    assert coll.flush_pending() is True
    assert coll.pending_count == 0
    assert coll.transferred == 4
    assert values_of(drain(qs[SINK_A])) == [(0,), (2,)]
    assert values_of(drain(qs[SINK_B])) == [(1,), (3,)]


def test_flush_pending_publishes_the_head_then_stops_at_the_next_refusal():
    coll, qs = make_collector(batch_size=2, caps={SINK_A: 4, SINK_B: 4})
    qs[SINK_A].try_publish((99, "default", [(-1,)] * 4, None), 4)
    qs[SINK_B].try_publish((98, "default", [(-2,)] * 4, None), 4)
    for i in range(4):
        coll.emit((i,))
    drain(qs[SINK_A])
    assert coll.flush_pending() is False  # head to SINK_A goes, SINK_B still full
    assert values_of(drain(qs[SINK_A])) == [(0,), (2,)]
    assert len(coll.pending) == 1
    assert coll.pending_count == 2
    drain(qs[SINK_B])
    assert coll.flush_pending() is True
    assert values_of(drain(qs[SINK_B])) == [(1,), (3,)]


def test_new_emits_after_pending_drains_publish_directly():
    coll, qs = make_collector(batch_size=1, caps={SINK_A: 1})
    qs[SINK_A].try_publish((99, "default", [(-1,)], None), 1)
    coll.emit((0,))
    assert len(coll.pending) == 1
    drain(qs[SINK_A])
    assert coll.flush_pending()
    coll.emit((1,))  # goes to SINK_B directly now that nothing is parked
    assert not coll.pending
    assert values_of(drain(qs[SINK_B])) == [(1,)]


def test_flush_pending_with_nothing_parked_is_true():
    coll, _ = make_collector()
    assert coll.flush_pending() is True


# -- streams
def test_switching_streams_flushes_the_previous_stream_first():
    coll, qs = make_collector(batch_size=10)
    coll.emit((0,))
    assert not qs[SINK_A].has_data()
    coll.emit(("a", "b"), stream="other")
    assert values_of(drain(qs[SINK_A])) == [(0,)]  # flushed by the switch
    assert not qs[SIDE].has_data()  # the new stream's tuple still batches
    coll.emit((1,))
    assert values_of(drain(qs[SIDE])) == [("a", "b")]
    assert not qs[SINK_B].has_data()


def test_staying_on_a_stream_does_not_flush():
    coll, qs = make_collector(batch_size=10)
    for i in range(5):
        coll.emit((i,))
    assert coll.buffered() == 5
    assert not any(q.has_data() for q in qs.values())


def test_undeclared_stream_names_component_and_stream():
    coll, _ = make_collector()
    with pytest.raises(TopologyError) as exc:
        coll.emit((1,), stream="nope")
    msg = str(exc.value)
    assert "component 'src'" in msg
    assert "stream 'nope'" in msg
    assert "['default', 'dir', 'other']" in msg


def test_system_stream_is_not_for_users():
    coll, _ = make_collector(acking=True)
    assert ACK_INIT in coll.routes
    with pytest.raises(TopologyError, match=r"component 'src' emitted on undeclared stream"):
        coll.emit((1, 2, 3), stream=ACK_INIT)


@pytest.mark.parametrize(
    ("values", "stream"),
    [((), "default"), ((1, 2), "default"), ((1,), "other"), ((1, 2, 3), "other")],
)
def test_wrong_arity_names_component_stream_and_fields(values, stream):
    coll, _ = make_collector()
    with pytest.raises(TopologyError) as exc:
        coll.emit(values, stream=stream)
    msg = str(exc.value)
    assert f"component 'src' emitted {len(values)} values on stream {stream!r}" in msg
    assert str(list(Src.streams[stream])) in msg


def test_wrong_arity_after_a_good_emit_on_the_same_stream():
    """The fast path skips _route for the current stream; the arity check must not."""
    coll, _ = make_collector()
    coll.emit((1,))
    with pytest.raises(TopologyError, match="emitted 2 values"):
        coll.emit((1, 2))


def test_tracked_emits_check_stream_and_arity_too():
    coll, _ = make_collector(acking=True)
    coll.reliable = lambda root, msg_id, *_rest: None
    with pytest.raises(TopologyError, match=r"stream 'nope'"):
        coll.emit((1,), stream="nope", msg_id=1)
    with pytest.raises(TopologyError, match=r"emitted 2 values on stream 'default'"):
        coll.emit((1, 2), msg_id=1)


# -- direct
def test_emit_direct_reaches_the_chosen_task_only():
    coll, qs = make_collector(batch_size=1)
    coll.emit_direct(DIRECT[1], ("d",), stream="dir")
    assert values_of(drain(qs[DIRECT[1]])) == [("d",)]
    assert not qs[DIRECT[0]].has_data()


def test_emit_direct_to_a_task_without_direct_subscription_errors():
    coll, _ = make_collector()
    with pytest.raises(TopologyError) as exc:
        coll.emit_direct(SINK_A, ("d",), stream="dir")
    msg = str(exc.value)
    assert "component 'src'" in msg
    assert f"task {SINK_A}" in msg
    assert "stream 'dir'" in msg


def test_emit_direct_on_a_stream_with_no_direct_subscriber_errors():
    coll, _ = make_collector()
    with pytest.raises(TopologyError, match=r"emit_direct to task 4 on stream 'default'"):
        coll.emit_direct(SINK_A, (1,))


def test_emit_direct_unknown_task_errors():
    coll, _ = make_collector()
    with pytest.raises(TopologyError, match="task 999"):
        coll.emit_direct(999, ("d",), stream="dir")


def test_regular_emit_on_a_direct_only_stream_is_refused_as_storm_refuses_it():
    """Storm: "Cannot do regular emit to direct stream". The tuple reached nobody, and
    a reliable spout's tree was acked."""
    coll, qs = make_collector(batch_size=1)
    with pytest.raises(TopologyError, match="take by direct_grouping: a stream with a direct"):
        coll.emit(("d",), stream="dir")
    coll.flush_all()
    assert not any(q.has_data() for q in qs.values())


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("grouping", ["shuffle", "fields", "global"])
def test_a_regular_emit_on_a_stream_with_a_direct_and_a_regular_subscriber_is_refused(
    monkeypatch, compiled, grouping
):
    """Storm's Task.getOutgoingTasks throws 'Cannot do regular emit to direct stream' when
    any subscriber of the stream takes it by direct grouping, whatever the others do (the
    emit reached the regular subscriber alone). emit_direct still reaches the direct one."""
    if not compiled:
        monkeypatch.setattr("stormish.runtime.emitters.Emitter", None)
    t = Topology("mixed", config={"topology.acker.executors": 0})
    t.set_spout("src", Src())
    regular = t.set_bolt("reg", Sink())
    getattr(regular, f"{grouping}_grouping")("src", *(["x"] if grouping == "fields" else []))
    t.set_bolt("dir", Sink()).direct_grouping("src")
    plan = build_plan(t, t.validate(), AckerBolt())
    (src,) = plan.tasks["src"]
    qs = {task: ReceiveQueue(16) for task in plan.task_component}
    coll = collector_for(plan, src, qs, set(qs), 1)
    for emit in (coll.emit, coll.bound_emit()):
        with pytest.raises(TopologyError, match=r"\['dir'\] take by direct_grouping"):
            emit((1,))
    assert not any(q.has_data() for q in qs.values())
    (d,) = plan.tasks["dir"]
    coll.emit_direct(d, (2,))
    coll.flush_all()
    assert values_of(drain(qs[d])) == [(2,)]


# -- property: order and completeness under refusals
class TwoStreamSrc(IdleSpout):
    streams = {"default": ["seq"], "other": ["seq", "tag"]}


def make_ordered(caps: dict[str, int], batch_size: int):
    """src -> sink x2 by shuffle on default and by global on other (so the first sink task
    reads both streams), and src -> side by shuffle on other."""
    t = Topology("ord", config={"topology.acker.executors": 0})
    t.set_spout("src", TwoStreamSrc())
    t.set_bolt("sink", Sink(), parallelism=2).shuffle_grouping("src").global_grouping(
        "src", "other"
    )
    t.set_bolt("side", Sink()).shuffle_grouping("src", "other")
    plan = build_plan(t, t.validate(), AckerBolt())
    qs = {task: ReceiveQueue(caps[plan.task_component[task]]) for task in plan.task_component}
    (src,) = plan.tasks["src"]
    return plan, collector_for(plan, src, qs, set(qs), batch_size), qs


EMIT_DEFAULT, EMIT_OTHER = ("emit", "default"), ("emit", "other")
# emits outnumber consumes, so queues fill and the pendingEmitQ is exercised
OPS = st.lists(
    st.sampled_from(
        [
            *[EMIT_DEFAULT] * 5,
            *[EMIT_OTHER] * 3,
            ("consume", "side"),
            ("consume", "sink0"),
            ("consume", "sink1"),
            ("flush_pending",),
            ("flush_all",),
        ]
    ),
    min_size=10,
    max_size=120,
)


@settings(max_examples=80, deadline=None)
@given(ops=OPS, batch_size=st.integers(1, 3), cap_mult=st.integers(2, 3))
def test_every_destination_sees_emission_order_and_nothing_is_lost(ops, batch_size, cap_mult):
    cap = batch_size * cap_mult
    plan, coll, qs = make_ordered({"sink": cap, "side": cap, "src": cap}, batch_size)
    by_name = {
        "side": plan.tasks["side"][0],
        "sink0": plan.tasks["sink"][0],
        "sink1": plan.tasks["sink"][1],
    }
    received: dict[int, list[tuple]] = {t: [] for t in by_name.values()}
    emitted = {"default": [], "other": []}
    seq = 0

    def consume(task):
        for _src, stream, values, _ in drain(qs[task]):
            received[task].extend((stream, v[0]) for v in values)

    for op in ops:
        if op[0] == "emit":
            values = (seq,) if op[1] == "default" else (seq, "t")
            coll.emit(values, stream=op[1])
            emitted[op[1]].append(seq)
            seq += 1
        elif op[0] == "consume":
            consume(by_name[op[1]])
        elif op[0] == "flush_pending":
            coll.flush_pending()
        else:
            coll.flush_all()
        for q in qs.values():
            assert q.size <= cap
    coll.flush_all()
    for _ in range(len(coll.pending) + 1):
        if coll.flush_pending():
            break
        for task in received:
            consume(task)
    assert not coll.pending
    for task in received:
        consume(task)

    for task, got in received.items():
        seqs = [s for _stream, s in got]
        assert seqs == sorted(seqs), f"task {task} saw tuples out of emission order"
    sink0, sink1, side = by_name["sink0"], by_name["sink1"], by_name["side"]
    default_seen = sorted(s for t in (sink0, sink1) for st_, s in received[t] if st_ == "default")
    assert default_seen == emitted["default"]
    assert [s for st_, s in received[sink0] if st_ == "other"] == emitted["other"]
    assert [s for _st, s in received[side]] == emitted["other"]
    assert all(st_ == "default" for st_, _ in received[sink1])
    assert coll.transferred == len(emitted["default"]) + 2 * len(emitted["other"])


# -- tree ids pick an acker on the spout's own worker
@pytest.mark.parametrize("ackers", [2, 3, 4])
def test_spout_roots_route_to_an_acker_on_the_spouts_worker(ackers):
    """With ackers on several workers, every tree a spout starts (emit, emit_many, emit
    with a message id through emit_direct's path) is owned by a local acker: its init and
    its verdict never cross a link."""
    t = Topology("coll", config={"topology.acker.executors": ackers, "topology.workers": 2})
    t.set_spout("src", Src())
    t.set_bolt("sink", Sink(), parallelism=2).shuffle_grouping("src")
    t.set_bolt("side", Sink()).shuffle_grouping("src", "other")
    t.set_bolt("direct", Sink(), parallelism=2).direct_grouping("src", "dir")
    plan = build_plan(t, t.validate(), AckerBolt())
    (src,) = plan.tasks["src"]
    here = plan.assignment[src]
    local = {k for k in plan.task_component if plan.assignment[k] == here}
    queues = {k: ReceiveQueue(1 << 20) for k in plan.task_component}
    coll = collector_for(plan, src, queues, local, 1 << 16)
    roots = []
    coll.reliable = lambda root, msg_id, *_rest: roots.append(root)
    for i in range(200):
        coll.emit((i,), msg_id=i)
    coll.emit_many([(1,), (2,)], msg_id="tree")
    ackers_ = plan.tasks["__acker"]
    assert len(roots) == 201
    owners = {ackers_[r % len(ackers_)] for r in roots}
    assert owners <= local and len(owners) == 1
    coll.flush_all()
    inits = [k for k in ackers_ if queues[k].has_data()]
    assert inits == list(owners)


def test_roots_stay_random_with_a_single_acker():
    coll, _ = make_collector(acking=True)
    roots = []
    coll.reliable = lambda root, msg_id, *_rest: roots.append(root)
    for i in range(100):
        coll.emit((i,), msg_id=i)
    assert len(set(roots)) == 100 and len({r % 7 for r in roots}) == 7


# -- bound_emit: the closure a one-stream component gets as its emit (acking off)
def fast_path(emit) -> str:
    """Which fast emit `bound_emit` gave: emit_one or emit_keyed (closure or compiled)."""
    if rowcodec.Emitter is not None and type(emit) is rowcodec.Emitter:
        return repr(emit).rsplit(": ", 1)[1].rstrip(">")
    return emit.__qualname__.rsplit(".", 1)[1]


class Words(IdleSpout):
    outputs = ["w"]


class Named(IdleSpout):
    streams = {"words": ["w"]}


def one_stream(spout, grouping: str, sinks: int = 1):
    t = Topology("one", config={"topology.acker.executors": 0})
    t.set_spout("src", spout)
    stream = next(iter(spout.declared_streams()))
    d = t.set_bolt("sink", Sink(), parallelism=sinks)
    if grouping == "fields":
        d.fields_grouping("src", ["w"], stream=stream)
    else:
        d.shuffle_grouping("src", stream=stream)
    plan = build_plan(t, t.validate(), AckerBolt())
    (src,) = plan.tasks["src"]
    queues = {t: ReceiveQueue(64) for t in plan.task_component}
    coll = collector_for(plan, src, queues, set(queues), 4)
    return coll, queues, plan


@pytest.mark.parametrize("grouping,sinks", [("shuffle", 1), ("fields", 2), ("fields", 1)])
def test_the_fast_emit_routes_and_counts_as_the_method_does(grouping, sinks):
    coll, queues, plan = one_stream(Words(), grouping, sinks)
    emit = coll.bound_emit()
    if rowcodec.Emitter is not None:  # compiled: the C emitter
        assert type(emit) is rowcodec.Emitter
    else:
        assert emit.__qualname__.startswith("UntrackedCollector.bound_emit.")
    words = [f"w{i % 7}" for i in range(50)]
    for w in words:
        emit((w,))
    coll.flush_all()
    got = {t: [v for b in drain(queues[t]) for v in b[2]] for t in plan.tasks["sink"]}
    assert sorted(v for vs in got.values() for v in vs) == sorted((w,) for w in words)
    if grouping == "fields":  # a key goes to one task only
        assert len({(w, t) for t, vs in got.items() for (w,) in vs}) == len(set(words))
    assert coll.emitted() == {"default": 50}


def test_the_fast_emit_refuses_what_the_method_refuses():
    coll, _, _ = one_stream(Words(), "fields", 2)
    emit = coll.bound_emit()
    with pytest.raises(TopologyError, match="2 values on stream 'default'"):
        emit(("a", "b"))
    with pytest.raises(TopologyError, match="undeclared stream 'other'"):
        emit(("a",), stream="other")
    emit(["unhashable-list-key-ok"])  # a list row: routed by the method's path
    coll.flush_all()
    assert coll.emitted() == {"default": 1}


def test_a_single_named_stream_still_needs_its_name():
    coll, _, _ = one_stream(Named(), "shuffle")
    emit = coll.bound_emit()
    with pytest.raises(TopologyError, match="undeclared stream 'default'"):
        emit(("a",))  # the default stream is not declared: as Storm, an error
    emit(("a",), stream="words")
    assert coll.emitted() == {"words": 1}


def test_a_component_with_several_streams_keeps_the_method():
    coll, _ = make_collector()
    assert coll.bound_emit() == coll.emit  # stream order needs the method's switch


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(st.integers(0, 30), st.text(max_size=3), st.lists(st.integers(0, 3))),
        min_size=0,
        max_size=120,
    )
)
def test_emit_many_by_key_in_bulk_matches_emit_row_by_row(keys):
    """emit_many's bulk routing (one loop over the rows, then whole batches per outbox)
    sends every row where emit sends it, in the same order per task, in batches no larger
    than the batch size (4 here): new keys, repeated keys and unhashable ones alike."""
    rows = [(k,) for k in keys]
    bulk, qb, plan = one_stream(Words(), "fields", 3)
    bulk.emit_many(rows)
    bulk.flush_all()
    single, qs, _ = one_stream(Words(), "fields", 3)
    for r in rows:
        single.emit(r)
    single.flush_all()
    for t in plan.tasks["sink"]:
        got = drain(qb[t])
        assert all(len(b[2]) <= 4 for b in got)
        assert [v for b in got for v in b[2]] == [v for b in drain(qs[t]) for v in b[2]]
    assert bulk.emitted().get("default", 0) == single.emitted().get("default", 0) == len(rows)


# -- bound_emit of a BasicBolt with acking on: the anchored closure
class Mid(IdleBolt):
    outputs = ["w"]


def basic_mid(grouping: str, sinks: int):
    from stormish.tuple import Source, TrackedTuple, Tuple

    t = Topology("basic")
    t.set_spout("src", Words())
    t.set_bolt("mid", Mid()).shuffle_grouping("src")
    d = t.set_bolt("sink", Sink(), parallelism=sinks)
    if grouping == "fields":
        d.fields_grouping("mid", ["w"])
    else:
        d.shuffle_grouping("mid")
    plan = build_plan(t, t.validate(), AckerBolt())
    (mid,) = plan.tasks["mid"]
    queues = {t: ReceiveQueue(256) for t in plan.task_component}
    coll = collector_for(plan, mid, queues, set(queues), 4, basic=True)
    src = Source("src", plan.tasks["src"][0], "default", ["w"])

    def tracked(meta):
        return TrackedTuple(("in",), src, meta)

    return coll, queues, plan, tracked, lambda: Tuple(("in",), src)


def sent(queues, plan):
    """(values, meta) of every row the sink tasks got."""
    return [
        (v, m)
        for t in plan.tasks["sink"]
        for _src, _stream, values, metas in drain(queues[t])
        for v, m in zip(values, metas or [None] * len(values), strict=True)
    ]


@pytest.mark.parametrize("grouping,sinks", [("shuffle", 1), ("fields", 2), ("fields", 1)])
def test_the_anchored_fast_emit_makes_the_edges_the_method_makes(grouping, sinks):
    coll, queues, plan, tracked, _ = basic_mid(grouping, sinks)
    emit = coll.bound_emit()
    if fastack.AnchoredEmitter is not None:  # compiled: the C emitter
        assert type(emit) is fastack.AnchoredEmitter
    else:
        assert emit.__qualname__.startswith("BasicCollector.bound_emit.")
    root = 12345
    cur = tracked(((root, 99),))
    coll.current = cur
    words = [f"w{i % 5}" for i in range(40)]
    for w in words:
        emit((w,))
    coll.flush_all()
    rows = sent(queues, plan)
    assert sorted(v for v, _ in rows) == sorted((w,) for w in words)
    edges = [m[0][1] for _, m in rows]
    assert all(len(m) == 1 and m[0][0] == root for _, m in rows)
    assert len(set(edges)) == len(edges)  # a fresh edge id per delivery
    x = 0
    for e in edges:
        x ^= e
    assert cur.ack_val == x  # acking the input accounts for every edge it anchored
    assert coll.emitted() == {"default": 40}


def test_the_anchored_fast_emit_leaves_the_unusual_to_the_method():
    coll, queues, plan, tracked, untracked = basic_mid("fields", 2)
    emit = coll.bound_emit()
    two = tracked(((1, 10), (2, 20)))  # an input in two trees: an edge in each
    coll.current = two
    emit(("a",))
    other = tracked(((3, 30),))
    emit(("b",), anchors=[other])  # an explicit anchor, not the input
    coll.current = untracked()  # an untracked input: the emit is untracked
    emit(("c",))
    coll.current = None  # outside execute: untracked
    emit(("d",))
    with pytest.raises(TopologyError, match="2 values on stream 'default'"):
        emit(("e", "f"))
    coll.flush_all()
    rows = dict(sent(queues, plan))
    assert sorted(r for r, _ in rows[("a",)]) == [1, 2]
    assert [r for r, _ in rows[("b",)]] == [3] and two.ack_val != 0 and other.ack_val != 0
    assert rows[("c",)] is None and rows[("d",)] is None


# -- local-or-shuffle with one task in this worker: that task takes every tuple
@pytest.mark.parametrize("api", ["emit", "emit_many"])
def test_local_or_shuffle_with_one_local_task_sends_everything_there(api):
    t = Topology("los", config={"topology.acker.executors": 0})
    t.set_spout("src", Words())
    t.set_bolt("sink", Sink(), parallelism=3).local_or_shuffle_grouping("src")
    plan = build_plan(t, t.validate(), AckerBolt())
    (src,) = plan.tasks["src"]
    sinks = plan.tasks["sink"]
    queues = {t: ReceiveQueue(256) for t in plan.task_component}
    local = {src, sinks[1]}  # the other sink tasks live in other workers
    coll = collector_for(plan, src, queues, local, 4)
    emit = coll.bound_emit()
    assert fast_path(emit) == "emit_one"  # the one-outbox path, no pick a tuple
    rows = [(f"w{i}",) for i in range(30)]
    if api == "emit":
        for r in rows:
            emit(r)
    else:
        coll.emit_many(rows)
    coll.flush_all()
    assert values_of(drain(queues[sinks[1]])) == rows  # all of them, in order
    assert not queues[sinks[0]].has_data() and not queues[sinks[2]].has_data()
    assert coll.emitted() == {"default": 30}
    # no local task: shuffled over all of them, as Storm
    coll = collector_for(plan, src, queues, {src}, 4)
    for r in rows:
        coll.bound_emit()(r)
    coll.flush_all()
    assert all(len(values_of(drain(queues[s]))) == 10 for s in sinks)


# -- bound_emit of a reliable spout: the new-tree closure
def reliable_words(grouping: str, sinks: int):
    t = Topology("rel")
    t.set_spout("src", Words())
    d = t.set_bolt("sink", Sink(), parallelism=sinks)
    if grouping == "fields":
        d.fields_grouping("src", ["w"])
    else:
        d.shuffle_grouping("src")
    plan = build_plan(t, t.validate(), AckerBolt())
    (src,) = plan.tasks["src"]
    queues = {t: ReceiveQueue(256) for t in plan.task_component}
    coll = collector_for(plan, src, queues, set(queues), 4)
    return coll, queues, plan, src


@pytest.mark.parametrize("grouping,sinks", [("shuffle", 2), ("shuffle", 1), ("fields", 1)])
def test_the_reliable_spout_emit_closure_starts_trees_as_the_method_does(grouping, sinks):
    coll, queues, plan, src = reliable_words(grouping, sinks)
    trees = []
    coll.reliable = lambda root, msg_id, rows, values, stream: trees.append((root, msg_id))
    emit = coll.bound_emit()
    assert emit.__qualname__.startswith("SpoutCollector.bound_emit.")
    for i in range(20):
        emit((f"w{i}",), msg_id=i)
    emit(("untracked",))  # no message id: no tree (the method's path)
    coll.flush_all()
    per_task = {
        t: [
            (v, m)
            for _s, _st, values, metas in drain(queues[t])
            for v, m in zip(values, metas or [None] * len(values), strict=True)
        ]
        for t in plan.tasks["sink"]
    }
    rows = [r for got in per_task.values() for r in got]
    assert sorted(v for v, _ in rows) == sorted([(f"w{i}",) for i in range(20)] + [("untracked",)])
    if sinks == 2:  # shuffled: round robin over both tasks
        assert sorted(len(got) for got in per_task.values()) == [10, 11]
    edge = {m[0][0]: m[0][1] for v, m in rows if m}  # root -> its first edge
    (acker,) = plan.tasks["__acker"]
    inits = [row for _s, st, values, _m in drain(queues[acker]) if st == ACK_INIT for row in values]
    assert [msg for _, msg in trees] == list(range(20))
    assert {r for r, _ in trees} == set(edge) and len(edge) == 20
    # a tree of one delivery is announced: its edge names the spout task that is to hear
    # the verdict, and no init is sent (the tuple's ack carries it: ack_folder.py)
    assert inits == []
    assert set(edge.values()) == {announcement(src)}


def test_the_reliable_spout_emit_closure_refuses_what_the_method_refuses():
    coll, _, _, _ = reliable_words("shuffle", 1)
    coll.reliable = lambda *a: None
    emit = coll.bound_emit()
    with pytest.raises(TopologyError, match="2 values on stream 'default'"):
        emit(("a", "b"), msg_id=1)
    with pytest.raises(TopologyError, match="undeclared stream 'other'"):
        emit(("a",), stream="other", msg_id=1)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(st.integers(0, 30), st.text(max_size=3), st.lists(st.integers(0, 3)), st.none()),
        max_size=120,
    ),
    st.sampled_from([("fields", 3), ("fields", 1), ("shuffle", 1)]),
)
def test_the_compiled_emit_sends_every_row_where_the_closure_sends_it(keys, how):
    """rowcodec.Emitter (C) against the Python closure it wraps: str keys by the
    grouping's hash, others by its cache, unhashable and new keys through the closure;
    every row in the same task's batches, in order, batches no larger than 4."""
    import stormish.runtime.emitters as emitters

    if rowcodec.Emitter is None:
        pytest.skip("stormish._speedups is not built here")
    grouping, sinks = how
    rows = [(k,) for k in keys]
    compiled, qc, plan = one_stream(Words(), grouping, sinks)
    emit = compiled.bound_emit()
    assert type(emit) is rowcodec.Emitter
    for i, r in enumerate(rows):
        emit(r) if i % 2 else emit(r, "default")
    compiled.flush_all()
    saved, emitters.Emitter = emitters.Emitter, None
    try:
        plain, qp, _ = one_stream(Words(), grouping, sinks)
        emit = plain.bound_emit()
    finally:
        emitters.Emitter = saved
    assert type(emit) is not rowcodec.Emitter
    for r in rows:
        emit(r)
    plain.flush_all()
    for t in plan.tasks["sink"]:
        got = drain(qc[t])
        assert all(len(b[2]) <= 4 for b in got)
        assert [v for b in got for v in b[2]] == [v for b in drain(qp[t]) for v in b[2]]
    assert compiled.emitted() == plain.emitted()


def test_the_compiled_emit_refuses_a_positional_stream_it_does_not_declare():
    coll, _, _ = one_stream(Words(), "fields", 2)
    emit = coll.bound_emit()
    with pytest.raises(TopologyError, match="undeclared stream 'other'"):
        emit(("a",), "other")
    with pytest.raises(TopologyError, match="2 values on stream 'default'"):
        emit(["a", "b"])
    with pytest.raises(TypeError):
        emit()
