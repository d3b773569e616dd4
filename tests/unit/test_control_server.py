"""The controller's side of the control channel (transport/control_server.py) against a
real ZeroMQ peer on loopback: a worker that answers and then exits can be seen dead
before its answer is read, and its answer still counts (a run's results were lost so:
`results["cap"]` missing after a stop under load)."""

from __future__ import annotations

import threading

import pytest
import zmq

from stormish.errors import WorkerError
from stormish.transport import control as ct
from stormish.transport.control_server import ControlServer

pytestmark = pytest.mark.timeout(30)


class AnswersAfterItsDeath:
    """A DEALER that answers the first request only once the controller has seen the
    process dead (`alive` is False from the start, and tells when it was asked)."""

    def __init__(self, server: ControlServer, ident: bytes, answer: object):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.IDENTITY, ident)
        self.sock.setsockopt(zmq.LINGER, 1000)
        self.sock.connect(server.address)
        index = int(ident[1:])
        # as a worker does: its hello makes it known to the ROUTER, which drops
        # requests to an identity it has not heard from
        info = {"index": index, "pid": 0, "topology": "t", "state": "new", "address": None}
        self.sock.send_multipart(ct.request("hello", 0, info))
        server.wait_hello("t", index, None, lambda: True, 10)
        self.answer = answer
        self.asked_alive = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def alive(self) -> bool:
        self.asked_alive.set()
        return False

    def _run(self) -> None:
        frames = self.sock.recv_multipart()
        verb, req_id, _ = ct.decode_request(frames)
        self.asked_alive.wait(10)
        self.sock.send_multipart(ct.answer(verb, req_id, self.answer))

    def close(self) -> None:
        self.thread.join(10)
        self.sock.close()
        self.ctx.term()


@pytest.fixture
def server():
    s = ControlServer()
    yield s
    s.close()


def test_an_answer_that_comes_after_the_worker_is_seen_dead_is_kept(server):
    w = AnswersAfterItsDeath(server, b"w0", {"stuck": []})
    try:
        assert server.request(b"w0", "stats", None, w.alive, 10, "worker 0") == {"stuck": []}
    finally:
        w.close()


def test_every_answer_of_a_request_to_all_is_kept_though_one_worker_exited(server):
    a = AnswersAfterItsDeath(server, b"w0", 1)
    b = AnswersAfterItsDeath(server, b"w1", 2)
    try:
        asks = [
            (b"w0", "stats", None, a.alive, "worker 0"),
            (b"w1", "stats", None, b.alive, "worker 1"),
        ]
        assert server.request_all(asks, 10) == [1, 2]
    finally:
        a.close()
        b.close()


def test_a_worker_that_never_answers_is_still_called_dead(server):
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, b"w2")
    sock.connect(server.address)
    info = {"index": 2, "pid": 0, "topology": "t", "state": "new", "address": None}
    sock.send_multipart(ct.request("hello", 0, info))
    server.wait_hello("t", 2, None, lambda: True, 10)
    try:
        with pytest.raises(WorkerError, match="worker 2 died during stats"):
            server.request(b"w2", "stats", None, lambda: False, 10, "worker 2")
    finally:
        sock.close(0)
        ctx.term()


def test_a_beat_refreshes_its_workers_hello_only_and_garbage_is_dropped(server):
    """A worker's beat (its own thread's socket, another identity) says the process of
    its hello is there: `heard` moves on, the identity replies go to does not; a beat
    from another pid, for a worker never heard of, or unreadable changes nothing."""
    ctx = zmq.Context()
    main, beat = ctx.socket(zmq.DEALER), ctx.socket(zmq.DEALER)
    try:
        main.setsockopt(zmq.IDENTITY, b"w3-1")
        for s in (main, beat):
            s.setsockopt(zmq.LINGER, 0)
            s.connect(server.address)
        info = {"index": 3, "pid": 41, "topology": "t", "state": "running", "address": None}
        main.send_multipart(ct.request("hello", 0, info))
        server.wait_hello("t", 3, 41, lambda: True, 10)
        first = server.hellos[("t", 3)]
        beat.send_multipart(ct.request("beat", 0, {"index": 3, "pid": 42, "topology": "t"}))
        beat.send_multipart(ct.request("beat", 0, {"index": 4, "pid": 41, "topology": "t"}))
        beat.send_multipart([b"beat", b"\x00", b"{not json"])
        beat.send_multipart([b"marker"])  # in order behind them: they were read by then
        seen: list = []
        while not any(f == [b"marker"] for _, f in seen):
            seen += server._pump(50)
        assert server.hellos[("t", 3)] == first and set(server.hellos) == {("t", 3)}
        beat.send_multipart(ct.request("beat", 0, {"index": 3, "pid": 41, "topology": "t"}))

        def refreshed() -> bool:
            server.pump(20)
            return server.hellos[("t", 3)].heard > first.heard

        from stormish.testing import poll_for

        poll_for(refreshed, 10, 0.01, "the beat read")
        now = server.hellos[("t", 3)]
        assert (now.ident, now.pid, now.info) == (first.ident, 41, first.info)
        assert set(server.hellos) == {("t", 3)}
    finally:
        main.close()
        beat.close()
        ctx.term()


def test_a_fenced_hello_is_not_kept_and_its_worker_is_told_to_stop(server):
    """The fence (nimbus's `admit`): a hello from an incarnation that is not its slot's
    (its supervisor stalled and the slot moved) must not stand for the worker, and the
    stale worker is told to stop, at once, at that very hello."""
    server.admit = lambda key, hello: "not its slot" if hello.pid == 7 else None
    ctx = zmq.Context()
    socks = []
    try:
        for pid in (5, 7):  # the current incarnation, then the stale one
            sock = ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.IDENTITY, f"w0-{pid}".encode())
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(server.address)
            info = {"index": 0, "pid": pid, "topology": "t", "state": "running",
                    "address": f"tcp://h:{pid}"}  # fmt: skip
            sock.send_multipart(ct.request("hello", 0, info))
            socks.append(sock)
        for _ in range(200):  # both hellos read: the stale one answered with a stop
            server.pump(50)
            if ("t", 0) in server.hellos and socks[1].poll(0):
                break
        assert socks[1].poll(0)
        verb, _, payload = ct.decode_request(socks[1].recv_multipart())
        assert verb == "stop" and payload > 0
        assert server.hellos[("t", 0)].pid == 5  # the stale hello did not replace it
        assert not socks[0].poll(100)  # the current one is told nothing
    finally:
        for sock in socks:
            sock.close()
        ctx.term()


def test_a_fenced_workers_answer_to_its_stop_is_noted(server):
    """Nimbus starts a fenced worker's replacement once the stale incarnation answered
    its stop (it stopped), or its time ran out: the answer, otherwise dropped as a late
    reply, is noted by (topology, index, pid); another reply is not taken for it."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, b"w0-9")
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(server.address)
        info = {"index": 0, "pid": 9, "topology": "t", "state": "running", "address": None}
        sock.send_multipart(ct.request("hello", 0, info))
        server.wait_hello("t", 0, 9, lambda: True, 10)
        server.fence(("t", 0), b"w0-9", 9)
        assert sock.poll(10_000)
        verb, req_id, _ = ct.decode_request(sock.recv_multipart())
        assert verb == "stop"
        sock.send_multipart(ct.answer(verb, req_id + 1000, {"stuck": []}))  # not its answer
        sock.send_multipart(ct.answer(verb, req_id, {"stuck": []}))
        for _ in range(200):
            server.pump(50)
            if server.fence_answered:
                break
        assert server.fence_answered == {("t", 0, 9)}
    finally:
        sock.close()
        ctx.term()
