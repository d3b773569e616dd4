"""The Kafka spout's decisions, with no I/O: what to emit, commit, pause and resume.

Events go in (`assigned`, `polled`, `take`, `ack`, `fail`, `tick`, `revoking`,
`release`), decisions come out as plain values (`Commit`, `Pause`, `Resume`,
`DeadLetter`), and a thin shell (spout.py, feed.py) does what they say against a real
consumer or the in-memory log. Time is a number given by the caller (an injected clock),
so retry backoff and the commit interval are tested exactly.

One `Lane` per assigned partition keeps what storm-kafka-client's OffsetManager and
retry service keep: the records fetched and not yet emitted (in offset order), the
offsets in flight (`stormish.offsets.OffsetTracker`: the commit is the in-order
completed prefix), and the failed records waiting out their backoff. A lane's new
records are emitted in offset order; a replay, once due, goes out before its lane's next
new record.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..offsets import OffsetTracker
from .retry import Retry

AT_LEAST_ONCE, AT_MOST_ONCE, NO_GUARANTEE = "at_least_once", "at_most_once", "no_guarantee"
GUARANTEES = (AT_LEAST_ONCE, AT_MOST_ONCE, NO_GUARANTEE)

TP = tuple[str, int]  # (topic, partition)
# A record as the feed hands it over: (topic, partition, offset, key, value, timestamp);
# it is also the default output tuple, emitted as it is.
Record = tuple[str, int, int, Any, Any, Any]


@dataclass(frozen=True)
class Commit:
    """Commit these positions (the next offset to read, per partition); `sync`: wait for
    the broker's answer (a revoke, at_most_once, closing)."""

    offsets: dict[TP, int]
    sync: bool = False


@dataclass(frozen=True)
class Pause:
    partitions: tuple[TP, ...]


@dataclass(frozen=True)
class Resume:
    partitions: tuple[TP, ...]


@dataclass(frozen=True)
class DeadLetter:
    """A record given up after its retries: emit it on `__dead_letter`, commit past it."""

    record: Record
    msg_id: Any
    failures: int
    error: str | None


@dataclass
class Lane:
    """One assigned partition. `epoch` tells a late ack of an earlier assignment apart."""

    epoch: int
    tracker: OffsetTracker | None = None  # at_least_once: made at the first record emitted
    start: int | None = None  # where reading began (None: the log's beginning or end)
    from_end: bool = False  # reading began at the end of the log
    fetched: int | None = None  # the next offset the consumer will hand over
    emitted: int | None = None  # the next offset to emit (at_most_once, no_guarantee)
    buffer: collections.deque = field(default_factory=collections.deque)
    # offset -> record in flight; a tree of records (records_per_tree) is one entry, its
    # first offset -> the list of its records, until it fails (then one entry a record)
    inflight: dict[int, Any] = field(default_factory=dict)
    failures: dict[int, int] = field(default_factory=dict)  # offset -> times failed
    due: list[tuple[float, int]] = field(default_factory=list)  # (when, offset), to replay
    paused: bool = False
    revoking: bool = False
    end: int | None = None  # stop_at_end: the high watermark seen at start
    high: int | None = None  # the latest high watermark (lag)
    # the last position committed synchronously (or read as committed at assignment);
    # an async commit only moves `last_sent`: its failure is never reported, so the
    # next sync commit (revoke, deactivate, stop_at_end, close) sends the position again
    last_commit: int | None = None
    last_sent: int | None = None

    def position(self) -> int | None:
        """The next offset a restart should read: the completed prefix (at_least_once) or
        what was emitted; before any record, where reading began."""
        if self.tracker is not None:
            return self.tracker.committed
        return self.emitted if self.emitted is not None else self.start

    def uncommitted(self) -> int:
        pos = self.position()
        if pos is None or self.fetched is None:
            return 0
        return self.fetched - pos


class SpoutCore:
    """The per-partition state machine behind KafkaSpout (see the module docstring)."""

    def __init__(
        self,
        guarantee: str = AT_LEAST_ONCE,
        max_uncommitted: int = 10_000_000,
        commit_interval: float = 30.0,
        retry: Retry | None = None,
        now: float = 0.0,
        records_per_tree: int = 1,
    ):
        if guarantee not in GUARANTEES:
            raise ValueError(f"processing_guarantee must be one of {GUARANTEES}, got {guarantee!r}")
        self.guarantee = guarantee
        self.tracking = guarantee == AT_LEAST_ONCE
        self.max_uncommitted = max_uncommitted
        self.commit_interval = commit_interval
        self.retry = retry or Retry()
        self.lanes: dict[TP, Lane] = {}
        # the same lanes by epoch (unique per assignment): a message id carries its
        # lane's epoch, so an ack finds the lane, or no lane for an earlier assignment,
        # with one lookup
        self.by_epoch: dict[int, Lane] = {}
        self.ever_assigned = False
        # between a revoke and the assignment that follows it (an eager rebalance always
        # assigns again, maybe nothing): no lanes then does not mean "at the end"
        self.rebalancing = False
        self._epoch = 0
        self._next_commit = now + commit_interval
        self.dead_lettered = 0
        self.warned_pause = False
        self.buffered = 0  # records fetched and not emitted yet, over all lanes
        # > 1 (at_least_once): up to this many consecutive new records of a lane form one
        # tree, id (topic, partition, first, epoch, last); acked, each of its offsets
        # completes; failed, each is replayed on its own (a one-record tree)
        self.per_tree = records_per_tree if self.tracking else 1
        # take()'s round robin: the lanes in a fixed order (None: rebuilt after an
        # assignment or a release) and where the next call starts in it
        self._order: list[tuple[TP, Lane]] | None = None
        self._rr = 0

    # -- assignment ----------------------------------------------------------------------------
    def assigned(self, starts: dict[TP, int | str]) -> None:
        """Partitions given to this consumer, with where each is read from: an offset
        (the committed position), "earliest" or "latest" (client.start_offset)."""
        self.ever_assigned = True
        self.rebalancing = False
        for tp, start in starts.items():
            self._epoch += 1
            pos = start if isinstance(start, int) else None
            old = self.lanes.get(tp)
            if old is not None:
                self.by_epoch.pop(old.epoch, None)
            lane = self.lanes[tp] = Lane(self._epoch, start=pos, from_end=start == "latest")
            self._order = None
            lane.last_commit = lane.last_sent = pos
            self.by_epoch[lane.epoch] = lane

    def revoking(self, tps: Iterable[TP]) -> None:
        """Stop emitting for these partitions: what is buffered or waits to be replayed is
        dropped (the next owner reads it from the committed position)."""
        self.rebalancing = True
        for tp in tps:
            lane = self.lanes.get(tp)
            if lane is not None:
                lane.revoking = True
                self.buffered -= len(lane.buffer)
                lane.buffer.clear()
                # a failed record waiting for its replay is in no tree: the revoke must
                # not wait for it (it waited the whole revoke timeout); its offset stays
                # uncommitted in the tracker, so the next owner reads it again
                for _, offset in lane.due:
                    lane.inflight.pop(offset, None)
                lane.due.clear()

    def drained(self, tps: Iterable[TP]) -> bool:
        """No tree of these partitions is in flight."""
        return all(not lane.inflight for tp in tps if (lane := self.lanes.get(tp)) is not None)

    def release(self, tps: Iterable[TP]) -> Commit:
        """Forget these partitions; the positions to commit before they go."""
        out = {}
        for tp in tps:
            lane = self.lanes.pop(tp, None)
            if lane is None:
                continue
            self._order = None
            self.by_epoch.pop(lane.epoch, None)
            self.buffered -= len(lane.buffer)
            pos = lane.position()
            if self.guarantee == AT_MOST_ONCE:
                continue  # committed as it was polled already
            if pos is not None and pos != lane.last_commit:
                out[tp] = pos
        return Commit(out, sync=True)

    # -- records in ----------------------------------------------------------------------------
    def polled(self, records: list[Record]) -> list[Any]:
        """Records the consumer handed over, in offset order per partition. Returns the
        commit at_most_once makes before any of them is emitted, and the pauses of
        partitions that reached max_uncommitted."""
        touched: set[TP] = set()
        lanes = self.lanes
        # a poll hands over runs of one partition's records: the lane is looked up once
        # a run, its position written back at the run's end
        topic, partition, lane, append, fetched, first, taken = None, None, None, None, -1, 0, 0
        for r in records:
            if r[1] != partition or r[0] != topic:
                if lane is not None and taken > first:  # the run before: what it moved
                    lane.fetched = fetched
                    touched.add((topic, partition))  # type: ignore[arg-type]
                topic, partition = r[0], r[1]
                lane = lanes.get((topic, partition))
                if lane is None or lane.revoking:
                    lane = None  # not ours (any more): the owner reads it from its position
                    continue
                append, first = lane.buffer.append, taken
                fetched = -1 if lane.fetched is None else lane.fetched
            elif lane is None:
                continue
            if r[2] < fetched:
                continue  # a duplicate delivery of something already had
            if taken == first and lane.start is None:
                lane.start = r[2]  # it began at the log's beginning or end: here
            append(r)  # type: ignore[misc]
            fetched = r[2] + 1
            taken += 1
        if lane is not None and taken > first:
            lane.fetched = fetched
            touched.add((topic, partition))  # type: ignore[arg-type]
        self.buffered += taken
        out: list[Any] = []
        if self.guarantee == AT_MOST_ONCE and touched:
            commit = {tp: self.lanes[tp].fetched for tp in touched}
            for tp, pos in commit.items():
                self.lanes[tp].last_commit = self.lanes[tp].last_sent = pos
            out.append(Commit(commit, sync=True))  # type: ignore[arg-type]
        if self.tracking:
            full = tuple(tp for tp in touched if self._over(self.lanes[tp]))
            if full:
                for tp in full:
                    self.lanes[tp].paused = True
                out.append(Pause(full))
        return out

    def _over(self, lane: Lane) -> bool:
        return lane.uncommitted() >= self.max_uncommitted and not lane.paused

    # -- emitting ------------------------------------------------------------------------------
    def take(self, limit: int, now: float) -> list[tuple[Record, Any]]:
        """Up to `limit` records to emit now, each with its message id (None where the
        guarantee does not track): per lane, replays that are due first, then new
        records, in offset order (as storm-kafka-client, a replay waiting out its
        backoff does not hold the later records of its partition back).

        Lanes are served round robin: a first pass gives each lane at most its fair
        share of `limit` (a second pass then fills what the lanes with nothing to give
        left over), and the next call starts at the first lane the limit cut short (or
        after the last that emitted). Walking them in a fixed order starved every lane but the first
        under max.spout.pending, or behind a backlog: with a few places free a call,
        the first lane with records took them all, for as long as it had any."""
        out: list[tuple[Record, Any]] = []
        if limit <= 0:
            return out
        order = self._order
        if order is None:
            order = self._order = list(self.lanes.items())
        n = len(order)
        if n == 0:
            return out
        start = self._rr % n
        share = -(-limit // n)  # at least 1
        last, cut = -1, -1  # the last lane that emitted; the first the limit cut short
        for k in range(n):
            i = (start + k) % n
            if len(out) >= limit:
                cut = i
                break
            tp, lane = order[i]
            if lane.revoking:
                continue
            before = len(out)
            cap = before + share
            if cap > limit:
                cap = limit
            if lane.due:
                self._take_due(tp, lane, now, cap, out)
            self._take_new(tp, lane, cap, out)
            if len(out) > before:
                last = i
                if len(out) >= limit and len(out) - before < share:
                    cut = i  # its share was cut: it starts the next call
                    break
        if len(out) < limit and share < limit:
            for k in range(n):  # what the lanes with too little left: in the same order
                if len(out) >= limit:
                    break
                tp, lane = order[(start + k) % n]
                if lane.revoking:
                    continue
                if lane.due:
                    self._take_due(tp, lane, now, limit, out)
                self._take_new(tp, lane, limit, out)
        self._rr = cut if cut >= 0 else last + 1 if last >= 0 else start + 1
        return out

    def _take_due(self, tp: TP, lane: Lane, now: float, limit: int, out: list) -> None:
        due = lane.due
        while due and len(out) < limit and due[0][0] <= now:
            _, offset = due.pop(0)
            out.append((lane.inflight[offset], (tp[0], tp[1], offset, lane.epoch)))

    def _take_new(self, tp: TP, lane: Lane, limit: int, out: list) -> None:
        buf = lane.buffer
        before = len(out)
        if not self.tracking:
            while buf and len(out) < limit:
                out.append((buf.popleft(), None))
            if len(out) > before:
                lane.emitted = out[-1][0][2] + 1
                self.buffered -= len(out) - before
            return
        topic, partition, epoch = tp[0], tp[1], lane.epoch
        if lane.tracker is None and buf:
            lane.tracker = OffsetTracker(buf[0][2])
        tracker = lane.tracker
        # max_uncommitted bounds what is emitted too, not only what is fetched: a
        # partition never has more offsets in flight past its completed prefix
        cap = tracker.committed + self.max_uncommitted if tracker is not None else 0
        if self.per_tree > 1:
            if buf:
                self.buffered -= self._take_trees(tp, lane, limit, cap, out)
            return
        n = min(len(buf), limit - before)
        if n <= 0:
            return
        if buf[n - 1][2] >= cap:  # offsets ascend: stop below the cap
            n = 0
            while n < len(buf) and n < limit - before and buf[n][2] < cap:
                n += 1
        popleft = buf.popleft
        rows = [popleft() for _ in range(n)]
        offsets = [r[2] for r in rows]
        tracker.track_ascending(offsets)  # type: ignore[union-attr]
        lane.inflight.update(zip(offsets, rows, strict=True))
        out.extend([(r, (topic, partition, r[2], epoch)) for r in rows])
        self.buffered -= n

    def _take_trees(self, tp: TP, lane: Lane, limit: int, cap: int, out: list) -> int:
        """New records in trees of up to `per_tree` (`limit` counts trees, as
        max.spout.pending does): each entry is (list of records, (topic, partition,
        first offset, epoch, last offset)). Returns how many records it took."""
        buf, inflight, per = lane.buffer, lane.inflight, self.per_tree
        track = lane.tracker.track_range  # type: ignore[union-attr]
        popleft, topic, partition, epoch = buf.popleft, tp[0], tp[1], lane.epoch
        taken = 0
        while buf and len(out) < limit and buf[0][2] < cap:
            k = min(per, len(buf))
            if buf[k - 1][2] >= cap:  # offsets ascend: the tree ends below the cap
                k = 1
                while k < per and k < len(buf) and buf[k][2] < cap:
                    k += 1
            rows = [popleft() for _ in range(k)]
            first, last = rows[0][2], rows[-1][2]
            inflight[first] = rows  # one entry a tree (a list: a record is a tuple)
            track(first, last)  # one heap entry a tree
            taken += k
            out.append((rows, (topic, partition, first, epoch, last)))
        return taken

    # -- completion ----------------------------------------------------------------------------
    def ack(self, msg_id: Any) -> Resume | None:
        """A tree completed: its offset joins the completed prefix; the partition resumes
        when it fell back under max_uncommitted."""
        lane = self.by_epoch.get(msg_id[3])  # _lane_of, by its epoch: once per tree
        if lane is None:
            return None
        offset = msg_id[2]
        if len(msg_id) == 5:  # a tree of records: each of its offsets completes
            if not self._complete_range(lane, offset, msg_id[4]):
                return None
        else:
            if lane.inflight.pop(offset, None) is None:
                return None
            if lane.failures:
                lane.failures.pop(offset, None)
            lane.tracker.complete(offset)  # type: ignore[union-attr]
        if lane.paused and lane.uncommitted() < self.max_uncommitted:
            lane.paused = False
            return Resume(((msg_id[0], msg_id[1]),))
        return None

    def _complete_range(self, lane: Lane, first: int, last: int) -> bool:
        """A tree of records completed: its offsets (tracked as one range) join the
        completed prefix. False when it is not in flight as a tree (acked twice, or failed
        and replaying record by record)."""
        inflight = lane.inflight
        if inflight.get(first).__class__ is not list:
            return False
        del inflight[first]  # a tree never failed: none of its records has a failure count
        lane.tracker.complete(first)  # type: ignore[union-attr]
        return True

    def fail(
        self, msg_id: Any, now: float, dead: bool = False, error: str | None = None
    ) -> list[Any]:
        """A tree failed: schedule its replay after the backoff, or give it up and commit
        past it: `dead` (the engine dead-lettered it, topology.max.replays) or past the
        retry limit (then a DeadLetter for the spout to emit). Returns the decisions
        (DeadLetter, Resume). A tree of records fails each of its records (each then
        replays as a tree of its own)."""
        if len(msg_id) == 5:
            lane = self._lane_of(msg_id)
            if lane is None:
                return []
            each: list[Any] = []
            t, p, first, epoch = msg_id[0], msg_id[1], msg_id[2], msg_id[3]
            inflight = lane.inflight
            rows = inflight.get(first)
            if rows.__class__ is not list:  # not in flight as a tree (failed twice)
                return each
            for r in rows:  # from here each record is in flight on its own
                inflight[r[2]] = r
            offsets = [r[2] for r in rows]
            lane.tracker.split(first, offsets[1:])  # type: ignore[union-attr]
            for offset in offsets:
                each.extend(self.fail((t, p, offset, epoch), now, dead, error))
            return each
        lane = self._lane_of(msg_id)
        offset = msg_id[2]
        if lane is None or offset not in lane.inflight:
            return []
        if lane.revoking:  # the next owner reads it again: only stop waiting for it
            del lane.inflight[offset]
            return []
        n = lane.failures.get(offset, 0) + 1
        if dead or not self.retry.may_retry(n):
            out: list[Any] = []
            if not dead:
                self.dead_lettered += 1
                out.append(DeadLetter(lane.inflight[offset], msg_id, n, error))
            resume = self.ack(msg_id)
            return out if resume is None else [*out, resume]
        lane.failures[offset] = n
        _insort(lane.due, (now + self.retry.delay(n), offset))
        return []

    def _lane_of(self, msg_id: Any) -> Lane | None:
        # None: an ack of an earlier assignment: that owner's business is over
        return self.by_epoch.get(msg_id[3])

    # -- periodic ------------------------------------------------------------------------------
    def tick(self, now: float) -> Commit | None:
        """The periodic commit (at_least_once: each partition's completed prefix;
        no_guarantee: what was polled), every `commit_interval` seconds."""
        if now < self._next_commit or self.guarantee == AT_MOST_ONCE:
            return None
        self._next_commit = now + self.commit_interval
        return self.commit_now(sync=False)

    def commit_now(self, sync: bool) -> Commit | None:
        if self.guarantee == AT_MOST_ONCE:
            return None  # committed as it was polled
        out = {}
        for tp, lane in self.lanes.items():
            pos = lane.position()
            if pos is None:
                continue
            if sync:
                # every position not yet committed synchronously, even one an async
                # commit sent: its outcome is never known here (a failed async commit
                # was lost for good before, even by the commit at close)
                if pos != lane.last_commit:
                    out[tp] = lane.last_commit = lane.last_sent = pos
            elif pos != lane.last_sent and pos != lane.last_commit:
                out[tp] = lane.last_sent = pos
        return Commit(out, sync) if out else None

    # -- progress ------------------------------------------------------------------------------
    def set_high(
        self, highs: dict[TP, int], stop_at_end: bool, positions: dict[TP, int] | None = None
    ) -> None:
        """High watermarks from the consumer's fetches; the first one of a lane is its
        end when the spout stops at the end. `positions`: the consumer's position in each
        partition, given after every record before it was handed over."""
        for tp, high in highs.items():
            lane = self.lanes.get(tp)
            if lane is not None:
                lane.high = high
                if stop_at_end and lane.end is None:
                    lane.end = high
        for tp, pos in (positions or {}).items():
            lane = self.lanes.get(tp)
            if lane is not None and not (lane.inflight or lane.buffer or lane.due):
                self._skip_to(lane, pos)

    def _skip_to(self, lane: Lane, consumed: int) -> None:
        """An idle lane whose consumer is past its position moves up to it: offsets the
        consumer skipped (transaction markers, compacted records) are never emitted, and
        would otherwise hold the commit (and stop_at_end) back for ever."""
        pos = lane.position()
        if pos is not None and consumed <= pos:
            return
        if self.tracking:
            if lane.tracker is None:
                lane.tracker = OffsetTracker(consumed)
            else:
                lane.tracker.committed = consumed  # idle: nothing pending or done behind
        else:
            lane.emitted = consumed
        lane.fetched = max(lane.fetched or 0, consumed)

    def at_end(self) -> bool:
        """Every assigned partition completed up to the end seen at its start."""
        if not self.ever_assigned or self.rebalancing:
            return False
        for lane in self.lanes.values():
            if lane.end is None or lane.inflight or lane.buffer or lane.due:
                return False
            pos = lane.position()
            if pos is None:
                if not (lane.from_end or lane.end == 0):
                    return False
            elif pos < lane.end:
                return False
        return True

    def lag(self) -> dict[TP, int]:
        """Per partition: the high watermark less the completed position (what a restart
        would still have to read); partitions whose high watermark is not known yet are
        left out."""
        out = {}
        for tp, lane in self.lanes.items():
            if lane.high is None:
                continue
            pos = lane.position()
            out[tp] = max(0, lane.high - (pos if pos is not None else 0))
        return out

    def in_flight(self) -> int:
        """Records in flight (a tree counts its records)."""
        return sum(
            sum(len(e) if e.__class__ is list else 1 for e in lane.inflight.values())
            for lane in self.lanes.values()
        )

    def trees_in_flight(self) -> int:
        """Tuple trees in flight: a tree of records, or a record of its own."""
        return sum(len(lane.inflight) for lane in self.lanes.values())


def _insort(due: list[tuple[float, int]], item: tuple[float, int]) -> None:
    """Due replays are kept by (time, offset); few, so a list is enough."""
    i = len(due)
    while i and due[i - 1] > item:
        i -= 1
    due.insert(i, item)
