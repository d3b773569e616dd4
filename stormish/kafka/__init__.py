"""Kafka connectors (extra `stormish[kafka]`, client confluent-kafka, imported only when a
spout opens or a sink prepares). docs/connectors.md says how each works."""

from .retry import Retry
from .sink import KafkaSink
from .spout import KafkaRecord, KafkaSpout, ToStream

__all__ = ["KafkaRecord", "KafkaSink", "KafkaSpout", "Retry", "ToStream"]
