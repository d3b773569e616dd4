"""Edge health events (`topology.edge.health.events`): the moments an edge's policy acted,
kept as bounded records per worker, beside the counters that only say how often.

A counter says 3,000 tuples were dropped on `enrich <- sensors`; an event says when, at
what depth of what capacity, under which policy and why (`overflow`, `stale`,
`deadline_missed`, `high_watermark`), which is what an operator reads after an incident.
The ring keeps the last EVENTS_KEPT of a worker: a storm of drops costs a fixed amount of
memory, never a growing one. Recording happens where the counters move, on the thread
that moved them, only for edges that have a ring (`EdgeStats.events`): an edge without one
pays one attribute test, and nothing when events are off (the default).
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from typing import Any

EVENTS_KEPT = 500  # per worker
# the reasons an event gives
OVERFLOW, STALE, DEADLINE_MISSED, HIGH_WATERMARK = (
    "overflow",
    "stale",
    "deadline_missed",
    "high_watermark",
)
# a channel's depth crossing this share of its capacity upward is an event; it is told
# again only after the depth fell below REARM (no event per tuple around the mark)
HIGH_MARK, REARM = 0.8, 0.5


class HealthEvents:
    """The ring of one worker. `record` may be called from any of its threads (an
    executor's, the link's receive thread): deque.append is atomic, and the sequence
    number comes from an itertools counter (atomic under the GIL)."""

    __slots__ = ("ring", "_seq", "worker")

    def __init__(self, worker: int, kept: int = EVENTS_KEPT):
        self.ring: deque[dict[str, Any]] = deque(maxlen=kept)
        self._seq = itertools.count(1)
        self.worker = worker

    def record(self, st: Any, reason: str, depth: int, capacity: int, detail: str) -> None:
        self.ring.append(
            {
                "seq": next(self._seq),
                "time": time.time(),
                "worker": self.worker,
                "task": st.task,
                "edge": st.edge,
                "policy": st.policy.overflow,
                "reason": reason,
                "depth": depth,
                "capacity": capacity,
                "detail": detail,
            }
        )

    def for_task(self, task: int) -> tuple[dict[str, Any], ...]:
        return tuple(e for e in list(self.ring) if e["task"] == task)


def merged(tasks: Any) -> list[dict[str, Any]]:
    """Every task's events (TaskStats.health_events) in time order, oldest first."""
    out = [e for t in tasks for e in getattr(t, "health_events", ())]
    out.sort(key=lambda e: (e["time"], e["worker"], e["seq"]))
    return out


def describe(e: dict[str, Any]) -> str:
    return (
        f"EDGE {e['edge']} -> task {e['task']} [{e['policy']}] {e['reason']} at "
        f"{e['depth']}/{e['capacity']}: {e['detail']}"
    )


def new_events(tasks: Any, told: dict[int, int], most: int = 5) -> list[str]:
    """Lines for the events not told yet (`told`: the last sequence number told per
    worker, updated), the newest `most` of them and a count of the rest. A worker that
    started again numbers from 1: a sequence below the one told starts it over."""
    fresh = []
    events = merged(tasks)
    last: dict[int, int] = {}
    for e in events:
        w = e["worker"]
        last[w] = max(last.get(w, 0), e["seq"])
    for w, top in last.items():
        if top < told.get(w, 0):
            told[w] = 0
    for e in events:
        if e["seq"] > told.get(e["worker"], 0):
            fresh.append(e)
    for w, top in last.items():
        told[w] = max(told.get(w, 0), top)
    lines = [describe(e) for e in fresh[-most:]]
    if len(fresh) > most:
        lines.insert(0, f"EDGE {len(fresh) - most} more health events (see /events)")
    return lines
