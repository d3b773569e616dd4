"""Two workers linked by real ZeroMQ sockets on 127.0.0.1 (in one test process: the
socket layer, frames, RemoteTargets and the backpressure tracker end to end)."""

from __future__ import annotations

from collections import Counter

import pytest

from stormish import BasicBolt, Topology
from stormish.local.running import RunningTopology
from stormish.runtime.acker import AckerBolt
from stormish.runtime.plan import build_plan
from stormish.runtime.worker import Worker
from stormish.testing import ListSpout
from stormish.transport.link import WorkerLink

from .parts import Count, CountingSpout, Split, halt_lag_bound, sentences

SENTENCES = sentences(40, 3, 6, 2000)


def linked(
    topology: Topology,
    workers: int,
    extra: dict | None = None,
    before_start=None,
    security=None,
):
    conf = topology.validate({"topology.workers": workers, **(extra or {})})
    plan = build_plan(topology, conf, AckerBolt())
    ws, links = [], []
    for i in range(workers):
        link = WorkerLink(i, plan.name, plan.assignment, plan.conf, security=security)
        w = Worker(plan, i, remote_target=link.remote_target)
        link.attach(w.queues)
        w.link = link
        ws.append(w)
        links.append(link)
    if before_start is not None:
        before_start(links)
    book = {i: link.address for i, link in enumerate(links)}
    for link in links:
        link.connect(book)
        link.start()
    for w in ws:
        w.start()
    return RunningTopology(topology, plan, ws), links


def test_wordcount_exact_across_two_linked_workers():
    t = Topology("wc2")
    t.set_spout("s", ListSpout([(s,) for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("split", Split(), 2).shuffle_grouping("s")
    t.set_bolt("count", Count(), 3).fields_grouping("split", ["word"])
    running, links = linked(t, 2)
    try:
        stats = running.wait_complete(60)
        results = running.results()
    finally:
        running.kill(0)
    merged = Counter()
    for part in results["count"]:
        merged.update(part)
    assert merged == Counter(w for s in SENTENCES for w in s.split())
    assert results["s"][0]["acked"] == {i: 1 for i in range(len(SENTENCES))}
    assert all(link.statistics()["batches_sent"] > 0 for link in links)
    assert stats.links and stats.status == "complete"


class Size(BasicBolt):
    def prepare(self, conf, context):
        self.n = 0

    def execute(self, tup):
        self.n += len(tup.values[0])

    def result(self):
        return self.n


@pytest.mark.parametrize("shm", ["off", "on"])
def test_values_sent_out_of_band_cross_the_link(shm):
    """A value of 64 KiB or more travels as a frame of its own (a PickleBuffer), or
    in shared memory: the transfer thread once died counting its bytes, and the
    topology stalled."""
    # round-robin: the locality-aware shuffle would keep them all in the spout's worker
    t = Topology("big", config={"topology.disable.loadaware.messaging": True})
    t.set_spout("s", ListSpout([(bytes(100_000),) for _ in range(6)], fields=["b"]))
    t.set_bolt("size", Size(), 2).shuffle_grouping("s")
    running, links = linked(t, 2, {"topology.transport.shm": shm})
    try:
        running.wait_complete(60)
        results = running.results()
    finally:
        running.kill(0)
    assert sum(results["size"]) == 6 * 100_000
    key = "bytes_sent" if shm == "off" else "shm"
    sent = [link.statistics()[key] for link in links]
    if shm == "on":
        sent = [s["bytes_sent"] for s in sent]
    assert sum(sent) > 100_000


class ArrayCheck(BasicBolt):
    """Checks every array it gets is whole (all its elements are its first): the sum of
    the first elements, and the arrays found broken."""

    def prepare(self, conf, context):
        self.total = self.broken = 0

    def execute(self, tup):
        a = tup.values[0]
        self.total += int(a[0])
        self.broken += int(not (a == a[0]).all())

    def result(self):
        return self.total, self.broken


class SpoutGate:
    import threading

    event = threading.Event()


class GatedList(ListSpout):
    """A ListSpout that emits nothing until the test opens `SpoutGate`."""

    def next_tuple(self):
        if SpoutGate.event.is_set():
            super().next_tuple()


@pytest.mark.parametrize("bulk", ["auto", "off"])
def test_large_buffers_on_keyed_links_go_sealed_beside_the_link_or_inside_it(bulk):
    """CURVE links: arrays of 64 KiB or more go sealed on the bulk socket (AES-GCM,
    transport/bulk.py), or inside the CURVE link with `topology.transport.bulk: off`;
    either way each arrives whole, once."""
    import numpy as np

    from stormish.testing import poll_for
    from stormish.transport.security import Curve

    t = Topology("sealed", config={"topology.disable.loadaware.messaging": True})
    rows = [(np.full(9000, i, dtype=np.int64),) for i in range(1, 61)]
    t.set_spout("s", GatedList(rows, fields=["a"]))
    t.set_bolt("check", ArrayCheck(), 2).shuffle_grouping("s")
    conf = {"topology.transport.shm": "off", "topology.transport.bulk": bulk}
    SpoutGate.event.clear()
    running, links = linked(t, 2, conf, security=Curve.ephemeral())
    try:
        if bulk == "auto":  # arrays sent before a peer's HELLO go inside CURVE (CI saw all 60)
            known = lambda: all(link.statistics()["bulk"]["peers"] == 1 for link in links)  # noqa: E731
            poll_for(known, 30, 0.02, "each worker knows the other's bulk socket")
        SpoutGate.event.set()
        running.wait_complete(60)
        results = running.results()
    finally:
        running.kill(0)
    assert sum(r[0] for r in results["check"]) == sum(range(1, 61))
    assert sum(r[1] for r in results["check"]) == 0
    stats = [link.statistics()["bulk"] for link in links]
    if bulk == "off":
        assert stats == [{"on": False}, {"on": False}]
        return
    sent = sum(s["messages_sent"] for s in stats)
    assert sent > 0 and sum(s["messages_received"] for s in stats) == sent
    assert all(s["missing"] == s["forged"] == 0 for s in stats)
    assert all(link.statistics()["dropped"] == {} for link in links)


def test_without_keys_there_is_no_bulk_socket():
    t = Topology("clear")
    t.set_spout("s", ListSpout([(1,)], fields=["a"]))
    running, links = linked(t, 2, {"topology.transport.shm": "off"})
    try:
        running.wait_complete(60)
    finally:
        running.kill(0)
    assert [link.statistics()["bulk"] for link in links] == [{"on": False}, {"on": False}]


class Gate:
    import threading

    event = threading.Event()


def FastSpout(count):  # noqa: N802 - builds the spout the tests below name
    return CountingSpout(count, per_call=100)


class Held(BasicBolt):
    def execute(self, tup):
        Gate.event.wait(10)


def bp_topology(count, extra=None):
    t = Topology(
        "bp2",
        config={
            "topology.acker.executors": 0,
            "topology.executor.receive.buffer.size": 1024,
            "topology.producer.batch.size": 128,
            "topology.transfer.buffer.size": 50,
            **(extra or {}),
        },
    )
    t.set_spout("fast", FastSpout(count))  # task 1 -> worker 0
    t.set_bolt("slow", Held()).shuffle_grouping("fast")  # task 2 -> worker 1
    return t


def test_remote_backpressure_stalls_spout_and_bounds_overflow():
    from stormish.testing import poll_for

    Gate.event.clear()
    running, links = linked(bp_topology(200_000), 2)
    try:
        poll_for(lambda: 2 in links[0].remote.flagged, timeout=20, what="task 2 flagged")
        s1 = poll_for(
            lambda: (st := running.statistics()).components["fast"].pending_emits and st,
            timeout=20,
            what="spout parked",
        )
        emitted = s1.components["fast"].emitted
        assert emitted < 200_000
        # halt-lag bound: what got past before the flag is what the transfer queue (50
        # batches of 128), the outbox, the sockets and the kernel buffers held
        # (parts.halt_lag_bound; x1.5: ZeroMQ's high-water marks and the kernel's
        # buffer sizes are approximate), never the 200,000-tuple stream
        q = running.workers[1].queues[2]
        assert q.overflow_high <= 1.5 * halt_lag_bound((100_000,)) < 200_000 * 0.6
        assert links[1].statistics()["status_sent"] >= 1
        Gate.event.set()
        final = running.wait_complete(60)
    finally:
        Gate.event.set()
        running.kill(0)
    assert final.components["slow"].executed == 200_000
    # the spout could only finish if the flag was lifted: entered, then cleared by the timer
    assert final.links["worker-1"]["status_sent"] >= 2


def test_overflow_limit_drops_are_counted_exactly():
    Gate.event.clear()

    # every status lost (test hook) from the start: the upstream is never told, so the
    # overflow hits its cap and the rest is dropped, counted
    def lose_statuses(links):
        links[1].status_filter = lambda status: True

    running, links = linked(
        bp_topology(20_000, {"topology.executor.overflow.limit": 256}),
        2,
        before_start=lose_statuses,
    )
    try:
        from stormish.testing import poll_for

        poll_for(
            lambda: links[1].dropped.get("overflow_limit", 0) > 0,
            timeout=20,
            what="drops past the overflow limit",
        )
        Gate.event.set()
        final = running.wait_complete(60)
    finally:
        Gate.event.set()
        running.kill(0)
    sent = final.components["fast"].transferred
    delivered = final.components["slow"].executed
    dropped = links[1].dropped["overflow_limit"]
    assert sent == 20_000
    assert sent == delivered + dropped
    assert dropped > 0


# -- a peer that stops reading, or is gone, must not hold up the others


class Peer:
    """A bare PULL socket standing in for a worker: read (healthy), never read
    (stalled: its queues fill), or not there at all (a dead port)."""

    def __init__(self, ctx, read: bool = True):
        import zmq

        self.sock = ctx.socket(zmq.PULL)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVHWM, 1)
        self.sock.setsockopt(zmq.RCVBUF, 4096)
        self.address = f"tcp://127.0.0.1:{self.sock.bind_to_random_port('tcp://127.0.0.1')}"
        self.tuples = 0
        self.kinds: list[str] = []

    def read(self) -> int:
        import zmq

        from stormish.transport import frames as fr

        while True:
            try:
                parts = self.sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return self.tuples
            msg = fr.decode([p.buffer for p in parts])
            self.kinds.append(msg.kind.name)
            if msg.kind == fr.Kind.TUPLES:
                self.tuples += sum(len(b[3]) for b in msg.body)


def dead_address() -> str:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connections are refused
    return f"tcp://127.0.0.1:{port}"


@pytest.mark.parametrize("lost", ["stalled", "dead_port"])
def test_a_lost_peer_never_holds_up_a_healthy_one_and_its_new_address_is_used(lost):
    import zmq

    from stormish.testing import poll_for

    t = Topology("three")
    t.set_spout("s", CountingSpout(1))
    conf = t.validate({"topology.workers": 3, "topology.transfer.buffer.size": 8})
    ctx = zmq.Context()
    healthy, stalled, fresh = Peer(ctx), Peer(ctx), Peer(ctx)
    gone = stalled.address if lost == "stalled" else dead_address()
    link = WorkerLink(0, "three", {1: 1, 2: 2}, conf)  # task 1 on worker 1, task 2 on 2
    link.attach({})
    link.connect({1: healthy.address, 2: gone})
    link.start()
    to_healthy, to_lost = link.remote_target(1), link.remote_target(2)
    row = ("x" * 200,)
    accepted = {1: 0, 2: 0}

    def publish(target, n=100) -> bool:
        if target.try_publish((7, "default", [row] * n, None), n):
            accepted[target.task] += n
            return True
        return False

    try:
        # the lost peer takes what ZeroMQ and the kernel hold, then its tasks are held:
        # the RemoteTarget refuses (the emit would park) instead of the link blocking
        poll_for(lambda: not publish(to_lost), 20, 0.001, "worker 2 held")
        # traffic to the healthy peer goes on, through the same transfer thread
        target = 20 * 100
        start = healthy.read()

        def flowing() -> bool:
            publish(to_healthy)
            return healthy.read() - start >= target

        poll_for(flowing, 20, 0.001, "tuples to the healthy peer while worker 2 is lost")
        assert not publish(to_lost)
        assert link.statistics()["peers_held"] == [2]
        # worker 2 moves: the new address is used at once, what waited for the old one is
        # dropped and counted
        link.connect({2: fresh.address})
        after_move = accepted[2]
        poll_for(lambda: publish(to_lost), 20, 0.005, "worker 2 accepts again")
        poll_for(lambda: fresh.read() > 0, 20, 0.01, "tuples at worker 2's new address")
        assert fresh.kinds[0] == "HELLO"
        assert link.statistics()["peers"]["2"]["state"] == "up"
        poll_for(lambda: not link.busy(), 20, 0.01, "the link drained")
        handed = link.statistics()["peers"]["2"]["tuples_sent"]  # to either address
        moved = link.dropped.get("peer_moved", 0)
        assert moved > 0
        assert accepted[2] == moved + handed  # each tuple handed to ZeroMQ, or counted
        poll_for(lambda: healthy.read() == accepted[1], 20, 0.01, "all at the healthy peer")
        if lost == "dead_port":  # nothing was handed to the dead address: exact
            poll_for(lambda: fresh.read() == handed, 20, 0.01, "all at the new address")
        else:  # what the old socket's ZeroMQ queue and the kernel held is lost, uncounted
            from stormish.transport.link import HWM_MESSAGES, SOCKET_BUFFER_BYTES

            in_flight = (HWM_MESSAGES + 1) * 1024 + (4 * SOCKET_BUFFER_BYTES + 2 * 4096) // 200

            def settled() -> bool:
                unseen = handed - fresh.read() - stalled.read()
                return fresh.read() >= accepted[2] - after_move and 0 <= unseen <= in_flight

            poll_for(settled, 20, 0.01, "the new address got what was sent after the move")
    finally:
        link.stop()
        for p in (healthy, stalled, fresh):
            p.sock.close()
        ctx.term()


def test_what_is_sent_to_a_peer_while_it_restarts_reaches_it_when_it_is_back():
    """A peer whose connection was lost is taken as restarting; what is sent
    to it meanwhile is held (not dropped) and delivered, in order, once a process listens
    on its address again. Held past the message timeout, it is dropped and counted."""
    import zmq

    from stormish.testing import poll_for

    t = Topology("back")
    t.set_spout("s", CountingSpout(1))
    conf = t.validate({"topology.workers": 2, "topology.message.timeout.secs": 3})
    ctx = zmq.Context()
    peer = Peer(ctx)
    link = WorkerLink(0, "back", {1: 1}, conf)
    link.attach({})
    link.connect({1: peer.address})
    link.start()
    target = link.remote_target(1)

    def state() -> str:
        return link.statistics()["peers"]["1"]["state"]

    def send(first: int, n: int) -> None:
        rows = [(i,) for i in range(first, first + n)]
        poll_for(lambda: target.try_publish((7, "default", rows, None), n), 10, 0.001)

    try:
        poll_for(lambda: state() == "up", 20, 0.01, "the peer connected")
        send(0, 100)
        poll_for(lambda: peer.read() == 100, 20, 0.01, "100 tuples at the peer")
        peer.sock.close(linger=0)  # the process died
        poll_for(lambda: state() == "down", 20, 0.01, "the connection seen lost")
        for k in range(10):
            send(100 + 50 * k, 50)  # accepted: nobody is parked for a down peer
        poll_for(lambda: not link._draining and len(link.transfer) == 0, 20, 0.01)
        assert link.statistics()["peers"]["1"]["held_while_down"] == 500
        back = Peer.__new__(Peer)  # a new process on the same address
        back.sock = ctx.socket(zmq.PULL)
        back.sock.setsockopt(zmq.LINGER, 0)
        back.sock.bind(peer.address)
        back.tuples, back.kinds = 0, []
        seen: list[int] = []

        def read_values() -> int:
            from stormish.transport import frames as fr

            while True:
                try:
                    parts = back.sock.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    return len(seen)
                msg = fr.decode([p.buffer for p in parts])
                back.kinds.append(msg.kind.name)
                if msg.kind == fr.Kind.TUPLES:  # rows of 16 or more cross packed
                    seen.extend(
                        v[0] for _, _, rows, _ in fr.unpack([b[1:] for b in msg.body]) for v in rows
                    )

        poll_for(lambda: read_values() == 500, 20, 0.01, "the 500 held tuples delivered")
        assert seen == list(range(100, 600))  # in order, none lost
        assert "peer_lost" not in link.dropped
        assert link.statistics()["peers"]["1"]["state"] == "up"
        # down again, and not back within the message timeout: what it held is dropped
        back.sock.close(linger=0)
        poll_for(lambda: state() == "down", 20, 0.01, "the connection seen lost again")
        send(600, 40)
        poll_for(lambda: link.dropped.get("peer_lost", 0) == 40, 20, 0.05,
                 "the held tuples dropped past the message timeout")  # fmt: skip
        assert not link.busy()
    finally:
        link.stop()
        peer.sock.close()
        ctx.term()
