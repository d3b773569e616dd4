"""Multilang (stormish.multilang): real pystorm and Node components as subprocesses.

The components in tests/integration/multilang/ are written as their users write them
(pystorm's Bolt and Spout; a storm.js-style Node bolt) and are not changed for stormish.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from stormish import Bolt, LocalCluster, Topology, WorkerError
from stormish.multilang import ShellBolt, ShellSpout
from stormish.testing import FailOnceBolt, ListSpout, poll_for

from .parts import Count

HERE = Path(__file__).parent / "multilang"
PY = sys.executable
SENTENCES = [f"s{i} the cow jumped over the moon" for i in range(300)]


def expected_words(sentences):
    return Counter(w for s in sentences for w in s.split())


def children() -> list[tuple[int, str]]:
    """Processes running one of this directory's components (a multilang child)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(HERE) in cmd and state != "Z":
            found.append((int(d), cmd))
    return found


@pytest.fixture(autouse=True)
def no_child_left():
    """Every child is killed and reaped when its topology stops."""
    yield
    assert children() == [], "a multilang child outlived its topology"


def word_count(split, name, config=None):
    t = Topology(name, config=config or {})
    t.set_spout("sentences", ListSpout([(s,) for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("split", split, parallelism=2).shuffle_grouping("sentences")
    t.set_bolt("count", Count(), parallelism=2).fields_grouping("split", ["word"])
    return t


def merged_counts(results):
    total = Counter()
    for part in results["count"]:
        total.update(part)
    return total


@pytest.mark.parametrize("serializer", ["json", "msgpack"])
def test_a_pystorm_bolt_splits_sentences_exactly(serializer):
    split = ShellBolt([PY, str(HERE / "splitter.py"), serializer], ["word"], serializer=serializer)
    with LocalCluster() as cluster:
        cluster.submit(word_count(split, f"ml-{serializer}"))
        stats = cluster.wait_complete(f"ml-{serializer}", timeout=60)
        results = cluster._get(f"ml-{serializer}").results()
    assert merged_counts(results) == expected_words(SENTENCES)
    (spout,) = results["sentences"]
    assert sorted(spout["acked"]) == list(range(len(SENTENCES)))
    assert not spout["failed"]
    assert stats is not None


class Sink(Bolt):
    """Counts values of its input's first field and acks."""

    def prepare(self, conf, context):
        self.counts = Counter()

    def execute(self, tup):
        self.counts[tup.values[0]] += 1
        self.ack(tup)

    def result(self):
        return dict(self.counts)


def every_tenth(values):
    return int(values[0].split()[0][1:]) % 10 == 0


def spout_stat(cluster, name, field):
    return getattr(cluster.statistics(name).component("sentences"), field)


@pytest.mark.parametrize("serializer", ["json", "msgpack"])
def test_a_reliable_pystorm_spout_replays_what_fails(serializer):
    n = 200
    name = f"mlspout-{serializer}"
    t = Topology(name, config={"test.sentences": n})
    spout = ShellSpout([PY, str(HERE / "sentences.py"), serializer], ["sentence"],
                       serializer=serializer)  # fmt: skip
    t.set_spout("sentences", spout)
    # every 10th sentence fails once (the bolt raises): the spout's fail replays it
    t.set_bolt("flaky", FailOnceBolt(every_tenth, outputs=["sentence"])).shuffle_grouping(
        "sentences"
    )
    t.set_bolt("sink", Sink()).shuffle_grouping("flaky")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(
            lambda: spout_stat(cluster, name, "acked") >= n,
            timeout=60, interval=0.05, what="every sentence acked",
        )  # fmt: skip
        failed = spout_stat(cluster, name, "failed")
        cluster.kill(name)
        results = cluster._get(name).results()
    (sink,) = results["sink"]
    assert sink == {f"s{i} the cow jumped over the moon": 1 for i in range(n)}
    assert failed == n // 10


# -- other languages ---------------------------------------------------------------------------
NODE = shutil.which("node")
RUBY = shutil.which("ruby")


class Latest(Bolt):
    """Keeps the highest count seen per word (the Node counter's output) and acks."""

    def prepare(self, conf, context):
        self.best = {}

    def execute(self, tup):
        word, n = tup.values
        self.best[word] = max(n, self.best.get(word, 0))
        self.ack(tup)

    def result(self):
        return self.best


@pytest.mark.skipif(NODE is None, reason="no node on this machine: the Node component is skipped")
def test_a_node_bolt_after_a_pystorm_bolt_counts_exactly_and_sees_storms_handshake(tmp_path):
    out = tmp_path / "handshake.json"
    t = Topology("mlnode")
    t.set_spout("sentences", ListSpout([(s,) for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("split", ShellBolt([PY, str(HERE / "splitter.py")], ["word"]),
               parallelism=2).shuffle_grouping("sentences")  # fmt: skip
    counter = ShellBolt([NODE, "counter.js"], ["word", "count"], cwd=str(HERE),
                        env={"HANDSHAKE_OUT": str(out)})  # fmt: skip
    t.set_bolt("count", counter).fields_grouping("split", ["word"])
    t.set_bolt("latest", Latest()).shuffle_grouping("count")
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("mlnode", timeout=60)
        results = cluster._get("mlnode").results()
    assert results["latest"][0] == dict(expected_words(SENTENCES))
    assert stats.components["count"].errors == 0  # counter.js checks each task id list
    hs = json.loads(out.read_text())
    ctx = hs["context"]
    (task,) = [int(k) for k, v in ctx["task->component"].items() if v == "count"]
    assert ctx["taskid"] == task and ctx["componentid"] == "count"
    assert ctx["streams"] == ["default"]
    assert ctx["stream->outputfields"] == {"default": ["word", "count"]}
    assert ctx["source->stream->grouping"] == {
        "split": {"default": {"type": "FIELDS", "fields": ["word"]}}
    }
    assert ctx["source->stream->fields"] == {"split": {"default": ["word"]}}
    assert ctx["stream->target->grouping"] == {"default": {"latest": {"type": "SHUFFLE"}}}
    assert hs["conf"]["topology.name"] == "mlnode"
    assert not os.path.exists(hs["pidDir"])  # private, and removed with the child


@pytest.mark.skipif(RUBY is None, reason="no ruby on this machine: the Ruby component is skipped")
def test_a_ruby_bolt_splits_sentences_exactly():
    split = ShellBolt([RUBY, str(HERE / "splitter.rb")], ["word"])
    with LocalCluster() as cluster:
        cluster.submit(word_count(split, "mlruby"))
        cluster.wait_complete("mlruby", timeout=60)
        results = cluster._get("mlruby").results()
    assert merged_counts(results) == expected_words(SENTENCES)


# -- heartbeats and faults ---------------------------------------------------------------------
class Quiet(ListSpout):
    """Emits nothing, never finishes: a topology that stays up, idle."""

    def next_tuple(self):
        pass


def task_errors(stats, component):
    return [e for t in stats.tasks.values() if t.component == component for e in t.last_errors]


@pytest.mark.skipif(NODE is None, reason="no node on this machine")
def test_a_child_that_answers_heartbeats_lives_and_one_that_does_not_is_killed():
    t = Topology("mlbeat", config={"topology.subprocess.timeout.secs": 1.5})
    t.set_spout("sentences", Quiet([], fields=["sentence"]))
    alive = ShellBolt([NODE, str(HERE / "counter.js")], ["word", "count"])
    t.set_bolt("alive", alive).shuffle_grouping("sentences")
    t.set_bolt("silent", ShellBolt([NODE, str(HERE / "silent.js")], ["word"])).shuffle_grouping(
        "sentences"
    )
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(
            lambda: task_errors(cluster.statistics("mlbeat"), "silent"),
            timeout=30, interval=0.1, what="the silent child killed",
        )  # fmt: skip
        stats = cluster.statistics("mlbeat")
        cluster.kill("mlbeat")
    (err, *_) = task_errors(stats, "silent")
    assert "sent nothing for" in err and "topology.subprocess.timeout.secs" in err
    assert "killed by signal 9" in err
    assert stats.uptime_seconds > 1.5
    assert task_errors(stats, "alive") == []  # it answered every heartbeat


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("exit", ["exited", "exit code 3"]),
        ("garbage", ["wrote garbage", "this is not json", "killed by signal 9"]),
        ("hang", ["sent nothing for", "killed by signal 9"]),
    ],
)
def test_a_child_that_fails_is_killed_restarted_and_its_tuples_replayed(tmp_path, mode, says):
    marker = str(tmp_path / "faulted")
    split = ShellBolt([PY, str(HERE / "faulty.py"), mode, marker, "40"], ["word"])
    name = f"mlfault-{mode}"
    t = word_count(split, name, {"topology.subprocess.timeout.secs": 1})
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete(name, timeout=60)
        results = cluster._get(name).results()
    assert os.path.exists(marker)  # it did misbehave, once
    assert merged_counts(results) == expected_words(SENTENCES)  # replayed, exactly
    (spout,) = results["sentences"]
    assert sum(spout["failed"].values()) >= 1
    (err,) = task_errors(stats, "split")
    assert "SubprocessError" in err and "faulty.py" in err
    assert f"faulty bolt: {mode} now" in err  # the stderr tail
    for s in says:
        assert s in err


def test_with_fail_fast_a_dead_child_ends_the_run_with_its_error(tmp_path):
    marker = str(tmp_path / "faulted")
    split = ShellBolt([PY, str(HERE / "faulty.py"), "exit", marker, "10"], ["word"])
    t = word_count(split, "mlfast", {"topology.fail.fast": True})
    with LocalCluster() as cluster:
        cluster.submit(t)
        with pytest.raises(WorkerError, match="exit code 3") as caught:
            cluster.wait_complete("mlfast", timeout=60)
    assert "faulty bolt: exit now" in str(caught.value)
