"""KafkaSpout against a real Kafka-compatible broker (Tansu, the `kafka` fixture): the
key storm-kafka-client scenarios, a 4-partition finite topology with the exact sum and
committed offsets read back with a plain consumer, and a rebalance while running."""

from __future__ import annotations

import itertools
import uuid
from collections import Counter

import pytest
from brokers import KAFKA_FAST_GROUP

from stormish import LocalCluster, Topology
from stormish.kafka import KafkaSpout, Retry
from stormish.testing import CaptureBolt, poll_for, run_topology

from .kafka_helpers import Note, check_order, seen

ck = pytest.importorskip("confluent_kafka", reason="pip install 'stormish[kafka]'")
_n = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_n)}-{uuid.uuid4().hex[:6]}"


def make_topic(address: str, partitions: int, per_partition: int) -> tuple[str, int]:
    """A new topic with `per_partition` records in each partition; the sum of values."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = unique("t")
    admin = AdminClient({"bootstrap.servers": address})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(20)
    producer = ck.Producer({"bootstrap.servers": address, "linger.ms": 5})
    total = 0
    for i in range(per_partition):
        for p in range(partitions):
            v = i * partitions + p
            producer.produce(topic, str(v).encode(), partition=p)
            total += v
    assert producer.flush(20) == 0
    return topic, total


def committed(address: str, group: str, topic: str, partitions: int = 1) -> list[int]:
    c = ck.Consumer({"bootstrap.servers": address, "group.id": group})
    try:
        got = c.committed([ck.TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return [tp.offset for tp in got]
    finally:
        c.close()


def spout(address: str, topic: str, group: str, **kw) -> KafkaSpout:
    return KafkaSpout(address, topics=topic, group_id=group, consumer_config=KAFKA_FAST_GROUP, **kw)


@pytest.mark.timeout(60)
def test_four_partitions_finite_exact_sum_order_and_committed_end(kafka):
    topic, total = make_topic(kafka.address, 4, 250)
    group, key = unique("g"), unique("sum")
    t = Topology("kbroker-sum")
    t.set_spout("k", spout(kafka.address, topic, group, stop_at_end=True))
    t.set_bolt("note", Note(key), parallelism=2).fields_grouping("k", ["partition"])
    out = run_topology(t, timeout=45)
    rows = seen(key)
    assert len(rows) == 1000
    assert sum(int(v) for *_, v in rows) == total
    check_order(rows)
    assert committed(kafka.address, group, topic, 4) == [250] * 4
    assert out.stats.components["k"].gauges == {f"lag:{topic}/{p}": 0 for p in range(4)}


@pytest.mark.timeout(60)
def test_fail_offset_1_then_replay_commits_11_and_does_not_re_emit_the_rest(kafka):
    # KafkaSpoutCommitTest on the broker
    topic, _ = make_topic(kafka.address, 1, 11)
    group, key = unique("g"), unique("replay")
    t = Topology("kbroker-replay")
    t.set_spout("k", spout(kafka.address, topic, group, stop_at_end=True))
    t.set_bolt("note", Note(key, poison_once={(0, 1)})).shuffle_grouping("k")
    out = run_topology(t, timeout=45)
    assert Counter(o for _, _, o, _ in seen(key)) == {o: 1 for o in range(11)}
    assert out.stats.components["k"].emitted == 12
    assert committed(kafka.address, group, topic, 1) == [11]


@pytest.mark.timeout(60)
def test_retry_limit_dead_letters_and_commits_past_on_the_broker(kafka):
    topic, _ = make_topic(kafka.address, 1, 5)
    group, key = unique("g"), unique("dead")
    t = Topology("kbroker-dead")
    t.set_spout(
        "k", spout(kafka.address, topic, group, stop_at_end=True, retry=Retry(max_retries=1))
    )
    t.set_bolt("note", Note(key, poison={(0, 2)})).shuffle_grouping("k")
    t.set_bolt("dead", CaptureBolt()).dead_letter_grouping("k")
    out = run_topology(t, timeout=45)
    assert [row[2][2] for row in out.captured["dead"]] == [2]
    assert sorted(o for _, _, o, _ in seen(key)) == [0, 1, 3, 4]
    assert committed(kafka.address, group, topic, 1) == [5]


def produce_more(address: str, topic: str, partitions: int, start: int, n: int) -> None:
    producer = ck.Producer({"bootstrap.servers": address, "linger.ms": 5})
    for i in range(start, start + n):
        for p in range(partitions):
            producer.produce(topic, str(i * partitions + p).encode(), partition=p)
    assert producer.flush(20) == 0


@pytest.mark.timeout(90)
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_second_topology_joins_the_group_nothing_lost_duplicates_bounded(kafka, strategy):
    topic, _ = make_topic(kafka.address, 4, 400)
    group, key = unique("g"), unique("rebalance")
    pending = 40
    cfg = {**KAFKA_FAST_GROUP, "partition.assignment.strategy": strategy}

    def topology(name: str) -> Topology:
        t = Topology(name, config={"topology.max.spout.pending": pending})
        k = KafkaSpout(
            kafka.address, topics=topic, group_id=group, commit_interval_secs=0.2,
            consumer_config=cfg,
        )  # fmt: skip
        t.set_spout("k", k)
        t.set_bolt("note", Note(f"{key}-{name}")).shuffle_grouping("k")
        return t

    def owns(cluster: LocalCluster, name: str) -> bool:
        return bool(cluster.statistics(name).components["k"].gauges)

    with LocalCluster() as cluster:
        cluster.submit(topology("a"))
        poll_for(lambda: len(seen(f"{key}-a")) >= 200, 30, 0.01, "the first topology has begun")
        cluster.submit(topology("b"))
        poll_for(lambda: owns(cluster, "b"), 30, 0.05, "the second topology owns partitions")
        produce_more(kafka.address, topic, 4, 400, 400)
        poll_for(
            lambda: committed(kafka.address, group, topic, 4) == [800] * 4,
            60,
            0.2,
            "every partition committed to its end",
        )
    a, b = seen(f"{key}-a"), seen(f"{key}-b")
    times = Counter((p, o) for _, p, o, _ in a + b)
    assert set(times) == {(p, o) for p in range(4) for o in range(800)}  # nothing lost
    assert b, "the second topology processed nothing"
    dups = sum(n - 1 for n in times.values())
    # only what was in flight at the handover may be read twice: at most the first
    # owner's max.spout.pending (its revoke waits for them, so normally none)
    print(f"rebalance: a {len(a)}, b {len(b)}, {dups} processed twice")
    assert dups <= pending, dups


@pytest.mark.timeout(60)
def test_stop_at_end_with_an_empty_partition_finishes(kafka):
    # (first_poll_offset="latest" is tested on the MemoryLog: Tansu's memory storage
    # answers ListOffsets for the latest offset wrongly, so the broker starts it early)
    topic, _ = make_topic(kafka.address, 2, 0)
    produce_more(kafka.address, topic, 1, 0, 5)  # partition 0 only
    group, key = unique("g"), unique("empty")
    t = Topology("kbroker-empty")
    t.set_spout("k", spout(kafka.address, topic, group, stop_at_end=True))
    t.set_bolt("note", Note(key)).shuffle_grouping("k")
    run_topology(t, timeout=45)
    assert sorted(o for _, _, o, _ in seen(key)) == [0, 1, 2, 3, 4]
    assert committed(kafka.address, group, topic, 2)[0] == 5


@pytest.mark.timeout(60)
def test_stop_at_end_on_a_transactional_topic_finishes_past_the_commit_marker(kafka):
    topic, _ = make_topic(kafka.address, 1, 0)
    producer = ck.Producer({"bootstrap.servers": kafka.address, "transactional.id": unique("tx")})
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, str(i).encode(), partition=0)
    producer.commit_transaction(20)
    group, key = unique("g"), unique("tx")
    t = Topology("kbroker-tx")
    t.set_spout("k", spout(kafka.address, topic, group, stop_at_end=True))
    t.set_bolt("note", Note(key)).shuffle_grouping("k")
    run_topology(t, timeout=45)
    assert sorted(o for _, _, o, _ in seen(key)) == [0, 1, 2, 3, 4]
    (end,) = committed(kafka.address, group, topic, 1)
    assert end >= 5  # past the records, and past the marker where the broker wrote one
    print(f"transactional topic: committed {end}")
