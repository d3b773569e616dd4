"""Poison tuples go to a dead-letter stream, not round and round.

With `topology.max.replays` = N, a spout tuple whose tree failed N times is handed to
`Spout.fail(msg_id, failure)` as final (`failure.dead_letter`), with the reason, the
failing component and its last error, and emitted on the spout's `__dead_letter` stream
to the bolts that subscribe (`dead_letter_grouping`); counted as `dead_lettered`. The
built-in reliable spouts stop replaying it and finish."""

from __future__ import annotations

import pytest

from stormish import BasicBolt, Bolt, Failure, LocalCluster, Spout, Topology, TopologyError
from stormish.testing import CaptureBolt, ListSpout


class Poison(BasicBolt):
    """Raises on every value divisible by 7: a poison tuple fails every replay."""

    outputs = ["value"]

    def execute(self, tup):
        if tup.values[0] % 7 == 0:
            raise ValueError(f"bad row {tup.values[0]}")
        self.emit(tup.values)


def poison_topology(name: str, replays: int, workers: int = 1) -> Topology:
    t = Topology(
        name,
        config={"topology.max.replays": replays, "topology.workers": workers},
    )
    t.set_spout("rows", ListSpout([(i,) for i in range(50)]))
    t.set_bolt("poison", Poison(), parallelism=2).shuffle_grouping("rows")
    t.set_bolt("sink", CaptureBolt()).shuffle_grouping("poison")
    t.set_bolt("dead", CaptureBolt()).dead_letter_grouping("rows")
    return t


@pytest.mark.parametrize("workers", [1, 2])
def test_a_poison_tuple_is_dead_lettered_after_max_replays_and_the_run_completes(workers):
    with LocalCluster() as cluster:
        cluster.submit(poison_topology("poison", replays=3, workers=workers))
        stats = cluster.wait_complete("poison", timeout=60)
        results = cluster._get("poison").results()
    poisoned = [i for i in range(50) if i % 7 == 0]
    (spout,) = results["rows"]
    assert sorted(spout["dead"]) == poisoned
    for i in poisoned:
        assert spout["failed"][i] == 3  # failed 3 times, the third final
        assert spout["dead"][i] == {
            "reason": "failed",
            "component": "poison",
            "error": f"ValueError: bad row {i}",
            "failures": 3,
            "dead_letter": True,
        }
    assert sorted(spout["acked"]) == [i for i in range(50) if i % 7]
    dead = sorted(results["dead"][0])
    assert dead == [(i, "default", (i,), "poison", f"ValueError: bad row {i}", 3) for i in poisoned]
    assert stats.components["rows"].dead_lettered == len(poisoned)
    assert stats.components["rows"].failed == 3 * len(poisoned)
    assert sorted(v for (v,) in [r for part in results["sink"] for r in part]) == [
        i for i in range(50) if i % 7
    ]


class Holds(Bolt):
    """Never acks: every tree times out."""

    def execute(self, tup):
        pass


class OldStyleSpout(Spout):
    """A Storm-style spout: `fail(msg_id)` only, replays what fails until told nothing;
    finishes when every id was acked or failed `limit` times."""

    outputs = ["v"]

    def open(self, conf, context):
        self.todo, self.fails, self.done = [0, 1], {}, set()

    def next_tuple(self):
        if self.todo:
            i = self.todo.pop()
            self.emit([i], msg_id=i)
        elif len(self.done) == 2:
            self.finish()

    def fail(self, msg_id):
        self.fails[msg_id] = self.fails.get(msg_id, 0) + 1
        if self.fails[msg_id] < 2:
            self.todo.append(msg_id)
        else:
            self.done.add(msg_id)

    def result(self):
        return self.fails


def test_timed_out_trees_are_dead_lettered_with_the_reason():
    t = Topology(
        "timeouts",
        config={"topology.max.replays": 2, "topology.message.timeout.secs": 0.3},
    )
    t.set_spout("rows", ListSpout([(1,), (2,)]))
    t.set_bolt("hold", Holds()).shuffle_grouping("rows")
    t.set_bolt("dead", CaptureBolt()).dead_letter_grouping("rows", ["component"])
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("timeouts", timeout=60)
        results = cluster._get("timeouts").results()
    (spout,) = results["rows"]
    assert {i: d["reason"] for i, d in spout["dead"].items()} == {0: "timed out", 1: "timed out"}
    assert all(d["component"] is None and d["failures"] == 2 for d in spout["dead"].values())
    assert sorted(r[0] for r in results["dead"][0]) == [0, 1]
    assert stats.components["rows"].timed_out == 4
    assert stats.components["rows"].dead_lettered == 2


def test_a_spout_whose_fail_takes_only_the_id_is_called_as_in_storm():
    t = Topology(
        "old",
        config={"topology.max.replays": 1, "topology.message.timeout.secs": 0.3},
    )
    t.set_spout("s", OldStyleSpout())
    t.set_bolt("hold", Holds()).shuffle_grouping("s")
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("old", timeout=60)
        (fails,) = cluster._get("old").results()["s"]
    assert fails == {0: 2, 1: 2}
    assert stats.components["s"].dead_lettered == 4  # max.replays 1: every failure is final


def test_without_max_replays_nothing_is_dead_lettered():
    """Storm's default: a failing tree is replayed for ever (here: until it passes)."""

    class FailTwice(BasicBolt):
        outputs = ["value"]

        def prepare(self, conf, context):
            self.seen = {}

        def execute(self, tup):
            n = self.seen[tup.values] = self.seen.get(tup.values, 0) + 1
            if n <= 2:
                raise RuntimeError("not yet")
            self.emit(tup.values)

    t = Topology("forever")
    t.set_spout("rows", ListSpout([(i,) for i in range(5)]))
    t.set_bolt("flaky", FailTwice()).shuffle_grouping("rows")
    t.set_bolt("dead", CaptureBolt()).dead_letter_grouping("rows")
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("forever", timeout=60)
        results = cluster._get("forever").results()
    assert results["dead"] == [[]]
    assert stats.components["rows"].dead_lettered == 0
    assert results["rows"][0]["failed"] == {i: 2 for i in range(5)}


def test_failure_records_say_why():
    f = Failure("failed", "poison", "ValueError: x", 3, True)
    assert f.as_dict()["dead_letter"] is True and f.failures == 3


def test_dead_letter_subscriptions_are_checked_when_built():
    t = Topology("bad")
    t.set_spout("rows", ListSpout([(1,)]))
    t.set_bolt("mid", Poison()).shuffle_grouping("rows")
    # a bolt's dead letters (its DEAD_LETTER batch results) may be subscribed too
    t.set_bolt("dead", CaptureBolt()).dead_letter_grouping("mid")
    with pytest.raises(TopologyError, match="unknown field"):
        t.set_bolt("dead2", CaptureBolt()).dead_letter_grouping("rows", ["nope"])
    t.set_bolt("dead3", CaptureBolt()).dead_letter_grouping("rows", ["error"])
    t.validate()


class Refuses(BasicBolt):
    """Fails every odd value on purpose (Storm's FailedException), reporting value 3."""

    outputs = ["value"]

    def execute(self, tup):
        from stormish import FailedException, ReportedFailedException

        v = tup.values[0]
        if v == 3:
            raise ReportedFailedException(f"refused {v}, reported")
        if v % 2:
            raise FailedException(f"refused {v}")
        self.emit(tup.values)


def test_failed_exception_fails_the_tuple_without_ending_a_fail_fast_run():
    """Raising FailedException is a deliberate fail, not a programming error: with
    topology.fail.fast on the run goes on, the spout hears why, nothing is reported;
    ReportedFailedException is counted as an error and still does not end the run."""
    t = Topology("refuse", config={"topology.fail.fast": True, "topology.max.replays": 2})
    t.set_spout("rows", ListSpout([(i,) for i in range(10)]))
    t.set_bolt("refuse", Refuses()).shuffle_grouping("rows")
    t.set_bolt("dead", CaptureBolt()).dead_letter_grouping("rows")
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("refuse", timeout=60)
        results = cluster._get("refuse").results()
    (spout,) = results["rows"]
    assert sorted(spout["dead"]) == [1, 3, 5, 7, 9]
    assert spout["dead"][1]["error"] == "FailedException: refused 1"
    assert stats.components["refuse"].errors == 2  # value 3, reported on each of 2 tries
    assert sorted(spout["acked"]) == [0, 2, 4, 6, 8]
