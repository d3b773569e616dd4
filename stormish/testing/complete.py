"""complete_topology: run a topology on finite mock input and read what every component
emitted (Storm's complete-topology and read-tuples). Import it from `stormish.testing`.

The run uses a copy of the topology, so the user's object stays as written: the named
spouts are replaced by mock spouts that emit the given tuples once each, reliably (each
acked or failed, never replayed), and a system bolt `__capture` subscribes with global
grouping to every stream of every user component. Adding a subscriber adds one more
destination per emit and changes none of the existing ones, so the topology's own
groupings see what they would see without it. Tuples sent with `emit_direct` reach only
their direct target and are not captured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..component import Bolt, Spout
from ..errors import TopologyError
from ..local import LocalCluster
from ..topology import ComponentSpec, Subscription, Topology

CAPTURE = "__capture"

MockSource = Sequence[Sequence[Any]] | Mapping[str, Sequence[Sequence[Any]]]


class MockSpout(Spout):
    """Emits fixed rows per stream, each once with a msg id, and finishes. With
    parallelism n, task k emits rows k, k+n, k+2n, ... of each stream."""

    def __init__(self, rows: Mapping[str, Sequence[Sequence[Any]]], streams: Mapping[str, Any]):
        self.streams = {s: list(f) for s, f in streams.items()}
        self.rows = {s: [tuple(r) for r in rs] for s, rs in rows.items()}

    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        k, n = context.task_index, len(context.component_tasks)
        self.todo = [(s, i, r) for s, rs in self.rows.items() for i, r in enumerate(rs)][k::n]
        self.todo.reverse()

    def next_tuple(self) -> None:
        if not self.todo:
            self.finish()
            return
        stream, i, row = self.todo.pop()
        self.emit(row, stream=stream, msg_id=(stream, i))


class _Capture(Bolt):
    """Records (component, stream, values) of every tuple it gets, and acks it."""

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self.seen: list[tuple[str, str, list[Any]]] = []

    def execute(self, tup: Any) -> None:
        if tup.is_tick:
            return
        self.seen.append((tup.source_component, tup.stream, list(tup.values)))
        self.ack(tup)

    def result(self) -> list[tuple[str, str, list[Any]]]:
        return self.seen


@dataclass(frozen=True)
class CompletedTopology:
    """What `complete_topology` returns: `tuples[component][stream]` is every tuple the
    component emitted on that stream, as lists of values; `results` is each component's
    per-task `result()` (as `run_topology`'s); `stats` the final statistics."""

    tuples: dict[str, dict[str, list[list[Any]]]]
    results: dict[str, list[Any]]
    stats: Any
    components: tuple[str, ...]

    def read_tuples(self, component: str, stream: str = "default") -> list[list[Any]]:
        """Storm's read-tuples: what `component` emitted on `stream`, in the order the
        capture received it (each source task's tuples in emission order)."""
        if component not in self.components:
            raise KeyError(
                f"no component {component!r} in the topology; it has {list(self.components)}"
            )
        return [list(v) for v in self.tuples.get(component, {}).get(stream, [])]


def complete_topology(
    topology: Topology,
    mock_sources: Mapping[str, MockSource] | None = None,
    config: Mapping[str, Any] | None = None,
    workers: int | None = None,
    timeout: float = 60.0,
    cluster: LocalCluster | None = None,
) -> CompletedTopology:
    """Run a copy of `topology` until every spout finished and every tuple is processed,
    and return what each component emitted. `mock_sources` maps a spout to its rows (a
    list of value lists for its default stream, or {stream: rows}); every spout not
    mocked must finish by itself (a FeederSpout never does: use tracked_wait). Runs on
    `cluster` when given, else on a LocalCluster of `workers` workers (1: in this
    process; more: worker processes)."""
    run = instrumented(topology, mock_sources or {})
    if cluster is None:
        with LocalCluster(workers=workers) as own:
            return _run(own, run, config, timeout)
    extra = dict(config or {})
    if workers is not None:
        extra["topology.workers"] = workers
    return _run(cluster, run, extra, timeout)


def _run(
    cluster: LocalCluster, run: Topology, config: Mapping[str, Any] | None, timeout: float
) -> CompletedTopology:
    cluster.submit(run, config)
    stats = cluster.wait_complete(run.name, timeout=timeout)
    results = cluster._get(run.name).results()
    tuples: dict[str, dict[str, list[list[Any]]]] = {}
    for part in results.pop(CAPTURE, []):
        for component, stream, values in part:
            tuples.setdefault(component, {}).setdefault(stream, []).append(values)
    user = tuple(n for n in run.components if n != CAPTURE)
    return CompletedTopology(tuples, results, stats, user)


def instrumented(topology: Topology, mock_sources: Mapping[str, MockSource]) -> Topology:
    """A copy of `topology` with the mocked spouts swapped and the capture bolt added."""
    if not isinstance(topology, Topology):
        raise TopologyError(f"complete_topology needs a Topology, got {type(topology).__name__}")
    run = Topology(topology.name, topology.config)
    run.components = {
        n: replace(s, subscriptions=list(s.subscriptions), config=dict(s.config))
        for n, s in topology.components.items()
    }
    for name, source in mock_sources.items():
        spec = run.components.get(name)
        if spec is None or not spec.is_spout:
            spouts = sorted(n for n, s in run.components.items() if s.is_spout)
            raise TopologyError(
                f"mock_sources names {name!r}, which is not a spout; spouts: {spouts}"
            )
        spec.obj = MockSpout(_rows(name, spec.streams, source), spec.streams)
    capture = ComponentSpec(CAPTURE, _Capture(), 1, False)
    for spec in run.components.values():
        for stream in spec.streams:
            capture.subscriptions.append(Subscription(spec.name, stream, "global"))
    run.components[CAPTURE] = capture
    return run


def _rows(
    name: str, streams: Mapping[str, Sequence[str]], source: MockSource
) -> dict[str, list[Sequence[Any]]]:
    by_stream = dict(source) if isinstance(source, Mapping) else {"default": source}
    for stream, rows in by_stream.items():
        if stream not in streams:
            raise TopologyError(
                f"mock_sources for spout {name!r}: it declares no stream {stream!r}; its "
                f"streams are {sorted(streams)}"
            )
        for i, row in enumerate(rows):
            if isinstance(row, str | bytes) or len(row) != len(streams[stream]):
                raise TopologyError(
                    f"mock_sources for spout {name!r} stream {stream!r} row {i}: {row!r} "
                    f"does not match the fields {list(streams[stream])}"
                )
    return {s: list(rows) for s, rows in by_stream.items()}
