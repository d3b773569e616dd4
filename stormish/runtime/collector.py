"""The output collector: emit, route, batch per destination, publish, park.

Emit never blocks. A tuple is routed at emit time into the outbox of each destination
task; a full outbox (the producer batch) is published to the destination's receive queue
(or to the worker transfer for a remote task). When the publish is refused (queue full,
remote task under backpressure) the batch goes to this executor's pendingEmitQ, and so
does every later batch until the pendingEmitQ drains, which keeps the emit order.

Order across streams: when a task switches from one user stream to another, the old
stream's outboxes are flushed first, so a destination sees one upstream task's tuples in
emission order whatever streams they came by.

Acking (when on) rides on the same path: deliveries get random edge ids recorded in a
meta list beside the values, and ack messages are tuples on system streams routed to
the acker task `root % ackers`.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import TopologyError
from ..tuple import Tuple
from . import grouping as g
from .plan import ACK_ACK, ACK_FAIL, ACK_INIT, ACK_RESET, Plan


class Outbox(list):
    """The producer batch for one (stream, destination task)."""

    __slots__ = ("task", "stream", "target", "metas", "flushed")

    def __init__(self, task: int, stream: str, target: Any, tracked: bool):
        super().__init__()
        self.task = task
        self.stream = stream
        self.target = target
        self.metas: list[Any] | None = [] if tracked else None
        self.flushed = 0


class Route:
    """Everything needed to emit on one stream of this task."""

    __slots__ = (
        "stream",
        "arity",
        "pickers",
        "single",
        "outboxes",
        "direct",
        "count_boxes",
        "extra",
        "shuffles",
        "system",
        "shuffle1",
    )

    def __init__(self, stream: str, arity: int):
        self.stream = stream
        self.arity = arity
        self.pickers: list[Callable[[Any], Any]] = []
        self.single: Callable[[Any], Any] | None = None
        self.outboxes: list[Outbox] = []
        self.direct: dict[int, Outbox] = {}
        self.count_boxes: list[Outbox] = []
        self.extra = 0  # emits counted directly (no subscriber, or a fan-out first picker)
        self.shuffles: list[g.Shuffle] = []
        self.shuffle1: g.Shuffle | None = None  # the only subscriber, by shuffle
        self.system = stream.startswith("__")


class Collector:
    def __init__(
        self,
        plan: Plan,
        task: int,
        targets: Mapping[int, Any],
        local_tasks: set[int],
        batch_size: int,
        rand: random.Random | None = None,
    ):
        self.plan = plan
        self.task = task
        self.component = plan.task_component[task]
        self.batch_size = batch_size
        self.acking = plan.acking
        self.pending: deque[tuple[Any, tuple, int]] = deque()
        self.pending_count = 0
        self.transferred = 0
        self.last_stream: str | None = None
        self.routes: dict[str, Route] = {}
        self.outboxes: list[Outbox] = []
        self.rand = (rand or random.Random()).getrandbits
        self.current: Tuple | None = None  # BasicBolt's input being executed
        self.basic = False
        self.acked_on_emit: list[Any] = []  # spout msg ids to ack at once (acking off)
        self.reliable: Any = None  # spout executor's pending-tree map (acking on)
        self.clock_now: Callable[[], float] = lambda: 0.0
        for stream, fields in plan.streams[self.component].items():
            self.routes[stream] = self._build_route(stream, fields, targets, local_tasks)
        self._ack_route = self.routes.get(ACK_ACK)
        self._fail_route = self.routes.get(ACK_FAIL)
        self._reset_route = self.routes.get(ACK_RESET)
        self._init_route = self.routes.get(ACK_INIT)
        # acker outboxes indexed by root % ackers, for the inlined ack paths
        self._ack_boxes = self._acker_boxes(self._ack_route)
        self._init_boxes = self._acker_boxes(self._init_route)

    # -- building --------------------------------------------------------------------------
    def _build_route(
        self, stream: str, fields: Sequence[str], targets: Mapping[int, Any], local_tasks: set[int]
    ) -> Route:
        route = Route(stream, len(fields))
        tracked = self.acking and not route.system
        for consumer, sub in self.plan.consumers(self.component, stream):
            tasks = self.plan.tasks[consumer]
            boxes = [Outbox(t, stream, targets[t], tracked) for t in tasks]
            route.outboxes.extend(boxes)
            self.outboxes.extend(boxes)
            where = f"{consumer!r} on {self.component!r} stream {stream!r}"
            picker = self._picker(sub, boxes, tasks, fields, local_tasks, route, where)
            if picker is None:  # direct grouping: only emit_direct reaches these tasks
                route.direct.update(zip(tasks, boxes, strict=True))
                continue
            route.pickers.append(picker)
            if len(route.pickers) == 1 and sub.grouping not in ("all", "custom"):
                route.count_boxes = boxes
        if len(route.pickers) == 1:
            route.single = route.pickers[0]
            if len(route.shuffles) == 1:
                route.shuffle1 = route.shuffles[0]
        return route

    def _picker(
        self,
        sub: Any,
        boxes: list[Outbox],
        tasks: list[int],
        fields: Sequence[str],
        local: set[int],
        route: Route,
        where: str,
    ):
        kind = sub.grouping
        if route.system and kind == "fields":
            return g.AckerRoute(boxes).pick
        if kind in ("shuffle", "none", "local_or_shuffle"):
            chosen = boxes
            if kind == "local_or_shuffle":
                chosen = [b for b in boxes if b.task in local] or boxes
            sh = g.Shuffle(chosen)
            route.shuffles.append(sh)
            return lambda values, sh=sh: sh.pick_next()
        if kind == "fields":
            return g.Fields(boxes, [fields.index(f) for f in sub.fields]).pick
        if kind == "partial_key":
            return g.PartialKey(boxes, [fields.index(f) for f in sub.fields]).pick
        if kind == "all":
            return g.All(boxes).pick
        if kind == "global":
            return g.Global(boxes).pick
        if kind == "custom":
            return g.Custom(boxes, tasks, sub.custom, where).pick
        if kind == "direct":
            return None
        raise TopologyError(f"unknown grouping {kind!r} for {where}")

    # -- emit ------------------------------------------------------------------------------
    def _route(self, stream: str, values: Sequence[Any]) -> Route:
        route = self.routes.get(stream)
        if route is None or route.system:
            raise TopologyError(
                f"component {self.component!r} emitted on undeclared stream {stream!r}; it "
                f"declares {sorted(s for s in self.routes if not s.startswith('__'))}"
            )
        if len(values) != route.arity:
            raise TopologyError(
                f"component {self.component!r} emitted {len(values)} values on stream "
                f"{stream!r}, which declares {route.arity} fields "
                f"{list(self.plan.streams[self.component][stream])}"
            )
        if stream != self.last_stream:
            self._switch_stream(stream)
        return route

    def _switch_stream(self, stream: str) -> None:
        last = self.routes.get(self.last_stream) if self.last_stream else None
        self.last_stream = stream
        if last is not None:
            for ob in last.outboxes:
                if ob:
                    self.flush(ob)

    def _deliveries(self, route: Route, values: Sequence[Any]) -> list[Outbox]:
        out: list[Outbox] = []
        for pick in route.pickers:
            ob = pick(values)
            if ob.__class__ is Outbox:
                out.append(ob)
            else:
                out.extend(ob)
        if not route.count_boxes:
            route.extra += 1
        return out

    def emit(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        """Acking off (the hot path). Spout msg ids are acked once next_tuple returns."""
        route = self.routes.get(stream)
        if route is None or stream != self.last_stream or len(values) != route.arity:
            route = self._route(stream, values)
        sh = route.shuffle1
        if sh is not None:
            ob = sh.pick_next()
        elif route.single is not None:
            ob = route.single(values)
            if ob.__class__ is not Outbox:
                self._emit_fanout(route, values, msg_id)
                return
        else:
            self._emit_fanout(route, values, msg_id)
            return
        ob.append(values)
        if len(ob) >= self.batch_size:
            self.flush(ob)
        if msg_id is not None:
            self.acked_on_emit.append(msg_id)

    def _emit_fanout(self, route: Route, values: Sequence[Any], msg_id: Any) -> None:
        for ob in self._deliveries(route, values):
            ob.append(values)
            if len(ob) >= self.batch_size:
                self.flush(ob)
        if msg_id is not None:
            self.acked_on_emit.append(msg_id)

    def emit_spout_tracked(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        route = self._route(stream, values)
        if msg_id is None:
            self._put_all(self._deliveries(route, values), values, None)
            return
        rand = self.rand
        root = rand(63)
        sh = route.shuffle1
        if sh is not None:  # the common case, inlined
            ob = sh.pick_next()
            xor = rand(63)
            ob.append(values)
            ob.metas.append(((root, xor),))
            if len(ob) >= self.batch_size:
                self.flush(ob)
        else:
            xor = 0
            for ob in self._deliveries(route, values):
                e = rand(63)
                xor ^= e
                self._put(ob, values, ((root, e),))
        self.reliable(root, msg_id)
        boxes = self._init_boxes
        if boxes:
            ob = boxes[root % len(boxes)]
            ob.append((root, xor, self.task))
            if len(ob) >= self.batch_size:
                self.flush(ob)

    def emit_bolt_tracked(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        route = self._route(stream, values)
        self._emit_anchored(route, values, anchors)

    def emit_basic_tracked(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        route = self._route(stream, values)
        self._emit_anchored(route, values, self.current if anchors is None else anchors)

    def _emit_anchored(self, route: Route, values: Sequence[Any], anchors: Any) -> None:
        obs = self._deliveries(route, values)
        if anchors is None:
            self._put_all(obs, values, None)
            return
        if isinstance(anchors, Tuple):
            anchors = (anchors,)
        roots = {r for a in anchors if a.meta for r, _ in a.meta}
        if not roots:
            self._put_all(obs, values, None)
            return
        rand = self.rand
        for ob in obs:
            e = rand(63)
            for a in anchors:
                if a.meta:
                    a.ack_val ^= e
            self._put(ob, values, tuple((r, e) for r in roots))

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        route = self._route(stream, values)
        ob = route.direct.get(task)
        if ob is None:
            raise TopologyError(
                f"component {self.component!r} emit_direct to task {task} on stream "
                f"{stream!r}: no direct-grouping subscriber has that task"
            )
        route.extra += 1
        if not self.acking:
            self._put(ob, values, None)
            if msg_id is not None:
                self.acked_on_emit.append(msg_id)
        elif self.reliable is not None:  # a spout
            if msg_id is None:
                self._put(ob, values, None)
                return
            root, e = self.rand(63), self.rand(63)
            self._put(ob, values, ((root, e),))
            self.reliable(root, msg_id)
            self._system(self._init_route, (root, e, self.task))
        else:
            if anchors is None and self.basic:
                anchors = self.current
            if anchors is None:
                self._put(ob, values, None)
            else:
                self._emit_anchored_to(ob, values, anchors)

    def _emit_anchored_to(self, ob: Outbox, values: Sequence[Any], anchors: Any) -> None:
        if isinstance(anchors, Tuple):
            anchors = (anchors,)
        roots = {r for a in anchors if a.meta for r, _ in a.meta}
        e = self.rand(63)
        for a in anchors:
            if a.meta:
                a.ack_val ^= e
        self._put(ob, values, tuple((r, e) for r in roots) if roots else None)

    def emit_direct_system(self, task: int, values: Sequence[Any], stream: str) -> None:
        """For the acker: straight to a spout task's outbox."""
        ob = self.routes[stream].direct[task]
        ob.append(values)
        if len(ob) >= self.batch_size:
            self.flush(ob)

    def _put(self, ob: Outbox, values: Sequence[Any], meta: Any) -> None:
        ob.append(values)
        if ob.metas is not None:
            ob.metas.append(meta)
        if len(ob) >= self.batch_size:
            self.flush(ob)

    def _put_all(self, obs: list[Outbox], values: Sequence[Any], meta: Any) -> None:
        for ob in obs:
            self._put(ob, values, meta)

    @staticmethod
    def _acker_boxes(route: Route | None) -> list[Outbox]:
        return list(route.outboxes) if route is not None and route.single is not None else []

    def _system(self, route: Route | None, values: tuple) -> None:
        if route is None or route.single is None:
            return
        ob = route.single(values)
        ob.append(values)
        if len(ob) >= self.batch_size:
            self.flush(ob)

    # -- acking (bolts) ----------------------------------------------------------------------
    def ack(self, tup: Tuple) -> None:
        meta = tup.meta
        if meta:
            val = tup.ack_val
            boxes = self._ack_boxes
            for root, e in meta:
                ob = boxes[root % len(boxes)]
                ob.append((root, e ^ val))
                if len(ob) >= self.batch_size:
                    self.flush(ob)

    def fail(self, tup: Tuple) -> None:
        meta = tup.meta
        if meta:
            for root, _ in meta:
                self._system(self._fail_route, (root,))

    def reset_timeout(self, tup: Tuple) -> None:
        meta = tup.meta
        if meta:
            for root, _ in meta:
                self._system(self._reset_route, (root,))

    # -- publishing --------------------------------------------------------------------------
    def flush(self, ob: Outbox) -> None:
        n = len(ob)
        metas = ob.metas
        if metas is not None:
            batch = (self.task, ob.stream, ob[:], metas[:])
            metas.clear()
        else:
            batch = (self.task, ob.stream, ob[:], None)
        ob.clear()
        ob.flushed += n
        if self.pending or not ob.target.try_publish(batch, n):
            self.pending.append((ob.target, batch, n))
            self.pending_count += n
        else:
            self.transferred += n

    def flush_all(self) -> None:
        for ob in self.outboxes:
            if ob:
                self.flush(ob)

    def flush_pending(self) -> bool:
        """Publish parked batches in order; stop at the first refusal. True when empty."""
        pending = self.pending
        while pending:
            target, batch, n = pending[0]
            if not target.try_publish(batch, n):
                return False
            pending.popleft()
            self.pending_count -= n
            self.transferred += n
        return True

    def buffered(self) -> int:
        return sum(len(ob) for ob in self.outboxes)

    def refresh_load(self) -> None:
        for route in self.routes.values():
            for sh in route.shuffles:
                sh.refresh([ob.target.load() for ob in sh.outboxes])

    def emitted(self) -> dict[str, int]:
        out = {}
        for stream, route in self.routes.items():
            if route.system:
                continue
            n = route.extra + sum(ob.flushed + len(ob) for ob in route.count_boxes)
            out[stream] = n
        return out
