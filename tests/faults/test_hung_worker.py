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


FOREVER_FILE = """\
from stormish import Spout, BasicBolt, Topology
class S(Spout):
    outputs = ['x']
    def next_tuple(self): self.emit([1])
class B(BasicBolt):
    def execute(self, t): pass
topology = Topology('forever', config={'topology.acker.executors': 0})
topology.set_spout('s', S(), parallelism=2)
topology.set_bolt('b', B(), parallelism=2).shuffle_grouping('s')
"""


def forever_file(tmp_path: Path) -> Path:
    """The endless topology as a file, for `stormish run -w 2`."""
    topo = tmp_path / "forever.py"
    topo.write_text(FOREVER_FILE)
    return topo


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
    topo = forever_file(tmp_path)
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


def test_two_hung_workers_of_three_cost_one_wait_and_the_third_keeps_its_statistics(
    monkeypatch,
):
    """Both silent workers are named by the deactivation's timeout and killed at the
    stop; the healthy one's final statistics are kept (review: the second hung worker
    was asked `stop`, STOP_WAIT + 10 s more, and that timeout dropped the healthy
    worker's answer)."""
    monkeypatch.setattr(running_mod, "STOP_WAIT", 2.0)
    t = Topology("two-hung", config={"topology.acker.executors": 0})
    t.set_spout("s", Forever(), parallelism=3)
    t.set_bolt("b", Null(), parallelism=3).shuffle_grouping("s")
    with LocalCluster(workers=3) as c:
        c.submit(t)
        run = c._get(t.name)
        poll_for(lambda: run.statistics().components["b"].executed > 1000, 30, 0.05, "flow")
        hs = run.group.handles
        for h in hs[1:]:
            os.kill(h.proc.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        stats = run.kill()
        took = time.monotonic() - t0
        pids = [h.proc.pid for h in hs]
    healthy = [tk for tk in stats.tasks.values() if run.plan.assignment[tk.task] == 0]
    assert took < 2.0 + 5.0, f"the kill took {took:.1f}s"
    assert "(and 1 more) did not answer active" in (stats.error or ""), stats.error
    assert healthy and sum(tk.executed for tk in healthy) > 0
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


def test_a_kill_while_the_run_ends_by_itself_does_not_cut_its_stop(tmp_path):
    """A kill only cuts looks short, never a stop: a kill landing while a finite run
    stops by itself (its bolts' cleanup taking 2 s) leaves it complete with every
    cleanup run (review: the kill's interrupt cut the end's stop requests and every
    worker was SIGKILLed mid-cleanup)."""
    marks = tmp_path / "marks"
    marks.mkdir()

    class Finite(Spout):
        outputs = ["n"]

        def open(self, conf, context):
            self.i = 0

        def next_tuple(self):
            if self.i < 1000:
                self.emit((self.i,))
                self.i += 1
            else:
                self.finish()

    class SlowCleanup(BasicBolt):
        def prepare(self, conf, context):
            self.task = context.task_id

        def execute(self, tup):
            pass

        def cleanup(self):
            time.sleep(2.0)  # the cleanup a kill must not cut (a sink's flush)
            (marks / f"task-{self.task}").touch()

    t = Topology("natural-end", config={"topology.acker.executors": 0})
    t.set_spout("s", Finite(), parallelism=2)
    t.set_bolt("b", SlowCleanup(), parallelism=2).shuffle_grouping("s")
    got: dict = {}
    with LocalCluster(workers=2) as c:
        c.submit(t)
        run = c._get(t.name)
        waiter = threading.Thread(
            target=lambda: got.setdefault("stats", run.wait_complete(60)), daemon=True
        )
        waiter.start()
        poll_for(lambda: run.group.handles[0].stopped, 30, 0.005, "the run's own stop")
        time.sleep(0.3)  # the workers are in their cleanup
        killed = run.kill()
        waiter.join(30)
    stats = got.get("stats", killed)
    assert stats.status == TopologyStatus.COMPLETE
    assert sorted(p.name for p in marks.iterdir()) == ["task-1", "task-2"]
    assert stats.components["b"].executed == 2000


def test_a_busy_worker_that_answers_late_is_stopped_not_killed(monkeypatch, tmp_path):
    """A worker whose control thread is starved (a bolt in a C call holding the GIL for
    seconds) answers the deactivation after STOP_WAIT: it used CPU time meanwhile, so
    it is not hung, and it is asked to stop as any other (its cleanup runs). A stopped
    or deadlocked one uses none (review: it was SIGKILLed and its cleanup lost)."""
    monkeypatch.setattr(running_mod, "STOP_WAIT", 2.0)
    marks = tmp_path / "marks"
    marks.mkdir()

    class One(Spout):
        outputs = ["n"]

        def open(self, conf, context):
            self.sent = False

        def next_tuple(self):
            if not self.sent:
                self.sent = True
                self.emit((1,))

    class Hog(BasicBolt):
        def execute(self, tup):
            (marks / "started").touch()
            sum(range(3 * 10**8))  # seconds in one C call: the GIL is not let go

        def cleanup(self):
            (marks / "cleanup").touch()

    t = Topology("busy", config={"topology.acker.executors": 0})
    t.set_spout("s", One())
    t.set_bolt("b", Hog()).shuffle_grouping("s")
    with LocalCluster(workers=2) as c:
        c.submit(t)
        run = c._get(t.name)
        poll_for(lambda: (marks / "started").exists(), 30, 0.01, "the hog")
        time.sleep(0.5)
        stats = run.kill()
    assert (marks / "cleanup").exists(), stats.error
    assert "SIGKILL" not in (stats.error or ""), stats.error


def test_ctrl_c_on_a_terminal_with_a_hung_worker_is_interrupted_not_failed(tmp_path):
    """On a terminal the status line gathers statistics every second; one cut short by
    Ctrl-C made the run 'failed' (exit 2) instead of interrupted (review)."""
    import pty
    import select

    topo = forever_file(tmp_path)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "run", str(topo), "-w", "2"],
        cwd=ROOT, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    seen = bytearray()

    def drain(secs: float) -> None:
        end = time.monotonic() + secs
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    seen.extend(os.read(master, 65536))
                except OSError:
                    return

    try:
        me = psutil.Process(proc.pid)

        def workers() -> list[psutil.Process]:
            return [p for p in me.children(recursive=True) if p.name() == "stormish-worker"]

        poll_for(lambda: len(workers()) == 2, 30, 0.05, "two worker processes")
        drain(2.0)
        hung = workers()[0]
        hung.suspend()
        drain(2.0)  # the status line's next gathering waits on the stopped worker
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        end = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < end:
            drain(0.2)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
    text = seen.decode("utf-8", "replace")
    assert proc.returncode == 130, text[-2000:]
    assert took < 10.0 + 5.0, f"Ctrl-C took {took:.1f}s"
    assert "interrupted" in text
