"""KafkaSink on the in-memory log (`memory://NAME`, stormish.testing.MemoryLog): a
topology from a topic to a topic runs in a test with no broker; a topic the log lacks
is a delivery error that fails the tuple with the reason."""

from __future__ import annotations

from collections import Counter

from stormish import BasicBolt, Topology
from stormish.kafka import KafkaSink, KafkaSpout
from stormish.testing import ListSpout, MemoryLog, run_topology
from stormish.tuple import TICK_STREAM, Source, Tuple


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


def test_a_missing_topic_fails_the_tuple_with_the_reason() -> None:
    with MemoryLog("sink-missing") as log:
        log.create_topic("ok")
        t = Topology("mem-missing", config={"topology.max.replays": 1})
        items = [("ok", "a"), ("nope", "b"), ("ok", "c")]
        t.set_spout("src", ListSpout(items, fields=("topic", "value")))
        t.set_bolt("out", KafkaSink(log.address, topic_field="topic")).shuffle_grouping("src")
        r = run_topology(t)
        spout = r.results["src"][0]
        assert sorted(spout["acked"]) == [0, 2] and list(spout["dead"]) == [1]
        assert "delivery to 'nope' failed" in spout["dead"][1]["error"]
        assert "has no topic 'nope'" in spout["dead"][1]["error"]
        assert [r[4] for r in log.records("ok", 0)] == [b"a", b"c"]


def test_a_tick_tuple_is_no_record() -> None:
    """Storm's KafkaBolt ignores ticks: nothing produced, nothing failed."""
    with MemoryLog("sink-tick") as log:
        log.create_topic("ok")
        sink = KafkaSink(log.address, topic_field="topic")
        sink.prepare({}, None)
        failed: list = []
        sink.fail = lambda tup, why=None: failed.append(why)  # type: ignore[method-assign]
        sink.execute(Tuple((1.0,), Source("__system", -1, TICK_STREAM, ("freq",))))
        sink.execute(Tuple(("nope-field",), Source("src", 1, "default", ("other",))))
        sink.on_turn()
        sink.cleanup()
        assert log.end_offsets("ok") == [0]
        assert len(failed) == 1 and "cannot serialize" in failed[0]  # the non-tick only
