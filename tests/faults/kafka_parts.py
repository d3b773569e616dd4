"""Components of the Kafka fault tests that worker processes import (they get the test
process's sys.path; a test module is not importable there)."""

from __future__ import annotations

from typing import Any

from stormish import BasicBolt, Topology
from stormish.kafka import KafkaSink, KafkaSpout


class Relay(BasicBolt):
    """Passes a record's key and value on (anchored: a BasicBolt)."""

    outputs = ["key", "value"]

    def execute(self, tup: Any) -> None:
        self.emit([tup["key"], tup["value"]])


def kafka_pipeline(
    name: str, address: str, src: str, out: str, consumer: dict, **conf: Any
) -> Topology:
    """KafkaSpout (at_least_once, finite, committing every 0.2 s so that a kill lands
    after commits and mid-stream) -> relay (2 tasks) -> KafkaSink (2 tasks), 2 workers."""
    t = Topology(name, config={"topology.workers": 2, **conf})
    spout = KafkaSpout(
        address, topics=[src], group_id=f"g-{name}-{src}", stop_at_end=True,
        commit_interval_secs=0.2, consumer_config=consumer,
    )  # fmt: skip
    t.set_spout("src", spout)
    t.set_bolt("relay", Relay(), parallelism=2).shuffle_grouping("src")
    sink = KafkaSink(address, out, key_field="key", producer_config={"linger.ms": 5})
    t.set_bolt("sink", sink, parallelism=2).fields_grouping("relay", ["key"])
    return t
