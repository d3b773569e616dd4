"""How a Drain gets a DataFrame's rows out of Spark: two paths, one shape.

Both hand out `(partition, rows)` pieces in partition order, a partition's rows in the
DataFrame's order, so that a row's (partition, offset) is the same on either path.

- `ArrowPartitions` ("arrow", the fast path): the DataFrame's Arrow batch RDD
  (`Dataset.toArrowBatchRdd`), one Spark job per partition through
  `PythonRDD.runJob`, the batches read off the local socket pyspark itself uses. Only
  the partitions asked for are computed, when asked: that is what gives the Drain its
  bound. It relies on pyspark internals (`DataFrame._jdf`, `pyspark.util.
  _load_from_socket`, `NoOpSerializer`, `to_arrow_schema`, the JVM methods above), so
  `arrow_unsupported` checks the version and each attribute first.
- `RowPartitions` ("rows", the fallback): `toLocalIterator(prefetchPartitions=True)`,
  public API, also on Spark Connect; ~4x slower. The partition id comes from a
  `spark_partition_id()` column the fallback adds and strips.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pyarrow as pa

PID_COLUMN = "__stormish_partition"
TESTED_MAJOR = 4  # pyspark 4.0-4.3 keep the internals below; 3.x and 5.x use the fallback


def arrow_unsupported(df: Any) -> str | None:
    """Why the Arrow path cannot drain `df`, or None when it can."""
    import pyspark

    major = pyspark.__version__.split(".", 1)[0]
    if major != str(TESTED_MAJOR):
        return f"pyspark {pyspark.__version__} is not {TESTED_MAJOR}.x"
    if getattr(df, "_jdf", None) is None:
        return f"{type(df).__module__}.{type(df).__name__} has no JVM DataFrame (Spark Connect?)"
    try:
        from pyspark.serializers import NoOpSerializer  # noqa: F401
        from pyspark.sql.pandas.types import to_arrow_schema  # noqa: F401
        from pyspark.util import _load_from_socket  # noqa: F401
    except ImportError as exc:
        return f"pyspark internals moved: {exc}"
    try:
        _arrow_schema(df)
    except Exception as exc:  # noqa: BLE001 - an unsupported type: the row path handles it
        return f"schema has no Arrow form: {exc}"
    return None


def _arrow_schema(df: Any) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    large = df.sparkSession.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")
    return to_arrow_schema(df.schema, timezone="UTC", prefers_large_types=large == "true")


class ArrowPartitions:
    """The fast path. Construct and call from one thread (py4j pins it to a JVM thread,
    which is what makes the job group of that thread cancellable)."""

    path = "arrow"

    def __init__(self, df: Any):
        self.sc = df.sparkSession.sparkContext
        self.schema = _arrow_schema(df)
        self.jrdd = df._jdf.toArrowBatchRdd().toJavaRDD()
        self.num_partitions = int(self.jrdd.getNumPartitions())

    def fetch(self, partition: int) -> list[pa.RecordBatch]:
        """Compute one partition; its Arrow batches, in order."""
        from pyspark.serializers import NoOpSerializer
        from pyspark.util import _load_from_socket

        sc = self.sc
        info = sc._jvm.PythonRDD.runJob(sc._jsc.sc(), self.jrdd, [partition])
        read, schema = pa.ipc.read_record_batch, self.schema
        with _load_from_socket(info, NoOpSerializer()) as frames:
            return [read(pa.py_buffer(f), schema) for f in frames]


class RowPartitions:
    """The fallback: rows as tuples, with their partition, in order."""

    path = "rows"

    def __init__(self, df: Any, share: tuple[int, int]):
        from pyspark.sql import functions as F

        index, count = share
        from pyspark.sql.types import TimestampType

        tagged = df.select("*", F.spark_partition_id().alias(PID_COLUMN))
        if count > 1:
            tagged = tagged.where(F.col(PID_COLUMN) % count == index)
        self.df = tagged
        self.instants = tuple(
            i for i, f in enumerate(df.schema.fields) if isinstance(f.dataType, TimestampType)
        )

    def rows(self) -> Generator[tuple[int, tuple], None, None]:
        """(partition, row values) in the DataFrame's order; instants as aware UTC
        datetimes, as the Arrow path gives them (rows.py)."""
        from .rows import utc_instants

        instants = self.instants
        for r in self.df.toLocalIterator(prefetchPartitions=True):
            values = tuple(r[:-1])
            yield r[-1], utc_instants(values, instants) if instants else values


def count_share(df: Any, share: tuple[int, int]) -> int:
    """Rows in the partitions `share` = (index, count) covers: p % count == index."""
    index, count = share
    if count == 1:
        return int(df.count())
    from pyspark.sql import functions as F

    return int(df.where(F.spark_partition_id() % count == index).count())


def cancel_hook(df: Any, group: str) -> tuple[Any, Any]:
    """(start, cancel): tag the calling thread's jobs with `group`, and cancel them from
    any thread. Classic sessions use job groups; Connect sessions use tags."""
    spark = df.sparkSession
    sc = getattr(spark, "_sc", None)
    if sc is not None and getattr(sc, "_jsc", None) is not None:
        return (
            lambda: sc.setJobGroup(group, "stormish drain", interruptOnCancel=True),
            lambda: sc.cancelJobGroup(group),
        )
    if hasattr(spark, "addTag") and hasattr(spark, "interruptTag"):
        return (lambda: spark.addTag(group), lambda: spark.interruptTag(group))
    return (lambda: None, lambda: None)
