"""One tuple with a buffer past 64 MiB between two workers on the ZeroMQ path (keyed
links, shared memory off: transport/bulk.py beside the CURVE link). Such a message was
more than a receiver keeps ahead of a sender's key, so read before the key it was taken
for forged and its tuple lost until its tree replayed (found by a review); it takes the
CURVE link now, and arrives once, whole, with the small arrays going sealed as before."""

from __future__ import annotations

import numpy as np
import pytest

from stormish import Bolt, LocalCluster, Spout, Topology

pytestmark = pytest.mark.timeout(240)

SMALL = 50
BIG = (64 << 20) // 8 + 4096  # float64s: 64 MiB and 32 KiB


class Payloads(Spout):
    outputs = ["i", "a"]

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        if self.n > SMALL:
            self.finish()
            return
        size = BIG if self.n == SMALL // 2 else 8192
        self.emit([self.n, np.full(size, self.n, dtype=np.float64)], msg_id=self.n)
        self.n += 1


class Check(Bolt):
    def prepare(self, conf, context):
        self.seen: list[tuple[int, int, bool]] = []

    def execute(self, tup):
        i, a = tup.values
        self.seen.append((i, len(a), bool((a == i).all())))
        self.ack(tup)

    def result(self):
        return self.seen


def test_a_tuple_past_64_mib_crosses_once_and_whole_beside_sealed_small_ones():
    t = Topology(
        "big",
        config={"topology.transport.shm": "off", "topology.message.timeout.secs": 120},
    )
    t.set_spout("src", Payloads())
    t.set_bolt("sink", Check()).shuffle_grouping("src")
    with LocalCluster(workers=2) as c:
        c.submit(t)
        stats = c.wait_complete("big", timeout=200)
        (seen,) = c._get("big").results()["sink"]
    where = {x.component: x.worker for x in stats.tasks.values()}
    assert where["src"] != where["sink"], where
    assert sorted(seen) == [(i, BIG if i == SMALL // 2 else 8192, True) for i in range(SMALL + 1)]
    src = stats.components["src"]
    assert (src.acked, src.failed, src.timed_out) == (SMALL + 1, 0, 0)
    link = stats.links[f"worker-{where['sink']}"]
    assert link["dropped"] == {}
    assert link["bulk"]["missing"] == 0 and link["bulk"]["forged"] == 0
    assert link["bulk"]["messages_received"] >= 1  # the small arrays went sealed
