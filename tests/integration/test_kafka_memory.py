"""KafkaSpout in a running topology against the in-memory log (stormish.testing.MemoryLog):
storm-kafka-client's scenarios end to end, each with the exact count."""

from __future__ import annotations

import itertools
import threading
from collections import Counter

import pytest

from stormish import LocalCluster, Topology
from stormish.kafka import KafkaSpout, Retry, ToStream
from stormish.testing import CaptureBolt, MemoryLog, poll_for, run_topology

from .kafka_helpers import Hold, Note, check_order, fill, seen

_names = itertools.count()


@pytest.fixture
def log():
    with MemoryLog(f"kafka-mem-{next(_names)}") as log:
        yield log


def run(topology: Topology, timeout: float = 30.0, config: dict | None = None):
    with LocalCluster(config=config) as cluster:
        cluster.submit(topology)
        return cluster.wait_complete(topology.name, timeout=timeout)


def test_finite_run_sums_exactly_keeps_partition_order_and_commits_the_end(log):
    total = fill(log, "in", 4, 300)
    t = Topology("kmem-sum")
    t.set_spout("k", KafkaSpout(log.address, topics="in", group_id="g", stop_at_end=True))
    t.set_bolt("note", Note("kmem-sum"), parallelism=2).fields_grouping("k", ["partition"])
    t.set_bolt("lanes", Note("kmem-sum-lanes"), parallelism=2).ordered_lanes(
        "k", key=["partition"], lanes=8
    )
    stats = run(t)
    rows = seen("kmem-sum")
    assert len(rows) == 1200
    assert sum(int(v) for *_, v in rows) == total
    check_order(rows)
    check_order(seen("kmem-sum-lanes"))  # a partition is an ordered lane downstream too
    assert len(seen("kmem-sum-lanes")) == 1200
    assert [log.committed("g", "in", p) for p in range(4)] == [300] * 4
    assert stats.components["k"].gauges == {f"lag:in/{p}": 0 for p in range(4)}
    assert not [t for t in threading.enumerate() if t.name.startswith("kafka-feed")]


def test_failed_offset_is_replayed_alone_and_the_commit_waits_for_it(log):
    # KafkaSpoutCommitTest: 11 records, offset 1 fails once; 2..10 are not re-emitted
    fill(log, "in", 1, 11)
    spout = KafkaSpout(log.address, topics="in", group_id="g", stop_at_end=True)
    t = Topology("kmem-replay")
    t.set_spout("k", spout)
    t.set_bolt("note", Note("kmem-replay", poison_once={(0, 1)})).shuffle_grouping("k")
    stats = run(t)
    times = Counter(o for _, _, o, _ in seen("kmem-replay"))
    assert times == {o: 1 for o in range(11)}  # offset 1 noted once: its first try raised
    assert stats.components["k"].emitted == 12  # 11 and the one replay
    assert log.committed("g", "in", 0) == 11


def test_retry_limit_sends_the_record_to_the_dead_letter_stream_with_the_reason(log):
    # KafkaSpoutRetryLimitTest: past max_retries the record is given up and committed past
    fill(log, "in", 1, 5)
    spout = KafkaSpout(
        log.address, topics="in", group_id="g", stop_at_end=True, retry=Retry(max_retries=2)
    )
    t = Topology("kmem-dead")
    t.set_spout("k", spout)
    t.set_bolt("note", Note("kmem-dead", poison={(0, 3)})).shuffle_grouping("k")
    t.set_bolt("dead", CaptureBolt()).dead_letter_grouping("k")
    out = run_topology(t, timeout=30)
    dead = out.captured["dead"]
    assert sorted(o for _, _, o, _ in seen("kmem-dead")) == [0, 1, 2, 4]
    assert len(dead) == 1
    msg_id, stream, values, component, error, failures = dead[0]
    assert values[:3] == ("in", 0, 3) and component == "k" and failures == 3
    assert "poison record (0, 3)" in error
    assert out.stats.components["k"].dead_lettered == 1
    assert log.committed("g", "in", 0) == 5


def test_max_uncommitted_pauses_the_partition_with_exactly_that_many_in_flight(log):
    # MaxUncommittedOffsetTest: 250 unacked -> the partition is paused, nothing more polled
    fill(log, "in", 1, 600)
    spout = KafkaSpout(log.address, topics="in", group_id="g", max_uncommitted_offsets=250)
    t = Topology("kmem-max")
    t.set_spout("k", spout)
    t.set_bolt("hold", Hold("kmem-max")).shuffle_grouping("k")
    with LocalCluster() as cluster:
        cluster.submit(t)
        member = poll_for(lambda: log.groups["g"].members, 10, 0.01, "the spout joins")[0]
        poll_for(lambda: ("in", 0) in member.paused, 10, 0.01, "the partition is paused")
        poll_for(lambda: len(seen("kmem-max")) >= 250, 10, 0.01, "250 held")
        stats = cluster.statistics(t.name)
        assert len(seen("kmem-max")) == 250
        assert stats.components["k"].emitted == 250
        assert ("in", 0) in member.paused
        cluster.kill(t.name)
    assert log.committed("g", "in", 0) == 0  # nothing completed: the start, on close


def test_a_second_topology_joining_the_group_takes_partitions_with_nothing_lost(log):
    # KafkaSpoutRebalanceTest, end to end: the first owner drains and commits on revoke
    fill(log, "in", 4, 250)
    config = {"topology.max.spout.pending": 50}

    def topology(name: str) -> Topology:
        t = Topology(name, config=config)
        t.set_spout(
            "k", KafkaSpout(log.address, topics="in", group_id="g", commit_interval_secs=0.1)
        )
        t.set_bolt("note", Note("kmem-rebalance")).shuffle_grouping("k")
        return t

    with LocalCluster() as cluster:
        cluster.submit(topology("kmem-a"))
        poll_for(lambda: len(seen("kmem-rebalance")) >= 100, 10, 0.01, "a has begun")
        cluster.submit(topology("kmem-b"))
        owners = lambda: [m.owned for m in log.groups["g"].members]  # noqa: E731
        poll_for(lambda: all(owners()) and len(owners()) == 2, 10, 0.01, "both own some")
        for i in range(250, 500):  # more records after the handover
            for p in range(4):
                log.produce("in", str(i * 4 + p).encode(), partition=p)
        poll_for(
            lambda: [log.committed("g", "in", p) for p in range(4)] == [500] * 4,
            20,
            0.01,
            "everything committed",
        )
    rows = seen("kmem-rebalance")
    times = Counter((p, o) for _, p, o, _ in rows)
    assert set(times) == {(p, o) for p in range(4) for o in range(500)}  # nothing lost
    dups = sum(n - 1 for n in times.values())
    assert dups == 0, f"{dups} records processed twice: the revoke drained, so none should"
    assert log.rejected_commits == 0
    kinds = [e[0] for e in log.events]
    assert kinds.count("revoke") >= 1 and kinds.count("assign") >= 3


def test_at_most_once_commits_before_emitting_and_never_replays_a_failure(log):
    fill(log, "in", 1, 11)
    spout = KafkaSpout(
        log.address,
        topics="in",
        group_id="g",
        stop_at_end=True,
        processing_guarantee="at_most_once",
    )
    t = Topology("kmem-amo")
    t.set_spout("k", spout)
    t.set_bolt("note", Note("kmem-amo", poison_once={(0, 1)})).shuffle_grouping("k")
    stats = run(t)
    assert sorted(o for _, _, o, _ in seen("kmem-amo")) == [0, *range(2, 11)]  # 1 is lost
    assert stats.components["k"].emitted == 11
    assert log.committed("g", "in", 0) == 11


def test_no_guarantee_commits_periodically_what_was_emitted(log):
    fill(log, "in", 2, 50)
    spout = KafkaSpout(
        log.address,
        topic_pattern="^i.$",
        group_id="g",
        stop_at_end=True,
        processing_guarantee="no_guarantee",
        commit_interval_secs=0.01,
    )
    t = Topology("kmem-nog")
    t.set_spout("k", spout)
    t.set_bolt("note", Note("kmem-nog")).shuffle_grouping("k")
    run(t)
    assert len(seen("kmem-nog")) == 100
    assert [log.committed("g", "in", p) for p in (0, 1)] == [50, 50]


def test_translator_streams_skips_and_stream_per_topic(log):
    fill(log, "a", 1, 6)
    fill(log, "b", 1, 4)

    def translate(r):
        v = int(r.value)
        if v == 0:
            return None  # skipped, and still committed past
        return ToStream("odd", (v,)) if v % 2 else (r.topic, v)

    t = Topology("kmem-translate")
    t.set_spout(
        "k",
        KafkaSpout(
            log.address,
            topics=["a", "b"],
            group_id="g",
            stop_at_end=True,
            translator=translate,
            fields=("topic", "v"),
            streams={"odd": ("v",)},
        ),
    )
    t.set_bolt("even", CaptureBolt()).shuffle_grouping("k")
    t.set_bolt("odd", CaptureBolt()).shuffle_grouping("k", stream="odd")
    t.set_spout(
        "per_topic",
        KafkaSpout(
            log.address, topics=["a", "b"], group_id="g2", stop_at_end=True, stream_per_topic=True
        ),
    )
    t.set_bolt("from_b", CaptureBolt()).shuffle_grouping("per_topic", stream="b")
    out = run_topology(t, timeout=30)
    assert sorted(out.captured["even"]) == [("a", 2), ("a", 4), ("b", 2)]
    assert sorted(out.captured["odd"]) == [(1,), (1,), (3,), (3,), (5,)]
    assert sorted(r[2] for r in out.captured["from_b"]) == [0, 1, 2, 3]
    assert (log.committed("g", "a", 0), log.committed("g", "b", 0)) == (6, 4)


def test_two_spout_tasks_in_one_group_split_the_partitions(log):
    total = fill(log, "in", 4, 200)
    t = Topology("kmem-two")
    t.set_spout(
        "k", KafkaSpout(log.address, topics="in", group_id="g", stop_at_end=True), parallelism=2
    )
    t.set_bolt("note", Note("kmem-two")).shuffle_grouping("k")
    stats = run(t)
    rows = seen("kmem-two")
    assert len(rows) == 800 and sum(int(v) for *_, v in rows) == total, log.events
    assert [log.committed("g", "in", p) for p in range(4)] == [200] * 4
    owners = {e[2] for e in log.events if e[0] == "assign" and e[3]}
    assert len(owners) == 2, log.events  # both members were given partitions
    assert stats.components["k"].tasks == 2


def test_latest_reads_only_what_comes_after_the_assignment(log):
    fill(log, "in", 1, 5)
    spout = KafkaSpout(log.address, topics="in", group_id="g", first_poll_offset="latest")
    t = Topology("kmem-latest")
    t.set_spout("k", spout)
    t.set_bolt("note", Note("kmem-latest")).shuffle_grouping("k")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(lambda: any(e[0] == "assign" for e in log.events), 10, 0.01, "assigned")
        poll_for(lambda: cluster.statistics(t.name).components["k"].gauges, 10, 0.01, "lag")
        for v in (100, 101):
            log.produce("in", str(v).encode(), partition=0)
        poll_for(lambda: len(seen("kmem-latest")) == 2, 10, 0.01, "the two new records")
    assert [int(v) for *_, v in seen("kmem-latest")] == [100, 101]
    assert log.committed("g", "in", 0) == 7


def test_commit_offsets_false_leaves_committing_to_someone_else(log):
    fill(log, "in", 2, 20)
    spout = KafkaSpout(
        log.address, topics="in", group_id="g", stop_at_end=True, commit_offsets=False
    )
    t = Topology("kmem-nocommit")
    t.set_spout("k", spout)
    t.set_bolt("note", Note("kmem-nocommit")).shuffle_grouping("k")
    run(t)
    assert len(seen("kmem-nocommit")) == 40
    assert [log.committed("g", "in", p) for p in (0, 1)] == [None, None]


def test_with_acking_off_at_least_once_commits_what_it_emitted(log):
    fill(log, "in", 2, 30)
    t = Topology("kmem-noack", config={"topology.acker.executors": 0})
    t.set_spout("k", KafkaSpout(log.address, topics="in", group_id="g", stop_at_end=True))
    t.set_bolt("note", Note("kmem-noack")).shuffle_grouping("k")
    run(t)
    assert len(seen("kmem-noack")) == 60
    assert [log.committed("g", "in", p) for p in (0, 1)] == [30, 30]
