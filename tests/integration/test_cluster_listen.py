"""A keyed supervisor listens where its `--host` says (its
metrics and its workers' link ports), not on every interface; its workers' log files are
0600 in a 0700 directory whatever the umask. Real daemons and workers on 127.0.0.1."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import psutil
import pytest

from stormish import BasicBolt, Topology
from stormish.testing import poll_for

from .harness import running
from .parts import CountingSpout
from .test_cluster import Cluster


class Null(BasicBolt):
    def execute(self, tup):
        pass


def listening(proc: psutil.Process) -> list[tuple[str, int]]:
    return [
        (c.laddr.ip, c.laddr.port)
        for c in proc.net_connections("inet")
        if c.status == psutil.CONN_LISTEN
    ]


@pytest.fixture
def keyed_umask0_cluster(tmp_path):
    keys = str(tmp_path / "keys")
    out = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "keys", keys],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr

    def make() -> Cluster:
        old = os.umask(0)  # the daemons inherit it, and their workers
        try:
            return Cluster(
                str(tmp_path), keys=keys,
                supervisor_args=("--host", "127.0.0.1", "--metrics-port", "0"),
            )  # fmt: skip
        finally:
            os.umask(old)

    with running(make) as c:
        yield c


def test_a_keyed_supervisor_listens_on_its_host_only_and_keeps_private_logs(
    keyed_umask0_cluster,
):
    c = keyed_umask0_cluster
    endless = Topology("endless", config={"topology.workers": 2})
    endless.set_spout("s", CountingSpout(10**12, per_call=10))
    endless.set_bolt("null", Null()).shuffle_grouping("s")
    c.call("submit", (endless, {}))
    c.wait_status("endless", "running")
    poll_for(lambda: len(c.workers()) == 2, 30, 0.1, "two workers")
    slots = {p for ports in c.slots for p in ports}
    sockets = {}
    for sup in c.supervisors:
        sup_proc = psutil.Process(sup.pid)
        # its metrics port (the supervisor's only listening socket) and its workers' links
        poll_for(lambda sp=sup_proc: listening(sp), 30, 0.1, "the supervisor's metrics port")
        sockets[f"supervisor {sup.pid}"] = listening(sup_proc)
        for w in sup_proc.children():
            poll_for(lambda w=w: listening(w), 30, 0.1, "the worker's link port")
            sockets[f"worker {w.pid}"] = listening(w)
    assert len(sockets) == 4, sockets
    every = [addr for found in sockets.values() for addr in found]
    assert {ip for ip, _ in every} == {"127.0.0.1"}, sockets  # no 0.0.0.0 nor ::
    # a worker listens on its slot port, and on a bulk port beside it (docs/workers.md:
    # large buffers sealed with AES-GCM), on the same address
    for name, found in sockets.items():
        if name.startswith("worker"):
            ports = {port for _, port in found}
            assert len(ports & slots) == 1 and len(ports) <= 2, (name, found, slots)
    # finding 8: logs written under umask 0 are the user's only
    ran = [i for i, sup in enumerate(c.supervisors) if psutil.Process(sup.pid).children()]
    assert ran
    for i in ran:
        logs = os.path.join(c.tmp, f"s{i}-workers")
        assert stat.S_IMODE(os.stat(logs).st_mode) == 0o700, logs
        files = os.listdir(logs)
        assert files, logs
        for f in files:
            mode = stat.S_IMODE(os.stat(os.path.join(logs, f)).st_mode)
            assert mode == 0o600, (f, oct(mode))
