"""KafkaSink on the in-memory log (`memory://NAME`, stormish.testing.MemoryLog): a
topology from a topic to a topic runs in a test with no broker; a topic the log lacks
is a delivery error that fails the tuple with the reason."""

from __future__ import annotations

from collections import Counter

from stormish import BasicBolt, Topology
from stormish.kafka import KafkaSink, KafkaSpout
from stormish.testing import ListSpout, MemoryLog, run_topology
from stormish.tuple import TICK_STREAM, Source, TrackedTuple, Tuple, TupleBatch


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


class _Col:
    current = None


def _driven(log: MemoryLog, **kw) -> tuple[KafkaSink, dict]:
    """A prepared KafkaSink whose ack, ack_batch and fail are recorded."""
    sink = KafkaSink(log.address, **kw)
    sink.prepare({}, None)
    got: dict = {"ack": [], "batch": [], "fail": []}
    sink.ack = lambda tup: got["ack"].append(tup.values)  # type: ignore[method-assign]
    sink.ack_batch = lambda b: got["batch"].append(list(b.values))  # type: ignore[method-assign]
    sink.fail = lambda tup, why=None: got["fail"].append((tup.values, why))  # type: ignore[method-assign]
    return sink, got


def _batch(rows: list) -> TupleBatch:
    metas = [((100 + i, 1 << i),) for i in range(len(rows))]
    return TupleBatch(rows, Source("src", 1, "default", ("topic", "value")), metas, _Col())


def test_a_batch_settles_when_its_records_are_reported_and_only_failed_rows_fail() -> None:
    """One delivery callback a batch, called only on a failure: nothing settles before
    the reports are served; a batch with no failure is acked whole (one ack_batch); in
    one with failures exactly the failed rows fail, with the reason, and the rest are
    acked one by one."""
    with MemoryLog("sink-settle") as log:
        log.create_topic("ok")
        sink, got = _driven(log, topic_field="topic")
        mixed = [("ok", "a"), ("nope", "b"), ("ok", "c"), ("nope", "b"), ("ok", "b")]
        sink.execute_batch(_batch(mixed))
        sink.execute_batch(_batch([("ok", "d"), ("ok", "e")]))
        assert got == {"ack": [], "batch": [], "fail": []}  # not reported yet
        assert sink.on_turn() is False
        assert got["batch"] == [[("ok", "d"), ("ok", "e")]]
        assert got["ack"] == [("ok", "a"), ("ok", "c"), ("ok", "b")]
        assert [v for v, _ in got["fail"]] == [("nope", "b"), ("nope", "b")]
        assert all("delivery to 'nope' failed" in why for _, why in got["fail"])
        sink.cleanup()
        assert [r[4] for r in log.records("ok", 0)] == [b"a", b"c", b"b", b"d", b"e"]


def test_a_full_queue_holds_the_rest_of_a_batch_in_order() -> None:
    """The producer's queue refuses the third record: the sink holds the rest (on_turn
    says so), sends it when there is room, and each row is acked once, in order."""
    with MemoryLog("sink-held") as log:
        log.create_topic("ok")
        sink, got = _driven(log, topic="ok")
        produce, full = sink._produce, [False]

        def refusing(*args: object) -> None:
            if full[0] or log.end_offsets("ok")[0] == 2:
                full[0] = True
                raise BufferError("Local: Queue full")
            produce(*args)

        sink._produce = refusing  # type: ignore[method-assign]
        sink.execute_batch(_batch([("ok", v) for v in "abcde"]))
        assert sink.on_turn() is True and sink.refused >= 2
        assert [v for _, v in got["ack"]] == ["a", "b"]  # the part that went, settled
        full[0] = False
        sink._produce = produce  # type: ignore[method-assign]
        assert sink.on_turn() is False
        sink.on_turn()
        assert [v for _, v in got["ack"]] == list("abcde") and not got["batch"]
        assert [r[4] for r in log.records("ok", 0)] == [b"a", b"b", b"c", b"d", b"e"]
        sink.cleanup()


def test_ordered_lanes_into_the_sink_settle_on_its_batch_acks() -> None:
    """A Bolt's ack_batch settles its ordered_lanes tuples as its acks do: with
    max_in_flight 4 the run would hold for ever were a batch's acks not counted."""
    with MemoryLog("sink-lanes") as log:
        log.create_topic("out", partitions=2)
        items = [(f"k{i % 3}", str(i)) for i in range(300)]
        t = Topology("mem-lanes")
        t.set_spout("src", ListSpout(items, fields=("key", "value"), per_call=32))
        sink = KafkaSink(log.address, "out", key_field="key")
        t.set_bolt("out", sink).ordered_lanes("src", key=["key"], lanes=2, max_in_flight=4)
        r = run_topology(t, timeout=20)
        assert len(r.results["src"][0]["acked"]) == 300
        got = [r[4] for p in range(2) for r in log.records("out", p)]
        assert sorted(got) == sorted(v.encode() for _, v in items)


def test_execute_of_one_tuple_settles_as_a_batch_of_one() -> None:
    with MemoryLog("sink-one") as log:
        log.create_topic("ok")
        sink, got = _driven(log, topic="ok")
        src = Source("src", 1, "default", ("topic", "value"))
        sink.execute(TrackedTuple(("ok", "a"), src, ((7, 9),)))
        sink.on_turn()
        assert got["batch"] == [[("ok", "a")]] and not got["fail"]
        sink.cleanup()


def test_the_producer_lingers_1_ms_unless_told_otherwise(monkeypatch) -> None:
    """A tuple is acked on its delivery report, so the producer's linger is part of every
    tree's complete latency: 1 ms by default (librdkafka's own is 5), the user's value
    when producer_config sets one."""
    import stormish.kafka.sink as sink_module

    seen: list[dict] = []
    real = sink_module.open_producer

    def spy(servers, config, ck):
        seen.append(dict(config))
        return real(servers, config, ck)

    monkeypatch.setattr(sink_module, "open_producer", spy)
    with MemoryLog("sink-linger") as log:
        log.create_topic("ok")
        for kw in ({}, {"producer_config": {"linger.ms": 20}}):
            sink = KafkaSink(log.address, "ok", **kw)
            sink.prepare({}, None)
            sink.cleanup()
    assert [c["linger.ms"] for c in seen] == [1, 20]
    assert all(c["enable.idempotence"] for c in seen)
