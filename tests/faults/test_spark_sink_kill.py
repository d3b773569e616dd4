"""kill -9 of the worker holding a SparkSink (pyarrow writer, commit thread) while a
commit is in flight, on two worker processes, acking on, a replaying spout (ledger.py's
LedgerSpout: every failed or timed-out id comes back; a restarted spout emits only ids
not yet acked). After the worker restarts: every id is in the output exactly once, as a
reader of the directory sees it, and no staging file is where a reader looks."""

from __future__ import annotations

import os

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from stormish import LocalCluster, Topology  # noqa: E402
from stormish.testing import poll_for  # noqa: E402

from .ledger import LedgerSpout, read_spout_acks  # noqa: E402
from .spark_sink_parts import HookedSink  # noqa: E402

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

IDS = 20_000
BATCH = 500


def output_ids(out: str) -> list[int]:
    """Every id as a reader of the directory sees it (pyarrow's dataset: `_` and `.`
    names are not data)."""
    import pyarrow.dataset as ds

    if not os.path.isdir(out):  # the sink makes it when it starts
        return []
    d = ds.dataset(out, format="parquet")
    if not d.files:
        return []
    return sorted(d.to_table(columns=["id"]).column(0).to_pylist())


def topology(ledger: str, out: str, control: str, **sink: object) -> Topology:
    t = Topology(
        "sink-kill",
        config={"topology.message.timeout.secs": 4, "topology.max.spout.pending": 2_000},
    )
    t.set_spout("src", LedgerSpout(ledger, IDS))
    s = HookedSink(out, fields=["id"], key="id", batch_rows=BATCH, batch_seconds=0.5,
                   control=control, **sink)  # fmt: skip
    t.set_bolt("sink", s).shuffle_grouping("src")
    return t


def submitted_and_held(cluster: LocalCluster, t: Topology, control: str) -> tuple:
    """`t` submitted, its sink on the other worker than its spout, and the sink held in
    its commit (the `held` file): the run and where each component runs."""
    cluster.submit(t)
    running = cluster._get(t.name)
    place = {x.component: x.worker for x in cluster.statistics(t.name).tasks.values()}
    assert place["sink"] != place["src"], place
    poll_for(lambda: os.path.exists(os.path.join(control, "held")), 120, 0.05, "held")
    return running, place


@pytest.mark.parametrize("where", ["before", "after"])
def test_sink_worker_killed_while_a_commit_is_in_flight(tmp_path, where):
    ledger, out, control = (str(tmp_path / d) for d in ("ledger", "out", "control"))
    for d in (ledger, control):
        os.makedirs(d)
    open(os.path.join(control, f"hold-{where}-3"), "w").close()
    t = topology(ledger, out, control)
    with LocalCluster(workers=2) as cluster:
        running, place = submitted_and_held(cluster, t, control)
        handle = running.group.handles[place["sink"]]
        old = handle.pid
        handle.kill()
        with open(os.path.join(control, "held")) as f:
            held = f.read()
        published = held in os.listdir(out)
        at_kill = output_ids(out)
        running.restart_worker(place["sink"])
        assert running.group.handles[place["sink"]].pid != old
        stats = cluster.wait_complete(t.name, timeout=240)
        results = running.results()
    print(f"\n{where}: held {held} published={published}; {len(at_kill)} rows at the kill; "
          f"src {stats.components['src']}; sink {results['sink']}")  # fmt: skip
    assert published == (where == "after")
    assert stats.status == "complete"
    assert read_spout_acks(ledger) == set(range(IDS))
    ids = output_ids(out)
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} ids written twice"
    assert ids == list(range(IDS))


@pytest.mark.parametrize("where", ["before", "after"])
def test_sink_worker_killed_while_the_last_batch_of_a_finite_run_commits(tmp_path, where):
    """The whole input is one batch, cut by the 1 s clock once the spout has emitted
    everything and waits for its acks (the end-of-input tick comes from a caller of
    wait_complete, which this test is not yet); the worker dies in its commit. The
    restarted sink gets the replays and the run completes with every row once."""
    from stormish.testing import ListSpout

    n = 3_000
    out, control = str(tmp_path / "out"), str(tmp_path / "control")
    os.makedirs(control)
    open(os.path.join(control, f"hold-{where}-1"), "w").close()
    t = Topology(
        "last-kill",
        config={"topology.message.timeout.secs": 4, "topology.max.spout.pending": 2 * n},
    )
    t.set_spout("src", ListSpout([(i,) for i in range(n)], fields=("id",)))
    s = HookedSink(out, key="id", batch_rows=10 * n, batch_seconds=1, control=control)
    t.set_bolt("sink", s).shuffle_grouping("src")
    with LocalCluster(workers=2) as cluster:
        running, place = submitted_and_held(cluster, t, control)
        running.group.handles[place["sink"]].kill()
        at_kill = output_ids(out)
        running.restart_worker(place["sink"])
        stats = cluster.wait_complete(t.name, timeout=120)
        results = running.results()
    print(f"\n{where}: {len(at_kill)} rows at the kill; sink {results['sink']}")
    assert len(at_kill) == (n if where == "after" else 0)
    assert stats.status == "complete"
    assert stats.components["src"].acked == n
    assert output_ids(out) == list(range(n))
