"""Prometheus metrics of a running 2-worker topology, scraped over HTTP
from `stormish run --metrics-port`, equal the statistics `--stats-json` writes.

The spout emits its tuples, then holds (not finished) until the test has scraped a
quiet topology, so the scrape and the final statistics see the same counts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stormish.local import poll_for
from stormish.local.workers import _child_env
from stormish.runtime.stats import EXECUTE_BUCKETS

TOPOLOGY = """
import os
from stormish import BasicBolt, Spout, Topology

N = 3000


class Numbers(Spout):
    outputs = ["n"]

    def open(self, conf, context):
        self.n = 0
        self.acked = 0

    def next_tuple(self):
        if self.n < N:
            for _ in range(100):
                self.n += 1
                self.emit([self.n], msg_id=self.n)
        elif self.acked == N and os.path.exists(RELEASE_PATH):
            self.finish()

    def ack(self, msg_id):
        self.acked += 1


class Parity(BasicBolt):
    outputs = ["n"]
    streams = {"default": ["n"], "odd": ["n"]}

    def execute(self, tup):
        n = tup.values[0]
        if n % 2:
            self.emit([n], stream="odd")
        else:
            self.emit([n])


class Sink(BasicBolt):
    def execute(self, tup):
        pass


t = Topology("metered", config={"topology.workers": 2})
t.set_spout("s", Numbers())
t.set_bolt("parity", Parity(), parallelism=2).shuffle_grouping("s")
t.set_bolt("sink", Sink(), parallelism=2).shuffle_grouping("parity").shuffle_grouping(
    "parity", "odd"
)
topology = t
"""


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def series(samples, name, **labels):
    """The samples of metric `name` whose labels include `labels`, by their labels."""
    return {
        dict(k).get("task", k): v
        for (n, k), v in samples.items()
        if n == name and labels.items() <= dict(k).items()
    }


def test_a_scrape_of_a_running_two_worker_topology_equals_its_statistics(tmp_path):
    proc, url, release, stats_json = run_scraped(tmp_path, TOPOLOGY)
    try:

        def quiet():
            s = scrape(url)
            sink = series(s, "stormish_executed_total", component="sink")
            spout = series(s, "stormish_acked_total", component="s")
            return sum(sink.values()) == 3000 and sum(spout.values()) == 3000 and s

        samples = poll_for(quiet, 60, 0.1, "every tuple executed and acked")
    finally:
        stats = finish(proc, release, stats_json)
    tasks = stats["tasks"]
    for name, field in [
        ("stormish_executed_total", "executed"),
        ("stormish_transferred_total", "transferred"),
        ("stormish_acked_total", "acked"),
        ("stormish_failed_total", "failed"),
        ("stormish_timed_out_total", "timed_out"),
        ("stormish_errors_total", "errors"),
        ("stormish_receive_queue_capacity", "receive_capacity"),
    ]:
        got = series(samples, name, topology="metered")
        assert got == {t: float(v[field]) for t, v in tasks.items()}, name
    for task, t in tasks.items():
        labels = {"topology": "metered", "component": t["component"], "task": task,
                  "worker": str(t["worker"])}  # fmt: skip
        for stream, n in t["emitted_by_stream"].items():
            key = ("stormish_emitted_total", tuple(sorted({**labels, "stream": stream}.items())))
            assert samples[key] == n, key
        if t["kind"] == "bolt":  # every executed tuple in one execute-latency bucket
            count = series(samples, "stormish_execute_latency_seconds_count", task=task)
            assert count == {task: float(t["executed"])}
            inf = series(samples, "stormish_execute_latency_seconds_bucket", task=task, le="+Inf")
            assert list(inf.values()) == [float(t["executed"])]
    spout = next(task for task, t in tasks.items() if t["kind"] == "spout")
    completes = series(samples, "stormish_complete_latency_seconds_count", task=spout)
    assert completes == {spout: 3000.0}
    assert set(series(samples, "stormish_emitted_total", component="parity").values()) != {0}
    assert series(samples, "stormish_topology_workers") == {(("topology", "metered"),): 2.0}
    restarts = series(samples, "stormish_worker_restarts_total", topology="metered")
    assert sorted(restarts.values()) == [0.0, 0.0]


def run_scraped(tmp_path, source: str, *args: str):
    """`stormish run` of `source` (a topology whose spout holds, not finished, until the
    file RELEASE exists) with /metrics on a free port: (the process, the metrics URL,
    the release file, the --stats-json file)."""
    release = tmp_path / "release"
    path = tmp_path / "topo.py"
    path.write_text(textwrap.dedent(source.replace("RELEASE_PATH", repr(str(release)))))
    stats_json = tmp_path / "stats.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "run", str(path), "--metrics-port", "0",
         "--stats-json", str(stats_json), *args],
        env=_child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = proc.stderr.readline()
    while " WARNING " in line:  # a loaded machine's slow-turn warning may come first
        line = proc.stderr.readline()
    if not line.startswith("metrics: http://127.0.0.1:"):
        proc.kill()
        out, err = proc.communicate(timeout=10)
        raise AssertionError(line + err)
    return proc, line.split(" ", 1)[1].strip(), release, stats_json


def finish(proc, release, stats_json) -> dict:
    """Let the spout finish; the final statistics."""
    try:
        release.touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    stats = json.loads(stats_json.read_text())
    assert stats["status"] == "complete"
    return stats


HELD_SPOUT = """
import os
import time
from stormish import BasicBolt, Spout, Topology

N = {n}


class Numbers(Spout):
    outputs = ["n"]

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        if self.n < N:
            for _ in range(100):
                self.n += 1
                self.emit([self.n])
        elif os.path.exists(RELEASE_PATH):
            self.finish()


class Slow(BasicBolt):
    def execute(self, tup):
        time.sleep({per_tuple})  # simulated work: slower than the spout
"""

DROPPING = (
    HELD_SPOUT.format(n=1000, per_tuple=0.001)
    + """

t = Topology("dropping", config={"topology.workers": 2, "topology.acker.executors": 0})
t.set_spout("s", Numbers())
t.set_bolt("newest", Slow()).shuffle_grouping("s", overflow="drop_newest", capacity=20)
t.set_bolt("latest", Slow()).shuffle_grouping("s", overflow="latest", deadline_ms=1)
t.set_bolt("old", Slow()).shuffle_grouping(
    "s", overflow="drop_oldest", capacity=1000, lifespan_ms=20
)
topology = t
"""
)


def test_the_losses_of_dropping_edges_are_scraped_as_the_statistics_count_them(tmp_path):
    proc, url, release, stats_json = run_scraped(tmp_path, DROPPING)
    try:

        def quiet():  # every tuple of each bolt's edge executed or let go
            s = scrape(url)
            for bolt in ("newest", "latest", "old"):
                executed = series(s, "stormish_executed_total", component=bolt)
                lost = sum(  # every reason's (series() keeps one sample a task)
                    v for (n, k), v in s.items()
                    if n == "stormish_edge_dropped_total" and ("component", bolt) in k
                )  # fmt: skip
                if sum(executed.values()) + lost != 1000:
                    return False
            return s

        samples = poll_for(quiet, 60, 0.1, "every tuple executed or dropped")
    finally:
        stats = finish(proc, release, stats_json)
    got: dict[tuple, float] = {}
    for (name, labels), v in samples.items():
        if name in ("stormish_edge_dropped_total", "stormish_edge_deadline_missed_total"):
            assert dict(labels)["topology"] == "dropping"
            got[(name, labels)] = v
    want = {}
    for task, t in stats["tasks"].items():
        labels = {"topology": "dropping", "component": t["component"], "task": task,
                  "worker": str(t["worker"])}  # fmt: skip
        for e in t["edges"].values():
            edge = {**labels, "source": "s", "stream": "default"}
            assert e["edge"] == "s:default"
            losses = [("dropped", e["dropped"] - e["stale"]), ("stale", e["stale"]),
                      ("overwritten", e["overwritten"]), ("rejected", e["rejected"])]  # fmt: skip
            for reason, n in losses:
                key = tuple(sorted({**edge, "reason": reason}.items()))
                want[("stormish_edge_dropped_total", key)] = float(n)
            key = tuple(sorted(edge.items()))
            want[("stormish_edge_deadline_missed_total", key)] = float(e["deadline_missed"])
    assert got == want
    by = {c: e for c, comp in stats["components"].items() for e in comp["edges"].values()}
    assert by["newest"]["dropped"] > 0  # each policy did let tuples go here
    assert by["latest"]["overwritten"] > 0
    assert by["old"]["stale"] > 0
    # the link's own drops stay apart: nothing was lost between the workers
    assert not series(samples, "stormish_dropped_total")


BACKPRESSURED = (
    HELD_SPOUT.format(n=600, per_tuple=0.002)
    + """

t = Topology("pressed", config={"topology.executor.receive.buffer.size": 16,
                                "topology.acker.executors": 0})
t.set_spout("s", Numbers())
t.set_bolt("slow", Slow()).shuffle_grouping("s")
topology = t
"""
)


def test_time_under_backpressure_moves_while_a_slow_bolt_holds_its_spout(tmp_path):
    proc, url, release, stats_json = run_scraped(tmp_path, BACKPRESSURED)
    try:

        def spout_bp():
            return series(scrape(url), "stormish_backpressure_seconds_total", component="s")

        first = poll_for(lambda: sum(spout_bp().values()) > 0 and spout_bp(), 30, 0.05, "bp")
        (task,) = first
        poll_for(lambda: spout_bp()[task] > first[task], 30, 0.05, "backpressure time to grow")
        status = series(scrape(url), "stormish_backpressure_status", component="slow")
        assert status  # exported for the slow bolt's task (it may have drained meanwhile)

        def quiet():
            s = scrape(url)
            return sum(series(s, "stormish_executed_total", component="slow").values()) == 600 and s

        samples = poll_for(quiet, 60, 0.1, "the slow bolt to catch up")
    finally:
        stats = finish(proc, release, stats_json)
    got = series(samples, "stormish_backpressure_seconds_total", topology="pressed")
    want = {t: v["backpressure_seconds"] for t, v in stats["tasks"].items()}
    assert got == want
    assert want[task] > 0.5  # 600 tuples at 2 ms on a 16-tuple queue: mostly parked
    assert stats["tasks"][task]["component"] == "s"


KEEPING = """
import os
import time
from stormish import BasicBolt, Bolt, Spout, Topology

N = 200


class Paced(Spout):
    outputs = ["n"]

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        if self.n < N:
            self.n += 1
            self.emit([self.n], msg_id=self.n)
            time.sleep(0.002)  # paces the spout: a tuple every 2 ms or more
        elif os.path.exists(RELEASE_PATH):
            self.finish()


class Keeper(Bolt):
    # keeps each tuple, acks 50 at a time: the first of 50 waits 49 arrivals (>= 98 ms)
    def prepare(self, conf, context):
        self.kept = []

    def execute(self, tup):
        self.kept.append(tup)
        if len(self.kept) == 50:
            for t in self.kept:
                self.ack(t)
            self.kept = []


class Quick(BasicBolt):
    def execute(self, tup):
        pass


t = Topology("keeping", config={"topology.workers": 2})
t.set_spout("s", Paced())
t.set_bolt("keeper", Keeper()).shuffle_grouping("s")
t.set_bolt("quick", Quick()).shuffle_grouping("s")
topology = t
"""


def test_process_latency_runs_from_execute_to_a_later_ack(tmp_path):
    proc, url, release, stats_json = run_scraped(tmp_path, KEEPING)
    try:

        def quiet():
            s = scrape(url)
            return sum(series(s, "stormish_acked_total", component="s").values()) == 200 and s

        samples = poll_for(quiet, 60, 0.1, "every tree acked")
    finally:
        stats = finish(proc, release, stats_json)
    comps = stats["components"]
    keeper, quick = comps["keeper"], comps["quick"]
    # the Keeper's tuples waited for the 50th of their group, 2 ms or more apart
    assert keeper["process_latency_ms"] > 30, keeper
    assert keeper["execute_latency_ms"] < 5, keeper
    # a BasicBolt settles each tuple as its execute returns: process = execute
    assert quick["process_latency_ms"] == pytest.approx(quick["execute_latency_ms"], rel=1e-6)
    for task, t in stats["tasks"].items():
        if t["kind"] != "bolt":
            assert t["process_histogram"] == []
            assert not series(samples, "stormish_process_latency_seconds_count", task=task)
            continue
        assert sum(t["process_histogram"]) == t["acked"] == 200  # every ack measured once
        count = series(samples, "stormish_process_latency_seconds_count", task=task)
        assert count == {task: 200.0}
        total = series(samples, "stormish_process_latency_seconds_sum", task=task)
        assert total[task] == pytest.approx(t["process_latency_ms"] / 1000.0 * 200)
        inf = series(samples, "stormish_process_latency_seconds_bucket", task=task, le="0.05")
        below = sum(t["process_histogram"][: EXECUTE_BUCKETS.index(0.05) + 1])
        assert inf == {task: float(below)}
