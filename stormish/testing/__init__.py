"""Test helpers, public API: Storm's test kit in Python.

    out = run_topology(topology)          # -> RunResult(captured={name: [...]}, stats=...)
    res = complete_topology(topology, mock_sources={"words": [["nathan"], ["bob"]]})
    res.read_tuples("count")              # every tuple "count" emitted (default stream)

    with FeederSpout(["word"]) as feeder, LocalCluster() as cluster:
        ...                               # a topology with set_spout("words", feeder)
        feeder.feed(["nathan"], msg_id=1)
        tracked_wait(cluster, "wc", 1)    # fed, emitted and fully processed
        assert feeder.is_acked(1)

    with LocalCluster(clock=FakeClock()) as cluster:   # simulated time, one worker
        advance_time(cluster, 11)         # ticks, timeouts and context.clock.sleep run

- `ListSpout`, `CaptureBolt`, `FailOnceBolt`, `run_topology`, `poll_for`: finite runs.
- `LoseStatuses`: a link status filter (`topology.link.status.filter`) for fault tests.
- `complete_topology`, `CompletedTopology`, `MockSpout`: Storm's complete-topology,
  mock sources and read-tuples (testing/complete.py).
- `FeederSpout`: fed while the topology runs, with an ack/fail tracker by message id
  (testing/feeder.py).
- `MemoryLog`: an in-memory partitioned log with Kafka's consumer-group contract, that a
  `stormish.kafka.KafkaSpout` reads as `memory://NAME` (testing/memory_log.py).
- `tracked_wait`, `advance_time`, `FakeClock`: waiting without sleeps, in real or
  simulated time (testing/tracked.py, clock.py).
- `MemoryJetStream`: an in-memory NATS JetStream (streams, durable pull consumers,
  ack/nak/term/in_progress, ack_wait, max_deliver) for JetStreamSpout/JetStreamSink
  tests with no server (testing/jetstream.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..clock import FakeClock
from ..component import BasicBolt, Bolt, Spout
from ..local import LocalCluster, poll_for
from ..topology import Topology
from .complete import CompletedTopology, MockSpout, complete_topology
from .feeder import FeederSpout
from .jetstream import MemoryJetStream
from .memory_log import MemoryConsumer, MemoryLog
from .tracked import advance_time, tracked_wait

__all__ = [
    "CaptureBolt",
    "CompletedTopology",
    "FailOnceBolt",
    "LoseStatuses",
    "FakeClock",
    "FeederSpout",
    "MemoryConsumer",
    "MemoryLog",
    "ListSpout",
    "MemoryJetStream",
    "MockSpout",
    "RunResult",
    "advance_time",
    "complete_topology",
    "poll_for",
    "run_topology",
    "tracked_wait",
]


class ListSpout(Spout):
    """Emits `items` (each a sequence of values) once each, reliably (msg id = index),
    replays what fails, and finishes when every item is acked.

    `fail_first`: indices whose first ack is taken as a failure, so the replay path runs
    without a failing bolt. `acked`/`failed`/`emits` record what the spout saw."""

    def __init__(
        self,
        items: Iterable[Sequence[Any]],
        fields: Sequence[str] = ("value",),
        fail_first: Iterable[int] = (),
        per_call: int = 16,
        stream: str = "default",
    ):
        self.items = [tuple(i) for i in items]
        self.outputs = list(fields) if stream == "default" else None
        if stream != "default":
            self.streams = {stream: list(fields)}
        self.fail_first = set(fail_first)
        self.per_call = per_call
        self.stream = stream

    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        self.todo = list(range(len(self.items)))[::-1]
        self.unacked: set[int] = set()
        self.acked: dict[int, int] = {}
        self.failed: dict[int, int] = {}
        self.emits = 0
        self._failed_once: set[int] = set()
        self.dead: dict[int, dict[str, Any]] = {}  # dead-lettered: msg id -> Failure

    def next_tuple(self) -> None:
        for _ in range(self.per_call):
            if not self.todo:
                if not self.unacked:
                    self.finish()
                else:
                    self.finish_input()  # windows downstream may close: only replays left
                return
            i = self.todo.pop()
            self.unacked.add(i)
            self.emits += 1
            self.emit(self.items[i], stream=self.stream, msg_id=i)

    def ack(self, msg_id: int) -> None:
        if msg_id in self.fail_first and msg_id not in self._failed_once:
            self._failed_once.add(msg_id)
            self.fail(msg_id)
            return
        self.acked[msg_id] = self.acked.get(msg_id, 0) + 1
        self.unacked.discard(msg_id)

    def fail(self, msg_id: int, failure: Any = None) -> None:
        """Replays what fails, except a dead-lettered item (`topology.max.replays`)."""
        self.failed[msg_id] = self.failed.get(msg_id, 0) + 1
        self.unacked.discard(msg_id)
        if failure is not None and failure.dead_letter:
            self.dead[msg_id] = failure.as_dict()
            return
        self.todo.append(msg_id)

    def progress(self) -> tuple[int, int]:
        """Items done (acked, or given up as dead letters) of all it has to emit: the
        live status line's bar (`stormish run`) and the statistics' progress."""
        return len(getattr(self, "acked", ())) + len(getattr(self, "dead", ())), len(self.items)

    def result(self) -> dict[str, Any]:
        return {
            "acked": dict(self.acked),
            "failed": dict(self.failed),
            "dead": dict(self.dead),
            "emits": self.emits,
        }


class CaptureBolt(Bolt):
    """Captures the values of every tuple it receives (and acks it). `result()` is what
    `run_topology` returns for it."""

    def __init__(self, outputs: Sequence[str] | None = None):
        self.outputs = outputs

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self.captured: list[tuple[Any, ...]] = []

    def execute(self, tup: Any) -> None:
        if tup.is_tick:
            return
        self.captured.append(tuple(tup.values))
        if self.outputs is not None:
            self.emit(tup.values, anchors=[tup])
        self.ack(tup)

    def result(self) -> list[tuple[Any, ...]]:
        return list(self.captured)


class FailOnceBolt(BasicBolt):
    """Passes tuples through, raising (so failing the tree) the first time this task
    sees a tuple whose values satisfy `predicate`."""

    def __init__(self, predicate: Any, outputs: Sequence[str] = ("value",)):
        self.predicate = predicate
        self.outputs = list(outputs)

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self.seen: set[Any] = set()

    def execute(self, tup: Any) -> None:
        key = tuple(tup.values)
        if key not in self.seen and self.predicate(tup.values):
            self.seen.add(key)
            raise RuntimeError(f"injected failure for {key!r}")
        self.emit(tup.values)


class LoseStatuses:
    """A link status filter for fault tests (`topology.link.status.filter`): withholds
    the first `n` backpressure statuses a worker would send (-1: every one)."""

    def __init__(self, n: int):
        self.n = n
        self.lost = 0

    def __call__(self, status: Any) -> bool:
        if self.n < 0 or self.lost < self.n:
            self.lost += 1
            return True
        return False


@dataclass(frozen=True)
class RunResult:
    captured: dict[str, list[Any]]
    results: dict[str, list[Any]]
    stats: Any


def run_topology(
    topology: Topology,
    config: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
    workers: int | None = None,
) -> RunResult:
    """Run a finite topology to completion on a LocalCluster. `captured` maps each
    CaptureBolt component to everything its tasks captured (task order); `results` maps
    every component whose objects define `result()` to the per-task results."""
    with LocalCluster(workers=workers, config=config) as cluster:
        cluster.submit(topology)
        stats = cluster.wait_complete(topology.name, timeout=timeout)
        results = cluster._get(topology.name).results()
    captured = {
        name: [row for part in parts for row in part]
        for name, parts in results.items()
        if isinstance(topology.components[name].obj, CaptureBolt)
    }
    return RunResult(captured=captured, results=results, stats=stats)
