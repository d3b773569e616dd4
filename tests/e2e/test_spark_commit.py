"""Committers against real Spark readers: exactly once across replays and restarts, read
by batch jobs and by Structured Streaming with a checkpoint."""

from __future__ import annotations

import os
import random

import pytest

pytestmark = pytest.mark.spark

FIELDS = ["id", "word", "score"]


def rows_of(ids):
    return [(i, f"w{i % 97}", i * 0.25) for i in ids]


def sink_batches(committer, ids, batch_rows, rng):
    """What SparkSink does with a buffer: drop committed keys, name the batch by its keys."""
    from stormish.spark.keys import batch_id, first_unique, row_keys

    ids = list(ids)
    rng.shuffle(ids)
    for lo in range(0, len(ids), batch_rows):
        rows = rows_of(ids[lo : lo + batch_rows])
        keys = row_keys(rows, 0)
        committer.refresh()
        keep = first_unique(keys) & ~committer.ledger.contains(keys)
        if keep.any():
            rows = [r for r, k in zip(rows, keep, strict=True) if k]
            committer.commit(batch_id(keys[keep]), rows, keys[keep])


def stream_once(spark, source, schema, checkpoint, out):
    """One availableNow run of a Structured Streaming copy from `source` to `out`."""
    q = (
        spark.readStream.schema(schema)
        .parquet(source)
        .writeStream.format("parquet")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(out)
    )
    q.awaitTermination(240)
    assert q.exception() is None


def test_structured_streaming_reads_each_row_once(spark, tmp_path):
    from stormish.spark.commit import ParquetCommitter

    src, out, ckpt = (str(tmp_path / d) for d in ("landing", "copy", "ckpt"))
    rng = random.Random(7)
    c = ParquetCommitter(src, FIELDS, sink_id="sink", key_field="id")
    sink_batches(c, range(0, 30_000), 4_000, rng)
    schema = spark.read.parquet(src).schema
    stream_once(spark, src, schema, ckpt, out)

    # acks lost: 0..30k replayed in other groupings, with 30k..50k new; then a restart
    sink_batches(c, range(0, 40_000), 3_000, rng)
    restarted = ParquetCommitter(src, FIELDS, sink_id="sink", key_field="id")
    sink_batches(restarted, range(20_000, 50_000), 5_000, rng)
    stream_once(spark, src, schema, ckpt, out)  # same checkpoint: only new files

    landed = spark.read.parquet(src)
    assert landed.count() == landed.select("id").distinct().count() == 50_000
    copied = spark.read.parquet(out)
    assert copied.count() == 50_000
    assert copied.select("id").distinct().count() == 50_000
    assert sorted(r[0] for r in copied.select("id").collect()) == list(range(50_000))


def test_streaming_query_running_while_batches_land(spark, tmp_path, poll):
    """A continuous (processingTime) query sees each committed batch whole, once."""
    from stormish.spark.commit import ParquetCommitter

    src, ckpt = str(tmp_path / "landing"), str(tmp_path / "ckpt")
    c = ParquetCommitter(src, FIELDS, sink_id="live", key_field="id")
    rng = random.Random(3)
    sink_batches(c, range(0, 1_000), 1_000, rng)
    schema = spark.read.parquet(src).schema
    q = (
        spark.readStream.schema(schema)
        .parquet(src)
        .groupBy()
        .count()
        .writeStream.outputMode("complete")
        .format("memory")
        .queryName("live_counts")
        .option("checkpointLocation", ckpt)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        for lo in range(1_000, 6_000, 1_000):
            sink_batches(c, range(lo - 500, lo + 1_000), 1_500, rng)  # half replayed

        def total():
            rows = spark.sql("SELECT * FROM live_counts").collect()
            return rows[0][0] if rows else 0

        assert poll(lambda: total() == 6_000, timeout=120)
        assert not poll(lambda: total() != 6_000, timeout=1.0)
    finally:
        q.stop()


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_spark_committer_path_exactly_once_across_replays_and_restart(spark, tmp_path, fmt):
    from stormish.spark.commit_spark import BATCH_COLUMN, SparkCommitter

    out = str(tmp_path / "out")
    c = SparkCommitter(spark, path=out, fields=FIELDS, format=fmt, sink_id="s", key_field="id")
    rng = random.Random(5)
    sink_batches(c, range(0, 3_000), 1_000, rng)
    sink_batches(c, range(0, 4_000), 1_500, rng)
    again = SparkCommitter(spark, path=out, fields=FIELDS, format=fmt, sink_id="s", key_field="id")
    assert again.batches == c.batches
    sink_batches(again, range(3_500, 5_000), 800, rng)
    df = spark.read.format(fmt).load(out)
    assert BATCH_COLUMN in df.columns
    assert df.count() == df.select("id").distinct().count() == 5_000


def test_spark_committer_recovers_a_batch_applied_but_not_marked(spark, tmp_path, monkeypatch):
    from stormish.spark.commit_spark import SparkCommitter
    from stormish.spark.keys import batch_id, row_keys

    out = str(tmp_path / "out")
    c = SparkCommitter(spark, path=out, fields=FIELDS, sink_id="s", key_field="id")
    rows = rows_of(range(100))
    keys = row_keys(rows, 0)

    def crash(*a):
        raise KeyboardInterrupt("killed between the job and the mark")

    monkeypatch.setattr(c, "_mark_done", crash)
    with pytest.raises(KeyboardInterrupt):
        c.commit(batch_id(keys), rows, keys)
    assert spark.read.parquet(out).count() == 100  # written, but not in the ledger
    assert os.listdir(os.path.join(out, "_commits")) == []

    restarted = SparkCommitter(spark, path=out, fields=FIELDS, sink_id="s", key_field="id")
    assert restarted.recovered == 1 and restarted.ledger.contains(keys).all()
    assert restarted.commit(batch_id(keys), rows, keys) is False
    assert spark.read.parquet(out).count() == 100
    assert os.listdir(os.path.join(out, "_staging")) == []


def test_spark_committer_table(spark, tmp_path):
    from stormish.spark.commit_spark import SparkCommitter

    state = str(tmp_path / "state")
    name = "stormish_sink_test"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    c = SparkCommitter(
        spark, table=name, state_dir=state, fields=FIELDS, sink_id="t", key_field="id"
    )
    rng = random.Random(11)
    sink_batches(c, range(0, 2_000), 700, rng)
    sink_batches(c, range(1_000, 3_000), 900, rng)
    table = spark.table(name)
    assert table.count() == table.select("id").distinct().count() == 3_000
    with pytest.raises(ValueError, match="needs state_dir"):
        SparkCommitter(spark, table=name, fields=FIELDS)
