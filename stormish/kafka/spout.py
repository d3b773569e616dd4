"""KafkaSpout: storm-kafka-client's spout on stormish's offsets and dead letters.

The decisions are SpoutCore's (core.py, no I/O); the consumer lives on a feed thread
(feed.py) so that `next_tuple` only takes what was fetched already and never waits. The
same spout reads the in-memory log (`bootstrap_servers="memory://NAME"`,
stormish.testing.MemoryLog) in tests. docs/connectors.md says how each guarantee works.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ..component import DEFAULT_STREAM, Spout
from .client import FIRST_POLL_OFFSETS
from .core import (
    AT_LEAST_ONCE,
    AT_MOST_ONCE,
    GUARANTEES,
    Commit,
    DeadLetter,
    Pause,
    Resume,
    SpoutCore,
)
from .retry import Retry

FIELDS = ("topic", "partition", "offset", "key", "value", "timestamp")
EMITS_PER_CALL = 256  # bounds what one next_tuple call can park in the pendingEmitQ
log = logging.getLogger("stormish.kafka")


class KafkaRecord(NamedTuple):
    """What a translator is given: one consumed record."""

    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    timestamp: Any


class ToStream(NamedTuple):
    """A translator's answer that routes the record's values to another stream."""

    stream: str
    values: Sequence[Any]


class KafkaSpout(Spout):
    """Read `topics` (or the topics matching the regular expression `topic_pattern`) as
    consumer group `group_id`. See docs/connectors.md for every option."""

    def __init__(
        self,
        bootstrap_servers: str,
        topics: Sequence[str] | str | None = None,
        topic_pattern: str | None = None,
        group_id: str | None = None,
        processing_guarantee: str = AT_LEAST_ONCE,
        first_poll_offset: str = "uncommitted_earliest",
        max_uncommitted_offsets: int = 10_000_000,
        commit_interval_secs: float = 30.0,
        retry: Retry | None = None,
        translator: Callable[[KafkaRecord], Any] | None = None,
        stop_at_end: bool = False,
        consumer_config: Mapping[str, Any] | None = None,
        fields: Sequence[str] | None = None,
        streams: Mapping[str, Sequence[str]] | None = None,
        stream_per_topic: bool = False,
        poll_batch: int = 500,
        max_buffered: int = 10_000,
        revoke_timeout_secs: float = 30.0,
        commit_offsets: bool = True,
        records_per_tree: int = 1,
    ):
        if isinstance(topics, str):
            topics = [topics]
        _check_args(bootstrap_servers, topics, topic_pattern, group_id)
        _check_choice("processing_guarantee", processing_guarantee, GUARANTEES)
        _check_choice("first_poll_offset", first_poll_offset, FIRST_POLL_OFFSETS)
        for name, v in (
            ("max_uncommitted_offsets", max_uncommitted_offsets),
            ("poll_batch", poll_batch),
            ("max_buffered", max_buffered),
            ("records_per_tree", records_per_tree),
        ):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"KafkaSpout {name} must be an integer >= 1, got {v!r}")
        for name, f in (
            ("commit_interval_secs", commit_interval_secs),
            ("revoke_timeout_secs", revoke_timeout_secs),
        ):
            # bools are ints to Python, and NaN passes every comparison (a NaN commit
            # interval committed on every tick, an infinite one never)
            if (
                isinstance(f, bool)
                or not isinstance(f, int | float)
                or not math.isfinite(f)
                or f < 0
            ):
                raise ValueError(f"KafkaSpout {name} must be a finite number >= 0, got {f!r}")
        if retry is not None and not isinstance(retry, Retry):
            raise TypeError(f"KafkaSpout retry must be a stormish.kafka.Retry, got {retry!r}")
        if not commit_offsets and processing_guarantee != AT_LEAST_ONCE:
            raise ValueError("KafkaSpout commit_offsets=False needs at_least_once")
        if records_per_tree > 1 and (
            translator is not None or stream_per_topic or processing_guarantee != AT_LEAST_ONCE
        ):
            raise ValueError(
                "KafkaSpout records_per_tree > 1 needs at_least_once and the default output "
                "(no translator, no stream_per_topic)"
            )
        if stream_per_topic and not topics:
            raise ValueError("KafkaSpout stream_per_topic needs topics (not topic_pattern)")
        self.bootstrap_servers, self.group_id = bootstrap_servers, group_id
        self.topics = list(topics) if topics else None
        self.topic_pattern = topic_pattern
        self.processing_guarantee, self.first_poll_offset = processing_guarantee, first_poll_offset
        self.max_uncommitted_offsets = max_uncommitted_offsets
        self.commit_interval_secs = float(commit_interval_secs)
        self.retry = retry or Retry()
        self.translator, self.stop_at_end = translator, bool(stop_at_end)
        self.consumer_config = dict(consumer_config or {})
        self.fields = tuple(fields) if fields is not None else FIELDS
        self.stream_fields = {str(k): tuple(v) for k, v in (streams or {}).items()}
        self.stream_per_topic = stream_per_topic
        self.poll_batch, self.max_buffered = poll_batch, max_buffered
        self.revoke_timeout_secs = float(revoke_timeout_secs)
        # > 1: consecutive records of a partition form one tree (one message id): far
        # less tracking per record; a failed tree replays each of its records on its own
        self.records_per_tree = records_per_tree
        # False: a transactional sink commits the offsets with its output (it sends them
        # in its transaction); the spout only tracks completion and never commits
        self.commit_offsets = bool(commit_offsets)
        if translator is None and (fields is not None or streams):
            raise ValueError(
                "KafkaSpout fields/streams declare a translator's output: give translator"
            )

    # -- declaration ---------------------------------------------------------------------------
    def declared_streams(self) -> dict[str, tuple[str, ...]]:
        if self.stream_per_topic:
            out = {t: self.fields for t in self.topics or ()}
        else:
            out = {DEFAULT_STREAM: self.fields}
        out.update(self.stream_fields)
        return out

    # -- running -------------------------------------------------------------------------------
    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        from .client import open_client
        from .feed import Feed

        self.component = getattr(context, "component_id", "KafkaSpout")
        clock = getattr(context, "clock", None)
        self._now = clock.now if clock is not None else time.monotonic
        self._core = SpoutCore(
            self.processing_guarantee,
            self.max_uncommitted_offsets,
            self.commit_interval_secs,
            self.retry,
            self._now(),
            self.records_per_tree,
        )
        if conf.get("topology.acker.executors") == 0 and self._core.tracking:
            # the runtime acks each message id as it is emitted
            log.warning("%s: acking is off, so at_least_once commits on emit", self.component)
        self._max_pending = conf.get("topology.max.spout.pending")
        self._pulled = 0
        self._revoking: list[tuple[list, int]] = []
        self._gauges: dict[str, float] = {}
        self._next_gauges = 0.0
        self._finished = False
        self._plain = self.translator is None and not self.stream_per_topic
        servers, group, cfg = self.bootstrap_servers, self.group_id, self.consumer_config
        self._feed = Feed(
            lambda: open_client(servers, group, cfg),  # type: ignore[arg-type]
            self.topics,
            self.topic_pattern,
            self.first_poll_offset,
            f"stormish:{getattr(context, 'topology_name', '')}",
            self.poll_batch,
            self.max_buffered,
            self.revoke_timeout_secs,
            name=f"kafka-feed-{self.component}",
            commit_polled=self.processing_guarantee == AT_MOST_ONCE,
        )
        self._feed.start()

    def next_tuple(self) -> None:
        feed, core = self._feed, self._core
        if feed.inbox:
            self._drain_inbox()
        elif feed.error is not None:
            raise RuntimeError(f"KafkaSpout {self.component}: the consumer failed") from feed.error
        now = self._now()
        if now >= core._next_commit:
            self._do(core.tick(now))
        limit = EMITS_PER_CALL
        if self._max_pending is not None:  # counts trees
            limit = min(limit, max(0, self._max_pending - core.trees_in_flight()))
        batch = core.take(limit, now)
        if batch:
            if core.per_tree > 1:
                self._emit_trees(batch)
            elif self._plain:
                emit = self.emit
                for r, mid in batch:
                    emit(r, DEFAULT_STREAM, None, mid)
            else:
                self._emit_translated(batch)
            feed.taken = self._pulled - core.buffered
        elif self.stop_at_end and not self._finished and core.at_end():
            self._do(core.commit_now(sync=True))
            self._finished = True
            self._next_gauges = now  # the last lag (0) is what the statistics keep
            feed.passive = True  # next_tuple is not called any more: revokes do not wait
            self.finish()
        if now >= self._next_gauges:
            self._gauges = {f"lag:{t}/{p}": n for (t, p), n in core.lag().items()}
            self._next_gauges = now + 1.0

    def _emit_trees(self, batch: list) -> None:
        """Trees of records (emit_many: one message id each) and one-record replays."""
        emit, emit_many = self.emit, self.emit_many
        for rows, mid in batch:
            if len(mid) == 5:
                emit_many(rows, DEFAULT_STREAM, None, mid)
            else:
                emit(rows, DEFAULT_STREAM, None, mid)

    def _emit_translated(self, batch: list) -> None:
        translate, emit = self.translator, self.emit
        per_topic = self.stream_per_topic
        for r, mid in batch:
            stream = r[0] if per_topic else DEFAULT_STREAM
            values = translate(KafkaRecord(*r)) if translate is not None else r
            if values is None:  # skipped: complete at once, as storm-kafka-client does
                if mid is not None:
                    # its completion may bring a paused partition back under
                    # max_uncommitted_offsets: the Resume must reach the consumer (dropped,
                    # the partition stayed paused for good)
                    resume = self._core.ack(mid)
                    if resume is not None:
                        self._do(resume)
                continue
            if isinstance(values, ToStream):
                stream, values = values.stream, values.values
            emit(values, stream, None, mid)

    def _drain_inbox(self) -> None:
        inbox, core = self._feed.inbox, self._core
        while inbox:
            event = inbox.popleft()
            kind = event[0]
            if kind == "records":
                self._pulled += len(event[1])
                decisions = core.polled(event[1])
                if self._feed.commit_polled:  # the feed committed them before handing them
                    decisions = [d for d in decisions if not isinstance(d, Commit)]
                self._do_all(decisions)
            elif kind == "assigned":
                self._stale_revokes(event[1])
                core.assigned(event[1])
            elif kind == "revoke":
                core.revoking(event[1])
                self._revoking.append((event[1], event[2]))
                self._check_revoked()
            elif kind == "high":
                core.set_high(event[1], self.stop_at_end, event[2])

    def _stale_revokes(self, starts: Mapping[Any, Any]) -> None:
        """A new assignment: the feed no longer waits for any revoke (it gave up on
        those still here, after revoke_timeout_secs). Their partitions that did not come
        back are let go now; those that did get new lanes. Left pending, a later ack
        found a returned partition's new lane drained and released it while the consumer
        still owned it: its records were dropped as not ours, never read again."""
        if not self._revoking:
            return
        gone = [tp for tps, _token in self._revoking for tp in tps if tp not in starts]
        self._revoking = []
        if gone:
            self._core.release(gone)  # nothing to commit: the partitions are not ours

    def _check_revoked(self) -> None:
        """Partitions being revoked whose trees all completed: commit and let them go."""
        still = []
        for tps, token in self._revoking:
            if self._core.drained(tps):
                self._do(self._core.release(tps))
                self._feed.command(("released", token))
            else:
                still.append((tps, token))
        self._revoking = still

    def _do_all(self, decisions: list[Any]) -> None:
        for d in decisions:
            self._do(d)

    def _do(self, d: Any) -> None:
        if d is None:
            return
        if isinstance(d, Commit):
            if d.offsets and self.commit_offsets:
                self._feed.command(("commit", d.offsets, d.sync))
        elif isinstance(d, Pause):
            if not self._core.warned_pause:
                self._core.warned_pause = True
                log.warning(
                    "%s: partitions %s reached max_uncommitted_offsets %d: paused, not "
                    "buffered, until their trees complete (said once)",
                    self.component,
                    list(d.partitions),
                    self.max_uncommitted_offsets,
                )
            self._feed.command(("pause", d.partitions))
        elif isinstance(d, Resume):
            self._feed.command(("resume", d.partitions))
        elif isinstance(d, DeadLetter):
            self.dead_letter(d.msg_id, d.record, d.error, d.failures)

    def ack(self, msg_id: Any) -> None:
        resume = self._core.ack(msg_id)
        if resume is not None:
            self._do(resume)
        if self._revoking:
            self._check_revoked()

    def fail(self, msg_id: Any, failure: Any = None) -> None:
        dead = failure is not None and failure.dead_letter
        error = None
        if failure is not None:
            error = f"{failure.reason}" + (f": {failure.error}" if failure.error else "")
        self._do_all(self._core.fail(msg_id, self._now(), dead, error))
        if self._revoking:
            self._check_revoked()

    def deactivate(self) -> None:
        """Commit what completed; a revoke while deactivated does not wait for this
        thread (next_tuple is not called), the partitions go with this commit."""
        feed = getattr(self, "_feed", None)
        if feed is not None:
            self._do(self._core.commit_now(sync=True))
            feed.passive = True

    def activate(self) -> None:
        feed = getattr(self, "_feed", None)
        if feed is not None:
            feed.passive = False

    def close(self) -> None:
        feed = getattr(self, "_feed", None)
        if feed is None:
            return
        final = self._core.commit_now(sync=True)
        feed.close(final.offsets if final and self.commit_offsets else None)

    # -- what the statistics read (another thread: a dict swapped whole) -----------------------
    def gauges(self) -> Mapping[str, float]:
        """Consumer lag per partition, `lag:TOPIC/PARTITION`: the high watermark less the
        completed position (a restart would read that many again)."""
        return getattr(self, "_gauges", {})

    def committed_positions(self) -> dict[tuple[str, int], int]:
        """Each assigned partition's completed prefix (the position at_least_once commits
        next): for a sink that commits offsets in its own transaction. Spout thread only."""
        return {
            tp: p for tp, lane in self._core.lanes.items() if (p := lane.position()) is not None
        }


def _check_args(bootstrap: Any, topics: Any, pattern: Any, group_id: Any) -> None:
    if not isinstance(bootstrap, str) or not bootstrap:
        raise ValueError(
            f"KafkaSpout bootstrap_servers must be 'host:port[,...]', got {bootstrap!r}"
        )
    if (topics is None) == (pattern is None):
        raise ValueError("KafkaSpout needs exactly one of topics= and topic_pattern=")
    if topics is not None and (not topics or not all(isinstance(t, str) and t for t in topics)):
        raise ValueError(f"KafkaSpout topics must be non-empty topic names, got {topics!r}")
    if not isinstance(group_id, str) or not group_id:
        raise ValueError(f"KafkaSpout group_id must be a non-empty string, got {group_id!r}")


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"KafkaSpout {name} must be one of {', '.join(choices)}; got {value!r}")
