"""KafkaSink on the in-memory log (`memory://NAME`, stormish.testing.MemoryLog): a
topology from a topic to a topic runs in a test with no broker; a topic the log lacks
is a delivery error that fails the tuple with the reason."""

from __future__ import annotations

from collections import Counter

from stormish import BasicBolt, Topology
from stormish.kafka import KafkaSink, KafkaSpout
from stormish.testing import ListSpout, MemoryLog, run_topology


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        for w in tup["value"].decode().split():
            self.emit([w])


def test_a_topic_to_topic_word_count_on_the_memory_log() -> None:
    sentences = [f"the cow n{i % 5}" for i in range(200)]
    with MemoryLog("sink-wc") as log:
        log.create_topic("in", partitions=3)
        log.create_topic("out", partitions=2)
        for s in sentences:
            log.produce("in", s.encode())
        t = Topology("mem-wc")
        t.set_spout("in", KafkaSpout(log.address, topics="in", group_id="g", stop_at_end=True))
        t.set_bolt("split", Split(), parallelism=2).shuffle_grouping("in")
        sink = KafkaSink(log.address, "out", key_field="word", value_field="word")
        t.set_bolt("out", sink).fields_grouping("split", ["word"])
        run_topology(t)
        words = [r[4] for p in range(2) for r in log.records("out", p)]
        assert Counter(words) == Counter(w.encode() for s in sentences for w in s.split())
        assert [log.committed("g", "in", p) for p in range(3)] == log.end_offsets("in")


class TickCounting(KafkaSink):
    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.ticks = 0

    def execute(self, tup):
        self.ticks += tup.is_tick
        super().execute(tup)

    def result(self):
        return self.ticks


def test_a_missing_topic_fails_the_tuple_with_the_reason_and_ticks_are_no_records() -> None:
    with MemoryLog("sink-missing") as log:
        log.create_topic("ok")
        conf = {"topology.max.replays": 1, "topology.tick.tuple.freq.secs": 0.01}
        t = Topology("mem-missing", config=conf)
        items = [("ok", f"v{i}") for i in range(2000)]
        items[1] = ("nope", "b")
        t.set_spout("src", ListSpout(items, fields=("topic", "value"), per_call=1))
        t.set_bolt("out", TickCounting(log.address, topic_field="topic")).shuffle_grouping("src")
        r = run_topology(t)
        spout = r.results["src"][0]
        assert len(spout["acked"]) == 1999 and list(spout["dead"]) == [1]
        assert "delivery to 'nope' failed" in spout["dead"][1]["error"]
        assert "has no topic 'nope'" in spout["dead"][1]["error"]
        assert [r[4] for r in log.records("ok", 0)] == [v.encode() for t, v in items if t == "ok"]
        assert r.results["out"][0] > 0, "no tick came: the test proves nothing"
        assert r.stats.components["out"].failed == 1  # the missing topic's; no tick
