"""Exactly-once batch commits written by a Spark job: for formats and tables pyarrow
does not write (orc, json, csv, a catalog table).

A Spark write is not atomic and can die between the job and any marker written after
it. So each batch goes through three steps, each of which can be repeated safely:

1. **log**: the batch (rows and keys) is written with pyarrow to
   `<state>/_staging/part-<sink>-<batch>.parquet` (atomic publish, see batch.py);
2. **apply**: one Spark job writes it into its own partition `stormish_batch=<batch
   hex>`: a path output writes (mode overwrite) exactly the directory
   `<path>/stormish_batch=<hex>`; a table output runs `INSERT OVERWRITE ... PARTITION
   (stormish_batch='<hex>')`. Applying a batch twice leaves one copy;
3. **mark**: the batch's keys go to `<state>/_commits/part-<sink>-<batch>.parquet`
   and the log entry is removed.

A writer holds the batch's lock (`lock.py`: flock, released by the kernel when its
holder dies) from before the log to after the mark. On start, a committer takes each
logged batch without a mark whose lock it can get (its writer is gone; a live sibling
task applying it holds the lock, and is left alone), and finishes it:

- when the batch's output is complete already (a crash between the job and the mark),
  it is only marked, never written again: a Structured Streaming query that read the
  first copy would read a rewrite as new files;
- otherwise it is applied from its log, less any rows whose keys other batches have
  committed since (the rows were failed and replayed), then marked.

Complete means: for a local path, the batch directory exists. The job writes under
`<path>/_stormish_tmp/` (ignored by Spark's readers, `_`-prefixed) and the directory is
renamed into place, so a reader never sees half a batch. For a URI path (`s3a://...`)
the job writes in place and complete means its `_SUCCESS` file exists (Hadoop's output
committer writes it last; with `mapreduce.fileoutputcommitter.marksuccessfuljobs`
off, a recovered batch is rewritten). For a table, the partition is in the catalog.

The ledger (batch ids and row keys) is the `_commits/` directory. Readers see the extra
partition column `stormish_batch`. Cost: one Spark job per batch (150-300 ms here).
"""

from __future__ import annotations

import glob
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .batch import (
    KEY_COLUMN,
    arrow_table,
    batch_name,
    check_sink_id,
    clean_staging,
    ensure_dir,
    key_holds_keys,
    merge_schema,
    parse_name,
    publish,
    with_keys,
    write_staged,
)
from .commit import conform
from .errors import SparkSinkError, short, where
from .keys import KeyLedger
from .lock import acquire, release
from .paths import is_uri, local_or_uri

BATCH_COLUMN = "stormish_batch"
TMP_DIR = "_stormish_tmp"


class SparkCommitter:
    """Commit batches through `spark` to `path` (with `format`) or to catalog `table`.

    `state_dir` holds the log and the ledger; it defaults to `path` (Spark ignores
    `_`-prefixed directories) and must be a local directory; a table needs one.
    """

    def __init__(
        self,
        spark: Any,
        path: str | os.PathLike | None = None,
        fields: Sequence[str] | None = None,
        format: str = "parquet",
        sink_id: str = "sink",
        key_field: str | None = None,
        schema: pa.Schema | None = None,
        table: str | None = None,
        state_dir: str | os.PathLike | None = None,
        options: Mapping[str, str] | None = None,
        component: str | None = None,
    ):
        w = where(component)
        if (path is None) == (table is None):
            raise ValueError(f"{w}give exactly one of path= or table=")
        self.path = None if path is None else local_or_uri(os.fspath(path))
        if state_dir is None and (table is not None or is_uri(self.path or "")):
            raise ValueError(f"{w}a table or URI output needs state_dir= (a local directory)")
        self.spark, self.format, self.table = spark, format, table
        self.fields = list(fields) if fields is not None else None
        self.sink_id = check_sink_id(sink_id, component)
        self.key_field, self.schema, self.component = key_field, schema, component
        self.options = dict(options or {})
        state = os.path.abspath(os.fspath(state_dir)) if state_dir is not None else self.path
        assert state is not None  # a table needs state_dir (above)
        if self.path is not None and not is_uri(self.path):
            ensure_dir(self.path, component)
        self.log_dir = os.path.join(state, "_staging")
        self.mark_dir = os.path.join(state, "_commits")
        ensure_dir(self.log_dir, component, "staging directory")
        ensure_dir(self.mark_dir, component, "commit ledger directory")
        clean_staging(self.log_dir, self.sink_id)
        clean_staging(self.mark_dir, self.sink_id)
        self.ledger = KeyLedger()
        self.batches: set[int] = set()
        self.rows_committed = 0
        self.batches_skipped = 0
        self.recovered = 0
        self._load_marks()
        self._recover()

    @property
    def target(self) -> str:
        return f"table {self.table!r}" if self.table else f"path {self.path!r}"

    def is_committed(self, batch_id: int) -> bool:
        return batch_id in self.batches or os.path.exists(self._mark(batch_id))

    def refresh(self) -> int:
        return self._load_marks()

    def _mark(self, batch_id: int) -> str:
        return os.path.join(self.mark_dir, batch_name(self.sink_id, batch_id))

    def _lock(self, batch_id: int) -> str:
        return os.path.join(self.log_dir, f"part-{self.sink_id}-{batch_id:016x}.lock")

    def commit(
        self,
        batch_id: int,
        rows: Sequence[Sequence[Any]] | pa.Table,
        keys: np.ndarray | None = None,
        fields: Sequence[str] | None = None,
    ) -> bool:
        """Log, apply and mark batch `batch_id` (`rows`, or a table of them as
        `batch.arrow_table` makes it); False when it was committed already."""
        if self.is_committed(batch_id):
            self.batches.add(batch_id)
            self.batches_skipped += 1
            return False
        names = list(fields) if fields is not None else self.fields
        if names is None:
            raise ValueError(f"{where(self.component)}no field names for the batch")
        table = (
            rows
            if isinstance(rows, pa.Table)
            else arrow_table(rows, names, self.schema, self.component, self.target)
        )
        table = conform(
            with_keys(table, keys, self.key_field), self.schema, self.component, self.target
        )
        lock = self._lock(batch_id)
        fd = acquire(lock, wait=True)  # a sibling applying this batch: wait for its mark
        assert fd is not None  # a waiting acquire returns only once it holds the lock
        try:
            if os.path.exists(self._mark(batch_id)):
                self.batches.add(batch_id)
                self.batches_skipped += 1
                return False
            self._log_apply_mark(batch_id, table)
        finally:
            release(lock, fd)
        self.schema = merge_schema(self.schema, table.schema)
        self.rows_committed += table.num_rows
        return True

    def _log_apply_mark(self, batch_id: int, table: pa.Table) -> None:
        name = batch_name(self.sink_id, batch_id)
        log = os.path.join(self.log_dir, name)
        try:
            publish(write_staged(table, self.log_dir, name, False), log, False)
        except OSError as exc:
            raise SparkSinkError(
                f"{where(self.component)}cannot log batch {name} in {self.log_dir!r}: {short(exc)}"
            ) from exc
        if not self._complete(batch_id):  # an earlier attempt's job may have finished
            self._apply(batch_id, table)
        self._mark_done(batch_id, table, log)

    # -- steps --------------------------------------------------------------------------------
    def _apply(self, batch_id: int, table: pa.Table) -> None:
        """Write the batch with one Spark job; call with the batch's lock held."""
        hexid = f"{batch_id:016x}"
        try:
            df = self.spark.createDataFrame(table)
            if self.table is None:
                writer = df.write.format(self.format).options(**self.options).mode("overwrite")
                self._apply_path(writer, hexid)
            else:
                self._apply_table(df, hexid)
        except Exception as exc:  # noqa: BLE001 - py4j and analysis errors alike
            raise SparkSinkError(
                f"{where(self.component)}Spark job writing batch {hexid} "
                f"to {self.target} failed: {short(exc)}"
            ) from exc

    def _final(self, hexid: str) -> str:
        assert self.path is not None  # one of path and table is given (__init__)
        return f"{self.path.rstrip('/')}/{BATCH_COLUMN}={hexid}"

    def _apply_path(self, writer: Any, hexid: str) -> None:
        """A local path: write aside, then rename into place (whole or absent)."""
        final = self._final(hexid)
        if self.path is None or is_uri(self.path):
            writer.save(final)
            return
        staging = os.path.join(self.path, TMP_DIR)
        os.makedirs(staging, exist_ok=True)
        for old in glob.glob(os.path.join(staging, f"{hexid}.*")):  # a dead writer's
            shutil.rmtree(old, ignore_errors=True)
        tmp = os.path.join(staging, f"{hexid}.{uuid.uuid4().hex[:8]}")
        writer.save(tmp)
        os.rename(tmp, final)

    def _complete(self, batch_id: int) -> bool:
        """Whether the batch's output is all there (see the module docstring)."""
        hexid = f"{batch_id:016x}"
        try:
            if self.table is not None:
                return self._has_partition(hexid)
            final = self._final(hexid)
            if not is_uri(final):
                return os.path.isdir(final)
            return self._hadoop_exists(f"{final}/_SUCCESS")
        except Exception:  # noqa: BLE001 - cannot tell: apply again (overwrite, one copy)
            return False

    def _has_partition(self, hexid: str) -> bool:
        assert self.table is not None
        if not self.spark.catalog.tableExists(self.table):
            return False
        rows = self.spark.sql(
            f"SHOW PARTITIONS {_quote(self.table)} PARTITION ({BATCH_COLUMN}='{hexid}')"
        ).collect()
        return len(rows) > 0

    def _hadoop_exists(self, uri: str) -> bool:
        jvm = self.spark._jvm  # a classic session; Connect has none: AttributeError
        p = jvm.org.apache.hadoop.fs.Path(uri)
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()
        return bool(p.getFileSystem(conf).exists(p))

    def _apply_table(self, df: Any, hexid: str) -> None:
        from pyspark.sql import functions as F

        assert self.table is not None  # one of path and table is given (__init__)
        if not self.spark.catalog.tableExists(self.table):
            try:
                (
                    df.withColumn(BATCH_COLUMN, F.lit(hexid))
                    .write.format(self.format)
                    .options(**self.options)
                    .partitionBy(BATCH_COLUMN)
                    .saveAsTable(self.table)
                )
                return
            except Exception:  # noqa: BLE001 - another task created it first: insert below
                if not self.spark.catalog.tableExists(self.table):
                    raise
        view = f"_stormish_{uuid.uuid4().hex}"
        df.createOrReplaceTempView(view)
        try:
            cols = ", ".join(f"`{c}`" for c in df.columns)
            self.spark.sql(
                f"INSERT OVERWRITE TABLE {_quote(self.table)} "
                f"PARTITION ({BATCH_COLUMN}='{hexid}') SELECT {cols} FROM `{view}`"
            )
        finally:
            self.spark.catalog.dropTempView(view)

    def _mark_done(self, batch_id: int, table: pa.Table, log: str) -> None:
        name = batch_name(self.sink_id, batch_id)
        keys = _keys_of(table, self.key_field)
        mark = pa.table({KEY_COLUMN: keys if keys is not None else pa.array([], pa.int64())})
        try:
            publish(
                write_staged(mark, self.mark_dir, name, False),
                os.path.join(self.mark_dir, name),
                False,
            )
            os.unlink(log)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SparkSinkError(
                f"{where(self.component)}cannot mark batch {name} in "
                f"{self.mark_dir!r}: {short(exc)}"
            ) from exc
        self.batches.add(batch_id)
        if keys is not None:
            self.ledger.add(keys.to_numpy(zero_copy_only=False))

    def _load_marks(self) -> int:
        new = 0
        for name in sorted(os.listdir(self.mark_dir)):
            bid = parse_name(name, self.sink_id)
            if bid is None or bid in self.batches:
                continue
            keys = pq.read_table(os.path.join(self.mark_dir, name), columns=[KEY_COLUMN])
            self.ledger.add(keys.column(0).to_numpy())
            self.batches.add(bid)
            new += 1
        return new

    def _recover(self) -> None:
        """Finish every logged batch without a mark whose writer is gone (a crash
        mid-commit); a batch whose lock is held belongs to a live writer."""
        for name in sorted(os.listdir(self.log_dir)):
            bid = parse_name(name, self.sink_id)
            if bid is None:
                continue
            lock = self._lock(bid)
            fd = acquire(lock, wait=False)
            if fd is None:
                continue
            try:
                self._recover_one(bid, os.path.join(self.log_dir, name))
            finally:
                release(lock, fd)

    def _recover_one(self, bid: int, log: str) -> None:
        if os.path.exists(self._mark(bid)) or bid in self.batches:
            self._load_marks()
            _unlink(log)
            return
        try:
            table = pq.read_table(log)
        except FileNotFoundError:  # its writer marked it while we looked
            self._load_marks()
            return
        if self.schema is None:
            self.schema = table.schema
        if not self._complete(bid):
            keys = _keys_of(table, self.key_field)
            if keys is not None:  # rows failed, replayed and committed by other batches
                table = table.filter(
                    pa.array(~self.ledger.contains(keys.to_numpy(zero_copy_only=False)))
                )
            if table.num_rows:
                self._apply(bid, table)
        self._mark_done(bid, table, log)
        self.recovered += 1


def _keys_of(table: pa.Table, key_field: str | None) -> pa.Array | None:
    if KEY_COLUMN in table.column_names:
        return table.column(KEY_COLUMN).combine_chunks()
    if key_holds_keys(table, key_field):
        assert key_field is not None
        return table.column(key_field).combine_chunks()
    return None


def _quote(identifier: str) -> str:
    return ".".join(f"`{part.strip('`')}`" for part in identifier.split("."))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
