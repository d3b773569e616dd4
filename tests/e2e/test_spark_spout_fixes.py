"""SparkSpout -> SparkSink through a real SparkSession (local[2], `-m spark`, needs Java):
instants keep their type and value across a DST fall-back, a dotted column name drains,
and a spout without fields= neither ignores the topology's master nor keeps a JVM."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


# `spark`: the session-scoped SparkSession of tests/e2e/conftest.py


def _run(spark, name, spout, out):
    from stormish import LocalCluster, Topology
    from stormish.spark import SparkSink

    conf = {"stormish.spark.master": spark.sparkContext.master}
    t = Topology(name, config=conf)
    t.set_spout("src", spout)
    t.set_bolt("sink", SparkSink(out, batch_seconds=0.5)).shuffle_grouping("src")
    with LocalCluster() as c:
        c.submit(t)
        assert c.wait_complete(t.name, timeout=120).status == "complete"


@pytest.fixture
def new_york(monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# 05:30 and 06:30 UTC on 2024-11-03 are both 01:30 on a New York wall clock
TS_SQL = (
    "SELECT id, TIMESTAMP'2024-11-03 05:30:00 UTC' + make_interval(0,0,0,0,0,0,id*3600) AS ts "
    "FROM range(0, 2, 1, 1)"
)


@pytest.mark.parametrize("path", ["arrow", "rows"])
def test_timestamps_keep_type_and_instant(spark, tmp_path, new_york, path):
    from stormish.spark import SparkSpout

    out = str(tmp_path / "out")
    _run(
        spark,
        f"ts-{path}",
        SparkSpout(lambda s: s.sql(TS_SQL), fields=["id", "ts"], path=path),
        out,
    )
    got = spark.read.parquet(out)
    assert got.schema["ts"].dataType == spark.sql(TS_SQL).schema["ts"].dataType
    micros = sorted(r.us for r in got.selectExpr("unix_micros(ts) AS us").collect())
    want = sorted(r.us for r in spark.sql(TS_SQL).selectExpr("unix_micros(ts) AS us").collect())
    assert micros == want


def test_a_dotted_column_name_drains(spark, tmp_path):
    from stormish.spark import SparkSpout

    def source(s):
        return s.range(0, 10, 1, 1).selectExpr("id AS `user.id`", "'x' AS name")

    out = str(tmp_path / "out")
    _run(spark, "dotted", SparkSpout(source), out)  # fields learned from the source
    got = spark.read.parquet(out)
    assert sorted(r[0] for r in got.select("`user.id`").collect()) == list(range(10))


CHILD = r"""
import sys
from pyspark import SparkContext
from stormish import LocalCluster, Topology
from stormish.spark import SparkSink, SparkSpout
t = Topology("decl", config={"stormish.spark.master": "local[2]"})
t.set_spout("src", SparkSpout(lambda s: s.range(0, 100, numPartitions=2)))  # no fields=
assert SparkContext._gateway is None, "the declaration's JVM is still running"
t.set_bolt("sink", SparkSink(sys.argv[1], batch_seconds=0.5)).shuffle_grouping("src")
with LocalCluster() as c:
    c.submit(t)
    print("status", c.wait_complete("decl", timeout=120).status)
print("master", SparkContext._active_spark_context.master)
SparkContext._active_spark_context.stop()
"""


def test_a_spout_without_fields_uses_the_topologys_master(spark, tmp_path):
    """In a process of its own: the declaration must start (and end) its own session."""
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "status complete" in r.stdout and "master local[2]" in r.stdout, r.stdout
