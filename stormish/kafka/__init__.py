"""Kafka connectors (extra `stormish[kafka]`, client confluent-kafka, imported only when a
spout opens). docs/connectors.md says how each works."""

from .retry import Retry
from .spout import KafkaRecord, KafkaSpout, ToStream

__all__ = ["KafkaRecord", "KafkaSpout", "Retry", "ToStream"]
