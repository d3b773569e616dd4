"""SparkSpout -> bolts -> SparkSink on the engine's LocalCluster, with tuple trees failed
after the sink committed them: the spout replays them, the sink must not write them
twice. (Runs on the embedded engine; the pieces are also tested without it.)"""

from __future__ import annotations

import pytest

from stormish import BasicBolt, LocalCluster, Topology
from stormish.testing import FailOnceBolt

pytestmark = pytest.mark.spark

N = 100_000


class Label(BasicBolt):
    outputs = ["id", "label", "_row_id"]

    def execute(self, tup):
        self.emit([tup["id"], tup["label"].upper(), tup["_row_id"]])


def every_seventh(values):
    return values[0] % 7 == 0


def test_topology_output_is_exactly_once_despite_replays(spark, spark_conf, tmp_path):
    from stormish.spark import SparkSink, SparkSpout

    out = str(tmp_path / "out")
    t = Topology("spark-e2e", config={"topology.max.spout.pending": 20})
    t.set_spout(
        "src",
        SparkSpout(
            lambda s: s.range(0, N, numPartitions=4).selectExpr(
                "id", "concat('row-', id) AS label"
            ),
            fields=["id", "label"],
            spark_conf=spark_conf,
        ),
    )
    t.set_bolt("label", Label(), parallelism=2).shuffle_grouping("src")
    t.set_bolt("sink", SparkSink(out, batch_rows=5_000, batch_seconds=0.5)).fields_grouping(
        "label", ["_row_id"]
    )
    # a second consumer fails each seventh tree once, whether or not the sink committed it
    t.set_bolt(
        "flaky", FailOnceBolt(every_seventh, outputs=["id", "label", "_row_id"])
    ).shuffle_grouping("label")
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("spark-e2e", timeout=240)
    assert stats.status == "complete"
    src = stats.components["src"]
    assert src.failed >= N // 7 and src.acked == N

    df = spark.read.parquet(out)
    assert df.count() == N
    assert df.select("id").distinct().count() == N
    assert df.where("label != upper(concat('row-', id))").count() == 0
