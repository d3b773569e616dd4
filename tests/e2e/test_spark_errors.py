"""Bad input gives errors that name the component and the path, table or column."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


def test_a_source_that_is_not_a_dataframe(spark, spark_conf, task_context):
    from stormish.spark import SparkSourceError, SparkSpout

    spout = SparkSpout(lambda s: [1, 2, 3], fields=["x"], spark_conf=spark_conf)
    with pytest.raises(
        SparkSourceError,
        match=r"component 'numbers': the DataFrame from source function .*<lambda> "
        r"must be a pyspark DataFrame, got builtins.list",
    ):
        spout.open({}, task_context("numbers"))


def test_drain_refuses_what_is_not_a_dataframe(spark):
    from stormish.spark import Drain, SparkSourceError

    pdf = spark.range(3).toPandas()
    with pytest.raises(SparkSourceError, match="must be a pyspark DataFrame, got pandas"):
        Drain(pdf, component="c")


def test_a_path_that_does_not_exist(spark, spark_conf, task_context, tmp_path):
    from stormish.spark import SparkSourceError, SparkSpout

    missing = tmp_path / "nowhere.parquet"
    spout = SparkSpout(missing, spark_conf=spark_conf)
    with pytest.raises(
        SparkSourceError, match=r"component 'in': source path .*nowhere.parquet.* does not exist"
    ):
        spout.open({}, task_context("in"))


def test_a_remote_path_that_does_not_exist_is_reported_by_spark(
    spark, spark_conf, task_context, tmp_path
):
    from stormish.spark import SparkSourceError, SparkSpout

    spout = SparkSpout(f"file://{tmp_path}/gone/*.json", format="json", spark_conf=spark_conf)
    with pytest.raises(
        SparkSourceError,
        match=r"component 'in': cannot read source path "
        r".*gone.*PATH_NOT_FOUND",
    ):
        spout.open({}, task_context("in"))


def test_a_file_in_the_wrong_format(spark, spark_conf, task_context, tmp_path):
    from stormish.spark import SparkSourceError, SparkSpout

    bad = tmp_path / "text.parquet"
    bad.write_text("this is not parquet\n")
    spout = SparkSpout(bad, spark_conf=spark_conf)
    with pytest.raises(SparkSourceError, match=r"component 'in': cannot read source path"):
        spout.open({}, task_context("in"))


def test_a_table_that_does_not_exist(spark, spark_conf, task_context):
    from stormish.spark import SparkSourceError, SparkSpout

    spout = SparkSpout("no_such_table", spark_conf=spark_conf)
    with pytest.raises(
        SparkSourceError, match=r"component 'in': cannot read source table 'no_such_table'"
    ):
        spout.open({}, task_context("in"))


def test_fields_that_the_source_lacks(spark, spark_conf, task_context):
    from stormish.spark import SparkSourceError, SparkSpout

    spout = SparkSpout(lambda s: s.range(3), fields=["id", "name"], spark_conf=spark_conf)
    with pytest.raises(
        SparkSourceError,
        match=r"has no column\(s\) \['name'\]; its columns "
        r"are \['id'\]",
    ):
        spout.open({}, task_context("in"))


def test_fields_are_learned_from_the_source_when_not_given(spark, spark_conf):
    from stormish.spark import ROW_ID, SparkSpout

    spout = SparkSpout(
        lambda s: s.range(3).selectExpr("id", "id * 2 AS twice"), spark_conf=spark_conf
    )
    assert spout.declared_streams() == {"default": ("id", "twice", ROW_ID)}


def test_an_unwritable_output_path(spark, spark_conf, task_context, tmp_path):
    from stormish.spark import SparkCommitter, SparkSink, SparkSinkError

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(
        SparkSinkError,
        match=r"component 'out': cannot create sink path "
        r".*a-file/out.*Not a directory",
    ):
        SparkSink(blocker / "out").prepare({}, task_context("out"))
    with pytest.raises(
        SparkSinkError,
        match=r"component 'out': sink path .*a-file.* exists "
        r"and is not a directory",
    ):
        SparkCommitter(spark, path=blocker, fields=["a"], component="out")


def test_a_spark_job_that_cannot_write_is_a_clear_error(spark, tmp_path):
    from stormish.spark import SparkCommitter, SparkSinkError

    name = "stormish_unpartitioned"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.range(1).write.saveAsTable(name)
    c = SparkCommitter(spark, table=name, state_dir=tmp_path, fields=["id"], component="out")
    with pytest.raises(
        SparkSinkError,
        match=r"component 'out': Spark job writing batch "
        r"[0-9a-f]{16} to table 'stormish_unpartitioned' "
        r"failed",
    ):
        c.commit(1, [(5,)])
