"""Spark ETL: a Spark job's output -> enrich and aggregate in bolts -> exactly-once Parquet
-> a Spark query over what was committed.

    orders   SparkSpout: drains a Spark job (N generated orders: id, customer, amount)
      -> enrich     looks up the customer's region and tier, adds the tax (shuffle);
                    a flaky lookup fails every 50th order the first time an enrich task
                    sees it, and the spout replays it
      -> totals     orders and revenue per region (fields grouping on region), printed
                    when the topology stops
      -> sink       SparkSink: micro-batches of 10,000 rows committed exactly once as
                    Parquet under $SPARK_ETL_OUT/orders (fields grouping on _row_id)
    after_run   a Spark query reads $SPARK_ETL_OUT/orders back and prints revenue per
                region and tier, and whether every order landed exactly once

Run it:  stormish run topologies/spark_etl.py     (or: python topologies/spark_etl.py)

Run it again with the same SPARK_ETL_OUT and nothing new is written: every row's key is
in the sink's ledger (the committed files), so the output stays exactly once.

Settings (environment variables; topology config keys are checked against a fixed list,
so an example's own settings cannot go there):
    SPARK_ETL_OUT     output directory (default: a new temporary directory, printed)
    SPARK_ETL_ORDERS  how many orders the Spark job generates (default 100000)
    SPARK_ETL_MASTER  Spark master for the spout and the query (default: stormish.spark's
                      local[*], loopback only, UI off)

`after_run(stats)` is what runs "after the run": `stormish run` calls a topology file's
`after_run` with the final statistics once the topology completed and the cluster shut
down; `python topologies/spark_etl.py` does the same, and
`python topologies/spark_etl.py --after-run` runs only the query (on $SPARK_ETL_OUT).
"""

from __future__ import annotations

import os
import sys
import tempfile

from stormish import BasicBolt, Bolt, Topology
from stormish.spark import ROW_ID, SparkSink, SparkSpout

ORDERS = int(os.environ.get("SPARK_ETL_ORDERS", "100000"))
OUT = os.path.abspath(
    os.environ.get("SPARK_ETL_OUT") or tempfile.mkdtemp(prefix="stormish-spark-etl-")
)
MASTER = os.environ.get("SPARK_ETL_MASTER")
SPARK_CONF = {"stormish.spark.master": MASTER} if MASTER else {}
ORDERS_PATH = os.path.join(OUT, "orders")

REGIONS = ("north", "east", "south", "west")
TAX_PERCENT = {"north": 20, "east": 19, "south": 10, "west": 8}
FAIL_EVERY = 50  # the flaky lookup fails orders whose id is a multiple of this, once


def orders(spark):
    """The Spark job whose output the topology drains: deterministic generated orders
    (a range with a fixed partitioning, so each row keeps its id across runs)."""
    return spark.range(0, ORDERS, numPartitions=4).selectExpr(
        "id AS order_id",
        "CAST(id * 7919 % 5000 AS INT) AS customer",
        "CAST(id * 104729 % 50000 + 100 AS BIGINT) AS amount_cents",
    )


class Enrich(Bolt):
    """Region and tier of the customer (a lookup), and the tax. Every FAIL_EVERY-th order
    fails the first time this task sees it, as a lookup that timed out would: the tuple
    is failed, SparkSpout replays the row (to either task), the sink still writes it once."""

    outputs = ["order_id", "customer", "region", "tier", "amount_cents", "total_cents", ROW_ID]

    def prepare(self, conf, context):
        self.seen_failing: set[int] = set()

    def execute(self, tup):
        order_id, customer, amount, row_id = tup.values
        if order_id % FAIL_EVERY == 0 and order_id not in self.seen_failing:
            self.seen_failing.add(order_id)
            self.fail(tup)
            return
        region = REGIONS[customer % len(REGIONS)]
        tier = "gold" if customer % 10 == 0 else "silver" if customer % 3 == 0 else "bronze"
        total = amount + amount * TAX_PERCENT[region] // 100
        self.emit([order_id, customer, region, tier, amount, total, row_id], anchors=[tup])
        self.ack(tup)


class Totals(BasicBolt):
    """Orders and revenue per region, in memory; printed when the topology stops. Input is
    at least once: a failed order fails its whole tree (SparkSpout acks 1,000 rows under
    one message id), so the tree's other orders come here twice. Each order id counts once."""

    def prepare(self, conf, context):
        self.totals: dict[str, list[int]] = {}
        self.counted: set[int] = set()

    def execute(self, tup):
        order_id = tup["order_id"]
        if order_id in self.counted:
            return
        self.counted.add(order_id)
        t = self.totals.setdefault(tup["region"], [0, 0])
        t[0] += 1
        t[1] += tup["total_cents"]

    def cleanup(self):
        for region, (n, cents) in sorted(self.totals.items()):
            print(f"totals (bolt): {region:<6} {n:>8,} orders  revenue {cents / 100:>14,.2f}")


topology = Topology(
    "spark-etl",
    # pending counts message ids: 50 trees of up to 1,000 rows
    config={"topology.max.spout.pending": 50, "topology.message.timeout.secs": 60},
)
topology.set_spout(
    "orders",
    SparkSpout(orders, fields=["order_id", "customer", "amount_cents"], spark_conf=SPARK_CONF),
)
topology.set_bolt("enrich", Enrich(), parallelism=2).shuffle_grouping("orders")
topology.set_bolt("totals", Totals(), parallelism=2).fields_grouping("enrich", ["region"])
topology.set_bolt(
    "sink", SparkSink(ORDERS_PATH, batch_rows=10_000, batch_seconds=1.0), parallelism=2
).fields_grouping("enrich", [ROW_ID])


def after_run(stats=None) -> None:
    """Read what the sink committed with Spark and print it. `stats`: the topology's
    final statistics when the caller has them."""
    if stats is not None and stats.status != "complete":
        print(f"spark_etl: the topology ended {stats.status!r}; reading what was committed")
    if not _committed_files(ORDERS_PATH):
        print(f"spark_etl: nothing committed under {ORDERS_PATH}")
        return
    from pyspark.sql import functions as F

    from stormish.spark import session

    spark = session(SPARK_CONF)
    df = spark.read.parquet(ORDERS_PATH)
    per_region = (
        df.groupBy("region")
        .agg(F.count("*").alias("orders"), F.sum("total_cents").alias("cents"))
        .orderBy("region")
        .collect()
    )
    for r in per_region:
        print(
            f"spark query:   {r.region:<6} {r.orders:>8,} orders  revenue {r.cents / 100:>14,.2f}"
        )
    for r in df.groupBy("tier").agg(F.sum("total_cents").alias("cents")).orderBy("tier").collect():
        print(f"spark query:   tier {r.tier:<6} revenue {r.cents / 100:>14,.2f}")
    rows, distinct = df.agg(F.count("*"), F.countDistinct("order_id")).first()
    verdict = "exactly once" if rows == distinct == ORDERS else "NOT exactly once"
    print(
        f"spark_etl: {rows:,} rows read back, {distinct:,} distinct orders, "
        f"{ORDERS:,} generated: {verdict} ({ORDERS_PATH})"
    )


def _committed_files(path: str) -> list[str]:
    try:
        return [f for f in os.listdir(path) if f.endswith(".parquet")]
    except FileNotFoundError:
        return []


if __name__ == "__main__" and sys.argv[1:] == ["--after-run"]:
    after_run()
elif __name__ == "__main__":
    from stormish import LocalCluster

    print(f"spark_etl: {ORDERS:,} orders -> {ORDERS_PATH}")
    with LocalCluster() as cluster:
        cluster.submit(topology)
        final = cluster.wait_complete(topology.name, timeout=600)
    orders_stats = final.components["orders"]
    print(
        f"topology {final.name!r}: {final.status} after {final.uptime_seconds:.1f}s; "
        f"spout acked {orders_stats.acked:,}, failed and replayed {orders_stats.failed:,}"
    )
    after_run(final)
