"""Unit tests of logic (no Spark, no engine): SparkSpout's emit, replay, backpressure
and finish rules, driven by calling its methods directly. The collector methods the
runtime would bind (`emit`, `finish`) are replaced by recording functions on the
instance, and the Drain by a scripted fake."""

from __future__ import annotations

import collections

import pytest

pytest.importorskip("pyarrow")

from stormish.spark.drain import Chunk  # noqa: E402
from stormish.spark.errors import SparkSourceError, WouldBlock  # noqa: E402
from stormish.spark.spout import EMITS_PER_CALL, ROW_ID, SparkSpout, row_id, tree_rows  # noqa: E402


class FakeDrain:
    """Hands out scripted chunks; `WouldBlock` for each `None` in the script (not ready)."""

    def __init__(self, script):
        self.script = collections.deque(script)
        self.closed = False
        self.started = False
        self.pulls = 0

    def start(self):
        self.started = True

    def next_chunk_nowait(self):
        self.pulls += 1
        if not self.script:
            return None
        item = self.script.popleft()
        if item is None:
            raise WouldBlock
        return item

    def progress(self):
        return 0, 42

    def close(self):
        self.closed = True


class Recorder:
    def __init__(self):
        self.emits = []
        self.trees = []
        self.finished = 0
        self.input_finished = 0

    def emit(self, values, stream="default", anchors=None, msg_id=None):
        self.emits.append((tuple(values), msg_id))

    def emit_many(self, rows, stream="default", anchors=None, msg_id=None):
        self.trees.append(([tuple(v) for v in rows], msg_id))

    def finish(self):
        self.finished += 1

    def finish_input(self):
        self.input_finished += 1


def make(script, max_pending=None, **kw):
    """Tuple-at-a-time (ack_rows=1) unless the test says otherwise."""
    spout = SparkSpout(lambda spark: None, fields=["n"], **{"ack_rows": 1, **kw})
    rec = Recorder()
    spout.emit, spout.emit_many, spout.finish = rec.emit, rec.emit_many, rec.finish
    spout.finish_input = rec.finish_input
    drain = FakeDrain(script)
    spout._start(drain, max_pending)
    return spout, rec, drain


def chunk(p, off, n):
    return Chunk(p, off, [(f"p{p}r{off + i}",) for i in range(n)])


def test_declares_fields_plus_row_id_and_is_picklable():
    import cloudpickle

    spout = SparkSpout(lambda spark: spark.range(3), fields=["a", "b"])
    assert spout.declared_streams() == {"default": ("a", "b", ROW_ID)}
    assert SparkSpout("t", fields=["a"], id_field=None).declared_streams() == {"default": ("a",)}
    cloudpickle.loads(cloudpickle.dumps(spout))


def test_bad_arguments_are_named():
    with pytest.raises(SparkSourceError, match="function spark -> DataFrame"):
        SparkSpout(42)
    with pytest.raises(ValueError, match="batch_rows"):
        SparkSpout("t", batch_rows=0)
    for bad in (0, EMITS_PER_CALL + 1, 2.5):
        with pytest.raises(ValueError, match="ack_rows must be an integer from 1 to"):
            SparkSpout("t", ack_rows=bad)
    with pytest.raises(ValueError, match="id_field '_row_id' is also a source field"):
        SparkSpout("t", fields=["_row_id"])
    # at the topology's line, not at the first drain in a worker (a bug hunt)
    for bad in (0, True, "2"):
        with pytest.raises(ValueError, match="SparkSpout ahead must be an integer >= 1"):
            SparkSpout("t", ahead=bad)
    with pytest.raises(ValueError, match=r"SparkSpout path must be one of \('auto'"):
        SparkSpout("t", path="arow")


def test_emits_rows_with_deterministic_ids_then_finishes_when_all_acked():
    spout, rec, drain = make([chunk(0, 0, 3), chunk(1, 0, 2)])
    assert drain.started
    spout.next_tuple()
    ids = [m for _, m in rec.emits]
    assert ids == [row_id(0, 0), row_id(0, 1), row_id(0, 2), row_id(1, 0), row_id(1, 1)]
    assert rec.emits[3] == (("p1r0", row_id(1, 0)), row_id(1, 0))  # the id is the last field
    assert rec.finished == 0  # drained, but not acked yet
    assert rec.input_finished == 1  # every row emitted: a sink may commit its last batch
    for m in ids:
        spout.ack(m)
    spout.next_tuple()
    assert rec.finished == 1
    spout.next_tuple()
    assert rec.finished == 1 and len(rec.emits) == 5
    assert rec.input_finished == 1


def test_next_tuple_never_waits_for_the_drain():
    spout, rec, drain = make([None, None, chunk(0, 0, 2)])
    spout.next_tuple()
    spout.next_tuple()
    assert rec.emits == [] and rec.input_finished == 0  # nothing ready: returned at once
    spout.next_tuple()
    assert len(rec.emits) == 2


def test_failed_rows_are_replayed_first_with_the_same_values_and_id():
    spout, rec, _ = make([chunk(0, 0, 3), None, chunk(0, 3, 2)])
    spout.next_tuple()
    first = list(rec.emits)
    spout.fail(first[1][1])
    spout.fail(12345)  # unknown id: ignored
    spout.next_tuple()
    assert rec.emits[3] == first[1]
    spout.next_tuple()
    assert [m for _, m in rec.emits[4:]] == [row_id(0, 3), row_id(0, 4)]
    assert spout.replayed == 1 and spout.failed == 1


def test_finish_waits_for_replays_to_be_acked():
    spout, rec, _ = make([chunk(0, 0, 2)])
    spout.next_tuple()
    (_, a), (_, b) = rec.emits
    spout.ack(a)
    spout.fail(b)
    spout.next_tuple()  # replays b
    assert rec.finished == 0 and rec.emits[-1][1] == b
    spout.ack(b)
    spout.next_tuple()
    assert rec.finished == 1


def test_max_spout_pending_bounds_emits_and_pulls():
    spout, rec, drain = make([chunk(0, 0, 10), chunk(0, 10, 10)], max_pending=4)
    spout.next_tuple()
    assert len(rec.emits) == 4
    pulls = drain.pulls
    spout.next_tuple()
    assert len(rec.emits) == 4 and drain.pulls == pulls  # at the limit: no pull, no emit
    spout.ack(rec.emits[0][1])
    spout.fail(rec.emits[1][1])
    spout.next_tuple()  # two slots: the replay, then one new row
    assert [m for _, m in rec.emits[4:]] == [rec.emits[1][1], row_id(0, 4)]


def test_one_call_emits_at_most_emits_per_call():
    spout, rec, _ = make([chunk(0, 0, EMITS_PER_CALL + 5)])
    spout.next_tuple()
    assert len(rec.emits) == EMITS_PER_CALL
    spout.next_tuple()
    assert len(rec.emits) == EMITS_PER_CALL + 5


def test_without_id_field_values_are_the_rows():
    spout, rec, _ = make([chunk(2, 7, 1)], id_field=None)
    spout.next_tuple()
    assert rec.emits == [(("p2r7",), row_id(2, 7))]


def test_progress_and_close():
    spout, rec, drain = make([chunk(0, 0, 3)])
    spout.next_tuple()
    assert spout.progress() == (3, 42)
    spout.close()
    assert drain.closed


def test_source_kinds_and_path_errors(tmp_path):
    assert SparkSpout(str(tmp_path / "x.parquet")).format == "parquet"
    with pytest.raises(SparkSourceError, match="looks like a path: give format="):
        SparkSpout("some/dir").dataframe(None)
    with pytest.raises(SparkSourceError, match=r"source path .*nope.* does not exist"):
        SparkSpout(str(tmp_path / "nope"), format="parquet").dataframe(None)


def test_default_trees_are_whole_producer_batches():
    assert EMITS_PER_CALL == 1024
    assert tree_rows(None) == tree_rows(512) == 1024  # the engine's default batch: 2 a tree
    assert tree_rows(100) == 1000 and tree_rows(1024) == 1024 and tree_rows(1) == 1024
    assert tree_rows(600) == 600 and tree_rows(4096) == EMITS_PER_CALL


# -- trees of ack_rows rows (the default)
def test_trees_of_ack_rows_rows_one_id_each_never_across_chunks():
    spout, rec, _ = make([chunk(0, 0, 5), chunk(3, 0, 2)], ack_rows=2)
    spout.next_tuple()
    assert rec.emits == []  # every row went out in a tree
    assert [m for _, m in rec.trees] == [
        row_id(0, 0),
        row_id(0, 2),
        row_id(0, 4),  # the chunk's last row alone: a tree never spans two chunks
        row_id(3, 0),
    ]
    assert rec.trees[1][0] == [("p0r2", row_id(0, 2)), ("p0r3", row_id(0, 3))]
    for _, m in rec.trees:
        spout.ack(m)
    assert spout.acked == 7
    spout.next_tuple()
    assert rec.finished == 1


def test_a_failed_tree_is_replayed_whole_first_and_counted_in_rows():
    spout, rec, _ = make([chunk(0, 0, 4), None, chunk(0, 4, 3)], ack_rows=3)
    spout.next_tuple()
    first, second = rec.trees
    spout.fail(first[1])
    assert spout.failed == 3
    spout.next_tuple()
    assert rec.trees[2] == first  # same rows, same id
    spout.next_tuple()
    assert rec.trees[3] == (
        [("p0r4", row_id(0, 4)), ("p0r5", row_id(0, 5)), ("p0r6", row_id(0, 6))],
        row_id(0, 4),
    )
    assert spout.replayed == 3


def test_max_spout_pending_counts_trees():
    spout, rec, drain = make([chunk(0, 0, 100)], max_pending=3, ack_rows=10)
    spout.next_tuple()
    assert [len(rows) for rows, _ in rec.trees] == [10, 10, 10]
    spout.next_tuple()
    assert len(rec.trees) == 3  # at the limit
    spout.ack(rec.trees[0][1])
    spout.next_tuple()
    assert len(rec.trees) == 4 and rec.trees[3][1] == row_id(0, 30)


def test_acking_off_emits_rows_without_ids_in_one_call():
    spout = SparkSpout(lambda spark: None, fields=["n"])
    rec = Recorder()
    spout.emit, spout.emit_many, spout.finish = rec.emit, rec.emit_many, rec.finish
    spout.finish_input = rec.finish_input
    spout._start(FakeDrain([chunk(0, 0, 3)]), None, reliable=False)
    spout.next_tuple()
    spout.next_tuple()
    assert rec.trees == [
        ([("p0r0", row_id(0, 0)), ("p0r1", row_id(0, 1)), ("p0r2", row_id(0, 2))], None)
    ]
    assert rec.finished == 1
