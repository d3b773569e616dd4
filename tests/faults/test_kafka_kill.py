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
from integration.kafka_util import committed_total, new_topic, read_topic

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
    group = f"g-k-{src}"  # kafka_pipeline's
    poll_for(lambda: committed_total(kafka.address, group, src, 4) >= RECORDS // 5, 120, 0.1,
             "a fifth of the records committed by the spout")  # fmt: skip
    watch.begin()
    (proc,) = [p for p in c.workers() if f"--index {index} " in " ".join(p.cmdline()) + " "]
    committed = committed_total(kafka.address, group, src, 4)
    kill_ms = time.time() * 1000
    t0 = time.monotonic()
    proc.send_signal(signal.SIGKILL)
    c.wait_status("k", "complete", timeout=240)
    complete_s = round(time.monotonic() - t0, 2)
    watch.freeze()
    got = read_topic(kafka.address, out, RECORDS, timeout=120, quiet_secs=2.0, timestamps=True)
    values = [r[3] for r in got]
    before_kill = sum(r[4] < kill_ms for r in got)
    distinct = set(values)
    missing = RECORDS - len(distinct & {f"r{i}".encode() for i in range(RECORDS)})
    duplicates = len(values) - len(distinct)
    watch.figures.update(
        records=RECORDS, written=len(values), distinct=len(distinct), lost=missing,
        duplicates=duplicates, written_before_kill=before_kill, committed_at_kill=committed,
        complete_s=complete_s,
    )  # fmt: skip
    assert "restarting it on port" in c.log("s0.log") + c.log("s1.log")
    assert missing == 0, watch.figures
    assert len(distinct) == RECORDS, watch.figures
    # the restarted spout resumes from the group's position (at least `committed`): what
    # was written past it before the kill is written again, and so are the killed
    # spout's trees still in flight (at most max.spout.pending) that the other worker's
    # sink wrote after the kill
    bound = before_kill - committed + CONF["topology.max.spout.pending"]
    assert duplicates <= bound, (bound, watch.figures)
