"""The SparkSession the connectors use: local and private by default, any master by config.

Defaults, and why:
- `local[*]`: the common case is one machine; a cluster is one config key away.
- driver and block manager bound to 127.0.0.1, UI off: a default Spark listens on every
  interface (UI on 4040, driver and block manager on random ports). A stream engine
  that is "safe on a network" must not open those by surprise.
- `spark.sql.shuffle.partitions` 4: the default 200 makes every small shuffle 200
  tasks; on a laptop or a 2-core box that is pure overhead.
- Arrow on: createDataFrame from pandas/Arrow and toPandas use it.
- `PYSPARK_PYTHON`/`PYSPARK_DRIVER_PYTHON` = this interpreter when unset: otherwise
  Spark's Python workers may start another interpreter, without pyarrow.

Config keys read (from the topology config handed to `open`/`prepare`, or any mapping):
- `stormish.spark.master`: `local[N]`, `spark://host:port`, or `sc://host:port` (Spark
  Connect, through `SparkSession.builder.remote`).
- `stormish.spark.conf.<key>`: passed to the builder as `<key>` (wins over defaults).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from typing import Any

from ..config import SPARK_MASTER, SPARK_MASTER_FORMS

MASTER_KEY = "stormish.spark.master"
CONF_PREFIX = "stormish.spark.conf."
DEFAULT_MASTER = "local[*]"

DEFAULTS: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}
LOG_LEVEL = "ERROR"

_lock = threading.Lock()
# what Spark's SparkContext accepts (SparkContext.createTaskScheduler), and Connect's sc://:
# the rule the config key is checked by at submit (config.py), and here again at open
MASTER = SPARK_MASTER


def check_master(master: str) -> str:
    """`master` when Spark would take it; else a ValueError naming the key (Spark's own
    answer is a JVM that exits, reported as JAVA_GATEWAY_EXITED). A topology's
    `stormish.spark.master` was checked at submit already; a conf handed to
    `session(conf)` directly comes here unchecked."""
    if not MASTER.match(master):
        raise ValueError(f"{MASTER_KEY} {master!r} {SPARK_MASTER_FORMS}")
    return master


def spark_options(conf: Mapping[str, Any] | None) -> tuple[str, dict[str, str]]:
    """(master, Spark conf) from a stormish config mapping: pure, for tests and errors."""
    conf = conf or {}
    master = check_master(str(conf.get(MASTER_KEY) or DEFAULT_MASTER))
    options = dict(DEFAULTS)
    if master.startswith("sc://"):
        options = {}  # a Connect client has no driver of its own to bind or configure
    for key, value in conf.items():
        if key.startswith(CONF_PREFIX) and len(key) > len(CONF_PREFIX):
            options[key[len(CONF_PREFIX) :]] = _conf_str(value)
    return master, options


def _conf_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def session(conf: Mapping[str, Any] | None = None) -> Any:
    """A SparkSession for `conf`: the active one when its master matches, else a new one.

    Only one SparkContext can live in a process, so an active session with another
    master is an error rather than a silent reuse of the wrong cluster.
    """
    master, options = spark_options(conf)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # also silences a warning
    with _lock:
        if master.startswith("sc://"):
            return _connect(master, options)
        return _classic(master, options)


def _classic(master: str, options: dict[str, str]) -> Any:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession() or _instantiated()
    if active is not None and not _is_stopped(active):
        running = active.sparkContext.master
        if running != master:
            raise RuntimeError(
                f"a SparkSession with master {running!r} is already running in this "
                f"process; set {MASTER_KEY}={running!r} or stop it first (wanted {master!r})"
            )
        _set_runtime_sql(active, options)
        return active
    builder = SparkSession.builder.master(master).appName("stormish")
    for key, value in options.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(LOG_LEVEL)
    return spark


def _connect(url: str, options: dict[str, str]) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(url)
    for key, value in options.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _instantiated() -> Any:
    from pyspark.sql import SparkSession

    return getattr(SparkSession, "_instantiatedSession", None)


def _is_stopped(spark: Any) -> bool:
    sc = getattr(spark, "_sc", None)
    return sc is None or getattr(sc, "_jsc", None) is None


def _set_runtime_sql(spark: Any, options: dict[str, str]) -> None:
    """On a reused session only runtime SQL settings can change; set those we were given
    explicitly (not our defaults: the session's owner chose its own)."""
    for key, value in options.items():
        if key.startswith("spark.sql.") and DEFAULTS.get(key) != value:
            try:
                spark.conf.set(key, value)
            except Exception:  # noqa: BLE001 - a static key: the session keeps its value
                pass
