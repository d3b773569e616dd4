"""Exactly-once batch commits into a directory of Parquet files, with no JVM.

Each batch is written with pyarrow to a hidden file under `<path>/_staging/`, then
published into `<path>/` under a name fixed by its batch id
(`part-<sink_id>-<batch_id:016x>.parquet`, see `batch.py`). Publishing is one atomic
no-clobber step, so a reader (a Spark batch job, or Structured Streaming's file source,
which ignores `_`-prefixed directories) sees a batch whole or not at all, and a batch id
that was committed already is detected and skipped.

The ledger survives restarts because it *is* the directory: committed batch ids are the
file names present, committed row keys (see `keys.py`) are the key column of those files
(`_stormish_key`, or the key field itself when it is an int64 column). Nothing else is
written, so there is no second record to get out of step with the data.

`SparkCommitter` (commit_spark.py) is the variant that writes through a SparkSession,
for formats pyarrow does not write; it keeps the same ledger in a `_commits/` directory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
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
    merge_schema,
    parse_name,
    publish,
    with_keys,
    write_staged,
)
from .errors import SparkSinkError, short, where
from .keys import KeyLedger
from .paths import is_uri, local_or_uri


class ParquetCommitter:
    """Commit batches of rows to `path` exactly once per batch id.

    `fields` names the columns (or give them per commit); `schema` pins column types
    (a pyarrow Schema; otherwise they are inferred from the first batch and then kept,
    and read back from existing files on restart). `key_field` names the field that
    holds the row keys when it is an int64 column. `durable` fsyncs each file and the
    directory entry, so a committed batch survives a power cut, not only a crash.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        fields: Sequence[str] | None = None,
        sink_id: str = "sink",
        key_field: str | None = None,
        schema: pa.Schema | None = None,
        component: str | None = None,
        durable: bool = True,
    ):
        self.path = local_or_uri(os.fspath(path))
        if is_uri(self.path):
            raise ValueError(
                f"{where(component)}ParquetCommitter writes local paths only, got "
                f"{self.path!r}; use SparkCommitter (or SparkSink with state_dir=) for a URI"
            )
        self.sink_id = check_sink_id(sink_id, component)
        self.fields = list(fields) if fields is not None else None
        self.key_field, self.schema = key_field, schema
        self.component, self.durable = component, durable
        self.staging = os.path.join(self.path, "_staging")
        ensure_dir(self.path, component)
        ensure_dir(self.staging, component, "staging directory")
        clean_staging(self.staging, self.sink_id)
        self.ledger = KeyLedger()
        self.batches: set[int] = set()
        self.rows_committed = 0
        self.batches_skipped = 0
        self._seen: set[str] = set()
        self.refresh()

    def is_committed(self, batch_id: int) -> bool:
        return batch_id in self.batches or os.path.exists(self._final(batch_id))

    def refresh(self) -> int:
        """Take in batches other writers (tasks of the same sink, or an earlier run)
        published since the last look; how many were new."""
        try:
            names = sorted(os.listdir(self.path))
        except OSError as exc:
            raise SparkSinkError(
                f"{where(self.component)}cannot list sink path {self.path!r}: {exc.strerror or exc}"
            ) from exc
        new = 0
        for name in names:
            bid = parse_name(name, self.sink_id)
            if bid is None or name in self._seen:
                continue
            self._take_in(name, bid)
            new += 1
        return new

    def commit(
        self,
        batch_id: int,
        rows: Sequence[Sequence[Any]] | pa.Table,
        keys: np.ndarray | None = None,
        fields: Sequence[str] | None = None,
    ) -> bool:
        """Write `rows` (or a table of them, `batch.arrow_table`) as batch `batch_id`; False
        (and nothing written) when that batch was committed already. `keys` (int64, one
        per row) go to the ledger and file."""
        name = batch_name(self.sink_id, batch_id)
        if self.is_committed(batch_id):
            self._seen.add(name)
            self.batches.add(batch_id)
            self.batches_skipped += 1
            return False
        table = self._table(rows, keys, fields)
        final = os.path.join(self.path, name)
        try:
            tmp = write_staged(table, self.staging, name, self.durable)
            done = publish(tmp, final, self.durable)
        except OSError as exc:
            raise SparkSinkError(
                f"{where(self.component)}cannot commit batch {name} to {self.path!r}: {short(exc)}"
            ) from exc
        self.schema = merge_schema(self.schema, table.schema)
        self._seen.add(name)
        self.batches.add(batch_id)
        if keys is not None:
            self.ledger.add(keys)
        if done:
            self.rows_committed += table.num_rows
        else:
            self.batches_skipped += 1
        return done

    def _table(
        self,
        rows: Sequence[Sequence[Any]] | pa.Table,
        keys: np.ndarray | None,
        fields: Sequence[str] | None,
    ) -> pa.Table:
        names = list(fields) if fields is not None else self.fields
        if names is None:
            raise ValueError(
                f"{where(self.component)}no field names for the batch: give "
                "fields to the committer or to commit()"
            )
        if keys is not None and len(keys) != len(rows):
            raise ValueError(f"{len(keys)} keys for {len(rows)} rows")
        table = (
            rows
            if isinstance(rows, pa.Table)
            else arrow_table(rows, names, self.schema, self.component, self.path)
        )
        return conform(
            with_keys(table, keys, self.key_field), self.schema, self.component, self.path
        )

    def _final(self, batch_id: int) -> str:
        return os.path.join(self.path, batch_name(self.sink_id, batch_id))

    def _take_in(self, name: str, bid: int) -> None:
        full = os.path.join(self.path, name)
        try:
            f = pq.ParquetFile(full)
            schema = f.schema_arrow
            col = KEY_COLUMN if KEY_COLUMN in schema.names else self.key_field
            if (
                col is not None
                and col in schema.names
                and pa.types.is_int64(schema.field(col).type)
            ):
                # nulls: a file written before null keys were keyed by their row
                keys = f.read(columns=[col]).column(0).drop_null().to_numpy()
                self.ledger.add(keys)
        except (OSError, pa.ArrowException) as exc:
            raise SparkSinkError(
                f"{where(self.component)}cannot read committed batch {full!r}: {short(exc)}"
            ) from exc
        if self.schema is None:
            self.schema = schema
        self._seen.add(name)
        self.batches.add(bid)


def conform(
    table: pa.Table, schema: pa.Schema | None, component: str | None, path: str
) -> pa.Table:
    """Cast the columns of `table` that `schema` types differently (not null) to its type."""
    if schema is None:
        return table
    for i, f in enumerate(table.schema):
        if f.name not in schema.names:
            continue
        want = schema.field(f.name).type
        if pa.types.is_null(want) or want == f.type:
            continue
        try:
            table = table.set_column(i, f.name, table.column(i).cast(want))
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise SparkSinkError(
                f"{where(component)}field {f.name!r} of a batch for "
                f"{path!r} is {f.type}, earlier batches stored {want}: "
                f"{short(exc)}"
            ) from exc
    return table
