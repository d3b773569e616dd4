"""Routing: for each stream of a task, the outboxes its tuples go to and how one is chosen.

An `Outbox` is the producer batch for one (stream, destination task); a `Route` is what
an emit on one stream needs (the groupings' pickers, the outboxes, direct targets).
Routes are built once per task from the plan; emitting only picks and appends. The
checks that an emit matches its stream's declaration raise here, naming the component,
the stream and its fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import config
from ..errors import TopologyError
from ..topology import Subscription
from ..tuple import DEAD_LETTER_STREAM
from . import grouping as g
from . import locality as loc
from .plan import Plan
from .seams import PublishTarget


class Outbox(list):
    """The producer batch for one (stream, destination task): value rows, and beside them
    (`metas`, acking on and a user stream) each row's tree ids."""

    __slots__ = ("task", "stream", "target", "metas", "flushed", "stamp", "roots_ok")

    def __init__(self, task: int, stream: str, target: PublishTarget, tracked: bool):
        super().__init__()
        self.task = task
        self.stream = stream
        self.target = target
        self.metas: list[Any] | None = [] if tracked else None
        self.flushed = 0
        # edges with lifespan_ms/deadline_ms: the clock its batches are stamped with
        # when published (True until the worker names the clock; None: not stamped)
        self.stamp: Any = None
        # a reliable spout's bound emit writes root metas (ack_folder.py) here: a tracked
        # edge with no policy, into a receive queue of this worker. The flush writes them
        # out unless the queue's consumer takes them (Collector.flush).
        self.roots_ok = False


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
        "only",
        "fcache",
        "fidx",
        "fboxes",
        "orphan",
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
        # the emit fast paths, read inline (a Python call per tuple less): the one outbox
        # every tuple goes to (one subscriber of one task), or a one-field fields
        # grouping's key cache and key index (a miss calls `single`)
        self.only: Outbox | None = None
        self.fcache: dict[Any, Any] | None = None
        self.fidx = 0
        # that grouping's outbox of a str key, by CRC-32 modulo the length (str_boxes);
        # empty: the compiled paths route by the cache and the grouping
        self.fboxes: tuple[Outbox, ...] = ()
        # no subscriber, and the component's dead letters have one: emits are dead letters
        self.orphan = False
        self.system = stream.startswith("__")


def build_routes(
    plan: Plan,
    task: int,
    targets: Mapping[int, PublishTarget],
    local_tasks: set[int],
) -> tuple[dict[str, Route], list[Outbox]]:
    """Every stream `task` declares (user and system), with its outboxes."""
    component = plan.task_component[task]
    shuffling = _shuffling(plan.conf)
    routes: dict[str, Route] = {}
    outboxes: list[Outbox] = []
    for stream, fields in plan.streams[component].items():
        route = Route(stream, len(fields))
        tracked = plan.acking and not route.system
        for consumer, sub in plan.consumers(component, stream):
            tasks = plan.tasks[consumer]
            boxes = [Outbox(t, stream, targets[t], tracked) for t in tasks]
            if sub.policy is not None and sub.policy.stamped:
                for b in boxes:
                    b.stamp = True
            if tracked and sub.policy is None and plan.components[component].is_spout:
                for b in boxes:
                    b.roots_ok = hasattr(b.target, "takes_roots")  # a local receive queue
            route.outboxes.extend(boxes)
            outboxes.extend(boxes)
            where = f"{consumer!r} on {component!r} stream {stream!r}"
            picker = _picker(
                sub, boxes, tasks, fields, local_tasks, route, where, shuffling, plan, task
            )
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
            if not route.direct:
                if route.count_boxes and len(route.count_boxes) == 1:
                    route.only = route.count_boxes[0]
                elif route.shuffle1 is not None and len(route.shuffle1.outboxes) == 1:
                    # local-or-shuffle with one task in this worker: it takes every tuple
                    route.only = route.shuffle1.outboxes[0]
            fg: g.Fields | None = getattr(route.single, "fields_grouping", None)
            if fg is not None and len(fg.indices) == 1:
                route.fcache, route.fidx = fg.cache, fg.indices[0]
                route.fboxes = fg.str_boxes()
        if route.pickers and route.direct and not route.system:
            # Storm refuses a regular emit on a stream any subscriber takes by direct
            # grouping ('Cannot do regular emit to direct stream'): with no pickers, every
            # regular emit takes the checked path, which raises (collector._deliveries)
            route.pickers.clear()
            route.shuffles.clear()
            route.count_boxes = []
            route.single = route.shuffle1 = route.only = route.fcache = None
            route.fboxes = ()
        routes[stream] = route
    dead = routes.get(DEAD_LETTER_STREAM)
    if dead is not None and dead.pickers:
        for route in routes.values():
            if not route.system and not route.pickers and not route.direct:
                route.orphan = True
    return routes, outboxes


def _picker(
    sub: Any,
    boxes: list[Outbox],
    tasks: list[int],
    fields: Sequence[str],
    local: set[int],
    route: Route,
    where: str,
    shuffling: dict[str, Any],
    plan: Plan,
    source_task: int,
) -> Callable[[Any], Any] | None:
    kind = sub.grouping
    if route.system and kind == "fields":
        return g.AckerRoute(boxes).pick
    if kind in ("shuffle", "none", "local_or_shuffle"):
        if kind == "local_or_shuffle":  # Storm's: the local tasks if any, never a spill
            chosen = [b for b in boxes if b.task in local] or boxes
            sh = g.Shuffle(chosen, None, **shuffling)
        else:  # locality-aware: the local tasks while they keep up
            scopes = [loc.scope_of(t, local, None, None) for t in tasks]
            sh = g.Shuffle(boxes, scopes, **shuffling)
        route.shuffles.append(sh)
        return _shuffled(sh)
    if kind == "fields":
        return g.Fields(boxes, [fields.index(f) for f in sub.fields]).pick
    if kind == "lanes":
        return g.Lanes(boxes, [fields.index(f) for f in sub.fields], _lane_count(sub)).pick
    if kind == "partial_key":
        return g.PartialKey(boxes, [fields.index(f) for f in sub.fields]).pick
    if kind == "all":
        return g.All(boxes).pick
    if kind == "global":
        return g.Global(boxes).pick
    if kind == "custom":
        stream = (plan.task_component[source_task], route.stream)
        return g.Custom(boxes, tasks, sub.custom, where, source_task, stream, plan).pick
    if kind == "direct":
        return None
    raise TopologyError(f"unknown grouping {kind!r} for {where}")


def _shuffling(conf: Any) -> dict[str, Any]:
    """The shuffles' settings from the topology config (Storm's keys and meaning)."""
    return {
        "bounds": (conf[config.LOCALITY_HIGHER], conf[config.LOCALITY_LOWER]),
        "load_aware": not conf[config.LOADAWARE_OFF],
    }


def _shuffled(sh: g.Shuffle) -> Callable[[Any], Any]:
    def pick(values: Any) -> Any:
        return sh.pick_next()

    return pick


def _lane_count(sub: Subscription) -> int:
    assert sub.lanes is not None  # ordered_lanes always sets it
    return sub.lanes.lanes
