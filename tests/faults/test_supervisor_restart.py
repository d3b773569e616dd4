"""kill -9 of a supervisor, then the supervisor started again on the same slot ports
(what systemd does): the worker it left behind is stopped, not a reason to refuse."""

from __future__ import annotations

import signal

import psutil
import pytest
from integration.test_cluster import SENTENCES, Cluster, no_process_left

from stormish import BasicBolt, Topology
from stormish.testing import ListSpout, poll_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]


@pytest.fixture
def procs_checked():
    with no_process_left():
        yield


class Paced(BasicBolt):
    outputs = ["sentence"]

    def execute(self, tup):
        import time

        time.sleep(0.003)  # the run must outlast a supervisor's kill and restart
        self.emit(tup.values)


def test_a_supervisor_restarted_on_its_ports_stops_the_worker_its_predecessor_left(
    tmp_path, procs_checked
):
    """Before: kill -9 of a supervisor left its worker on the slot port until the worker
    noticed, never if it was hung (here: stopped), and the supervisor started again on
    its ports refused to start ('slot port ... is taken'). Now it stops that orphan (its
    --parent is gone), takes its ports, and the topology completes on it."""
    c = Cluster(str(tmp_path), supervisors=1)
    try:
        t = Topology("orph", config={"topology.workers": 1, "topology.message.timeout.secs": 5})
        t.set_spout("s", ListSpout([[s] for s in SENTENCES[:1500]], fields=["sentence"]))
        t.set_bolt("paced", Paced()).shuffle_grouping("s")
        c.call("submit", (t, {}))
        c.wait_status("orph", "running")
        poll_for(lambda: len(c.workers()) == 1, 30, 0.05, "the worker")
        (worker,) = c.workers()
        worker.suspend()  # hung: it will not notice its supervisor is gone
        c.supervisors[0].send_signal(signal.SIGKILL)
        c.supervisors[0].wait(10)
        assert worker.is_running() and worker.status() == psutil.STATUS_STOPPED
        c.supervisors[0] = c.start_supervisor(0)
        poll_for(lambda: "stopping it" in c.log("s0.log"), 30, 0.05, "the orphan stopped")
        poll_for(lambda: not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE,
                 15, 0.05, "the orphan gone")  # fmt: skip
        assert f"held by worker pid {worker.pid}" in c.log("s0.log")
        c.wait_status("orph", "complete", timeout=90)
        assert c.supervisors[0].poll() is None  # it runs on its ports
    finally:
        c.close()
