"""Groupings as routers: each picks the outbox (destination task buffer) for a tuple.

A router is built per (emitting task, stream, subscriber) with the subscriber's outboxes
in task order. `pick(values)` returns one outbox, or a list for groupings that copy a
tuple to several tasks (all, custom). Hashes are stable across processes (crc32 for
str/bytes, the value itself for ints): Python's str hash is randomised per process, and
fields grouping must agree between workers.
"""

from __future__ import annotations

import itertools
import numbers
import time
import zlib
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from ..errors import TopologyError
from . import locality as loc

_CACHE_MAX = 65536
_STR_LANES = 4096  # Lanes.str_boxes: up to this many lanes, a tuple of an outbox per lane


def stable_hash(v: Any) -> int:
    if isinstance(v, str):
        return zlib.crc32(v.encode("utf-8", "surrogatepass"))
    if isinstance(v, int):
        return v & 0x7FFFFFFFFFFFFFFF
    if isinstance(v, bytes | bytearray | memoryview):
        return zlib.crc32(v)
    if isinstance(v, float):
        # equal keys must hash equal: 1.0 == 1 shares a dict slot (the routing cache)
        return stable_hash(int(v)) if v.is_integer() else stable_hash(repr(v))
    if isinstance(v, frozenset | set):
        h = 0
        for x in v:
            h ^= stable_hash(x) * 0x9E3779B1 & 0xFFFFFFFF
        return h
    if isinstance(v, tuple | list):
        h = 17
        for x in v:
            h = (h * 31 + stable_hash(x)) & 0xFFFFFFFF
        return h
    if v is None:
        return 0
    return stable_hash(_as_builtin(v))


def _as_builtin(v: Any) -> Any:
    """A value equal to `v` of a type hashed above, so that equal keys hash equal
    whatever their type (a fields grouping sends them to one task, as Python's own dicts
    and Storm's equals/hashCode group them): numpy's integers and floats, Decimal,
    Fraction; anything else by its repr."""
    if type(v).__name__ in ("bool", "bool_"):  # numpy's bool: no __index__ in numpy 2
        return int(bool(v))
    index = getattr(type(v), "__index__", None)
    if index is not None:
        try:
            return int(index(v))  # numpy's integers (not int subclasses), int-likes
        except (TypeError, ValueError, OverflowError):
            pass
    # Decimal is no numbers.Real; a float equal to the value stands for it
    if isinstance(v, numbers.Real) or (isinstance(v, Decimal) and v.is_finite()):
        f = float(v)
        if f == v:
            return f
    return repr(v)


class Shuffle:
    """Locality-aware, load-aware shuffle (Storm 2's LoadAwareShuffleGrouping): a
    rotation over the targets of the current locality scope (locality.py), whose slots
    are shared out by free capacity.

    `scopes` gives each outbox's scope (None: all in one scope, as local_or_shuffle's
    chosen tasks). `refresh(loads)` (loads in 0..1 per outbox) moves the scope within
    `bounds` (higher, lower) and rebuilds the rotation when the scope or a load's tenth
    changed; `pick_next` is all the emit path reads. Beyond Storm, a spill that found no
    room ends and holds off (locality.no_room; `clock` times the hold-off).
    `load_aware=False` is Storm's plain ShuffleGrouping: round-robin over every target,
    refresh does nothing."""

    HOLD_OFF = (0.05, 2.0)  # seconds a spill that found no room holds off: first, most

    def __init__(
        self,
        outboxes: Sequence[Any],
        scopes: Sequence[int] | None = None,
        bounds: tuple[float, float] = (0.8, 0.2),
        load_aware: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.outboxes = list(outboxes)
        self.scopes = tuple(scopes) if scopes is not None else (loc.EVERYTHING,) * len(outboxes)
        self.higher, self.lower = bounds
        self.load_aware = load_aware and len(self.outboxes) > 1
        self.scope = loc.initial_scope(self.scopes) if load_aware else loc.EVERYTHING
        self._key: tuple[int, tuple[int, ...]] | None = None
        self.clock = clock
        self.hold_until = 0.0  # no widening before (a spill found no room)
        self.hold = self.HOLD_OFF[0]
        self._install(loc.ring(self.scopes, None, self.scope))

    def _install(self, ring: list[int]) -> None:
        boxes = [self.outboxes[i] for i in ring]
        self.width = len(set(ring))  # targets in scope (a bulk emit splits into this many)
        self.pick_next = itertools.cycle(boxes).__next__

    def pick(self, values: Any) -> Any:
        return self.pick_next()

    def _hold(self, scope: int, loads: Sequence[float]) -> int:
        """A transition by Storm's rule: a widening waits out the hold-off and never
        goes to targets that are backpressured; a narrowing (the narrower scope has room
        again) ends the hold-off."""
        if scope > self.scope:
            held = self.clock() < self.hold_until
            full = loc.no_room(scope, self.scopes, loads, self.higher)
            return self.scope if held or full else scope
        self.hold = self.HOLD_OFF[0]
        return scope

    def _narrow_held(self) -> int:
        """The widened scope's added targets are backpressured: back one scope, and no
        widening for a hold-off that doubles with each spill that found no room."""
        present = sorted(set(self.scopes))
        self.hold_until = self.clock() + self.hold
        self.hold = min(self.HOLD_OFF[1], self.hold * 2)
        return present[present.index(self.scope) - 1]

    def refresh(self, loads: Sequence[float]) -> None:
        if not self.load_aware:
            return
        scope = loc.next_scope(self.scope, self.scopes, loads, self.higher, self.lower)
        if scope != self.scope:
            scope = self._hold(scope, loads)
        elif loc.no_room(scope, self.scopes, loads, self.higher):
            scope = self._narrow_held()
        key = (scope, tuple(min(10, int(x * 10)) for x in loads))
        if key == self._key:
            return
        self._key = key
        self.scope = scope
        self._install(loc.ring(self.scopes, loads, scope))


class Fields:
    """Same key, same task. Keys are cached: most streams have far fewer keys than tuples.
    `pick` is a closure over locals: it runs once per tuple per subscriber."""

    def __init__(self, outboxes: Sequence[Any], indices: Sequence[int]):
        self.outboxes = list(outboxes)
        self.n = len(self.outboxes)
        self.cache: dict[Any, Any] = {}
        self.indices = tuple(indices)
        if len(indices) == 1:
            pick = self._single_pick(indices[0])
            setattr(pick, "fields_grouping", self)  # noqa: B010 - routes read its cache
            self.pick: Callable[[Sequence[Any]], Any] = pick
        else:
            self.pick = self._multi_pick

    def _single_pick(self, idx: int) -> Callable[[Sequence[Any]], Any]:
        cache, miss = self.cache, self._miss

        def pick(values: Sequence[Any]) -> Any:
            try:
                return cache[values[idx]]
            except (KeyError, TypeError):
                return miss(values[idx])

        return pick

    def _multi_pick(self, values: Sequence[Any]) -> Any:
        key = tuple(values[i] for i in self.indices)
        try:
            return self.cache[key]
        except (KeyError, TypeError):
            return self._miss(key)

    def _index(self, key: Any) -> int:
        return stable_hash(key) % self.n

    def str_boxes(self) -> tuple[Any, ...]:
        """The outbox of a str key by its CRC-32 (its stable hash) modulo this tuple's
        length: what the compiled emit paths (rowcodec.route_str, Emitter) compute
        instead of `pick`, so it must agree with `_index`. Empty: they take `pick`."""
        return tuple(self.outboxes)

    def _miss(self, key: Any) -> Any:
        ob = self.outboxes[self._index(key)]
        try:
            if len(self.cache) >= _CACHE_MAX:
                self.cache.clear()
            self.cache[key] = ob
        except TypeError:  # unhashable key (a list): route without caching
            pass
        return ob


class AckerRoute:
    """System ack streams: root id modulo the acker count (ids are random 63-bit ints)."""

    def __init__(self, outboxes: Sequence[Any]):
        self.outboxes = list(outboxes)
        self.n = len(self.outboxes)

    def pick(self, values: Sequence[Any]) -> Any:
        return self.outboxes[values[0] % self.n]


class PartialKey:
    """Two candidate tasks per key; the one that has been sent less so far wins.

    The two candidates always differ when there are two tasks or more (Storm's
    RandomTwoTaskAssignmentCreator): the second is the first shifted by 1 to n-1 places,
    so no key is ever pinned to one task (partial key grouping's whole point)."""

    def __init__(self, outboxes: Sequence[Any], indices: Sequence[int]):
        self.outboxes = list(outboxes)
        self.indices = tuple(indices)
        self.sent = [0] * len(self.outboxes)

    def pick(self, values: Sequence[Any]) -> Any:
        key = tuple(values[i] for i in self.indices) if self.indices else tuple(values)
        n = len(self.outboxes)
        h = stable_hash(key)
        a = h % n
        if n == 1:
            self.sent[0] += 1
            return self.outboxes[0]
        b = (a + 1 + (h // n) % (n - 1)) % n
        i = a if self.sent[a] <= self.sent[b] else b
        self.sent[i] += 1
        return self.outboxes[i]


class All:
    def __init__(self, outboxes: Sequence[Any]):
        self.outboxes = list(outboxes)

    def pick(self, values: Any) -> list[Any]:
        return self.outboxes


class Global:
    def __init__(self, outboxes: Sequence[Any]):
        self.outbox = outboxes[0]

    def pick(self, values: Any) -> Any:
        return self.outbox


class Custom:
    """User grouping: a callable `(values, n) -> index or indices`, or an object with
    `prepare(target_tasks)` and `choose_tasks(values) -> task ids`."""

    def __init__(
        self,
        outboxes: Sequence[Any],
        tasks: Sequence[int],
        fn: Any,
        where: str,
        source_task: int = 0,
        stream: tuple[str, str] = ("", ""),
        plan: Any = None,
    ):
        self.outboxes = list(outboxes)
        self.by_task = dict(zip(tasks, self.outboxes, strict=True))
        self.where = where
        if hasattr(fn, "choose_tasks"):
            # Storm's CustomStreamGrouping signatures are taken as they are:
            # prepare(context, stream, target_tasks) and choose_tasks(task_id, values)
            if hasattr(fn, "prepare"):
                if _positional(fn.prepare) >= 3:  # Storm's context: the source task's
                    from .context import task_context

                    ctx = None if plan is None else task_context(plan, source_task)
                    args: tuple[Any, ...] = (ctx, stream, list(tasks))
                else:
                    args = (list(tasks),)
                self._call(fn.prepare, args, "prepare(target_tasks)")
            self._choose: Callable[[Any], Any] = self._by_tasks(fn, source_task)
        else:
            n = len(self.outboxes)
            self._choose = lambda v: fn(v, n)

    def _call(self, method: Any, args: tuple[Any, ...], shape: str) -> None:
        try:
            method(*args)
        except TypeError as exc:
            raise TopologyError(
                f"custom grouping of {self.where}: {type(method.__self__).__name__}."
                f"{method.__name__} failed: {exc}; stormish calls {shape}, or Storm's "
                "prepare(context, stream, target_tasks)"
            ) from exc

    def _by_tasks(self, fn: Any, source_task: int) -> Callable[[Any], Any]:
        by_task, choose_tasks = self.by_task, fn.choose_tasks
        if _positional(choose_tasks) >= 2:  # Storm's chooseTasks(taskId, values)

            def choose(values: Any) -> list[Any]:
                return [by_task[t] for t in choose_tasks(source_task, values)]

        else:

            def choose(values: Any) -> list[Any]:
                return [by_task[t] for t in choose_tasks(values)]

        return choose

    def pick(self, values: Any) -> Any:
        try:
            r = self._choose(values)
            if isinstance(r, int):
                return self.outboxes[self._index(r)]
            return [x if not isinstance(x, int) else self.outboxes[self._index(x)] for x in r]
        except (IndexError, KeyError) as exc:
            raise ValueError(
                f"custom grouping of {self.where} chose no valid task: {exc}; its target "
                f"tasks are {sorted(self.by_task)} (choose_tasks returns task ids, a "
                f"callable grouping indices 0..{len(self.outboxes) - 1})"
            ) from exc

    def _index(self, i: int) -> int:
        if not 0 <= i < len(self.outboxes):
            raise IndexError(f"index {i} is outside 0..{len(self.outboxes) - 1}")
        return i


def _positional(method: Any) -> int:
    """How many positional arguments `method` requires (bound: self not counted; one
    with a default is not required); -1 when its signature cannot be read. Counting
    every positional one took `choose_tasks(self, values, extra=None)` for Storm's
    `(task_id, values)` and called it with the task id as its values."""
    import inspect

    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return -1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds and p.default is inspect.Parameter.empty)


class Lanes(Fields):
    """ordered_lanes: a key hashes to one of `lanes` lanes, lane i to task i mod n, so a
    key always reaches the same task (in order) and lanes spread evenly over tasks."""

    def __init__(self, outboxes: Sequence[Any], indices: Sequence[int], lanes: int):
        self.lanes = lanes
        super().__init__(outboxes, indices)

    def _index(self, key: Any) -> int:
        return lane_of(key, self.lanes) % self.n

    def str_boxes(self) -> tuple[Any, ...]:
        """One outbox per lane (lane i's is task i mod n): a str key's CRC-32 modulo the
        lanes is its lane. Handing the compiled paths the task outboxes instead sent a
        str key to task crc32 % n, not its lane's, whenever they routed it (emit_many
        of more than 16 rows, a one-stream component's emit with acking off), so one
        key reached two tasks. Beyond _STR_LANES lanes the tuple is not worth its
        size: they take `pick`."""
        if self.lanes > _STR_LANES:
            return ()
        return tuple(self.outboxes[i % self.n] for i in range(self.lanes))


def lane_of(key: Any, lanes: int) -> int:
    """The lane of a key (a single field's value, or the tuple of several)."""
    return stable_hash(key) % lanes
