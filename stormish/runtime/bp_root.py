"""Which task a topology's backpressure comes from.

Backpressure bubbles up: one slow task fills its receive queue, the tasks that send to
it park their emits and stop taking input, their own queues fill, and so on up to the
spouts. Every component but the last shows parked emits and full queues, so listing
them names the victims. The root is the task that is full without being parked itself:
it is busy, not waiting on anyone. Pure, over the statistics, so `monitor`, the web
page and tests share it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .stats import TaskStats

FULL = 0.9  # a receive queue this full (or with an overflow) counts as congested


@dataclass(frozen=True)
class Root:
    task: TaskStats
    parked: tuple[str, ...]  # the components with parked emits (behind it)
    for_seconds: float  # the longest a task has been parked now


def congested(t: TaskStats) -> bool:
    """Its senders wait for it: a full queue, an overflow, or backpressure announced."""
    full = t.receive_capacity > 0 and t.receive_population >= FULL * t.receive_capacity
    return t.kind != "spout" and (full or t.overflow > 0 or t.announced_backpressure)


def parked(t: TaskStats) -> bool:
    """It waits for someone: emits parked in its pendingEmitQ."""
    return t.parked_seconds > 0 or t.pending_emits > 0


def backpressure_roots(tasks: Iterable[TaskStats]) -> list[Root]:
    """The congested tasks that are not parked, slowest and fullest first; none when no
    task is parked (a full queue nobody waits on is not backpressure yet) or when every
    congested task is parked too (a cycle: see `cycle_note`)."""
    ts = list(tasks)
    waiting = [t for t in ts if parked(t)]
    if not waiting:
        return []
    behind = tuple(sorted({t.component for t in waiting}))
    longest = max(t.parked_seconds for t in waiting)
    # A victim between two turns can look like a root: its queue still full, its emits
    # flowing for a moment. It has spent a good part of its life parked, a root next to
    # none (it waits on nobody): one parked for a quarter of the longest is a victim.
    most = max(t.backpressure_seconds for t in waiting)
    roots = [
        t
        for t in ts
        if congested(t) and not parked(t) and not (most and t.backpressure_seconds >= most / 4)
    ]
    # the slowest first: a root is busy (its execute time is what holds everyone up); a
    # victim passes tuples on and takes next to no time per tuple
    roots.sort(key=lambda t: (-t.execute_latency_ms, -_fill(t), t.task))
    return [Root(t, behind, longest) for t in roots]


def _fill(t: TaskStats) -> float:
    return (t.receive_population + t.overflow) / max(t.receive_capacity, 1)


def describe(root: Root) -> str:
    """One line for `monitor`: the task, where it runs, how full and how slow, and who
    waits behind it."""
    t = root.task
    overflow = f", overflow {t.overflow:,}" if t.overflow else ""
    behind = [c for c in root.parked if c != t.component]
    return (
        f"backpressure root: {t.component} task {t.task} on worker {t.worker}: queue "
        f"{min(_fill(t), 9.99):.0%} ({t.receive_population:,}/{t.receive_capacity:,}"
        f"{overflow}), execute {t.execute_latency_ms:.2f} ms"
        + (f"; parked behind it: {', '.join(behind)}" if behind else "")
        + f" (up to {root.for_seconds:.1f}s)"
    )


def cycle_note(tasks: Iterable[TaskStats]) -> str:
    """When tasks are parked but every congested one is parked too."""
    ts = list(tasks)
    full = sorted({t.component for t in ts if congested(t)})
    if not full or not any(parked(t) for t in ts):
        return ""
    return (
        f"backpressure with no root outside a cycle: {', '.join(full)} are full and "
        "parked on each other"
    )
