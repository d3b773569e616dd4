"""Prometheus metrics, built from the statistics at scrape time.

Nothing on the tuple path: the engine already counts per task (the statistics every
`stormish run`, `monitor` and `--stats-json` read), so a scrape asks for them and turns
them into metric families. A scrape costs what a `monitor` line costs (one question to
every worker) and a topology nobody scrapes pays nothing. Names follow Prometheus's
conventions: `stormish_` prefix, base units (seconds, bytes), `_total` for counters;
labels name the topology, component, task, worker and stream, never a tuple.

One scrape target covers a whole topology: the local cluster's `stormish run
--metrics-port` and nimbus's `--metrics-port` gather from every worker, as Storm's UI
does through nimbus. A supervisor's target tells its workers' states and restarts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from .runtime.bp_root import congested
from .runtime.stats import COMPLETE_BUCKETS, EXECUTE_BUCKETS, TopologyStatistics

TASK = ["topology", "component", "task", "worker"]
EDGE = ["source", "stream"]  # an edge into a task: its source component and stream

# a spout executes no tuples: it counts the control messages it handled
# (runtime/spout_executor.py `_control`)
_EXECUTED = (
    "bolts: tuples executed, ticks included; spouts: control messages handled "
    "(acker completion lists, fails, timeout resets, ticks), not emits"
)
# counter name (after stormish_), TaskStats field, help
_COUNTERS = [
    ("transferred", "transferred", "tuples sent on to other tasks"),
    ("executed", "executed", _EXECUTED),
    ("acked", "acked", "tuples acked: bolts' acks, spouts' completed tuple trees"),
    ("failed", "failed", "tuples failed: bolts' fails, spouts' failed trees"),
    ("timed_out", "timed_out", "spout tuple trees that timed out (topology.message.timeout.secs)"),
    ("dead_lettered", "dead_lettered", "tuples given up for good onto a dead-letter stream"),
    ("errors", "errors", "errors reported by the component (exceptions, report_error)"),
]
_GAUGES = [
    ("receive_queue_population", "receive_population", "tuples in the receive queue"),
    ("receive_queue_capacity", "receive_capacity", "the receive queue's capacity"),
    ("pending_emits", "pending_emits", "emits parked in the pendingEmitQ"),
    ("overflow_tuples", "overflow", "tuples parked in the overflowQ (from other workers)"),
    ("overflow_high_tuples", "overflow_high", "the overflowQ's highest size so far"),
    ("parked_seconds", "parked_seconds", "how long the task's emits have been parked now"),
]


@dataclass
class TopologySample:
    """One topology as a scrape sees it."""

    stats: TopologyStatistics
    worker_restarts: Mapping[int, int] = field(default_factory=dict)  # worker -> restarts


class FamiliesCollector(Collector):
    """A collector over `fn()`: metric families a daemon builds at each scrape."""

    def __init__(self, fn: Callable[[], list[Metric]]):
        self.fn = fn

    def collect(self) -> Iterator[Metric]:
        return iter(self.fn())


class StatisticsCollector(Collector):
    """A prometheus_client collector over `source()`: the topologies to expose now."""

    def __init__(self, source: Callable[[], Iterable[TopologySample]]):
        self.source = source

    def collect(self) -> Iterator[Metric]:
        return iter(families(list(self.source())))


def families(samples: list[TopologySample]) -> list[Metric]:
    """The metric families of `samples` (pure: tests compare them to the statistics)."""
    topo = GaugeMetricFamily(
        "stormish_topology_workers", "worker processes of the topology", labels=["topology"]
    )
    uptime = GaugeMetricFamily(
        "stormish_topology_uptime_seconds",
        "seconds since the topology started",
        labels=["topology"],
    )
    restarts = CounterMetricFamily(
        "stormish_worker_restarts", "times a worker process was restarted",
        labels=["topology", "worker"],
    )  # fmt: skip
    emitted = CounterMetricFamily(
        "stormish_emitted", "tuples emitted, per stream", labels=[*TASK, "stream"]
    )
    dropped = CounterMetricFamily(
        "stormish_dropped", "tuples dropped, per reason", labels=[*TASK, "reason"]
    )
    edge_dropped = CounterMetricFamily(
        "stormish_edge_dropped",
        "tuples an edge's policy let go before execute, per reason (stormish.edges)",
        labels=[*TASK, *EDGE, "reason"],
    )
    edge_late = CounterMetricFamily(
        "stormish_edge_deadline_missed",
        "tuples executed past their edge's deadline_ms",
        labels=[*TASK, *EDGE],
    )
    counters = {
        attr: CounterMetricFamily(f"stormish_{name}", doc, labels=TASK)
        for name, attr, doc in _COUNTERS
    }
    bp_seconds = CounterMetricFamily(
        "stormish_backpressure_seconds", "time the task could not publish", labels=TASK
    )
    gauges = {
        attr: GaugeMetricFamily(f"stormish_{name}", doc, labels=TASK) for name, attr, doc in _GAUGES
    }
    component_gauges = GaugeMetricFamily(
        "stormish_component_gauge",
        "what a component's gauges() reports (a Kafka spout's lag:TOPIC/PARTITION)",
        labels=[*TASK, "gauge"],
    )
    bp_status = GaugeMetricFamily(
        "stormish_backpressure_status",
        "1 while the task's senders wait for it (queue full, overflow, or announced)",
        labels=TASK,
    )
    execute = HistogramMetricFamily(
        "stormish_execute_latency_seconds", "time to execute a tuple", labels=TASK
    )
    process = HistogramMetricFamily(
        "stormish_process_latency_seconds",
        "time from a tuple's execute to its ack or fail (bolts; matched per batch)",
        labels=TASK,
    )
    complete = HistogramMetricFamily(
        "stormish_complete_latency_seconds",
        "time from a spout's emit to its tuple tree's completion",
        labels=TASK,
    )
    link_counters = {
        key: CounterMetricFamily(name, doc, labels=["topology", "worker"])
        for key, name, doc in [
            ("bytes_sent", "stormish_link_sent_bytes", "bytes sent to other workers"),
            ("bytes_received", "stormish_link_received_bytes", "bytes received from workers"),
            ("tuples_received", "stormish_link_received_tuples", "tuples received from workers"),
            ("status_sent", "stormish_link_backpressure_status_sent", "statuses broadcast"),
        ]
    }
    for sample in samples:
        s = sample.stats
        topo.add_metric([s.name], s.workers)
        uptime.add_metric([s.name], s.uptime_seconds)
        for w, n in sorted(sample.worker_restarts.items()):
            restarts.add_metric([s.name, str(w)], n)
        for t in s.tasks.values():
            labels = [s.name, t.component, str(t.task), str(t.worker)]
            for stream, n in sorted(t.emitted_by_stream.items()):
                emitted.add_metric([*labels, stream], n)
            for reason, n in sorted(t.dropped.items()):
                dropped.add_metric([*labels, reason], n)
            for e in t.edges.values():
                edge = [*labels, *_edge_labels(e)]
                for reason, n in _edge_losses(e):
                    edge_dropped.add_metric([*edge, reason], n)
                edge_late.add_metric(edge, e["deadline_missed"])
            for attr, fam in counters.items():
                fam.add_metric(labels, getattr(t, attr))
            bp_seconds.add_metric(labels, t.backpressure_seconds)
            for attr, g in gauges.items():
                g.add_metric(labels, getattr(t, attr))
            bp_status.add_metric(labels, 1 if congested(t) else 0)
            for name, v in sorted(t.gauges.items()):
                component_gauges.add_metric([*labels, name], v)
            if t.execute_histogram and t.kind != "spout":
                _histogram(
                    execute, labels, t.execute_histogram, EXECUTE_BUCKETS, t.execute_latency_ms
                )
            if t.process_histogram and t.kind == "bolt":
                _histogram(
                    process, labels, t.process_histogram, EXECUTE_BUCKETS, t.process_latency_ms
                )
            if t.complete_histogram:
                _histogram(
                    complete, labels, t.complete_histogram, COMPLETE_BUCKETS, t.complete_latency_ms
                )
        for link in s.links.values():
            for key, fam in link_counters.items():
                fam.add_metric([s.name, str(link["worker"])], link.get(key, 0))
    return [
        topo, uptime, restarts, emitted, dropped, edge_dropped, edge_late, *counters.values(),
        bp_seconds,
        *gauges.values(), component_gauges, bp_status, execute, process, complete,
        *link_counters.values(),
    ]  # fmt: skip


def _edge_labels(e: Mapping) -> tuple[str, str]:
    """An edge's source component and stream; from its "source:stream" key when the
    statistics carry no `source` (a worker started before they did: workers outlive a
    nimbus restart)."""
    if "source" in e:
        return e["source"], e["stream"]
    source, _, stream = e["edge"].rpartition(":")
    return source, stream


def _edge_losses(e: Mapping) -> list[tuple[str, int]]:
    """An edge's losses by reason, each tuple once: the statistics' `dropped` counts the
    `stale` ones too, here `dropped` is only what a full edge let go."""
    return [
        ("dropped", e["dropped"] - e["stale"]),
        ("stale", e["stale"]),
        ("overwritten", e["overwritten"]),
        ("rejected", e["rejected"]),
    ]


def _histogram(
    fam: HistogramMetricFamily,
    labels: list[str],
    counts: tuple[int, ...],
    bounds: tuple[float, ...],
    mean_ms: float,
) -> None:
    """A task's latency histogram: its per-bucket `counts`, and the sum in seconds from
    the statistics' mean over those counts."""
    fam.add_metric(labels, _buckets(counts, bounds), mean_ms / 1000.0 * sum(counts))


def _buckets(counts: tuple[int, ...], bounds: tuple[float, ...]) -> list[tuple[str, float]]:
    """Per-bucket counts as Prometheus's cumulative `le` buckets, +Inf last."""
    out: list[tuple[str, float]] = []
    total = 0
    for bound, n in zip((*map(repr, bounds), "+Inf"), counts, strict=True):
        total += n
        out.append((bound, total))
    return out


def registry(source: Callable[[], Iterable[TopologySample]], *more: Collector) -> CollectorRegistry:
    """A registry with nothing but stormish's collectors (no process metrics of the
    scraping thread's interpreter mixed in)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(StatisticsCollector(source))
    for c in more:
        reg.register(c)
    return reg
