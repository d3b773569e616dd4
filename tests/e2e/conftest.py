"""Fixtures for the end-to-end tests.

Spark (`@pytest.mark.spark`): one SparkSession for the whole run (a JVM costs 3-5 s to
start and ~400 MB), local[2], bound to loopback, its warehouse under the run's tmp dir.
Without `java` on PATH every Spark test is skipped, with the reason printed.
When the Spark Connect client's dependencies (grpcio) are installed, the same JVM also
serves Spark Connect on a free loopback port, for the tests of the Connect path.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import time

import pytest

SPARK_MASTER = "local[2]"
NO_JAVA = "java is not on PATH: the Spark tests need a JVM (Java 17)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"


@pytest.fixture(scope="session")
def spark_conf(tmp_path_factory) -> dict:
    """The stormish config every Spark test (and every SparkSpout/SparkSink) uses."""
    conf = {
        "stormish.spark.master": SPARK_MASTER,
        "stormish.spark.conf.spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
    }
    if importlib.util.find_spec("grpc") is not None:
        conf.update(
            {
                "stormish.spark.conf.spark.plugins": CONNECT_PLUGIN,
                "stormish.spark.conf.spark.connect.grpc.binding.address": "127.0.0.1",
                "stormish.spark.conf.spark.connect.grpc.binding.port": _free_port(),
            }
        )
    return conf


@pytest.fixture(scope="session")
def spark(spark_conf):
    if shutil.which("java") is None:
        print(f"\nSKIPPED Spark tests: {NO_JAVA}")
        pytest.skip(NO_JAVA)
    pytest.importorskip("pyspark")
    from stormish.spark.session import session

    started = time.monotonic()
    s = session(spark_conf)
    print(
        f"\nSparkSession {s.version} ({SPARK_MASTER}) started in {time.monotonic() - started:.1f}s"
    )
    yield s
    s.stop()


@pytest.fixture(scope="session")
def connect_url(spark, spark_conf) -> str:
    port = spark_conf.get("stormish.spark.conf.spark.connect.grpc.binding.port")
    if port is None:
        pytest.skip("Spark Connect client needs grpcio (pyspark[connect]); not installed")
    return f"sc://127.0.0.1:{port}"


class TaskContext:
    """The few TopologyContext attributes the Spark connectors read, for tests that call
    open/prepare directly."""

    def __init__(self, component_id: str, task_index: int = 0, tasks: int = 1):
        self.component_id = component_id
        self.task_index = task_index
        self.component_tasks = tuple(range(1, tasks + 1))


@pytest.fixture
def task_context():
    return TaskContext


def poll_for(cond, timeout: float = 30.0, step: float = 0.01) -> bool:
    """Poll `cond` until true or `timeout` passes; never a bare sleep as synchronisation."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


@pytest.fixture
def poll():
    return poll_for
