"""SparkSink's commit thread on the engine (pyarrow writer, no JVM: the default suite): a
commit held up (a slow file system) must not stop the scheduler thread running the other
executors, and a finite run is not over while its last commit is pending, with acking on
or off."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from stormish import BasicBolt, LocalCluster, Topology  # noqa: E402
from stormish.spark.sink import SparkSink  # noqa: E402
from stormish.testing import ListSpout, poll_for  # noqa: E402

pytestmark = pytest.mark.timeout(90)

N = 4000
GATE = threading.Event()  # opened by the test: the held commits go on
ENTERED = threading.Event()  # a commit has reached the gate
COUNTED: list[int] = []  # what the other bolt executed (one worker: this process)
# the engine must not rescue the other executors by moving a blocked sink to a thread of
# its own (topology.scheduler.blocking.millis): the sink must not block in the first place
NO_RESCUE = {"topology.scheduler.blocking.millis": 0, "topology.executor.stuck.secs": 0}
# acking on: the spout may have every row in flight while the held commit acks none (what
# the test asks is whether the scheduler thread runs, not whether the spout waits)
PENDING = {"topology.max.spout.pending": 2 * N}


class GatedSink(SparkSink):
    """Each commit waits at GATE, as on a file system that stalls."""

    def _write(self, rows: list) -> None:
        ENTERED.set()
        assert GATE.wait(60), "the test never opened the gate"
        super()._write(rows)


class Count(BasicBolt):
    outputs: Any = []

    def execute(self, tup: Any) -> None:
        COUNTED.append(tup.values[0])


def rows(path: str) -> list[int]:
    files = [os.path.join(path, f) for f in os.listdir(path) if f.endswith(".parquet")]
    return sorted(v for f in files for v in pq.read_table(f).column("n").to_pylist())


def topology(name: str, out: str, acking: bool, batch_rows: int, secs: float) -> Topology:
    conf = {**NO_RESCUE, **PENDING, "topology.acker.executors": 1 if acking else 0}
    t = Topology(name, config=conf)
    t.set_spout("src", ListSpout([(i, f"v{i}") for i in range(N)], fields=("n", "v")))
    sink = GatedSink(out, batch_rows=batch_rows, batch_seconds=secs, key=None)
    t.set_bolt("sink", sink).shuffle_grouping("src")
    t.set_bolt("count", Count()).shuffle_grouping("src")
    return t


@pytest.fixture(autouse=True)
def reset():
    GATE.clear()
    ENTERED.clear()
    COUNTED.clear()
    yield
    GATE.set()  # a failed test's held commit lets go


@pytest.mark.parametrize("acking", [True, False], ids=["acking", "no-acking"])
def test_a_held_commit_does_not_stop_the_other_executors(tmp_path, acking):
    """Before the commit thread, the sink's commit ran on the scheduler thread: while it
    stalled, no spout or bolt of that thread ran (here: `count` never got its input)."""
    out = str(tmp_path / "out")
    t = topology("held-commit", out, acking, batch_rows=50, secs=10.0)
    with LocalCluster() as cluster:
        cluster.submit(t)
        assert ENTERED.wait(30)
        # the spout keeps emitting and `count` keeps executing while the commit is held
        poll_for(lambda: len(COUNTED) == N, timeout=30, what="count to execute all its input")
        assert rows(out) == []
        GATE.set()
        stats = cluster.wait_complete("held-commit", timeout=60)
    assert stats.status == "complete"
    assert rows(out) == list(range(N))
    if acking:
        assert stats.components["src"].acked == N


@pytest.mark.parametrize("acking", [True, False], ids=["acking", "no-acking"])
def test_a_finite_run_waits_for_its_last_commit(tmp_path, acking):
    """One batch (cut at the end of input, or by the 1 s clock while the spout waits for
    its acks), held: the run is not complete until it is committed (acking off:
    `holds_work`; on: the trees), and then every row is written."""
    out = str(tmp_path / "out")
    t = topology("last-commit", out, acking, batch_rows=10 * N, secs=1.0)
    with LocalCluster() as cluster:
        cluster.submit(t)
        assert ENTERED.wait(30)
        with pytest.raises(TimeoutError):
            cluster.wait_complete("last-commit", timeout=0.5)
        GATE.set()
        stats = cluster.wait_complete("last-commit", timeout=60)
        assert rows(out) == list(range(N))  # before the cluster's shutdown
    assert stats.status == "complete"


@pytest.mark.parametrize("ahead", [2, 0], ids=["commit-thread", "inline"])
def test_a_row_that_cannot_be_stored_is_dead_lettered_alone(tmp_path, ahead):
    """Two workers, acking on, `topology.max.replays` 3, one row of 20,000 whose value
    does not fit its column. Its batch failed whole, and its batch-mates came back with
    it on every replay: 1,008 rows dead-lettered, 1,007 of them good. Now the bad row
    fails alone, and is the only one given up."""
    n, bad = 20_000, 7_000
    out = str(tmp_path / "out")
    items = [(i, 2 * i if i != bad else "not a number") for i in range(n)]
    t = Topology("bad-row", config={"topology.max.replays": 3})
    t.set_spout("src", ListSpout(items, fields=("id", "v")))
    sink = SparkSink(out, key="id", batch_rows=1_000, batch_seconds=0.5, commits_ahead=ahead)
    t.set_bolt("sink", sink).shuffle_grouping("src")
    with LocalCluster(workers=2) as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("bad-row", timeout=60)
        (result,) = cluster._get("bad-row").results()["src"]
    assert stats.status == "complete"
    assert list(result["dead"]) == [bad]
    assert stats.components["src"].acked == n - 1
    files = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".parquet")]
    ids = sorted(v for f in files for v in pq.read_table(f).column("id").to_pylist())
    assert ids == [i for i in range(n) if i != bad]
