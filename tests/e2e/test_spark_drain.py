"""Drain against a real local Spark: exact, ordered, bounded, pausable, closable, on both
the Arrow path and the toLocalIterator fallback."""

from __future__ import annotations

import datetime as dt
import decimal
import threading
import time

import pytest

pytestmark = pytest.mark.spark

N = 200_000


def drain_all(d):
    parts: dict[int, list] = {}
    for ch in d:
        got = parts.setdefault(ch.partition, [])
        assert ch.offset == len(got), "chunks of a partition come in order, without gaps"
        assert 0 < len(ch.rows) <= d.chunk_rows
        got.extend(ch.rows)
    return parts


@pytest.mark.parametrize("path", ["arrow", "rows"])
def test_drains_every_row_exactly_once_in_partition_order(spark, path):
    from stormish.spark.drain import Drain

    df = spark.range(0, N, numPartitions=5).selectExpr("id", "cast(id * 2 as string) s")
    with Drain(df, chunk_rows=7_000, path=path) as d:
        parts = drain_all(d)
        assert d.path == path and d.exhausted
        assert d.progress() == (N, N)
    assert sorted(parts) == [0, 1, 2, 3, 4]
    ids = []
    for p in sorted(parts):
        rows = parts[p]
        assert [r[0] for r in rows] == list(range(rows[0][0], rows[0][0] + len(rows)))
        assert all(r[1] == str(r[0] * 2) for r in rows)
        ids.extend(r[0] for r in rows)
    assert ids == list(range(N))


def test_auto_takes_the_arrow_path(spark):
    from stormish.spark.drain import Drain

    d = Drain(spark.range(3))
    assert (d.path, d.fallback_reason) == ("arrow", None)
    d.close()


def test_both_paths_give_the_values_collect_gives(spark):
    from stormish.spark.drain import Drain

    df = spark.sql("""
        SELECT id, cast(id AS int) AS i, id * 1.5D AS d, cast(id AS decimal(10,2)) AS dec,
               cast(id AS string) AS s, id % 2 = 0 AS b,
               CASE WHEN id % 3 = 0 THEN NULL ELSE id END AS maybe,
               date_add(DATE'2024-02-28', cast(id AS int)) AS day,
               TIMESTAMP'2024-03-10 01:30:00' + make_interval(0, 0, 0, 0, cast(id AS int))
                   AS ts,
               array(id, id + 1) AS arr, map('k', id) AS m
        FROM range(0, 50, 1, 3)""")
    from stormish.spark.rows import utc_instants

    # collect()'s values, but instants as aware UTC datetimes (collect: naive local time)
    expected = [utc_instants(tuple(r), (8,)) for r in df.collect()]
    for path in ("arrow", "rows"):
        with Drain(df, chunk_rows=16, path=path) as d:
            got = [r for ch in d for r in ch.rows]
        assert got == expected, path
    row = expected[1]
    assert isinstance(row[3], decimal.Decimal) and isinstance(row[8], dt.datetime)


def test_pausing_holds_at_most_two_partitions_ahead(spark, poll):
    from stormish.spark.drain import Drain

    df = spark.range(0, 8_000, numPartitions=8)
    d = Drain(df, chunk_rows=500, ahead=2)
    try:
        first = d.next_chunk(timeout=60)
        assert first.partition == 0
        assert poll(lambda: d.fetched_partitions == 3)  # the one being read + two ahead
        assert not poll(lambda: d.fetched_partitions > 3, timeout=1.5)  # and no more
        rest = sum(len(ch.rows) for ch in d)
        assert len(first.rows) + rest == 8_000 and d.fetched_partitions == 8
    finally:
        d.close()


def test_nowait_never_blocks_and_eventually_delivers(spark, poll):
    from stormish.spark.drain import Drain
    from stormish.spark.errors import WouldBlock

    d = Drain(spark.range(0, 100, numPartitions=2), chunk_rows=1000)
    got, calls, slowest = [], 0, 0.0

    def pull():
        nonlocal calls, slowest
        calls += 1
        t = time.perf_counter()
        try:
            ch = d.next_chunk_nowait()
        except WouldBlock:
            return False
        finally:
            slowest = max(slowest, time.perf_counter() - t)
        if ch is None:
            return True
        got.extend(ch.rows)
        return False

    assert poll(pull, timeout=60, step=0.001)
    assert sorted(r[0] for r in got) == list(range(100))
    assert slowest < 0.5, f"a nowait call took {slowest:.3f}s"
    d.close()


def test_close_stops_a_running_job(spark, poll):
    from pyspark.sql.functions import udf

    from stormish.spark.drain import Drain

    @udf("long")
    def slow(x):
        import time as t

        t.sleep(120)
        return x

    df = spark.range(0, 2, numPartitions=2).select(slow("id").alias("x"))
    tracker = spark.sparkContext.statusTracker()
    d = Drain(df)
    d.start()
    assert poll(lambda: len(tracker.getActiveStageIds()) > 0, timeout=60)
    started = time.monotonic()
    d.close(timeout=60)
    assert time.monotonic() - started < 30
    assert not d._thread.is_alive()
    assert poll(lambda: tracker.getActiveStageIds() == [], timeout=60)
    assert d.next_chunk_nowait() is None


def test_fallback_when_internals_do_not_match(spark, monkeypatch):
    from stormish.spark import fetch
    from stormish.spark.drain import Drain
    from stormish.spark.errors import SparkSourceError

    monkeypatch.setattr(fetch, "TESTED_MAJOR", 99)
    df = spark.range(0, 1_000, numPartitions=3)
    d = Drain(df, chunk_rows=100)
    assert d.path == "rows" and "is not 99.x" in d.fallback_reason
    assert sorted(r[0] for ch in d for r in ch.rows) == list(range(1_000))
    with pytest.raises(SparkSourceError, match="Arrow drain unavailable"):
        Drain(df, path="arrow")


def test_fallback_when_the_arrow_rdd_is_missing(spark, monkeypatch):
    from stormish.spark import drain as drain_mod
    from stormish.spark.drain import Drain

    class Broken:
        def __init__(self, df):
            raise AttributeError("toArrowBatchRdd")

    monkeypatch.setattr(drain_mod, "ArrowPartitions", Broken)
    d = Drain(spark.range(0, 500, numPartitions=2), chunk_rows=100)
    assert sorted(r[0] for ch in d for r in ch.rows) == list(range(500))
    assert d.path == "rows" and "Arrow batch RDD unavailable" in d.fallback_reason


@pytest.mark.parametrize("path", ["arrow", "rows"])
def test_shares_split_partitions_and_count_is_known_up_front(spark, path):
    from stormish.spark.drain import Drain

    df = spark.range(0, 9_000, numPartitions=6)
    seen = []
    for i in range(3):
        with Drain(df, share=(i, 3), count=True, path=path) as d:
            d.start()
            parts = drain_all(d)
            assert set(parts) == {p for p in range(6) if p % 3 == i}
            assert d.total == 3_000
            seen.extend(r[0] for rows in parts.values() for r in rows)
    assert sorted(seen) == list(range(9_000))


def test_an_error_in_the_job_reaches_the_consumer(spark):
    from pyspark.sql.functions import udf

    from stormish.spark.drain import Drain
    from stormish.spark.errors import SparkSourceError

    @udf("long")
    def boom(x):
        raise ValueError("bad row")

    d = Drain(spark.range(3).select(boom("id")), component="src")
    with pytest.raises(SparkSourceError, match=r"component 'src': draining the DataFrame failed"):
        list(d)
    d.close()


def test_drain_thread_is_gone_after_exhaustion(spark, poll):
    from stormish.spark.drain import Drain

    before = threading.active_count()
    d = Drain(spark.range(10))
    assert len([r for ch in d for r in ch.rows]) == 10
    assert poll(lambda: not d._thread.is_alive(), timeout=10)
    assert threading.active_count() <= before + 1  # py4j may keep one callback thread
