"""Per-edge channel policies: the channel's logic against a model, the
policy checks, and the API and config that declare them."""

from __future__ import annotations

import pickle
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish import ConfigError, Topology, TopologyError
from stormish.edges import EdgePolicy, make_policy
from stormish.runtime.acker import AckerBolt
from stormish.runtime.channel import EdgeChannel, EdgeStats, StampedRows
from stormish.runtime.plan import build_plan
from stormish.runtime.queue import ReceiveQueue
from stormish.transport import frames as fr

from .idle import IdleBolt, IdleSpout

POLICIES = ["drop_oldest", "drop_newest", "latest", "fail"]
REASON = {
    "drop_oldest": "dropped",
    "drop_newest": "dropped",
    "latest": "overwritten",
    "fail": "overflow",
}


def channel(overflow: str, capacity: int) -> EdgeChannel:
    policy = make_policy(
        "test", overflow=overflow, capacity=capacity if overflow != "latest" else None
    )
    assert policy is not None
    return EdgeChannel(policy, EdgeStats("src", "default", 1, policy), policy.capacity or capacity)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("offer"), st.integers(1, 12)),
        st.tuples(st.just("take"), st.integers(1, 10)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(POLICIES), st.integers(1, 15), ops)
def test_a_channel_keeps_what_its_policy_says_in_order_and_every_tuple_is_accounted(
    overflow, capacity, script
):
    """Against a model: contents after each offer (oldest dropped / newest refused / one
    slot), what leaves in sender order, every let-go tuple's tree reported once with the
    policy's reason, and arrived = executed + dropped + overwritten + rejected + queued."""
    ch = channel(overflow, capacity)
    cap = ch.capacity
    model: list[int] = []  # row ids waiting, oldest first
    taken: list[int] = []
    next_id = 0
    for op, k in script:
        if op == "offer":
            rows = list(range(next_id, next_id + k))
            next_id += k
            metas = [((r, 1),) for r in rows]  # the tree of row r is r
            ch.offer((7, "default", [(r,) for r in rows], metas), k)
            both = model + rows
            if overflow == "drop_oldest":
                model = both[-cap:]
            elif overflow == "latest":
                model = both[-1:]
            else:
                model = both[:cap]
        else:
            out: list = []
            n = ch.take(k, out)
            got = [v[0] for b in out for v in b[2]]
            assert len(got) == n
            assert got == model[: len(got)]
            assert n >= min(k, 1) if model else n == 0
            model = model[len(got) :]
            taken += got
        waiting = [v[0] for b in ch.batches for v in b[2]]
        assert waiting == model
        assert ch.size == len(model) <= cap
        s = ch.stats
        assert s.arrived == next_id
        assert s.arrived == len(taken) + s.dropped + s.overwritten + s.rejected + ch.size
        assert s.high <= cap
    assert taken == sorted(taken)
    lost = [(meta[0][0], why) for metas, why in ch.lost for meta in metas]
    assert sorted(r for r, _ in lost) == sorted(set(range(next_id)) - set(taken) - set(model))
    assert {why for _, why in lost} <= {REASON[overflow]}


def test_a_stamped_batch_keeps_its_stamp_through_a_channel_and_a_frame():
    ch = channel("drop_oldest", 3)
    ch.offer((4, "s", StampedRows([(1,), (2,), (3,), (4,)], 12.5), None), 4)
    (b,) = ch.batches
    assert type(b[2]) is StampedRows and b[2].born == 12.5 and list(b[2]) == [(2,), (3,), (4,)]
    msg = fr.decode([bytes(f) for f in fr.encode_tuples(0, 1, [(9, *b)])])
    ((dest, src, stream, values, metas),) = msg.body
    assert type(values) is StampedRows and values.born == 12.5 and values == [(2,), (3,), (4,)]
    assert pickle.loads(pickle.dumps(values)).born == 12.5


def test_a_queue_sends_a_policy_edge_to_its_channel_and_never_refuses_it():
    q = ReceiveQueue(8)
    pol = make_policy("t", overflow="drop_newest", capacity=2)
    ch = EdgeChannel(pol, EdgeStats("a", "default", 1, pol), 2)
    q.add_channel([(5, "default")], ch)
    assert q.try_publish((5, "default", [(1,), (2,), (3,)], None), 3)  # a policy edge
    assert q.publish_remote((5, "default", [(4,)], None), 1) == 0
    assert q.try_publish((6, "default", [(9,)] * 8, None), 8)  # another upstream: the queue
    assert not q.try_publish((6, "default", [(9,)], None), 1)  # full: refused (backpressure)
    assert len(q) == 10 and q.has_data()
    got = q.consume()
    assert [b[2] for b in got] == [[(9,)] * 8, [(1,), (2,)]]
    assert ch.stats.dropped == 2 and len(q) == 0
    assert q.consume() is None


# -- checks
@pytest.mark.parametrize(
    "given,error",
    [
        ({"overflow": "drop"}, "overflow='drop' is not a policy"),
        ({"overflow": "drop_oldest", "capacity": 0}, "capacity=0 must be an integer >= 1"),
        ({"overflow": "fail", "capacity": 2.5}, "capacity=2.5 must be an integer"),
        ({"capacity": 10}, "a blocking edge uses its task's receive queue"),
        ({"overflow": "latest", "capacity": 5}, "keeps one tuple"),
        ({"lifespan_ms": 0}, "lifespan_ms=0 must be a number of milliseconds > 0"),
        ({"deadline_ms": float("inf")}, "deadline_ms=inf"),
        ({"deadline_ms": True}, "deadline_ms=True"),
        ({"lifespan": 5}, "unknown edge option(s) 'lifespan'"),
    ],
)
def test_a_bad_policy_names_the_edge_and_the_option(given, error):
    with pytest.raises(TopologyError, match=r"edge X: .*" + _re(error)):
        make_policy("edge X", **given)


def _re(s: str) -> str:
    import re

    return re.escape(s)


def test_no_option_is_storms_edge_and_latest_has_one_slot():
    assert make_policy("e") is None
    assert make_policy("e", overflow=None, capacity=None) is None
    assert make_policy("e", overflow="latest") == EdgePolicy("latest", 1)
    p = make_policy("e", lifespan_ms=50)
    assert p == EdgePolicy("block", None, 50) and p.stamped and not p.channel


class Src(IdleSpout):
    outputs = ["k", "v"]


class Sink(IdleBolt):
    outputs = ["k"]


def test_every_grouping_takes_a_policy_and_the_plan_carries_it():
    t = Topology("edges", config={"topology.acker.executors": 0})
    t.set_spout("src", Src())
    d = t.set_bolt("a", Sink(), parallelism=2)
    d.shuffle_grouping("src", overflow="latest")
    t.set_bolt("b", Sink()).fields_grouping("src", ["k"], overflow="drop_oldest", capacity=9)
    t.set_bolt("c", Sink()).all_grouping("src", deadline_ms=5)
    t.set_bolt("d", Sink()).global_grouping("src", overflow="fail", capacity=3)
    t.set_bolt("e", Sink()).local_or_shuffle_grouping("src", lifespan_ms=100)
    t.set_bolt("f", Sink()).partial_key_grouping("src", ["k"], overflow="drop_newest", capacity=4)
    t.set_bolt("g", Sink()).direct_grouping("src", overflow="latest")
    t.set_bolt("h", Sink()).none_grouping("src", overflow="latest")
    t.set_bolt("i", Sink()).custom_grouping("src", lambda v, n: 0, overflow="latest")
    t.set_bolt("j", Sink()).dead_letter_grouping("src", overflow="drop_oldest", capacity=7)
    plan = build_plan(t, t.validate(), AckerBolt())
    pol = {
        (n, s.source, s.stream): s.policy
        for n, c in plan.components.items()
        for s in c.subscriptions
    }
    assert pol[("b", "src", "default")] == EdgePolicy("drop_oldest", 9)
    assert pol[("c", "src", "default")] == EdgePolicy("block", None, None, 5)
    assert pol[("j", "src", "__dead_letter")] == EdgePolicy("drop_oldest", 7)
    assert len([p for p in pol.values() if p is not None]) == 10


def test_a_bad_option_on_a_grouping_names_the_component_grouping_and_source():
    t = Topology("edges")
    t.set_spout("src", Src())
    with pytest.raises(
        TopologyError,
        match=r"component .a.: fields grouping on .src. stream .default.: unknown edge option\(s\) .capcity.",  # noqa: E501
    ):
        t.set_bolt("a", Sink()).fields_grouping("src", ["k"], overflow="fail", capcity=3)


def test_config_policies_override_the_groupings_and_name_an_edge_that_is_not_there():
    t = Topology(
        "edges",
        config={
            "topology.acker.executors": 0,
            "topology.edge.policies": {"a <- src": {"overflow": "drop_newest", "capacity": 5}},
        },
    )
    t.set_spout("src", Src())
    t.set_bolt("a", Sink()).shuffle_grouping("src", overflow="latest")
    plan = build_plan(t, t.validate(), AckerBolt())
    (sub,) = plan.components["a"].subscriptions
    assert sub.policy == EdgePolicy("drop_newest", 5)
    assert t.components["a"].subscriptions[0].policy == EdgePolicy("latest", 1)  # as written
    bad = {"topology.edge.policies": {"a <- src:other": {"overflow": "latest"}}}
    with pytest.raises(
        ConfigError, match=r"has no edge 'a <- src:other'; its edges: \['a <- src:default'\]"
    ):
        t.validate(bad)
    with pytest.raises(
        TopologyError, match=r"edge 'a <- src:default'.*overflow='x' is not a policy"
    ):
        t.validate({"topology.edge.policies": {"a <- src": {"overflow": "x"}}})
    with pytest.raises(TopologyError, match="must read 'bolt <- source'"):
        t.validate({"topology.edge.policies": {"a": {"overflow": "latest"}}})
    with pytest.raises(ConfigError, match="topology.edge.policies"):
        t.validate({"topology.edge.policies": ["a <- src"]})


def _stats_with(edge_counts: dict) -> object:
    from stormish.runtime.stats import TaskStats, TopologyStatistics, aggregate

    e = {
        "edge": "src:default",
        "policy": {
            "overflow": "drop_oldest",
            "capacity": 5,
            "lifespan_ms": None,
            "deadline_ms": None,
        },
        "arrived": 0,
        "executed": 0,
        "dropped": 0,
        "stale": 0,
        "overwritten": 0,
        "rejected": 0,
        "deadline_missed": 0,
        "queued": 0,
        "throttled": 0,
        "high_watermark": 5,
        "last_reason": None,
        "last_at": 0.0,
    }
    tasks = []
    for task, counts in edge_counts.items():
        tasks.append(TaskStats(task, "bolt", 0, "bolt", edges={"src:default": dict(e, **counts)}))
    return TopologyStatistics("t", "running", 1.0, 1, {t.task: t for t in tasks}, aggregate(tasks))


def test_the_edge_counters_sum_over_tasks_and_monitor_tells_only_what_grew():
    from stormish.runtime.stats import edge_changes, edge_table

    s = _stats_with(
        {
            1: {"arrived": 10, "executed": 6, "dropped": 4, "last_reason": "a", "last_at": 2.0},
            2: {
                "arrived": 7,
                "executed": 7,
                "high_watermark": 3,
                "last_reason": "b",
                "last_at": 1.0,
            },
        }
    )
    e = s.components["bolt"].edges["src:default"]
    assert (e["arrived"], e["executed"], e["dropped"], e["high_watermark"]) == (17, 13, 4, 5)
    assert e["last_reason"] == "a"  # the latest of the tasks'
    table = edge_table(s)
    assert re.search(r"bolt <- src:default +drop_oldest +17 +13 +4 ", table[1])
    seen: dict = {}
    assert edge_changes(s, seen) == ["edge bolt <- src:default [drop_oldest]: dropped +4 (4); a"]
    assert edge_changes(s, seen) == []  # nothing new
    s2 = _stats_with(
        {
            1: {
                "arrived": 30,
                "executed": 6,
                "dropped": 20,
                "stale": 2,
                "last_reason": "c",
                "last_at": 3.0,
            }
        }
    )
    assert edge_changes(s2, seen) == [
        "edge bolt <- src:default [drop_oldest]: dropped +16 (20), stale +2 (2); c"
    ]


def test_a_throttle_spaces_batches_more_as_the_queue_fills_and_loses_none():
    """Below the throttle's free fraction a batch of n is followed by n / (capacity x
    free) s (capped): the spacing grows as the queue fills; a batch held back is refused
    (the sender keeps it), never dropped; above the fraction it is Storm's edge."""
    from stormish.edges import THROTTLE_MAX_S
    from stormish.runtime.channel import Throttled

    now = [0.0]
    q = ReceiveQueue(1000)
    st = EdgeStats("src", "default", 1, EdgePolicy(throttle=0.5))
    th = Throttled(q, 0.5, lambda: now[0], st)
    for _ in range(51):  # until half full, not throttled
        assert th.try_publish((9, "default", [(1,)] * 10, None), 10)
    assert th.until == 0.0
    gaps = []
    while q.size < 1000:
        if th.try_publish((9, "default", [(1,)] * 10, None), 10):
            gaps.append(th.until - now[0])
        else:
            now[0] += 0.001
    assert all(b >= a - 1e-9 for a, b in zip(gaps, gaps[1:], strict=False))  # growing
    assert gaps[0] < gaps[-1] == pytest.approx(THROTTLE_MAX_S)
    assert gaps[0] == pytest.approx(10 / (1000 * 0.49))  # 10 tuples at 49% free: 20 ms
    assert st.throttled > 0 and q.size == 1000
    assert not th.try_publish((9, "default", [(1,)], None), 1)  # full: refused, as ever


def test_a_throttle_needs_a_fraction_and_a_blocking_edge():
    with pytest.raises(TopologyError, match="throttle=1.5 must be a fraction"):
        make_policy("e", throttle=1.5)
    with pytest.raises(TopologyError, match="throttle with overflow='drop_oldest'"):
        make_policy("e", overflow="drop_oldest", throttle=0.5)
    assert make_policy("e", throttle=0.5) == EdgePolicy(throttle=0.5)


def test_monitor_tells_each_health_event_once_and_starts_over_after_a_restart():
    """runtime.health.new_events: the newest few of what is new, per worker sequence."""
    from types import SimpleNamespace

    from stormish.runtime.health import new_events

    def ev(worker, seq, t):
        return {"seq": seq, "time": t, "worker": worker, "task": 3, "edge": "src:default",
                "policy": "drop_oldest", "reason": "overflow", "depth": 50, "capacity": 50,
                "detail": f"d{worker}.{seq}"}  # fmt: skip

    told: dict[int, int] = {}
    tasks = [SimpleNamespace(health_events=tuple(ev(0, s, s) for s in range(1, 9)))]
    lines = new_events(tasks, told)
    assert lines[0] == "EDGE 3 more health events (see /events)" and len(lines) == 6
    assert lines[-1].endswith("d0.8") and told == {0: 8}
    assert new_events(tasks, told) == []  # nothing new
    restarted = [SimpleNamespace(health_events=(ev(0, 1, 100),))]
    assert [ln[-4:] for ln in new_events(restarted, told)] == ["d0.1"]
