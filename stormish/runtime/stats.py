"""Statistics records: per task, per component and per topology, plain and JSON-ready.

The JSON shape is documented in docs/statistics.md; scripts rely on it, so a field is
added, never renamed or removed without a CHANGELOG entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from operator import attrgetter
from typing import Any, TypeVar

from ..edges import label
from ..transport.wire import record
from .channel import EDGE_COUNTS

T = TypeVar("T")

# Latency histogram buckets, upper bounds in seconds (Prometheus's base unit; the last
# bucket, +Inf, is implicit). Counted per batch for execute (each tuple of a batch at
# the batch's mean) and per tree for complete: a bisect each, never a call per tuple.
EXECUTE_BUCKETS = (1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0)
COMPLETE_BUCKETS = (
    1e-3,
    2.5e-3,
    5e-3,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

SUMMED = (
    "emitted",
    "transferred",
    "executed",
    "ticks",
    "acked",
    "failed",
    "timed_out",
    "receive_population",
    "receive_capacity",
    "overflow",
    "pending_emits",
    "backpressure_seconds",
    "errors",
    "dead_lettered",
)


@record
@dataclass(frozen=True)
class TaskStats:
    task: int
    component: str
    worker: int
    kind: str  # "spout" | "bolt" | "acker"
    emitted: int = 0
    transferred: int = 0
    executed: int = 0
    acked: int = 0
    failed: int = 0
    timed_out: int = 0
    execute_latency_ms: float = 0.0
    complete_latency_ms: float = 0.0
    receive_population: int = 0
    ticks: int = 0  # bolts: tick tuples among `executed` (they need no ack)
    receive_capacity: int = 0
    overflow: int = 0
    overflow_high: int = 0
    pending_emits: int = 0
    backpressure_seconds: float = 0.0
    errors: int = 0
    last_errors: tuple[str, ...] = ()
    dropped: Mapping[str, int] = field(default_factory=dict)
    emitted_by_stream: Mapping[str, int] = field(default_factory=dict)
    finished: bool = False
    progress_done: int | None = None  # spouts with progress(): items done ...
    progress_total: int | None = None  # ... out of this many (None: unknown)
    active: bool | None = None  # spouts: activated on their thread (None: a bolt)
    dead_lettered: int = 0  # spouts: tuples dead-lettered after topology.max.replays
    # inbound edges with a policy (stormish.edges): "source:stream" -> health counters
    edges: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    parked_seconds: float = 0.0  # how long its emits have been parked now (0: flowing)
    announced_backpressure: bool = False  # its worker tells upstream workers it is full
    # per bucket of EXECUTE_BUCKETS / COMPLETE_BUCKETS and one for +Inf, not cumulative
    execute_histogram: tuple[int, ...] = ()
    complete_histogram: tuple[int, ...] = ()
    # bolts: Storm's process latency, a tuple's execute to its ack or fail, matched per
    # batch (runtime/process_latency.py); per bucket of EXECUTE_BUCKETS, as execute's
    process_latency_ms: float = 0.0
    process_histogram: tuple[int, ...] = ()
    # how long a call into its user code has gone on without returning, once reported
    # as stuck (past topology.executor.stuck.secs); 0: not stuck
    stuck_seconds: float = 0.0
    # edge health events at this task (topology.edge.health.events; runtime/health.py)
    health_events: tuple[Mapping[str, Any], ...] = ()
    # what the component's optional `gauges()` reports, name -> value (a Kafka spout's
    # lag per partition, "lag:TOPIC/PARTITION"); summed per name over a component's tasks
    gauges: Mapping[str, float] = field(default_factory=dict)
    # when its worker process started (time.time()): a new value is a new incarnation,
    # whose counts start again (ui/window.py tells a restart by it, not by counts alone)
    worker_started: float = 0.0


@record
@dataclass(frozen=True)
class ComponentStats:
    component: str
    kind: str
    tasks: int
    emitted: int
    transferred: int
    executed: int
    acked: int
    failed: int
    timed_out: int
    execute_latency_ms: float
    complete_latency_ms: float
    receive_population: int
    receive_capacity: int
    overflow: int
    pending_emits: int
    backpressure_seconds: float
    errors: int
    dropped: Mapping[str, int]
    progress_done: int | None = None
    progress_total: int | None = None
    dead_lettered: int = 0
    edges: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # summed over tasks
    process_latency_ms: float = 0.0  # weighted by each task's measured tuples
    stuck_seconds: float = 0.0  # the longest of its tasks' (0: none is stuck)
    gauges: Mapping[str, float] = field(default_factory=dict)  # summed per name over tasks
    ticks: int = 0  # bolts: tick tuples among `executed` (they need no ack)


def _edges(ts: list[TaskStats]) -> dict[str, dict[str, Any]]:
    """An edge's counters over the component's tasks; the high watermark is the highest
    of one task and the last reason the latest one."""
    out: dict[str, dict[str, Any]] = {}
    for t in ts:
        for edge, e in t.edges.items():
            agg = out.get(edge)
            if agg is None:
                out[edge] = dict(e)
                continue
            for k in EDGE_COUNTS:
                agg[k] += e[k]
            agg["high_watermark"] = max(agg["high_watermark"], e["high_watermark"])
            if e["last_at"] > agg["last_at"]:
                agg["last_reason"], agg["last_at"] = e["last_reason"], e["last_at"]
    return out


@record
@dataclass(frozen=True)
class TopologyStatistics:
    name: str
    status: str  # a TopologyStatus (runtime/status.py); its plain text after the wire
    uptime_seconds: float
    workers: int
    tasks: Mapping[int, TaskStats]
    components: Mapping[str, ComponentStats]
    links: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None

    def component(self, name: str) -> ComponentStats:
        return self.components[name]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tasks"] = {str(k): v for k, v in d["tasks"].items()}
        d["schema"] = "stormish.statistics/1"
        return d

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TopologyStatistics:
        """The statistics `to_dict` made (nimbus's saved final statistics of an ended
        topology, read back when it restarts). Fields the schema added since are taken
        at their defaults, ones it does not know are left; a ValueError, KeyError or
        TypeError says it is not such a dict."""
        if d.get("schema") != "stormish.statistics/1":
            raise ValueError(f"not stormish.statistics/1: schema {d.get('schema')!r}")
        tasks = {int(k): _from_dict(TaskStats, v) for k, v in d["tasks"].items()}
        comps = {k: _from_dict(ComponentStats, v) for k, v in d["components"].items()}
        rest = {k: d[k] for k in ("uptime_seconds", "workers", "links", "error") if k in d}
        return cls(name=d["name"], status=d["status"], tasks=tasks, components=comps, **rest)


def _from_dict(cls: type[T], d: Mapping[str, Any]) -> T:
    """A flat statistics record from its `asdict`: JSON's lists back to tuples."""
    kw = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in d:
            v = d[f.name]
            if isinstance(v, list) and str(f.type).startswith("tuple"):
                v = tuple(v)
            kw[f.name] = v
    return cls(**kw)


def _weighted(tasks: list[TaskStats], attr: str, weight: Callable[[TaskStats], int]) -> float:
    """The tasks' mean `attr`, each weighted by the tuples it was measured on."""
    ws = [weight(t) for t in tasks]
    w = sum(ws)
    if not w:
        return 0.0
    return sum(getattr(t, attr) * k for t, k in zip(tasks, ws, strict=True)) / w


def aggregate(tasks: Iterable[TaskStats]) -> dict[str, ComponentStats]:
    by: dict[str, list[TaskStats]] = {}
    for t in tasks:
        by.setdefault(t.component, []).append(t)
    out = {}
    for name, ts in sorted(by.items()):
        sums = {k: sum(getattr(t, k) for t in ts) for k in SUMMED}
        dropped: dict[str, int] = {}
        for t in ts:
            for reason, n in t.dropped.items():
                dropped[reason] = dropped.get(reason, 0) + n
        progress = _progress(ts)
        out[name] = ComponentStats(
            component=name,
            kind=ts[0].kind,
            tasks=len(ts),
            execute_latency_ms=_weighted(ts, "execute_latency_ms", attrgetter("executed")),
            complete_latency_ms=_weighted(ts, "complete_latency_ms", attrgetter("acked")),
            dropped=dropped,
            progress_done=progress[0],
            progress_total=progress[1],
            edges=_edges(ts),
            process_latency_ms=_weighted(ts, "process_latency_ms", _process_count),
            stuck_seconds=max(t.stuck_seconds for t in ts),
            gauges=_gauges(ts),
            **sums,
        )
    return out


def _gauges(ts: list[TaskStats]) -> dict[str, float]:
    out: dict[str, float] = {}
    for t in ts:
        for name, v in t.gauges.items():
            out[name] = out.get(name, 0) + v
    return out


def _process_count(t: TaskStats) -> int:
    return sum(t.process_histogram)


def _progress(ts: list[TaskStats]) -> tuple[int | None, int | None]:
    """A component's progress: the sum over its tasks; the total only when every task
    knows its own."""
    done = [t.progress_done for t in ts if t.progress_done is not None]
    if not done:
        return None, None
    totals = [t.progress_total for t in ts]
    known = all(x is not None for x in totals)
    return sum(done), (sum(x for x in totals if x is not None) if known else None)


def timing_out(before: TopologyStatistics | None, now: TopologyStatistics) -> list[str]:
    """Spouts whose trees timed out faster than they completed between two statistics.
    Each timed-out tree is replayed into the same backlog, so such a run stops making
    progress: a bolt slower than its spouts, with more trees in flight than it can
    execute within `topology.message.timeout.secs`."""
    out = []
    for name, c in now.components.items():
        if c.kind != "spout":
            continue
        b = before.components.get(name) if before is not None else None
        timed_out = c.timed_out - (b.timed_out if b else 0)
        if timed_out > c.acked - (b.acked if b else 0):
            out.append(name)
    return out


def stuck_tasks(stats: TopologyStatistics) -> str:
    """What `stormish run`'s status line and `stormish monitor` say of stuck tasks
    (runtime/stuck.py): "STUCK split[3] 42 s, ..." or nothing."""
    stuck = [t for t in stats.tasks.values() if t.stuck_seconds > 0]
    if not stuck:
        return ""
    return "STUCK " + ", ".join(f"{t.component}[{t.task}] {t.stuck_seconds:.0f} s" for t in stuck)


def timeout_warning(spouts: list[str]) -> str:
    """The line `stormish run` and `stormish monitor` show for `timing_out`'s spouts."""
    if not spouts:
        return ""
    return (
        f"WARNING trees of {', '.join(spouts)} time out faster than they complete: "
        "lower topology.max.spout.pending or raise topology.message.timeout.secs"
    )


def edge_table(stats: TopologyStatistics) -> list[str]:
    """The closing table's edge section: each edge with a policy, summed over its tasks
    (stormish.edges); nothing when no edge has one."""
    rows = [
        (c.component, e)
        for c in stats.components.values()
        for e in sorted(c.edges.values(), key=lambda e: e["edge"])
    ]
    if not rows:
        return []
    out = [
        f"{'edge':<30}{'policy':>12}{'arrived':>11}{'executed':>11}{'dropped':>10}"
        f"{'stale':>8}{'overwr.':>9}{'rejected':>9}{'late':>8}{'high':>7}"
    ]
    for bolt, e in rows:
        out.append(
            f"{bolt + ' <- ' + e['edge']:<30}{label(e['policy']):>12}{e['arrived']:>11,}"
            f"{e['executed']:>11,}{e['dropped']:>10,}{e['stale']:>8,}{e['overwritten']:>9,}"
            f"{e['rejected']:>9,}{e['deadline_missed']:>8,}{e['high_watermark']:>7,}"
        )
    out += [f"  {bolt} <- {e['edge']}: {e['last_reason']}" for bolt, e in rows if e["last_reason"]]
    return out


def edge_changes(stats: TopologyStatistics, seen: dict[str, tuple[int, ...]]) -> list[str]:
    """For `monitor`: a line per edge whose losses or missed deadlines grew since the last
    call (`seen` keeps what was told), with its latest reason."""
    out = []
    for c in stats.components.values():
        for e in c.edges.values():
            name = f"{c.component} <- {e['edge']}"
            now = tuple(
                e[k] for k in ("dropped", "stale", "overwritten", "rejected", "deadline_missed")
            )
            before = seen.get(name, (0, 0, 0, 0, 0))
            seen[name] = now
            if now == before:
                continue
            grew = ", ".join(
                f"{k} +{b - a:,} ({b:,})"
                for k, a, b in zip(
                    ("dropped", "stale", "overwritten", "rejected", "deadline missed"),
                    before,
                    now,
                    strict=True,
                )
                if b != a
            )
            out.append(f"edge {name} [{label(e['policy'])}]: {grew}; {e['last_reason'] or ''}")
    return out
