"""SparkSink's commit thread (pyarrow, the file system and a real thread; no Spark, no
engine): a commit held by a gate must not stop the sink taking input, commits run in the
order the batches were cut, a failed commit fails exactly its batch's tuples, input is
held while `commits_ahead` batches wait, and `cleanup()` settles every queued commit.
The collector methods are recording functions on the instance, as in test_spark_sink."""

from __future__ import annotations

import threading

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from stormish.spark.errors import SparkSinkError  # noqa: E402
from stormish.spark.sink import SparkSink  # noqa: E402
from stormish.spark.spout import ROW_ID, row_id  # noqa: E402
from stormish.tuple import Source, Tuple  # noqa: E402

from .test_spark_sink import Recorder, written  # noqa: E402

pytestmark = pytest.mark.timeout(60)

SRC = Source("spout", 1, "default", ("word", "n", ROW_ID))
WAIT = 30.0


class Context:
    component_id = "out"
    task_id = 3

    def __init__(self) -> None:
        self.woken = threading.Event()

    def wake(self) -> None:
        self.woken.set()


class Gated(SparkSink):
    """Each commit waits at the gate (a slow file system); `order` records the first row
    number of each batch as its commit starts, `threads` the thread it ran on."""

    def prepare(self, conf, context):
        self.gate = threading.Event()
        self.entered = threading.Semaphore(0)
        self.order: list[int] = []
        self.threads: set[str] = set()
        super().prepare(conf, context)

    def _write(self, rows):
        self.order.append(rows[0][1])
        self.threads.add(threading.current_thread().name)
        self.entered.release()
        assert self.gate.wait(WAIT), "the test never opened the gate"
        super()._write(rows)


def make(path, **kw):
    sink = Gated(path, batch_seconds=60, **kw)
    rec = Recorder()
    sink.ack, sink.fail, sink.report_error = rec.ack, rec.fail, rec.report_error
    sink.ack_batch, sink.fail_batch = rec.ack_batch, rec.fail_batch
    ctx = Context()
    sink.prepare({}, ctx)
    return sink, rec, ctx


def tup(i, n=None):
    return Tuple((f"w{i}", i if n is None else n, row_id(0, i)), SRC)


def settle(sink):
    """What the runtime's turns do once the commits are done."""
    assert sink._commits.wait(WAIT)
    assert sink.on_turn() is False


def test_input_goes_on_while_a_commit_is_held_and_commits_keep_their_order(tmp_path):
    sink, rec, ctx = make(tmp_path, batch_rows=2, commits_ahead=2)
    sink.execute(tup(0))
    sink.execute(tup(1))  # batch 1 goes to the commit thread, which waits at the gate
    assert sink.entered.acquire(timeout=WAIT)
    assert sink.threads == {"spark-sink-commit[out:3]"}
    assert rec.acked == [] and sink.holds_work() and sink.on_turn() is False
    sink.execute(tup(2))  # the task's thread takes input meanwhile
    sink.execute(tup(3))  # batch 2 queued behind it: commits_ahead reached
    assert sink.on_turn() is True, "input not held with commits_ahead batches waiting"
    sink.execute(tup(4))  # what one turn took already is buffered, not lost
    assert written(tmp_path) == [] and rec.acked == []
    sink.gate.set()
    settle(sink)
    assert ctx.woken.is_set(), "the commit thread did not wake the task"
    assert sink.order == [0, 2]
    assert written(tmp_path) == [0, 1, 2, 3]
    assert rec.acked == [row_id(0, i) for i in range(4)] and rec.failed == []
    assert not sink.holds_work() and sink.statistics()["buffered"] == 1
    sink.cleanup()
    assert written(tmp_path) == [0, 1, 2, 3, 4] and len(rec.acked) == 5


def test_no_more_than_commits_ahead_batches_wait_whatever_one_turn_takes(tmp_path):
    """The runtime asks `on_turn` once a turn, and a turn takes up to 16 takes of the
    queue: a sink held with its queue full took the whole queue in the turn after the
    hold and cut a batch of every `batch_rows` of it (17 commits queued with
    commits_ahead=2 and batch_rows=50, on two workers). A batch due while
    commits_ahead wait is cut at the turn that finds one settled, with what the task
    took meanwhile; commits keep their order and every row is written once."""
    sink, rec, _ = make(tmp_path, batch_rows=2, commits_ahead=2)
    for i in range(10):  # one turn's input: five batches' worth
        sink.execute(tup(i))
    assert sink.statistics()["committing"] == 2, "more batches queued than commits_ahead"
    assert sink.statistics()["buffered"] == 6 and sink.holds_work()
    assert sink.on_turn() is True
    sink.gate.set()
    assert sink._commits.wait(WAIT)
    assert sink.on_turn() is False  # both settled: the due batch went to the commit thread
    assert sink.statistics()["committing"] == 1 and sink.statistics()["buffered"] == 0
    settle(sink)
    assert sink.order == [0, 2, 4]
    assert written(tmp_path) == list(range(10))
    assert rec.acked == [row_id(0, i) for i in range(10)] and rec.failed == []
    assert not sink.holds_work() and sink.statistics()["buffered"] == 0
    sink.cleanup()


def test_a_failed_commit_fails_exactly_its_batch(tmp_path):
    sink, rec, _ = make(tmp_path, batch_rows=2, commits_ahead=3)
    for t in (tup(0), tup(1), tup(2, "not an int"), tup(3, "nor this"), tup(4), tup(5)):
        sink.execute(t)
    assert sink.on_turn() is True  # three batches wait
    sink.gate.set()
    settle(sink)
    assert sink.order == [0, "not an int", 4]
    assert sorted(rec.failed) == [row_id(0, 2), row_id(0, 3)]
    assert sorted(rec.acked) == [row_id(0, i) for i in (0, 1, 4, 5)]
    assert len(rec.errors) == 1 and isinstance(rec.errors[0], SparkSinkError)
    assert "field 'n'" in str(rec.errors[0])
    assert sink.statistics()["failed_batches"] == 1
    assert written(tmp_path) == [0, 1, 4, 5]
    sink.execute(tup(2))  # the replay
    sink.execute(tup(3))
    settle(sink)
    assert written(tmp_path) == list(range(6))


def test_a_row_that_cannot_be_stored_fails_alone(tmp_path):
    """A value that does not fit its column (once typed) failed its whole batch, and its
    batch-mates came back with it on every replay: on two workers, one bad row among
    20,000 kept 1,007 good rows out for good (dead-lettered with max.replays 3; without,
    replayed for ever). It fails alone now; the rest of its batch is committed."""
    sink, rec, _ = make(tmp_path, batch_rows=3, commits_ahead=2)
    sink.gate.set()
    for t in (tup(0), tup(1), tup(2), tup(3), tup(4, "not an int"), tup(5)):
        sink.execute(t)
    settle(sink)
    assert written(tmp_path) == [0, 1, 2, 3, 5]
    assert rec.failed == [row_id(0, 4)]
    assert sorted(rec.acked) == [row_id(0, i) for i in (0, 1, 2, 3, 5)]
    (err,) = rec.errors
    assert isinstance(err, SparkSinkError)
    assert "1 of 3 rows" in str(err) and "field 'n'" in str(err)
    stats = sink.statistics()
    assert stats["rows_refused"] == 1 and stats["failed_batches"] == 0
    sink.execute(tup(4))  # the replay, fixed upstream
    sink.on_tick(end_of_input=True)
    settle(sink)
    assert written(tmp_path) == list(range(6))
    sink.cleanup()


def test_the_rows_refused_are_found_at_either_end_of_a_batch(tmp_path):
    sink, rec, _ = make(tmp_path, batch_rows=2, commits_ahead=2)
    sink.gate.set()
    sink.execute(tup(100))
    sink.execute(tup(101))  # the first batch types the columns
    settle(sink)
    sink.batch_rows = 9
    bad = {0, 4, 8}
    for i in range(9):
        sink.execute(tup(i, [i] if i in bad else None))
    settle(sink)
    assert sorted(rec.failed) == [row_id(0, i) for i in sorted(bad)]
    assert written(tmp_path) == [1, 2, 3, 5, 6, 7, 100, 101]
    assert "3 of 9 rows" in str(rec.errors[0])
    sink.cleanup()


def test_cleanup_waits_for_the_queued_commits_and_settles_them(tmp_path):
    sink, rec, _ = make(tmp_path, batch_rows=2, commits_ahead=2)
    for i in range(5):
        sink.execute(tup(i))
    assert sink.entered.acquire(timeout=WAIT)
    done = threading.Event()

    def stop():
        sink.cleanup()
        done.set()

    stopper = threading.Thread(target=stop)
    stopper.start()
    try:
        # cleanup must not return while a commit is held (bounded look, not a sleep-sync)
        assert not done.wait(0.3), "cleanup returned before its commits ran"
        assert rec.acked == []
    finally:
        sink.gate.set()
        stopper.join(WAIT)
    assert done.is_set()
    assert written(tmp_path) == list(range(5))
    assert sorted(rec.acked) == [row_id(0, i) for i in range(5)]
    assert sink.order == [0, 2, 4] and not sink.holds_work()
    assert not sink._commits._thread.is_alive()


def test_commits_ahead_zero_commits_on_the_callers_thread(tmp_path):
    sink, rec, _ = make(tmp_path, batch_rows=2, commits_ahead=0)
    sink.gate.set()
    sink.execute(tup(0))
    sink.execute(tup(1))
    assert sink.threads == {threading.current_thread().name}
    assert rec.acked == [row_id(0, 0), row_id(0, 1)] and sink.on_turn() is False


def test_commits_ahead_is_checked(tmp_path):
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="commits_ahead"):
            SparkSink(tmp_path, commits_ahead=bad)
