"""The Spark examples in topologies/, run as a user runs them: `stormish run FILE` (and
`python FILE`) in a subprocess with its own SparkSession. What they print is checked, and
what they wrote is read back independently with the test session."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
MASTER = "local[2]"


def run(args: list[str], env: dict[str, str], timeout: float = 420) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    return r


def number(text: str) -> int:
    return int(text.replace(",", ""))


def revenue(lines: list[str], prefix: str) -> dict[str, tuple[int, str]]:
    """{region: (orders, revenue)} from lines like `<prefix> north 25,000 orders revenue 1.00`."""
    pat = re.compile(rf"^{re.escape(prefix)}\s+(\w+)\s+([\d,]+) orders\s+revenue\s+([\d,.]+)$")
    found = {}
    for line in lines:
        m = pat.match(line)
        if m:
            found[m.group(1)] = (number(m.group(2)), m.group(3))
    return found


def untagged(stdout: str) -> list[str]:
    """The output's lines without the tag of the component whose code printed them
    (`[totals:3] `: every line a component writes is tagged)."""
    return [re.sub(r"^\[[\w.-]+:\d+\] ", "", line) for line in stdout.splitlines()]


def check_etl_output(spark, out: Path, n: int) -> None:
    df = spark.read.parquet(str(out / "orders"))
    assert df.count() == n
    assert df.select("order_id").distinct().count() == n
    assert sorted(r[0] for r in df.select("region").distinct().collect()) == [
        "east",
        "north",
        "south",
        "west",
    ]


def check_etl_printout(stdout: str, n: int, out: Path) -> None:
    lines = untagged(stdout)
    bolts = revenue(lines, "totals (bolt):")
    query = revenue(lines, "spark query:")
    assert set(query) == {"north", "east", "south", "west"}
    assert bolts == query  # the bolts' in-memory totals match Spark's over the committed rows
    assert sum(orders for orders, _ in query.values()) == n
    assert (
        f"spark_etl: {n:,} rows read back, {n:,} distinct orders, {n:,} generated: "
        f"exactly once ({out / 'orders'})" in lines
    )


def test_spark_etl_with_stormish_run(spark, tmp_path):
    n = 30_000
    env = {"SPARK_ETL_OUT": str(tmp_path), "SPARK_ETL_ORDERS": str(n), "SPARK_ETL_MASTER": MASTER}
    r = run(["-m", "stormish.cli", "run", "topologies/spark_etl.py"], env)
    assert "topology 'spark-etl': complete" in r.stdout
    # the summary table: the flaky lookup failed some orders, the spout replayed them (in
    # trees of up to 1,000 rows: acked and failed count the trees' rows)
    orders = next(line.split() for line in r.stdout.splitlines() if line.startswith("orders "))
    acked, failed = number(orders[4]), number(orders[5])
    assert acked == n and failed >= n // 50
    check_etl_printout(r.stdout, n, tmp_path)
    check_etl_output(spark, tmp_path, n)


def test_spark_etl_as_a_script(spark, tmp_path):
    n = 5_000
    env = {"SPARK_ETL_OUT": str(tmp_path), "SPARK_ETL_ORDERS": str(n), "SPARK_ETL_MASTER": MASTER}
    r = run(["topologies/spark_etl.py"], env)
    assert "topology 'spark-etl': complete" in r.stdout
    check_etl_printout(r.stdout, n, tmp_path)
    check_etl_output(spark, tmp_path, n)


def test_spark_streaming_counts_each_committed_row_once_while_the_topology_runs(spark, tmp_path):
    n = 60_000
    env = {
        "SPARK_STREAMING_OUT": str(tmp_path),
        "SPARK_STREAMING_READINGS": str(n),
        "SPARK_STREAMING_MASTER": MASTER,
        "SPARK_STREAMING_TIMEOUT": "200",
    }
    r = run(["-m", "stormish.cli", "run", "topologies/spark_streaming.py"], env)
    lines = untagged(r.stdout)
    assert "topology 'spark-streaming': complete" in r.stdout
    batches = [
        tuple(number(x) for x in m.groups())
        for m in (
            re.match(
                r"^spark streaming: micro-batch\s+(\d+):\s+([\d,]+) rows, total\s+([\d,]+)$", x
            )
            for x in lines
        )
        if m
    ]
    # several micro-batches ran while the sink was committing; their rows add up to n
    assert len(batches) >= 2
    assert sum(rows for _, rows, _ in batches) == n
    assert batches[-1][2] == n
    assert len({b for b, _, _ in batches}) == len(batches)
    sink = next(x for x in lines if x.startswith("sink: "))
    m = re.match(r"sink: ([\d,]+) rows committed in \d+ batches, ([\d,]+) replayed", sink)
    assert m and number(m.group(1)) == n and number(m.group(2)) > 0  # replays were dropped
    assert (
        f"spark_streaming: stream counted {n:,}, batch query {n:,} rows ({n:,} distinct), "
        f"{n:,} generated: each row exactly once" in lines
    )
    df = spark.read.parquet(str(tmp_path / "readings"))
    assert df.count() == df.select("reading_id").distinct().count() == n
