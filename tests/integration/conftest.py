"""Fixtures of the integration tests (the brokers' are in tests/conftest.py)."""

from __future__ import annotations

import psutil
import pytest


@pytest.fixture
def no_leaks():
    """At the end of the test no worker process it started is running (one left is
    killed) and this process holds no socket it did not hold before (TIME_WAIT aside).
    A module takes it for every test with `pytestmark = pytest.mark.usefixtures(...)`."""
    me = psutil.Process()
    before_conns = {(c.laddr, c.raddr, c.status) for c in me.net_connections("all")}
    before_children = {p.pid for p in me.children(recursive=True)}
    yield
    # the test's processes were waited for at stop; anything left is a leak
    left = [p for p in me.children(recursive=True) if p.pid not in before_children]
    for p in left:
        p.kill()
    assert not left, f"worker processes left running: {[p.pid for p in left]}"
    conns = {(c.laddr, c.raddr, c.status) for c in me.net_connections("all")}
    leaked = [c for c in conns - before_conns if c[2] != psutil.CONN_TIME_WAIT]
    assert not leaked, f"sockets left open: {leaked}"


@pytest.fixture
def ha(tmp_path, zookeeper_server):
    """Two nimbuses on ZooKeeper and a supervisor (ha_cluster.py); their logs printed."""
    from .ha_cluster import HaCluster
    from .harness import no_process_left

    with no_process_left():
        c = HaCluster(str(tmp_path), zookeeper_server.hosts)
        try:
            yield c
        finally:
            c.close()
            for name in c.logs():
                print(f"--- {name}\n{c.log(name)[-3000:]}")


@pytest.fixture
def ui_cluster(tmp_path):
    """nimbus with its web UI (`--ui-port 0`) and two supervisors (test_cluster.py's
    `Cluster`); nimbus's log printed."""
    from .harness import no_process_left
    from .test_cluster import Cluster

    with no_process_left():
        c = Cluster(str(tmp_path), nimbus_args=("--ui-port", "0"))
        try:
            yield c
        finally:
            c.close()
            print(f"--- nimbus.log\n{c.log('nimbus.log')[-3000:]}")
