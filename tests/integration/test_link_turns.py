"""A link served by a scheduler thread, between turns and when lent (real ZeroMQ sockets
on 127.0.0.1, in one test process): what a turn emitted leaves before the next round,
and taking a lent link back does not wait for its threads' polls to time out."""

from __future__ import annotations

import sys
import time

import pytest

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
