"""How the plan adds checkpointing to a topology with a stateful bolt (Storm's
TopologyBuilder does the same when it sees an IStatefulBolt).

- One `__checkpoint` spout task (CheckpointSpout) is added.
- Every bolt that is stateful or upstream of a stateful bolt takes part: it reads the
  `$checkpoint` stream (all grouping) of each component it reads from, the checkpoint
  spout standing in for user spouts, and is wrapped in a shell (bolt.py) that aligns the
  barriers and forwards them. Bolts downstream of every stateful bolt are left as they
  are: they hold no state and feed none.
- Checks: acking must be on (the protocol is acked trees); a taking-part bolt may not
  use batch settle or ordered lanes (the shells run the bolt's execute) nor sit on a
  cycle (its barrier would wait for itself); no user stream may be named `$checkpoint`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..component import Bolt
from ..errors import ConfigError, TopologyError
from ..topology import ComponentSpec, Subscription
from .bolt import StatefulBolt, wrap
from .protocol import CHECKPOINT_STREAM
from .spout import CHECKPOINT_COMPONENT, INTERVAL, CheckpointSpout


def is_stateful(components: Mapping[str, ComponentSpec]) -> bool:
    return any(isinstance(s.obj, StatefulBolt) for s in components.values())


def add_checkpointing(
    components: dict[str, ComponentSpec],
    conf: Mapping[str, Any],
    name: str,
    on_cycle: set[str],
) -> None:
    """Change the plan's copies of `components` in place (the user's stay as written)."""
    if not is_stateful(components):
        return
    _check(components, conf, name, on_cycle)
    taking_part = _upstream_of_stateful(components)
    for bolt in sorted(taking_part):
        spec = components[bolt]
        sources = []
        for sub in spec.subscriptions:
            if sub.source.startswith("__"):
                continue
            src = components[sub.source]
            source = CHECKPOINT_COMPONENT if src.is_spout else sub.source
            if source not in sources:
                sources.append(source)
        if not sources:  # a bolt fed by nothing but system streams
            sources.append(CHECKPOINT_COMPONENT)
        tasks = sum(1 if s == CHECKPOINT_COMPONENT else components[s].parallelism for s in sources)
        subs = [Subscription(s, CHECKPOINT_STREAM, "all") for s in sources]
        obj = spec.obj
        assert isinstance(obj, Bolt)  # taking part: bolts only
        components[bolt] = replace(
            spec, obj=wrap(obj, tasks), subscriptions=spec.subscriptions + subs
        )
    every = max(1, conf[INTERVAL] // 10)  # Storm's spout sleeps a tenth of the interval
    components[CHECKPOINT_COMPONENT] = ComponentSpec(
        CHECKPOINT_COMPONENT,
        CheckpointSpout(),
        1,
        True,
        config={"topology.spout.wait.progressive.level3.sleep.millis": min(every, 100)},
    )


def _upstream_of_stateful(components: Mapping[str, ComponentSpec]) -> set[str]:
    """Stateful bolts and every bolt from which one can be reached."""
    feeds: dict[str, set[str]] = {n: set() for n in components}
    for spec in components.values():
        for sub in spec.subscriptions:
            if sub.source in feeds:
                feeds[spec.name].add(sub.source)
    out: set[str] = set()
    todo = [n for n, s in components.items() if isinstance(s.obj, StatefulBolt)]
    while todo:
        n = todo.pop()
        if n in out or components[n].is_spout:
            continue
        out.add(n)
        todo.extend(feeds[n])
    return out


def _check(
    components: Mapping[str, ComponentSpec], conf: Mapping[str, Any], name: str, cyc: set[str]
) -> None:
    stateful = sorted(n for n, s in components.items() if isinstance(s.obj, StatefulBolt))
    if conf["topology.acker.executors"] == 0:
        raise ConfigError(
            f"config key 'topology.acker.executors' is 0 in topology {name!r}, but stateful "
            f"bolt(s) {stateful} need acking: checkpoints are acked tuple trees"
        )
    interval, timeout = conf[INTERVAL], conf["topology.message.timeout.secs"]
    timeouts = conf.get("topology.enable.message.timeouts", True)  # off: none expire
    if timeouts and max(interval, 100) >= timeout * 1000:
        raise ConfigError(
            f"config key {INTERVAL!r} ({interval} ms) must be below "
            f"'topology.message.timeout.secs' ({timeout} s) in topology {name!r}: a stateful "
            "bolt's tuples are acked at the commit after them, so they would time out first"
        )
    for n in stateful:
        cls: Any = type(components[n].obj)
        if cls.execute_batch is not Bolt.execute_batch and cls.execute is Bolt.execute:
            raise TopologyError(
                f"stateful bolt {n!r} ({cls.__name__}) defines execute_batch but not execute: "
                "a stateful bolt runs execute(tup) per tuple, as Storm's does (its tuples are "
                "held from a restart until its state is restored, and acked at the commit "
                "after them); define execute"
            )
    for n, spec in components.items():
        if CHECKPOINT_STREAM in spec.streams:
            raise TopologyError(
                f"component {n!r} declares stream {CHECKPOINT_STREAM!r}, reserved for "
                "checkpoints in a topology with stateful bolts"
            )
    for n in sorted(_upstream_of_stateful(components)):
        spec = components[n]
        if n in cyc:
            raise TopologyError(
                f"component {n!r} of topology {name!r} is on a cycle and stateful bolt(s) "
                f"{stateful} are on or after it: a checkpoint barrier would wait for itself"
            )
        if getattr(spec.obj, "batch_size", None) is not None:
            raise TopologyError(
                f"component {n!r} uses batch settle (batch_size) and feeds stateful bolt(s) "
                f"{stateful}: checkpointing runs each tuple through execute"
            )
        if any(s.grouping == "lanes" for s in spec.subscriptions):
            raise TopologyError(
                f"component {n!r} reads an ordered_lanes edge and feeds stateful bolt(s) "
                f"{stateful}: checkpointing does not support ordered lanes yet"
            )
