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


# -- shared memory: what a receiver maps of a sender's segments
MiB = 1 << 20


def unlinked_mapped(prefix):
    """Bytes of this process's mappings of `prefix`'s segments whose files are gone."""
    total = 0
    with open("/proc/self/maps") as f:
        for line in f:
            if prefix in line and "(deleted)" in line:
                a, b = line.split()[0].split("-")
                total += int(b, 16) - int(a, 16)
    return total


@pytest.fixture
def two_links():
    c = conf(**{"topology.acker.executors": 0, "topology.transport.shm.pool.mb": 16})
    c["topology.transport.shm"] = "on"
    assignment = {1: 0, 2: 1}
    queue = ReceiveQueue(1024)
    a, b = WorkerLink(0, "t", assignment, c), WorkerLink(1, "t", assignment, c)
    a.attach({1: ReceiveQueue(1024)})
    b.attach({2: queue})
    book = {0: a.address, 1: b.address}
    a.connect(book)
    b.connect(book)
    try:
        yield a, b, queue
    finally:
        a.stop()
        b.stop()


def send_through(a, b, queue, payload):
    """One tuple of `payload` from a to b, taken and let go (its segment released)."""
    import gc

    assert a.remote_target(2).try_publish((1, "default", [(payload,)], None), 1)
    got = []

    def arrived():
        a.service()
        batches = queue.consume()
        if batches:
            got.extend(batches)
        return bool(got)

    serve(b, arrived)
    got.clear()
    gc.collect()
    for _ in range(20):  # the release goes back
        a.service()
        b.service()


def test_a_receiver_lets_go_of_the_segments_its_sender_retired(two_links):
    """The sender retires free segments to make segments of another size; the receiver
    kept every mapping for the sender's whole life: 128 MiB of unlinked segments pinned
    after 12 messages of alternating sizes through a 16 MiB pool (found by a bug hunt)."""
    a, b, queue = two_links
    for i in range(12):
        send_through(a, b, queue, bytes(5 * MiB if i % 2 == 0 else 9 * MiB))
    assert unlinked_mapped(a.pool.prefix) <= 16 * MiB
    assert b.reader.mapped(0) <= 2


def test_a_sender_that_moved_is_forgotten_with_its_segments(two_links):
    """Killed, its files removed (as its supervisor does), and back on another host (a
    prefix this host cannot map): its old segments stayed mapped for good."""
    from stormish.transport import shm

    a, b, queue = two_links
    for _ in range(3):
        send_through(a, b, queue, bytes(3 * MiB))
    prefix = a.pool.prefix
    a.stop()
    shm.remove_for(int(prefix.split("-")[2]))
    peer = Peer(b.address, 0)
    try:
        peer.hello(incarnation="new-one", status_base=10, reply=False,
                   shm="stormish-shm-4242-0badf00d-")  # fmt: skip
        serve(b, lambda: b.reader.prefix(0) is None)
    finally:
        peer.close()
    import gc

    gc.collect()
    assert unlinked_mapped(prefix) == 0
