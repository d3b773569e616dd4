"""SparkCommitter (a Spark-session writer: json/orc/csv or a table) never writes a batch
twice: a committer that starts leaves alone a batch a live sibling is applying (it holds
the batch's lock), and one whose output is complete (a crash between the job and the
mark) is only marked, so a Structured Streaming reader does not see it again.

Real SparkSession at local[2] (`-m spark`, needs Java), small data."""

from __future__ import annotations

import os
import threading

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

np = pytest.importorskip("numpy")
pytest.importorskip("pyarrow")

FIELDS = ["v", "_row_id"]


# `spark`: the session-scoped SparkSession of tests/e2e/conftest.py


def _rows(n: int) -> tuple[list[tuple], np.ndarray]:
    return [(f"r{i}", i) for i in range(n)], np.arange(n, dtype=np.int64)


def _committer(spark, out: str, **kw):
    from stormish.spark.commit_spark import SparkCommitter

    return SparkCommitter(
        spark, path=out, fields=FIELDS, format="json", sink_id="sink", key_field="_row_id", **kw
    )


def test_a_committer_starting_leaves_a_live_writers_batch_alone(spark, tmp_path, monkeypatch):
    from stormish.spark.keys import batch_id

    out = str(tmp_path / "out")
    rows, keys = _rows(2_000)
    bid = batch_id(keys)
    a = _committer(spark, out)
    applying, go = threading.Event(), threading.Event()
    real_apply = a._apply

    def gated_apply(*args):
        applying.set()
        assert go.wait(120)
        real_apply(*args)

    monkeypatch.setattr(a, "_apply", gated_apply)
    result: list = []
    t = threading.Thread(target=lambda: result.append(a.commit(bid, rows, keys)))
    t.start()
    try:
        assert applying.wait(120), "the first committer never reached its Spark job"
        log = os.path.join(out, "_staging", f"part-sink-{bid:016x}.parquet")
        assert os.path.exists(log)
        b = _committer(spark, out)  # a sibling task's committer opens mid-commit
        assert b.recovered == 0, "a live writer's batch was applied by another committer"
        assert os.path.exists(log)
    finally:
        go.set()
        t.join(180)
    assert result == [True]
    assert b.commit(bid, rows, keys) is False  # marked by its writer: a sibling skips it
    got = spark.read.json(out)
    assert got.count() == got.select("_row_id").distinct().count() == 2_000
    assert not os.path.exists(os.path.join(out, "_stormish_tmp", f"{bid:016x}"))


def test_a_dead_writers_batch_is_recovered_once(spark, tmp_path, monkeypatch):
    """The writer died mid-job (its lock died with it): the next committer applies it."""
    from stormish.spark.keys import batch_id

    out = str(tmp_path / "out")
    rows, keys = _rows(300)
    a = _committer(spark, out)

    def die(*args):
        raise SystemExit("killed before the Spark job")

    monkeypatch.setattr(a, "_apply", die)
    with pytest.raises(SystemExit):
        a.commit(batch_id(keys), rows, keys)
    assert not [d for d in os.listdir(out) if d.startswith("stormish_batch=")]
    restarted = _committer(spark, out)
    assert restarted.recovered == 1 and restarted.ledger.contains(keys).all()
    got = spark.read.json(out)
    assert got.count() == got.select("_row_id").distinct().count() == 300


def test_recovery_marks_a_complete_batch_without_rewriting_it(spark, tmp_path, monkeypatch):
    """Crash after the job, before the mark: a streaming query that read the batch must
    not read it again after the restart."""
    from stormish.spark.keys import batch_id

    out, ck, sink = (str(tmp_path / d) for d in ("out", "ck", "stream-out"))
    rows, keys = _rows(100)
    a = _committer(spark, out)

    def crash(*args):
        raise SystemExit("killed after the job, before the mark")

    monkeypatch.setattr(a, "_mark_done", crash)
    with pytest.raises(SystemExit):
        a.commit(batch_id(keys), rows, keys)
    part = os.path.join(out, f"stormish_batch={batch_id(keys):016x}")
    before = sorted(os.listdir(part))

    def stream_once():
        q = (
            spark.readStream.schema("v STRING, _row_id BIGINT, stormish_batch STRING")
            .json(out)
            .writeStream.format("parquet")
            .option("checkpointLocation", ck)
            .option("path", sink)
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(120)

    stream_once()
    restarted = _committer(spark, out)
    assert restarted.recovered == 1 and restarted.ledger.contains(keys).all()
    assert sorted(os.listdir(part)) == before  # not rewritten
    stream_once()
    assert spark.read.json(out).count() == 100
    assert spark.read.parquet(sink).count() == 100
