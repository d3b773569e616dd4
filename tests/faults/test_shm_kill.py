"""kill -9 of a worker in the middle of a stream of large arrays through shared memory:
its segments are removed by the local run (as a supervisor does on a cluster,
test_kill.py), never left in /dev/shm."""

from __future__ import annotations

import os
import signal

import pytest

from stormish import BasicBolt, LocalCluster, Spout, Topology
from stormish.testing import poll_for
from stormish.transport import shm

try:  # numpy where installed (the spark extra); a bytearray, out of band too, elsewhere
    import numpy as np
except ImportError:
    np = None

pytestmark = [
    pytest.mark.faults,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not shm.usable(), reason="no /dev/shm"),
]


class Endless(Spout):
    outputs = ["array"]

    def open(self, conf, context):
        self.a = np.ones(512 * 1024 // 8) if np is not None else bytearray(b"x" * 512 * 1024)

    def next_tuple(self):
        for _ in range(4):
            self.emit((self.a,))


class Keep(BasicBolt):
    """Keeps the last 64 arrays: segments stay lent to this worker when it dies."""

    def prepare(self, conf, context):
        self.last = []

    def execute(self, tup):
        self.last = [*self.last[-63:], tup.values[0]]


def test_kill_9_mid_stream_leaves_no_segments():
    t = Topology("shmkill")
    t.set_spout("s", Endless())
    t.set_bolt("keep", Keep()).shuffle_grouping("s")
    conf = {"topology.acker.executors": 0, "topology.transport.shm": "on"}
    pids = set()
    with LocalCluster(workers=2, config=conf) as c:
        c.submit(t)
        running = c._get("shmkill")
        handles = running.group.handles
        pids |= {h.pid for h in handles}
        spout = next(s.worker for s in c.statistics("shmkill").tasks.values() if s.component == "s")
        victim = handles[spout]
        # numpy arrays arrive as views: the receiver's kept arrays hold segments lent, so
        # several are in use. A bytearray arrives as a copy and its segment goes back at
        # once: the sender's pool keeps one or two (CI, without numpy, waited for 3 in
        # vain 1 run in 5)
        most, again = (3, 2) if np is not None else (1, 1)
        poll_for(lambda: len(shm.leftovers(victim.pid)) >= most, 30, 0.02, "segments in use")
        dead = victim.pid
        os.kill(dead, signal.SIGKILL)
        poll_for(lambda: not victim.alive(), 10, 0.01, "the worker dead")
        assert shm.leftovers(dead)  # nobody ran its exit: the files are still there
        running.restart_worker(spout)  # what a supervisor does
        assert shm.leftovers(dead) == []
        pids.add(victim.pid)
        poll_for(lambda: len(shm.leftovers(victim.pid)) >= again, 30, 0.02, "the new one streams")
        os.kill(victim.pid, signal.SIGKILL)  # and one killed without a restart
        poll_for(lambda: not victim.alive(), 10, 0.01, "the worker dead")
    leaked = [n for pid in pids for n in shm.leftovers(pid)]
    assert leaked == []
