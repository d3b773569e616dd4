"""A worker link's limits, driven by hand: a real WorkerLink with real receive queues,
served on this thread, and a raw ZeroMQ PUSH socket speaking the wire format as a peer
worker (on loopback, without keys: what is tested here is past the handshake)."""

from __future__ import annotations

import time

import pytest
import zmq

from stormish.config import defaults
from stormish.runtime.queue import ReceiveQueue
from stormish.transport import frames as fr
from stormish.transport.link import WorkerLink

pytestmark = pytest.mark.timeout(60)


def conf(**over):
    c = defaults()
    c.update(over)
    c["topology.transport.shm"] = "off"
    return c


def serve(link, until, seconds=10.0):
    """Serve the link by hand (receive, timer, send) until `until()` or the deadline."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        link.service()
        if until():
            return
        time.sleep(0.001)
    raise AssertionError("the link never got there")


class Peer:
    """A PUSH socket connected to a link, speaking as worker `index`."""

    def __init__(self, address, index, topology="t"):
        self.ctx = zmq.Context()
        self.s = self.ctx.socket(zmq.PUSH)
        self.s.setsockopt(zmq.LINGER, 0)
        self.s.connect(address)
        self.index, self.topology = index, topology

    def hello(self, **info):
        base = {"address": "tcp://127.0.0.1:1", "incarnation": "abcd", "reply": True,
                "status_base": 1}  # fmt: skip
        self.s.send_multipart(fr.encode_hello(self.index, 0, self.topology, dict(base, **info)))

    def tuples(self, batches, seq=1):
        self.s.send_multipart(fr.encode_tuples(self.index, seq, batches))

    def close(self):
        self.s.close(0)
        self.ctx.term()


@pytest.fixture
def link_and_peer():
    made = []

    def make(queues, topology="t", **over):
        link = WorkerLink(1, "t", {1: 0, 2: 1}, conf(**over))
        link.attach(queues)
        peer = Peer(link.address, 0, topology)
        link.connect({0: "tcp://127.0.0.1:9"})
        made.append((link, peer))
        return link, peer

    yield make
    for link, peer in made:
        peer.close()
        link.stop()


def test_the_overflow_limit_is_checked_per_tuple_as_storm_does(link_and_peer):
    """Storm's JCQueue drops each tuple past the limit, so the overflowQ never holds more.
    The link checked once per batch and put the whole batch in: up to limit - 1 + a
    batch (found by a bug hunt). What is past the limit is dropped, counted, in order."""
    q = ReceiveQueue(512)
    link, peer = link_and_peer({2: q}, **{"topology.executor.overflow.limit": 1000})
    rows = [(i,) for i in range(600)]
    for seq in range(6):  # 3,600 tuples at a task that takes nothing
        peer.tuples([(2, 1, "default", list(rows), None)], seq)
    serve(link, lambda: link.recv_batches + link.malformed >= 6)
    assert (q.size, q.overflow_size, q.overflow_high) == (600, 1000, 1000)
    assert link.dropped == {"overflow_limit": 2000}
    kept = [row for batch in q.overflow for row in batch[0][2]]
    assert kept == rows + rows[:400]  # the batches in order, the one at the limit cut
