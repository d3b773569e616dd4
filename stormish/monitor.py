"""What `stormish monitor` tells, as a pure function of what nimbus answered: each tick
takes the topology's statistics and its row of `list` and returns what changed since
the last tick (rates, queue fill, backpressure roots, new errors, edge counters, health
events, worker states). No I/O and no clock of its own, so it is tested with statistics
built by hand; cli_cluster.monitor polls nimbus and renders the ticks as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .runtime.bp_root import backpressure_roots, cycle_note
from .runtime.bp_root import describe as describe_root
from .runtime.error_report import new_errors
from .runtime.health import new_events
from .runtime.stats import TopologyStatistics, edge_changes, timeout_warning, timing_out
from .runtime.status import shown_status


def worker_line(w: dict[str, Any]) -> str:
    """One worker as its supervisor reports it: where, its state, restarts, last death."""
    n = int(w.get("restarts") or 0)
    where = f"worker {w['index']} on {w['supervisor']}:{w['port']}"
    state = str(w.get("state"))
    if state == "running" and w.get("pid"):
        state = f"running (pid {w['pid']})"
    elif state == "waiting" and w.get("restart_in") is not None:
        state = f"down, restarting in {w['restart_in']:g}s"
    line = f"{where}: {state}, {n} restart{'s' if n != 1 else ''}"
    if w.get("last_exit"):
        ago = w.get("last_exit_ago")
        line += f"; last {w['last_exit']}" + (f" {ago:g}s ago" if ago is not None else "")
        if w.get("last_words"):
            line += f": {w['last_words']}"
    return line


def worker_changes(row: dict[str, Any], told: dict[int, tuple]) -> list[str]:
    """The workers whose state or restart count changed since last told (monitor)."""
    out = []
    for w in row.get("worker_status", ()):
        key = (w.get("state"), w.get("restarts"), w.get("pid"))
        news = told.get(w["index"]) != key
        if news and (w.get("restarts") or w.get("state") == "waiting"):
            out.append(worker_line(w))
        told[w["index"]] = key
    return out


@dataclass
class Tick:
    """One tick: the status line's parts, each component's figures, the backpressure
    roots, the workers, and the news (lines to print once)."""

    name: str
    status: str
    parts: list[str]
    components: dict[str, dict[str, Any]]
    roots: list[str]
    workers: list[Any]
    news: list[str]

    def text(self) -> list[str]:
        return [f"{self.name} [{self.status}] " + " | ".join(self.parts), *self.news]

    def json(self, wall_time: float) -> dict[str, Any]:
        return {
            "name": self.name, "status": self.status, "time": wall_time,
            "components": self.components, "roots": self.roots,
            "workers": self.workers, "news": self.news,
        }  # fmt: skip


@dataclass
class MonitorView:
    """What has been told so far; `tick` says what is new."""

    last: dict[str, int] = field(default_factory=dict)  # executed per component
    last_t: float | None = None
    last_stats: TopologyStatistics | None = None
    errors_told: dict[str, int] = field(default_factory=dict)  # per component
    edges_told: dict[str, tuple[int, ...]] = field(default_factory=dict)
    events_told: dict[int, int] = field(default_factory=dict)  # per worker, the last event
    workers_told: dict[int, tuple] = field(default_factory=dict)
    roots_told: tuple[int, ...] = ()
    roots_before: set[int] = field(default_factory=set)  # the roots of the previous tick

    def tick(self, s: TopologyStatistics, row: dict[str, Any] | None, now: float) -> Tick:
        """`now`: a monotonic time (the rates are per second between two ticks)."""
        elapsed = max(now - (now if self.last_t is None else self.last_t), 1e-9)
        # a root seen on two ticks in a row: a victim caught for a moment with a full
        # queue and its emits flowing is not named
        seen_now = backpressure_roots(s.tasks.values())
        roots = [r for r in seen_now if r.task.task in self.roots_before]
        self.roots_before = {r.task.task for r in seen_now}
        root_components = {r.task.component for r in roots}
        parts, comps = [], {}
        for c in s.components.values():
            # a spout executes nothing: its rate is what it emits (it showed 0/s)
            spout = c.kind == "spout"
            done = c.emitted if spout else c.executed
            rate = (done - self.last.get(c.component, done)) / elapsed
            self.last[c.component] = done
            fill = c.receive_population / max(c.receive_capacity, 1)
            flags = (
                (" ROOT" if c.component in root_components else "")
                + (" BP" if c.pending_emits else "")
                + (f" E{c.errors}" if c.errors else "")
                + (f" STUCK{c.stuck_seconds:.0f}s" if c.stuck_seconds else "")
            )
            parts.append(
                f"{c.component} {rate:,.0f}/s q{fill:.0%} c{c.complete_latency_ms:.1f}ms{flags}"
            )
            comps[c.component] = {
                "executed_per_second": 0.0 if spout else round(rate, 1),
                **({"emitted_per_second": round(rate, 1)} if spout else {}),
                "queue_fill": round(fill, 4),
                "complete_latency_ms": c.complete_latency_ms, "pending_emits": c.pending_emits,
                "errors": c.errors, "root": c.component in root_components,
                "stuck_seconds": round(c.stuck_seconds, 1),
            }  # fmt: skip
        self.last_t = now
        warning = timeout_warning(timing_out(self.last_stats, s))
        self.last_stats = s
        news = [warning] if warning else []
        news += new_errors(s.tasks.values(), self.errors_told)
        news += edge_changes(s, self.edges_told)
        news += new_events(s.tasks.values(), self.events_told)
        news += worker_changes(row or {}, self.workers_told)
        told = tuple(r.task.task for r in roots)
        if told != self.roots_told:
            news += [describe_root(r) for r in roots[:3]]
            if not roots:
                note = cycle_note(s.tasks.values())
                news.append(note or "backpressure gone: no task is parked")
            self.roots_told = told
        status = shown_status(row) if row and "status" in row else str(s.status)
        return Tick(
            s.name, status, parts, comps, [describe_root(r) for r in roots],
            (row or {}).get("worker_status", []), news,
        )  # fmt: skip
