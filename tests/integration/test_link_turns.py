"""A link served by a scheduler thread, between turns and when lent (real ZeroMQ sockets
on 127.0.0.1, in one test process): what a turn emitted leaves before the next round,
and taking a lent link back does not wait for its threads' polls to time out."""

from __future__ import annotations

import sys
import time

import pytest
import zmq

from stormish import BasicBolt, Topology
from stormish.local import poll_for
from stormish.runtime.acker import AckerBolt
from stormish.runtime.plan import build_plan
from stormish.runtime.worker import Worker
from stormish.testing import ListSpout
from stormish.transport import link as lk
from stormish.transport.link import WorkerLink
from stormish.transport.wakeup import FdWakeup

pytestmark = pytest.mark.timeout(60)


class Sink(BasicBolt):
    def execute(self, tup):
        pass


def _waiting(thread) -> bool:
    """The thread is in its poll (or the transfer queue's wait)."""
    frame = sys._current_frames().get(thread.ident)
    return frame is not None and frame.f_code.co_name in ("poll", "wait")


def _up(link: WorkerLink, peer: int) -> bool:
    box = link._out.boxes.get(peer)
    return box is not None and box.state == "up" and peer in link._incs  # its HELLO came


def _writable(link: WorkerLink, peer: int) -> bool:
    return bool(link._out._sock[peer].get(zmq.EVENTS) & zmq.POLLOUT)


def two_links():
    """Two workers' links and (unstarted) workers, each link told where the other is."""
    t = Topology("turns")
    t.set_spout("s", ListSpout([("a",)], fields=["w"]), 2)
    t.set_bolt("sink", Sink(), 2).fields_grouping("s", ["w"])
    conf = t.validate({"topology.workers": 2, "topology.acker.executors": 0})
    plan = build_plan(t, conf, AckerBolt())
    links, workers = [], []
    for i in range(2):
        link = WorkerLink(i, plan.name, plan.assignment, plan.conf)
        w = Worker(plan, i, remote_target=link.remote_target)
        link.attach(w.queues)
        links.append(link)
        workers.append(w)
    book = {i: link.address for i, link in enumerate(links)}
    for link in links:
        link.connect(book)
    return plan, links, workers


def test_what_a_turn_sent_leaves_between_turns_and_is_read_between_turns():
    plan, links, workers = two_links()
    a, b = links
    wakeups = [FdWakeup(), FdWakeup()]
    try:
        for link, wk in zip(links, wakeups, strict=True):
            link.serve(wk)  # this thread serves both: no link threads
        deadline = time.monotonic() + 20
        # both HELLOs through, and a's socket to b takes a message now (the handshake's
        # messages read and their room handed back: else the batch waits in the outbox
        # for the next round, as it should)
        while not (_up(a, 1) and _up(b, 0) and not a._out.waiting() and _writable(a, 1)):
            assert time.monotonic() < deadline, "the links never connected"
            a.service()
            b.service()
            a.park(0.01)
        sink = next(t for t in plan.tasks["sink"] if plan.assignment[t] == 1)
        src = next(t for t in plan.tasks["s"] if plan.assignment[t] == 0)
        rows = [(f"w{i}",) for i in range(40)]
        assert a.remote_target(sink).try_publish((src, "default", rows, None), len(rows))
        sent = a.statistics()["batches_sent"]
        a.between_turns()  # the only call on a's side: no service(), no next round
        assert a.statistics()["batches_sent"] == sent + 1 and len(a.transfer) == 0
        q = workers[1].queues[sink]
        poller = zmq.Poller()
        poller.register(b.pull, zmq.POLLIN)
        got = None
        deadline = time.monotonic() + 20
        while got is None:
            assert time.monotonic() < deadline, (
                f"the batch never reached the other worker: {a.statistics()} {b.statistics()}"
            )
            poller.poll(100)
            b.between_turns()  # reads what came, without a service() pass either
            got = q.consume()
        assert [v for (_, _, values, _) in got for v in values] == rows
    finally:
        for link in links:
            link.stop()
        for wk in wakeups:
            wk.close()


def test_taking_a_lent_link_back_does_not_wait_for_its_threads_polls(monkeypatch):
    """`serve` after `unserve` (the watchdog lent the link for a long turn): the link's
    threads end at once, not when their polls time out (POLL_MS, made 10 s here)."""
    monkeypatch.setattr(lk, "POLL_MS", 10_000)
    _, links, _ = two_links()
    link = links[0]
    wakeup = FdWakeup()
    try:
        link.serve(wakeup)
        link.unserve()  # lent: its receive and transfer threads run (polls of 10 s)
        assert len(link._threads) == 2
        poll_for(lambda: all(_waiting(t) for t in link._threads), 10, what="threads waiting")
        t0 = time.monotonic()
        link.serve(wakeup)  # taken back
        took = time.monotonic() - t0
        assert not link._threads and link.served
        assert took < 2.0, f"taking the link back took {took:.2f} s"
    finally:
        for x in links:
            x.stop()
        wakeup.close()
