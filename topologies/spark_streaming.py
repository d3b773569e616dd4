"""Feeding a Spark job while the topology runs: Structured Streaming over SparkSink's output.

    readings  SparkSpout: drains a Spark job (N generated sensor readings)
      -> sink       SparkSink: micro-batches of 5,000 rows, each committed exactly once as
                    one Parquet file under $SPARK_STREAMING_OUT/readings
      -> audit      a second consumer that fails every 20th reading once, after the sink
                    may have committed it: the spout replays it, the sink drops the copy
    counts    a spout hosting a Structured Streaming query: `readStream` on the sink's
              directory (checkpointed), one row count per micro-batch, started in `open`
              while the sink is writing; each count comes into the topology as a tuple
      -> report     prints each micro-batch and the running total; the spout finishes
                    once the stream has counted all N readings
    after_run       prints the stream's total next to a batch query over the same files

Each committed batch is one file published by an atomic rename, and the streaming file
source reads each file once (its checkpoint remembers which): the stream's total is N
exactly, however many tuples were replayed. Run it again on the same directory and
nothing new is committed or counted: the total stays N.

Run it:  stormish run topologies/spark_streaming.py   (or: python topologies/spark_streaming.py)

Settings (environment variables):
    SPARK_STREAMING_OUT       output directory (default: a new temporary directory)
    SPARK_STREAMING_READINGS  how many readings the Spark job generates (default 100000)
    SPARK_STREAMING_MASTER    Spark master (default: stormish.spark's local[*])
    SPARK_STREAMING_TIMEOUT   seconds the counts spout waits for a new micro-batch before
                              it gives up and finishes (default 120)

`python topologies/spark_streaming.py --after-run` runs only the final check (on
$SPARK_STREAMING_OUT); `stormish run` calls `after_run(stats)` once the topology
completed.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import tempfile
import time

from stormish import BasicBolt, Bolt, Spout, Topology
from stormish.spark import ROW_ID, SparkSink, SparkSpout

READINGS = int(os.environ.get("SPARK_STREAMING_READINGS", "100000"))
OUT = os.path.abspath(
    os.environ.get("SPARK_STREAMING_OUT") or tempfile.mkdtemp(prefix="stormish-spark-stream-")
)
MASTER = os.environ.get("SPARK_STREAMING_MASTER")
SPARK_CONF = {"stormish.spark.master": MASTER} if MASTER else {}
TIMEOUT = float(os.environ.get("SPARK_STREAMING_TIMEOUT", "120"))
READINGS_PATH = os.path.join(OUT, "readings")
CHECKPOINT = os.path.join(OUT, "checkpoint")
COUNTS_FILE = os.path.join(OUT, "stream_counts.json")
FILES_PER_MICRO_BATCH = 4  # committed batches (files) a micro-batch takes at most
# what SparkSink writes: the spout's fields and its row id (pyarrow: int64, string, double)
SCHEMA = f"reading_id BIGINT, sensor STRING, celsius DOUBLE, {ROW_ID} BIGINT"


def readings(spark):
    """The Spark job whose output the topology drains."""
    return spark.range(0, READINGS, numPartitions=4).selectExpr(
        "id AS reading_id",
        "concat('sensor-', id % 40) AS sensor",
        "CAST(id * 37 % 400 AS DOUBLE) / 10.0 AS celsius",
    )


class Audit(Bolt):
    """Fails every 20th reading the first time it sees it, whether or not the sink has
    committed it: the whole tuple tree is replayed."""

    def prepare(self, conf, context):
        self.failed_once: set[int] = set()

    def execute(self, tup):
        rid = tup["reading_id"]
        if rid % 20 == 0 and rid not in self.failed_once:
            self.failed_once.add(rid)
            self.fail(tup)
        else:
            self.ack(tup)


class Sink(SparkSink):
    """SparkSink that prints its counters when it stops."""

    def cleanup(self):
        super().cleanup()
        s = self.statistics()
        print(
            f"sink: {s['rows_committed']:,} rows committed in {s['batches']} batches, "
            f"{s['duplicates_dropped']:,} replayed duplicates dropped"
        )


class StreamingCounts(Spout):
    """Hosts a Structured Streaming query over `path` and emits (micro_batch, rows, total)
    for each micro-batch; finishes once `expected` rows were counted, or after `timeout`
    seconds with no new micro-batch."""

    outputs = ["micro_batch", "rows", "total"]

    def __init__(self, path, checkpoint, expected, timeout=120.0, spark_conf=None):
        self.path, self.checkpoint, self.expected = path, checkpoint, expected
        self.timeout, self.spark_conf = timeout, dict(spark_conf or {})

    def open(self, conf, context):
        from stormish.spark import session

        spark = session(self.spark_conf)
        os.makedirs(self.path, exist_ok=True)  # the sink may not have created it yet
        # counts of an earlier run on the same checkpoint: the query resumes after them
        # (written after Spark's checkpoint, so a crash in between loses that count; a
        # real job would commit its result and its progress together)
        self.counts: dict[int, int] = {int(k): v for k, v in _read_json(COUNTS_FILE).items()}
        self.ready: queue.SimpleQueue = queue.SimpleQueue()
        self.last_news = self.next_check = time.monotonic()
        self.query = (
            spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", FILES_PER_MICRO_BATCH)
            .parquet(self.path)
            .writeStream.foreachBatch(self._count)
            .option("checkpointLocation", self.checkpoint)
            .trigger(processingTime="500 milliseconds")
            .start()
        )

    def _count(self, df, micro_batch):
        """Spark calls this for each micro-batch, on a thread of its own."""
        self.ready.put((micro_batch, df.count()))

    def next_tuple(self):
        while True:
            try:
                micro_batch, rows = self.ready.get_nowait()
            except queue.Empty:
                break
            # a micro-batch Spark retries has the same id: it replaces, never adds
            self.counts[micro_batch] = rows
            total = sum(self.counts.values())
            self.emit([micro_batch, rows, total])
            self.last_news = time.monotonic()
            _write_json(COUNTS_FILE, {str(k): v for k, v in sorted(self.counts.items())})
        total = sum(self.counts.values())
        now = time.monotonic()
        if total >= self.expected:
            self.finish()
        elif now >= self.next_check:  # at most once a second: a call into the JVM
            self.next_check = now + 1.0
            failure = self.query.exception()
            if failure is not None or now - self.last_news > self.timeout:
                why = failure or f"no micro-batch for {self.timeout:g}s"
                print(f"counts: stopping at {total:,} of {self.expected:,} rows: {why}")
                self.finish()

    def close(self):
        query = getattr(self, "query", None)
        if query is not None:
            query.stop()


class Report(BasicBolt):
    def execute(self, tup):
        micro_batch, rows, total = tup.values
        print(f"spark streaming: micro-batch {micro_batch:>3}: {rows:>7,} rows, total {total:>9,}")


topology = Topology(
    "spark-streaming",
    config={"topology.max.spout.pending": 20_000, "topology.message.timeout.secs": 60},
)
topology.set_spout(
    "readings",
    SparkSpout(readings, fields=["reading_id", "sensor", "celsius"], spark_conf=SPARK_CONF),
)
topology.set_bolt("sink", Sink(READINGS_PATH, batch_rows=5_000, batch_seconds=0.5)).fields_grouping(
    "readings", [ROW_ID]
)
topology.set_bolt("audit", Audit()).shuffle_grouping("readings")
topology.set_spout(
    "counts", StreamingCounts(READINGS_PATH, CHECKPOINT, READINGS, TIMEOUT, SPARK_CONF)
)
topology.set_bolt("report", Report()).global_grouping("counts")


def after_run(stats=None) -> None:
    """Print the stream's total next to a batch query over the same committed files."""
    counts = _read_json(COUNTS_FILE)
    streamed = sum(counts.values())
    print(f"spark streaming: {streamed:,} rows counted in {len(counts)} micro-batches")
    if not os.path.isdir(READINGS_PATH) or not any(
        f.endswith(".parquet") for f in os.listdir(READINGS_PATH)
    ):
        print(f"spark_streaming: nothing committed under {READINGS_PATH}")
        return
    from pyspark.sql import functions as F

    from stormish.spark import session

    df = session(SPARK_CONF).read.parquet(READINGS_PATH)
    rows, distinct = df.agg(F.count("*"), F.countDistinct("reading_id")).first()
    ok = streamed == rows == distinct == READINGS
    print(
        f"spark_streaming: stream counted {streamed:,}, batch query {rows:,} rows "
        f"({distinct:,} distinct), {READINGS:,} generated: "
        f"{'each row exactly once' if ok else 'NOT exactly once'}"
    )


def _read_json(path: str) -> dict:
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return {}


def _write_json(path: str, data: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


if __name__ == "__main__" and sys.argv[1:] == ["--after-run"]:
    after_run()
elif __name__ == "__main__":
    from stormish import LocalCluster

    print(f"spark_streaming: {READINGS:,} readings -> {READINGS_PATH}")
    with LocalCluster() as cluster:
        cluster.submit(topology)
        final = cluster.wait_complete(topology.name, timeout=600)
    src = final.components["readings"]
    print(
        f"topology {final.name!r}: {final.status} after {final.uptime_seconds:.1f}s; "
        f"readings acked {src.acked:,}, failed and replayed {src.failed:,}"
    )
    after_run(final)
