"""What a windowed bolt declares and what a topology checks about it at submit (no
topology runs here; tests/integration/test_windowing.py runs them)."""

from __future__ import annotations

import pytest

from stormish import ConfigError, Topology, TopologyError
from stormish.testing import ListSpout
from stormish.windowing import LATE_FIELDS, Count, Duration, JoinBolt, WindowedBolt

TICK = "topology.tick.tuple.freq.secs"


class Sums(WindowedBolt):
    outputs = ["total"]

    def execute_window(self, window):
        self.emit([sum(t[0] for t in window)])


def topology(bolt, config=None, stream="default"):
    t = Topology("t", config=config)
    t.set_spout("in", ListSpout([[1]], fields=["ts"]))
    t.set_bolt("w", bolt).shuffle_grouping("in", stream)
    return t


def test_the_builder_returns_the_bolt_and_sets_the_ticks_it_needs():
    b = Sums()
    assert b.with_window(Duration(seconds=20), Duration(seconds=10)) is b
    assert b.component_config == {TICK: 10.0}  # processing time: a tick per slide
    b.with_timestamp_field("ts").with_watermark_interval(0.5)
    assert b.component_config == {TICK: 0.5}  # event time: a tick per watermark interval
    assert Sums().with_window(Count(5)).component_config == {}  # count slides need none
    assert Sums().with_window(Count(5)).window_slide == Count(1)  # Storm's default slide
    tumbling = Sums().with_tumbling_window(Duration(minutes=1))
    assert tumbling.window_length == tumbling.window_slide == Duration(seconds=60)


def test_the_late_stream_is_declared_with_its_fields():
    b = Sums().with_tumbling_window(Count(2)).with_timestamp_field("ts")
    b.with_late_tuple_stream("late")
    assert b.declared_streams() == {"default": ("total",), "late": LATE_FIELDS}


def test_a_bolt_without_a_window_is_refused_at_submit():
    with pytest.raises(TopologyError, match="'w' has no window"):
        topology(Sums()).validate()


def test_a_late_stream_needs_event_time():
    b = Sums().with_tumbling_window(Count(2)).with_late_tuple_stream("late")
    with pytest.raises(TopologyError, match="needs event time"):
        topology(b).validate()


@pytest.mark.parametrize(
    "bolt, config, fits",
    [
        (Sums().with_tumbling_window(Duration(seconds=20)), {}, False),  # 20 + 20 s > 30 s
        (Sums().with_window(Duration(seconds=10), Duration(seconds=5)), {}, True),
        (Sums().with_window(Duration(seconds=20), Duration(seconds=10)), {}, False),
        (Sums().with_window(Duration(seconds=20), Duration(seconds=10)),
         {"topology.acker.executors": 0}, True),  # acking off: nothing times out
        (Sums().with_session_window(gap=20, grace=5).with_timestamp_field("ts").with_lag(5),
         {"topology.message.timeout.secs": 32}, True),  # + the 1 s watermark interval
        (Sums().with_session_window(gap=20, grace=5).with_timestamp_field("ts").with_lag(5),
         {}, False),
    ],
)  # fmt: skip
def test_the_message_timeout_must_exceed_what_a_window_holds(bolt, config, fits):
    if fits:
        topology(bolt, config).validate()
    else:
        with pytest.raises(ConfigError, match="topology.message.timeout.secs"):
            topology(bolt, config).validate()


def test_join_checks_select_and_its_streams_at_submit():
    j = JoinBolt("in", "k").with_tumbling_window(Count(2))
    with pytest.raises(TopologyError, match="select"):
        topology(j).validate()
    j = JoinBolt("in", "k").join("other", "k", "in").select("k").with_tumbling_window(Count(2))
    with pytest.raises(TopologyError, match=r"joins \['other'\].*reads \['in'\]"):
        topology(j).validate()


def test_a_window_configured_after_set_bolt_is_named_for_its_missing_ticks():
    t = Topology("late-config")
    t.set_spout("in", ListSpout([[1]]))
    b = Sums()
    t.set_bolt("w", b).shuffle_grouping("in")
    b.with_tumbling_window(Duration(seconds=10))  # too late: set_bolt took its config
    with pytest.raises(TopologyError, match=r"'w' needs tick tuples.*before set_bolt"):
        t.validate()


def _events(bolt, name="typo"):
    t = Topology(name, config={"topology.message.timeout.secs": 30})
    t.set_spout("events", ListSpout([[1, 1000.0]], fields=["id", "ts"]))
    t.set_bolt("win", bolt).global_grouping("events")
    return t


@pytest.mark.parametrize(
    "bolt, said",
    [
        (
            Sums().with_tumbling_window(Duration(seconds=10)).with_timestamp_field("tss"),
            "windowed bolt 'win': timestamp field 'tss' is not a field of input stream(s) "
            "['events:default']; the input streams' fields: {'events:default': ['id', 'ts']}",
        ),
        (
            Sums().with_session_window(gap=Duration(seconds=5), key="idd"),
            "windowed bolt 'win': session key 'idd' is not a field of input stream(s)",
        ),
    ],
    ids=["timestamp", "session_key"],
)
def test_a_field_the_window_reads_of_every_tuple_is_checked_at_submit(bolt, said):
    """A misspelt timestamp field failed every tuple in the worker (replayed for good);
    a misspelt session key grouped every tuple as one key (found by a bug hunt)."""
    with pytest.raises(TopologyError) as caught:
        _events(bolt).validate()
    assert said in str(caught.value)


def test_join_keys_and_selected_fields_are_checked_at_submit():
    """A misspelt join key joined nothing, and a misspelt selected field was None, with
    no word said."""

    def join(key, select):
        t = Topology("jk", config={"topology.message.timeout.secs": 30})
        t.set_spout("users", ListSpout([[1, "a"]], fields=["userId", "name"]))
        t.set_spout("orders", ListSpout([[1, 7]], fields=["userId", "orderId"]))
        j = JoinBolt("users", key).join("orders", "userId", "users").select(select)
        j = j.with_tumbling_window(Duration(seconds=10))
        t.set_bolt("join", j).shuffle_grouping("users").shuffle_grouping("orders")
        return t

    join("userId", "name, orderId, orders:userId").validate()
    with pytest.raises(TopologyError, match="join key 'userid' is not a field of 'users'"):
        join("userid", "name").validate()
    with pytest.raises(TopologyError, match="selected field 'nmae' is not a field of any of"):
        join("userId", "nmae").validate()
    with pytest.raises(TopologyError, match="selected field 'orders:name' is not a field of"):
        join("userId", "orders:name").validate()


def test_a_negative_size_names_what_it_sizes():
    with pytest.raises(ValueError, match="^lag: a Duration cannot be negative"):
        Sums().with_lag(-5)
    with pytest.raises(ValueError, match="^window length: a Duration cannot be negative"):
        Sums().with_window(-10, 5)


def test_a_spouts_own_max_spout_pending_is_the_one_a_count_window_is_checked_against():
    """Set on the spout (Storm's component config), pending 5 escaped the check against
    a 30 + 10 count window, which then never filled (found by a walk-through)."""
    t = Topology("wp", config={"topology.message.timeout.secs": 30})
    t.set_spout("in", ListSpout([[1]], fields=["ts"])).add_configuration(
        "topology.max.spout.pending", 5
    )
    t.set_bolt("w", Sums().with_window(Count(30), Count(10))).shuffle_grouping("in")
    with pytest.raises(ConfigError, match=r"'topology.max.spout.pending' \(5\) must be at least"):
        t.validate()


def test_a_processing_time_window_refuses_a_tick_other_than_its_slide():
    """Each tick is a slide: a tick of 7 s on a 4 s / 2 s window fired every 7 s with
    9 s of tuples (found by a walk-through)."""
    b = Sums().with_window(Duration(seconds=4), Duration(seconds=2))
    t = Topology("wt", config={"topology.message.timeout.secs": 30})
    t.set_spout("in", ListSpout([[1]], fields=["ts"]))
    t.set_bolt("w", b).shuffle_grouping("in").add_configuration(TICK, 7)
    with pytest.raises(TopologyError, match="'topology.tick.tuple.freq.secs' is 7, but a "):
        t.validate()
