"""Arrow record batches to Python row tuples, with the values `DataFrame.collect()` gives.

Measured here (2M rows of long, string, double; bench/spark_bench.py): converting column
by column (`Array.to_pylist`) and zipping the columns into tuples costs ~0.23 us a row;
`RecordBatch.to_pylist()` (a dict per row) and then tuples costs ~0.65 us a row. Columns
it is, and numbers without nulls go through numpy (`to_numpy().tolist()`, ~15% faster
than `to_pylist` with pyarrow 26).

Values follow pyspark's `Row` conversion where they differ from Arrow's, maps become
dicts, except for instants: a timestamp with a time zone (Spark's TimestampType) becomes
an aware datetime in UTC, where `collect()` gives a naive one in this process's local
time. A naive local time loses the instant (at a DST fall-back two instants read the
same) and a sink would store it as TIMESTAMP_NTZ; an aware one goes back to Spark as
the same TIMESTAMP. Timestamps without a zone (TIMESTAMP_NTZ) stay naive. Structs come
out as dicts (collect gives Rows) and binary as bytes (collect gives bytearray).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import pyarrow as pa

_fromtimestamp = _dt.datetime.fromtimestamp
_UTC = _dt.UTC


def to_tuples(batch: pa.RecordBatch, first_id: int | None = None) -> list[tuple]:
    """The rows of `batch` as a list of tuples (one tuple per row, in order). With
    `first_id`, each tuple ends with one more value: first_id, first_id + 1, ... (zipped
    in with the columns: ~0.05 us a row, where rebuilding each tuple costs ~0.2 us)."""
    n = batch.num_rows
    if n == 0:
        return []
    columns: list[Any] = [_column(col) for col in batch.columns]
    if first_id is not None:
        columns.append(range(first_id, first_id + n))
    if not columns:
        return [()] * n
    return list(zip(*columns, strict=True))


def _column(col: pa.Array) -> list[Any]:
    t = col.type
    if _via_numpy(t, col.null_count):
        # numbers without nulls: Arrow -> numpy -> list, ~12 ns a value against ~14 for
        # to_pylist (pyarrow 26, idle machine; strings: numpy 29 ns, to_pylist 27)
        return col.to_numpy(zero_copy_only=False).tolist()  # type: ignore[no-any-return, unused-ignore]  # Any without pyarrow installed
    if pa.types.is_timestamp(t) and t.tz is not None:
        return _utc_aware(col)
    if pa.types.is_map(t) or _has_map(t):
        return col.to_pylist(maps_as_pydicts="lossy")
    return col.to_pylist()


def _via_numpy(t: pa.DataType, nulls: int) -> bool:
    """Whether numpy's `tolist` gives what `to_pylist` does, faster: ints, doubles and
    bools without nulls (numpy would make a null NaN or a float)."""
    if nulls:
        return False
    return (
        pa.types.is_integer(t)
        or pa.types.is_float64(t)
        or pa.types.is_float32(t)
        or pa.types.is_boolean(t)
    )


def _has_map(t: pa.DataType) -> bool:
    if pa.types.is_map(t):
        return True
    return any(_has_map(t.field(i).type) for i in range(t.num_fields))


def _utc_aware(col: pa.Array) -> list[Any]:
    """Aware UTC datetimes from the microseconds since the epoch that the array holds,
    whatever its unit."""
    micros = col.cast(pa.timestamp("us", tz=col.type.tz)).cast(pa.int64()).to_pylist()
    return [
        None
        if us is None
        else _fromtimestamp(us // 1_000_000, _UTC).replace(microsecond=us % 1_000_000)
        for us in micros
    ]


def utc_instants(row: tuple, indexes: tuple[int, ...]) -> tuple:
    """`row` (from pyspark's Row conversion, the row path) with the naive local
    datetimes at `indexes` made aware UTC ones, as the Arrow path gives them
    (`datetime.fromtimestamp` set their `fold`, so a DST fall-back hour converts right)."""
    values = list(row)
    for i in indexes:
        v = values[i]
        if v is not None and v.tzinfo is None:
            values[i] = v.astimezone(_UTC)
    return tuple(values)
