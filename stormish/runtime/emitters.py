"""One small collector per role: how `emit`, `emit_many` and `emit_direct` track tuples.

- `UntrackedCollector`: acking off (any component). A spout's message ids are acked as
  soon as `next_tuple` returns (Storm with zero ackers).
- `SpoutCollector`: a reliable spout. An emit with a message id starts a tree; the
  executor's `reliable` callback records it, and the acker is told the tree's first
  edges (init). `emit_many` with one message id makes the rows one tree.
- `BoltCollector`: a bolt that anchors by hand (`anchors=`); unanchored emits are
  untracked.
- `BasicCollector`: a BasicBolt: emits are anchored to the input being executed.

The common emits are inlined (one destination by shuffle, one tree): they are the per
tuple hot path, where a method call is a measurable share of the cost. The rules they
inline (a tree's root and acker, an edge per delivery anchored to the input) are
defined once, in `ack_folder.AckFolder`; the inlined copies read the folder's parameters,
and tests/unit/test_ack_paths.py checks each of them against it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from itertools import repeat
from typing import Any, cast

from ..rowcodec import Emitter
from ..tuple import Traced, TrackedTuple, Tuple, inherit
from .ack_folder import announcement, tree_pairs
from .collector import NOT_ROWS, Collector
from .fastack import AnchoredEmitter, TreeEmitter
from .plan import Plan
from .routing import Outbox, Route
from .seams import PublishTarget

Rows = Iterable[Sequence[Any]]


def _as_rows(rows: Rows) -> Sequence[Sequence[Any]]:
    return rows if rows.__class__ is list or rows.__class__ is tuple else list(rows)


class UntrackedCollector(Collector):
    """Acking off: nothing is tracked, a spout's message ids are acked on emit."""

    def __init__(
        self,
        plan: Plan,
        task: int,
        targets: Mapping[int, PublishTarget],
        local_tasks: set[int],
        batch_size: int,
        rand: random.Random | None = None,
    ):
        super().__init__(plan, task, targets, local_tasks, batch_size, rand)
        self.acked_on_emit: list[Any] = []  # spout msg ids to ack once next_tuple returns

    def emit(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        route = self.last_route
        if stream != self.last_stream or len(values) != route.arity or values.__class__ in NOT_ROWS:
            route = self._route(stream, values)
        ob = route.only
        if ob is not None:
            pass
        elif route.shuffle1 is not None:
            ob = route.shuffle1.pick_next()
        elif route.fcache is not None:
            try:
                ob = route.fcache[values[route.fidx]]
            except (KeyError, TypeError):
                ob = route.single(values)
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

    def bound_emit(self) -> Callable[..., None]:
        """`emit` as the component gets it: a closure over its one route when it
        declares one stream whose tuples go to one outbox or by a one-field fields
        grouping (most bolts and spouts), else the method. The closure skips the stream
        and route checks and the method call's attribute lookups: ~30% of an emit, the
        per-tuple API's largest cost. Anything unusual (another stream, a wrong width, a
        message id, a key not seen yet) takes the method, which checks and raises.
        Compiled (rowcodec.Emitter), the common calls skip the closure's call too and a
        str key's task is the grouping's hash; the rest call the closure."""
        slow = self.emit
        route = _one_user_route(self)
        if route is None:
            return slow
        own, arity, size, flush = route.stream, route.arity, self.batch_size, self.flush
        only, fc, fidx = route.only, route.fcache, route.fidx
        if only is not None:

            def emit_one(
                values: Sequence[Any],
                stream: str = "default",
                anchors: Any = None,
                msg_id: Any = None,
            ) -> None:
                if (
                    stream != own
                    or len(values) != arity
                    or values.__class__ in NOT_ROWS
                    or msg_id is not None
                ):
                    slow(values, stream, anchors, msg_id)
                    return
                only.append(values)
                if len(only) >= size:
                    flush(only)

            if Emitter is not None:  # compiled: the same, as one C call (rowcodec)
                return Emitter(emit_one, own, arity, size, flush, only, None, None, 0)
            return emit_one
        if fc is not None and route.shuffle1 is None:

            def emit_keyed(
                values: Sequence[Any],
                stream: str = "default",
                anchors: Any = None,
                msg_id: Any = None,
            ) -> None:
                if (
                    stream != own
                    or len(values) != arity
                    or values.__class__ in NOT_ROWS
                    or msg_id is not None
                ):
                    slow(values, stream, anchors, msg_id)
                    return
                try:
                    ob = fc[values[fidx]]
                except (KeyError, TypeError):
                    slow(values, stream, anchors, msg_id)
                    return
                ob.append(values)
                if len(ob) >= size:
                    flush(ob)

            if Emitter is not None and route.fboxes:
                return Emitter(emit_keyed, own, arity, size, flush, None, route.fboxes, fc, fidx)
            return emit_keyed
        return slow

    def _emit_fanout(self, route: Route, values: Sequence[Any], msg_id: Any) -> None:
        for ob in self._deliveries(route, values):
            ob.append(values)
            if len(ob) >= self.batch_size:
                self.flush(ob)
        if msg_id is not None:
            self.acked_on_emit.append(msg_id)

    def emit_many(
        self, rows: Rows, stream: str = "default", anchors: Any = None, msg_id: Any = None
    ) -> None:
        rows = _as_rows(rows)
        self._put_rows(self._route_rows(stream, rows), rows)
        if msg_id is not None:
            self.acked_on_emit.append(msg_id)

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        self._put(self._direct(task, stream, values), values, None)
        if msg_id is not None:
            self.acked_on_emit.append(msg_id)


class SpoutCollector(Collector):
    """A reliable spout: `reliable(root, msg_id, rows, values, stream)` is the executor's
    record of a new tree, set by the executor before the spout opens; `inflight_head`,
    when the executor sets it, is the mapping where a tree of one row with nothing else to
    keep is recorded as `head[root] = msg_id` (runtime/inflight.py), no call made.

    A tree with exactly one first delivery is announced (ack_folder.py): its tuple's edge
    is `announcement(task)` and no init is sent; any other tree (no delivery, several)
    gets random edges and an init."""

    def __init__(
        self,
        plan: Plan,
        task: int,
        targets: Mapping[int, PublishTarget],
        local_tasks: set[int],
        batch_size: int,
        rand: random.Random | None = None,
    ):
        super().__init__(plan, task, targets, local_tasks, batch_size, rand)
        self.reliable: Callable[..., None] = _no_tracker
        self.inflight_head: MutableMapping[int, Any] | None = None
        self.announce = announcement(task)

    def emit(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        route = self.last_route
        if stream != self.last_stream or len(values) != route.arity or values.__class__ in NOT_ROWS:
            route = self._route(stream, values)
        if msg_id is None:
            self._put_all(self._deliveries(route, values), values, None)
            return
        root = self.acks.new_root()
        sh = route.shuffle1
        if sh is not None:
            ob = sh.pick_next()
            ob.append(values)
            ob.metas.append(((root, self.announce),))
            if len(ob) >= self.batch_size:
                self.flush(ob)
            self.reliable(root, msg_id, 1, values, stream)
            return
        obs = self._deliveries(route, values)
        edges, xor = self.acks.first_edges(len(obs))
        for ob, e in zip(obs, edges, strict=True):
            self._put(ob, values, ((root, e),))
        self.reliable(root, msg_id, 1, values, stream)
        if xor is not None:
            self.acks.init(root, xor)

    def bound_emit(self) -> Callable[..., None]:
        """`emit` as a reliable spout gets it: a closure over its one route when the spout
        declares one stream whose tuples go to one task or are shuffled (Storm's usual
        spout), so that an emit with a message id (a new announced tree: a root from the
        counter, the tuple, the executor's record) reads no attribute it can hold in the
        closure. Call once `reliable` and `inflight_head` are bound. Anything else takes
        the method. tests/unit/test_ack_paths.py checks every emit path against the
        folder."""
        slow = self.emit
        route = _one_user_route(self)
        if route is None:
            return slow
        only, sh = route.only, route.shuffle1
        if only is None and sh is None:
            return slow
        own, arity, size, flush = route.stream, route.arity, self.batch_size, self.flush
        track, head, announce = self.reliable, self.inflight_head, self.announce
        new_root = self.acks.roots.__next__  # AckFolder.new_root
        # the root alone as the meta where every outbox takes root metas (ack_folder.py)
        boxes = [only] if only is not None else sh.outboxes  # type: ignore[union-attr]
        compact = all(ob.roots_ok for ob in boxes)

        if only is not None and head is not None:
            metas = only.metas
            assert metas is not None

            def emit_one_tree(
                values: Sequence[Any],
                stream: str = "default",
                anchors: Any = None,
                msg_id: Any = None,
            ) -> None:
                if (
                    msg_id is None
                    or stream != own
                    or len(values) != arity
                    or values.__class__ in NOT_ROWS
                ):
                    slow(values, stream, anchors, msg_id)
                    return
                root = new_root()
                only.append(values)
                metas.append(root if compact else ((root, announce),))
                head[root] = msg_id
                if len(only) >= size:
                    flush(only)

            if TreeEmitter is not None:  # compiled: the same, as one C call (fastack)
                return TreeEmitter(
                    emit_one_tree,
                    own,
                    arity,
                    size,
                    flush,
                    only,
                    None,
                    head,
                    self.acks.roots,
                    announce,
                    compact,
                )
            return emit_one_tree

        def emit_tree(
            values: Sequence[Any],
            stream: str = "default",
            anchors: Any = None,
            msg_id: Any = None,
        ) -> None:
            if (
                msg_id is None
                or stream != own
                or len(values) != arity
                or values.__class__ in NOT_ROWS
            ):
                slow(values, stream, anchors, msg_id)
                return
            root = new_root()
            ob = only if only is not None else sh.pick_next()  # type: ignore[union-attr]
            ob.append(values)
            ob.metas.append(root if compact else ((root, announce),))  # type: ignore[union-attr]
            if head is not None:
                head[root] = msg_id
            else:
                track(root, msg_id, 1, values, stream)
            if len(ob) >= size:
                flush(ob)

        if TreeEmitter is not None and head is not None:  # compiled (fastack)
            return TreeEmitter(
                emit_tree,
                own,
                arity,
                size,
                flush,
                only,
                sh,
                head,
                self.acks.roots,
                announce,
                compact,
            )
        return emit_tree

    def emit_many(
        self, rows: Rows, stream: str = "default", anchors: Any = None, msg_id: Any = None
    ) -> None:
        """All rows form one tuple tree under `msg_id`: acked once, when every row's
        subtree is; failed (the whole batch) when any part fails or times out."""
        rows = _as_rows(rows)
        route = self._route_rows(stream, rows)
        if msg_id is None:
            self._put_rows(route, rows)
            return
        root = self.acks.new_root()
        xor = _put_tree(self, route, rows, (root,))
        self.reliable(root, msg_id, len(rows), rows, stream)
        self.acks.init(root, xor)

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        ob = self._direct(task, stream, values)
        if msg_id is None:
            self._put(ob, values, None)
            return
        root = self.acks.new_root()
        self._put(ob, values, ((root, self.announce),))
        self.reliable(root, msg_id, 1, values, stream)


class BoltCollector(Collector):
    """A bolt that anchors by hand: `anchors` (a Tuple or a list of them) is explicit."""

    def emit(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        self._emit_anchored(self._route(stream, values), values, anchors)

    def emit_many(
        self, rows: Rows, stream: str = "default", anchors: Any = None, msg_id: Any = None
    ) -> None:
        rows = _as_rows(rows)
        self._emit_many_anchored(self._route_rows(stream, rows), rows, anchors)

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        ob = self._direct(task, stream, values)
        meta = None
        if anchors is not None:
            anchors = _listed(anchors)
            values = _inherited(values, anchors)
            meta = self.acks.anchor(anchors)
        self._put(ob, values, meta)

    def _emit_anchored(self, route: Route, values: Sequence[Any], anchors: Any) -> None:
        obs = self._deliveries(route, values)
        if anchors is None:
            self._put_all(obs, values, None)
            return
        anchors = _listed(anchors)
        values = _inherited(values, anchors)
        anchor = self.acks.anchor
        for ob in obs:
            self._put(ob, values, anchor(anchors))

    def _emit_many_anchored(self, route: Route, rows: Sequence[Any], anchors: Any) -> None:
        if anchors is not None:
            listed = _listed(anchors)
            src = next((a.values for a in listed if a.values.__class__ is Traced), None)
            if src is not None:
                rows = [inherit(v, src) for v in rows]
            tracked = [a for a in listed if a.meta]
            if len(tracked) == 1:  # the common case: one edge per delivery, in bulk
                a = cast(TrackedTuple, tracked[0])
                pairs = tree_pairs(a.meta, a.source.task)
                a.ack_val ^= _put_tree(self, route, rows, tuple(r for r, _ in pairs))
                return
            if tracked:  # several anchors: an edge per anchor per delivery
                put, deliveries, anchor = self._put, self._deliveries, self.acks.anchor
                for v in rows:
                    for ob in deliveries(route, v):
                        put(ob, v, anchor(tracked))
                return
        self._put_rows(route, rows)


class BasicCollector(BoltCollector):
    """A BasicBolt: unless told otherwise, emits anchor to the input being executed."""

    def emit(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        route = self.last_route
        if (
            anchors is None
            and stream == self.last_stream
            and len(values) == route.arity
            and values.__class__ not in NOT_ROWS
            and route.single is not None
        ):
            # the common reliable bolt emit, inlined: anchored to the one input being
            # executed, which belongs to one tree, and one destination task
            cur = self.current
            meta = cur.meta if cur is not None else None
            # one tree: a root meta (ack_folder.py) or one (root, edge) pair
            if cur is not None and meta is not None and (meta.__class__ is int or len(meta) == 1):
                if cur.values.__class__ is Traced:
                    values = inherit(values, cur.values)
                ob = route.only
                if ob is None:
                    fc = route.fcache
                    if fc is not None:
                        try:
                            ob = fc[values[route.fidx]]
                        except (KeyError, TypeError):
                            ob = route.single(values)
                    else:
                        ob = route.single(values)
                if ob.__class__ is Outbox:  # AckFolder.anchor((cur,)), inlined
                    e = self.rand(63)
                    cur.ack_val ^= e  # type: ignore[misc]  # cur is tracked: it has meta
                    ob.append(values)
                    root = meta if meta.__class__ is int else meta[0][0]
                    ob.metas.append(((root, e),))  # type: ignore[union-attr]
                    if len(ob) >= self.batch_size:
                        self.flush(ob)
                    return
                if not route.count_boxes:  # as _deliveries counts a fan-out
                    route.extra += 1
                for box in ob:
                    self._put(box, values, self.acks.anchor((cur,)))
                return
        route = self._route(stream, values)
        self._emit_anchored(route, values, self.current if anchors is None else anchors)

    def bound_emit(self) -> Callable[..., None]:
        """`emit` as a BasicBolt gets it with acking on: as `UntrackedCollector.bound_emit`,
        a closure over the one route when the component declares one stream whose tuples
        go to one outbox or by a one-field fields grouping; the emit anchored to the one
        tree of the input being executed, a fresh edge id per tuple. Anything else (an
        explicit anchor, another stream, an input in several trees or none, a key not
        seen yet) takes the method."""
        slow = self.emit
        route = _one_user_route(self)
        if route is None:
            return slow
        only, fc, fidx = route.only, route.fcache, route.fidx
        if only is None and (fc is None or route.shuffle1 is not None):
            return slow
        own, arity, size, flush, rand = (
            route.stream,
            route.arity,
            self.batch_size,
            self.flush,
            self.rand,
        )
        col = self

        def emit_anchored(
            values: Sequence[Any],
            stream: str = "default",
            anchors: Any = None,
            msg_id: Any = None,
        ) -> None:
            cur = col.current
            if (
                stream != own
                or len(values) != arity
                or values.__class__ in NOT_ROWS
                or anchors is not None
                or cur is None
            ):
                slow(values, stream, anchors, msg_id)
                return
            meta = cur.meta
            if meta is None or (meta.__class__ is not int and len(meta) != 1):
                slow(values, stream, anchors, msg_id)
                return
            if cur.values.__class__ is Traced:
                values = inherit(values, cur.values)
            if only is not None:
                ob = only
            else:
                try:
                    ob = fc[values[fidx]]  # type: ignore[index]
                except (KeyError, TypeError):
                    slow(values, stream, anchors, msg_id)
                    return
            e = rand(63)
            cur.ack_val ^= e  # type: ignore[misc]  # cur is tracked: it has meta
            ob.append(values)
            root = meta if meta.__class__ is int else meta[0][0]
            ob.metas.append(((root, e),))  # type: ignore[union-attr]
            if len(ob) >= size:
                flush(ob)

        if AnchoredEmitter is not None:  # compiled: the same, as one C call (fastack)
            return AnchoredEmitter(
                emit_anchored, col, own, arity, size, flush, only, fc, fidx, rand
            )
        return emit_anchored

    def emit_many(
        self, rows: Rows, stream: str = "default", anchors: Any = None, msg_id: Any = None
    ) -> None:
        rows = _as_rows(rows)
        route = self._route_rows(stream, rows)
        self._emit_many_anchored(route, rows, self.current if anchors is None else anchors)

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        super().emit_direct(task, values, stream, self.current if anchors is None else anchors)


def _put_tree(col: Collector, route: Route, rows: Sequence[Any], roots: tuple[int, ...]) -> int:
    """Rows in the trees of `roots` (one anchor's, or a new spout tree), a fresh edge id
    per delivery; returns the XOR of the edge ids (what the anchor's ack value or the
    spout's init must account for)."""
    sh = route.shuffle1
    if sh is None:
        rand, put, deliveries = col.rand, col._put, col._deliveries
        xor = 0
        for v in rows:
            for ob in deliveries(route, v):
                e = rand(63)
                xor ^= e
                put(ob, v, tuple((r, e) for r in roots))
        return xor
    if not rows:
        return 0
    edges, xor = col.acks.edges(len(rows))
    metas: list[Any]
    if len(roots) == 1:
        metas = list(zip(zip(repeat(roots[0]), edges)))  # ((root, e),) per row
    else:
        metas = [tuple((r, e) for r in roots) for e in edges]
    col._spread(sh, rows, metas)
    return xor


def _one_user_route(col: Collector) -> Route | None:
    """The route of a component that declares one stream (most do): what the bound emit
    closures are made over. None with several streams, whose order needs the method."""
    user = [r for r in col.routes.values() if not r.system]
    return user[0] if len(user) == 1 else None


def _inherited(values: Sequence[Any], anchors: Sequence[Tuple]) -> Sequence[Any]:
    """The ids of the first traced anchor, unless `values` has its own."""
    if values.__class__ is Traced:
        return values
    for a in anchors:
        if a.values.__class__ is Traced:
            return inherit(values, a.values)
    return values


def _listed(anchors: Any) -> Sequence[Tuple]:
    return (anchors,) if isinstance(anchors, Tuple) else anchors


def _no_tracker(*args: Any) -> None:
    raise RuntimeError("a reliable spout's collector emitted before its executor bound it")


def make_collector(
    plan: Plan,
    task: int,
    targets: Mapping[int, PublishTarget],
    local_tasks: set[int],
    batch_size: int,
    rand: random.Random | None = None,
    basic: bool = False,
) -> Collector:
    """The collector for `task`'s role: acking off, spout, BasicBolt or bolt."""
    if not plan.acking:
        cls: type[Collector] = UntrackedCollector
    elif plan.components[plan.task_component[task]].is_spout:
        cls = SpoutCollector
    else:
        cls = BasicCollector if basic else BoltCollector
    return cls(plan, task, targets, local_tasks, batch_size, rand)
