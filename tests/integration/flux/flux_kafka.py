"""Python stand-ins for the Java classes flux-examples' kafka_spout.yaml names:
storm-kafka-client's KafkaSpoutConfig$Builder (properties and setProp as Flux sets
them), KafkaSpoutConfig, KafkaSpout (stormish's, built from that config) and the
example's OnlyValueRecordTranslator."""

from __future__ import annotations

from typing import Any

from stormish.kafka import KafkaSpout as _KafkaSpout

POLL = {"EARLIEST": "earliest", "LATEST": "latest",
        "UNCOMMITTED_EARLIEST": "uncommitted_earliest",
        "UNCOMMITTED_LATEST": "uncommitted_latest"}  # fmt: skip


class OnlyValueRecordTranslator:
    """The record's value only, as a str (Storm's example: field `str`)."""

    fields = ["str"]

    def __call__(self, record: Any) -> list[str]:
        v = record.value
        return [v.decode() if isinstance(v, bytes) else v]


class KafkaSpoutConfigBuilder:
    def __init__(self, bootstrap_servers: str, topics: list[str]):
        self.bootstrap_servers, self.topics = bootstrap_servers, list(topics)
        self.firstPollOffsetStrategy = "UNCOMMITTED_EARLIEST"  # noqa: N815 - Flux property
        self.recordTranslator: Any = None  # noqa: N815
        self.props: dict[str, Any] = {}

    def setProp(self, props: dict[str, Any]) -> None:  # noqa: N802 - Storm's name
        # Java deserializer class names mean nothing to confluent-kafka: values stay bytes
        self.props.update({k: v for k, v in props.items() if "deserializer" not in k})


class KafkaSpoutConfig:
    def __init__(self, builder: KafkaSpoutConfigBuilder):
        self.builder = builder


class KafkaSpout(_KafkaSpout):
    """stormish's KafkaSpout from Storm's config object; finite (stop_at_end), so the
    example's run completes and its counts can be checked."""

    def __init__(self, config: KafkaSpoutConfig):
        b = config.builder
        translator = b.recordTranslator
        super().__init__(
            b.bootstrap_servers,
            b.topics,
            group_id=b.props.pop("group.id", "flux-kafka"),
            first_poll_offset=POLL[b.firstPollOffsetStrategy],
            translator=translator,
            fields=getattr(translator, "fields", None),
            stop_at_end=True,
            consumer_config=b.props,
        )
