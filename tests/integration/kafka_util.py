"""Small helpers for the tests against the real (Tansu) broker: make a topic, read a
topic back whole. Real clients only (confluent-kafka)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from brokers import KAFKA_FAST_GROUP


def new_topic(address: str, partitions: int = 1, prefix: str = "t") -> str:
    """A topic of its own for one test (the broker is shared by the session)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def read_topic(
    address: str,
    topic: str,
    expect: int,
    timeout: float = 30.0,
    isolation: str = "read_uncommitted",
    quiet_secs: float = 0.5,
    timestamps: bool = False,
) -> list[Any]:
    """Every record of `topic` from the start: reads until `expect` records came and
    nothing more arrived for `quiet_secs` (more than expected shows up as duplicates),
    or until `timeout`. Records as (partition, offset, key, value), and the record's
    timestamp (ms) last with `timestamps`."""
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": address,
            "group.id": f"read-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            **KAFKA_FAST_GROUP,
        }
    )
    out: list[Any] = []
    try:
        c.subscribe([topic])
        end = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < end:
            batch = c.consume(1000, 0.1)
            for m in batch:
                if m.error() is None:
                    rec = (m.partition(), m.offset(), m.key(), m.value())
                    out.append((*rec, m.timestamp()[1]) if timestamps else rec)
            if batch:
                last = time.monotonic()
            elif len(out) >= expect and time.monotonic() - last >= quiet_secs:
                break
    finally:
        c.close()
    return out


def committed_total(address: str, group: str, topic: str, partitions: int) -> int:
    """The sum of the group's committed positions over the topic's partitions."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": address, "group.id": group, **KAFKA_FAST_GROUP})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return sum(max(tp.offset, 0) for tp in tps)
    finally:
        c.close()
