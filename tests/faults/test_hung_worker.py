"""A worker process that stops answering (SIGSTOP: hung as a deadlock or a swapped-out
host leaves it) under a run with worker processes on 127.0.0.1.

Before: the kill asked the hung worker each request in turn, waiting out each timeout
(a look in progress 30 s, the deactivation 30 s, the stop 20 s, its exit 15 s): Ctrl-C
took 85 s and exited 1 as "failed". Now a look under way is cut short, the deactivation
waits at most STOP_WAIT, and a worker that did not answer is asked nothing more and
killed (SIGKILL) at the stop; the others stop cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from stormish import BasicBolt, LocalCluster, Spout, Topology
from stormish.local import running as running_mod
from stormish.runtime.status import TopologyStatus
from stormish.testing import poll_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]


class Forever(Spout):
    outputs = ["n"]

    def next_tuple(self):
        self.emit((1,))


class Null(BasicBolt):
    def execute(self, tup):
        pass


def forever(name: str) -> Topology:
    t = Topology(name, config={"topology.acker.executors": 0})
    t.set_spout("s", Forever(), parallelism=2)
    t.set_bolt("b", Null(), parallelism=2).shuffle_grouping("s")
    return t


def test_a_kill_on_another_thread_does_not_wait_out_a_hung_workers_timeouts(monkeypatch):
    """wait_complete blocked on a look at a stopped worker; kill() from another thread
    cuts the look short, deactivates the others, kills the hung one: within STOP_WAIT
    and a little, and the waiter gets the run's final statistics."""
    monkeypatch.setattr(running_mod, "STOP_WAIT", 3.0)
    t = forever("hung-kill")
    with LocalCluster(workers=2) as c:
        c.submit(t)
        run = c._get(t.name)
        poll_for(lambda: run.statistics().components["b"].executed > 1000, 30, 0.05, "flow")
        hung = run.group.handles[0].proc
        os.kill(hung.pid, signal.SIGSTOP)
        got: dict = {}

        def wait() -> None:
            try:
                got["stats"] = run.wait_complete(60)
            except BaseException as exc:  # noqa: BLE001 - the assertion below says it
                got["error"] = exc

        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        time.sleep(0.5)  # the waiter's look is under way on the stopped worker
        t0 = time.monotonic()
        stats = run.kill()
        took = time.monotonic() - t0
        waiter.join(10)
        assert not waiter.is_alive()
    assert took < 3.0 + 5.0, f"the kill took {took:.1f}s"
    assert stats.status == TopologyStatus.KILLED
    assert "did not answer active within 3.0s" in (run.error or ""), run.error
    assert "stats" in got and got["stats"].status == TopologyStatus.KILLED, got
    assert not psutil.pid_exists(hung.pid) or psutil.Process(hung.pid).status() == "zombie"


def test_ctrl_c_with_a_hung_worker_exits_130_within_the_stop_wait(tmp_path):
    """`stormish run -w 2`, one worker stopped, Ctrl-C: the run is interrupted (130, not
    "failed" 1) within STOP_WAIT (10 s) and a little, and nothing is left running."""
    topo = tmp_path / "forever.py"
    topo.write_text(
        "from stormish import Spout, BasicBolt, Topology\n"
        "class S(Spout):\n    outputs=['x']\n"
        "    def next_tuple(self): self.emit([1])\n"
        "class B(BasicBolt):\n    def execute(self, t): pass\n"
        "topology = Topology('forever', config={'topology.acker.executors': 0})\n"
        "topology.set_spout('s', S(), parallelism=2)\n"
        "topology.set_bolt('b', B(), parallelism=2).shuffle_grouping('s')\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "run", str(topo), "-w", "2"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        me = psutil.Process(proc.pid)

        def workers() -> list[psutil.Process]:
            return [p for p in me.children(recursive=True) if p.name() == "stormish-worker"]

        poll_for(lambda: len(workers()) == 2, 30, 0.05, "two worker processes")
        time.sleep(1.0)  # let them run (and the CLI look at them) before one hangs
        hung = workers()[0]
        hung.suspend()
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, err
    assert took < 10.0 + 5.0, f"Ctrl-C took {took:.1f}s"
    assert "topology 'forever': interrupted" in out, out
    assert f"(pid {hung.pid}) did not answer active" in out + err, (out, err)
    assert not psutil.pid_exists(hung.pid) or hung.status() == "zombie"
