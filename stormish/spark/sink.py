"""SparkSink: exactly-once output from at-least-once input.

The sink buffers tuples and commits them as one micro-batch when `batch_rows` are
buffered, or on a tick once the oldest is `batch_seconds` old, and in `cleanup()`.
Tuples are acked only after their batch is committed and failed when the commit fails
(the spout replays them); a row whose values cannot be stored in the sink's columns,
once they are typed (`schema=`, or by the first batch), fails alone and the rest of its
batch is committed (failing the batch brought its rows back with it on every replay).
Acks can still be lost after a commit (a worker dies, a tree times out), so the same
rows come back; this is the rule that keeps them out:

**Batch id rule.** Every row has a stable 64-bit key (keys.py): the `key` field (by
default SparkSpout's `_row_id`, which is (partition << 40) | offset, the same on every
replay) or, with `key=None`, a digest of the row's values. At a commit the sink
(1) drops rows whose key the ledger holds (committed before, by any task of this sink
or an earlier run; they are acked at once), (2) keeps one row per key, (3) names the
batch by the digest of its sorted keys. A replayed row is therefore never written
twice, however the replay is grouped with other rows, and a batch whose exact set of
rows is committed again maps to a batch id already present and is skipped. The ledger
is the committed files themselves (commit.py), so it survives restarts.

What the rule needs from a topology: a key that is stable across replays and unique
per row (a bolt between spout and sink must pass `_row_id` on, or emit its own key);
tasks of one sink share the ledger through the directory, but two tasks holding the
same row in their buffers at the same moment can both write it, so subscribe the sink
with `fields_grouping(..., ["_row_id"])` (or use one task) when tuples may time out
while buffered, and keep `batch_seconds` well under `topology.message.timeout.secs`.

Writers: `format="parquet"` to a local path (a plain path or a `file:` URI) uses pyarrow
(ParquetCommitter, no JVM, ~1M+ rows/s); any other format, a `table=`, or a URI of
another scheme (`s3a://`, `hdfs://`: with `state_dir=`, a local directory for the log
and ledger) goes through a SparkSession (SparkCommitter).

Commit thread (the pyarrow writer): a batch is handed to one thread of the sink's task
that runs its commits one after another (the Arrow table, the ledger check, the Parquet
encode and write, the publish), while the task's thread goes on with the spout and the
other executors: pyarrow encodes and writes outside the GIL. The rule above holds as with
commits on the task's thread: commits run strictly in the order the batches were cut, so
the ledger check of batch N+1 sees batch N; tuples are acked, or failed when their commit
fails, only after it, on the task's thread (`Bolt.on_turn`, woken by the commit thread);
while `commits_ahead` batches wait for their commit the sink takes no input (the engine's
backpressure holds its upstream), and a batch due meanwhile (what the turn that found
the hold had taken already) is cut once one of them has settled; a finite run is not
over while a commit is pending (`Bolt.holds_work`; with acking on the trees say it too),
and `cleanup()` waits for the queued commits and settles them. `commits_ahead=0`
commits on the task's thread, as the Spark writer always does (py4j calls stay on the
task's thread).

Null keys: a row whose key field is None is keyed by its whole row (keys.py), so
distinct rows with null keys are all written, and a replayed one is still recognised.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..component import Bolt
from ..errors import StormishError
from ..tuple import END_OF_INPUT, TICK_STREAM
from .errors import SparkSinkError, short, where
from .paths import is_uri, local_or_uri
from .spout import EMITS_PER_CALL, ROW_ID

TICK_KEY = "topology.tick.tuple.freq.secs"
log = logging.getLogger("stormish.spark.sink")


class SparkSink(Bolt):
    """Write the tuples it receives to `path` (or `table`) exactly once. See the module
    docstring for the rule; `fields` names the output columns (default: the input
    tuple's fields), `schema` pins their pyarrow types, `durable` fsyncs each batch,
    `commits_ahead` bounds the batches waiting for the commit thread (0: none)."""

    def __init__(
        self,
        path: str | os.PathLike | None = None,
        format: str = "parquet",
        batch_rows: int = 10_000,
        batch_seconds: float = 5.0,
        mode: str = "append",
        fields: Sequence[str] | None = None,
        key: str | None = ROW_ID,
        sink_id: str | None = None,
        schema: Any = None,
        table: str | None = None,
        state_dir: str | os.PathLike | None = None,
        options: Mapping[str, str] | None = None,
        durable: bool = False,
        spark_conf: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        commits_ahead: int = 2,
    ):
        if (path is None) == (table is None):
            raise ValueError("SparkSink needs exactly one of path= or table=")
        if mode != "append":
            raise ValueError(
                f"SparkSink mode must be 'append' (each micro-batch adds to "
                f"the output; clear the path first to replace it), got {mode!r}"
            )
        # bools are ints to Python; NaN passes every comparison (a batch never cut by
        # time) and an infinite time is no time bound either
        if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
            raise ValueError(f"SparkSink batch_rows must be an integer >= 1, got {batch_rows!r}")
        if (
            isinstance(batch_seconds, bool)
            or not isinstance(batch_seconds, int | float)
            or not math.isfinite(batch_seconds)
            or batch_seconds <= 0
        ):
            raise ValueError(
                f"SparkSink batch_seconds must be a finite number > 0, got {batch_seconds!r}"
            )
        if (
            isinstance(commits_ahead, bool)
            or not isinstance(commits_ahead, int)
            or commits_ahead < 0
        ):
            raise ValueError(
                f"SparkSink commits_ahead must be an integer >= 0, got {commits_ahead!r}"
            )
        _check_format(format)
        if sink_id is not None and not (
            isinstance(sink_id, str) and re.match(r"^[A-Za-z0-9_.\-]+$", sink_id)
        ):
            raise ValueError(
                f"SparkSink sink_id must be letters, digits, '_', '.' or '-', got {sink_id!r}"
            )
        schema = _arrow_schema(schema)
        self.path = None if path is None else local_or_uri(os.fspath(path))
        if state_dir is None and (table is not None or is_uri(self.path or "")):
            raise ValueError(
                f"SparkSink {'table=' if table is not None else 'a URI path='} is written "
                "through Spark and needs state_dir= (a local directory for its commit log "
                "and ledger)"
            )
        self.format, self.table, self.mode = format, table, mode
        self.batch_rows, self.batch_seconds = batch_rows, float(batch_seconds)
        self.fields = None if fields is None else [str(f) for f in fields]
        self.key, self.sink_id, self.schema = key, sink_id, schema
        self.state_dir = None if state_dir is None else os.fspath(state_dir)
        self.options = dict(options or {})
        self.durable, self.spark_conf, self.clock = durable, dict(spark_conf or {}), clock
        self.commits_ahead = commits_ahead
        # a tick every half period: a batch waits at most ~1.5 x batch_seconds
        self.component_config = {TICK_KEY: self.batch_seconds / 2}

    # a finite run's last batch is committed when its input ends (a last tick, END_OF_INPUT,
    # once every spout has finished its input and nothing moves), not up to 1.5 x
    # batch_seconds later
    closes_at_end_of_input = True

    @property
    def writer(self) -> str:
        local = self.path is not None and not is_uri(self.path)
        return "arrow" if self.format == "parquet" and local else "spark"

    # -- lifecycle ----------------------------------------------------------------------------
    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        from .batch import ensure_dir

        self.component = getattr(context, "component_id", None) or "SparkSink"
        self._conf = dict(conf)
        self._sink_id = self.sink_id or re.sub(r"[^A-Za-z0-9_.\-]", "_", self.component)
        self._rows: list = []
        self._tuples: list = []  # from execute
        self._batches: list = []  # from execute_batch: acked whole (ack_batch), no Tuples made
        self._oldest: float | None = None
        self._in_fields: tuple[str, ...] | None = None
        self._key_index: int | None = None
        self._committer: Any = None
        # acking off: acks and fails do nothing, so execute_batch makes no Tuple objects
        # (two thirds of the sink's own cost per row)
        self._acking = conf.get("topology.acker.executors") != 0
        self.rows_committed = self.batches_committed = self.duplicates = 0
        self.failed_batches = self.rows_refused = 0
        if self.path is not None and not is_uri(self.path):
            ensure_dir(self.path, self.component)  # an unwritable path fails the task now
        if self.writer == "spark":  # an unknown data source fails the task now, not every batch
            from .session import session

            _check_data_source(session({**conf, **self.spark_conf}), self.format, self.component)
        _warn_config(self, conf)
        # batches handed to the commit thread and not yet settled (the task's thread only)
        self._committing = 0
        self._due = False  # a batch is due, cut once fewer than commits_ahead wait (_cut)
        ahead = self.commits_ahead if self.writer == "arrow" else 0
        # on_turn holds the input back from this many pending commits on (never: inline)
        self._hold_at = ahead or math.inf
        self._commits: CommitThread | None = None
        if ahead:
            task = getattr(context, "task_id", None)
            name = f"spark-sink-commit[{self.component}{'' if task is None else f':{task}'}]"
            self._commits = CommitThread(self._commit, getattr(context, "wake", None), name)

    def cleanup(self) -> None:
        """Commit what is buffered, wait for every queued commit, settle them all."""
        if not hasattr(self, "_rows"):
            return  # prepare never ran
        self.flush()
        commits = self._commits
        if commits is not None:
            commits.close()  # waits for the queued commits
            self._settle()

    def on_turn(self) -> bool:
        """Ack (or fail) the batches the commit thread finished, in commit order; True
        (take no input) while `commits_ahead` batches wait for their commit."""
        if self._commits is not None and self._commits.done:
            self._settle()
            if self._due and self._committing < self._hold_at:
                self.flush()
        return self._committing >= self._hold_at

    def holds_work(self) -> bool:
        """A commit is pending: its tuples are acked (or failed) once it ends, so a
        finite run with acking off is not over yet."""
        return self._committing > 0

    # -- input --------------------------------------------------------------------------------
    def execute(self, tup: Any) -> None:
        if tup.is_tick:
            self.on_tick(_is_end(tup.values))
            return
        if tup.fields != self._in_fields and not self._check_fields(tup.fields, [tup]):
            return
        if self._oldest is None:
            self._oldest = self.clock()
        self._rows.append(tup.values)
        self._tuples.append(tup)
        if len(self._rows) >= self.batch_rows:
            self._cut()

    def execute_batch(self, batch: Any) -> None:
        if batch.stream == TICK_STREAM:
            self.on_tick(any(map(_is_end, batch.values)))
            return
        if batch.fields != self._in_fields and not self._check_fields(
            batch.fields, [], batch if self._acking else None
        ):
            return
        if self._oldest is None:
            self._oldest = self.clock()
        self._rows.extend(batch.values)
        if self._acking:
            self._batches.append(batch)
        if len(self._rows) >= self.batch_rows:
            self._cut()

    def on_tick(self, end_of_input: bool = False) -> None:
        """Commit what is buffered once the oldest is `batch_seconds` old, or at once at
        the end of a finite run's input (every spout finished, nothing moving: the last
        batch would otherwise wait for its tick)."""
        if self._oldest is not None and (
            end_of_input or self.clock() - self._oldest >= self.batch_seconds
        ):
            self._cut()

    def _check_fields(self, fields: tuple[str, ...], tuples: list, batch: Any = None) -> bool:
        """Take the first input's fields; fail tuples whose fields differ or lack the key."""
        problem = None
        if self._in_fields is not None:
            problem = (
                f"input fields {list(fields)} differ from the first input's "
                f"{list(self._in_fields)}; one sink writes one schema"
            )
        elif self.key is not None and self.key not in fields:
            problem = (
                f"key field {self.key!r} is not among the input fields {list(fields)}; "
                "give key=<field> or key=None (rows keyed by their values)"
            )
        if problem is not None:
            self.report_error(SparkSinkError(f"{where(self.component)}{problem}"))
            for t in tuples:
                self.fail(t)
            if batch is not None:
                self.fail_batch(batch)
            return False
        self._in_fields = tuple(fields)
        self._key_index = None if self.key is None else self._in_fields.index(self.key)
        return True

    # -- commit -------------------------------------------------------------------------------
    def _cut(self) -> None:
        """A batch is due (its size, its age, the end of input): cut it now, or, while
        `commits_ahead` batches wait for the commit thread, at the first turn that finds
        one of them settled (`on_turn`). What the task takes meanwhile (the rest of the
        turn that filled the queue) joins the batch due: a turn that took a held
        sink's whole queue cut a batch of every `batch_rows` of it, all queued."""
        if self._committing >= self._hold_at:
            self._due = True
        else:
            self.flush()

    def flush(self) -> None:
        """Commit what is buffered (on the commit thread, or here with none); its tuples
        are acked after the commit, failed if the commit fails."""
        rows, tuples, batches = self._rows, self._tuples, self._batches
        self._rows, self._tuples, self._batches, self._oldest = [], [], [], None
        self._due = False
        if not rows:
            return
        commits = self._commits
        if commits is not None:
            self._committing += 1
            commits.submit(rows, tuples, batches)
        else:
            self._settle_one(tuples, batches, self._commit(rows))

    def _commit(self, rows: list) -> BaseException | None:
        """One batch's commit; what it raised, if it failed (the tuples fail, the spout
        replays them). Runs on the commit thread, when there is one."""
        try:
            self._write(rows)
        except Exception as exc:  # noqa: BLE001 - reported and failed on the task's thread
            return exc
        return None

    def _settle(self) -> None:
        """Settle the commits the commit thread finished, in the order they ran."""
        assert self._commits is not None
        done = self._commits.done
        while done:
            tuples, batches, exc = done.popleft()
            self._committing -= 1
            self._settle_one(tuples, batches, exc)

    def _settle_one(self, tuples: list, batches: list, exc: BaseException | None) -> None:
        if exc is None:
            for t in tuples:
                self.ack(t)
            for b in batches:
                self.ack_batch(b)
            return
        if isinstance(exc, _Refused) and not (tuples and batches):
            self._settle_refused(tuples, batches, exc)
            return
        err = (
            exc
            if isinstance(exc, StormishError)
            else SparkSinkError(
                f"{where(self.component)}commit to {self._target()} failed: {short(exc)}"
            )
        )
        if err is not exc:
            err.__cause__ = exc
        self.failed_batches += 1
        self.report_error(err)
        for t in tuples:
            self.fail(t)
        for b in batches:
            self.fail_batch(b)

    def _settle_refused(self, tuples: list, batches: list, refused: _Refused) -> None:
        """The rows `refused` names fail (their spout replays them, or dead-letters them
        past `topology.max.replays`), the rest of their batch, committed, is acked.
        `tuples` (per-tuple input) or `batches` (batch input, in the order their rows
        were buffered) cover the batch's rows; with acking off neither is kept."""
        bad = refused.rows
        self.rows_refused += len(bad)
        self.report_error(refused.error)
        for i, t in enumerate(tuples):
            if i in bad:
                self.fail(t)
            else:
                self.ack(t)
        first = 0
        for b in batches:
            n = len(b)
            if not b.metas or not any(first <= i < first + n for i in bad):
                self.ack_batch(b)  # none of its rows refused (or none tracked)
            else:
                for i, t in enumerate(b.tracked(), first):
                    if i in bad:
                        self.fail(t)
                    else:
                        self.ack(t)
            first += n

    def _write(self, rows: list) -> None:
        """Rows to one Arrow table (column by column), keys from its key column when that
        is int64 (SparkSpout's row id: no Python call per row), duplicates filtered out
        in Arrow, then one commit. Rows whose values cannot be stored in the sink's typed
        columns are left out and named (`_Refused`, raised after the commit of the rest)."""
        import pyarrow as pa

        from .batch import arrow_table
        from .keys import batch_id, first_unique, row_keys

        committer = self._committer or self._open_committer()
        committer.refresh()
        names = committer.fields
        try:
            table = arrow_table(rows, names, committer.schema, self.component, self._output())
        except SparkSinkError as exc:
            bad = self._unstorable(rows, names, committer.schema)
            if not bad or len(bad) == len(rows):
                raise  # none to blame alone (types still inferred), or all: the batch fails
            self._write([r for i, r in enumerate(rows) if i not in bad])
            w, first = where(self.component), str(exc)
            first = first[len(w) :] if first.startswith(w) else first
            raise _Refused(
                SparkSinkError(
                    f"{w}{len(bad)} of {len(rows)} rows cannot be stored and failed alone "
                    f"(the other {len(rows) - len(bad)} were committed); the first: {first}"
                ),
                bad,
            ) from exc
        keys = None
        k = self._key_index
        if k is not None:
            col = table.column(k)
            if pa.types.is_int64(col.type) and col.null_count == 0:
                # the keys row_keys would give (an int64 is its own key), and the ones the
                # ledger reads back from the file's key column
                keys = col.to_numpy()
        if keys is None:
            keys = row_keys(rows, k)
        fresh = first_unique(keys) & ~committer.ledger.contains(keys)
        n = int(fresh.sum())
        self.duplicates += len(rows) - n
        if n == 0:
            return
        if n < len(rows):
            table = table.filter(pa.array(fresh))
            keys = keys[fresh]
        if committer.commit(batch_id(keys), table, keys):
            self.batches_committed += 1
            self.rows_committed += n

    def _unstorable(self, rows: list, names: list[str], schema: Any) -> set[int]:
        """The rows that fail alone to convert to the sink's columns, when `schema` types
        every one of them (`schema=`, or after the first batch); none otherwise (a row
        alone infers its own types). Only after a batch failed to convert, by halves: a
        part that converts is cleared whole (one bad row in 10,000: ~30 conversions)."""
        import pyarrow as pa

        from .batch import arrow_table

        if schema is None or any(
            n not in schema.names or pa.types.is_null(schema.field(n).type) for n in names
        ):
            return set()
        bad: set[int] = set()
        parts = [(0, len(rows))]
        while parts:
            lo, hi = parts.pop()
            if hi - lo < len(rows):  # the whole failed already
                try:
                    arrow_table(rows[lo:hi], names, schema, self.component, self._output())
                    continue
                except SparkSinkError:
                    pass
            if hi - lo == 1:
                bad.add(lo)
            else:
                mid = (lo + hi) // 2
                parts += [(mid, hi), (lo, mid)]
        return bad

    def _open_committer(self) -> Any:
        fields = self.fields or list(self._in_fields or ())
        common = dict(
            fields=fields,
            sink_id=self._sink_id,
            schema=self.schema,
            key_field=self.key,
            component=self.component,
        )
        if self.writer == "arrow":
            from .commit import ParquetCommitter

            assert self.path is not None  # the arrow writer is chosen for a path only
            self._committer = ParquetCommitter(self.path, durable=self.durable, **common)
        else:
            from .commit_spark import SparkCommitter
            from .session import session

            spark = session({**self._conf, **self.spark_conf})
            self._committer = SparkCommitter(
                spark,
                path=self.path,
                format=self.format,
                table=self.table,
                state_dir=self.state_dir,
                options=self.options,
                **common,
            )
        return self._committer

    def _target(self) -> str:
        return f"table {self.table!r}" if self.table else f"path {self.path!r}"

    def _output(self) -> str:
        """The path or table, as batch.arrow_table names it (quoted there)."""
        return self.table or self.path or ""

    def statistics(self) -> dict[str, int]:
        return {
            "rows_committed": self.rows_committed,
            "batches": self.batches_committed,
            "duplicates_dropped": self.duplicates,
            "failed_batches": self.failed_batches,
            "rows_refused": self.rows_refused,
            "buffered": len(self._rows),
            "committing": getattr(self, "_committing", 0),
        }


class _Refused(Exception):  # noqa: N818 - not an error of the batch: of some of its rows
    """A commit that left out `rows` (indices into the batch), which cannot be stored:
    they fail, the rest of the batch was committed. `error` is what is reported."""

    def __init__(self, error: SparkSinkError, rows: set[int]):
        super().__init__(str(error))
        self.error, self.rows = error, rows


class CommitThread:
    """Runs a sink task's commits, one at a time, in the order they were submitted, on a
    thread of its own; each result goes to `done` (tuples, batches, the error or None) and
    the task is woken (`wake`) to settle it. The task's thread submits and settles; this
    thread only commits."""

    def __init__(
        self,
        commit: Callable[[list], BaseException | None],
        wake: Callable[[], None] | None,
        name: str,
    ):
        self._commit = commit
        self._wake = wake
        self._jobs: deque[tuple[list, list, list]] = deque()
        self.done: deque[tuple[list, list, BaseException | None]] = deque()
        self._cond = threading.Condition()
        self._pending = 0  # submitted, not yet in done
        self._closed = False
        # a daemon: a worker that exits without cleanup() does not wait for it (what it
        # had not published is replayed; a half-written staging file is cleaned later)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, rows: list, tuples: list, batches: list) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError("the sink's commit thread is closed")
            self._jobs.append((rows, tuples, batches))
            self._pending += 1
            self._cond.notify_all()

    def _run(self) -> None:
        cond, jobs = self._cond, self._jobs
        while True:
            with cond:
                while not jobs and not self._closed:
                    cond.wait()
                if not jobs:
                    return
                rows, tuples, batches = jobs.popleft()
            try:
                exc = self._commit(rows)
            except BaseException as e:  # noqa: BLE001 - never leave a batch unsettled
                exc = e
            del rows
            with cond:
                self.done.append((tuples, batches, exc))
                self._pending -= 1
                cond.notify_all()
            del tuples, batches
            if self._wake is not None:
                self._wake()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every submitted commit has ended; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        """Run what is queued, then end the thread (a clean stop commits what it took)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()


def _is_end(values: Any) -> bool:
    return len(values) > 0 and values[0] == END_OF_INPUT


BUILTIN_FORMATS = ("parquet", "orc", "json", "csv", "text", "avro", "xml")


def _check_format(format: Any) -> None:
    """A format must be a data source name; a near miss of a built-in one is a typo
    (found now, not at the first commit, after which every batch would fail)."""
    import difflib

    if not isinstance(format, str) or not format.strip():
        raise ValueError(f"SparkSink format must be a data source name, got {format!r}")
    low = format.lower()
    if low in BUILTIN_FORMATS or "." in format:
        return
    close = difflib.get_close_matches(low, BUILTIN_FORMATS, n=1, cutoff=0.75)
    if close:
        raise ValueError(f"SparkSink format {format!r} is unknown; did you mean {close[0]!r}?")


def _check_data_source(spark: Any, format: str, component: str | None) -> None:
    """Ask Spark (a classic session; Connect cannot be asked) whether `format` names a
    data source it has."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return
    try:
        ds = jvm.org.apache.spark.sql.execution.datasources.DataSource
        ds.lookupDataSource(format, spark._jsparkSession.sessionState().conf())
    except Exception as exc:  # noqa: BLE001 - py4j's error carries the Java cause
        if "NOT_FOUND" not in str(exc) and "ClassNotFound" not in str(exc):
            return  # not an answer about the format (internals moved?): the commit will say
        raise SparkSinkError(
            f"{where(component)}SparkSink format {format!r} is not a data source this "
            f"Spark has: {short(exc)}"
        ) from exc


def _arrow_schema(schema: Any) -> Any:
    """`schema=` as a pyarrow Schema: a pyspark StructType (a DataFrame's `.schema`) is
    converted (timestamps with time zone as UTC instants); anything else is refused."""
    if schema is None:
        return None
    module = type(schema).__module__
    if module.startswith("pyarrow") and type(schema).__name__ == "Schema":
        return schema
    if module.startswith("pyspark") and type(schema).__name__ == "StructType":
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(schema, timezone="UTC")
    raise TypeError(
        f"SparkSink schema must be a pyarrow.Schema or a pyspark StructType, "
        f"got {type(schema).__module__}.{type(schema).__qualname__}"
    )


def _warn_config(sink: SparkSink, conf: Mapping[str, Any]) -> None:
    timeout = conf.get("topology.message.timeout.secs")
    if timeout is not None and sink.batch_seconds * 1.5 >= float(timeout):
        log.warning(
            "component %r: batch_seconds %.1f x 1.5 reaches "
            "topology.message.timeout.secs %s: buffered tuples will time out and be "
            "replayed (deduplicated, but wasted work)",
            sink.component,
            sink.batch_seconds,
            timeout,
        )
    pending = conf.get("topology.max.spout.pending")
    # pending counts message ids; SparkSpout's trees carry up to EMITS_PER_CALL rows each
    if pending is not None and pending * EMITS_PER_CALL < sink.batch_rows:
        log.warning(
            "component %r: topology.max.spout.pending %s message ids hold fewer rows than "
            "batch_rows %d: batches will be cut by time (every %.1fs), not by size",
            sink.component,
            pending,
            sink.batch_rows,
            sink.batch_seconds,
        )
