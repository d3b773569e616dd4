"""storm-kafka-client's spout tests (KafkaSpoutNullTupleTest, KafkaSpoutSingleTopicTest,
KafkaSpoutReactivationTest, KafkaSpoutMessagingGuaranteeTest, KafkaSpoutRebalanceTest,
MaxUncommittedOffsetTest, KafkaSpoutTopologyDeployActivateDeactivateTest) ported to
running topologies: real workers in a LocalCluster, against the real (Tansu) broker, or
the in-memory log where a step must be placed exactly.
Each docstring names the Storm test it ports. Two failed on the code before their fix:

- a record the translator skips (None) completes at once; when that completion brought a
  paused partition back under max_uncommitted_offsets the Resume was dropped: the
  partition stayed paused at the consumer, never read again;
- librdkafka keeps a partition's pause through a revoke: a paused partition given back to
  the same spout stayed paused while its new lane was not, so nothing resumed it.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections import Counter
from typing import Any

import pytest
from brokers import KAFKA_FAST_GROUP

from stormish import BasicBolt, LocalCluster, Topology
from stormish.kafka import KafkaSpout, Retry
from stormish.testing import CaptureBolt, MemoryLog, poll_for, run_topology

from . import kafka_helpers
from .kafka_helpers import Note, fill, seen
from .test_kafka_broker import committed

pytestmark = pytest.mark.timeout(120)
_n = itertools.count()
GATES: dict[str, threading.Event] = {}


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_n)}-{uuid.uuid4().hex[:6]}"


class Gated(BasicBolt):
    """Notes each record (as kafka_helpers.Note), then holds its tree open until the test
    opens the gate of its key (the topologies run in this process)."""

    outputs: Any = ()

    def __init__(self, key: str):
        self.key = key

    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.task_id

    def execute(self, tup: Any) -> None:
        with kafka_helpers._LOCK:
            kafka_helpers.SEEN[self.key].append(
                (self.task, tup["partition"], tup["offset"], tup["value"])
            )
        assert GATES[self.key].wait(60), "the gate never opened"


def gate(key: str) -> threading.Event:
    GATES[key] = threading.Event()
    return GATES[key]


# -- the real broker -------------------------------------------------------------------------
ck = pytest.importorskip("confluent_kafka", reason="pip install 'stormish[kafka]'")


def make_topic(address: str, partitions: int, n: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = unique("t")
    admin = AdminClient({"bootstrap.servers": address})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(20)
    produce(address, topic, partitions, 0, n)
    return topic


def produce(address: str, topic: str, partitions: int, start: int, n: int) -> None:
    producer = ck.Producer({"bootstrap.servers": address, "linger.ms": 5})
    for i in range(start, start + n):
        for p in range(partitions):
            producer.produce(topic, str(i).encode(), partition=p)
    assert producer.flush(20) == 0


def spout(address: str, topic: str, group: str, **kw: Any) -> KafkaSpout:
    return KafkaSpout(address, topics=topic, group_id=group, consumer_config=KAFKA_FAST_GROUP, **kw)


def test_null_tuples_are_committed_without_emitting(kafka):
    """KafkaSpoutNullTupleTest.testShouldCommitAllMessagesIfNotSetToEmitNullTuples: a
    translator that returns None for every record: nothing is emitted, all is committed."""
    topic, group = make_topic(kafka.address, 1, 10), unique("g")
    t = Topology("kport-null")
    t.set_spout(
        "k", spout(kafka.address, topic, group, stop_at_end=True, translator=lambda r: None)
    )
    t.set_bolt("c", CaptureBolt()).shuffle_grouping("k")
    out = run_topology(t, timeout=60)
    assert out.captured["c"] == []
    assert out.stats.components["k"].emitted == 0
    assert committed(kafka.address, group, topic) == [10]


def test_null_tuples_resume_a_partition_paused_at_max_uncommitted(kafka):
    """KafkaSpoutNullTupleTest with MaxUncommittedOffsetTest's limit: the skipped records'
    completions bring the partition back under max_uncommitted_offsets, and it is resumed.
    Failed before the fix: the Resume was dropped, the commit stayed at 5 for good."""
    topic, group = make_topic(kafka.address, 1, 5), unique("g")
    t = Topology("kport-null-paused")
    k = spout(
        kafka.address, topic, group, translator=lambda r: None, max_uncommitted_offsets=5,
        commit_interval_secs=0.05,
    )  # fmt: skip
    t.set_spout("k", k)
    t.set_bolt("c", CaptureBolt()).shuffle_grouping("k")
    with LocalCluster() as cluster:
        cluster.submit(t)
        # 5 fetched: the partition was paused (the pause is sent before this commit)
        poll_for(lambda: committed(kafka.address, group, topic) == [5], 30, 0.1, "5 committed")
        produce(kafka.address, topic, 1, 5, 15)
        poll_for(
            lambda: committed(kafka.address, group, topic) == [20], 20, 0.1, "all 20 committed"
        )


def test_first_tuple_failed_out_of_order_is_replayed_and_all_committed(kafka):
    """KafkaSpoutSingleTopicTest.shouldReplayFirstTupleFailedOutOfOrder: offset 0 fails
    (after offset 1 completed); it alone is replayed, and everything is committed."""
    topic, group, key = make_topic(kafka.address, 1, 10), unique("g"), unique("first")
    t = Topology("kport-first")
    t.set_spout("k", spout(kafka.address, topic, group, stop_at_end=True))
    t.set_bolt("note", Note(key, poison_once={(0, 0)})).shuffle_grouping("k")
    out = run_topology(t, timeout=60)
    assert Counter(o for _, _, o, _ in seen(key)) == {o: 1 for o in range(10)}
    assert out.stats.components["k"].emitted == 11  # the ten and one replay
    assert committed(kafka.address, group, topic) == [10]


def test_a_record_failing_every_time_is_emitted_max_retries_plus_one_times(kafka):
    """KafkaSpoutSingleTopicTest.testShouldDropMessagesAfterMaxRetriesAreReached (max
    retries 3): the record goes out 4 times, then is given up and committed past."""
    topic, group, key = make_topic(kafka.address, 1, 3), unique("g"), unique("drop")
    t = Topology("kport-drop")
    t.set_spout(
        "k",
        spout(kafka.address, topic, group, stop_at_end=True, retry=Retry(max_retries=3)),
    )
    t.set_bolt("note", Note(key, poison={(0, 1)})).shuffle_grouping("k")
    t.set_bolt("dead", CaptureBolt()).dead_letter_grouping("k")
    out = run_topology(t, timeout=60)
    assert out.stats.components["k"].emitted == 3 + 3  # offset 1: first try and 3 retries
    assert [row[2][2] for row in out.captured["dead"]] == [1]
    assert sorted(o for _, _, o, _ in seen(key)) == [0, 2]
    assert committed(kafka.address, group, topic) == [3]


@pytest.mark.parametrize("mode", ["earliest", "uncommitted_earliest"])
def test_reactivation_resumes_where_it_left_off(kafka, mode):
    """KafkaSpoutReactivationTest.testSpoutShouldResumeWhereItLeftOffWithEarliestStrategy
    and ...WithUncommittedEarliestStrategy: deactivate commits what completed, acks while
    deactivated are taken, activate goes on from there: every record once, all committed."""
    topic, group, key = make_topic(kafka.address, 1, 20), unique("g"), unique("react")
    t = Topology(f"kport-react-{mode}")
    k = spout(
        kafka.address, topic, group, first_poll_offset=mode, max_uncommitted_offsets=7,
        commit_interval_secs=0.05,
    )  # fmt: skip
    t.set_spout("k", k)
    t.set_bolt("note", Gated(key)).shuffle_grouping("k")
    opened = gate(key)
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(lambda: len(seen(key)) >= 1, 30, 0.02, "the first record held")
        cluster.deactivate(t.name)
        opened.set()  # the held trees complete while the spout is deactivated
        cluster.activate(t.name)
        poll_for(lambda: committed(kafka.address, group, topic) == [20], 30, 0.1, "committed")
    assert Counter(o for _, _, o, _ in seen(key)) == {o: 1 for o in range(20)}


@pytest.mark.parametrize("guarantee", ["at_most_once", "no_guarantee"])
def test_at_most_once_and_no_guarantee_disregard_max_uncommitted(kafka, guarantee):
    """KafkaSpoutMessagingGuaranteeTest.testAtMostOnceModeDisregardsMaxUncommittedOffsets
    and testNoGuaranteeModeDisregardsMaxUncommittedOffsets: with trees held open, every
    record is emitted anyway (the limit means something at least once only)."""
    topic, group, key = make_topic(kafka.address, 1, 30), unique("g"), unique("mode")
    held = unique("held")
    t = Topology(f"kport-{guarantee}")
    k = spout(
        kafka.address, topic, group, processing_guarantee=guarantee, max_uncommitted_offsets=5
    )
    t.set_spout("k", k)
    t.set_bolt("note", Note(key)).shuffle_grouping("k")
    t.set_bolt("held", Gated(held)).shuffle_grouping("k")
    opened = gate(held)
    with LocalCluster() as cluster:
        cluster.submit(t)
        try:
            poll_for(lambda: len(seen(key)) == 30, 30, 0.02, "all 30 emitted")
        finally:
            opened.set()


def test_a_paused_partition_given_back_after_a_revoke_is_read_again(kafka):
    """KafkaSpoutRebalanceTest (a re-assigned partition resumes from its committed
    offset) with MaxUncommittedOffsetTest's pause, on librdkafka: the partition is paused
    (5 trees held open), another member joins the group (subscribed to another topic, so
    the partition comes back to the spout), the revoke times out on the held trees. Failed
    before the fix: librdkafka kept the partition paused through the revoke and the new
    lane never resumed it: nothing more was read."""
    topic, group, key = make_topic(kafka.address, 1, 30), unique("g"), unique("back")
    other_topic = make_topic(kafka.address, 1, 0)
    t = Topology("kport-back", config={"topology.message.timeout.secs": 60})
    k = spout(
        kafka.address, topic, group, max_uncommitted_offsets=5, revoke_timeout_secs=1,
        commit_interval_secs=0.05,
    )  # fmt: skip
    t.set_spout("k", k)
    t.set_bolt("note", Gated(key)).shuffle_grouping("k")
    opened = gate(key)
    assigned = threading.Event()
    with LocalCluster() as cluster:
        cluster.submit(t)
        # the first tree is held: the partition's pause was sent before it was emitted
        poll_for(lambda: len(seen(key)) >= 1, 30, 0.02, "the first record held")
        other = ck.Consumer({"bootstrap.servers": kafka.address, "group.id": group,
                             **KAFKA_FAST_GROUP})  # fmt: skip
        try:
            other.subscribe([other_topic], on_assign=lambda c, parts: assigned.set())
            poll_for(lambda: other.poll(0.1) is None and assigned.is_set(), 60, 0, "rebalanced")
            opened.set()
            poll_for(
                lambda: committed(kafka.address, group, topic) == [30], 30, 0.1, "all committed"
            )
        finally:
            opened.set()
            other.close()
    offsets = {o for _, _, o, _ in seen(key)}
    assert offsets == set(range(30))


# -- the in-memory log: the same two fixes, each step placed exactly ------------------------
def test_null_tuples_resume_a_paused_partition_memory():
    """As test_null_tuples_resume_a_partition_paused_at_max_uncommitted, on the in-memory
    log, the pause seen at the consumer. Failed before the fix (the commit stayed at 5,
    the partition paused)."""
    name = unique("null-mem")
    with MemoryLog(name) as log:
        fill(log, "in", 1, 5)
        t = Topology(name)
        k = KafkaSpout(
            log.address, topics="in", group_id="g", translator=lambda r: None,
            max_uncommitted_offsets=5, commit_interval_secs=0.01,
        )  # fmt: skip
        t.set_spout("k", k)
        t.set_bolt("c", CaptureBolt()).shuffle_grouping("k")
        with LocalCluster() as cluster:
            cluster.submit(t)
            poll_for(lambda: log.committed("g", "in", 0) == 5, 10, 0.01, "the first 5")
            for i in range(5, 20):
                log.produce("in", str(i).encode(), partition=0)
            poll_for(lambda: log.committed("g", "in", 0) == 20, 10, 0.01, "all 20")
            assert not log.groups["g"].members[0].paused


def test_earliest_is_enforced_only_on_a_topology_first_deployment_memory():
    """KafkaSpoutTopologyDeployActivateDeactivateTest: first_poll_offset="earliest" does
    not rewind a topology that committed there (its restart resumes; stormish keys "this
    topology" on its name where Storm keys it on the topology id), and a different
    topology in the same group starts at the beginning. (On the in-memory log: the Tansu
    broker answers a committed offset without its metadata, so there every restart of an
    `earliest` spout starts at the beginning.)"""
    name = unique("earliest-mem")
    with MemoryLog(name) as log:
        fill(log, "in", 1, 2)

        def run(topology: str) -> list[int]:
            key = unique("earliest")
            t = Topology(topology)
            k = KafkaSpout(
                log.address, topics="in", group_id="g", stop_at_end=True,
                first_poll_offset="earliest",
            )  # fmt: skip
            t.set_spout("k", k)
            t.set_bolt("note", Note(key)).shuffle_grouping("k")
            run_topology(t, timeout=60)
            return sorted(o for _, _, o, _ in seen(key))

        assert run("kport-topology-1") == [0, 1]
        for i in (2, 3):
            log.produce("in", str(i).encode(), partition=0)
        assert run("kport-topology-1") == [2, 3]  # its own commit: resumed
        assert run("kport-topology-2") == [0, 1, 2, 3]  # another topology's: the beginning
        assert log.committed("g", "in", 0) == 4


def test_a_paused_partition_drained_on_revoke_and_given_back_is_read_again_memory():
    """KafkaSpoutRebalanceTest with MaxUncommittedOffsetTest's pause, on the in-memory log
    (which keeps a pause through a revoke, as librdkafka does): 30 fetched, 5 in flight,
    the partition paused; another member joins; the held trees complete during the revoke,
    which commits 5 (25 fetched past it: still over the limit, so no Resume); the
    partition comes back to the spout. Failed before the fix: it stayed paused."""
    name = unique("back-mem")
    key = name
    with MemoryLog(name) as log:
        fill(log, "in", 1, 30)
        log.create_topic("other", 1)
        t = Topology(name)
        k = KafkaSpout(
            log.address, topics="in", group_id="g", max_uncommitted_offsets=5,
            commit_interval_secs=0.01,
        )  # fmt: skip
        t.set_spout("k", k)
        t.set_bolt("note", Gated(key)).shuffle_grouping("k")
        opened = gate(key)
        with LocalCluster() as cluster:
            cluster.submit(t)
            member = poll_for(
                lambda: "g" in log.groups and log.groups["g"].members, 10, 0.01, "joined"
            )[0]
            poll_for(lambda: ("in", 0) in member.paused, 10, 0.01, "the partition paused")
            other = log.consumer("g")
            other.subscribe(["other"], None, lambda tps: {}, lambda tps: None)
            stop = threading.Event()
            poller = threading.Thread(
                target=lambda: [other.poll(10, 0.02) for _ in iter(stop.is_set, True)]
            )
            poller.start()
            try:
                poll_for(lambda: any(e[0] == "revoke" for e in log.events), 10, 0.01, "the revoke")
                opened.set()  # the 5 trees complete while the revoke waits for them
                poll_for(lambda: log.committed("g", "in", 0) == 30, 10, 0.01, "all 30")
            finally:
                opened.set()
                stop.set()
                poller.join(5)
                other.close()
    assert Counter(o for _, _, o, _ in seen(key)) == {o: 1 for o in range(30)}
