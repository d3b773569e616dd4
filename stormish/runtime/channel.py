"""An edge's own channel at its destination task, and the edge's health counters.

An edge with a dropping policy (stormish.edges) does not share its task's receive queue:
its batches wait in an `EdgeChannel` the queue owns, bounded in tuples, that never
refuses a sender. What does not fit is handled by the policy here, on the publishing
thread under the queue's lock (a local upstream's, or the link's receive thread for
batches from other workers): so the policy holds across workers, and the overflowQ and
backpressure statuses stay for `block` edges only. Trees of tuples let go are not
failed here (a foreign thread, a lock held): the channel keeps their tree ids and the
task's executor fails them on its next turn (`EdgeChannel.lost`).

`StampedRows` carries the time a batch was published, for edges with `lifespan_ms` or
`deadline_ms`; the executor checks the age when it takes the batch (`screen`).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..edges import DROPPED, OVERFLOWED, OVERWRITTEN, THROTTLE_MAX_S, EdgePolicy
from ..tuple import StampedRows
from .credits import ReceiverCredits
from .health import DEADLINE_MISSED, HIGH_MARK, HIGH_WATERMARK, OVERFLOW, REARM, HealthEvents
from .seams import Batch


def _slice(values: list, i: int, j: int | None = None) -> list:
    part = values[i:j]
    if values.__class__ is StampedRows:
        return StampedRows(part, values.born)
    return part


# an edge's counters, as the statistics show and sum them (per task, then per component)
EDGE_COUNTS = (
    "arrived",
    "executed",
    "dropped",
    "stale",
    "overwritten",
    "rejected",
    "deadline_missed",
    "queued",
    "throttled",
)


class EdgeStats:
    """One edge into one destination task. Sum check, exact once nothing is in flight:
    arrived = executed + dropped + overwritten + rejected + queued (`stale` is part of
    `dropped`; `deadline_missed` of `executed`)."""

    # the counters (EDGE_COUNTS; `queued`: in the channel now, block edges counted in the
    # task's queue; `throttled`: batches a throttle held back at a sender in this worker)
    __slots__ = (
        "source",
        "stream",
        "task",
        "policy",
        *EDGE_COUNTS,
        "high",
        "last_what",
        "last_at",
        "events",
        "capacity",
        "above",
    )

    def __init__(self, source: str, stream: str, task: int, policy: EdgePolicy):
        self.source, self.stream, self.task, self.policy = source, stream, task, policy
        self.arrived = self.executed = self.dropped = self.stale = 0  # EDGE_COUNTS
        self.overwritten = self.rejected = self.deadline_missed = 0
        self.queued = self.throttled = 0
        self.high = 0  # most tuples waiting in the edge's channel at once
        self.last_what: str | None = None
        self.last_at = 0.0
        # health events (runtime/health.py): the worker's ring, None when off for it
        self.events: HealthEvents | None = None
        self.capacity = 0  # the edge's channel, or its task's queue (block edges)
        self.above = False  # past the high mark, not yet back under the re-arm mark

    @property
    def edge(self) -> str:
        return f"{self.source}:{self.stream}"

    def note(self, what: str, reason: str = OVERFLOW, depth: int | None = None) -> None:
        self.last_what = what
        self.last_at = time.time()
        if self.events is not None:
            d = self.queued if depth is None else depth
            self.events.record(self, reason, d, self.capacity, what)

    def missed(self, n: int) -> None:
        """`n` executed past their deadline_ms (the counter; an event when kept)."""
        self.deadline_missed += n
        if self.events is not None:
            self.note(
                f"deadline_missed: {n} past deadline_ms={self.policy.deadline_ms:g}",
                DEADLINE_MISSED,
            )

    def depth(self, size: int) -> None:
        """A channel's depth changed (only called when events are kept): a crossing of
        the high mark upward is an event, told again after a fall under the re-arm mark."""
        cap = self.capacity
        if not self.above:
            if size >= cap * HIGH_MARK:
                self.above = True
                self.note(f"high watermark: {size}/{cap} waiting", HIGH_WATERMARK, size)
        elif size < cap * REARM:
            self.above = False

    def lost(self) -> int:
        return self.dropped + self.overwritten + self.rejected

    def as_dict(self) -> dict[str, Any]:
        last = None
        if self.last_what is not None:
            last = f"{self.last_what} at {time.strftime('%H:%M:%S', time.localtime(self.last_at))}"
        return {
            "edge": self.edge,
            "source": self.source,
            "stream": self.stream,
            "policy": self.policy.as_dict(),
            **{name: getattr(self, name) for name in EDGE_COUNTS},
            "high_watermark": self.high,
            "last_reason": last,
            "last_at": self.last_at,  # seconds since the epoch, 0.0: never
        }


REJECTED_KEPT = 1000  # batches of rejected rows waiting to be dead-lettered, per channel


class EdgeChannel:
    """The bounded channel of one edge at one task. Called under the owning queue's lock
    (offer, take, take_lost)."""

    __slots__ = (
        "policy",
        "stats",
        "capacity",
        "batches",
        "size",
        "lost",
        "_apply",
        "rejected",
        "reserved",
        "reserved_by",
        "credits",
    )

    def __init__(self, policy: EdgePolicy, stats: EdgeStats, capacity: int):
        self.policy = policy
        self.stats = stats
        self.capacity = capacity
        self.batches: deque[tuple] = deque()  # (src, stream, values, metas)
        self.size = 0
        # (metas of tuples let go, reason): their trees fail on the executor's next turn
        self.lost: list[tuple[list, str]] = []
        # rows a `fail` edge refused, for the bolt's dead-letter stream when someone
        # subscribes (None: nobody does, keep nothing), at most REJECTED_KEPT waiting
        self.rejected: list[tuple[int, str, list]] | None = None
        # `fail` edges: room taken at emit by senders of this worker for tuples still in
        # their outboxes (runtime/fanout.py: a fan-out is all or nothing), and room set
        # aside as credit for senders in other workers (runtime/credits.py), by sender task
        self.reserved = 0
        self.reserved_by: dict[int, int] = {}
        # `fail` edges fed from other workers: the credits their senders hold (room
        # reserved for them in `reserved_by`, runtime/credits.py); None: none does
        self.credits: ReceiverCredits | None = None
        self._apply = {
            "drop_oldest": self._drop_oldest,
            "drop_newest": self._refuse_newest,
            "fail": self._refuse_newest,
            "latest": self._latest,
        }[policy.overflow]

    def refuses(self, n: int) -> bool:
        return False  # a dropping edge never refuses: its policy decides

    def excess(self) -> int:
        return 0

    def settle(self, n: int) -> None:
        pass

    def offer(self, batch: Batch, n: int) -> int:
        """Place a batch under the policy; returns the change in tuples waiting."""
        st = self.stats
        st.arrived += n
        before = self.size
        self._apply(batch, n)
        if self.size > st.high:
            st.high = self.size
        st.queued = self.size
        if st.events is not None:
            st.depth(self.size)
        return self.size - before

    def offer_local(self, batch: Batch, n: int) -> int:
        """A batch from a task of this worker, or from a sender in another worker that
        holds credits: what its sender reserved (or spent credit on) is placed whatever
        the fill (its room was taken at emit), the rest under the policy. Returns the
        change in tuples waiting, as `offer`."""
        src = batch[0]
        r = min(self.reserved_by.get(src, 0), n) if self.reserved else 0
        if not r:
            return self.offer(batch, n)
        self.reserved_by[src] -= r
        self.reserved -= r
        before = self.size
        _, stream, values, metas = batch
        if r == n:
            self.batches.append(batch)
        else:
            m = None if metas is None else metas[:r]
            self.batches.append((src, stream, _slice(values, 0, r), m))
        self.size += r
        self.stats.arrived += r
        if r < n:  # not reserved (a system emit): judged as any arrival
            self.offer(
                (src, stream, _slice(values, r), None if metas is None else metas[r:]), n - r
            )
        st = self.stats
        if self.size > st.high:
            st.high = self.size
        st.queued = self.size
        if st.events is not None:
            st.depth(self.size)
        return self.size - before

    def _let_go(self, metas: list | None, k: int, reason: str) -> None:
        if metas is not None and k:
            self.lost.append((metas, reason))

    def _full(self, extra: str = "") -> str:
        full = min(self.size, self.capacity)
        return f"{self.policy.overflow}: queue full ({full}/{self.capacity}){extra}"

    def _drop_oldest(self, batch: Batch, n: int) -> None:
        self.batches.append(batch)
        self.size += n
        over = self.size - self.capacity
        if over <= 0:
            return
        st = self.stats
        st.dropped += over
        what = self._full(f", {over} oldest dropped")
        bs = self.batches
        while over > 0:
            src, stream, values, metas = bs[0]
            k = len(values)
            if k <= over:
                bs.popleft()
                self._let_go(metas, k, DROPPED)
                self.size -= k
                over -= k
            else:
                bs[0] = (src, stream, _slice(values, over), None if metas is None else metas[over:])
                self._let_go(None if metas is None else metas[:over], over, DROPPED)
                self.size -= over
                over = 0
        st.note(what, OVERFLOW, self.size)

    def _refuse_newest(self, batch: Batch, n: int) -> None:
        free = self.capacity - self.size - self.reserved
        if n <= free:
            self.batches.append(batch)
            self.size += n
            return
        src, stream, values, metas = batch
        if free > 0:
            self.batches.append(
                (src, stream, _slice(values, 0, free), None if metas is None else metas[:free])
            )
            self.size += free
        k = n - max(free, 0)
        st = self.stats
        rest = None if metas is None else metas[max(free, 0) :]
        if self.policy.overflow == "fail":
            st.rejected += k
            st.note(self._full(f", {k} rejected"), OVERFLOW, self.size)
            self._let_go(rest, k, OVERFLOWED)
            kept = self.rejected
            if kept is not None and len(kept) < REJECTED_KEPT:
                kept.append((src, stream, list(values[max(free, 0) :])))
        else:
            st.dropped += k
            st.note(self._full(f", {k} newest dropped"), OVERFLOW, self.size)
            self._let_go(rest, k, DROPPED)

    def _latest(self, batch: Batch, n: int) -> None:
        """One slot: the batch's last tuple replaces whatever waited."""
        src, stream, values, metas = batch
        gone = self.size + n - 1
        if gone:
            st = self.stats
            st.overwritten += gone
            st.note(f"latest: {gone} overwritten by newer tuples", OVERFLOW, self.size)
            for _, _, _, m in self.batches:
                self._let_go(m, 1, OVERWRITTEN)
            if n > 1:
                self._let_go(None if metas is None else metas[:-1], n - 1, OVERWRITTEN)
        self.batches.clear()
        self.batches.append(
            (src, stream, _slice(values, n - 1), None if metas is None else metas[n - 1 :])
        )
        self.size = 1

    def take(self, budget: int, out: list) -> int:
        """Whole batches up to `budget` tuples (at least one) into `out`; returns how many."""
        bs = self.batches
        taken = 0
        while bs and (taken < budget or not taken):
            b = bs.popleft()
            out.append(b)
            taken += len(b[2])
        self.size -= taken
        st = self.stats
        st.queued = self.size
        if st.events is not None:
            st.depth(self.size)
        if self.credits is not None:
            self.credits.dirty = True  # room to hand out again (the link tops up)
        return taken


@dataclass(frozen=True)
class LanePolicy:
    """An ordered_lanes edge, as the statistics show it."""

    key: tuple[str, ...]
    lanes: int
    max_in_flight: int
    overflow: str = "lanes"
    channel = True
    stamped = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "overflow": "lanes",
            "key": list(self.key),
            "lanes": self.lanes,
            "max_in_flight": self.max_in_flight,
        }


class LaneChannel:
    """An ordered_lanes edge at one task: what arrived waits here (up to `capacity`
    before its senders are held back), and leaves only while fewer than `max_in_flight`
    of the edge's tuples are taken and not yet settled; a batch is split to fit, so the
    bound is exact. Local senders are refused when it is full (their pendingEmitQ, then
    backpressure); batches from other workers are never refused: what is past the
    capacity counts as the task's overflow, for which the link flags it to them."""

    __slots__ = ("policy", "stats", "capacity", "batches", "size", "lost", "in_flight", "rejected")
    credits = None  # never fed on credit (a `fail` edge's, runtime/credits.py)

    def __init__(self, policy: LanePolicy, stats: EdgeStats, capacity: int):
        self.policy = policy
        self.stats = stats
        self.capacity = capacity
        self.batches: deque[tuple] = deque()
        self.size = 0
        self.lost: list[tuple[list, str]] = []  # never used: a lane lets nothing go
        self.rejected: list[tuple[int, str, list]] | None = None  # nor rejects any
        self.in_flight = 0

    def refuses(self, n: int) -> bool:
        return self.size > 0 and self.size + n > self.capacity

    def excess(self) -> int:
        return max(0, self.size - self.capacity)

    def offer(self, batch: Batch, n: int) -> int:
        st = self.stats
        st.arrived += n
        self.batches.append(batch)
        self.size += n
        if self.size > st.high:
            st.high = self.size
        st.queued = self.size
        if st.events is not None:
            st.depth(self.size)
        return n

    def offer_local(self, batch: Batch, n: int) -> int:
        return self.offer(batch, n)

    def take(self, budget: int, out: list) -> int:
        room = self.policy.max_in_flight - self.in_flight
        bs = self.batches
        taken = 0
        while bs and room > 0 and taken < budget:
            src, stream, values, metas = bs[0]
            k = len(values)
            if k <= room:
                bs.popleft()
                out.append((src, stream, values, metas))
            else:
                out.append(
                    (src, stream, _slice(values, 0, room), None if metas is None else metas[:room])
                )
                bs[0] = (src, stream, _slice(values, room), None if metas is None else metas[room:])
                k = room
            taken += k
            room -= k
        self.in_flight += taken
        self.size -= taken
        st = self.stats
        st.queued = self.size
        if st.events is not None:
            st.depth(self.size)
        return taken

    def settle(self, n: int) -> None:
        self.in_flight -= n


class Throttled:
    """A sender's view of a local task's queue on a throttled edge (stormish.edges): below
    `throttle` free, a batch of n tuples is followed by a pause of n / (capacity x free)
    seconds (1 / (capacity x free) a tuple), capped; a refusal parks the batch in the
    sender's pendingEmitQ like backpressure, so nothing is lost."""

    __slots__ = ("q", "throttle", "now", "until", "stats")

    def __init__(self, q: Any, throttle: float, now: Any, stats: EdgeStats | None = None):
        self.q, self.throttle, self.now = q, throttle, now
        self.until = 0.0
        self.stats = stats

    def try_publish(self, batch: Batch, n: int) -> bool:
        q = self.q
        free = 1.0 - q.size / q.capacity
        if free >= self.throttle:
            return q.try_publish(batch, n)
        t = self.now()
        if t < self.until:
            if self.stats is not None:
                self.stats.throttled += 1
            return False
        if not q.try_publish(batch, n):
            return False
        self.until = t + min(THROTTLE_MAX_S, n / (q.capacity * max(free, 1.0 / q.capacity)))
        return True

    def load(self) -> float:
        return self.q.load()
