"""Bolts the Kafka spout tests share: they note what they see in this process (the
topologies run one in-process worker), so a test can count every record exactly."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from stormish import BasicBolt, Bolt
from stormish.testing import MemoryLog

SEEN: dict[str, list[tuple]] = defaultdict(list)
_LOCK = threading.Lock()


class Note(BasicBolt):
    """Notes (task, partition, offset, value) under `key`; raises for each (partition,
    offset) in `poison` every time, or only its first time in `poison_once`."""

    outputs: Any = ()

    def __init__(self, key: str, poison: Any = (), poison_once: Any = ()):
        self.key, self.poison, self.poison_once = key, set(poison), set(poison_once)

    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.task_id
        self.failed: set[tuple[int, int]] = set()

    def execute(self, tup: Any) -> None:
        where = (tup["partition"], tup["offset"])
        if where in self.poison:
            raise RuntimeError(f"poison record {where}")
        if where in self.poison_once and where not in self.failed:
            self.failed.add(where)
            raise RuntimeError(f"first failure of {where}")
        with _LOCK:
            SEEN[self.key].append((self.task, tup["partition"], tup["offset"], tup["value"]))


class Hold(Bolt):
    """Notes every tuple and never acks it (trees stay in flight)."""

    outputs: Any = ()

    def __init__(self, key: str):
        self.key = key

    def execute(self, tup: Any) -> None:
        with _LOCK:
            SEEN[self.key].append((0, tup["partition"], tup["offset"], tup["value"]))


def seen(key: str) -> list[tuple]:
    with _LOCK:
        return list(SEEN[key])


def check_order(rows: list[tuple]) -> None:
    """Each (task, partition)'s offsets arrive increasing (a replay may repeat one)."""
    last: dict[tuple[int, int], int] = {}
    for task, partition, offset, _ in rows:
        before = last.get((task, partition), -1)
        assert offset >= before, f"partition {partition}: offset {offset} after {before}"
        last[(task, partition)] = offset


def fill(log: MemoryLog, topic: str, partitions: int, per_partition: int) -> int:
    """`per_partition` records in each of `partitions`, values 0.. dealt round the
    partitions; returns their sum (the exact-sum checks)."""
    log.create_topic(topic, partitions)
    total = 0
    for i in range(per_partition):
        for p in range(partitions):
            v = i * partitions + p
            log.produce(topic, str(v).encode(), key=None, partition=p)
            total += v
    return total
