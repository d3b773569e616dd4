"""Two workers linked by real ZeroMQ sockets on 127.0.0.1 (in one test process: the
socket layer, frames, RemoteTargets and the backpressure tracker end to end)."""

from __future__ import annotations

from collections import Counter

from stormish import BasicBolt, Bolt, Topology
from stormish.runtime.plan import build_plan
from stormish.runtime.running import RunningTopology
from stormish.runtime.worker import Worker, acker_bolt
from stormish.testing import ListSpout
from stormish.transport.link import WorkerLink

WORDS = [f"w{i}" for i in range(40)]
SENTENCES = [" ".join(WORDS[(i * 3 + j) % 40] for j in range(6)) for i in range(2000)]


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        for w in tup.values[0].split():
            self.emit([w])


class Count(Bolt):
    def prepare(self, conf, context):
        self.counts = Counter()

    def execute(self, tup):
        self.counts[tup.values[0]] += 1
        self.ack(tup)

    def result(self):
        return dict(self.counts)


def linked(topology: Topology, workers: int, extra: dict | None = None):
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
