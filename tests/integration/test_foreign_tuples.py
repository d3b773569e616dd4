"""Tuples count only on a connection a HELLO of this topology bound (transport/link.py).

Every topology of a cluster holds the cluster's CURVE keys, so a stale worker (of a
killed or rebalanced topology, of an earlier assignment on the same ports) or a worker
of another topology passes the handshake; tuples were placed on the sender index and
task ids alone, so such a worker could put rows in this topology's tasks. Now a
TUPLES message counts only on a connection bound by a HELLO of this topology; one
whose HELLO was foreign is dropped (`foreign`); one no HELLO bound yet (ZeroMQ
reconnected a peer's socket silently) is held, the peer asked for a HELLO, and placed
in order once it comes, or dropped (`unbound`) when it never does.

Two halves: a real `WorkerLink` under CURVE served on this thread against a peer made
of raw ZeroMQ sockets holding the run's keys (every step observable), and real runs
(`LocalCluster` worker processes; two linked workers whose link passes through a TCP
relay the test cuts) that must complete exact.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import zmq

from stormish import BasicBolt, LocalCluster, Topology
from stormish.config import defaults
from stormish.local.running import RunningTopology
from stormish.runtime.acker import AckerBolt
from stormish.runtime.plan import build_plan
from stormish.runtime.queue import ReceiveQueue
from stormish.runtime.worker import Worker
from stormish.testing import ListSpout, poll_for
from stormish.transport import frames as fr
from stormish.transport.link import WorkerLink
from stormish.transport.security import Curve, Security

from .test_hostile_peer import N, attack, finish, started
from .test_hostile_peer import topology as gated_topology
from .test_link_limits import serve

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("no_leaks")]

SINK = 2  # the receiving link's task (worker 1); worker 0 is the peer


def conf(**over: Any) -> dict:
    c = defaults()
    c.update({"topology.transport.shm": "off", "topology.transport.bulk": "off"}, **over)
    return c


class FakePeer:
    """Worker 0 as raw sockets holding the run's keys: a PULL where the link's messages
    to worker 0 come (its HELLOs, its asks), and PUSH connections to the link, each a
    connection of its own (a new handshake: a new name at the receiver)."""

    def __init__(self, keys: Security, link_address: str, incarnation: str = "peer-one"):
        self.keys, self.link_address, self.incarnation = keys, link_address, incarnation
        self.ctx = zmq.Context()
        self.pull = self.ctx.socket(zmq.PULL)
        self.pull.setsockopt(zmq.LINGER, 0)
        keys.server(self.pull)
        self.address = f"tcp://127.0.0.1:{self.pull.bind_to_random_port('tcp://127.0.0.1')}"
        self.pushes: list[zmq.Socket] = []
        self.asked = 0  # HELLOs from the link that ask us to say HELLO again

    def connection(self) -> zmq.Socket:
        push = self.ctx.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 0)
        self.keys.client(push)
        push.connect(self.link_address)
        self.pushes.append(push)
        return push

    def hello(self, push: zmq.Socket, topology: str = "t", **info: Any) -> None:
        base = {"address": self.address, "incarnation": self.incarnation, "reply": True,
                "status_base": 1}  # fmt: skip
        push.send_multipart(fr.encode_hello(0, 0, topology, dict(base, **info)))

    def tuples(self, push: zmq.Socket, values: list[int], seq: int = 1) -> None:
        rows = [[v] for v in values]
        push.send_multipart(fr.encode_tuples(0, seq, [(SINK, 1, "default", rows, None)]))

    def read(self) -> int:
        """Read what the link sent us; how many asks for a HELLO so far."""
        while True:
            try:
                msg = fr.decode(self.pull.recv_multipart(zmq.NOBLOCK))
            except zmq.Again:
                return self.asked
            if msg.kind == fr.Kind.HELLO and msg.body.worker_port_info.get("again"):
                self.asked += 1

    def close(self) -> None:
        for s in (*self.pushes, self.pull):
            s.close(0)
        self.keys.release(self.ctx)
        self.ctx.term()


@pytest.fixture
def keyed() -> Iterator[Callable[..., tuple[WorkerLink, ReceiveQueue, FakePeer]]]:
    """A keyed link (worker 1, task SINK) served by hand, and the fake worker 0."""
    made: list[tuple[WorkerLink, FakePeer]] = []

    def make(
        security: Security | None = None, **over: Any
    ) -> tuple[WorkerLink, ReceiveQueue, FakePeer]:
        keys = security or Curve.ephemeral()
        link = WorkerLink(1, "t", {1: 0, SINK: 1}, conf(**over), security=keys)
        q = ReceiveQueue(4096)
        link.attach({SINK: q})
        peer = FakePeer(keys, link.address)
        link.connect({0: peer.address})
        made.append((link, peer))
        return link, q, peer

    yield make
    for link, peer in made:
        link.stop()
        peer.close()


def values(q: ReceiveQueue) -> list[int]:
    """Every value taken from the queue so far, in order (the caller accumulates)."""
    out: list[int] = []
    while (batches := q.consume()) is not None:
        out.extend(row[0] for _, _, rows, _ in batches for row in rows)
    return out


def test_tuples_on_a_connection_whose_hello_named_another_topology_are_dropped(keyed):
    link, q, peer = keyed()
    push = peer.connection()
    peer.hello(push, topology="another-topology")
    peer.tuples(push, [-1, -2, -3])
    serve(link, lambda: link.dropped.get("foreign", 0) == 3)
    assert link.foreign == 1
    assert values(q) == [] and link.recv_tuples == 0
    assert link.statistics()["tuples_held"] == {"messages": 0, "bytes": 0}


def test_tuples_with_no_hello_are_held_the_peer_asked_then_dropped(keyed):
    link, q, peer = keyed()
    link.hold_secs = 0.5
    push = peer.connection()
    peer.tuples(push, [-1, -2])
    serve(link, lambda: link.statistics()["tuples_held"]["messages"] == 1)
    serve(link, lambda: peer.read() == 1)  # asked for a HELLO, once
    assert values(q) == []
    serve(link, lambda: link.dropped.get("unbound", 0) == 2)
    assert link.statistics()["tuples_held"] == {"messages": 0, "bytes": 0}
    # what comes next on the same connection asks again (the ask may have been lost)
    peer.tuples(push, [-3], seq=2)
    serve(link, lambda: peer.read() == 2)
    serve(link, lambda: link.dropped.get("unbound", 0) == 3)
    assert values(q) == [] and link.recv_tuples == 0


def test_a_connection_reestablished_silently_is_held_until_its_hello_then_delivered(keyed):
    """The peer's socket reconnected under it (a new handshake) and it goes on sending
    without a HELLO: nothing is placed before its HELLO on that connection, everything
    after it, in order; a HELLO on another connection binds nothing here."""
    link, q, peer = keyed()
    first = peer.connection()
    peer.hello(first, reply=False)
    peer.tuples(first, [0, 1, 2])
    got: list[int] = []
    serve(link, lambda: got.extend(values(q)) or got == [0, 1, 2])
    second = peer.connection()  # same sender index and incarnation, a new connection
    for k in range(5):
        peer.tuples(second, [3 + 2 * k, 4 + 2 * k], seq=2 + k)
    serve(link, lambda: link.statistics()["tuples_held"]["messages"] == 5)
    serve(link, lambda: peer.read() == 1)
    peer.hello(first, again=True)  # a HELLO on its former connection binds the held nothing
    serve(link, lambda: link.statistics()["status_sent_on_connect"] >= 2)
    assert values(q) == [] and link.statistics()["tuples_held"]["messages"] == 5
    peer.hello(second)  # on the connection they came on: delivered, in order
    serve(link, lambda: got.extend(values(q)) or len(got) == 13)
    assert got == list(range(13))
    peer.tuples(second, [13], seq=9)  # bound now: placed at once
    serve(link, lambda: got.extend(values(q)) or len(got) == 14)
    assert got == list(range(14))
    assert link.rebound == 5 and link.dropped == {}


@pytest.mark.parametrize("hello", ["ours", "foreign"])
def test_what_is_held_is_bounded_and_counted_once_its_hello_says_whose(keyed, monkeypatch, hello):
    """Past the bound the tuples are dropped, and counted when the connection's HELLO
    says whether a worker of this run sent them (`unbound_limit`, in the completion
    balance) or not (`foreign`)."""
    from stormish.transport import link as link_module

    monkeypatch.setattr(link_module, "HOLD_MESSAGES", 3)
    link, q, peer = keyed()
    push = peer.connection()
    for k in range(5):
        peer.tuples(push, [10 * k, 10 * k + 1], seq=k)
    serve(link, lambda: link.statistics()["tuples_held"]["messages"] == 3 and peer.read() == 1)
    if hello == "foreign":
        peer.hello(push, topology="another-topology")
        serve(link, lambda: link.dropped.get("foreign", 0) == 10)
        assert values(q) == [] and link.run_drops() == 0
    else:
        peer.hello(push)
        serve(link, lambda: link.dropped.get("unbound_limit", 0) == 4)
        assert values(q) == [0, 1, 10, 11, 20, 21] and link.run_drops() == 4
    assert link.statistics()["tuples_held"] == {"messages": 0, "bytes": 0}


def test_a_restarted_peer_unbinds_its_former_incarnations_connections(keyed):
    link, q, peer = keyed()
    old = peer.connection()
    peer.hello(old, reply=False)
    peer.tuples(old, [0])
    serve(link, lambda: values(q) == [0])
    new = peer.connection()
    peer.hello(new, reply=False, incarnation="peer-two", status_base=2)
    peer.tuples(new, [1], seq=2)
    serve(link, lambda: values(q) == [1])
    peer.tuples(old, [-1], seq=3)  # the former incarnation's connection counts no more
    serve(link, lambda: link.statistics()["tuples_held"]["messages"] == 1)
    assert values(q) == []


def test_without_keys_tuples_are_not_bound_as_before(link_and_peer_loopback):
    """No connection has a name without CURVE: tuples with no HELLO are placed (any
    process on the host may send anything there; docs/security.md)."""
    link, q, push = link_and_peer_loopback
    push.send_multipart(fr.encode_tuples(0, 1, [(SINK, 1, "default", [[7], [8]], None)]))
    serve(link, lambda: link.recv_tuples == 2)
    assert values(q) == [7, 8] and link.dropped == {}


@pytest.fixture
def link_and_peer_loopback() -> Iterator[tuple[WorkerLink, ReceiveQueue, zmq.Socket]]:
    link = WorkerLink(1, "t", {1: 0, SINK: 1}, conf())
    q = ReceiveQueue(4096)
    link.attach({SINK: q})
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.connect(link.address)
    try:
        yield link, q, push
    finally:
        push.close(0)
        ctx.term()
        link.stop()


# -- real worker processes: a process holding the run's keys against a LocalCluster run


def injected(seen: list[int]) -> list[int]:
    return [v for v in seen if v < 0]


@pytest.mark.parametrize("named", ["another-topology", "victim", "victim#e1"])
def test_a_worker_of_another_topology_or_run_puts_no_tuple_in_a_task(tmp_path, named):
    """A process holding the cluster's keys says HELLO as a worker of another topology,
    or of an earlier run of this one (killed and submitted again, rebalanced: same
    name, its peers' ports taken by this run's workers). A HELLO names the topology and
    its run (`link.run_topology_id`: a local run's nonce, a cluster topology's epoch);
    "victim" is the HELLO a worker made before runs were named, which by name alone
    passed for one of this run's and placed its tuples."""
    go = str(tmp_path / "go")
    with LocalCluster(workers=2) as c:
        c.submit(gated_topology("victim", go))
        w = started(c, "victim")
        keys = c._get("victim").group.security  # the cluster's keys: another topology's
        down = f"worker-{w['down']}"
        info = {"incarnation": "x", "status_base": 1, "reply": True}
        hello = fr.encode_hello(w["up"], 0, named, info)
        rows = fr.encode_tuples(w["up"], 1, [(w["sink"], w["src"], "default", [[-1], [-2]], None)])
        assert attack(w["address"][w["down"]], hello, rows, security=keys)
        poll_for(
            lambda: c.statistics("victim").links[down]["dropped"].get("foreign", 0) == 2,
            timeout=30,
            what="the foreign tuples dropped",
        )
        stats, results = finish(c, "victim", go)
    seen = results["sink"][0]
    assert injected(seen) == [], f"a worker of {named!r} placed tuples in a task"
    assert stats.status == "complete" and sorted(seen) == list(range(N))
    assert stats.links[down]["foreign_hellos"] == 1


def test_a_keyed_process_that_never_says_hello_puts_no_tuple_in_a_task(tmp_path):
    go = str(tmp_path / "go")
    with LocalCluster(workers=2) as c:
        c.submit(gated_topology("nohello", go))
        w = started(c, "nohello")
        keys = c._get("nohello").group.security
        down, up = f"worker-{w['down']}", f"worker-{w['up']}"
        greeted = c.statistics("nohello").links[up]["status_sent_on_connect"]
        rows = fr.encode_tuples(w["up"], 1, [(w["sink"], w["src"], "default", [[-1], [-2]], None)])
        assert attack(w["address"][w["down"]], rows, security=keys)
        # held, and the worker it names asked for a HELLO: it answers on its own
        # connection, which binds nothing of the stranger's
        poll_for(
            lambda: c.statistics("nohello").links[up]["status_sent_on_connect"] > greeted,
            timeout=30,
            what="the upstream worker asked for a HELLO",
        )
        poll_for(
            lambda: c.statistics("nohello").links[down]["dropped"].get("unbound", 0) == 2,
            timeout=30,
            what="the unbound tuples dropped",
        )
        assert c.statistics("nohello").links[down]["tuples_held"]["messages"] == 0
        stats, results = finish(c, "nohello", go)
    seen = results["sink"][0]
    assert injected(seen) == [], "a process that never said HELLO placed tuples in a task"
    assert stats.status == "complete" and sorted(seen) == list(range(N))


# -- a silent reconnect in a real run: two linked workers, one link through a TCP relay

COUNT = 4000


class GatedList(ListSpout):
    """`ListSpout` (reliable, replays what fails) that emits no new item past half
    until the file `go` exists."""

    def __init__(self, go: str):
        super().__init__([(i,) for i in range(COUNT)], fields=["n"], per_call=50)
        self.go = go

    def next_tuple(self) -> None:
        if self.emits >= COUNT // 2 and not self.failed and not os.path.exists(self.go):
            return
        super().next_tuple()


class Seen(BasicBolt):
    """Every value it took, in order (acked by BasicBolt)."""

    def prepare(self, conf, context):
        self.seen: list[int] = []

    def execute(self, tup):
        self.seen.append(tup.values[0])

    def result(self):
        return self.seen


class Relay:
    """A TCP relay on 127.0.0.1 to `target` (host, port): every connection it accepts is
    copied both ways to a connection of its own to the target; `cut` closes them all,
    as a network blip would (the ZeroMQ socket on the far side reconnects silently)."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"tcp://127.0.0.1:{self.listener.getsockname()[1]}"
        self.lock = threading.Lock()
        self.conns: list[socket.socket] = []
        self.accepted = 0
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return  # closed
            far = socket.create_connection(self.target)
            with self.lock:
                self.conns += [near, far]
                self.accepted += 1
            for a, b in ((near, far), (far, near)):
                t = threading.Thread(target=self._pump, args=(a, b), daemon=True)
                t.start()
                self.threads.append(t)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()
        for t in self.threads:
            t.join(5)


def test_tuples_on_a_silently_reestablished_link_are_delivered_after_its_hello(tmp_path):
    """The link from the spout's worker to the sink's is cut under it while the run is
    held half way (nothing in flight); ZeroMQ reconnects it, a new connection the
    receiver counts tuples on only once a HELLO binds it. The sender says HELLO again
    first (what ZeroMQ held from before the cut would be held at the receiver until
    then, and what the sender held for it follows): the run completes exact (every item
    executed and acked once, none failed), nothing held or dropped."""
    go = str(tmp_path / "go")
    t = Topology("relay", config={"topology.disable.loadaware.messaging": True})
    t.set_spout("src", GatedList(go))
    t.set_bolt("sink", Seen(), 2).shuffle_grouping("src")
    conf = t.validate({"topology.workers": 2, "topology.message.timeout.secs": 60})
    plan = build_plan(t, conf, AckerBolt())
    keys = Curve.ephemeral()
    links = [WorkerLink(i, plan.name, plan.assignment, plan.conf, security=keys) for i in (0, 1)]
    workers = []
    for i, link in enumerate(links):
        w = Worker(plan, i, remote_target=link.remote_target)
        link.attach(w.queues)
        w.link = link
        workers.append(w)
    spout = next(task for task, c in plan.task_component.items() if c == "src")
    up = plan.assignment[spout]
    down = 1 - up
    host, port = links[down].address[len("tcp://") :].rsplit(":", 1)
    relay = Relay((host, int(port)))
    links[up].connect({down: relay.address})
    links[down].connect({up: links[up].address})
    for link in links:
        link.start()
    for w in workers:
        w.start()
    running = RunningTopology(t, plan, workers)
    try:
        poll_for(lambda: running.statistics().components["src"].emitted >= COUNT // 2,
                 30, 0.01, "the spout held half way")  # fmt: skip
        poll_for(lambda: running.statistics().components["src"].acked >= COUNT // 2,
                 30, 0.01, "every tree of the first half done")  # fmt: skip
        relay.cut()
        poll_for(lambda: relay.accepted == 2, 30, 0.01, "the link reconnected")
        open(go, "w").close()
        stats = running.wait_complete(60)
        results = running.results()
    finally:
        running.kill(0)
        relay.close()
    seen = [v for part in results["sink"] for v in part]
    assert sorted(seen) == list(range(COUNT))  # each once
    spouted = results["src"][0]
    assert spouted["acked"] == dict.fromkeys(range(COUNT), 1) and spouted["failed"] == {}
    assert stats.links[f"worker-{up}"]["peers"][str(down)]["hellos_again"] == 1
    link = stats.links[f"worker-{down}"]
    assert link["dropped"] == {} and link["tuples_held"]["messages"] == 0
