"""The producers a KafkaSink drives: confluent-kafka's, or one that appends to an
in-memory log (`memory://NAME`, stormish.testing.MemoryLog) with the same calls the sink
makes (`produce` with a delivery callback, `poll`, `flush`, `len`), so a topology with
a KafkaSink runs in a test with no broker, its output asserted from the log."""

from __future__ import annotations

import builtins
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

MEMORY = "memory://"


def open_producer(bootstrap_servers: str, config: Mapping[str, Any], ck: Any) -> Any:
    """A MemoryProducer for `memory://NAME`, else confluent-kafka's Producer."""
    if bootstrap_servers.startswith(MEMORY):
        from ..testing.memory_log import memory_log

        only_error = bool(config.get("delivery.report.only.error", False))
        return MemoryProducer(memory_log(bootstrap_servers[len(MEMORY) :]), only_error)
    return ck.Producer({**config, "bootstrap.servers": bootstrap_servers})


class MemoryDeliveryError:
    """What a delivery report carries on an error (the KafkaError calls the sink reads)."""

    def __init__(self, text: str):
        self.text = text

    def str(self) -> builtins.str:
        return self.text

    def name(self) -> builtins.str:
        return "UNKNOWN_TOPIC_OR_PART"


class MemoryMessage:
    __slots__ = ("_topic", "_partition", "_offset", "_key", "_value")

    def __init__(self, topic: str, partition: int | None, offset: int | None, key: Any, value: Any):
        self._topic, self._partition, self._offset = topic, partition, offset
        self._key, self._value = key, value

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def key(self) -> Any:
        return self._key

    def value(self) -> Any:
        return self._value


class MemoryProducer:
    """Appends at `produce` (a topic the log lacks is a delivery error, as on a broker
    with auto-create off); the delivery report is served by the next `poll` or `flush`,
    as confluent-kafka's are; with `only_error` (`delivery.report.only.error`) only a
    failed record's callback is called, a delivered one's is let go at that point."""

    def __init__(self, log: Any, only_error: bool = False):
        self.log = log
        self.only_error = only_error
        self._reports: deque[tuple[Callable[..., None], Any, MemoryMessage]] = deque()

    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        on_delivery: Any = None,
    ) -> None:
        """confluent-kafka's argument order (`partition` -1: the partitioner's choice;
        the in-memory log picks its own)."""
        try:
            offset = self.log.produce(topic, _raw(value), key=_raw(key))
            err, msg = None, MemoryMessage(topic, None, offset, _raw(key), _raw(value))
        except (KeyError, ValueError) as exc:
            text = str(exc.args[0] if exc.args else exc)
            err = MemoryDeliveryError(text)
            msg = MemoryMessage(topic, None, None, _raw(key), _raw(value))
        if on_delivery is not None:
            self._reports.append((on_delivery, err, msg))

    def poll(self, timeout: float = 0) -> int:
        n = len(self._reports)
        while self._reports:
            cb, err, msg = self._reports.popleft()
            if err is not None or not self.only_error:
                cb(err, msg)
            del cb  # as confluent-kafka drops a record's reference to its callback
        return n

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0

    def __len__(self) -> int:
        return len(self._reports)


def _raw(v: Any) -> Any:
    return v.encode() if isinstance(v, str) else v
