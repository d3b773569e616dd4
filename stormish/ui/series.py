"""The page's time series: a bounded ring of points per component, in memory.

The engine's counters are cumulative (and its latencies lifetime means), so a point is
the difference between two samples of the statistics divided by the time between them
(a task whose counts went down restarted in between: what it counted since is its
difference, as Prometheus's rate() takes a reset):
rates per second, the share of the time a task was busy (Storm's capacity) or parked
behind backpressure, and the complete latency of the trees acked in between: the mean,
and p50/p99 from the interval's share of the spouts' latency histograms. The
UI samples when it is asked (the page refreshes every 2 s), at most one point per `STEP`
seconds; a ring keeps `KEEP` seconds of points and never more than `MAX_POINTS`, so a
page left open for a week costs what one left open for 10 minutes does.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

from ..runtime.stats import COMPLETE_BUCKETS, TaskStats, TopologyStatistics
from .window import baseline

STEP = 1.0  # seconds: the least time between two points
KEEP = 600.0  # seconds of points kept (the plots' window: Storm's 10 minutes)
MAX_POINTS = int(KEEP / STEP) + 1  # the ring's bound, whatever the clock does
TOPOLOGY = "__topology__"  # the ring of the whole topology's points


def busy_seconds(t: TaskStats) -> float:
    """The seconds a task has spent in user code: its executed x its mean latency."""
    return t.executed * t.execute_latency_ms / 1000.0


def task_shares(
    now: TopologyStatistics, before: TopologyStatistics | None, seconds: float
) -> dict[int, tuple[float, float]]:
    """Per task, the share of `seconds` it was busy and the share it was parked behind
    backpressure (0 for a task without an earlier sample or a window of no length; a
    task that restarted in between counts what it did since)."""
    out: dict[int, tuple[float, float]] = {}
    for tid, t in now.tasks.items():
        prev = before.tasks.get(tid) if before is not None else None
        if prev is None or seconds <= 0:
            out[tid] = (0.0, 0.0)
            continue
        b = baseline(t, prev)
        busy_b, parked_b = (busy_seconds(b), b.backpressure_seconds) if b else (0.0, 0.0)
        busy = max(0.0, busy_seconds(t) - busy_b) / seconds
        parked = max(0.0, t.backpressure_seconds - parked_b) / seconds
        out[tid] = (busy, min(parked, 1.0))
    return out


def quantile_ms(
    hist: list[int], q: float, bounds: tuple[float, ...] = COMPLETE_BUCKETS
) -> float | None:
    """The `q` quantile, in ms, of an interval's histogram (counts per bucket of `bounds`
    in seconds, and one for +Inf), interpolated within its bucket as Prometheus's
    histogram_quantile does; past the last bound, that bound. None without a count."""
    total = sum(hist)
    if total <= 0:
        return None
    rank, seen = q * total, 0
    for i, n in enumerate(hist):
        if n and seen + n >= rank:
            if i >= len(bounds):
                return bounds[-1] * 1000.0
            lo = bounds[i - 1] if i else 0.0
            return (lo + (bounds[i] - lo) * (rank - seen) / n) * 1000.0
        seen += n
    return bounds[-1] * 1000.0


def _hist_delta(tasks: list[tuple[TaskStats, TaskStats | None]]) -> list[int]:
    """The spouts' complete-latency histogram over the interval (counts only grow)."""
    out = [0] * (len(COMPLETE_BUCKETS) + 1)
    for t, b in tasks:
        before = b.complete_histogram if b is not None else ()
        for i, n in enumerate(t.complete_histogram[: len(out)]):
            out[i] += max(0, n - (before[i] if i < len(before) else 0))
    return out


def fill(t: TaskStats) -> float:
    """How full a task's receive queue is (its overflow counts as full and more)."""
    return (t.receive_population + t.overflow) / t.receive_capacity if t.receive_capacity else 0.0


def _point(
    tasks: list[tuple[TaskStats, TaskStats | None]],
    shares: Mapping[int, tuple[float, float]],
    seconds: float,
    at: float,
) -> dict[str, Any]:
    """One point over `tasks` (each with its earlier sample): rates, busy, parked, fill."""

    def delta(attr: str) -> float:
        return float(sum(getattr(t, attr) - (getattr(b, attr) if b else 0) for t, b in tasks))

    acked_spout = [(t, b) for t, b in tasks if t.kind == "spout"]
    trees = sum(t.acked - (b.acked if b else 0) for t, b in acked_spout)
    latency_total = sum(
        t.acked * t.complete_latency_ms - (b.acked * b.complete_latency_ms if b else 0)
        for t, b in acked_spout
    )
    hist = _hist_delta(acked_spout)
    p50, p99 = quantile_ms(hist, 0.5), quantile_ms(hist, 0.99)
    return {
        "t": round(at, 3),
        "emitted": round(max(0.0, delta("emitted")) / seconds, 2),
        "executed": round(max(0.0, delta("executed")) / seconds, 2),
        "acked": round(max(0.0, delta("acked")) / seconds, 2),
        "failed": round(max(0.0, delta("failed")) / seconds, 2),
        "completeLatency": round(latency_total / trees, 3) if trees > 0 else None,
        "completeLatencyP50": None if p50 is None else round(p50, 3),
        "completeLatencyP99": None if p99 is None else round(p99, 3),
        "capacity": round(max((shares[t.task][0] for t, _ in tasks), default=0.0), 3),
        "backpressure": round(max((shares[t.task][1] for t, _ in tasks), default=0.0), 3),
        "queueFill": round(max((fill(t) for t, _ in tasks), default=0.0), 3),
    }


class Series:
    """One topology's rings: one per component and one for the whole topology."""

    def __init__(self, step: float = STEP, keep: float = KEEP, max_points: int = MAX_POINTS):
        self.step, self.keep = step, keep
        self.max_points = max_points
        self.rings: dict[str, deque[dict[str, Any]]] = {}
        self.last: tuple[float, TopologyStatistics] | None = None
        self.lock = threading.Lock()

    def add(self, now: float, stats: TopologyStatistics) -> bool:
        """A point per component from `stats` and the previous sample; False when the
        previous one is younger than `step` (the sample is not kept)."""
        with self.lock:
            if self.last is not None and now - self.last[0] < self.step:
                return False
            prev = self.last
            self.last = (now, stats)
            if prev is None:
                return True
            seconds = now - prev[0]
            shares = task_shares(stats, prev[1], seconds)
            by: dict[str, list[tuple[TaskStats, TaskStats | None]]] = {}
            for tid, t in stats.tasks.items():
                by.setdefault(t.component, []).append((t, baseline(t, prev[1].tasks.get(tid))))
            user = [p for c, ps in by.items() if not c.startswith("__") for p in ps]
            points = {c: _point(ps, shares, seconds, now) for c, ps in by.items()}
            top = _point(user, shares, seconds, now)
            # the topology emits what its components emit, but it acks and fails what its
            # spouts do (their trees), as the REST API's topologyStats does
            for k in ("acked", "failed"):
                top[k] = round(sum(p[k] for c, p in points.items() if _is_spout(by[c])), 2)
            points[TOPOLOGY] = top
            for comp, p in points.items():
                ring = self.rings.setdefault(comp, deque(maxlen=self.max_points))
                ring.append(p)
                while ring and now - ring[0]["t"] > self.keep:
                    ring.popleft()
            return True

    def points(self, component: str, now: float, seconds: float) -> list[dict[str, Any]]:
        """The ring's points of the last `seconds`, oldest first, each with `ago`
        (seconds before `now`) beside its clock time `t`."""
        with self.lock:
            ring = self.rings.get(component, ())
            return [
                p | {"ago": round(now - p["t"], 3)} for p in ring if now - p["t"] <= seconds
            ]  # fmt: skip


def _is_spout(tasks: list[tuple[TaskStats, TaskStats | None]]) -> bool:
    return bool(tasks) and tasks[0][0].kind == "spout"
