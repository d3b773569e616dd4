"""Unit tests of logic (pyarrow and the file system, no Spark, no engine): SparkSink's
batching, ack-after-commit, fail-on-error and exactly-once rules, driven by calling its
methods directly with the collector methods (`ack`, `fail`, `report_error`) replaced by
recording functions on the instance and a settable clock. Every rule test runs twice:
committing on the task's thread (`commits_ahead=0`) and on the commit thread, where each
call is followed by what the runtime's next turn does (wait for the commit, `on_turn`).
The commit thread's own behaviour (order, input going on, failures, cleanup), with a
commit held by a gate: test_spark_sink_thread.py."""

from __future__ import annotations

import os
import random

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from stormish.spark.errors import SparkSinkError  # noqa: E402
from stormish.spark.sink import TICK_KEY, SparkSink  # noqa: E402
from stormish.spark.spout import ROW_ID, row_id  # noqa: E402
from stormish.tuple import TICK_STREAM, Source, Tuple, TupleBatch  # noqa: E402

SRC = Source("spout", 1, "default", ("word", "n", ROW_ID))
TICK = Tuple((1,), Source("__system", -1, TICK_STREAM, ("tick",)))


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


class Recorder:
    def __init__(self):
        self.acked, self.failed, self.errors = [], [], []

    def ack(self, tup):
        self.acked.append(tup.values[-1])

    def fail(self, tup):
        self.failed.append(tup.values[-1])

    def ack_batch(self, batch):
        self.acked.extend(v[-1] for v in batch.values)

    def fail_batch(self, batch):
        self.failed.extend(v[-1] for v in batch.values)

    def report_error(self, exc):
        self.errors.append(exc)


class Context:
    component_id = "out"


class Synced(SparkSink):
    """After each call, what the runtime does next: wait for the commit thread, then
    `on_turn` settles (the commit thread's results are otherwise settled later)."""

    def execute(self, tup):
        super().execute(tup)
        self.sync()

    def execute_batch(self, batch):
        super().execute_batch(batch)
        self.sync()

    def flush(self):
        super().flush()
        self.sync()

    def sync(self):
        if self._commits is not None:
            assert self._commits.wait(30)
            self.on_turn()


AHEAD = {"n": 2}


@pytest.fixture(autouse=True, params=[0, 2], ids=["inline", "thread"])
def commits_ahead(request):
    """The rule tests, with commits on the task's thread and on the commit thread."""
    AHEAD["n"] = request.param
    return request.param


def make(path, clock=None, cls=None, **kw):
    kw.setdefault("commits_ahead", AHEAD["n"])
    sink = (cls or Synced)(path, clock=clock or Clock(), **kw)
    rec = Recorder()
    sink.ack, sink.fail, sink.report_error = rec.ack, rec.fail, rec.report_error
    sink.ack_batch, sink.fail_batch = rec.ack_batch, rec.fail_batch
    sink.prepare({}, Context())
    return sink, rec


def tup(i, source=SRC):
    return Tuple((f"w{i}", i, row_id(0, i)), source)


def written(path) -> list:
    files = sorted(f for f in os.listdir(path) if f.endswith(".parquet"))
    if not files:
        return []
    t = pa.concat_tables(pq.read_table(os.path.join(path, f)) for f in files)
    return sorted(t.column("n").to_pylist())


def test_declares_ticks_and_checks_arguments(tmp_path):
    import cloudpickle

    sink = SparkSink(tmp_path, batch_seconds=4)
    assert sink.component_config == {TICK_KEY: 2.0}
    assert sink.declared_streams() == {}
    cloudpickle.loads(cloudpickle.dumps(sink))
    with pytest.raises(ValueError, match="mode must be 'append'"):
        SparkSink(tmp_path, mode="overwrite")
    with pytest.raises(ValueError, match="batch_seconds"):
        SparkSink(tmp_path, batch_seconds=0)
    with pytest.raises(ValueError, match="exactly one of path= or table="):
        SparkSink()


def test_commits_by_size_and_acks_only_after_the_commit(tmp_path):
    sink, rec = make(tmp_path, batch_rows=3)
    sink.execute(tup(0))
    sink.execute(tup(1))
    assert rec.acked == [] and written(tmp_path) == []
    sink.execute(tup(2))
    assert written(tmp_path) == [0, 1, 2]
    assert rec.acked == [row_id(0, i) for i in range(3)]


def test_tick_commits_only_a_batch_older_than_batch_seconds(tmp_path):
    clock = Clock()
    sink, rec = make(tmp_path, clock=clock, batch_rows=100, batch_seconds=5)
    sink.execute(TICK)  # nothing buffered
    sink.execute(tup(0))
    clock.t += 4.9
    sink.execute(TICK)
    assert rec.acked == []
    clock.t += 0.2
    sink.execute(TICK)
    assert written(tmp_path) == [0] and len(rec.acked) == 1


def test_end_of_input_commits_the_last_batch_at_once(tmp_path):
    from stormish.tuple import END_OF_INPUT

    assert SparkSink.closes_at_end_of_input  # the engine sends it the last tick

    class Col:
        current = None

    end_src = Source("__system", -1, TICK_STREAM, ("tick",))
    clock = Clock()
    sink, rec = make(tmp_path, clock=clock, batch_rows=100, batch_seconds=5)
    sink.execute(tup(0))
    sink.execute(TICK)
    assert rec.acked == []  # young: a plain tick waits
    sink.execute(Tuple((END_OF_INPUT,), end_src))
    assert written(tmp_path) == [0] and len(rec.acked) == 1
    sink.execute_batch(TupleBatch([(f"w{i}", i, row_id(0, i)) for i in (1, 2)], SRC, None, Col()))
    sink.execute_batch(TupleBatch([(END_OF_INPUT,)], end_src, None, Col()))
    assert written(tmp_path) == [0, 1, 2] and len(rec.acked) == 3


def test_a_float_key_column_is_digested_like_any_non_int_key(tmp_path):
    src = Source("spout", 1, "default", ("k", "v"))
    sink, rec = make(tmp_path, batch_rows=4, key="k")
    for k in (1.5, 2.5, 1.5, 3.5):
        sink.execute(Tuple((k, "x"), src))
    assert sink.rows_committed == 3 and sink.duplicates == 1 and len(rec.acked) == 4
    got = pq.read_table(tmp_path).column("k").to_pylist()
    assert sorted(got) == [1.5, 2.5, 3.5]


def test_replays_in_any_grouping_are_written_once(tmp_path):
    sink, rec = make(tmp_path, batch_rows=7)
    n = 50
    for i in range(n):
        sink.execute(tup(i))
    sink.flush()
    # acks lost: every row comes back, shuffled and cut into other batches, mixed with new
    replay = [tup(i) for i in range(n + 20)]
    random.Random(1).shuffle(replay)
    for t in replay:
        sink.execute(t)
    sink.flush()
    assert written(tmp_path) == list(range(n + 20))
    assert sink.duplicates == n and rec.failed == []
    assert sorted(rec.acked) == sorted(
        [row_id(0, i) for i in range(n)] * 2 + [row_id(0, i) for i in range(n, n + 20)]
    )


def test_duplicates_inside_one_batch_are_written_once(tmp_path):
    sink, rec = make(tmp_path, batch_rows=100)
    for i in (1, 2, 1, 3, 2):
        sink.execute(tup(i))
    sink.flush()
    assert written(tmp_path) == [1, 2, 3] and len(rec.acked) == 5


def test_restart_keeps_exactly_once(tmp_path):
    sink, _ = make(tmp_path, batch_rows=10)
    for i in range(25):
        sink.execute(tup(i))
    sink.cleanup()  # flushes the last 5
    again, rec = make(tmp_path, batch_rows=10)  # a new task on the same output
    for i in range(40):
        again.execute(tup(i))
    again.cleanup()
    assert written(tmp_path) == list(range(40))
    assert again.duplicates == 25 and len(rec.acked) == 40


def test_a_failed_commit_fails_its_tuples_and_a_later_replay_succeeds(tmp_path):
    sink, rec = make(tmp_path, batch_rows=2)
    sink.execute(tup(0))
    sink.execute(Tuple(("w1", "not an int", row_id(0, 1)), SRC))  # fails the cast
    assert rec.failed == [row_id(0, 0), row_id(0, 1)] and rec.acked == []
    assert isinstance(rec.errors[0], SparkSinkError)
    assert "component 'out'" in str(rec.errors[0]) and "field 'n'" in str(rec.errors[0])
    sink.execute(tup(0))
    sink.execute(tup(1))
    assert written(tmp_path) == [0, 1] and len(rec.acked) == 2


def test_missing_key_field_fails_tuples_with_a_clear_error(tmp_path):
    sink, rec = make(tmp_path, key="id")
    sink.execute(tup(0))
    assert rec.failed == [row_id(0, 0)]
    assert "key field 'id' is not among the input fields" in str(rec.errors[0])


def test_content_keys_when_key_is_none(tmp_path):
    src = Source("b", 1, "default", ("word", "n"))
    sink, rec = make(tmp_path, key=None, batch_rows=2)
    acked = []
    sink.ack = lambda t: acked.append(t.values)
    for v in [("a", 1), ("b", 2), ("a", 1), ("c", 3)]:
        sink.execute(Tuple(v, src))
    assert written(tmp_path) == [1, 2, 3] and len(acked) == 4


def test_input_with_other_fields_is_failed(tmp_path):
    sink, rec = make(tmp_path)
    sink.execute(tup(0))
    other = Source("x", 2, "default", ("a", "b", ROW_ID))
    sink.execute(tup(1, other))
    assert rec.failed == [row_id(0, 1)] and "differ from the first input" in str(rec.errors[0])


def test_execute_batch_buffers_values_and_acks_tuples(tmp_path):
    sink, rec = make(tmp_path, batch_rows=3)

    class Col:
        current = None

    values = [(f"w{i}", i, row_id(0, i)) for i in range(4)]
    sink.execute_batch(TupleBatch(values, SRC, None, Col()))
    assert written(tmp_path) == [0, 1, 2, 3] and len(rec.acked) == 4
    tick = TupleBatch([(1,)], Source("__system", -1, TICK_STREAM, ("tick",)), None, Col())
    sink.execute_batch(tick)
    assert len(rec.acked) == 4


def test_unwritable_path_fails_at_prepare_naming_component_and_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    sink = SparkSink(blocker / "out")
    with pytest.raises(SparkSinkError, match=r"component 'out': cannot create sink path .*out"):
        sink.prepare({}, Context())
