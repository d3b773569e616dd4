"""A stranger on a real worker's bulk port (transport/bulk.py), on 127.0.0.1.

The bulk socket carries sealed large buffers beside the CURVE link and had no handshake
that judged its peer; libzmq counts a message against the queue's high-water mark only
once its last frame came, and ZMQ_MAXMSGSIZE bounds a frame, not a message, so one
connection sending a message of endless 1 MiB frames was held whole: 256 MiB sent grew
a worker by 257 MiB. The socket now lets in only a peer that gives the receiver's token
(ZeroMQ's PLAIN, checked by the ZAP handler; the token travels in the HELLO on the
CURVE link), before libzmq takes any message frame of its.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import zmq

from stormish import LocalCluster, Topology
from stormish.testing import poll_for

from .test_frame_caps import half_open, huge_frame, listening_on
from .test_hostile_peer import ARRAYS, Arrays, GatedArrays, attack

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(300)]

MiB = 1 << 20
STREAMED = 256 * MiB  # what the stranger sends, unless the worker hangs up first
GROWTH = 48 * MiB  # what the worker may grow by meanwhile (kernel buffers, allocator)
HALF_OPEN_BOUND = 20.0  # s: libzmq's default handshake interval was 30 s, ours is 5
GREETING = b"\xff" + b"\0" * 8 + b"\x7f\x03\x00"  # ZMTP 3.0, before the mechanism


def command(name: bytes, body: bytes) -> bytes:
    data = bytes([len(name)]) + name + body
    if len(data) < 256:
        return b"\x04" + bytes([len(data)]) + data
    return b"\x06" + struct.pack("!Q", len(data)) + data


def handshake(mechanism: bytes, password: bytes | None) -> bytes:
    """What the stranger says after the greeting: NULL's READY (a PUSH), PLAIN's HELLO
    with `password` (None: none at all, message frames at once)."""
    if mechanism == b"NULL":
        return command(b"READY", b"\x0bSocket-Type" + struct.pack("!I", 4) + b"PUSH")
    if password is None:
        return b""
    return command(b"HELLO", b"\x05guess" + bytes([len(password)]) + password)


@contextmanager
def endless_message(port: int, mechanism: bytes, password: bytes | None) -> Iterator[int]:
    """A raw TCP peer that says the ZMTP 3.0 greeting with `mechanism`, its handshake
    (`handshake`), then streams a message of 1 MiB frames that all say more follows,
    `STREAMED` bytes of them or as many as the worker takes before it hangs up; yields
    that count with the connection still open (what the worker buffered is held while
    it is)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(GREETING + mechanism.ljust(20, b"\0") + b"\0" * 32)
        s.recv(64)
        frame, sent = b"\x03" + struct.pack("!Q", MiB) + b"\0" * MiB, 0
        try:
            s.sendall(handshake(mechanism, password))
            while sent < STREAMED:
                s.sendall(frame)
                sent += MiB
        except OSError:  # reset or broken pipe: the worker hung up
            pass
        yield sent
    finally:
        s.close()


def topology(go: str) -> Topology:
    t = Topology(
        "bulkauth",
        config={"topology.acker.executors": 0, "topology.transport.shm": "off"},
    )
    t.set_spout("src", GatedArrays(go))  # 64 KiB arrays: they go sealed on the bulk socket
    t.set_bolt("sink", Arrays()).shuffle_grouping("src")
    return t


@contextmanager
def held_half_way(tmp_path) -> Iterator[tuple[LocalCluster, int, str]]:
    """A 2-worker run of arrays, held half way: the cluster, the receiving worker's
    index and its bulk address. `exact` lets it go on."""
    go = str(tmp_path / "go")
    with LocalCluster(workers=2) as c:
        c.submit(topology(go))
        poll_for(
            lambda: c.statistics("bulkauth").components["src"].emitted >= ARRAYS // 2,
            timeout=60,
            what="the spout held half way",
        )
        where = {t.component: t.worker for t in c.statistics("bulkauth").tasks.values()}
        assert where["src"] != where["sink"], where
        down = where["sink"]
        c.go = go  # type: ignore[attr-defined]
        yield c, down, c.statistics("bulkauth").links[f"worker-{down}"]["bulk"]["address"]


def exact(c: LocalCluster, down: int) -> dict:
    """Let the run go on: it completes with every array once, whole, none lost on the
    bulk socket. Its receiving link's bulk statistics."""
    open(c.go, "w").close()  # type: ignore[attr-defined]
    stats = c.wait_complete("bulkauth", timeout=120)
    seen, broken = c._get("bulkauth").results()["sink"][0]
    assert stats.status == "complete"
    assert sorted(seen) == list(range(ARRAYS)) and broken == 0
    link = stats.links[f"worker-{down}"]
    assert link["bulk"]["missing"] == 0 and link["dropped"] == {}
    assert link["bulk"]["messages_received"] > 0  # the arrays went sealed (after HELLOs)
    return link["bulk"]


@pytest.mark.parametrize(
    "mechanism, password",
    [
        (b"NULL", None),  # any ZeroMQ socket without credentials, as before
        (b"PLAIN", b"ab" * 32),  # a wrong token
        (b"PLAIN", None),  # PLAIN's greeting, then message frames with no HELLO
    ],
    ids=["null", "wrong-token", "no-hello"],
)
def test_a_stranger_streaming_an_endless_message_to_a_bulk_port_is_hung_up_on(
    tmp_path, mechanism, password
):
    with held_half_way(tmp_path) as (c, down, address):
        port = int(address.rsplit(":", 1)[1])
        worker = listening_on(port)
        before = worker.memory_info().rss
        with endless_message(port, mechanism, password) as sent:
            grew = worker.memory_info().rss - before
        exact(c, down)
    assert grew < GROWTH, (
        f"the worker grew {grew / MiB:.0f} MiB as a stranger sent {sent / MiB:.0f} MiB"
    )
    assert sent < STREAMED, "the worker took a whole endless message from a stranger"


class Plain:
    """A ZeroMQ client's PLAIN credentials (for `attack`)."""

    def __init__(self, password: bytes):
        self.password = password

    def client(self, sock: zmq.Socket) -> None:
        sock.plain_username, sock.plain_password = b"stranger", self.password


def test_a_peer_with_a_wrong_token_or_none_is_refused_at_the_handshake(tmp_path):
    with held_half_way(tmp_path) as (c, down, address):
        forged = [[b"garbage"], [os.urandom(16), os.urandom(65536 + 16)]]
        assert not attack(address, *forged)  # no credentials (NULL)
        assert not attack(address, *forged, security=Plain(b"ab" * 32))
        assert not attack(address, *forged, security=Plain(b"x"))
        bulk = exact(c, down)
    assert bulk["forged"] == 0  # nothing of theirs reached the receiver


def test_a_stranger_announcing_a_huge_handshake_frame_to_a_bulk_port_is_hung_up_on(tmp_path):
    """libzmq reads the handshake's first frame (PLAIN's HELLO) whole before the ZAP
    handler judges it: the bulk socket refuses a frame past what a sealed buffer needs
    (64 MiB, `bulk.FRAME_BOUND`; it was 2 GiB) at its header."""
    with held_half_way(tmp_path) as (c, down, address):
        port = int(address.rsplit(":", 1)[1])
        worker = listening_on(port)
        before = worker.memory_info().rss
        with huge_frame(port, b"PLAIN") as sent:
            grew = worker.memory_info().rss - before
        exact(c, down)
    assert grew < GROWTH, (
        f"the worker grew {grew / MiB:.0f} MiB as a stranger sent {sent / MiB:.0f} MiB"
    )


def test_a_strangers_half_open_handshake_on_a_bulk_port_is_dropped_within_seconds(tmp_path):
    with held_half_way(tmp_path) as (c, down, address):
        t0 = time.monotonic()
        assert half_open(int(address.rsplit(":", 1)[1]), b"PLAIN"), "never hung up on"
        took = time.monotonic() - t0
        exact(c, down)
    assert took < HALF_OPEN_BOUND, f"a half-open handshake was held {took:.1f} s"
