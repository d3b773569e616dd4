"""Two workers linked by real ZeroMQ sockets on 127.0.0.1 (in one test process: the
socket layer, frames, RemoteTargets and the backpressure tracker end to end)."""

from __future__ import annotations

from collections import Counter

from stormish import BasicBolt, Topology
from stormish.runtime.plan import build_plan
from stormish.runtime.running import RunningTopology
from stormish.runtime.worker import Worker, acker_bolt
from stormish.testing import ListSpout
from stormish.transport.link import WorkerLink

from .parts import Count, CountingSpout, Split, sentences

SENTENCES = sentences(40, 3, 6, 2000)


def linked(topology: Topology, workers: int, extra: dict | None = None, before_start=None):
    conf = topology.validate({"topology.workers": workers, **(extra or {})})
    plan = build_plan(topology, conf, acker_bolt())
    ws, links = [], []
    for i in range(workers):
        link = WorkerLink(i, plan.name, plan.assignment, plan.conf)
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
        # batches of 128), the sockets and the spout's emits during the lag held: a few
        # multiples of the transfer queue, never the 200,000-tuple stream
        q = running.workers[1].queues[2]
        assert q.overflow_high <= 5 * 50 * 128
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
        links[1].drop_status_hook = lambda status: True

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
