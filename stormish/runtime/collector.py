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

Acks are combined: XOR is associative and commutative, so a bolt's acks for one root
between two flushes fold into one (root, xor) message. A tree of many tuples (a spout's
`emit_many` with one message id, or a sentence split into words that one bolt acks)
then costs the acker one message per flush, not one per tuple.
"""

from __future__ import annotations

import random
import sys
from array import array
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from typing import Any

from ..errors import TopologyError
from ..tuple import DEAD_LETTER_STREAM, Tuple, TupleBatch
from . import grouping as g
from .plan import ACK_ACK, ACK_FAIL, ACK_INIT, ACK_RESET, Plan


def xor_words(raw: bytes) -> int:
    """XOR of the native-order unsigned 64-bit words of `raw`, by folding one big int in
    halves: a few C-level big-int operations instead of a Python XOR per word (~40 ns
    each: a 64-bit int is a fresh object)."""
    words = len(raw) // 8
    x = int.from_bytes(raw, _NATIVE)
    width = 1 << (words - 1).bit_length() if words > 1 else 1  # words, a power of two
    while width > 1:
        width >>= 1
        shift = width << 6
        x = (x >> shift) ^ (x & ((1 << shift) - 1))
    return x


_NATIVE = sys.byteorder


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
        # A spout's tree ids pick an acker on the spout's own worker (beyond Storm, which
        # hashes them anywhere): the tree's init and the acker's verdict then never
        # cross a link, and only downstream bolts on other workers send acks over one.
        n = len(self._init_boxes)
        local = [i for i, ob in enumerate(self._init_boxes) if ob.task in local_tasks]
        self._root_n = n if local and n > 1 else 0
        self._root_k = local[task % len(local)] if local else 0
        self._acks: dict[int, int] = {}  # root -> XOR of acks not yet sent (combined)
        self._randbytes = (rand or random.Random()).randbytes

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
        if self._root_n:
            root += self._root_k - root % self._root_n
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
        self.reliable(root, msg_id, 1, values, stream)
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
        route = self.routes.get(stream)
        if (
            anchors is None
            and route is not None
            and stream == self.last_stream
            and len(values) == route.arity
            and route.single is not None
        ):
            # the common reliable bolt emit, inlined: anchored to the one input being
            # executed, which belongs to one tree, and one destination task
            cur = self.current
            meta = cur.meta if cur is not None else None
            if meta is not None and len(meta) == 1:
                ob = route.single(values)
                if ob.__class__ is Outbox:
                    e = self.rand(63)
                    cur.ack_val ^= e
                    ob.append(values)
                    ob.metas.append(((meta[0][0], e),))
                    if len(ob) >= self.batch_size:
                        self.flush(ob)
                    return
                if not route.count_boxes:  # as _deliveries counts a fan-out
                    route.extra += 1
                self._put_anchored(ob, values, (cur,))
                return
        route = self._route(stream, values)
        self._emit_anchored(route, values, self.current if anchors is None else anchors)

    def _emit_anchored(self, route: Route, values: Sequence[Any], anchors: Any) -> None:
        obs = self._deliveries(route, values)
        if anchors is None:
            self._put_all(obs, values, None)
            return
        if isinstance(anchors, Tuple):
            anchors = (anchors,)
        self._put_anchored(obs, values, anchors)

    def _put_anchored(self, obs: list[Outbox], values: Sequence[Any], anchors: Any) -> None:
        for ob in obs:
            self._put(ob, values, self._anchor(anchors))

    def _anchor(self, anchors: Any) -> Any:
        """Storm's rule, per delivery: a fresh edge id for each tracked anchor, XORed into
        that anchor's ack value and, for each root the anchor belongs to, into the child's
        id for that root. One edge shared by several anchors of one tree would cancel out
        (XOR) and complete the tree before the child is acked."""
        rand = self.rand
        ids: dict[int, int] = {}
        for a in anchors:
            meta = a.meta
            if meta:
                e = rand(63)
                a.ack_val ^= e
                for r, _ in meta:
                    ids[r] = ids.get(r, 0) ^ e
        return tuple(ids.items()) if ids else None

    # -- emit_many: a batch of rows in one call (and, from a spout, one tuple tree) -----------
    def _route_rows(self, stream: str, rows: Sequence[Sequence[Any]]) -> Route:
        route = self.routes.get(stream)
        if route is None or route.system:
            self._route(stream, ())  # raises: undeclared stream
        if rows and set(map(len, rows)) != {route.arity}:
            bad = next(i for i, v in enumerate(rows) if len(v) != route.arity)
            raise TopologyError(
                f"component {self.component!r} emit_many row {bad} has {len(rows[bad])} "
                f"values on stream {stream!r}, which declares {route.arity} fields "
                f"{list(self.plan.streams[self.component][stream])}; no row was emitted"
            )
        if stream != self.last_stream:
            self._switch_stream(stream)
        return route

    def emit_many(
        self,
        rows: Sequence[Sequence[Any]],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        """Acking off. Every row is checked before any is emitted."""
        rows = rows if rows.__class__ is list or rows.__class__ is tuple else list(rows)
        self._put_rows(self._route_rows(stream, rows), rows)
        if msg_id is not None:
            self.acked_on_emit.append(msg_id)

    def emit_many_spout_tracked(
        self,
        rows: Sequence[Sequence[Any]],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        """All rows form one tuple tree under `msg_id`: acked once, when every row's
        subtree is; failed (the whole batch) when any part fails or times out."""
        rows = rows if rows.__class__ is list or rows.__class__ is tuple else list(rows)
        route = self._route_rows(stream, rows)
        if msg_id is None:
            self._put_rows(route, rows)
            return
        root = self.rand(63)
        if self._root_n:
            root += self._root_k - root % self._root_n
        xor = self._put_tree(route, rows, (root,))
        self.reliable(root, msg_id, len(rows), rows, stream)
        boxes = self._init_boxes
        if boxes:
            ob = boxes[root % len(boxes)]
            ob.append((root, xor, self.task))
            if len(ob) >= self.batch_size:
                self.flush(ob)

    def emit_many_bolt_tracked(
        self,
        rows: Sequence[Sequence[Any]],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        rows = rows if rows.__class__ is list or rows.__class__ is tuple else list(rows)
        self._emit_many_anchored(self._route_rows(stream, rows), rows, anchors)

    def emit_many_basic_tracked(
        self,
        rows: Sequence[Sequence[Any]],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        rows = rows if rows.__class__ is list or rows.__class__ is tuple else list(rows)
        route = self._route_rows(stream, rows)
        self._emit_many_anchored(route, rows, self.current if anchors is None else anchors)

    def _emit_many_anchored(self, route: Route, rows: Sequence[Any], anchors: Any) -> None:
        if anchors is not None:
            if isinstance(anchors, Tuple):
                anchors = (anchors,)
            tracked = [a for a in anchors if a.meta]
            if len(tracked) == 1:  # the common case: one edge per delivery, in bulk
                (a,) = tracked
                a.ack_val ^= self._put_tree(route, rows, tuple(r for r, _ in a.meta))
                return
            if tracked:  # several anchors: an edge per anchor per delivery (_anchor)
                put, deliveries, anchor = self._put, self._deliveries, self._anchor
                for v in rows:
                    for ob in deliveries(route, v):
                        put(ob, v, anchor(tracked))
                return
        self._put_rows(route, rows)

    def _put_rows(self, route: Route, rows: Sequence[Any]) -> None:
        """Untracked rows: whole slices per outbox when the stream has one shuffle
        subscriber, else routed row by row."""
        sh = route.shuffle1
        if sh is not None:
            self._spread(sh, rows, None)
            return
        put_all, deliveries = self._put_all, self._deliveries
        for v in rows:
            put_all(deliveries(route, v), v, None)

    def _put_tree(self, route: Route, rows: Sequence[Any], roots: tuple[int, ...]) -> int:
        """Rows in the trees of `roots`, a fresh edge id per delivery; returns the XOR of
        the edge ids (what the anchor or the spout's init must account for)."""
        sh = route.shuffle1
        if sh is None:
            rand, put, deliveries = self.rand, self._put, self._deliveries
            xor = 0
            for v in rows:
                for ob in deliveries(route, v):
                    e = rand(63)
                    xor ^= e
                    put(ob, v, tuple((r, e) for r in roots))
            return xor
        n = len(rows)
        if not n:
            return 0
        # one C call for n random 64-bit edge ids (seedable: the collector's Random)
        raw = self._randbytes(8 * n)
        edges = array("Q", raw).tolist()
        if len(roots) == 1:
            metas = list(zip(zip(repeat(roots[0]), edges)))  # ((root, e),) per row
        else:
            metas = [tuple((r, e) for r in roots) for e in edges]
        self._spread(sh, rows, metas)
        return xor_words(raw)

    def _spread(self, sh: g.Shuffle, rows: Sequence[Any], metas: list | None) -> None:
        n = len(rows)
        k = len(sh.outboxes)
        per = n if k == 1 else -(-n // k)
        size = self.batch_size
        for start in range(0, n, per):
            ob = sh.pick_next()
            om = ob.metas
            i, end = start, min(n, start + per)
            while i < end:
                j = min(end, i + max(1, size - len(ob)))
                ob.extend(rows[i:j])
                if om is not None:
                    om.extend(metas[i:j] if metas is not None else repeat(None, j - i))
                i = j
                if len(ob) >= size:
                    self.flush(ob)

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
            if self._root_n:
                root += self._root_k - root % self._root_n
            self._put(ob, values, ((root, e),))
            self.reliable(root, msg_id, 1, values, stream)
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
        self._put(ob, values, self._anchor(anchors))

    def emit_dead_letter(self, values: tuple) -> None:
        """A spout's dead letter, to every subscriber of its `__dead_letter` stream
        (untracked: a dead letter is the end of its tree's story)."""
        route = self.routes.get(DEAD_LETTER_STREAM)
        if route is not None and route.pickers:
            self._put_all(self._deliveries(route, values), values, None)

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
            acks = self._acks
            get = acks.get
            for root, e in meta:
                acks[root] = get(root, 0) ^ e ^ val
            if len(acks) >= self.batch_size:
                self.flush_acks()

    def ack_batch(self, batch: TupleBatch) -> None:
        """Ack every tuple of a received batch: those iterated carry the ack values of
        the emits anchored to them; the rest are acked from their metas, no Tuple made."""
        metas = batch.metas
        if not metas:
            return
        acks = self._acks
        get = acks.get
        made = batch._made
        for t in made:
            meta = t.meta
            if meta:
                val = t.ack_val
                for root, e in meta:
                    acks[root] = get(root, 0) ^ e ^ val
        rest = metas[len(made) :] if made else metas
        try:  # the common case: every row in one tree (emit_many), one XOR for all
            root = rest[0][0][0]
            x = 0
            for ((r, e),) in rest:
                if r != root:
                    raise ValueError
                x ^= e
        except (ValueError, TypeError, IndexError):
            for meta in rest:
                if meta:
                    for r, e in meta:
                        acks[r] = get(r, 0) ^ e
        else:
            acks[root] = get(root, 0) ^ x
        if len(acks) >= self.batch_size:
            self.flush_acks()

    def fail_batch(self, batch: TupleBatch, error: str | None = None) -> None:
        """Fail every tree a batch's tuples belong to: one fail message per root."""
        if batch.metas:
            why = (self.component, error)
            for root in {r for meta in batch.metas if meta for r, _ in meta}:
                self._system(self._fail_route, (root, why))

    def flush_acks(self) -> None:
        acks = self._acks
        if not acks:
            return
        boxes = self._ack_boxes
        n, size = len(boxes), self.batch_size
        for root, x in acks.items():
            if x:  # a zero contribution changes nothing at the acker
                ob = boxes[root % n]
                ob.append((root, x))
                if len(ob) >= size:
                    self.flush(ob)
        acks.clear()

    def fail(self, tup: Tuple, error: str | None = None) -> None:
        """The fail carries why to the spout: this component, and the error ("Type:
        message") when an uncaught exception failed the tuple."""
        meta = tup.meta
        if meta:
            why = (self.component, error)
            for root, _ in meta:
                self._system(self._fail_route, (root, why))

    def reset_timeout(self, tup: Tuple) -> None:
        """Published at once, not when `execute` returns: a bolt resets a tree's timeout
        because it is in the middle of a long `execute`."""
        meta = tup.meta
        route = self._reset_route
        if meta and route is not None and route.single is not None:
            for root, _ in meta:
                route.single((root,)).append((root,))
            for ob in route.outboxes:
                if ob:
                    self.flush(ob)

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
        if self._acks:
            self.flush_acks()
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
        return sum(len(ob) for ob in self.outboxes) + len(self._acks)

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
