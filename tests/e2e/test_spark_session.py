"""The SparkSession stormish starts: private to this machine, quiet, small, reusable."""

from __future__ import annotations

import os
import sys

import pytest

pytestmark = pytest.mark.spark


def test_session_is_configured(spark):
    conf = spark.sparkContext.getConf()
    assert spark.sparkContext.master == "local[2]"
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.sparkContext.uiWebUrl is None
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    assert spark.conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert os.environ["PYSPARK_PYTHON"] and os.environ["PYSPARK_DRIVER_PYTHON"]


def test_python_workers_run_this_interpreter(spark):
    from pyspark.sql.functions import udf

    @udf("string")
    def exe(_):
        import sys as worker_sys

        return worker_sys.executable

    if os.environ["PYSPARK_PYTHON"] != sys.executable:
        pytest.skip("PYSPARK_PYTHON was set by the caller")
    assert spark.range(1).select(exe("id")).first()[0] == sys.executable


def test_the_jvm_listens_on_loopback_only(spark):
    psutil = pytest.importorskip("psutil")
    spark.range(10).count()  # block manager and shuffle service up
    jvms = [p for p in psutil.Process().children(recursive=True) if "java" in p.name()]
    assert jvms, "the Spark JVM is not a child of this process"
    listening = [
        c.laddr for j in jvms for c in j.net_connections("inet") if c.status == psutil.CONN_LISTEN
    ]
    assert listening
    assert all(a.ip in ("127.0.0.1", "::ffff:127.0.0.1") for a in listening), listening


def test_active_session_is_reused_and_another_master_refused(spark, spark_conf):
    from stormish.spark.session import session

    assert session(spark_conf) is spark
    with pytest.raises(RuntimeError, match=r"master 'local\[2\]' is already running"):
        session({**spark_conf, "stormish.spark.master": "local[1]"})


def test_reuse_applies_explicit_runtime_sql_conf(spark, spark_conf):
    from stormish.spark.session import session

    key = "spark.sql.autoBroadcastJoinThreshold"
    before = spark.conf.get(key)
    try:
        session({**spark_conf, f"stormish.spark.conf.{key}": "1234"})
        assert spark.conf.get(key) == "1234"
    finally:
        spark.conf.set(key, before)


def test_spark_connect_session(connect_url):
    from stormish.spark.session import session

    remote = session({"stormish.spark.master": connect_url})
    assert remote.range(5).count() == 5
