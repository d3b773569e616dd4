"""One commit of a SparkSink (pyarrow writer, commit thread) stalls for 12 s, as on a
file system that hangs, on the commit thread only, under a replaying spout (ledger.py),
two workers, acking on, a 5 s message timeout. Checked: no id is acked before it is
written (the spout's acks, read while the commit is held), the sink's hold reaches the
spout (backpressure: it waits, short of max.spout.pending), no more than
`commits_ahead` commits wait at any cut, the trees that timed out meanwhile are replayed
and the replays dropped by the ledger: every id is written once."""

from __future__ import annotations

import os

import pytest

pa = pytest.importorskip("pyarrow")

from stormish import LocalCluster, Topology  # noqa: E402
from stormish.testing import poll_for  # noqa: E402

from .ledger import LedgerSpout, read_spout_acks  # noqa: E402
from .spark_sink_parts import HookedSink  # noqa: E402
from .test_spark_sink_kill import output_ids  # noqa: E402

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

IDS = 100_000
STALL = 12


def test_a_stalled_commit_holds_the_spout_and_its_timeouts_are_deduplicated(tmp_path, watch):
    ledger, control = str(tmp_path / "ledger"), str(tmp_path / "control")
    out = str(tmp_path / "out")
    os.makedirs(ledger)
    os.makedirs(control)
    t = Topology(
        "stall",
        config={"topology.message.timeout.secs": 5, "topology.max.spout.pending": 20_000},
    )
    t.set_spout("src", LedgerSpout(ledger, IDS))
    s = HookedSink(out, fields=["id"], key="id", batch_rows=50, batch_seconds=0.5,
                   control=control, commits_ahead=2)  # fmt: skip
    t.set_bolt("sink", s).shuffle_grouping("src")
    with LocalCluster(workers=2) as cluster:
        cluster.submit(t)
        poll_for(lambda: len(output_ids(out)) >= 5_000, 60, 0.05, "5,000 ids written")
        watch.begin()
        with open(os.path.join(control, "stall.tmp"), "w") as f:
            f.write(str(STALL))
        os.rename(os.path.join(control, "stall.tmp"), os.path.join(control, "stall"))
        taken = os.path.join(control, "stall.taken")
        poll_for(lambda: os.path.exists(taken), 30, 0.01, "a commit stalled")
        written = len(output_ids(out))  # the one commit thread is held: it stays
        # held: the sink's receive queue fills and its backpressure stops the spout
        poll_for(
            lambda: cluster.statistics(t.name).components["src"].backpressure_seconds > 1,
            STALL, 0.1, "the spout held by the sink",
        )  # fmt: skip
        mid = cluster.statistics(t.name).components["src"]
        acked = read_spout_acks(ledger)  # before the output: an id acked is written first
        ids = output_ids(out)
        assert len(ids) == written
        assert acked <= set(ids), f"{len(acked - set(ids))} ids acked, not written"
        stats = cluster.wait_complete(t.name, timeout=240)
        (sink,) = cluster._get(t.name).results()["sink"]
    watch.freeze()
    src = stats.components["src"]
    watch.figures.update(
        in_flight_in_stall=mid.emitted - mid.acked - mid.failed, timed_out=src.timed_out, **sink
    )
    assert stats.status == "complete"
    assert src.timed_out > 0, "the stall outlasted no message timeout"
    assert sink["duplicates_dropped"] > 0
    assert sink["most_committing"] <= 2, sink
    assert read_spout_acks(ledger) == set(range(IDS))
    assert output_ids(out) == list(range(IDS))
