"""Issue 14 item 9: Prometheus metrics of a running 2-worker topology, scraped over HTTP
from `stormish run --metrics-port`, equal the statistics `--stats-json` writes.

The spout emits its tuples, then holds (not finished) until the test has scraped a
quiet topology, so the scrape and the final statistics see the same counts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from stormish.local import poll_for
from stormish.runtime.workers import _child_env

TOPOLOGY = """
import os
from stormish import BasicBolt, Spout, Topology

RELEASE = {release!r}
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
        elif self.acked == N and os.path.exists(RELEASE):
            self.finish()

    def ack(self, msg_id):
        self.acked += 1


class Parity(BasicBolt):
    outputs = ["n"]
    streams = {{"default": ["n"], "odd": ["n"]}}

    def execute(self, tup):
        n = tup.values[0]
        if n % 2:
            self.emit([n], stream="odd")
        else:
            self.emit([n])


class Sink(BasicBolt):
    def execute(self, tup):
        pass


t = Topology("metered", config={{"topology.workers": 2}})
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
    release = tmp_path / "release"
    path = tmp_path / "metered.py"
    path.write_text(textwrap.dedent(TOPOLOGY.format(release=str(release))))
    stats_json = tmp_path / "stats.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "run", str(path), "--metrics-port", "0",
         "--stats-json", str(stats_json)],
        env=_child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = proc.stderr.readline()
        assert line.startswith("metrics: http://127.0.0.1:"), line
        url = line.split(" ", 1)[1].strip()

        def quiet():
            s = scrape(url)
            sink = series(s, "stormish_executed_total", component="sink")
            spout = series(s, "stormish_acked_total", component="s")
            return sum(sink.values()) == 3000 and sum(spout.values()) == 3000 and s

        samples = poll_for(quiet, 60, 0.1, "every tuple executed and acked")
        release.touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    stats = json.loads(stats_json.read_text())
    assert stats["status"] == "complete"
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
