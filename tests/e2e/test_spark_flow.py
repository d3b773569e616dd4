"""SparkSpout -> SparkSink with real Spark, wired by hand (no engine): the test plays the
runtime, calling next_tuple/execute and routing acks and fails, and injects what a
runtime can do to tuples: lost acks (timeouts), a failed commit, a sink task restart
and a whole topology restart. The output must hold every source row exactly once. The
sink commits on its commit thread; each step begins with its `on_turn`, as a runtime's
turn does (the acks of finished commits; True holds the input)."""

from __future__ import annotations

import time

import pytest

from stormish.tuple import TICK_STREAM, Source, Tuple

pytestmark = pytest.mark.spark

N = 50_000


class Wiring:
    """Routes a spout's emits to a sink and the sink's acks/fails back to the spout."""

    def __init__(self, spout, sink, conf, task_context):
        self.spout, self.conf, self.ctx = spout, conf, task_context
        self.lose_acks = 0  # acks of the next N committed tuples are lost (then time out)
        self.emitted: list = []
        self.finished = False
        spout.emit = lambda values, stream="default", anchors=None, msg_id=None: (
            self.emitted.append((values, msg_id))
        )
        spout.finish = self._finish
        spout.finish_input = lambda: None  # the engine's cue for the sink's last batch
        self.fields = spout.declared_streams()["default"]
        self.source = Source("spark", 1, "default", self.fields)
        self.attach(sink)

    def attach(self, sink):
        self.sink = sink
        sink.ack, sink.fail = self._ack, self._fail
        sink.report_error = lambda exc: None
        sink.prepare(self.conf, self.ctx("out"))

    def kill_sink(self):
        """The sink task dies: its buffered tuples and those of its pending commits
        time out (a commit may still land: its rows come back and are dropped)."""
        sink = self.sink
        assert sink._commits.wait(60)
        pending = [t for tuples, _, _ in sink._commits.done for t in tuples]
        for t in [*sink._tuples, *pending]:
            self.spout.fail(t.values[-1])
        sink._commits.done.clear()
        sink._commits.close()

    def _finish(self):
        self.finished = True

    def _ack(self, tup):
        if self.lose_acks > 0:
            self.lose_acks -= 1
            self.spout.fail(tup.values[-1])  # the tree timed out: the spout replays it
        else:
            self.spout.ack(tup.values[-1])

    def _fail(self, tup):
        self.spout.fail(tup.values[-1])

    def step(self):
        if self.sink.on_turn():  # commits_ahead batches wait for their commit
            return False
        self.spout.next_tuple()
        out, self.emitted = self.emitted, []
        for values, _ in out:
            self.sink.execute(Tuple(values, self.source))
        if not out:
            self.sink.execute(Tuple((1,), Source("__system", -1, TICK_STREAM, ("tick",))))
        return bool(out)

    def run(self, until, timeout=120.0):
        deadline = time.monotonic() + timeout
        while not until():
            if time.monotonic() > deadline:
                raise AssertionError("the flow did not reach its goal in time")
            if not self.step():
                time.sleep(0.001)  # nothing ready yet: a runtime would idle here too


def make_spout(spark_conf, task_context, conf):
    from stormish.spark import SparkSpout

    spout = SparkSpout(
        lambda s: s.range(0, N, numPartitions=4).selectExpr("id", "concat('row-', id) AS label"),
        batch_rows=5_000,
        fields=["id", "label"],
        spark_conf=spark_conf,
        ack_rows=1,  # the wiring above acks row by row, by row id
    )
    spout.open(conf, task_context("spark"))
    return spout


def test_exactly_once_through_lost_acks_failures_and_restarts(
    spark, spark_conf, task_context, tmp_path
):
    from stormish.spark import SparkSink

    out = str(tmp_path / "out")
    conf = {"topology.max.spout.pending": 8_000, "topology.message.timeout.secs": 30}
    spout = make_spout(spark_conf, task_context, conf)
    w = Wiring(spout, SparkSink(out, batch_rows=3_000, batch_seconds=0.01), conf, task_context)
    w.lose_acks = 7_000  # the first commits land, but their acks never arrive
    w.run(lambda: w.sink.rows_committed >= 12_000 and w.sink.duplicates > 0)

    # a commit fails (the sink's directory is unusable for a moment): tuples are failed
    real = w.sink._committer.commit
    w.sink._committer.commit = lambda *a: (_ for _ in ()).throw(OSError("disk full"))
    w.run(lambda: w.sink.failed_batches >= 1)
    w.sink._committer.commit = real

    # the sink task dies with a full buffer (its tuples time out) and restarts
    w.kill_sink()
    w.attach(SparkSink(out, batch_rows=3_000, batch_seconds=0.01))
    w.run(lambda: w.finished)
    w.sink.cleanup()
    assert spout.progress() == (N, N)
    assert spout.replayed >= 7_000 and spout.acked == N
    spout.close()

    # the whole topology restarts from scratch: every row comes again, nothing is written
    again = make_spout(spark_conf, task_context, conf)
    w2 = Wiring(again, SparkSink(out, batch_rows=4_000, batch_seconds=0.01), conf, task_context)
    w2.run(lambda: w2.finished)
    w2.sink.cleanup()
    again.close()
    assert w2.sink.rows_committed == 0 and w2.sink.duplicates == N

    df = spark.read.parquet(out)
    assert df.count() == N
    assert df.select("id").distinct().count() == N
    assert df.where("label != concat('row-', id)").count() == 0
    assert df.where("_row_id IS NULL").count() == 0
