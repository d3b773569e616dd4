"""SparkSink's pyarrow writer (no JVM: the default suite) fed the values a SparkSpout
emits: null keys, file: URIs, column types fixed by a first batch, bad arguments."""

from __future__ import annotations

import decimal
import os

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from stormish.spark.sink import SparkSink  # noqa: E402
from stormish.spark.spout import ROW_ID, row_id  # noqa: E402
from stormish.tuple import Source, Tuple  # noqa: E402

pytestmark = pytest.mark.timeout(60)


class Ctx:
    component_id = "out"


def make(path, fields, **kw):
    kw.setdefault("commits_ahead", 0)  # settled at once (the thread: test_spark_sink.py)
    s = SparkSink(str(path), **kw)
    rec: dict = {"acked": [], "failed": [], "errors": []}
    s.ack = lambda t: rec["acked"].append(t.values)
    s.fail = lambda t: rec["failed"].append(t.values)
    s.report_error = lambda e: rec["errors"].append(e)
    s.prepare({}, Ctx())
    return s, rec, Source("spout", 1, "default", tuple(fields))


def files(path):
    return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".parquet"))


def read(path):
    return pa.concat_tables(pq.read_table(f) for f in files(path)).sort_by(ROW_ID)


@pytest.mark.parametrize("key_type", ["int", "str"])
def test_rows_with_null_keys_are_all_written_once(tmp_path, key_type):
    s, rec, src = make(tmp_path, ("id", "v"), batch_rows=4, key="id")
    k3 = 3 if key_type == "int" else "3"
    rows = [(None, "a"), (None, "b"), (k3, "c"), (None, "d")]
    for r in rows:
        s.execute(Tuple(r, src))
    assert rec["errors"] == [] and len(rec["acked"]) == 4
    for r in rows:  # every row replayed: nothing new
        s.execute(Tuple(r, src))
    s.flush()
    again, rec2, _ = make(tmp_path, ("id", "v"), batch_rows=4, key="id")  # a restart
    for r in rows:
        again.execute(Tuple(r, src))
    again.flush()
    assert rec2["errors"] == [] and again.rows_committed == 0
    got = sorted(pq.read_table(str(tmp_path), columns=["v"]).column("v").to_pylist())
    assert got == ["a", "b", "c", "d"], (got, s.statistics())


def test_file_uri_is_a_local_path(tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    target = tmp_path / "out"
    s, rec, src = make(f"file://{target}", ("w", ROW_ID), batch_rows=1)
    assert s.writer == "arrow"
    s.execute(Tuple(("a", row_id(0, 0)), src))
    assert rec["errors"] == [] and rec["acked"] == [("a", row_id(0, 0))]
    assert not os.listdir(cwd), "batch written under the current directory"
    assert len(files(target)) == 1


def test_other_uris_go_to_spark_and_need_a_state_dir(tmp_path):
    with pytest.raises(ValueError, match="state_dir"):
        SparkSink("s3a://bucket/out")
    s = SparkSink("s3a://bucket/out", state_dir=str(tmp_path))
    assert s.writer == "spark" and s.path == "s3a://bucket/out"


def test_decimals_are_stored_at_precision_38(tmp_path):
    s, rec, src = make(tmp_path, ("amount", ROW_ID), batch_rows=1)
    s.execute(Tuple((decimal.Decimal("1.50"), row_id(0, 0)), src))
    s.execute(Tuple((decimal.Decimal("100.00"), row_id(0, 1)), src))
    assert rec["failed"] == [], [str(e) for e in rec["errors"]]
    assert read(tmp_path).column("amount").to_pylist() == [
        decimal.Decimal("1.50"),
        decimal.Decimal("100.00"),
    ]


def test_dicts_of_one_value_type_are_maps_and_keep_later_keys(tmp_path):
    s, rec, src = make(tmp_path, ("m", ROW_ID), batch_rows=1)
    s.execute(Tuple(({"k": 1}, row_id(0, 0)), src))
    s.execute(Tuple(({"j": 2}, row_id(0, 1)), src))
    assert rec["errors"] == [] and len(rec["acked"]) == 2
    got = read(tmp_path).column("m").to_pylist()
    assert [dict(m) for m in got] == [{"k": 1}, {"j": 2}], got


def test_all_null_first_batch_is_stored_as_string(tmp_path):
    s, rec, src = make(tmp_path, ("n", ROW_ID), batch_rows=1)
    s.execute(Tuple((None, row_id(0, 0)), src))
    s.execute(Tuple(("x", row_id(0, 1)), src))
    s.execute(Tuple((7, row_id(0, 2)), src))  # cast to the column's string
    assert rec["errors"] == []
    types = {str(pq.read_schema(f).field("n").type) for f in files(tmp_path)}
    assert types == {"string"}
    assert read(tmp_path).column("n").to_pylist() == [None, "x", "7"]


def test_a_pyspark_row_struct_can_be_stored(tmp_path):
    Row = pytest.importorskip("pyspark.sql").Row
    s, rec, src = make(tmp_path, ("s", ROW_ID), batch_rows=1)
    s.execute(Tuple((Row(a=1, b="x"), row_id(0, 0)), src))
    s.execute(Tuple((Row(a=2, b="y"), row_id(0, 1)), src))
    assert rec["errors"] == [], str(rec["errors"][0])
    assert read(tmp_path).column("s").to_pylist() == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]


def test_a_pyspark_struct_type_is_a_schema(tmp_path):
    types = pytest.importorskip("pyspark.sql.types")
    st = types.StructType(
        [types.StructField("w", types.StringType()), types.StructField(ROW_ID, types.LongType())]
    )
    s, rec, src = make(tmp_path, ("w", ROW_ID), batch_rows=1, schema=st)
    s.execute(Tuple(("a", row_id(0, 0)), src))
    assert rec["errors"] == [], str(rec["errors"][0])
    with pytest.raises(TypeError, match="schema"):
        SparkSink(str(tmp_path), schema="w STRING")


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"sink_id": "a/b"}, "sink_id"),
        ({"format": "parquett"}, "parquet"),
        ({"format": ""}, "format"),
    ],
)
def test_bad_sink_arguments_fail_at_construction(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        SparkSink(str(tmp_path), **kw)


def test_a_py4j_errors_java_cause_is_kept():
    from stormish.spark.errors import short

    class Py4JJavaError(Exception):
        pass

    exc = Py4JJavaError(
        "An error occurred while calling o54.save.\n: org.apache.spark.SparkClassNotFound"
        "Exception: [DATA_SOURCE_NOT_FOUND] Failed to find the data source: parquett.\n\tat x"
    )
    assert "Failed to find the data source: parquett" in short(exc)


@pytest.mark.parametrize("master", ["lokal[2]", "local[two]", "spark:/x"])
def test_a_bad_master_names_the_key(master):
    from stormish.spark.session import spark_options

    with pytest.raises(ValueError, match="stormish.spark.master"):
        spark_options({"stormish.spark.master": master})
    for good in ("local", "local[2]", "local[*]", "local[2,3]", "spark://h:7077", "sc://h:1"):
        assert spark_options({"stormish.spark.master": good})[0] == good
