"""Kafka word count: a topic of sentences in, running word counts out to another topic.

    KafkaSpout(topic "sentences") -> split (shuffle) -> count (fields on "word")
        -> KafkaSink(topic "word-counts", key = the word, value = its count so far)

Each count update is one record keyed by its word, so the last record of a key is that
word's count (a compacted topic keeps just that). Reliable end to end: the spout commits
a partition's offsets only when every tuple of the records below them is acked, and the
sink acks a count only on the broker's delivery report, so a crash replays what was
not written (at least once). The spout stops at the end offsets it saw at start, so
`stormish run topologies/kafka_wordcount.py` completes; KAFKA_FOLLOW=1 keeps reading.
README "Kafka" shows how to start a broker. The file is also a small tool:
`python topologies/kafka_wordcount.py feed N` creates the input topic (4 partitions)
and writes N sentences to it; `python topologies/kafka_wordcount.py counts` prints each
word's last count from the output topic. Settings by environment: KAFKA_BOOTSTRAP
(127.0.0.1:9092), KAFKA_IN (sentences), KAFKA_OUT (word-counts), KAFKA_GROUP
(kafka-wordcount); KAFKA_IDEMPOTENCE=0 turns the sink's idempotent producer off
(faster, but a retried batch may then be reordered or duplicated);
KAFKA_RECORDS_PER_TREE=N makes N consecutive records of a partition one tuple tree
(KafkaSpout records_per_tree: less tracking per record, a failure replays the N).
"""

import os
import sys
import uuid

from stormish import BasicBolt, Topology
from stormish.kafka import KafkaSink, KafkaSpout

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")
IN = os.environ.get("KAFKA_IN", "sentences")
OUT = os.environ.get("KAFKA_OUT", "word-counts")
GROUP = os.environ.get("KAFKA_GROUP", "kafka-wordcount")
FOLLOW = os.environ.get("KAFKA_FOLLOW", "") not in ("", "0")
IDEMPOTENCE = os.environ.get("KAFKA_IDEMPOTENCE", "1") != "0"
# records per tuple tree (KafkaSpout records_per_tree): 1 is Storm's one tree a record
PER_TREE = int(os.environ.get("KAFKA_RECORDS_PER_TREE", "1"))
# a broker's group joins settle within the session timeout: 2 s keeps a run short
FAST_GROUP = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 500}


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        for word in tup["value"].decode("utf-8", "replace").split():
            self.emit([word])


class Count(BasicBolt):
    """Anchored and acked by the runtime (Storm's BaseBasicBolt), as Split."""

    outputs = ["word", "count"]

    def prepare(self, conf, context):
        self.counts = {}

    def execute(self, tup):
        word = tup["word"]
        n = self.counts[word] = self.counts.get(word, 0) + 1
        self.emit([word, n])

    def cleanup(self):
        top = sorted(self.counts.items(), key=lambda kv: -kv[1])[:3]
        print(f"count: {len(self.counts)} words, top {top}")


# max.spout.pending counts trees: 5,000 records in flight in trees of N (measured on 1M
# records, N=100: pending 10 waited on the sink's delivery latency (14.4 s), 50 took
# 11.5 s, 150 filled the queues (13.6 s))
topology = Topology(
    "kafka-wordcount",
    {"topology.max.spout.pending": max(1, 5000 // PER_TREE)} if PER_TREE > 1 else None,
)
topology.set_spout(
    "sentences",
    KafkaSpout(BOOTSTRAP, topics=[IN], group_id=GROUP, stop_at_end=not FOLLOW,
               consumer_config=FAST_GROUP, records_per_tree=PER_TREE),
)  # fmt: skip
topology.set_bolt("split", Split(), parallelism=2).shuffle_grouping("sentences")
topology.set_bolt("count", Count(), parallelism=2).fields_grouping("split", ["word"])
topology.set_bolt(
    "out",
    KafkaSink(
        BOOTSTRAP,
        OUT,
        key_field="word",
        value_field="count",
        producer_config={"enable.idempotence": IDEMPOTENCE},
    ),
).fields_grouping("count", ["word"])


# -- the tool: feed the input topic, read the counts ------------------------------------------
CORPUS = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
]


def feed(n: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    if IN not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(IN, 4, 1)])[IN].result(15)
    p = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 20})
    for i in range(n):
        while True:
            try:
                p.produce(IN, CORPUS[i % len(CORPUS)].encode())
                break
            except BufferError:  # the producer's queue is full: let it send
                p.poll(0.05)
    left = p.flush(60)
    print(f"wrote {n - left:,} sentences to {IN!r} at {BOOTSTRAP}")


def counts() -> None:
    from confluent_kafka import Consumer

    group = f"read-{uuid.uuid4().hex}"
    conf = {"bootstrap.servers": BOOTSTRAP, "group.id": group, "auto.offset.reset": "earliest"}
    c = Consumer({**conf, "enable.auto.commit": False, **FAST_GROUP})
    c.subscribe([OUT])
    last: dict[str, int] = {}
    idle = 0
    while idle < 10:  # a second with nothing new (after the group join)
        batch = c.consume(1000, 0.2 if last else 5.0)
        idle = 0 if batch else idle + 1
        for m in batch:
            if m.error() is None:
                last[m.key().decode()] = int(m.value())
    c.close()
    for word, n in sorted(last.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{word:>10} {n:,}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "feed":
        feed(int(sys.argv[2]))
    elif sys.argv[1:] == ["counts"]:
        counts()
    else:
        sys.exit("usage: python topologies/kafka_wordcount.py feed N | counts")
