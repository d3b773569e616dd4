"""The Spark connector's exact round trip, on the engine (LocalCluster, one worker): a 200,000-row
DataFrame -> SparkSpout -> a bolt that fails 10% of the tuples once -> SparkSink ->
reading the output back gives exactly the 200,000 rows: no duplicates, no loss.

Two ways to fail: before emitting (FailOnceBolt: the sink never sees the failed try, so
this checks replay and no loss) and after emitting anchored (the sink gets the row, then
the tree fails and the replay brings it again: without the sink's dedupe the output would
hold 220,000 rows)."""

from __future__ import annotations

import pytest

from stormish import Bolt, LocalCluster, Topology
from stormish.testing import FailOnceBolt

pytestmark = pytest.mark.spark

N = 200_000
FIELDS = ["id", "label", "score"]


def source(spark):
    return spark.range(0, N, numPartitions=4).selectExpr(
        "id", "concat('row-', id) AS label", "CAST(id % 1000 AS DOUBLE) / 8 AS score"
    )


def one_in_ten(values):
    return values[0] % 10 == 3


class EmitThenFailOnce(Bolt):
    """Emits each tuple on (anchored), then fails the input the first time this task sees
    a tuple satisfying `predicate`: the sink has the row, and gets it again on replay."""

    def __init__(self, predicate, outputs):
        self.predicate, self.outputs = predicate, list(outputs)

    def prepare(self, conf, context):
        self.seen = set()

    def execute(self, tup):
        self.emit(tup.values, anchors=[tup])
        key = tup.values[0]
        if key not in self.seen and self.predicate(tup.values):
            self.seen.add(key)
            self.fail(tup)
        else:
            self.ack(tup)


@pytest.mark.parametrize("flaky", [FailOnceBolt, EmitThenFailOnce])
def test_200k_rows_round_trip_exactly_once_with_10_percent_failed_once(
    spark, spark_conf, tmp_path, flaky
):
    from stormish.spark import ROW_ID, SparkSink, SparkSpout

    out = str(tmp_path / "out")
    t = Topology(
        "spark-roundtrip",
        config={"topology.max.spout.pending": 50, "topology.message.timeout.secs": 60},
    )
    t.set_spout("src", SparkSpout(source, fields=FIELDS, spark_conf=spark_conf))
    # fields grouping on the id: a replayed row reaches the task that failed it, so each
    # chosen row fails exactly once (the bolt remembers per task)
    t.set_bolt(
        "flaky", flaky(one_in_ten, outputs=[*FIELDS, ROW_ID]), parallelism=2
    ).fields_grouping("src", ["id"])
    t.set_bolt(
        "sink", SparkSink(out, batch_rows=10_000, batch_seconds=0.5), parallelism=2
    ).fields_grouping("flaky", [ROW_ID])
    with LocalCluster(workers=1) as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("spark-roundtrip", timeout=400)

    assert stats.status == "complete"
    src = stats.components["src"]
    assert src.acked == N
    assert src.failed >= N // 10  # every chosen row failed once (timeouts would add more)
    assert src.emitted == N + src.failed  # each failure replayed, nothing else
    if flaky is EmitThenFailOnce:
        assert stats.components["sink"].executed >= N + N // 10  # the sink got the copies

    df = spark.read.parquet(out)
    expected = source(spark)
    assert df.count() == N
    assert df.select("id").distinct().count() == N
    assert df.select(ROW_ID).distinct().count() == N
    written = df.select(*FIELDS)
    assert written.exceptAll(expected).count() == 0  # nothing that was not in the source
    assert expected.exceptAll(written).count() == 0  # nothing of the source missing


@pytest.mark.parametrize("path", ["arrow", "rows"])
def test_drained_rows_carry_the_same_ids_on_both_paths(spark, path):
    """The ids a restarted topology's spout gives its rows must not depend on the drain's
    path (Arrow, or the toLocalIterator fallback): the sink dedupes on them."""
    from stormish.spark import Drain
    from stormish.spark.spout import row_id

    df = spark.range(0, 1_000, numPartitions=3).selectExpr("id", "concat('r', id) AS label")
    with Drain(df, chunk_rows=37, path=path, ids=True) as d:
        assert d.path == path
        chunks = list(d)
    rows = [r for c in chunks for r in c.rows]
    assert sorted(r[0] for r in rows) == list(range(1_000))
    for c in chunks:
        assert [r[-1] for r in c.rows] == [
            row_id(c.partition, c.offset + i) for i in range(len(c.rows))
        ]
    # a range's partitions are contiguous: partition p, offset k holds id p * (n/3) + k
    starts = {c.partition: c.rows[0][0] for c in chunks if c.offset == 0}
    assert len(starts) == 3
    for c in chunks:
        for i, r in enumerate(c.rows):
            assert r[0] == starts[c.partition] + c.offset + i
