"""The consumer clients the Kafka spout's feed drives: a thin confluent-kafka adapter and
the in-memory log (`memory://NAME`, stormish.testing.MemoryLog), behind one small
interface with plain `(topic, partition)` pairs and record tuples:

    subscribe(topics, pattern, on_assign, on_revoke)   # on_assign returns the starts
    poll(max_records, timeout) -> [(topic, partition, offset, key, value, timestamp)]
    committed(tps) -> {tp: (position, metadata) | None}
    commit(offsets, sync, metadata) -> bool
    pause(tps), resume(tps), high_watermarks(tps) -> {tp: high},
    positions(tps) -> {tp: next offset poll hands over}, close()

and `start_offset`, the first-poll-offset rule (pure).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

TP = tuple[str, int]
BEGINNING, END = "earliest", "latest"
FIRST_POLL_OFFSETS = ("earliest", "latest", "uncommitted_earliest", "uncommitted_latest")
MEMORY = "memory://"
log = logging.getLogger("stormish.kafka")


def start_offset(mode: str, committed: tuple[int, str] | None, ours: str) -> int | str:
    """Where a newly assigned partition is read from (storm-kafka-client's
    FirstPollOffsetStrategy). `earliest`/`latest` ignore a commit this topology did not
    make (its metadata is not `ours`): they apply when the topology first reads the
    partition, and its own commits are resumed from after a restart or a rebalance. The
    `uncommitted_*` modes resume from any commit of the group, and go to the beginning or
    the end where there is none."""
    if committed is not None and (committed[1] == ours or mode.startswith("uncommitted_")):
        return committed[0]
    return BEGINNING if mode in ("earliest", "uncommitted_earliest") else END


def open_client(bootstrap_servers: str, group_id: str, consumer_config: Mapping[str, Any]) -> Any:
    """A MemoryConsumer for `memory://NAME`, else a confluent-kafka consumer."""
    if bootstrap_servers.startswith(MEMORY):
        from ..testing.memory_log import memory_log

        return memory_log(bootstrap_servers[len(MEMORY) :]).consumer(group_id)
    return ConfluentClient(bootstrap_servers, group_id, consumer_config)


def _confluent() -> Any:
    try:
        import confluent_kafka
    except ImportError:
        raise ImportError(
            "KafkaSpout needs confluent-kafka: pip install 'stormish[kafka]'"
        ) from None
    return confluent_kafka


class ConfluentClient:
    """confluent-kafka's Consumer with auto-commit off; every call on the feed thread."""

    def __init__(self, bootstrap: str, group_id: str, consumer_config: Mapping[str, Any]):
        ck = self._ck = _confluent()
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            **consumer_config,
        }
        self._consumer = ck.Consumer(conf)
        # KIP-429: with a cooperative strategy a rebalance assigns and revokes only what
        # moves, and the callbacks must say so incrementally
        self._cooperative = "cooperative" in str(conf.get("partition.assignment.strategy", ""))
        self._starts = {BEGINNING: ck.OFFSET_BEGINNING, END: ck.OFFSET_END}

    def _tps(self, tps: Iterable[TP]) -> list[Any]:
        return [self._ck.TopicPartition(t, p) for t, p in tps]

    def subscribe(
        self,
        topics: Iterable[str] | None,
        pattern: str | None,
        on_assign: Callable[[list[TP]], dict[TP, Any]],
        on_revoke: Callable[[list[TP]], None],
    ) -> None:
        def assign(consumer: Any, parts: list[Any]) -> None:
            starts = on_assign([(p.topic, p.partition) for p in parts])
            for p in parts:
                s = starts.get((p.topic, p.partition))
                p.offset = self._starts.get(s, s) if s is not None else p.offset
            if self._cooperative:
                consumer.incremental_assign(parts)
            else:
                consumer.assign(parts)

        def revoke(consumer: Any, parts: list[Any]) -> None:
            on_revoke([(p.topic, p.partition) for p in parts])
            if self._cooperative:
                consumer.incremental_unassign(parts)
            else:
                consumer.unassign()

        names = list(topics or ())
        if pattern is not None:
            names.append(pattern if pattern.startswith("^") else "^" + pattern)
        self._consumer.subscribe(names, on_assign=assign, on_revoke=revoke, on_lost=revoke)

    def poll(self, max_records: int, timeout: float) -> list[tuple]:
        msgs = self._consumer.consume(max_records, timeout)
        out = [
            (m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1])
            for m in msgs
            if m.error() is None
        ]
        if len(out) != len(msgs):  # errors (end-of-partition events are not)
            for m in msgs:
                err = m.error()
                if err is not None and err.code() != self._ck.KafkaError._PARTITION_EOF:
                    log.warning("Kafka consumer error: %s", err)
        return out

    def committed(self, tps: Iterable[TP]) -> dict[TP, tuple[int, str] | None]:
        got = self._consumer.committed(self._tps(tps), timeout=30)
        return {
            (p.topic, p.partition): (p.offset, p.metadata or "") if p.offset >= 0 else None
            for p in got
        }

    def commit(self, offsets: dict[TP, int], sync: bool, metadata: str = "") -> bool:
        parts = [
            self._ck.TopicPartition(t, p, o, metadata=metadata) for (t, p), o in offsets.items()
        ]
        try:
            self._consumer.commit(offsets=parts, asynchronous=not sync)
        except self._ck.KafkaException as exc:
            log.warning("Kafka commit of %s failed: %s", offsets, exc)
            return False
        return True

    def pause(self, tps: Iterable[TP]) -> None:
        self._consumer.pause(self._tps(tps))

    def resume(self, tps: Iterable[TP]) -> None:
        self._consumer.resume(self._tps(tps))

    def high_watermarks(self, tps: Iterable[TP]) -> dict[TP, int]:
        """From the last fetch response (cached): Tansu's ListOffsets is wrong, and a fetch
        answer is what a consumer sees anyway."""
        out = {}
        for tp in self._tps(tps):
            _, high = self._consumer.get_watermark_offsets(tp, cached=True)
            if high >= 0:
                out[(tp.topic, tp.partition)] = high
        return out

    def positions(self, tps: Iterable[TP]) -> dict[TP, int]:
        """The next offset poll will hand over, per partition (local, no request); past
        the control records of transactions, which are never handed over."""
        got = self._consumer.position(self._tps(tps))
        return {(p.topic, p.partition): p.offset for p in got if p.offset >= 0}

    def close(self) -> None:
        self._consumer.close()
