"""The REST API's windows: what a topology did between two samples of its statistics.

The engine's counters are cumulative per task and start again from 0 when the task's
worker restarts; its latencies are means over the task's life. So each sample keeps,
per component, running sums that only grow: the counts, and the milliseconds behind
each mean (executed x execute latency, as `series.busy_seconds`; acked x complete
latency; the tuples measured x process latency). A task whose counts went down
restarted: what it had counted before is kept as an offset and its counts go on from
there (Prometheus's `rate()` takes a counter that went down as a reset the same way).
A window is then the change of those sums between its baseline sample and now: its
counts, Storm's capacity (busy time / the window's length) and its mean latencies,
never the lifetime ones.

Pure: the samples' times come from the caller (the server's monotonic clock, or a test's).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..runtime.stats import TaskStats, TopologyStatistics

KEEP = 600.0  # the longest window kept (Storm's 10 minutes)
SLACK = 10.0  # kept beyond KEEP: the graph's recent rates look back this far too
COUNTS = ("emitted", "transferred", "executed", "acked", "failed", "timed_out")
# the sums a sample keeps: the counts, then the milliseconds behind each mean latency
SUMS = (*COUNTS, "measured", "busy_ms", "process_ms", "complete_ms")
_COUNTED = len(COUNTS) + 1  # the integer counts (and `measured`): a reset shows in them


def task_sums(t: TaskStats) -> tuple[float, ...]:
    """A task's cumulative figures in the order of `SUMS`."""
    measured = sum(t.process_histogram)  # the tuples its process latency is over
    return (
        *(getattr(t, k) for k in COUNTS),
        measured,
        t.executed * t.execute_latency_ms,
        measured * t.process_latency_ms,
        t.acked * t.complete_latency_ms if t.kind == "spout" else 0.0,
    )


def restarted(
    now: tuple[float, ...], before: tuple[float, ...], now_run: Any = None, before_run: Any = None
) -> bool:
    """The task's worker restarted, and its counters with it: another incarnation
    (`incarnation`, when both samples carry one), or a count that went down. Counts
    alone miss a restart after which every count passed its old value by the next
    sample (the window then lost what the task did before it)."""
    if now_run is not None and before_run is not None and now_run != before_run:
        return True
    return any(n < b for n, b in zip(now[:_COUNTED], before[:_COUNTED], strict=True))


def incarnation(t: TaskStats) -> Any:
    """What tells one process of the task's worker from the next (its start time), or
    None when the statistics carry none (made by hand, or by an older worker): a restart
    is then told by its counts alone."""
    return getattr(t, "worker_started", None) or None


def baseline(t: TaskStats, before: TaskStats | None) -> TaskStats | None:
    """`before`, a task's earlier sample, unless the task restarted since (then its
    counts since are all it did in between: None, as for a task new since)."""
    if before is None or restarted(
        task_sums(t), task_sums(before), incarnation(t), incarnation(before)
    ):
        return None
    return before


@dataclass(frozen=True)
class Sample:
    """The statistics at `t`, and per component the running sums (`SUMS`) of its tasks,
    restarts included: they never go down."""

    t: float
    stats: TopologyStatistics
    sums: Mapping[str, tuple[float, ...]]


class History:
    """Samples of one topology's statistics, newest last, up to `KEEP` (+ `SLACK`)
    seconds old, with what each task counted before its restarts."""

    def __init__(self) -> None:
        self.samples: deque[Sample] = deque()
        self.lock = threading.Lock()
        self._last: dict[int, tuple[str, tuple[float, ...]]] = {}  # task: component, sums
        self._run: dict[int, Any] = {}  # task: its worker's incarnation (None: not known)
        self._offset: dict[int, tuple[float, ...]] = {}  # task: counted before restarts

    def add(self, now: float, stats: TopologyStatistics) -> Sample:
        with self.lock:
            for tid, t in stats.tasks.items():
                raw, run = task_sums(t), incarnation(t)
                seen = self._last.get(tid)
                if seen is not None and restarted(raw, seen[1], run, self._run.get(tid)):
                    off = self._offset.get(tid, (0.0,) * len(SUMS))
                    self._offset[tid] = tuple(o + b for o, b in zip(off, seen[1], strict=True))
                self._last[tid] = (t.component, raw)
                self._run[tid] = run
            sample = Sample(now, stats, self._component_sums())
            self.samples.append(sample)
            while self.samples and now - self.samples[0].t > KEEP + SLACK:
                self.samples.popleft()
            return sample

    def _component_sums(self) -> dict[str, tuple[float, ...]]:
        """Per component, over every task seen (one missing from this sample counts
        what it had when last seen), with the offsets of their restarts."""
        out: dict[str, list[float]] = {}
        zero = (0.0,) * len(SUMS)
        for tid, (comp, raw) in self._last.items():
            acc = out.setdefault(comp, [0.0] * len(SUMS))
            for i, (v, o) in enumerate(zip(raw, self._offset.get(tid, zero), strict=True)):
                acc[i] += v + o
        return {c: tuple(v) for c, v in out.items()}

    def since(self, now: float, seconds: float) -> Sample | None:
        """The oldest sample within `seconds` before `now`, taken before `now`: a sample
        is never its own baseline (`now` is the newest sample's own time)."""
        with self.lock:
            for s in self.samples:
                if now - s.t <= seconds and s.t < now:
                    return s
        return None


def window(now: Sample, before: Sample | None) -> dict[str, Any]:
    """Per component what happened since `before` (None: the whole life, as far as
    the samples know it), and the window's length in seconds."""
    secs = now.t - before.t if before is not None else now.stats.uptime_seconds
    out: dict[str, Any] = {"seconds": secs, "components": {}}
    base = before.sums if before is not None else {}
    for name, sums in now.sums.items():
        b = base.get(name)
        d = dict(zip(SUMS, sums, strict=True))
        if b is not None:
            # a component's sums never go down; a float's rounding may, by a hair
            d = {k: max(0.0, v - w) for (k, v), w in zip(d.items(), b, strict=True)}
        out["components"][name] = _figures(d, secs)
    return out


def _figures(d: dict[str, float], secs: float) -> dict[str, Any]:
    """A component's window: its counts, Storm's capacity and the window's latencies."""
    fig: dict[str, Any] = {k: int(round(d[k])) for k in COUNTS}
    fig["capacity"] = d["busy_ms"] / 1000.0 / secs if secs > 0 else 0.0
    fig["execute_latency_ms"] = _mean(d["busy_ms"], d["executed"])
    fig["process_latency_ms"] = _mean(d["process_ms"], d["measured"])
    fig["complete_latency_ms"] = _mean(d["complete_ms"], d["acked"])
    return fig


def _mean(total_ms: float, count: float) -> float:
    return total_ms / count if count > 0 else 0.0
