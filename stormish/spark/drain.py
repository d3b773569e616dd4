"""Drain a DataFrame's rows into Python, in chunks, with a bound and a brake.

A background thread fetches ahead of the consumer and stops at the bound: at most
`ahead` partitions (Arrow path) or `ahead` chunks (row path) are fetched or being
fetched beyond the one the consumer is on. On the Arrow path up to `ahead` partitions
are fetched at once (one job and one thread each), so Spark computes them in parallel.
A consumer that stops pulling therefore stops Spark (no job is started for a partition
nobody has room for): backpressure with no extra signal. Memory is bounded by
partitions, not rows: on the Arrow path a partition is fetched whole, so up to
`ahead` + 1 partitions (the one being consumed and those ahead) are held as Arrow
batches at once. A DataFrame with a few huge partitions (one file, a coalesce(1))
is therefore held nearly whole: repartition it so that a partition fits in memory a
few times over. `toArrow()`/`collect()` would hold all of it always.

The consumer pulls when it wants: `next_chunk(timeout)` blocks, `next_chunk_nowait()`
raises `WouldBlock` instead (for a spout's `next_tuple`, which must not block), and
iterating yields chunks. Arrow batches are turned into Python tuples on the consumer's
side, one chunk at a time, so what waits ahead stays compact Arrow.

Each `Chunk` knows its partition and the offset of its first row in that partition;
a row's (partition, offset) is the same on both paths, and from run to run only while
the DataFrame's partitioning and order are (a range with explicit numPartitions, say;
not a file scan, whose splits follow the session's parallelism: spout.py).
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

from .errors import SparkSourceError, WouldBlock, short, where
from .fetch import ArrowPartitions, RowPartitions, arrow_unsupported, cancel_hook, count_share
from .ids import row_id
from .rows import to_tuples
from .spout import PATHS

CANCEL_AGAIN = 0.5  # s: close() cancels the drain's Spark jobs again this often
_ids = itertools.count()


class Chunk(NamedTuple):
    partition: int
    offset: int  # offset of rows[0] within its partition
    rows: list[tuple]


class _Cursor:
    """The consumer's place in one fetched partition (a list of Arrow batches)."""

    __slots__ = ("partition", "batches", "bi", "ri", "offset", "ids")

    def __init__(self, partition: int, batches: list[Any], ids: bool = False):
        self.partition, self.batches, self.ids = partition, batches, ids
        self.bi = self.ri = self.offset = 0

    def cut(self, n: int) -> Chunk | None:
        rows: list[tuple] = []
        batches, start = self.batches, self.offset
        while len(rows) < n and self.bi < len(batches):
            b = batches[self.bi]
            take = min(n - len(rows), b.num_rows - self.ri)
            whole = self.ri == 0 and take == b.num_rows
            first = row_id(self.partition, start + len(rows)) if self.ids else None
            rows.extend(to_tuples(b if whole else b.slice(self.ri, take), first))
            self.ri += take
            if self.ri >= b.num_rows:
                batches[self.bi] = None  # let the batch go as soon as it is converted
                self.bi, self.ri = self.bi + 1, 0
        self.offset += len(rows)
        return Chunk(self.partition, start, rows) if rows else None


def check_dataframe(df: Any, component: str | None = None, what: str = "source") -> None:
    from pyspark.sql import DataFrame

    if not isinstance(df, DataFrame):
        raise SparkSourceError(
            f"{where(component)}the {what} must be a pyspark DataFrame, "
            f"got {type(df).__module__}.{type(df).__qualname__}"
        )


class Drain:
    """Pull a DataFrame's rows in chunks of at most `chunk_rows`.

    `path`: "auto" (Arrow when `fetch.arrow_unsupported` finds nothing against it),
    "arrow" (an error when unsupported) or "rows" (force the fallback). After
    construction `self.path` is the path in use and `self.fallback_reason` says why
    the fallback was taken. `share=(i, n)` drains only partitions p with p % n == i
    (one share per spout task). `count=True` runs one `count()` job first, for
    `progress()`; otherwise the total is known when the drain ends. `ids=True` ends
    each row with its `row_id(partition, offset)` (added while converting, which is
    cheaper than rebuilding each tuple afterwards).
    """

    def __init__(
        self,
        df: Any,
        chunk_rows: int = 10_000,
        ahead: int = 2,
        path: str = "auto",
        share: tuple[int, int] = (0, 1),
        count: bool = False,
        component: str | None = None,
        ids: bool = False,
    ):
        check_dataframe(df, component)
        _check_args(chunk_rows, ahead, path, share, component)
        self.df, self.chunk_rows, self.ahead = df, chunk_rows, ahead
        self.share, self.count, self.component, self.ids = share, count, component, ids
        self.fallback_reason = "forced" if path == "rows" else arrow_unsupported(df)
        if path == "arrow" and self.fallback_reason:
            raise SparkSourceError(
                f"{where(component)}Arrow drain unavailable: {self.fallback_reason}"
            )
        self.path = "rows" if self.fallback_reason else "arrow"
        self.drained = 0
        self.total: int | None = None
        self.fetched_partitions = 0
        self._cond = threading.Condition()
        self._queue: collections.deque = collections.deque()
        self._in_flight = 0  # pieces fetched or being fetched that the consumer has not taken
        self._stop = False
        self._halt = False  # a fetch thread failed: the others stop
        self._failed = False  # a helper fetch thread failed (its error is queued)
        self._next_part = 0  # index into the partitions to drain of the next to queue
        self._done = False
        self._cursor: _Cursor | None = None
        self._thread: threading.Thread | None = None
        self._group = f"stormish-drain-{next(_ids)}"
        self._start_jobs, self._cancel_jobs = cancel_hook(df, self._group)

    # -- consumer side ------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None and not self._stop:
            self._thread = threading.Thread(
                target=self._run, daemon=True, name=f"stormish-drain[{self.component or ''}]"
            )
            self._thread.start()

    def next_chunk_nowait(self) -> Chunk | None:
        """The next chunk, None once everything was drained; WouldBlock if not ready."""
        self.start()
        while True:
            if self._cursor is not None:
                chunk = self._cursor.cut(self.chunk_rows)
                if chunk is not None:
                    self.drained += len(chunk.rows)
                    return chunk
                self._cursor = None
            with self._cond:
                if not self._queue:
                    if self._done or self._stop:
                        return None
                    raise WouldBlock
                item = self._queue.popleft()
                if item[0] in ("part", "chunk"):
                    self._in_flight -= 1
                    self._cond.notify_all()
            chunk = self._take(item)
            if chunk is not None:
                return chunk

    def next_chunk(self, timeout: float | None = None) -> Chunk | None:
        """Like `next_chunk_nowait` but waits; TimeoutError after `timeout` seconds."""
        while True:
            try:
                return self.next_chunk_nowait()
            except WouldBlock:
                with self._cond:
                    if not self._cond.wait_for(lambda: self._queue or self._stop, timeout):
                        raise TimeoutError(
                            f"{where(self.component)}no chunk within {timeout}s"
                        ) from None

    def __iter__(self) -> Iterator[Any]:
        while (chunk := self.next_chunk()) is not None:
            yield chunk

    @property
    def exhausted(self) -> bool:
        return self._done and self._cursor is None and not self._queue

    def progress(self) -> tuple[int, int | None]:
        """(rows handed out, total rows or None while unknown)."""
        return self.drained, self.total

    def close(self, timeout: float = 30.0) -> None:
        """Stop fetching (cancelling a running Spark job) and wait for the thread."""
        with self._cond:
            self._stop = True
            self._queue.clear()
            self._cond.notify_all()
        self._cursor = None
        t = self._thread
        deadline = time.monotonic() + timeout
        # cancelled again until the thread ends: a fetch thread that claimed a partition
        # before the stop may submit its job after a cancel (CI saw close wait out its
        # timeout on a job that started just after the first cancel)
        while t is not None and t.is_alive():
            try:
                self._cancel_jobs()
            except Exception:  # noqa: BLE001 - the session may be gone already
                pass
            left = deadline - time.monotonic()
            if left <= 0:
                break
            t.join(min(left, CANCEL_AGAIN))

    def __enter__(self) -> Drain:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _take(self, item: tuple) -> Chunk | None:
        kind = item[0]
        if kind == "part":
            self._cursor = _Cursor(item[1], item[2], self.ids)
            return None
        if kind == "chunk":
            self.drained += len(item[1].rows)
            return item[1]
        self._done = True
        if kind == "error":
            exc = item[1]
            raise SparkSourceError(
                f"{where(self.component)}draining the DataFrame failed "
                f"({self.path} path): {short(exc)}"
            ) from exc
        if self.total is None and self._cursor is None:
            self.total = self.drained
        return None

    # -- fetching thread ----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._start_jobs()
            if self.count:
                self.total = count_share(self.df, self.share)
            if self.path == "arrow":
                self._run_arrow()
            if self.path == "rows":
                self._run_rows()
            self._put(("end",))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, never lost
            self._put(("end",) if self._stop or self._failed else ("error", exc))

    def _room(self) -> bool:
        """Wait for room under the bound and claim it; False once closed."""
        with self._cond:
            self._cond.wait_for(lambda: self._in_flight < self.ahead or self._stop)
            if self._stop:
                return False
            self._in_flight += 1
            return True

    def _put(self, item: tuple) -> None:
        with self._cond:
            if not (self._stop and item[0] in ("part", "chunk")):
                self._queue.append(item)
            self._cond.notify_all()

    def _run_arrow(self) -> None:
        try:
            parts = ArrowPartitions(self.df)
        except Exception as exc:  # noqa: BLE001 - internals differ: the row path still works
            self.path, self.fallback_reason = "rows", f"Arrow batch RDD unavailable: {short(exc)}"
            return
        index, count = self.share
        order = list(range(index, parts.num_partitions, count))
        todo = iter(order)
        ready: dict[int, list[Any]] = {}
        # up to `ahead` partitions are fetched at once, one Spark job each from its own
        # thread, so that Spark computes them in parallel (one job at a time kept one core
        # of local[2] busy); they are queued in partition order whatever order they finish
        helpers = [
            threading.Thread(
                target=self._fetch_loop,
                args=(parts, todo, order, ready, True),
                daemon=True,
                name=f"stormish-drain[{self.component or ''}]+{i + 1}",
            )
            for i in range(min(self.ahead, len(order)) - 1)
        ]
        for h in helpers:
            h.start()
        try:
            self._fetch_loop(parts, todo, order, ready, False)
        except BaseException:
            with self._cond:  # the helpers stop too
                self._halt = True
                self._cond.notify_all()
            raise
        finally:
            for h in helpers:
                h.join()

    def _fetch_loop(
        self, parts: Any, todo: Any, order: list[int], ready: dict[int, Any], helper: bool
    ) -> None:
        """Claim room and the next partition, fetch it, queue what is ready in order."""
        try:
            if helper:
                self._start_jobs()  # job groups are per thread
            while True:
                with self._cond:
                    self._cond.wait_for(
                        lambda: self._in_flight < self.ahead or self._stop or self._halt
                    )
                    if self._stop or self._halt:
                        return
                    p = next(todo, None)
                    if p is None:
                        return
                    self._in_flight += 1
                batches = parts.fetch(p)
                with self._cond:
                    self.fetched_partitions += 1
                    ready[p] = batches
                    while self._next_part < len(order) and order[self._next_part] in ready:
                        q = order[self._next_part]
                        if not self._stop:
                            self._queue.append(("part", q, ready.pop(q)))
                        self._next_part += 1
                    self._cond.notify_all()
        except BaseException as exc:
            if not helper:
                raise
            with self._cond:  # the main fetch thread stops; the consumer gets the error
                if not (self._stop or self._halt):
                    self._failed = self._halt = True
                    self._queue.append(("error", exc))
                self._cond.notify_all()

    def _run_rows(self) -> None:
        rows = RowPartitions(self.df, self.share).rows()
        n = self.chunk_rows
        chunk: list[tuple] = []
        part, pos, start = -1, 0, 0
        try:
            for p, row in rows:
                if p != part or len(chunk) >= n:
                    if chunk and not self._emit(Chunk(part, start, chunk)):
                        return
                    if p != part:
                        part, pos = p, 0
                        self.fetched_partitions += 1
                    chunk, start = [], pos
                chunk.append((*row, row_id(p, pos)) if self.ids else row)
                pos += 1
            if chunk:
                self._emit(Chunk(part, start, chunk))
        finally:
            rows.close()

    def _emit(self, chunk: Chunk) -> bool:
        if not self._room():
            return False
        self._put(("chunk", chunk))
        return True


def _check_args(
    chunk_rows: int, ahead: int, path: str, share: tuple[int, int], component: str | None
) -> None:
    w = where(component)
    if not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"{w}chunk_rows must be an integer >= 1, got {chunk_rows!r}")
    if not isinstance(ahead, int) or ahead < 1:
        raise ValueError(f"{w}ahead must be an integer >= 1, got {ahead!r}")
    if path not in PATHS:
        raise ValueError(f"{w}path must be one of {PATHS}, got {path!r}")
    index, count = share
    if not (
        isinstance(count, int) and count >= 1 and isinstance(index, int) and 0 <= index < count
    ):
        raise ValueError(f"{w}share must be (index, count) with 0 <= index < count, got {share!r}")
