"""kill -9 of the worker that runs the KafkaSpout, mid-stream, in a nimbus + supervisors
cluster on 127.0.0.1, reading 100,000 records on 4 partitions of the real broker (the
session's Tansu) and writing them through a KafkaSink to another topic.

At least once, end to end: the topology completes after the supervisor restarted the
worker (the new spout resumes from the offsets the group committed), every record
reached the output topic (distinct values counted), nothing is lost; duplicates (what
was processed after the last commit before the kill, and what was in flight) are
counted and bounded.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from brokers import KAFKA_FAST_GROUP
from integration.kafka_util import new_topic, read_topic

from stormish.testing import poll_for

from .kafka_parts import kafka_pipeline

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

RECORDS = 100_000
CONF = {"topology.message.timeout.secs": 10, "topology.max.spout.pending": 5_000}


def produce(address: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": address, "linger.ms": 20})
    for i in range(n):
        while True:
            try:
                p.produce(topic, f"r{i}".encode(), key=f"k{i % 97}".encode())
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def sink_acked(c: Any, name: str) -> int:
    return c.call("stats", name).components["sink"].acked


def test_kill_9_the_kafka_spout_worker_mid_stream(cluster: Any, watch: Any, kafka: Any) -> None:
    c = cluster
    src, out = new_topic(kafka.address, 4, "in"), new_topic(kafka.address, 4, "out")
    produce(kafka.address, src, RECORDS)
    poll_for(lambda: len(c.call("supervisors")) == 2, 30, 0.1, "two supervisors")
    topo = kafka_pipeline("k", kafka.address, src, out, dict(KAFKA_FAST_GROUP), **CONF)
    c.call("submit", (topo, {}))
    c.wait_status("k", "running")
    poll_for(lambda: len(c.workers()) == 2, 30, 0.1, "two workers")
    stats = c.call("stats", "k")
    index = next(s.worker for s in stats.tasks.values() if s.component == "src")
    poll_for(lambda: sink_acked(c, "k") >= RECORDS // 5, 120, 0.1, "the run under way")
    watch.begin()
    (proc,) = [p for p in c.workers() if f"--index {index} " in " ".join(p.cmdline()) + " "]
    at_kill = sink_acked(c, "k")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGKILL)
    c.wait_status("k", "complete", timeout=240)
    complete_s = round(time.monotonic() - t0, 2)
    watch.freeze()
    got = read_topic(kafka.address, out, RECORDS, timeout=120, quiet_secs=2.0)
    values = [v for *_, v in got]
    distinct = set(values)
    missing = RECORDS - len(distinct & {f"r{i}".encode() for i in range(RECORDS)})
    duplicates = len(values) - len(distinct)
    watch.figures.update(
        records=RECORDS, written=len(values), distinct=len(distinct), lost=missing,
        duplicates=duplicates, sink_acked_at_kill=at_kill, complete_s=complete_s,
    )  # fmt: skip
    assert "restarting it on port" in c.log("s0.log") + c.log("s1.log")
    assert missing == 0, watch.figures
    assert len(distinct) == RECORDS, watch.figures
    # at most what the spout had emitted since its last commit (1 s apart) and what was
    # in flight: a bound, not a target
    assert duplicates <= RECORDS // 2, watch.figures
