"""The sink's worker killed mid-run (2 workers) -> still exactly once.

A 150,000-row DataFrame -> SparkSpout -> a bolt -> SparkSink, on two worker processes,
acking on, a short message timeout. The plan puts the spout (and the bolt) on one worker
and the sink on the other. Once the sink has committed some batches but not all, the
sink's worker is SIGKILLed: what the sink buffered, the tuples in that worker's queues
and the trees its acker tracked are lost. The worker is started again where it listened;
the spout's trees time out and are replayed; the restarted sink rebuilds its ledger from
the committed files, drops the rows already there and commits exactly the rest.

Two moments for the kill:
- `anytime`: as soon as a first batch is committed, wherever the sink is then (its
  buffer is lost; committed rows are rarely replayed: their acks had left already);
- `commit-not-acked`: the sink's first incarnation stops after its second commit, before
  acking that batch, and is killed there (the crash exactly-once is about): every row of
  that batch is replayed, and the restarted sink must drop them all as duplicates.

Checked: the files committed before the kill are untouched, the restarted sink committed
exactly N minus what was committed at the kill, and Spark reads back exactly the N rows
(the source's, transformed by the bolt): no duplicates, no loss.
"""

from __future__ import annotations

import os
import threading

import pytest

from stormish import BasicBolt, LocalCluster, Topology
from stormish.testing import poll_for

pytestmark = [pytest.mark.spark, pytest.mark.timeout(400)]

N = 150_000
BATCH = 5_000
FIELDS = ["id", "label", "score"]


def source(spark):
    return spark.range(0, N, numPartitions=4).selectExpr(
        "id", "concat('row-', id) AS label", "CAST(id % 1000 AS DOUBLE) / 8 AS score"
    )


def expected(spark):
    return source(spark).selectExpr("id", "upper(label) AS label", "score * 2 AS score")


class Enrich(BasicBolt):
    """Transforms two fields and passes the spout's row id on (the sink's key)."""

    def __init__(self, outputs):
        self.outputs = list(outputs)

    def execute(self, tup):
        i, label, score, row = tup.values
        self.emit([i, label.upper(), score * 2, row])


HOLD_AFTER = 2  # commit-not-acked: the batch whose acks are held
HOLD_SECONDS = 120.0  # far longer than the test waits for the kill


def _sink_class():
    from stormish.spark import SparkSink

    class ReportingSink(SparkSink):
        """SparkSink whose task reports, at the end, what this incarnation committed and
        in which process. With `hold` (a marker path), the first incarnation stops right
        after its HOLD_AFTER-th commit, before acking it, and says so by creating the
        marker; an incarnation that finds the marker never stops."""

        def __init__(self, *args, hold=None, **kwargs):
            super().__init__(*args, **kwargs)
            self.hold = hold

        def prepare(self, conf, context):
            super().prepare(conf, context)
            self._will_hold = self.hold is not None and not os.path.exists(self.hold)

        def _write(self, rows):
            before = self.rows_committed
            super()._write(rows)  # committed; flush() acks once this returns
            if self._will_hold and self.batches_committed == HOLD_AFTER:
                self._will_hold = False
                with open(self.hold + ".tmp", "w") as f:
                    f.write(str(self.rows_committed - before))  # the held batch's rows
                os.rename(self.hold + ".tmp", self.hold)
                threading.Event().wait(HOLD_SECONDS)  # killed while waiting

        def result(self):
            return {**self.statistics(), "pid": os.getpid()}

    return ReportingSink


def committed(path: str) -> dict[str, int]:
    """The published batch files under `path` and their row counts (a batch file appears
    whole, by an atomic link, and never changes)."""
    import pyarrow.parquet as pq

    try:
        names = [f for f in os.listdir(path) if f.startswith("part-") and f.endswith(".parquet")]
    except FileNotFoundError:
        return {}
    return {f: pq.ParquetFile(os.path.join(path, f)).metadata.num_rows for f in names}


@pytest.mark.parametrize("moment", ["anytime", "commit-not-acked"])
def test_sink_worker_sigkilled_mid_run_and_restarted_output_is_exactly_once(
    spark, spark_conf, tmp_path, moment
):
    from stormish.spark import ROW_ID, SparkSpout

    out = str(tmp_path / "out")
    hold = str(tmp_path / "held") if moment == "commit-not-acked" else None
    t = Topology(
        "spark-kill",
        config={
            "topology.max.spout.pending": 20,  # trees of up to 1,000 rows
            # lost trees are replayed 6-9 s after they were emitted
            "topology.message.timeout.secs": 6,
            **spark_conf,
        },
    )
    t.set_spout("src", SparkSpout(source, fields=FIELDS, spark_conf=spark_conf))
    t.set_bolt("enrich", Enrich([*FIELDS, ROW_ID])).shuffle_grouping("src")
    sink = _sink_class()(out, batch_rows=BATCH, batch_seconds=0.5, hold=hold)
    t.set_bolt("sink", sink).fields_grouping("enrich", [ROW_ID])

    with LocalCluster(workers=2) as cluster:
        cluster.submit(t)
        running = cluster._get(t.name)
        tasks = list(cluster.statistics(t.name).tasks.values())
        where = {x.component: x.worker for x in tasks}
        sink_worker, src_worker = where["sink"], where["src"]
        # round-robin over sorted component names: __acker (w0, w1), enrich w0, sink w1,
        # src w0. Killing the spout's worker would lose its pending rows: another scenario.
        assert sink_worker != src_worker, f"the plan put the spout with the sink: {where}"
        old_pid = running.group.handles[sink_worker].pid

        if hold is None:
            poll_for(
                lambda: sum(committed(out).values()) >= BATCH,
                timeout=180,
                what="the sink's first committed batch",
            )
        else:
            poll_for(
                lambda: os.path.exists(hold),
                timeout=180,
                what=f"the sink holding the acks of its batch {HOLD_AFTER}",
            )
        running.group.handles[sink_worker].kill()
        at_kill = committed(out)  # the sink is dead: nothing more is committed until restart
        rows_at_kill = sum(at_kill.values())
        assert BATCH <= rows_at_kill < N, f"not killed mid-run: {rows_at_kill} rows committed"

        running.restart_worker(sink_worker)
        assert running.group.handles[sink_worker].pid != old_pid
        stats = cluster.wait_complete(t.name, timeout=300)
        results = running.results()

    src = stats.components["src"]
    print(
        f"\nkilled worker {sink_worker} with {rows_at_kill} rows in {len(at_kill)} batches "
        f"committed; spout: emitted {src.emitted}, timed out {src.timed_out}; restarted sink: "
        f"{results['sink']}"
    )
    assert stats.status == "complete"
    assert src.acked == N
    # the kill lost trees (the sink's buffer, the dead acker's trees): they timed out and
    # the spout replayed them
    assert src.timed_out >= 1, f"nothing was lost by the kill: {src}"
    assert src.emitted >= N + src.timed_out
    assert stats.links[f"worker-{src_worker}"]["peer_reconnects"] >= 1

    # what was committed before the kill is still there, unchanged; the restarted sink
    # (a new process) committed exactly the rest and nothing twice
    final = committed(out)
    assert {f: final[f] for f in at_kill} == at_kill
    (restarted,) = results["sink"]
    assert restarted["pid"] != old_pid
    assert restarted["failed_batches"] == 0
    assert restarted["buffered"] == 0
    assert restarted["rows_committed"] == N - rows_at_kill
    assert sum(final.values()) == N
    if hold is not None:
        # the held batch was never acked: all of it came back and was dropped
        assert len(at_kill) == HOLD_AFTER
        with open(hold) as f:
            held = int(f.read())
        assert held >= BATCH
        assert restarted["duplicates_dropped"] >= held

    df = spark.read.parquet(out)
    assert df.count() == N
    assert df.select("id").distinct().count() == N
    assert df.select(ROW_ID).distinct().count() == N
    written = df.select(*FIELDS)
    want = expected(spark)
    assert written.exceptAll(want).count() == 0  # nothing that was not in the source
    assert want.exceptAll(written).count() == 0  # nothing of the source missing
