"""The execution plan: task ids, system components, streams, cycles and placement.

Pure and picklable: a worker process receives the plan and builds its executors from it.
Task ids follow Storm: components in name order, ids from 1. Acking adds the system
component `__acker`, an ordinary bolt subscribed to every component's ack streams.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .. import config as _config
from ..component import Bolt
from ..plugins import PLAN_EXTENSIONS
from ..topology import ComponentSpec, Subscription, Topology, consumers_of
from ..tuple import DEAD_LETTER_FIELDS, DEAD_LETTER_STREAM, SYSTEM_COMPONENT, TICK_STREAM

ACKER = "__acker"


ACK_INIT, ACK_ACK, ACK_FAIL, ACK_RESET = "__ack_init", "__ack_ack", "__ack_fail", "__ack_reset"
# the root of an ACK_ACK message that carries a committed checkpoint's acks (ack_folder.py);
# a tree's root is never negative
COMMITTED_ACKS = -1
# the root of an ACK_ACK message that carries `(spout task, [root, ...])`: announced trees
# of one tuple, acked with nothing anchored to them, so complete (ack_folder.py)
FIRST_DONE = -2
# a fail carries why: (failing component, "Type: message" of its error or None); a fail
# and a reset carry the spout task their tuple's edge announces (0: none, ack_folder.py)
BOLT_ACK_STREAMS = {
    ACK_ACK: ("root", "val"),
    ACK_FAIL: ("root", "why", "task"),
    ACK_RESET: ("root", "task"),
}
SPOUT_ACK_STREAMS = {ACK_INIT: ("root", "val", "task")}
# the acker tells a spout task of its completed trees in lists, one per batch it executed
ACKER_OUT_STREAMS = {ACK_ACK: ("roots",), ACK_FAIL: ("root", "why"), ACK_RESET: ("root",)}


@dataclass
class Plan:
    name: str
    conf: dict[str, Any]
    components: dict[str, ComponentSpec]
    tasks: dict[str, list[int]]
    task_component: dict[int, str]
    streams: dict[str, dict[str, tuple[str, ...]]]
    on_cycle: set[str]
    feeds_cycle: set[str]
    acking: bool
    assignment: dict[int, int] = field(default_factory=dict)  # task -> worker index

    @property
    def workers(self) -> int:
        return max(self.assignment.values(), default=0) + 1

    def worker_tasks(self, worker: int) -> list[int]:
        return sorted(t for t, w in self.assignment.items() if w == worker)

    def component_conf(self, name: str) -> dict[str, Any]:
        """The component's resolved config: its own keys over the topology's, with
        derived values (an unset producer batch) following the component's own."""
        where = f"component {name!r} of topology {self.name!r}"
        return _config.for_component(self.conf, self.components[name].config, where)

    def consumers(self, component: str, stream: str) -> list[tuple[str, Subscription]]:
        return consumers_of(self.components, component, stream)


def build_plan(topology: Topology, conf: Mapping[str, Any], acker_bolt: Bolt) -> Plan:
    """`conf` is already resolved and validated (Topology.validate)."""
    conf = dict(conf)
    workers = conf["topology.workers"]
    n_ackers = conf["topology.acker.executors"]
    if n_ackers is None:
        n_ackers = workers
    conf["topology.acker.executors"] = n_ackers
    acking = n_ackers > 0
    # copies: the plan adds system subscriptions, the user's topology stays as written
    policies = topology.edge_policies(conf)
    components = {
        n: replace(
            s,
            subscriptions=[
                replace(sub, policy=policies.get((n, sub.source, sub.stream)))
                for sub in s.subscriptions
            ],
            config=dict(s.config),
        )
        for n, s in topology.components.items()
    }
    # features above the runtime (stateful bolts: the checkpoint spout, and the shells
    # of the bolts taking part)
    on_cycle = find_cycles(components)[0]
    for extension in PLAN_EXTENSIONS:
        extension(components, conf, topology.name, on_cycle)
    streams = {name: dict(spec.streams) for name, spec in components.items()}
    for name in components:  # spouts: past max.replays; bolts: DEAD_LETTER results
        streams[name][DEAD_LETTER_STREAM] = DEAD_LETTER_FIELDS
    if acking:
        acker = ComponentSpec(ACKER, acker_bolt, n_ackers, False)
        for name, spec in components.items():
            sys_streams = SPOUT_ACK_STREAMS if spec.is_spout else BOLT_ACK_STREAMS
            streams[name].update(sys_streams)
            for s in sys_streams:
                acker.subscriptions.append(Subscription(name, s, "fields", ("root",)))
            if spec.is_spout:
                for s in ACKER_OUT_STREAMS:
                    spec.subscriptions.append(Subscription(ACKER, s, "direct"))
        components[ACKER] = acker
        streams[ACKER] = dict(ACKER_OUT_STREAMS)
    streams[SYSTEM_COMPONENT] = {TICK_STREAM: ("rate_secs",)}  # Storm's tick field
    tasks: dict[str, list[int]] = {}
    task_component: dict[int, str] = {}
    next_id = 1
    for name in sorted(components):
        ids = list(range(next_id, next_id + components[name].parallelism))
        next_id += len(ids)
        tasks[name] = ids
        for t in ids:
            task_component[t] = name
    on_cycle, feeds = find_cycles(components)
    plan = Plan(
        topology.name, conf, components, tasks, task_component, streams, on_cycle, feeds, acking
    )
    if acking:  # whom a fail goes to when its tree's spout task is not known yet (acker.py)
        acker_bolt.spout_tasks = tuple(  # type: ignore[attr-defined]
            t for n in sorted(components) if components[n].is_spout for t in tasks[n]
        )
    plan.assignment = assign(plan, workers)
    return plan


def assign(plan: Plan, workers: int) -> dict[int, int]:
    """Round-robin each component's tasks over the workers (Storm's even scheduler)."""
    out: dict[int, int] = {}
    i = 0
    for name in sorted(plan.tasks):
        for t in plan.tasks[name]:
            out[t] = i % workers
            i += 1
    return out


def find_cycles(components: Mapping[str, ComponentSpec]) -> tuple[set[str], set[str]]:
    """Components on a cycle of the user graph, and the spouts upstream of one."""
    succ = successors(components)
    on_cycle: set[str] = set()
    for scc in _sccs(succ):
        if len(scc) > 1 or any(n in succ[n] for n in scc):
            on_cycle |= scc
    feeds: set[str] = set()
    for name, spec in components.items():
        if spec.is_spout and reaches(succ, name) & on_cycle:
            feeds.add(name)
    return on_cycle, feeds


def successors(components: Mapping[str, ComponentSpec]) -> dict[str, set[str]]:
    """The user graph: each component's subscribers (system streams left out)."""
    succ: dict[str, set[str]] = {n: set() for n in components}
    for spec in components.values():
        for sub in spec.subscriptions:
            if sub.source in succ and not sub.source.startswith("__"):
                succ[sub.source].add(spec.name)
    return succ


def reaches(succ: Mapping[str, set[str]], start: str) -> set[str]:
    """The components `start` reaches along the graph's edges."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for n in succ[todo.pop()]:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def _sccs(succ: Mapping[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (graphs are small, but recursion limits are real)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for root in succ:
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(succ[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = set()
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    scc.add(n)
                    if n == node:
                        break
                out.append(scc)
    return out
