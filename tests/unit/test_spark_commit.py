"""Unit tests of logic (pyarrow and the file system, no Spark, no engine): the Parquet
committer's exactly-once publish, its ledger across restarts, and its errors."""

from __future__ import annotations

import datetime as dt
import os

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
np = pytest.importorskip("numpy")

from stormish.spark.batch import (  # noqa: E402
    KEY_COLUMN,
    arrow_table,
    batch_name,
    clean_staging,
    parse_name,
    publish,
    write_staged,
)
from stormish.spark.commit import ParquetCommitter  # noqa: E402
from stormish.spark.errors import SparkSinkError  # noqa: E402
from stormish.spark.keys import batch_id, row_keys  # noqa: E402
from stormish.spark.rows import to_tuples  # noqa: E402


def rows_of(lo: int, hi: int) -> list[tuple]:
    return [(i, f"s{i}", i * 0.5) for i in range(lo, hi)]


def read_all(path) -> pa.Table:
    files = sorted(f for f in os.listdir(path) if f.endswith(".parquet"))
    return pa.concat_tables(pq.read_table(os.path.join(path, f)) for f in files)


def test_names_round_trip_and_reject_other_sinks():
    name = batch_name("my-sink.1", 0xABC)
    assert name == "part-my-sink.1-0000000000000abc.parquet"
    assert parse_name(name, "my-sink.1") == 0xABC
    assert parse_name(name, "my-sink") is None
    assert parse_name("part-x-123.parquet", "x") is None
    with pytest.raises(ValueError, match="batch id"):
        batch_name("s", -1)


def test_commit_publishes_once_and_skips_a_replayed_batch(tmp_path):
    c = ParquetCommitter(tmp_path, ["id", "s", "f"], sink_id="s1", key_field="id")
    rows = rows_of(0, 100)
    keys = row_keys(rows, 0)
    assert c.commit(batch_id(keys), rows, keys) is True
    assert c.commit(batch_id(keys), rows, keys) is False
    assert c.batches_skipped == 1
    t = read_all(tmp_path)
    assert t.num_rows == 100 and t.column_names == ["id", "s", "f"]  # id holds the keys
    assert os.listdir(tmp_path / "_staging") == []


def test_restart_rebuilds_ledger_and_schema_from_files(tmp_path):
    c = ParquetCommitter(tmp_path, ["id", "s", "f"], sink_id="s1", key_field="id")
    for lo in (0, 100, 200):
        rows = rows_of(lo, lo + 100)
        keys = row_keys(rows, 0)
        c.commit(batch_id(keys), rows, keys)
    again = ParquetCommitter(tmp_path, ["id", "s", "f"], sink_id="s1", key_field="id")
    assert again.batches == c.batches and len(again.ledger) == 300
    assert list(again.ledger.contains(np.array([0, 299, 300]))) == [True, True, False]
    assert again.schema.field("f").type == pa.float64()
    other = ParquetCommitter(tmp_path, ["id", "s", "f"], sink_id="s2", key_field="id")
    assert other.batches == set() and len(other.ledger) == 0


def test_non_int_keys_get_a_key_column(tmp_path):
    c = ParquetCommitter(tmp_path, ["word", "n"], sink_id="w")
    rows = [("a", 1), ("b", 2)]
    keys = row_keys(rows, None)
    c.commit(batch_id(keys), rows, keys)
    t = read_all(tmp_path)
    assert t.column_names == ["word", "n", KEY_COLUMN]
    assert list(ParquetCommitter(tmp_path, sink_id="w").ledger.contains(keys)) == [True, True]


def test_refresh_sees_batches_of_another_task(tmp_path):
    a = ParquetCommitter(tmp_path, ["id", "s", "f"], sink_id="s", key_field="id")
    b = ParquetCommitter(tmp_path, ["id", "s", "f"], sink_id="s", key_field="id")
    rows = rows_of(0, 10)
    keys = row_keys(rows, 0)
    a.commit(batch_id(keys), rows, keys)
    assert not b.ledger.contains(keys).any()
    assert b.refresh() == 1 and b.ledger.contains(keys).all()
    assert b.commit(batch_id(keys), rows, keys) is False  # same id: found on disk


def test_publish_never_replaces_an_existing_batch(tmp_path):
    final = str(tmp_path / "part-s-0000000000000001.parquet")
    t1 = write_staged(pa.table({"x": [1]}), str(tmp_path), "a", False)
    t2 = write_staged(pa.table({"x": [2]}), str(tmp_path), "a", False)
    assert publish(t1, final, False) is True
    assert publish(t2, final, False) is False
    assert pq.read_table(final).column("x").to_pylist() == [1]
    assert not os.path.exists(t1) and not os.path.exists(t2)


def test_stale_staging_files_are_removed_and_fresh_ones_kept(tmp_path):
    staging = tmp_path / "_staging"
    staging.mkdir()
    old = staging / ".part-s-00.1.aa.tmp"
    new = staging / ".part-s-00.2.bb.tmp"
    other = staging / ".part-t-00.1.aa.tmp"
    for f in (old, new, other):
        f.write_bytes(b"x")
    os.utime(old, (1, 1))
    os.utime(other, (1, 1))
    assert clean_staging(str(staging), "s") == 1
    assert sorted(p.name for p in staging.iterdir()) == sorted([other.name, new.name])


def test_schema_is_kept_and_later_batches_cast_to_it(tmp_path):
    c = ParquetCommitter(tmp_path, ["id", "v"], sink_id="s", key_field="id")
    c.commit(1, [(1, 1.5)], np.array([1]))
    c.commit(2, [(2, 3)], np.array([2]))  # an int in a double column: cast
    assert read_all(tmp_path).column("v").to_pylist() == [1.5, 3.0]
    with pytest.raises(SparkSinkError, match=r"field 'v' .* cannot be stored as double"):
        c.commit(3, [(3, "text")], np.array([3]))


def test_typed_batches_take_the_struct_pass_with_the_column_paths_result():
    rows = [(1, "a", 0.5, b"x"), (2, None, 3, b"y")]  # a None, an int in a double column
    fields = ["i", "s", "d", "b"]
    inferred = arrow_table(rows, fields, None, "out", "p")  # column by column
    typed = arrow_table(rows, fields, inferred.schema, "out", "p")  # the struct pass
    assert typed.equals(inferred) and typed.schema == inferred.schema
    assert typed.column("d").to_pylist() == [0.5, 3.0]
    schema = inferred.schema
    lists = arrow_table([list(r) for r in rows], fields, schema, "out", "p")  # redone by column
    assert lists.equals(inferred)
    with pytest.raises(SparkSinkError, match=r"component 'out': row 1 .* has 3 values"):
        arrow_table([rows[0], rows[1][:3]], fields, schema, "out", "p")
    with pytest.raises(SparkSinkError, match=r"field 'i' .* cannot be stored as int64"):
        arrow_table([rows[0], ("x", "b", 1.0, b"z")], fields, schema, "out", "p")
    with pytest.raises(TypeError):  # as by column: a None row is no null struct written
        arrow_table([rows[0], None], fields, schema, "out", "p")


def test_null_typed_field_takes_the_first_real_type(tmp_path):
    c = ParquetCommitter(tmp_path, ["id", "v"], sink_id="s", key_field="id")
    c.commit(1, [(1, None)], np.array([1]))
    c.commit(2, [(2, "x")], np.array([2]))
    assert c.schema.field("v").type == pa.string()


def test_bad_rows_and_paths_give_clear_errors(tmp_path):
    c = ParquetCommitter(tmp_path, ["a", "b"], component="out")
    with pytest.raises(SparkSinkError, match=r"component 'out': row 1 .* has 1 values"):
        c.commit(1, [(1, 2), (3,)])
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SparkSinkError, match=r"component 'out': cannot create sink path .*file"):
        ParquetCommitter(blocker / "out", ["a"], component="out")
    with pytest.raises(SparkSinkError, match="is not a directory"):
        ParquetCommitter(blocker, ["a"], component="out")
    with pytest.raises(ValueError, match="sink id"):
        ParquetCommitter(tmp_path, ["a"], sink_id="a/b")


def test_to_tuples_matches_pyspark_row_values():
    ts = pa.array([0, 1_500_000, None], pa.timestamp("us", tz="UTC"))
    b = pa.record_batch(
        {
            "i": [1, None, 3],
            "ts": ts,
            "m": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64())),
        }
    )
    rows = to_tuples(b)
    assert rows[0][0] == 1 and rows[1][0] is None
    utc = dt.UTC
    assert rows[1][1] == dt.datetime.fromtimestamp(1, utc).replace(microsecond=500_000)
    assert rows[1][1].tzinfo is not None and rows[2][1] is None
    assert rows[0][2] == {"k": 1} and rows[2][2] == {}
    assert to_tuples(b.slice(0, 0)) == []
