"""Per-edge channel policies: what an edge keeps, and what happens when it is full.

Storm gives every edge one behaviour, a bounded queue that pushes back, and that stays
the default (`overflow="block"`). A subscription may choose otherwise for its edge (one
source stream into one bolt, per destination task), as a robotics runtime's channels do:

- `block`: the task's receive queue; a full one parks the sender (backpressure).
- `drop_oldest`: always accept; past `capacity` tuples, discard the oldest waiting.
- `drop_newest`: keep what waits; a tuple that finds the edge full is discarded.
- `latest`: one slot; a newer tuple overwrites the one waiting (a sensor's last value).
- `fail`: a tuple that finds the edge full is rejected: its tree fails at once, the
  spout's `fail` hears reason `overflow`.

`lifespan_ms`: a tuple older than this when it would be executed is dropped (`stale`),
never executed. `throttle` (a `block` edge): once the destination task's queue has less than this
fraction free, the sender is delayed 1 / (capacity x free ratio) seconds a tuple (a batch
of n: n times that, capped at THROTTLE_MAX_S), so it slows down progressively before it
hits the wall; only towards tasks in the sender's own worker (another worker's queue fill is not
known to the sender: there the backpressure status acts as usual).

`deadline_ms`: a tuple older than this is still executed, marked
(`tup.deadline_missed`, `batch.deadline_missed`) and counted. Age is measured from the
moment the sender published the tuple's batch (a producer batch waits up to
`topology.batch.flush.interval.millis` before that: a lifespan shorter than it means
little), on the topology's clock within a worker and on the wall clock between workers.

Under acking, a tuple dropped by any policy fails its tree with the reason (`dropped`,
`overwritten`, `overflow`, `stale`): at-least-once still holds where the spout replays,
and is given up explicitly where the user chose to drop.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from .errors import TopologyError

OVERFLOW = ("block", "drop_oldest", "drop_newest", "latest", "fail")
POLICY_KEYS = (
    "overflow",
    "capacity",
    "lifespan_ms",
    "deadline_ms",
    "throttle",
    "emit_health_events",
    "mode",
    "readers",
)


class EdgeOptions(TypedDict, total=False):
    """A grouping's edge keyword options (POLICY_KEYS), for type checkers:
    `shuffle_grouping("s", **EdgeOptions(overflow="drop_oldest", capacity=500))`."""

    overflow: str
    capacity: int | None
    lifespan_ms: float | None
    deadline_ms: float | None
    throttle: float | None
    emit_health_events: bool
    mode: str
    readers: str


# `readers="multi"`: one edge read by every task of the bolt (all_grouping), each with its
# own cursor; these policies keep a window all of them read in (block: the slowest
# holds the writer back; drop_oldest, latest: it misses what they evicted)
MULTI_OVERFLOW = ("block", "drop_oldest", "latest")
EVICTING = ("drop_oldest", "latest")
# how an edge delivers (docs/edges.md): `queue` (every tuple, one at a time or as its
# batches come), `barrier` (only n at once, as one batch: capacity=n), `latched` (as
# `queue`, and the last tuple is kept for a task that starts later), `previous_tick` (what
# is published in an epoch is visible from the next: topology.epoch.millis)
MODES = ("queue", "barrier", "latched", "previous_tick")

THROTTLE_MAX_S = 0.1  # the longest a throttle spaces two batches

# why a tree failed when an edge let one of its tuples go (Failure.reason)
DROPPED, OVERWRITTEN, OVERFLOWED, STALE = "dropped", "overwritten", "overflow", "stale"


@dataclass(frozen=True)
class EdgePolicy:
    """A checked policy; `capacity` None on `block` means the task's receive queue."""

    overflow: str = "block"
    capacity: int | None = None
    lifespan_ms: float | None = None
    deadline_ms: float | None = None
    throttle: float | None = None  # block edges: slow the sender below this free fraction
    # with topology.edge.health.events: False leaves this edge's events out, nothing else
    emit_health_events: bool = True
    mode: str = "queue"
    readers: str = "one"

    @property
    def channel(self) -> bool:
        """The edge has a channel of its own (anything but `block` in `queue` mode)."""
        return self.overflow != "block" or self.mode != "queue"

    @property
    def stamped(self) -> bool:
        """Its batches carry the time they were published (an age is checked)."""
        return self.lifespan_ms is not None or self.deadline_ms is not None

    def as_dict(self) -> dict[str, Any]:
        """The options; `emit_health_events`, `mode` and `readers` only when not the
        default (what readers of the statistics and the plan knew stays as it was)."""
        out = {k: getattr(self, k) for k in POLICY_KEYS[:5]}
        if not self.emit_health_events:
            out["emit_health_events"] = False
        if self.mode != "queue":
            out["mode"] = self.mode
        if self.readers != "one":
            out["readers"] = self.readers
        return out

    @property
    def slow_reader_drop_risk(self) -> bool:
        """Several readers, and a policy that evicts: a slow one misses tuples."""
        return self.readers == "multi" and self.overflow in EVICTING


def label(policy: Mapping[str, Any]) -> str:
    """A policy (as the statistics give it) in a word, for tables: its mode when it has
    one, else its overflow; `multi ` before it for several readers."""
    word = policy.get("mode") or policy["overflow"]
    return f"multi {word}" if policy.get("readers") == "multi" else word


def make_policy(where: str, **given: Any) -> EdgePolicy | None:
    """The policy a grouping's keyword arguments ask for (None: none given, Storm's
    edge). `where` names the edge in errors."""
    unknown = sorted(set(given) - set(POLICY_KEYS))
    if unknown:
        raise TopologyError(
            f"{where}: unknown edge option(s) {', '.join(map(repr, unknown))}; an edge takes "
            f"{', '.join(POLICY_KEYS)}"
        )
    values = {k: v for k, v in given.items() if v is not None}
    if not values:
        return None
    readers = values.pop("readers", "one")
    if readers not in ("one", "multi"):
        raise TopologyError(f"{where}: readers={readers!r} is not 'one' or 'multi'")
    if readers == "multi":
        return _multi(where, values)
    if not values:
        return None
    overflow = values.get("overflow", "block")
    if overflow not in OVERFLOW:
        raise TopologyError(
            f"{where}: overflow={overflow!r} is not a policy; choose one of {', '.join(OVERFLOW)}"
        )
    mode = values.get("mode", "queue")
    if mode not in MODES:
        raise TopologyError(
            f"{where}: mode={mode!r} is not a mode; choose one of {', '.join(MODES)}"
        )
    health = _health(where, values)
    if mode == "barrier":
        return _barrier(where, values)
    if mode in ("latched", "previous_tick"):
        other = sorted(
            k
            for k in values
            if k not in ("mode", "emit_health_events") and (k, values[k]) != ("overflow", "block")
        )
        if other:
            raise TopologyError(
                f"{where}: mode={mode!r} takes no other option (it delivers every tuple as "
                f"Storm's edge does, blocking); got {', '.join(other)}"
            )
        return EdgePolicy(mode=mode, emit_health_events=health)
    capacity = values.get("capacity")
    if capacity is not None:
        if type(capacity) is not int or capacity < 1:
            raise TopologyError(f"{where}: capacity={capacity!r} must be an integer >= 1")
        if overflow == "block":
            raise TopologyError(
                f"{where}: capacity={capacity} with overflow='block': a blocking edge uses "
                "its task's receive queue (topology.executor.receive.buffer.size); give a "
                "dropping policy or leave capacity out"
            )
        if overflow == "latest" and capacity != 1:
            raise TopologyError(
                f"{where}: overflow='latest' keeps one tuple (the newest); capacity={capacity} "
                "is not 1: for the newest N use overflow='drop_oldest', capacity=N"
            )
    elif overflow == "latest":
        capacity = 1
    for key in ("lifespan_ms", "deadline_ms"):
        v = values.get(key)
        if v is not None and (
            isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0
        ):
            raise TopologyError(f"{where}: {key}={v!r} must be a number of milliseconds > 0")
    throttle = values.get("throttle")
    if throttle is not None:
        if (
            isinstance(throttle, bool)
            or not isinstance(throttle, int | float)
            or not 0 < throttle < 1
        ):
            raise TopologyError(
                f"{where}: throttle={throttle!r} must be a fraction of free capacity between 0 "
                "and 1 (0.5: slow the sender once the queue is half full)"
            )
        if overflow != "block":
            raise TopologyError(
                f"{where}: throttle with overflow={overflow!r}: a throttle slows a sender "
                "instead of stopping it, on a blocking edge; a dropping edge never stops it"
            )
    return EdgePolicy(
        overflow, capacity, values.get("lifespan_ms"), values.get("deadline_ms"), throttle, health
    )


def _health(where: str, values: dict[str, Any]) -> bool:
    health = values.get("emit_health_events", True)
    if not isinstance(health, bool):
        raise TopologyError(f"{where}: emit_health_events={health!r} must be True or False")
    return health


def _barrier(where: str, values: dict[str, Any]) -> EdgePolicy:
    """mode='barrier': capacity=n tuples delivered together as one batch, in order. It
    blocks like Storm's edge (a sender waits while the edge holds more than the task's
    queue), and an age check or a dropping policy would cut a batch short: refused."""
    n = values.get("capacity")
    if type(n) is not int or n < 1:
        raise TopologyError(
            f"{where}: mode='barrier' needs capacity=n (an integer >= 1), the tuples it "
            f"delivers together; got capacity={n!r}"
        )
    other = sorted(
        k for k in values if k not in ("mode", "capacity", "overflow", "emit_health_events")
    )
    if values.get("overflow", "block") != "block" or other:
        given = (
            [f"overflow={values['overflow']!r}"]
            if values.get("overflow", "block") != "block"
            else []
        )
        raise TopologyError(
            f"{where}: mode='barrier' takes capacity only (a batch of n is whole, never "
            f"dropped or aged); got {', '.join(given + other)}"
        )
    return EdgePolicy("block", n, mode="barrier", emit_health_events=_health(where, values))


def _multi(where: str, values: dict[str, Any]) -> EdgePolicy:
    """readers='multi': the edge's policy as for one reader, which every reader applies
    to its own cursor; a policy that refuses a tuple for all because one reader is
    behind (drop_newest, fail) or a mode is not offered."""
    overflow = values.get("overflow", "block")
    if overflow not in MULTI_OVERFLOW or values.get("mode", "queue") != "queue":
        what = f"mode={values['mode']!r}" if "mode" in values else f"overflow={overflow!r}"
        raise TopologyError(
            f"{where}: readers='multi' with {what}: several readers share one edge with "
            f"overflow {', '.join(MULTI_OVERFLOW)} (a slow reader holds the writer back, or "
            "misses what was evicted)"
        )
    p = make_policy(where, **values) if values else EdgePolicy()
    assert p is not None
    return EdgePolicy(
        p.overflow,
        p.capacity,
        p.lifespan_ms,
        p.deadline_ms,
        p.throttle,
        p.emit_health_events,
        readers="multi",
    )


def policies_from_config(value: Any, key: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """`topology.edge.policies`: {"bolt <- source[:stream]": {overflow: ..., ...}}, for a
    topology given as a file plus config. Returns {(bolt, source, stream): options}."""
    if not isinstance(value, Mapping):
        raise TopologyError(f"config {key}: a mapping of 'bolt <- source[:stream]' to options")
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for edge, options in value.items():
        if not isinstance(edge, str) or "<-" not in edge:
            raise TopologyError(
                f"config {key}: edge {edge!r} must read 'bolt <- source' or 'bolt <- source:stream'"
            )
        bolt, _, src = (p.strip() for p in edge.partition("<-"))
        source, _, stream = src.partition(":")
        if not bolt or not source:
            raise TopologyError(f"config {key}: edge {edge!r} names no bolt or no source")
        if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
            raise TopologyError(
                f"config {key}: edge {edge!r}: options must be a mapping of option names "
                f"({', '.join(POLICY_KEYS)}) to values"
            )
        out[(bolt, source.strip(), stream.strip() or "default")] = dict(options)
    return out
