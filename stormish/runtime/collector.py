"""The output collector's shared core: route, batch per destination, publish, park.

Emit never blocks. A tuple is routed at emit time into the outbox of each destination
task (routing.py); a full outbox (the producer batch) is published to the destination's
receive queue, or to the worker transfer for a remote task. When the publish is refused
(queue full, remote task under backpressure) the batch goes to this executor's
pendingEmitQ (pending.py), and so does every later batch until it drains, which keeps
the emit order.

Order across streams: when a task switches from one user stream to another, the old
stream's outboxes are flushed first, so a destination sees one upstream task's tuples in
emission order whatever streams they came by.

What differs by role (how `emit`, `emit_many` and `emit_direct` anchor and track) lives
in emitters.py, one small class per role; acking's ids and folding in ack_folder.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from typing import Any

from ..errors import TopologyError
from ..rowcodec import route_keyed, route_str
from ..settle import NO_SUBSCRIBER
from ..tuple import DEAD_LETTER_STREAM, Tuple, TupleBatch
from . import grouping as g
from .ack_folder import ANNOUNCE, AckFolder, expand_roots
from .channel import StampedRows
from .pending import PendingEmits
from .plan import Plan
from .routing import Outbox, Route, build_routes
from .seams import Batch, PublishTarget

# what a user passes as a row by mistake (emit(word)): iterable, so its length can even
# match the stream's fields, and the tuple's values would be its characters or bytes
NOT_ROWS = frozenset({str, bytes, bytearray})


class Collector:
    """Routes, outboxes and the pendingEmitQ of one task; the role subclasses emit."""

    # the emits a component calls: each kind of task's collector (emitters.py) defines
    # its own, and the worker may rebind them (typed streams, debug logging)
    emit: Callable[..., Any]
    emit_many: Callable[..., Any]
    emit_direct: Callable[..., Any]

    def __init__(
        self,
        plan: Plan,
        task: int,
        targets: Mapping[int, PublishTarget],
        local_tasks: set[int],
        batch_size: int,
        rand: random.Random | None = None,
    ):
        self.plan = plan
        self.task = task
        self.component = plan.task_component[task]
        self.batch_size = batch_size
        self.acking = plan.acking
        self.routes, self.outboxes = build_routes(plan, task, targets, local_tasks)
        self.parked = PendingEmits()
        self.pending = self.parked.queue  # tested for truth on the executors' loops
        self.last_stream: str | None = None
        self.last_route: Any = None  # routes[last_stream]: emits on it skip the dict lookup
        self.current: Tuple | None = None  # BasicBolt's input being executed
        self.acks = AckFolder(
            self.component,
            task,
            self.routes,
            local_tasks,
            batch_size,
            self.flush,
            rand or random.Random(),
        )
        self.rand = self.acks.rand
        self.dead_letters = 0  # emits dead-lettered here (a stream nobody subscribes to)

    # -- counters --------------------------------------------------------------------------
    @property
    def pending_count(self) -> int:
        return self.parked.count

    @property
    def transferred(self) -> int:
        return self.parked.transferred

    # -- checks and routing ------------------------------------------------------------------
    def _route(self, stream: str, values: Sequence[Any]) -> Route:
        try:
            route = self.routes.get(stream)
        except TypeError:  # unhashable: emit(tup, [w]), Storm's order (a try costs nothing)
            route = None
        if route is None or route.system:
            if stream.__class__ is not str:
                raise TypeError(self._misordered(stream, values))
            raise TopologyError(
                f"component {self.component!r} emitted on undeclared stream {stream!r}; it "
                f"declares {sorted(s for s in self.routes if not s.startswith('__'))}"
            )
        if values.__class__ in NOT_ROWS:
            raise TopologyError(
                f"component {self.component!r} emitted a {type(values).__name__} "
                f"({values!r:.40}) as its values on stream {stream!r}: values are a list or "
                f"tuple, one per field {list(self.plan.streams[self.component][stream])}; "
                f"write emit([value])"
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

    def _route_rows(self, stream: str, rows: Sequence[Sequence[Any]]) -> Route:
        """Every row is checked before any is emitted."""
        try:
            route = self.routes.get(stream)
        except TypeError:  # unhashable: emit_many(tup, rows), Storm's order
            route = None
        if route is None or route.system:
            return self._route(stream, rows)  # raises: undeclared stream
        if rows and rows[0].__class__ in NOT_ROWS:  # emit_many(words): the first tells
            raise TopologyError(
                f"component {self.component!r} emit_many rows are {type(rows[0]).__name__}s "
                f"({rows[0]!r:.40}) on stream {stream!r}: each row is a list or tuple, one "
                f"value per field {list(self.plan.streams[self.component][stream])}; write "
                f"emit_many([[v] for v in values]); no row was emitted"
            )
        if rows and list(map(len, rows)).count(route.arity) != len(rows):  # 20 ns a row
            bad = next(i for i, v in enumerate(rows) if len(v) != route.arity)
            raise TopologyError(
                f"component {self.component!r} emit_many row {bad} has {len(rows[bad])} "
                f"values on stream {stream!r}, which declares {route.arity} fields "
                f"{list(self.plan.streams[self.component][stream])}; no row was emitted"
            )
        if stream != self.last_stream:
            self._switch_stream(stream)
        return route

    def _misordered(self, stream: Any, values: Any) -> str:
        """An emit whose stream is not a name: Storm's Java argument order, an anchor or
        message id given where stormish takes the stream (`emit(tup, [w])`, a spout's
        `emit([w], msg_id)`). Said on the error path only."""
        spout = self.plan.components[self.component].is_spout
        storm, ours = (
            ("emit(values, msgId)", "self.emit(values, msg_id=...)")
            if spout
            else ("emit(anchor, values)", "self.emit(values, anchors=[tup])")
        )
        kinds = ["Tuple" if isinstance(values, Tuple) else type(values).__name__]
        kinds.append(type(stream).__name__)
        given = [("an " if k[0] in "aeiouAEIOU" else "a ") + k for k in kinds]
        return (
            f"component {self.component!r}: emit's first argument is the values (a list, "
            f"one per field) and its second the stream name; it was given {given[0]}, "
            f"then {given[1]} ({stream!r:.40}). emit(values, stream='default', anchors=None, "
            f"msg_id=None): Storm's {storm} is {ours} here"
            + ("" if spout else " (a BasicBolt anchors to its input by itself)")
        )

    def _direct(self, task: int, stream: str, values: Sequence[Any]) -> Outbox:
        route = self._route(stream, values)
        ob = route.direct.get(task)
        if ob is None:
            raise TopologyError(
                f"component {self.component!r} emit_direct to task {task} on stream "
                f"{stream!r}: no direct-grouping subscriber has that task"
            )
        route.extra += 1
        return ob

    def _switch_stream(self, stream: str) -> None:
        last = self.routes.get(self.last_stream) if self.last_stream else None
        self.last_stream = stream
        self.last_route = self.routes.get(stream)
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
            if not route.pickers and route.direct:
                direct = sorted({self.plan.task_component[t] for t in route.direct})
                raise TopologyError(
                    f"component {self.component!r} emitted on stream {route.stream!r}, which "
                    f"{direct} take by direct_grouping: a stream with a direct subscriber "
                    f"takes emit_direct(task, values) only (Storm: 'Cannot do regular emit "
                    f"to direct stream')"
                )
            route.extra += 1
            if route.orphan:  # nobody subscribes: a dead letter, where someone listens
                self.dead_letters += 1
                self.emit_dead_letter(
                    (None, route.stream, tuple(values), self.component, NO_SUBSCRIBER, 1)
                )
        return out

    # -- putting into outboxes -----------------------------------------------------------------
    def _put(self, ob: Outbox, values: Sequence[Any], meta: Any) -> None:
        ob.append(values)
        if ob.metas is not None:
            ob.metas.append(meta)
        if len(ob) >= self.batch_size:
            self.flush(ob)

    def _put_all(self, obs: list[Outbox], values: Sequence[Any], meta: Any) -> None:
        for ob in obs:
            self._put(ob, values, meta)

    def _put_rows(self, route: Route, rows: Sequence[Any]) -> None:
        """Untracked rows: whole slices per outbox when the stream has one shuffle
        subscriber, else routed row by row."""
        sh = route.shuffle1
        if sh is not None:
            self._spread(sh, rows, None)
            return
        only = route.only
        if only is not None:
            self._extend(only, rows)
            return
        single = route.single
        fc = route.fcache
        if fc is not None and len(rows) > 16:
            self._put_keyed(route, rows)
            return
        if single is not None:  # one subscriber: a pick per row, no call for the rest
            fidx, size, flush = route.fidx, self.batch_size, self.flush
            for v in rows:
                if fc is not None:
                    try:
                        ob = fc[v[fidx]]
                    except (KeyError, TypeError):
                        ob = single(v)
                else:
                    ob = single(v)
                if ob.__class__ is not Outbox:  # a fan-out picker (all, custom)
                    self._put_all(self._deliveries(route, v), v, None)
                    continue
                ob.append(v)
                if len(ob) >= size:
                    flush(ob)
            return
        put_all, deliveries = self._put_all, self._deliveries
        for v in rows:
            put_all(deliveries(route, v), v, None)

    def _put_keyed(self, route: Route, rows: Sequence[Any]) -> None:
        """Rows by a one-field fields grouping, in bulk: each row appended to its outbox,
        then each full outbox leaves in whole batches. Compiled (rowcodec), a str key's
        outbox is computed from the grouping's own hash, other keys' looked up in its
        cache; without, one plain loop does the lookups (a miss or an unhashable key asks
        the grouping). Per row, of words just split (no cached hash): the Python loop
        ~65 ns, the compiled cache lookup ~58 (SipHash of the word), the computed hash a
        few ns."""
        fc, fidx, single = route.fcache, route.fidx, route.single
        assert fc is not None and single is not None
        if route_str is not None and route.fboxes and type(rows) is list:  # with route_keyed
            # compiled: str keys by the grouping's hash (no dict, no SipHash of a fresh
            # word), from the first other key on by the cache, a miss by the grouping
            n, i = len(rows), route_str(rows, fidx, route.fboxes, 0)
            while i < n and (i := route_keyed(rows, fidx, fc, i)) < n:  # type: ignore[misc]
                v = rows[i]
                single(v).append(v)
                i += 1
        else:
            for v in rows:
                try:
                    ob = fc[v[fidx]]
                except (KeyError, TypeError):
                    ob = single(v)
                ob.append(v)
        size = self.batch_size
        for ob in route.count_boxes:  # the grouping's outboxes, a few
            if len(ob) >= size:
                self._flush_whole(ob, size)

    def _flush_whole(self, ob: Outbox, size: int) -> None:
        """Publish an untracked outbox that grew past the batch size in batches of
        `size`, keeping the remainder (a batch never exceeds the batch size)."""
        n = len(ob)
        if n == size:
            self.flush(ob)
            return
        stream, target, task, publish = ob.stream, ob.target, self.task, self.parked.publish
        end = n - n % size
        stamp = ob.stamp
        for i in range(0, end, size):
            rows = ob[i : i + size] if stamp is None else StampedRows(ob[i : i + size], stamp())
            publish(target, (task, stream, rows, None), size)
        del ob[:end]
        ob.flushed += end

    def _extend(self, ob: Outbox, rows: Sequence[Any]) -> None:
        """Untracked rows all to one outbox, in slices of the batch."""
        size, n, i = self.batch_size, len(rows), 0
        while i < n:
            j = min(n, i + max(1, size - len(ob)))
            ob.extend(rows[i:j])
            i = j
            if len(ob) >= size:
                self.flush(ob)

    def _spread(self, sh: g.Shuffle, rows: Sequence[Any], metas: list | None) -> None:
        n = len(rows)
        k = sh.width  # the targets in the shuffle's scope
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

    # -- system emits ----------------------------------------------------------------------------
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

    # -- acking, for callers that hold the collector (executors bind `acks` directly) --------
    def ack(self, tup: Tuple) -> None:
        self.acks.ack(tup)

    def ack_batch(self, batch: TupleBatch) -> None:
        self.acks.ack_batch(batch)

    def fail(self, tup: Tuple, error: str | None = None) -> None:
        self.acks.fail(tup, error)

    def fail_batch(self, batch: TupleBatch, error: str | None = None) -> None:
        self.acks.fail_batch(batch, error)

    def reset_timeout(self, tup: Tuple) -> None:
        self.acks.reset(tup)

    # -- publishing --------------------------------------------------------------------------
    def flush(self, ob: Outbox) -> None:
        n = len(ob)
        metas = ob.metas
        rows = ob[:] if ob.stamp is None else StampedRows(ob, ob.stamp())
        batch: Batch
        if metas is not None:
            m = None
            if ob.roots_ok and getattr(ob.target, "takes_roots", False) is not True:
                m = expand_roots(metas, self.task << ANNOUNCE)  # ack_folder.py
            batch = (self.task, ob.stream, rows, metas[:] if m is None else m)
            metas.clear()
        else:
            batch = (self.task, ob.stream, rows, None)
        ob.clear()
        ob.flushed += n
        self.parked.publish(ob.target, batch, n)

    def emit_tasks(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> list[int]:
        """Storm's emit, which returns the task ids the tuple went to (a multilang
        child's `need_task_ids`): the role's emit, then the outboxes whose row count grew.
        Slower than `emit` by a look at each of the stream's outboxes."""
        route = self.routes.get(stream)
        if route is None or route.system:
            self._route(stream, values)  # raises: an undeclared stream
        obs = route.outboxes  # type: ignore[union-attr]
        before = [ob.flushed + len(ob) for ob in obs]
        self.emit(values, stream, anchors, msg_id)
        return [ob.task for ob, n in zip(obs, before, strict=True) if ob.flushed + len(ob) != n]

    def flush_all(self) -> None:
        acks = self.acks
        if acks.acks:
            acks.flush()
        acks.done_n = 0  # the done rows leave with the outboxes below
        for ob in self.outboxes:
            if ob:
                self.flush(ob)

    def flush_pending(self) -> bool:
        """Publish parked batches in order; stop at the first refusal. True when empty."""
        return self.parked.flush()

    def buffered(self) -> int:
        return sum(len(ob) for ob in self.outboxes) + self.acks.buffered()

    def refresh_load(self) -> None:
        for route in self.routes.values():
            for sh in route.shuffles:
                sh.refresh([ob.target.load() for ob in sh.outboxes])

    def emitted(self) -> dict[str, int]:
        out = {}
        for stream, route in self.routes.items():
            if route.system:
                continue
            out[stream] = route.extra + sum(ob.flushed + len(ob) for ob in route.count_boxes)
        return out
