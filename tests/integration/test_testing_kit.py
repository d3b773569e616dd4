"""The Storm-style test kit itself (stormish.testing): complete_topology, FeederSpout,
tracked_wait and advance_time, beyond what the Storm ports exercise."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from stormish import BasicBolt, Bolt, LocalCluster, Spout, StormishError, Topology, TopologyError
from stormish.testing import (
    FakeClock,
    FeederSpout,
    advance_time,
    complete_topology,
    tracked_wait,
)

pytestmark = pytest.mark.timeout(120)


class Pairs(Spout):
    streams = {"default": ["k", "v"], "side": ["note"]}

    def next_tuple(self):
        self.finish()


class Upper(BasicBolt):
    streams = {"default": ["k", "v"], "odd": ["v"]}

    def execute(self, tup):
        self.emit([tup["k"].upper(), tup["v"]])
        if tup["v"] % 2:
            self.emit([tup["v"]], stream="odd")


def pairs_topology():
    t = Topology("kit")
    t.set_spout("src", Pairs())
    t.set_bolt("up", Upper(), parallelism=2).fields_grouping("src", ["k"])
    return t


def test_importing_the_kit_imports_neither_zeromq_nor_the_runtime():
    import subprocess
    import sys

    code = (
        "import sys, stormish.testing\n"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'zmq' "
        "or m.startswith('stormish.runtime')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_complete_topology_reads_every_stream_and_takes_rows_per_stream():
    rows = [["a", 1], ["b", 2], ["a", 3]]
    res = complete_topology(pairs_topology(), mock_sources={"src": {"default": rows}})
    assert sorted(res.read_tuples("src")) == sorted(rows)
    assert res.read_tuples("src", "side") == []
    assert sorted(res.read_tuples("up")) == [["A", 1], ["A", 3], ["B", 2]]
    assert sorted(res.read_tuples("up", "odd")) == [[1], [3]]
    assert res.stats.components["src"].acked == 3  # each mock tuple once, reliably
    with pytest.raises(KeyError, match="'nope'"):
        res.read_tuples("nope")


@pytest.mark.parametrize(
    ("sources", "match"),
    [
        ({"missing": [["a", 1]]}, "'missing', which is not a spout"),
        ({"up": [["a", 1]]}, "'up', which is not a spout"),
        ({"src": [["a"]]}, "row 0: \\['a'\\] does not match the fields \\['k', 'v'\\]"),
        ({"src": {"other": []}}, "declares no stream 'other'"),
    ],
)
def test_mock_sources_are_checked_before_anything_runs(sources, match):
    with pytest.raises(TopologyError, match=match):
        complete_topology(pairs_topology(), mock_sources=sources)


def test_feeder_refuses_a_row_of_the_wrong_width_and_a_running_copy_cannot_be_asked():
    import cloudpickle

    with FeederSpout(["a", "b"]) as feeder:
        with pytest.raises(ValueError, match=r"1 values \[1\] for the fields \['a', 'b'\]"):
            feeder.feed([1])
        copy = cloudpickle.loads(cloudpickle.dumps(feeder))
        with pytest.raises(RuntimeError, match="running copy"):
            copy.is_acked(1)


def test_feeder_channel_lives_in_a_private_directory_removed_on_close():
    feeder = FeederSpout(["x"])
    path = feeder._address[len("ipc://") :]
    directory = os.path.dirname(path)
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    feeder.close()
    feeder.close()  # twice is fine
    assert not os.path.exists(directory)
    with pytest.raises(RuntimeError, match="after close"):
        feeder.feed([1])


class Acker(Bolt):
    def execute(self, tup):
        self.ack(tup)


def test_tuples_fed_before_the_topology_is_up_are_emitted(tmp_path):
    with FeederSpout(["x"]) as feeder, LocalCluster() as cluster:
        ids = [feeder.feed([i]) for i in range(100)]  # nothing runs yet
        t = Topology("early")
        t.set_spout("in", feeder, parallelism=2)
        t.set_bolt("ack", Acker(), parallelism=2).shuffle_grouping("in")
        cluster.submit(t)
        tracked_wait(cluster, "early", 100)
        assert sorted(feeder.acked) == sorted(ids)
        assert feeder.emitted == 100


def test_tracked_wait_needs_a_feeder():
    t = pairs_topology()
    with LocalCluster() as cluster:
        cluster.submit(t)
        with pytest.raises(StormishError, match="no FeederSpout"):
            tracked_wait(cluster, "kit")


def test_advance_time_needs_a_fake_clock():
    with LocalCluster() as cluster, pytest.raises(StormishError, match="FakeClock"):
        advance_time(cluster, 1)


class Ticks(Bolt):
    """Counts its tick tuples where the test sees them (one in-process worker)."""

    seen: list[float] = []

    def prepare(self, conf, context):
        self.clock = context.clock

    def execute(self, tup):
        if tup.is_tick:
            Ticks.seen.append(self.clock.now())
        else:
            self.ack(tup)


def test_tick_tuples_follow_the_fake_clock():
    Ticks.seen = []
    with FeederSpout(["x"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        t = Topology("ticks")
        t.set_spout("in", feeder)
        t.set_bolt("t", Ticks()).shuffle_grouping("in").set_tick_frequency(5)
        cluster.submit(t)
        advance_time(cluster, 4)
        assert Ticks.seen == []
        advance_time(cluster, 16)
        assert Ticks.seen == [5.0, 10.0, 15.0, 20.0]  # each at its time, none made up


class AckEveryOther(Bolt):
    def prepare(self, conf, context):
        self.n = 0

    def execute(self, tup):
        self.n += 1
        if self.n % 2:
            self.ack(tup)


def test_a_feeder_at_max_spout_pending_holds_fed_tuples_and_time_still_moves():
    conf = {"topology.message.timeout.secs": 10, "topology.max.spout.pending": 1}
    with FeederSpout(["x"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        t = Topology("pending", config=conf)
        t.set_spout("in", feeder)
        t.set_bolt("b", AckEveryOther()).global_grouping("in")
        cluster.submit(t)
        advance_time(cluster, 1)
        for i in (1, 2, 3):
            feeder.feed([i], i)
        advance_time(cluster, 5)
        assert feeder.acked == [1] and feeder.emitted == 2  # 3 waits: 2 is in flight
        advance_time(cluster, 15)
        assert feeder.failed == [2] and feeder.acked == [1, 3]


def test_a_deactivated_feeder_gives_back_what_it_was_handed():
    with FeederSpout(["x"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        t = Topology("pause")
        t.set_spout("in", feeder)
        t.set_bolt("b", Acker()).shuffle_grouping("in")
        cluster.submit(t)
        feeder.feed([1], 1)
        advance_time(cluster, 1)
        assert feeder.acked == [1]
        cluster.deactivate("pause")
        advance_time(cluster, 1)
        feeder.feed([2], 2)
        advance_time(cluster, 1)
        assert feeder.emitted == 1 and feeder.acked == [1]
        cluster.activate("pause")
        advance_time(cluster, 1)
        assert feeder.acked == [1, 2]


class Stuck(Bolt):
    entered = threading.Event()
    release = threading.Event()

    def execute(self, tup):
        Stuck.entered.set()
        Stuck.release.wait(30)  # real time: not asleep in the clock
        self.ack(tup)


def test_advance_time_names_an_executor_busy_in_user_code():
    Stuck.entered.clear()
    Stuck.release.clear()
    try:
        with FeederSpout(["x"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
            t = Topology("stuck")
            t.set_spout("in", feeder)
            t.set_bolt("slow", Stuck()).shuffle_grouping("in")
            cluster.submit(t)
            advance_time(cluster, 1)
            feeder.feed([1])
            assert Stuck.entered.wait(30)
            with pytest.raises(TimeoutError, match=r"slow\[\d+\] has not looped"):
                advance_time(cluster, 1, timeout=0.5)
            Stuck.release.set()
            advance_time(cluster, 1)
            assert len(feeder.acked) == 1
    finally:
        Stuck.release.set()
