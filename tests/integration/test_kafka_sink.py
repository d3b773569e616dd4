"""KafkaSink against the real broker (the session's Tansu, tests/brokers.py): a tuple is
acked on its delivery report and failed with the reason on a delivery error; a full
producer queue holds input back through the engine's backpressure with nothing lost and
each key's order kept; cleanup flushes; transactions commit per batch and abort on a
delivery error."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from typing import Any

import pytest

from stormish import Topology
from stormish.kafka import KafkaSink
from stormish.testing import ListSpout, run_topology

from .kafka_util import new_topic, read_topic

pytestmark = pytest.mark.timeout(90)


class CountingSink(KafkaSink):
    """KafkaSink that also reports how often its producer's queue refused a record
    (`refused`, counted by the sink) and its transactions."""

    def cleanup(self) -> None:
        txn = self._txn  # cleanup lets the producer and the transaction go
        super().cleanup()
        self.committed = 0 if txn is None else txn.committed
        self.aborted = 0 if txn is None else txn.aborted

    def result(self) -> dict[str, int]:
        return {"refusals": self.refused, "committed": self.committed, "aborted": self.aborted}


def _run(sink: KafkaSink, items: list, fields: tuple, **conf: Any) -> Any:
    t = Topology("kafka-sink", config={"topology.workers": 1, **conf})
    t.set_spout("src", ListSpout(items, fields=fields, per_call=64))
    t.set_bolt("sink", sink).shuffle_grouping("src")
    return run_topology(t, timeout=60)


def _by_key(records: list) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = defaultdict(list)
    for _p, _o, k, v in sorted(records):  # by partition, then offset: the log's order
        out[k].append(v)
    return out


def test_each_tuple_is_acked_on_its_delivery_report(kafka: Any) -> None:
    topic = new_topic(kafka.address, partitions=3)
    items = [(f"k{i % 7}", f"v{i}") for i in range(2000)]
    sink = KafkaSink(kafka.address, topic, key_field="key", producer_config={"linger.ms": 5})
    r = _run(sink, items, ("key", "value"))
    spout = r.results["src"][0]
    assert len(spout["acked"]) == 2000 and not spout["failed"]
    got = read_topic(kafka.address, topic, 2000)
    assert sorted(v for *_, v in got) == sorted(v.encode() for _k, v in items)
    by_key = _by_key(got)
    for k in {k for k, _ in items}:  # each key on one partition, in input order
        assert by_key[k.encode()] == [v.encode() for kk, v in items if kk == k]


def test_a_delivery_error_fails_the_tuple_with_the_reason(kafka: Any) -> None:
    """A topic name the broker refuses ('bad topic!') comes back as a delivery error;
    a record over the producer's message.max.bytes is refused at produce. Both fail
    their tuple (dead-lettered at once with topology.max.replays 1) with the reason;
    the others are acked and in the topic."""
    good = new_topic(kafka.address)
    items = [(good, f"v{i}") for i in range(20)]
    items[5] = ("bad topic!", "never")
    items[9] = (good, "x" * 20_000)
    sink = KafkaSink(
        kafka.address, topic_field="topic", producer_config={"message.max.bytes": 10_000}
    )
    r = _run(sink, items, ("topic", "value"), **{"topology.max.replays": 1})
    spout = r.results["src"][0]
    assert sorted(spout["dead"]) == [5, 9]
    assert "delivery to 'bad topic!' failed" in spout["dead"][5]["error"]
    assert "Invalid topic" in spout["dead"][5]["error"]
    assert "MSG_SIZE_TOO_LARGE" in spout["dead"][9]["error"]
    assert "KafkaSink 'sink'" in spout["dead"][9]["error"]
    assert sorted(spout["acked"]) == [i for i in range(20) if i not in (5, 9)]
    got = read_topic(kafka.address, good, 18)
    assert sorted(v for *_, v in got) == sorted(v.encode() for i, (_t, v) in enumerate(items)
                                                 if i not in (5, 9))  # fmt: skip


def test_a_full_producer_queue_holds_input_back_and_loses_nothing(kafka: Any) -> None:
    topic = new_topic(kafka.address, partitions=2)
    items = [(f"k{i % 10}", f"{i}") for i in range(5000)]
    sink = CountingSink(
        kafka.address,
        topic,
        key_field="key",
        producer_config={"queue.buffering.max.messages": 8, "linger.ms": 2},
    )
    r = _run(sink, items, ("key", "value"))
    spout = r.results["src"][0]
    assert len(spout["acked"]) == 5000 and not spout["failed"]
    assert r.results["sink"][0]["refusals"] > 0, "the queue was never full: no test"
    got = read_topic(kafka.address, topic, 5000)
    assert len(got) == 5000
    by_key = _by_key(got)
    for k in range(10):
        assert by_key[f"k{k}".encode()] == [str(i).encode() for i in range(k, 5000, 10)]


def test_cleanup_flushes_what_the_producer_still_holds(kafka: Any) -> None:
    """Acking off: the topology completes when the sink has executed everything, long
    before a 60 s linger would send it; only the flush at cleanup delivers it."""
    topic = new_topic(kafka.address)
    items = [(f"v{i}",) for i in range(300)]
    sink = KafkaSink(kafka.address, topic, producer_config={"linger.ms": 60_000})
    _run(sink, items, ("value",), **{"topology.acker.executors": 0})
    got = read_topic(kafka.address, topic, 300, timeout=15)
    assert sorted(v for *_, v in got) == sorted(v.encode() for (v,) in items)


def test_cleanup_sends_what_is_held_behind_a_full_transaction(kafka: Any) -> None:
    """Three tuples, transactions of one: the first fills the open transaction, two are
    held. Cleanup commits it and sends the held ones in transactions of their own
    (found by a bug hunt: it spun to flush_timeout_secs, failed the first and left the
    held two neither produced, acked nor failed)."""
    import time

    from stormish.tuple import Source, Tuple

    topic = new_topic(kafka.address)
    sink = KafkaSink(
        kafka.address, topic, transactional_id=f"tx-held-{topic}", transaction_max_records=1,
        flush_timeout_secs=8,
    )  # fmt: skip
    acked: list[str] = []
    failed: list[tuple[str, Any]] = []
    sink.ack = lambda t: acked.append(t.values[0])  # type: ignore[method-assign]
    sink.fail = lambda t, why=None: failed.append((t.values[0], why))  # type: ignore[method-assign]
    sink.prepare({}, None)
    src = Source("feed", 1, "default", ["value"])
    for i in range(3):
        sink.execute(Tuple([f"v{i}"], src))
    assert len(sink._held) == 2
    t0 = time.monotonic()
    sink.cleanup()
    took = time.monotonic() - t0
    assert sorted(acked) == ["v0", "v1", "v2"] and not failed, (acked, failed)
    assert took < 5, f"cleanup took {took:.1f}s"
    got = read_topic(kafka.address, topic, 3, timeout=10)
    assert sorted(v for *_, v in got) == [b"v0", b"v1", b"v2"]


def test_import_needs_no_client_until_prepare() -> None:
    """`import stormish.kafka` and building a KafkaSink import no confluent_kafka; a
    prepare without it says which extra to install."""
    code = (
        "import sys; sys.modules['confluent_kafka'] = None\n"
        "from stormish.kafka import KafkaSink\n"
        "s = KafkaSink('127.0.0.1:1', 'x')\n"
        "try:\n    s.prepare({}, None)\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert "pip install 'stormish[kafka]'" in out.stdout, out.stderr


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({}, "exactly one of topic= or topic_field="),
        ({"topic": "a", "topic_field": "t"}, "exactly one of topic= or topic_field="),
        ({"topic": "a", "producer_config": {"transactional.id": "x"}}, "transactional_id="),
        ({"topic": "a", "transaction_max_ms": 0}, "transaction_max_ms"),
        ({"topic": "a", "serializer": 3}, "serializer must be callable"),
    ],
)
def test_bad_arguments_name_what_is_wrong(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        KafkaSink("127.0.0.1:9092", **kwargs)


def test_transactions_commit_per_batch_and_ack_on_commit(kafka: Any) -> None:
    topic = new_topic(kafka.address, partitions=2)
    items = [(f"k{i % 5}", f"{i}") for i in range(1000)]
    sink = CountingSink(
        kafka.address, topic, key_field="key", transactional_id=f"tx-{topic}",
        transaction_max_records=100, producer_config={"linger.ms": 5},
    )  # fmt: skip
    r = _run(sink, items, ("key", "value"))
    spout, stats = r.results["src"][0], r.results["sink"][0]
    assert len(spout["acked"]) == 1000 and not spout["failed"]
    assert stats["committed"] >= 10 and stats["aborted"] == 0
    got = read_topic(kafka.address, topic, 1000, isolation="read_committed")
    assert sorted(int(v) for *_, v in got) == list(range(1000))


def _bad_topic_run(kafka: Any) -> tuple[str, dict, dict]:
    """One transaction of 10 records, one of them to a topic the broker refuses."""
    topic = new_topic(kafka.address)
    items = [(topic, f"v{i}") for i in range(10)]
    items[4] = ("bad topic!", "never")
    sink = CountingSink(
        kafka.address, topic_field="topic", transactional_id=f"tx-{topic}",
        transaction_max_ms=2000,
    )  # fmt: skip
    r = _run(sink, items, ("topic", "value"), **{"topology.max.replays": 1})
    return topic, r.results["src"][0], r.results["sink"][0]


def test_a_record_the_broker_refuses_fails_alone_or_aborts_its_whole_transaction(
    kafka: Any,
) -> None:
    """librdkafka decides which of two ways the bad record goes, by a race in its
    metadata: refused at `produce` (the topic is already known not to exist: the record
    never joins the transaction, that tuple alone fails and the other nine commit), or
    failed in its delivery report (the transaction aborts and every tuple in it fails,
    dead at once). Either way nothing is acked whose record is not committed."""
    topic, spout, stats = _bad_topic_run(kafka)
    if stats["aborted"]:
        assert sorted(spout["dead"]) == list(range(10)) and not spout["acked"]
        for d in spout["dead"].values():
            assert "delivery to 'bad topic!' failed" in d["error"], d
    else:
        assert stats["committed"] >= 1, stats
        assert sorted(spout["dead"]) == [4] and sorted(spout["acked"]) == [
            0,
            1,
            2,
            3,
            5,
            6,
            7,
            8,
            9,
        ]
        assert "produce to 'bad topic!' refused" in spout["dead"][4]["error"], spout
        got = read_topic(kafka.address, topic, 9, isolation="read_committed")
        assert sorted(v for *_, v in got) == sorted(f"v{i}".encode() for i in spout["acked"])


def _broker_honours_aborts(address: str) -> bool:
    from confluent_kafka import Producer

    topic = new_topic(address)
    p = Producer({"bootstrap.servers": address, "transactional.id": f"probe-{topic}"})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic, b"aborted")
    p.flush(15)
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce(topic, b"committed")
    p.commit_transaction(15)
    seen = [v for *_, v in read_topic(address, topic, 1, isolation="read_committed")]
    assert b"committed" in seen
    return b"aborted" not in seen


def test_read_committed_never_sees_an_aborted_transaction(kafka: Any) -> None:
    if not _broker_honours_aborts(kafka.address):
        reason = (
            "the broker does not honour aborts: a read_committed consumer read a record of "
            "an aborted transaction (Tansu 0.6.0 with memory storage does this)"
        )
        print(reason)
        pytest.skip(reason)
    topic, spout, stats = _bad_topic_run(kafka)
    got = read_topic(kafka.address, topic, len(spout["acked"]), isolation="read_committed")
    assert sorted(v for *_, v in got) == sorted(f"v{i}".encode() for i in spout["acked"])
    assert not stats["aborted"] or got == []
