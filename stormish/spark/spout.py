"""SparkSpout: a Spark job's output as a reliable, finite stream.

Rows come from a `Drain` (drain.py), whose thread fetches ahead of the spout and stops
at its bound; `next_tuple` only takes what is ready (`next_chunk_nowait`) and so never
waits on Spark. It emits at most `EMITS_PER_CALL` tuples a call and no more than
`topology.max.spout.pending` allows: a spout that may not emit stops pulling, and the
drain, then Spark, stop with it.

Message ids are deterministic within a run: row id = (partition << 40) | offset of the
row in its partition, so a replay carries the same id. Across runs they are the same
only while the partitioning is: a range with explicit numPartitions, or a sort into a
fixed number of partitions. A file or table scan is NOT stable across sessions: Spark
splits files by min(maxPartitionBytes, bytes / default parallelism), so the same
input read under local[2] and local[4] (or on a host with more cores) numbers its rows
differently, and a SparkSink keyed on `_row_id` would write the whole output again.
When a topology may be re-run over the same output, give the source a key column of
its own (an id in the data) and the sink `key=<that column>`. The id is also emitted
as the last field (`id_field`, "_row_id"), which is what SparkSink's default `key`
dedupes on.

Acking is per tree of `ack_rows` rows: the rows go out with one `emit_many` under one
message id (the first row's id), so the acker and the spout do one step per tree, not
per row (a reliable row costs ~7 us tuple-at-a-time). By default a tree is the largest
multiple of the producer batch (`topology.producer.batch.size`, 512 unless set) up to
1,024 rows, and chunks are a whole number of trees: a tree then fills whole batches,
each batch holds one tree, and the bolt acks a batch with one XOR (a batch spanning
two trees costs a dict update per row). A failed
tree is replayed whole (before any new row) with the same values and ids; a sink keyed
on the row id writes each row once however often it comes. `ack_rows=1` is Storm's
tuple-at-a-time. The spout calls `finish_input()` once every row is drained and emitted
(a SparkSink downstream then commits its last batch at once) and `finish()` once every
row is acked.
With acking off (`topology.acker.executors` 0) rows are emitted without message ids:
the runtime would ack each at once, so the spout keeps no pending rows and finishes
once everything is drained.

Parallelism: task i of n drains the partitions p with p % n == i.
"""

from __future__ import annotations

import collections
import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..component import DEFAULT_STREAM, Spout
from .errors import SparkSourceError, WouldBlock, short, where
from .ids import row_id  # the spout's ids; tests and sinks import it from here too

ROW_ID = "_row_id"
EMITS_PER_CALL = 1024  # bounds what one next_tuple call can park in the pendingEmitQ
PATHS = ("auto", "arrow", "rows")  # how a drain reads (drain.py): checked here, early
BATCH_KEY = "topology.producer.batch.size"
FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".orc": "orc"}


class SparkSpout(Spout):
    """Emit the rows of `source`: a function `spark -> DataFrame`, a table name, or a
    path (with `format`, or a .parquet/.csv/.json/.orc name). `fields` selects and
    orders the columns; without it the DataFrame is built once when the topology is
    (a session starts then) to learn them. `count=True` runs a count job for progress.
    Session config: `stormish.spark.*` keys of the topology config, then `spark_conf`.
    """

    def __init__(
        self,
        source: Callable[[Any], Any] | str | os.PathLike,
        batch_rows: int = 10_000,
        fields: Sequence[str] | None = None,
        format: str | None = None,
        options: Mapping[str, str] | None = None,
        id_field: str | None = ROW_ID,
        ahead: int = 2,
        path: str = "auto",
        count: bool = False,
        spark_conf: Mapping[str, Any] | None = None,
        ack_rows: int | None = None,
    ):
        if not (callable(source) or isinstance(source, str | os.PathLike)):
            raise SparkSourceError(
                f"SparkSpout source must be a function spark -> DataFrame, "
                f"a table name or a path, got {type(source).__name__}"
            )
        if not isinstance(batch_rows, int) or batch_rows < 1:
            raise ValueError(f"SparkSpout batch_rows must be an integer >= 1, got {batch_rows!r}")
        # checked here, at the topology's line, not at the first drain in a worker
        if isinstance(ahead, bool) or not isinstance(ahead, int) or ahead < 1:
            raise ValueError(f"SparkSpout ahead must be an integer >= 1, got {ahead!r}")
        if path not in PATHS:
            raise ValueError(f"SparkSpout path must be one of {PATHS}, got {path!r}")
        if ack_rows is not None and (
            not isinstance(ack_rows, int) or not 1 <= ack_rows <= EMITS_PER_CALL
        ):
            raise ValueError(
                f"SparkSpout ack_rows must be an integer from 1 to {EMITS_PER_CALL} "
                f"(or None: whole producer batches), got {ack_rows!r}"
            )
        self.ack_rows = ack_rows
        self.source = os.fspath(source) if isinstance(source, os.PathLike) else source
        self.format = format or _format_of(self.source)
        self.options = dict(options or {})
        self.batch_rows, self.ahead, self.path, self.count = batch_rows, ahead, path, count
        self.fields = None if fields is None else [str(f) for f in fields]
        self.id_field = id_field
        if id_field is not None and self.fields is not None and id_field in self.fields:
            raise ValueError(
                f"SparkSpout id_field {id_field!r} is also a source field; "
                "pick another name or id_field=None"
            )
        self.spark_conf = dict(spark_conf or {})
        self.component: str | None = None

    # -- declaration --------------------------------------------------------------------------
    def declared_streams(self) -> dict[str, tuple[str, ...]]:
        if self.fields is None:
            self.fields = self._declare_fields()
        extra = (self.id_field,) if self.id_field else ()
        return {DEFAULT_STREAM: tuple(self.fields) + extra}

    def _declare_fields(self) -> list[str]:
        """The source's columns, when the topology is built. The topology's config is not
        known yet (its `stormish.spark.master` is what `open` will use), so a session
        made here only to read the columns is stopped, its JVM too: a session left
        running with `local[*]` would clash with the topology's master, and hold ~400 MB
        in the process that submits."""
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        from .session import _is_stopped, session

        running = SparkSession.getActiveSession() or SparkSession._instantiatedSession
        if running is not None and not _is_stopped(running):
            return list(self.dataframe(running).columns)  # a running session: no clash
        had_jvm = SparkContext._gateway is not None
        spark = session(self.spark_conf)
        try:
            return list(self.dataframe(spark).columns)
        finally:
            spark.stop()
            if not had_jvm:
                _stop_jvm()

    def dataframe(self, spark: Any) -> Any:
        """The DataFrame to drain, with `fields` selected; errors name the source."""
        from .drain import check_dataframe

        w = where(self.component)
        what = self._what()
        if self.format is None and isinstance(self.source, str) and _looks_like_path(self.source):
            raise SparkSourceError(f"{w}{what} looks like a path: give format=")
        local = _local_path(self.source) if self.format is not None else None
        if local is not None and not os.path.exists(local):
            raise SparkSourceError(f"{w}source path {self.source!r} does not exist")
        try:
            df = self._build(spark)
        except SparkSourceError:
            raise
        except Exception as exc:  # noqa: BLE001 - Spark's AnalysisException and friends
            raise SparkSourceError(f"{w}cannot read {what}: {short(exc)}") from exc
        check_dataframe(df, self.component, f"DataFrame from {what}")
        if self.fields is not None:
            missing = [f for f in self.fields if f not in df.columns]
            if missing:
                raise SparkSourceError(
                    f"{w}{what} has no column(s) {missing}; its columns are {df.columns}"
                )
            from pyspark.sql import functions as F

            # quoted: a column named "user.id" is that column, not field id of user
            df = df.select(*[F.col("`" + f.replace("`", "``") + "`") for f in self.fields])
        if self.id_field is not None and self.id_field in df.columns:
            raise SparkSourceError(
                f"{w}{what} already has a column {self.id_field!r}: "
                "pass id_field=<another name> or None"
            )
        return df

    def _build(self, spark: Any) -> Any:
        if callable(self.source):
            return self.source(spark)
        if self.format is not None:
            return spark.read.format(self.format).options(**self.options).load(self.source)
        return spark.table(self.source)

    def _what(self) -> str:
        if callable(self.source):
            name = getattr(self.source, "__qualname__", repr(self.source))
            return f"source function {name}"
        kind = "path" if self.format is not None else "table"
        return f"source {kind} {self.source!r}"

    # -- running ------------------------------------------------------------------------------
    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        from .drain import Drain
        from .session import session

        self.component = getattr(context, "component_id", None) or "SparkSpout"
        spark = session({**conf, **self.spark_conf})
        df = self.dataframe(spark)
        # acking off: the runtime would ack each message id at once, so emit none
        reliable = conf.get("topology.acker.executors") != 0
        tree = self.ack_rows or tree_rows(conf.get(BATCH_KEY))
        chunk_rows = self.batch_rows
        if reliable and tree > 1:  # whole trees per chunk: trees never cross chunks
            chunk_rows = -(-chunk_rows // tree) * tree
        drain = Drain(
            df,
            chunk_rows=chunk_rows,
            ahead=self.ahead,
            path=self.path,
            share=_share(context),
            count=self.count,
            component=self.component,
            ids=self.id_field is not None,
        )
        self._start(drain, conf.get("topology.max.spout.pending"), reliable, tree)

    def _start(
        self, drain: Any, max_pending: int | None, reliable: bool = True, tree: int | None = None
    ) -> None:
        """Begin with `drain` (anything with next_chunk_nowait/progress/close; when its
        `ids` attribute is true its rows already end with their row id); `tree`: rows
        per tuple tree (default `ack_rows`, else `tree_rows()`)."""
        self._tree = tree or self.ack_rows or tree_rows(None)
        self._drain = drain
        self._max_pending = max_pending
        self._reliable = reliable
        self._with_ids = self.id_field is not None and not getattr(drain, "ids", False)
        # msg id -> values (ack_rows 1) or the list of rows of its tree, until acked
        self._pending: dict[int, Any] = {}
        self._replay: collections.deque[int] = collections.deque()
        self._rows: list[tuple] = []
        self._pos = 0
        self._base = 0
        self._drained = False
        self._input_ended = False
        self._finished = False
        self.emitted = self.replayed = self.acked = self.failed = self.dead_lettered = 0
        start = getattr(drain, "start", None)
        if start is not None:
            start()

    def next_tuple(self) -> None:
        if self._finished:
            return
        if self._reliable and self._tree > 1:
            self._emit_trees()
        else:
            self._emit_rows()
        if self._drained:
            if not self._input_ended:
                # every row was emitted, only replays may follow: a sink holding a last,
                # partial batch commits it now (END_OF_INPUT), not at its next tick
                self._input_ended = True
                self.finish_input()
            if not self._pending and not self._replay:
                self._finished = True
                self.finish()

    def _emit_trees(self) -> None:
        """One tuple tree per `ack_rows` rows (emit_many): the message id is the first
        row's id, acked once for all and replayed whole. `topology.max.spout.pending`
        counts trees, as Storm counts message ids."""
        room = EMITS_PER_CALL
        trees = None
        if self._max_pending is not None:
            trees = self._max_pending - (len(self._pending) - len(self._replay))
        emit_many, pending, replay = self.emit_many, self._pending, self._replay
        while room > 0 and replay:
            mid = replay.popleft()
            rows = pending.get(mid)
            if rows is not None:
                emit_many(rows, msg_id=mid)
                self.replayed += len(rows)
                room -= len(rows)
        size = self._tree
        while room > 0 and (trees is None or trees > 0) and self._refill():
            pos, base = self._pos, self._base
            end = min(len(self._rows), pos + size)
            rows = self._rows[pos:end]
            mid = base + pos
            pending[mid] = rows
            emit_many(rows, msg_id=mid)
            self.emitted += end - pos
            room -= end - pos
            self._pos = end
            if trees is not None:
                trees -= 1

    def _emit_rows(self) -> None:
        room = EMITS_PER_CALL
        if self._max_pending is not None:
            room = min(room, self._max_pending - (len(self._pending) - len(self._replay)))
        emit, pending, replay = self.emit, self._pending, self._replay
        while room > 0 and replay:
            mid = replay.popleft()
            values = pending.get(mid)
            if values is not None:
                emit(values, msg_id=mid)
                self.replayed += 1
                room -= 1
        while room > 0 and self._refill():
            rows, pos, base = self._rows, self._pos, self._base
            end = min(len(rows), pos + room)
            todo = rows[pos:end]
            # C-level loops (map, zip, dict.update): this is the spout's whole per-row cost
            if self._reliable:
                ids = range(base + pos, base + end)
                pending.update(zip(ids, todo, strict=True))
                _drain_all(map(emit, todo, _DEFAULT, _NONE, ids))
            else:
                self.emit_many(todo)
            self.emitted += end - pos
            room -= end - pos
            self._pos = end

    def _refill(self) -> bool:
        """True when rows are ready to emit; takes the next chunk if the current is done."""
        if self._pos < len(self._rows):
            return True
        if self._drained:
            return False
        try:
            chunk = self._drain.next_chunk_nowait()
        except WouldBlock:
            return False
        if chunk is None:
            self._drained = True
            self._rows, self._pos = [], 0
            return False
        self._base = row_id(chunk.partition, chunk.offset)
        rows = chunk.rows
        if self._with_ids:  # a drain that did not add them
            rows = list(map(tuple.__add__, rows, zip(range(self._base, self._base + len(rows)))))
        self._rows, self._pos = rows, 0
        return bool(rows)

    def ack(self, msg_id: Any) -> None:
        got = self._pending.pop(msg_id, None)
        if got is not None:
            self.acked += len(got) if got.__class__ is list else 1

    def fail(self, msg_id: Any, failure: Any = None) -> None:
        """Replay the tree whole, unless it was dead-lettered (topology.max.replays):
        then it is dropped, and the engine emitted its rows on `__dead_letter`."""
        got = self._pending.get(msg_id)
        if got is not None:
            rows = len(got) if got.__class__ is list else 1
            self.failed += rows
            if failure is not None and failure.dead_letter:
                del self._pending[msg_id]
                self.dead_lettered += rows
            else:
                self._replay.append(msg_id)

    def progress(self) -> tuple[int, int | None]:
        """(rows emitted for the first time, total rows or None while unknown)."""
        drain = getattr(self, "_drain", None)
        total = drain.progress()[1] if drain is not None else None
        return getattr(self, "emitted", 0), total

    def close(self) -> None:
        drain = getattr(self, "_drain", None)
        if drain is not None:
            drain.close()


def _stop_jvm() -> None:
    """End the py4j gateway JVM this process launched (its launcher exits when its
    stdin closes); a later session starts a new one."""
    from pyspark import SparkContext

    gateway: Any = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - already gone
        pass
    SparkContext._gateway = SparkContext._jvm = None
    if proc is not None:
        try:
            proc.stdin.close()
            proc.wait(30)
        except Exception:  # noqa: BLE001 - it may be gone or slow: it dies with its stdin
            pass


def tree_rows(batch: int | None) -> int:
    """Rows per tuple tree by default: the largest multiple of the producer batch
    (`batch`; None: the engine's default, 512) up to EMITS_PER_CALL, at least one batch
    (a batch above EMITS_PER_CALL: EMITS_PER_CALL)."""
    b = batch or 512
    return b * (EMITS_PER_CALL // b) if b <= EMITS_PER_CALL else EMITS_PER_CALL


_DEFAULT = itertools.repeat(DEFAULT_STREAM)
_NONE = itertools.repeat(None)


def _drain_all(iterator: Any) -> None:
    """Run an iterator for its side effects, in C (emit returns None)."""
    collections.deque(iterator, maxlen=0)


def _share(context: Any) -> tuple[int, int]:
    tasks = getattr(context, "component_tasks", None)
    if not tasks:
        return 0, 1
    return int(context.task_index), len(tasks)


def _format_of(source: Any) -> str | None:
    if not isinstance(source, str):
        return None
    return FORMATS.get(os.path.splitext(source.rstrip("/"))[1].lower())


def _looks_like_path(source: str) -> bool:
    return "/" in source or os.sep in source or "://" in source


def _local_path(source: Any) -> str | None:
    """The local file system path of `source`, None for a remote URI or a glob."""
    if not isinstance(source, str) or any(c in source for c in "*?["):
        return None
    if source.startswith("file:"):
        from urllib.parse import urlparse

        return urlparse(source).path
    return None if "://" in source else source
