"""Windowed bolts held to Storm's contract, from a hunt that ported Storm's windowing
scenarios: an `emit_tasks` in `execute_window` is anchored to the window (its results
were lost, unreplayed), one bolt object given to two components fires in both (the
watermark of one waited for the other's inputs), Storm's `execute(TupleWindow)` is
refused and named (it turned windowing off), a late tuple stream cannot take an
output's name, a tick frequency set by hand counts in the timeout check, a time window
under a spout-pending cap is warned of, and a join on a list-valued key joins."""

from __future__ import annotations

import logging

import pytest

from stormish import BasicBolt, ConfigError, LocalCluster, Spout, Topology, TopologyError
from stormish.testing import CaptureBolt, ListSpout, poll_for, run_topology
from stormish.windowing import Count, Duration, WindowedBolt
from stormish.windowing.join import INNER, FieldSelector, JoinStep, hash_join

pytestmark = pytest.mark.timeout(90)


class FailFirst(BasicBolt):
    """Fails each window's result the first time it comes (its tree fails), passes it on
    when replayed."""

    outputs = ["ids"]

    def prepare(self, conf, context):
        self.seen = set()

    def execute(self, tup):
        key = repr(tup["ids"])
        if key not in self.seen:
            self.seen.add(key)
            raise RuntimeError(f"the first {key}")
        self.emit([tup["ids"]])


class ByTasks(WindowedBolt):
    outputs = ["ids"]

    def execute_window(self, window):
        assert self.emit_tasks([[t["value"] for t in window.tuples]])


def test_emit_tasks_in_execute_window_is_anchored_to_the_window():
    """Storm's WindowedOutputCollector anchors every emit to the window, the one that
    returns task ids too: a failed result replays the window's tuples."""
    t = Topology("window-emit-tasks")
    t.set_spout("src", ListSpout([[i] for i in range(4)], ["value"]))
    t.set_bolt("win", ByTasks().with_tumbling_window(Count(2))).global_grouping("src")
    t.set_bolt("failer", FailFirst()).shuffle_grouping("win")
    t.set_bolt("sink", CaptureBolt()).shuffle_grouping("failer")
    res = run_topology(t, timeout=60, workers=1)
    spout = res.results["src"][0]
    assert spout["failed"], spout  # before: {} (the results were not anchored)
    assert sorted(map(tuple, (v[0] for v in res.captured["sink"]))) == [(0, 1), (2, 3)]


class Events(Spout):
    outputs = ["n", "ts"]

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        if self.n < 300:
            self.emit([self.n, self.n / 10.0], msg_id=self.n)
            self.n += 1


class Ends(WindowedBolt):
    outputs = ["end", "count"]

    def execute_window(self, window):
        self.emit([window.end, len(window.tuples)])


def test_one_windowed_bolt_object_for_two_components_fires_in_both():
    """Storm serializes each component apart: each one's watermark waits for its own
    inputs. Here one object took both components' inputs, the last one's winning: w1's
    watermark waited for s2, which w1 never hears, and w1 never fired."""
    t = Topology("window-shared", config={"topology.message.timeout.secs": 60})
    t.set_spout("s1", Events())
    t.set_spout("s2", Events())
    win = Ends().with_tumbling_window(Duration(seconds=5)).with_timestamp_field("ts")
    win = win.with_watermark_interval(0.2)
    t.set_bolt("w1", win).global_grouping("s1")
    t.set_bolt("w2", win).global_grouping("s2")
    with LocalCluster(workers=1) as c:
        c.submit(t)

        def both() -> bool:
            s = c.statistics(t.name).components
            return s["w1"].emitted > 0 and s["w2"].emitted > 0

        poll_for(both, 30, 0.1, "windows fired by both components")


class StormStyle(WindowedBolt):
    outputs = ["n"]

    def execute(self, window):  # Storm's IWindowedBolt.execute(TupleWindow)
        self.emit([len(window)])


class Src(Spout):
    outputs = ["n"]

    def next_tuple(self):
        pass


def test_storms_execute_of_a_window_is_refused_and_named():
    t = Topology("window-storm-execute")
    t.set_spout("src", Src())
    t.set_bolt("win", StormStyle().with_tumbling_window(Count(3))).shuffle_grouping("src")
    with pytest.raises(TopologyError, match=r"windowed bolt 'win' defines execute\(\).*"
                       r"execute_window\(window\)"):  # fmt: skip
        t.validate()


class Late(WindowedBolt):
    outputs = ["n"]

    def execute_window(self, window):
        pass


def test_a_late_tuple_stream_cannot_take_a_declared_streams_name():
    t = Topology("window-late-default")
    t.set_spout("src", Src())
    w = Late().with_tumbling_window(Duration(seconds=5)).with_timestamp_field("n")
    t.set_bolt("win", w.with_late_tuple_stream("default")).shuffle_grouping("src")
    with pytest.raises(TopologyError, match="late tuple stream 'default' is also one of"):
        t.validate()


def test_a_tick_frequency_set_by_hand_counts_in_the_timeout_check():
    """docs/windows.md: the key set by hand is an event-time window's watermark interval;
    with 60 s of it, a 15 s message timeout times out every tuple (it was accepted)."""
    t = Topology("window-tick-by-hand", config={"topology.message.timeout.secs": 15})
    t.set_spout("src", Src())
    w = Late().with_tumbling_window(Duration(seconds=5)).with_timestamp_field("n")
    t.set_bolt("win", w).global_grouping("src").set_tick_frequency(60)
    with pytest.raises(ConfigError, match="watermark interval 60"):
        t.validate()


def test_a_time_window_under_a_spout_pending_cap_is_warned_of(caplog):
    """Storm's default is no cap; ours (1000) held an event-time window of more for good."""
    t = Topology("window-pending-warned")
    t.set_spout("src", Src())
    w = Late().with_tumbling_window(Duration(seconds=5)).with_timestamp_field("n")
    # a name of its own: a warning is logged once per process (topology._warn)
    t.set_bolt("pending-warned", w).global_grouping("src")
    with caplog.at_level(logging.WARNING, logger="stormish.config"):
        t.validate()
    assert "'topology.max.spout.pending' (1000) caps" in caplog.text
    assert "the watermark stops" in caplog.text
    caplog.clear()
    t.config["topology.max.spout.pending"] = None
    with caplog.at_level(logging.WARNING, logger="stormish.config"):
        t.validate()
    assert "max.spout.pending" not in caplog.text


class Row(dict):
    def __init__(self, src, **kw):
        super().__init__(kw)
        self.src = src


def test_a_join_on_a_list_valued_key_joins_as_storms_hashmap_does():
    users = [Row("users", key=["eu", 1], name="ann"), Row("users", key=["us", 1], name="bo")]
    orders = [Row("orders", key=["eu", 1], oid=7)]
    steps = [
        JoinStep("users", FieldSelector.parse("key", "users")),
        JoinStep(
            "orders",
            FieldSelector.parse("key", "orders"),
            INNER,
            FieldSelector("users", ("key",), "key"),
        ),  # fmt: skip
    ]
    selected = [FieldSelector.parse(s) for s in ("name", "oid")]
    got = hash_join(users + orders, steps, selected, lambda t: t.src)
    assert [values for values, _ in got] == [["ann", 7]]
