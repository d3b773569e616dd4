"""kill -9 of the worker receiving large arrays sealed on its bulk socket
(transport/bulk.py): the restarted worker binds a new bulk port and announces a new
address in its HELLO, the sender reopens towards it, and what was lost in flight (sealed
buffers or the messages naming them) replays through acking. Every array arrives whole
at least once; none is read from a former incarnation's buffers."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from stormish import Bolt, LocalCluster, Spout, Topology
from stormish.testing import poll_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(150)]

N = 1500


class Arrays(Spout):
    """Array i (64 KiB, full of i) with message id i; a failed one is sent again."""

    outputs = ["i", "a"]

    def open(self, conf, context):
        self.next, self.again, self.acked = 0, [], set()

    def next_tuple(self):
        for _ in range(8):
            if self.again:
                i = self.again.pop()
            elif self.next < N:
                i, self.next = self.next, self.next + 1
            else:
                if len(self.acked) == N:
                    self.finish()
                return
            self.emit([i, np.full(8192, i, dtype=np.int64)], msg_id=i)

    def ack(self, msg_id):
        self.acked.add(msg_id)

    def fail(self, msg_id, failure=None):
        if msg_id not in self.acked:
            self.again.append(msg_id)

    def result(self):
        return sorted(self.acked)


class Whole(Bolt):
    """Acks an array that is whole and is the one its id names; a broken one is recorded
    in `broken` (a file) and failed."""

    def __init__(self, broken: str):
        self.broken = broken

    def execute(self, tup):
        i, a = tup.values
        if (a == i).all():
            self.ack(tup)
            return
        with open(self.broken, "a") as f:
            f.write(f"{i}\n")
        self.fail(tup)


def test_kill_9_of_the_receiver_of_sealed_buffers_loses_nothing(tmp_path):
    broken = str(tmp_path / "broken")
    t = Topology(
        "bulkkill",
        config={
            "topology.transport.shm": "off",
            "topology.message.timeout.secs": 5,
            "topology.max.spout.pending": 200,
        },
    )
    t.set_spout("src", Arrays())
    t.set_bolt("sink", Whole(broken)).shuffle_grouping("src")
    with LocalCluster(workers=2) as c:
        c.submit(t)
        running = c._get("bulkkill")
        where = {s.component: s.worker for s in c.statistics("bulkkill").tasks.values()}
        assert where["src"] != where["sink"], where
        link = f"worker-{where['sink']}"
        poll_for(
            lambda: c.statistics("bulkkill").links[link]["bulk"]["messages_received"] >= 3,
            timeout=60,
            what="sealed buffers received",
        )
        victim = running.group.handles[where["sink"]]
        os.kill(victim.pid, signal.SIGKILL)
        poll_for(lambda: not victim.alive(), 10, 0.01, "the worker dead")
        running.restart_worker(where["sink"])  # what a supervisor does
        stats = c.wait_complete("bulkkill", timeout=120)
        acked = running.results()["src"][0]
    assert stats.status == "complete"
    assert acked == list(range(N))
    assert not os.path.exists(broken), "arrays arrived broken"
    assert stats.links[link]["bulk"]["messages_received"] > 0  # the new incarnation's too
