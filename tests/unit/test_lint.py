"""`stormish plan` / `stormish lint` logic: the edges as the runtime
builds them, and each risky choice the issue names, flagged by name."""

from __future__ import annotations

import pytest

from stormish import Bolt, Topology, TopologyError
from stormish.lint import analyse, format_plan

from .idle import IdleBolt, IdleSpout


class Src(IdleSpout):
    outputs = ["k", "v"]


class Sink(IdleBolt):
    outputs = ["k", "v"]


class Batches(Bolt):
    batch_size = 100

    def execute_batch(self, batch):
        return None


def topo(acking=True, **conf):
    c = dict(conf)
    if not acking:
        c["topology.acker.executors"] = 0
    t = Topology("lint", config=c)
    t.set_spout("src", Src(), parallelism=2)
    return t


def messages(t, **extra):
    return [(f.where, f.message) for f in analyse(t, extra).findings]


def test_the_plan_lists_every_edge_with_tasks_workers_policy_and_cycle():
    t = topo(acking=False)
    t.set_bolt("a", Sink(), parallelism=2).fields_grouping(
        "src", ["k"], overflow="drop_oldest", capacity=10
    )
    d = t.set_bolt("b", Sink())
    d.shuffle_grouping("a")
    d.shuffle_grouping("b", lifespan_ms=100)
    r = analyse(t, {"topology.workers": 2})
    by = {e.name: e for e in r.edges}
    assert set(by) == {"a <- src:default", "b <- a:default", "b <- b:default"}
    a = by["a <- src:default"]
    assert a.grouping == "fields" and a.fields == ["k"]
    assert a.policy == {
        "overflow": "drop_oldest",
        "capacity": 10,
        "lifespan_ms": None,
        "deadline_ms": None,
        "throttle": None,
    }
    assert (
        a.source_tasks == r.components["src"]["tasks"]
        and a.bolt_tasks == r.components["a"]["tasks"]
    )
    assert a.crosses_workers and not a.on_cycle
    assert by["b <- b:default"].on_cycle and not by["b <- a:default"].on_cycle
    assert by["b <- a:default"].policy is None
    text = "\n".join(format_plan(r))
    assert "edge a <- src:default: fields(k), drop_oldest capacity 10" in text
    assert "edge b <- b:default: shuffle, block lifespan 100 ms, on a cycle" in text
    assert r.as_dict()["edges"][0]["name"] == "a <- src:default"


def test_dropping_under_acking_is_flagged_and_not_without_acking():
    for acking, expect in ((True, 1), (False, 0)):
        t = topo(acking)
        t.set_bolt("a", Sink()).shuffle_grouping("src", overflow="drop_newest", capacity=5)
        found = [m for _, m in messages(t) if "under acking" in m]
        assert len(found) == expect
    t = topo(True)
    t.set_bolt("a", Sink()).shuffle_grouping("src", overflow="fail", capacity=5)
    assert not [m for _, m in messages(t) if "under acking" in m]  # fail is meant to fail trees


def test_a_lifespan_within_the_flush_interval_and_a_deadline_past_the_lifespan():
    t = topo(False)
    t.set_bolt("a", Sink()).shuffle_grouping("src", lifespan_ms=1, deadline_ms=5)
    ms = [m for _, m in messages(t)]
    assert any(
        "lifespan_ms=1 is not longer than topology.batch.flush.interval.millis" in m for m in ms
    )
    assert any("deadline_ms=5 >= lifespan_ms=1" in m for m in ms)
    # a flush interval below the lifespan: that warning goes
    assert messages(t, **{"topology.batch.flush.interval.millis": 0.5}) != messages(t)


def test_max_in_flight_below_the_batch_size_and_latest_into_an_aggregation():
    t = topo(False)
    t.set_bolt("a", Batches()).ordered_lanes("src", key=["k"], max_in_flight=10)
    t.set_bolt("b", Sink()).fields_grouping("src", ["k"], overflow="latest")
    ms = dict(messages(t))
    assert "max_in_flight=10 is smaller than the bolt's batch_size=100" in ms["a <- src:default"]
    assert "into a fields grouping" in ms["b <- src:default"]


def test_a_cycle_without_max_spout_pending():
    t = topo(False, **{"topology.max.spout.pending": None})
    d = t.set_bolt("a", Sink())
    d.shuffle_grouping("src")
    d.shuffle_grouping("a")
    assert any("form a cycle and topology.max.spout.pending is unset" in m for _, m in messages(t))
    t2 = topo(False)
    d2 = t2.set_bolt("a", Sink())
    d2.shuffle_grouping("src")
    d2.shuffle_grouping("a")
    assert messages(t2) == []  # the default bounds it


def test_a_topology_that_fails_its_checks_raises_as_submit_would():
    t = Topology("bad")
    t.set_bolt("a", Sink())
    with pytest.raises(TopologyError, match="has no spout"):
        analyse(t)


def test_a_fail_edge_between_workers_shows_the_credit_each_remote_sender_holds():
    """The share is what the receiving worker grants (runtime/credits.py): capacity over
    the sending tasks; none where every task is in one worker, or on other policies."""
    t = topo(acking=False)
    t.set_bolt("a", Sink(), parallelism=2).shuffle_grouping("src", overflow="fail", capacity=10)
    t.set_bolt("b", Sink(), parallelism=2).shuffle_grouping(
        "src", overflow="drop_oldest", capacity=10
    )
    by = {e.name: e for e in analyse(t, {"topology.workers": 2}).edges}
    assert by["a <- src:default"].credit_share == 5
    assert by["b <- src:default"].credit_share is None
    text = "\n".join(format_plan(analyse(t, {"topology.workers": 2})))
    assert "credit: a sending task in another worker holds up to 5 unspent" in text
    assert {e.credit_share for e in analyse(t, {"topology.workers": 1}).edges} == {None}
    t.set_bolt("c", Sink()).shuffle_grouping("src", overflow="fail")  # the queue's size
    by = {e.name: e for e in analyse(t, {"topology.workers": 2}).edges}
    assert (
        by["c <- src:default"].credit_share
        == topo().validate({})["topology.executor.receive.buffer.size"] // 2
    )


def test_a_bolt_nothing_feeds_is_named_unless_it_gets_tick_tuples():
    """A forgotten grouping: Storm runs such a bolt and it never executes; the summary's
    row of zeros said nothing of why."""
    t = topo()
    t.set_bolt("fed", Sink()).shuffle_grouping("src")
    t.set_bolt("lonely", Sink())
    assert messages(t) == [
        (
            "lonely",
            "bolt 'lonely' subscribes to no stream and gets no tick tuples: it never "
            "executes; give it a grouping (e.g. .shuffle_grouping('src'))",
        )
    ]
    t.set_bolt("ticker", Sink()).add_configuration("topology.tick.tuple.freq.secs", 1)
    assert [w for w, _ in messages(t)] == ["lonely"]
    assert messages(t, **{"topology.tick.tuple.freq.secs": 5}) == []  # every bolt ticks
