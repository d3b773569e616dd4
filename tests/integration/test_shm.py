"""Large payloads between two worker processes: numpy arrays and bytes arrive intact and
in order through shared memory and through ZeroMQ frames, and an array a bolt keeps
stays valid (its segment is not reused under it)."""

from __future__ import annotations

import pytest

from stormish import BasicBolt, LocalCluster, Spout, Topology
from stormish.transport import shm

np = pytest.importorskip("numpy")

pytestmark = pytest.mark.skipif(not shm.usable(), reason="no /dev/shm")


class Arrays(Spout):
    """`n` tuples (seq, array filled with seq, bytes and a bytearray filled with seq % 256)."""

    outputs = ["seq", "array", "blob", "mutable"]

    def __init__(self, n: int, size: int):
        self.n, self.size = n, size

    def open(self, conf, context):
        self.i = 0

    def next_tuple(self):
        for _ in range(4):
            if self.i == self.n:
                self.finish()
                return
            i = self.i
            self.i += 1
            blob = bytes([i % 256]) * self.size
            self.emit((i, np.full(self.size // 8, i, dtype=np.int64), blob, bytearray(blob)))


class Check(BasicBolt):
    """Checks each tuple as it comes (order, contents); `keep`: holds every array and
    checks them all again at the end."""

    def __init__(self, keep: bool = False):
        self.keep = keep

    def prepare(self, conf, context):
        self.next, self.bad, self.kept = 0, [], []

    def execute(self, tup):
        seq, array, blob, mutable = tup.values
        want = bytes([seq % 256]) * len(blob)
        if (
            seq != self.next
            or not (array == seq).all()
            or blob != want
            or type(mutable) is not bytearray
            or mutable != want
        ):
            self.bad.append(seq)
        self.next = seq + 1
        if self.keep:
            self.kept.append((seq, array))

    def result(self):
        for seq, array in self.kept:
            if not (array == seq).all():
                self.bad.append(("kept", seq))
        return {"seen": self.next, "bad": self.bad, "kept": len(self.kept)}


def run(n: int, size: int, conf: dict, keep: bool = False) -> tuple[dict, dict]:
    t = Topology("payload")
    t.set_spout("s", Arrays(n, size))
    t.set_bolt("check", Check(keep)).shuffle_grouping("s")
    with LocalCluster(workers=2, config={"topology.acker.executors": 0, **conf}) as c:
        c.submit(t)
        stats = c.wait_complete("payload", timeout=60)
        (result,) = c._get("payload").results()["check"]
    (spout,) = [s.worker for s in stats.tasks.values() if s.component == "s"]
    (bolt,) = [s.worker for s in stats.tasks.values() if s.component == "check"]
    assert spout != bolt
    sender = stats.links[f"worker-{spout}"]["shm"]
    return result, sender


@pytest.mark.parametrize(
    "mode, scheduler",
    [("on", "cooperative"), ("auto", "cooperative"), ("off", "cooperative"), ("on", "threads")],
)
def test_arrays_and_bytes_arrive_intact_and_in_order(mode, scheduler):
    conf = {"topology.transport.shm": mode, "topology.worker.scheduler": scheduler}
    result, sender = run(300, 96 * 1024, conf)
    assert result == {"seen": 300, "bad": [], "kept": 0}
    if mode == "off":
        assert sender["messages_sent"] == 0
    else:
        assert sender["messages_sent"] > 0 and sender["fallback"] == 0, sender
        assert sender["segments_lent"] == 0  # every segment came back


def test_segments_are_reused_once_released():
    """A pool of one segment carries 12 MiB: only if every release comes back."""
    conf = {"topology.transport.shm": "on", "topology.transport.shm.pool.mb": 4}
    result, sender = run(64, 96 * 1024, conf)
    assert result["bad"] == [] and result["seen"] == 64
    assert sender["pool_bytes"] == 4 << 20 and sender["fallback"] == 0, sender
    assert sender["bytes_sent"] >= 64 * 3 * 96 * 1024


def test_a_bolt_that_keeps_its_arrays_keeps_them_intact():
    """The bolt holds every array: the sender's only segment is never released, so it
    waits (backpressure) and then sends through ZeroMQ; the arrays kept read the same
    at the end as when they came."""
    conf = {"topology.transport.shm": "on", "topology.transport.shm.pool.mb": 4}
    result, sender = run(64, 96 * 1024, conf, keep=True)
    assert result == {"seen": 64, "bad": [], "kept": 64}
    assert sender["messages_sent"] > 0 and sender["fallback"] > 0, sender
