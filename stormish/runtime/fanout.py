"""A fan-out is all or nothing for `fail` edges: when one emit goes to several
edges (several subscribers, all_grouping's tasks, or the rows of one `emit_many`) and a
`fail` edge among them is full, none of them gets the tuple: the rejection is counted on
the full edge, with the reason, and the tuple's tree fails there (reason `overflow`).

Storm has no counterpart (its edges block); a robotics runtime publishes a message to
all of a topic's subscribers or to none. It is decided at the emit, in the sender: only a
component with a `fail` edge into a task of its own worker is guarded, and only its emits
on the streams that feed one, so the common emit pays nothing. A guarded emit runs the
collector's method (never a bound fast path) without flushing; what it appended to each
outbox is then known: the room it needs on each local `fail` edge is reserved in that
edge's channel (`ReceiveQueue.reserve`; the later publish takes the reservation). If one
refuses, the others' reservations are released and what the emit appended is taken back
from every outbox. A `fail` edge in another worker is judged when the batch arrives
there (no round trip per emit): a fan-out across workers is not withheld for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .channel import EdgeChannel

NO_FLUSH = 1 << 62  # the collector's batch size while a guarded emit runs


class FanoutGuard:
    """One task's guard: `boxes[stream]` its outboxes on streams that feed a local `fail`
    edge, `fails[id(outbox)]` that edge's (queue, channel)."""

    def __init__(
        self,
        col: Any,
        boxes: Mapping[str, list[Any]],
        fails: Mapping[int, tuple[Any, EdgeChannel]],
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
        """Room on every local `fail` edge the emit reached, or none: False after taking
        the emit back and recording the rejection on the first full edge."""
        fails, task = self.fails, self.col.task
        taken: list[tuple[Any, EdgeChannel, int]] = []
        for ob, n, _ in grown:
            hit = fails.get(id(ob))
            if hit is None:
                continue
            q, ch = hit
            k = len(ob) - n
            if q.reserve(ch, task, k):
                taken.append((q, ch, k))
                continue
            for q2, ch2, k2 in taken:
                q2.unreserve(ch2, task, k2)
            self._take_back(grown, ob, q, ch, k)
            return False
        return True

    def _take_back(self, grown: list, full_ob: Any, q: Any, ch: EdgeChannel, k: int) -> None:
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
        q.reject(ch, rejected, k, withheld)
        # counted as sent, as the edge counts them as arrived (the completion rule's sum)
        self.col.parked.transferred += k


def guard_for(ex: Any, queues: Mapping[int, Any]) -> FanoutGuard | None:
    """The guard of executor `ex`, or None when no stream of it feeds a `fail` edge in
    its own worker (then its emits are left as they are)."""
    col = ex.collector
    fails: dict[int, tuple[Any, EdgeChannel]] = {}
    streams: set[str] = set()
    for ob in col.outboxes:
        q = queues.get(ob.task)
        if q is None or not q.channels:
            continue
        ch = q.channels.get((ex.task, ob.stream))
        if ch.__class__ is EdgeChannel and ch.policy.overflow == "fail":
            fails[id(ob)] = (q, ch)
            streams.add(ob.stream)
    if not fails:
        return None
    boxes = {s: [ob for ob in col.outboxes if ob.stream == s] for s in streams}
    return FanoutGuard(col, boxes, fails)
