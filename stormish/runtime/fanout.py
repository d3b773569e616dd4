"""A fan-out is all or nothing for `fail` edges: when one emit goes to several
edges (several subscribers, all_grouping's tasks, or the rows of one `emit_many`) and a
`fail` edge among them is full, none of them gets the tuple: the rejection is counted on
the full edge, with the reason, and the tuple's tree fails there (reason `overflow`).

Storm has no counterpart (its edges block); a robotics runtime publishes a message to
all of a topic's subscribers or to none. It is decided at the emit, in the sender: only a
component with a `fail` edge (in its own worker or another) is guarded, and only its
emits on the streams that feed one, so the common emit pays nothing. A guarded emit runs the
collector's method (never a bound fast path) without flushing; what it appended to each
outbox is then known: the room it needs on each local `fail` edge is reserved in that
edge's channel (`ReceiveQueue.reserve`; the later publish takes the reservation). If one
refuses, the others' reservations are released and what the emit appended is taken back
from every outbox. A `fail` edge in another worker is judged the same way against the
credit that worker granted the sender (runtime/credits.py: room set aside for it ahead,
no round trip per emit); a rejection there is reported to that worker, which counts it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .channel import EdgeChannel
from .credits import SenderCredit

NO_FLUSH = 1 << 62  # the collector's batch size while a guarded emit runs


class LocalRoom:
    """A `fail` edge into a task of this worker: room is reserved in its channel."""

    __slots__ = ("q", "ch")

    def __init__(self, q: Any, ch: EdgeChannel):
        self.q, self.ch = q, ch

    def reserve(self, src: int, k: int) -> bool:
        return bool(self.q.reserve(self.ch, src, k))

    def unreserve(self, src: int, k: int) -> None:
        self.q.unreserve(self.ch, src, k)

    def reject(self, batch: tuple, k: int, withheld: int) -> None:
        self.q.reject(self.ch, batch, k, withheld)


# a `fail` edge's room as the guard sees it: a local channel's, or a remote one's credit
Room = LocalRoom | SenderCredit


class FanoutGuard:
    """One task's guard: `boxes[stream]` its outboxes on streams that feed a `fail` edge,
    `fails[id(outbox)]` that edge's room (a local channel, or credit in another worker)."""

    def __init__(
        self,
        col: Any,
        boxes: Mapping[str, list[Any]],
        fails: Mapping[int, Room],
    ):
        self.col = col
        self.boxes = dict(boxes)
        self.fails = dict(fails)

    def wrap(self, fn: Callable[..., Any], stream_at: int) -> Callable[..., Any]:
        """`fn` (a collector method) guarded on the streams that need it; `stream_at`:
        the position of its `stream` argument."""
        boxes = self.boxes

        def guarded(*args: Any, **kw: Any) -> Any:
            stream = args[stream_at] if len(args) > stream_at else kw.get("stream", "default")
            obs = boxes.get(stream)
            if obs is None:
                return fn(*args, **kw)
            return self._run(fn, obs, args, kw)

        return guarded

    def _run(self, fn: Callable[..., Any], obs: list[Any], args: tuple, kw: dict) -> Any:
        col = self.col
        marks = [(ob, len(ob), None if ob.metas is None else len(ob.metas)) for ob in obs]
        size = col.batch_size
        col.batch_size = NO_FLUSH
        try:
            out = fn(*args, **kw)
        finally:
            col.batch_size = size
        grown = [(ob, n, m) for ob, n, m in marks if len(ob) > n]
        if not self._reserve(grown):
            return out
        for ob, _, _ in grown:
            if len(ob) >= size:  # in batches of the size, as the emit would have
                col.flush(ob) if ob.metas is not None else col._flush_whole(ob, size)
        return out

    def _reserve(self, grown: list[tuple[Any, int, int | None]]) -> bool:
        """Room on every `fail` edge the emit reached, or none: False after taking the
        emit back and recording the rejection on the first full edge."""
        fails, task = self.fails, self.col.task
        taken: list[tuple[Room, int]] = []
        for ob, n, _ in grown:
            room = fails.get(id(ob))
            if room is None:
                continue
            k = len(ob) - n
            if room.reserve(task, k):
                taken.append((room, k))
                continue
            for room2, k2 in taken:
                room2.unreserve(task, k2)
            self._take_back(grown, ob, room, k)
            return False
        return True

    def _take_back(self, grown: list, full_ob: Any, room: Room, k: int) -> None:
        """Everything the emit appended leaves every outbox; the full edge counts it."""
        withheld = 0
        rejected: tuple | None = None
        for ob, n, m in grown:
            rows = ob[n:]
            metas = None if m is None else ob.metas[m:]
            del ob[n:]
            if m is not None:
                del ob.metas[m:]
            if ob is full_ob:
                rejected = (self.col.task, ob.stream, rows, metas)
            else:
                withheld += len(rows)
        assert rejected is not None
        room.reject(rejected, k, withheld)
        # counted as sent, as the edge counts them as arrived (the completion rule's sum)
        self.col.parked.transferred += k


def guard_for(ex: Any, queues: Mapping[int, Any]) -> FanoutGuard | None:
    """The guard of executor `ex`, or None when no stream of it feeds a `fail` edge (in
    its own worker, or on credit in another: its outbox's target is a SenderCredit);
    then its emits are left as they are."""
    col = ex.collector
    fails: dict[int, Room] = {}
    streams: set[str] = set()
    for ob in col.outboxes:
        if ob.target.__class__ is SenderCredit:
            fails[id(ob)] = ob.target
            streams.add(ob.stream)
            continue
        q = queues.get(ob.task)
        if q is None or not q.channels:
            continue
        ch = q.channels.get((ex.task, ob.stream))
        if ch.__class__ is EdgeChannel and ch.policy.overflow == "fail":
            fails[id(ob)] = LocalRoom(q, ch)
            streams.add(ob.stream)
    if not fails:
        return None
    boxes = {s: [ob for ob in col.outboxes if ob.stream == s] for s in streams}
    return FanoutGuard(col, boxes, fails)
