"""A peer without keys announcing a huge frame, against real daemons and workers on
127.0.0.1; and the largest legitimate messages still crossing.

libzmq reads a frame whole before the CURVE handshake judges its sender: a stranger
that announced 500 MiB on nimbus's API port, its control port or a worker's link port
was buffered (four such connections took nimbus to 2 GiB). Every such socket now
refuses a frame past its bound (ZMQ_MAXMSGSIZE), and what is legitimately larger (a
topology's code, a worker's statistics and results, a large tuple) crosses in pieces.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager

import psutil
import pytest

from stormish import BasicBolt, LocalCluster, Topology
from stormish.testing import ListSpout

from .harness import running
from .parts import Count, Split
from .test_cluster import SENTENCES, WORDS, Cluster
from .test_hostile_peer import N, finish, started, topology
from .test_nimbus_security import NimbusProcess

MiB = 1 << 20
ANNOUNCED = 500 * MiB  # what the stranger's frame header says
STREAMED = 256 * MiB  # what it sends of it, unless the daemon hangs up first
GROWTH = 48 * MiB  # what the daemon may grow by meanwhile (kernel buffers, allocator)


@contextmanager
def huge_frame(port: int, mechanism: bytes = b"CURVE") -> Iterator[int]:
    """A raw TCP peer that says the ZMTP 3.0 greeting, announces a command frame of
    `ANNOUNCED` bytes (the handshake's first) and streams `STREAMED` bytes of it, or as
    many as the daemon takes before it hangs up; yields that count with the
    connection still open (what the daemon buffered is held while it is)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(b"\xff" + b"\0" * 8 + b"\x7f\x03\x00" + mechanism.ljust(20, b"\0") + b"\0" * 32)
        s.recv(64)
        chunk, sent = b"\0" * MiB, 0
        try:
            s.sendall(b"\x06" + struct.pack("!Q", ANNOUNCED))
            while sent < STREAMED:
                s.sendall(chunk)
                sent += len(chunk)
        except OSError:  # reset or broken pipe: the daemon refused the frame
            pass
        yield sent
    finally:
        s.close()


def half_open(port: int, mechanism: bytes = b"CURVE", wait: float = 25.0) -> bool:
    """A raw TCP peer that says the ZMTP 3.0 greeting and then nothing: whether the
    daemon hung up on it within `wait` s (a half-open handshake holds a connection, and
    up to a frame of what it sent, for as long as the daemon lets a handshake take)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        s.sendall(b"\xff" + b"\0" * 8 + b"\x7f\x03\x00" + mechanism.ljust(20, b"\0") + b"\0" * 32)
        try:
            while s.recv(4096):  # the daemon's greeting, then its end of the connection
                pass
        except TimeoutError:
            return False
        except OSError:  # reset: hung up too
            pass
        return True


def rss(pid: int) -> int:
    return psutil.Process(pid).memory_info().rss


@pytest.fixture(scope="module")
def nimbus(tmp_path_factory):
    n = NimbusProcess(str(tmp_path_factory.mktemp("caps")))  # keyed, as by default
    yield n
    n.close()


@pytest.mark.parametrize("port", ["api", "control"])
def test_a_stranger_announcing_a_huge_frame_to_nimbus_is_hung_up_on(nimbus, port):
    before = rss(nimbus.proc.pid)
    with huge_frame(getattr(nimbus, port)) as sent:
        grew = rss(nimbus.proc.pid) - before
    assert grew < GROWTH, f"nimbus grew {grew / MiB:.0f} MiB as a stranger sent {sent / MiB:.0f}"
    assert sent < STREAMED, "nimbus read the whole frame the stranger announced"
    with closing(nimbus.client()) as c:  # and goes on serving
        assert c.call("list") == []


HALF_OPEN_BOUND = 20.0  # s: libzmq's default handshake interval was 30 s, ours is 5


@pytest.mark.parametrize("port", ["api", "control"])
def test_a_strangers_half_open_handshake_to_nimbus_is_dropped_within_seconds(nimbus, port):
    t0 = time.monotonic()
    assert half_open(getattr(nimbus, port)), "nimbus never hung up"
    took = time.monotonic() - t0
    assert took < HALF_OPEN_BOUND, f"nimbus held a half-open handshake {took:.1f} s"
    with closing(nimbus.client()) as c:
        assert c.call("list") == []


def test_a_submit_larger_than_a_frame_is_taken(nimbus):
    """A topology whose code is 12 MiB (data its bolt carries) crosses in pieces."""
    t = Topology("big-code", config={"topology.workers": 1})
    t.set_spout("s", ListSpout([["a b"]], fields=["sentence"]))
    t.set_bolt("split", Carrying(12 * MiB)).shuffle_grouping("s")
    with closing(nimbus.client()) as c:
        assert c.call("submit", (t, {})) == "big-code"
        assert [r["name"] for r in c.call("list")] == ["big-code"]
        c.call("kill", ("big-code", 0))


class Carrying(Split):
    """Split, carrying `size` bytes of data in its code (random: nothing shrinks it)."""

    def __init__(self, size: int):
        self.blob = os.urandom(size)


class Keeping(BasicBolt):
    """Counts words and reports 3 MiB as its result: a worker's answer to `stop` past a
    frame."""

    def prepare(self, conf, context):
        self.n = 0

    def execute(self, tup):
        self.n += 1

    def result(self):
        return (self.n, os.urandom(3 * MiB))


def test_a_large_topology_runs_on_a_cluster_and_its_workers_answers_come_whole(tmp_path):
    """Its code goes to each worker (`assign`) and its results come back in the answer
    to `stop`, both past a frame on the control channel: they cross in pieces."""
    t = Topology("large", config={"topology.workers": 2})
    t.set_spout("s", ListSpout([[s] for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("split", Carrying(6 * MiB), parallelism=2).shuffle_grouping("s")
    t.set_bolt("count", Count(), parallelism=2).fields_grouping("split", ["word"])
    t.set_bolt("keep", Keeping()).shuffle_grouping("split")
    with running(lambda: Cluster(str(tmp_path))) as c:
        assert c.call("submit", (t, {})) == "large"
        c.wait_status("large", "complete", timeout=120)
        stats = c.call("stats", "large")
        log = c.log("nimbus.log")
    assert stats.components["count"].executed == WORDS == stats.components["keep"].executed
    assert "did not answer" not in log and "died during" not in log, log


def listening_on(port: int) -> psutil.Process:
    """The process of this test's that listens on `port` (a worker: its link)."""
    for p in psutil.Process().children(recursive=True):
        try:
            conns = p.net_connections("tcp")
        except psutil.NoSuchProcess:
            continue
        if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in conns):
            return p
    raise LookupError(f"no process of this test listens on port {port}")


def test_a_stranger_announcing_a_huge_frame_to_a_workers_link_is_hung_up_on(tmp_path):
    """A local run's links are keyed (a key pair made for the run): the stranger never
    completes the handshake, and its frame is refused at its header; the run, held
    half way meanwhile, then completes exactly."""
    go = str(tmp_path / "go")
    with LocalCluster(workers=2) as c:
        c.submit(topology("huge", go))
        w = started(c, "huge")
        address = w["address"][w["down"]]
        worker = listening_on(int(address.rsplit(":", 1)[1]))
        before = worker.memory_info().rss
        with huge_frame(int(address.rsplit(":", 1)[1])) as sent:
            grew = worker.memory_info().rss - before
        stats, results = finish(c, "huge", go)
    assert grew < GROWTH, (
        f"the worker grew {grew / MiB:.0f} MiB as a stranger sent {sent / MiB:.0f}"
    )
    assert sent < STREAMED, "the worker read the whole frame the stranger announced"
    assert stats.status == "complete" and sorted(results["sink"][0]) == list(range(N))


def test_a_strangers_half_open_handshake_to_a_workers_link_is_dropped_within_seconds(tmp_path):
    go = str(tmp_path / "go")
    with LocalCluster(workers=2) as c:
        c.submit(topology("halfopen", go))
        w = started(c, "halfopen")
        t0 = time.monotonic()
        assert half_open(int(w["address"][w["down"]].rsplit(":", 1)[1])), "never hung up on"
        took = time.monotonic() - t0
        stats, results = finish(c, "halfopen", go)
    assert took < HALF_OPEN_BOUND, f"the worker held a half-open handshake {took:.1f} s"
    assert stats.status == "complete" and sorted(results["sink"][0]) == list(range(N))
