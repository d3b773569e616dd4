"""Issue 4: the sink's worker killed mid-run (2 worker processes) -> still exactly once.

SparkSpout on one worker process, SparkSink on the other. Once the sink has committed
some batches but not all, its worker is SIGKILLed (what it buffered, and the tuples in
its queues, are lost; its acker's trees time out) and started again where it listened.
The spout replays every tree that did not complete; the restarted sink rebuilds its
ledger from the committed files and skips what is already there. Reading the output back
gives exactly the N rows."""

from __future__ import annotations

import os

import pytest

from stormish import BasicBolt, LocalCluster, Topology
from stormish.testing import poll_for

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

N = 100_000


def source(spark):
    return spark.range(0, N, numPartitions=4).selectExpr("id", "concat('row-', id) AS label")


class Upper(BasicBolt):
    def __init__(self, fields):
        self.outputs = list(fields)

    def execute(self, tup):
        v = tup.values
        self.emit([v[0], v[1].upper(), *v[2:]])


def committed(path):
    try:
        return [f for f in os.listdir(path) if f.endswith(".parquet")]
    except FileNotFoundError:
        return []


def test_sink_worker_killed_and_restarted_keeps_exactly_once(spark, spark_conf, tmp_path):
    from stormish.spark import ROW_ID, SparkSink, SparkSpout

    out = str(tmp_path / "out")
    t = Topology(
        "spark-sink-restart",
        config={
            "topology.max.spout.pending": 20_000,
            "topology.message.timeout.secs": 8,
            **spark_conf,
        },
    )
    t.set_spout("src", SparkSpout(source, fields=["id", "label"], spark_conf=spark_conf))
    t.set_bolt("upper", Upper(["id", "label", ROW_ID])).shuffle_grouping("src")
    t.set_bolt("sink", SparkSink(out, batch_rows=5_000, batch_seconds=0.5)).fields_grouping(
        "upper", [ROW_ID]
    )
    with LocalCluster(workers=2) as cluster:
        cluster.submit(t)
        running = cluster._get(t.name)
        tasks = cluster.statistics(t.name).tasks.values()
        sink_worker = next(x.worker for x in tasks if x.component == "sink")
        src_worker = next(x.worker for x in tasks if x.component == "src")
        assert sink_worker != src_worker  # the spout's state must survive the kill

        poll_for(lambda: committed(out), timeout=120, what="a first committed batch")
        before = cluster.statistics(t.name).components["src"].acked
        assert before < N  # killed mid-run, not after
        running.group.handles[sink_worker].kill()
        running.restart_worker(sink_worker)
        stats = cluster.wait_complete(t.name, timeout=240)

    assert stats.status == "complete"
    assert stats.components["src"].acked == N
    assert stats.links[f"worker-{src_worker}"]["peer_reconnects"] >= 1
    df = spark.read.parquet(out)
    assert df.count() == N
    assert df.select("id").distinct().count() == N
    assert df.where("label != upper(concat('row-', id))").count() == 0
