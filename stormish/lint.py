"""`stormish plan` and `stormish lint`: a topology's edges explained, and its risky but
valid choices named, without starting a worker.

The plan is what the runtime will build (the same `build_plan`): every edge with its
grouping, policy, capacity, lifespan and deadline, whether it is on a cycle, and the
tasks and workers it connects. Lint findings are warnings (valid, but likely not what
was meant); a topology that fails its checks is an error (the command exits non-zero).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .edges import EdgePolicy
from .topology import Topology
from .tuple import DEAD_LETTER_STREAM

FLUSH = "topology.batch.flush.interval.millis"


@dataclass
class Edge:
    bolt: str
    source: str
    stream: str
    grouping: str
    fields: list[str]
    policy: dict[str, Any] | None
    on_cycle: bool
    source_tasks: list[int]
    bolt_tasks: list[int]
    source_workers: list[int]
    bolt_workers: list[int]
    crosses_workers: bool
    risks: list[str] = field(default_factory=list)
    # readers='multi' with an evicting policy: a slow reader misses tuples
    slow_reader_drop_risk: bool = False
    # a `fail` edge between workers: the credit each sending task in another worker may
    # hold unspent (runtime/credits.py), what bounds its fan-outs per grant round trip
    credit_share: int | None = None

    @property
    def name(self) -> str:
        return f"{self.bolt} <- {self.source}:{self.stream}"


@dataclass
class Finding:
    level: str  # "warning"
    where: str
    message: str


@dataclass
class Report:
    topology: str
    workers: int
    acking: bool
    components: dict[str, dict[str, Any]]
    edges: list[Edge]
    findings: list[Finding]

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for e, src in zip(d["edges"], self.edges, strict=True):
            e["name"] = src.name
        return d


def analyse(topology: Topology, extra: Mapping[str, Any] | None = None) -> Report:
    """The plan and the findings; raises what `Topology.validate` raises. `extra` may be
    a resolved config (nimbus's, a run's plan): the daemons' keys in it are left out."""
    from .config import KEYS
    from .runtime.acker import AckerBolt
    from .runtime.plan import build_plan

    daemons = ("nimbus", "supervisor")
    extra = {
        k: v for k, v in (extra or {}).items() if k not in KEYS or KEYS[k].scope not in daemons
    }
    conf = topology.validate(extra)
    plan = build_plan(topology, conf, AckerBolt())
    workers = conf["topology.workers"]
    edges: list[Edge] = []
    findings: list[Finding] = []
    user = {n for n in plan.components if not n.startswith("__")}
    for name in sorted(user):
        spec = plan.components[name]
        for sub in spec.subscriptions:
            if sub.source not in user:
                continue
            src_tasks, dst_tasks = plan.tasks[sub.source], plan.tasks[name]
            sw = sorted({plan.assignment[t] for t in src_tasks})
            bw = sorted({plan.assignment[t] for t in dst_tasks})
            policy = None
            if sub.grouping == "lanes":
                assert sub.lanes is not None  # ordered_lanes always sets it
                policy = {
                    "overflow": "lanes",
                    "lanes": sub.lanes.lanes,
                    "max_in_flight": sub.lanes.max_in_flight,
                }
            elif sub.policy is not None:
                policy = sub.policy.as_dict()
            e = Edge(
                name,
                sub.source,
                sub.stream,
                sub.grouping,
                list(sub.fields),
                policy,
                name in plan.on_cycle and sub.source in plan.on_cycle,
                list(src_tasks),
                list(dst_tasks),
                sw,
                bw,
                len(set(sw) | set(bw)) > 1,
            )
            e.slow_reader_drop_risk = sub.policy is not None and sub.policy.slow_reader_drop_risk
            e.credit_share = _credit_share(plan, name, sub, src_tasks, dst_tasks)
            e.risks = _risks(
                e, sub.policy, spec.obj, plan.conf, plan.component_conf(name), plan.acking
            )
            edges.append(e)
            findings += [Finding("warning", e.name, r) for r in e.risks]
    for name in topology.unfed_bolts(conf):
        findings.append(Finding("warning", name, unfed(topology, name)))
    if plan.on_cycle and plan.conf.get("topology.max.spout.pending") is None:
        findings.append(
            Finding(
                "warning",
                "topology",
                f"components {sorted(plan.on_cycle)} form a cycle and topology.max.spout.pending "
                "is unset (None): nothing bounds what the cycle holds; set it (Storm's advice "
                "for cycles, STORM-3637)",
            )
        )
    components = {
        n: {
            "kind": "spout" if plan.components[n].is_spout else "bolt",
            "tasks": plan.tasks[n],
            "workers": sorted({plan.assignment[t] for t in plan.tasks[n]}),
        }
        for n in sorted(user)
    }
    return Report(topology.name, workers, plan.acking, components, edges, findings)


def unfed(topology: Topology, bolt: str) -> str:
    """What to say of a bolt nothing feeds (`Topology.unfed_bolts`)."""
    spout = next((n for n, c in sorted(topology.components.items()) if c.is_spout), "spout")
    return (
        f"bolt {bolt!r} subscribes to no stream and gets no tick tuples: it never executes; "
        f"give it a grouping (e.g. .shuffle_grouping({spout!r}))"
    )


def _credit_share(
    plan: Any, bolt: str, sub: Any, src_tasks: list[int], dst_tasks: list[int]
) -> int | None:
    """What the worker (runtime/worker.py `_wire_credits`) grants each sending task of
    another worker on a `fail` edge, None where no task sends across: the same rule, so
    the plan says what the run will do."""
    from .config import QUEUE
    from .runtime.credits import share_of

    p = sub.policy
    if p is None or p.overflow != "fail" or not p.channel:
        return None
    where = plan.assignment
    if not any(where[s] != where[d] for s in src_tasks for d in dst_tasks):
        return None
    return share_of(p.capacity or plan.component_conf(bolt)[QUEUE], src_tasks)


def _risks(
    e: Edge,
    policy: EdgePolicy | None,
    bolt: Any,
    conf: Mapping[str, Any],
    bolt_conf: Mapping[str, Any],
    acking: bool,
) -> list[str]:
    out: list[str] = []
    size = getattr(bolt, "batch_size", None)
    if e.grouping == "lanes":
        most = e.policy["max_in_flight"] if e.policy else 0
        if size is not None and most < size:
            out.append(
                f"max_in_flight={most} is smaller than the bolt's batch_size={size}: no batch "
                "ever fills; each leaves when the bound is reached (raise max_in_flight or "
                "lower batch_size)"
            )
    if policy is None:
        return out
    if acking and policy.overflow in ("drop_oldest", "drop_newest", "latest"):
        out.append(
            f"overflow={policy.overflow!r} under acking: every tuple it lets go fails its "
            "tree (the spout replays it, or gives it up): at-least-once is given up on "
            "this edge unless the spout replays"
        )
    flush = conf.get(FLUSH, 1)
    if policy.lifespan_ms is not None and policy.lifespan_ms <= flush:
        out.append(
            f"lifespan_ms={policy.lifespan_ms:g} is not longer than {FLUSH} ({flush:g}): a "
            "tuple may wait that long in its producer batch before it is even sent"
        )
    if (
        policy.lifespan_ms is not None
        and policy.deadline_ms is not None
        and policy.deadline_ms >= policy.lifespan_ms
    ):
        out.append(
            f"deadline_ms={policy.deadline_ms:g} >= lifespan_ms={policy.lifespan_ms:g}: a "
            "tuple is dropped before it can miss its deadline"
        )
    if policy.overflow == "latest" and e.grouping in ("fields", "partial_key", "global"):
        out.append(
            f"overflow='latest' into a {e.grouping} grouping (an aggregation by key): the bolt "
            "sees only the newest tuple per task, not every tuple of each key"
        )
    cap = policy.capacity
    if policy.mode == "latched" and e.grouping != "all":
        out.append(
            f"mode='latched' with a {e.grouping} grouping: a restarted task is sent the last "
            "tuple it was sent, not the stream's last; reference data for every task wants "
            "all_grouping"
        )
    if policy.slow_reader_drop_risk:
        out.append(
            f"slow_reader_drop_risk: readers='multi' with overflow={policy.overflow!r}: a "
            "reader slower than the writer misses what was evicted before it read it (the "
            "others still see it)"
        )
    if policy.mode == "previous_tick" and conf.get("topology.epoch.millis") is None:
        out.append(
            "mode='previous_tick' without topology.epoch.millis: its tuples become visible "
            "only when a spout calls advance_epoch() or the input ends"
        )
    if policy.mode == "barrier" and acking and cap is not None:
        out.append(
            f"mode='barrier' under acking: up to {cap - 1} tuples wait for the rest of their "
            "batch, their trees open; a source slower than capacity tuples per "
            "topology.message.timeout.secs fails them"
        )
    if cap is not None and size is not None and cap < size and policy.mode == "queue":
        out.append(
            f"capacity={cap} is smaller than the bolt's batch_size={size}: no batch ever fills"
        )
    if e.stream == DEAD_LETTER_STREAM and policy.overflow != "block":
        out.append("a dropping policy on a dead-letter stream loses the dead letters it drops")
    return out


def format_plan(r: Report) -> list[str]:
    out = [
        f"topology {r.topology!r}: {len(r.components)} components, {r.workers} "
        f"worker{'s' if r.workers != 1 else ''}, acking {'on' if r.acking else 'off'}"
    ]
    for n, c in r.components.items():
        out.append(
            f"  {c['kind']:<5} {n:<20} tasks {_ids(c['tasks'])}  workers {_ids(c['workers'])}"
        )
    for e in r.edges:
        g = e.grouping + (f"({', '.join(e.fields)})" if e.fields else "")
        out.append(f"edge {e.name}: {g}, {_policy(e.policy)}{', on a cycle' if e.on_cycle else ''}")
        out.append(
            f"  tasks {_ids(e.source_tasks)} -> {_ids(e.bolt_tasks)}, workers "
            f"{_ids(e.source_workers)} -> {_ids(e.bolt_workers)}"
            + (" (crosses workers)" if e.crosses_workers else "")
        )
        if e.credit_share is not None:
            out.append(
                f"  credit: a sending task in another worker holds up to {e.credit_share} "
                "unspent; a fan-out waits for credit whole (docs/edges.md)"
            )
        out += [f"  risk: {x}" for x in e.risks]
    return out


def _ids(xs: list[int]) -> str:
    return ",".join(map(str, xs))


def _policy(p: dict[str, Any] | None) -> str:
    if p is None:
        return "block (the task's queue, backpressure)"
    if p["overflow"] == "lanes":
        return f"ordered lanes: {p['lanes']} lanes, max_in_flight {p['max_in_flight']}"
    if p.get("mode") == "barrier":
        return f"barrier: batches of {p['capacity']}"
    if p.get("mode") == "previous_tick":
        return "previous_tick (visible from the next epoch)"
    if p.get("mode") == "latched":
        return "latched (the last tuple kept for a task that starts later)"
    parts = [p["overflow"]]
    if p.get("readers") == "multi":
        parts.insert(0, "multi-reader")
    if p.get("capacity") is not None:
        parts.append(f"capacity {p['capacity']}")
    if p.get("lifespan_ms") is not None:
        parts.append(f"lifespan {p['lifespan_ms']:g} ms")
    if p.get("deadline_ms") is not None:
        parts.append(f"deadline {p['deadline_ms']:g} ms")
    if p.get("throttle") is not None:
        parts.append(f"throttle below {p['throttle']:g} free")
    return " ".join(parts)
