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
from multilang.procs import children as running_under

import stormish
from stormish import Bolt, LocalCluster, Topology, WorkerError
from stormish.multilang import ShellBolt, ShellSpout
from stormish.testing import FailOnceBolt, ListSpout, poll_for

from .parts import Count

HERE = Path(__file__).parent / "multilang"
ROOT = str(Path(stormish.__file__).resolve().parents[1])
PY = sys.executable
SENTENCES = [f"s{i} the cow jumped over the moon" for i in range(300)]


def expected_words(sentences):
    return Counter(w for s in sentences for w in s.split())


def children() -> list[tuple[int, str]]:
    """Processes running one of this directory's components (a multilang child)."""
    return running_under(HERE)


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


@pytest.mark.parametrize(("serializer", "workers"), [("json", 1), ("msgpack", 1), ("json", 2)])
def test_a_pystorm_bolt_splits_sentences_exactly(serializer, workers):
    split = ShellBolt([PY, str(HERE / "splitter.py"), serializer], ["word"], serializer=serializer)
    name = f"ml-{serializer}-{workers}"
    with LocalCluster(workers=workers) as cluster:
        cluster.submit(word_count(split, name))
        stats = cluster.wait_complete(name, timeout=60)
        results = cluster._get(name).results()
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


@pytest.mark.parametrize("script", ["slow_echo.py", "never_acks.py"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_does_not_end_while_a_child_still_holds_tuples(workers, script):
    """Acking off, a child that takes 50 ms a tuple: its execute returned when the tuple
    was handed over, so the counts balanced and every queue was empty while the child
    worked; the run ended before its emits (each of 10 runs lost tuples). A child that
    never acks is done with a tuple once it answered a heartbeat sent after it: the run
    ends (it hung when every unacked tuple held it), with every emit."""
    slow = ShellBolt([PY, str(HERE / script), "0.05"], ["v"])
    t = Topology(f"ml-slow-{workers}-{script[:-3]}")
    t.set_spout("s", ListSpout([(i,) for i in range(5)]))
    t.set_bolt("slow", slow).shuffle_grouping("s")
    t.set_bolt("sink", Sink()).shuffle_grouping("slow")
    with LocalCluster(workers=workers, config={"topology.acker.executors": 0}) as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete(t.name, timeout=60)
        got = cluster._get(t.name).results()["sink"]
    assert stats.components["sink"].executed == 5
    assert Counter({i: 1 for i in range(5)}) == sum((Counter(p) for p in got), Counter())


def every_tenth(values):
    return int(values[0].split()[0][1:]) % 10 == 0


def spout_stat(cluster, name, field):
    return getattr(cluster.statistics(name).component("sentences"), field)


@pytest.mark.parametrize(
    ("script", "serializer"),
    [("sentences.py", "json"), ("sentences.py", "msgpack"), ("reliable_sentences.py", "json")],
)
def test_a_reliable_pystorm_spout_replays_what_fails(script, serializer):
    n = 200
    name = f"mlspout-{serializer}-{script[:3]}"
    t = Topology(name, config={"test.sentences": n})
    spout = ShellSpout([PY, str(HERE / script), serializer], ["sentence"],
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
    t = Topology("mlbeat", config={"topology.subprocess.timeout.secs": 2})
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
    assert stats.uptime_seconds > 2
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
    t = word_count(split, name, {"topology.subprocess.timeout.secs": 2})
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


# -- the rest of the protocol ------------------------------------------------------------------
class TaskSink(Bolt):
    """Records each input's values with the task that got it, and acks."""

    def prepare(self, conf, context):
        self.task = context.task_id
        self.seen = []

    def execute(self, tup):
        self.seen.append((*tup.values, self.task))
        self.ack(tup)

    def result(self):
        return self.seen


FEATURE_STREAMS = {"words": ["word", "ids"], "direct": ["word"], "probe": ["word"],
                   "ticks": ["tick"]}  # fmt: skip


@pytest.mark.parametrize("serializer", ["json", "msgpack"])
def test_named_streams_task_ids_direct_emits_errors_and_logs(serializer):
    words = [(f"w{i}",) for i in range(40)]
    name = f"mlfeat-{serializer}"
    t = Topology(name)
    t.set_spout("words", ListSpout(words, fields=["word"]))
    bolt = ShellBolt([PY, str(HERE / "features.py"), serializer], streams=FEATURE_STREAMS,
                     serializer=serializer)  # fmt: skip
    t.set_bolt("features", bolt, parallelism=2).shuffle_grouping("words")
    t.set_bolt("ids", TaskSink()).shuffle_grouping("features", "words")
    t.set_bolt("probe", TaskSink(), parallelism=3).fields_grouping("features", ["word"], "probe")
    t.set_bolt("direct", TaskSink(), parallelism=2).direct_grouping("features", "direct")
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete(name, timeout=60)
        results = cluster._get(name).results()
    probe_task = {w: task for part in results["probe"] for w, task in part}
    assert sorted(probe_task) == sorted(w for (w,) in words)
    ids = {w: json.loads(i) for w, i, _ in results["ids"][0]}
    assert ids == {w: [task] for w, task in probe_task.items()}  # the task it went to
    direct_parts = [sorted(w for w, _ in part) for part in results["direct"]]
    assert direct_parts[0] == sorted(w for (w,) in words) and direct_parts[1] == []
    (spout,) = results["words"]
    assert sorted(spout["acked"]) == list(range(len(words))) and not spout["failed"]
    errors = task_errors(stats, "features")
    assert len(errors) == 1 and "word='w7'" in errors[0]  # pystorm's raise_exception
    assert "ShellError: Shell Process Exception: Python ValueError raised" in errors[0]


def test_ticks_reach_the_child_on_storms_tick_stream():
    t = Topology("mlticks")
    t.set_spout("words", Quiet([], fields=["word"]))
    bolt = ShellBolt([PY, str(HERE / "features.py")], streams=FEATURE_STREAMS,
                     config={"topology.tick.tuple.freq.secs": 0.2})  # fmt: skip
    t.set_bolt("features", bolt).shuffle_grouping("words")
    t.set_bolt("ticks", TaskSink()).shuffle_grouping("features", "ticks")
    t.set_bolt("direct", TaskSink()).direct_grouping("features", "direct")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(lambda: cluster.statistics("mlticks").components["ticks"].executed >= 3,
                 timeout=30, interval=0.05, what="three ticks through the child")  # fmt: skip
        cluster.kill("mlticks")
        results = cluster._get("mlticks").results()
    seen = [v for v, _ in results["ticks"][0]]
    assert seen[:3] == [f"tick{i} 0.2 __system -1" for i in (1, 2, 3)]  # as Storm's ticks


class Overlaps(Bolt):
    """Collects how many `next`s the child had running as each tuple began, and acks."""

    def prepare(self, conf, context):
        self.seen = Counter()

    def execute(self, tup):
        self.seen[tup.values[1]] += 1
        self.ack(tup)

    def result(self):
        return dict(self.seen)


def test_a_spout_child_that_answers_acks_before_its_next_gets_one_command_at_a_time():
    """As storm.js answers: nextTuple's sync comes from a timer, an ack's at once. Storm's
    ShellSpout sends one command at a time; the ack's sync was taken for the `next`'s and
    a second `next` sent while the first ran (found by a hunt with Storm's
    randomsentence.js: two nextTuple calls at once, twice the rate its timer allows)."""
    n = 200
    t = Topology("mlasync")
    t.set_spout("sentences", ShellSpout([PY, str(HERE / "async_spout.py"), str(n)], ["n", "over"]))
    t.set_bolt("sink", Overlaps()).shuffle_grouping("sentences")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(
            lambda: spout_stat(cluster, "mlasync", "acked") >= n,
            timeout=60, interval=0.05, what="every tuple acked",
        )  # fmt: skip
        cluster.kill("mlasync")
        results = cluster._get("mlasync").results()
    (seen,) = results["sink"]
    assert seen == {0: n}  # never a next while another ran


@pytest.mark.parametrize(("mode", "says"), [("exit", "exit code 4"), ("hang", "sent nothing")])
def test_a_spout_child_that_fails_is_restarted(tmp_path, mode, says):
    n = 100
    name = f"mlspoutfault-{mode}"
    marker = str(tmp_path / "faulted")
    t = Topology(name, config={"test.sentences": n, "topology.subprocess.timeout.secs": 2})
    t.set_spout("sentences", ShellSpout([PY, str(HERE / "crashy_spout.py"), mode, marker, "30"],
                                        ["sentence"]))  # fmt: skip
    t.set_bolt("sink", Sink()).shuffle_grouping("sentences")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(
            lambda: spout_stat(cluster, name, "acked") >= n + 29,  # the restart emits all n
            timeout=60, interval=0.05, what="every sentence acked after the restart",
        )  # fmt: skip
        stats = cluster.statistics(name)
        cluster.kill(name)
        results = cluster._get(name).results()
    assert os.path.exists(marker)
    (sink,) = results["sink"]
    assert set(sink) == {f"sentence {i}" for i in range(n)}
    assert sum(sink.values()) == n + 29  # 29 before the fault, n from the new child
    (err,) = task_errors(stats, "sentences")  # one fault: old trees' acks are not forwarded
    assert says in err and f"crashy spout: {mode} now" in err


# -- backpressure and cleanup ---------------------------------------------------------------------
def test_what_is_written_to_a_child_that_does_not_read_is_bounded():
    from stormish.multilang.child import WRITE_BATCH, Child

    # a child that never reads its stdin: the pipe fills, then the writer's queue
    sleeper = [PY, "-c", "import time, sys; sys.stdout.write(''); time.sleep(60)"]
    child = Child(sleeper, "json", "test", capacity=10, timeout=60)
    try:
        row = {"id": "1", "tuple": ["x" * 1000]}
        accepted = 0
        # bounded: the pipe (64 KiB on Linux: ~64 rows), one write batch in the writer's
        # hands, and the queue's capacity
        while accepted < 10_000:
            if not child.offer(row):
                poll_for(lambda: not child.has_room(), timeout=5, what="the queue full")
                if not child.offer(row):
                    break
            accepted += 1
        assert accepted < 10 + WRITE_BATCH + 70
        assert not child.has_room()
    finally:
        child.close()
    assert child.proc.returncode is not None  # killed and reaped


def test_a_child_whose_component_is_gone_is_killed_at_interpreter_exit(tmp_path):
    """The atexit guard: a process that never stopped its topology leaves no child."""
    import subprocess

    script = tmp_path / "leaky.py"
    script.write_text(
        "import sys\n"
        "from stormish.multilang.child import Child\n"
        "from stormish.multilang import shell\n"
        f"c = Child([{PY!r}, '-c', 'import time; time.sleep(60)'], 'json', 'leak')\n"
        "shell._LIVE.add(c)\n"
        "print(c.proc.pid, flush=True)\n"
    )
    out = subprocess.run([PY, str(script)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": ROOT})  # fmt: skip
    pid = int(out.stdout.split()[0])
    poll_for(lambda: not _alive(pid), timeout=10, what="the leaked child gone")


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


RAW_CHILD = """\
import json, os, sys
def read():
    lines = []
    for line in sys.stdin:
        if line == "end\\n":
            return json.loads("".join(lines))
        lines.append(line)
    sys.exit(0)
def send(m):
    sys.stdout.write(json.dumps(m) + "\\nend\\n"); sys.stdout.flush()
hs = read()
open(os.path.join(hs["pidDir"], str(os.getpid())), "w").close()
send({"pid": os.getpid()})
bad = not os.path.exists(sys.argv[2])
open(sys.argv[2], "a").close()
while True:
    m = read()
    if m.get("stream") == "__heartbeat":
        send({"command": "sync"})
        continue
    if bad:
        send(json.loads(sys.argv[1]))
        bad = False
        continue
    send({"command": "emit", "tuple": m["tuple"], "anchors": m["id"], "need_task_ids": False})
    send({"command": "ack", "id": m["id"]})
"""


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ('{"foo": 1}', "sent a message with no command"),
        ("[1, 2]", "sent [1, 2], which is not a command"),
        ('{"command": "ack", "id": "nope"}', "acked a non-existent or already acked/failed id"),
        ('{"command": "emit", "tuple": ["x"], "anchors": ["nope"]}', "anchored onto ['nope']"),
        ('{"command": "emit", "tuple": "x"}', "emitted 'x', which is not a list of values"),
    ],
)
def test_a_child_breaking_the_protocol_is_replaced(tmp_path, bad, says):
    script = tmp_path / "raw.py"
    script.write_text(RAW_CHILD)
    bolt = ShellBolt([PY, str(script), bad, str(tmp_path / "once")], ["sentence"])
    t = Topology("mlproto")
    t.set_spout("sentences", ListSpout([(s,) for s in SENTENCES[:50]], fields=["sentence"]))
    t.set_bolt("raw", bolt).shuffle_grouping("sentences")
    t.set_bolt("sink", Sink()).shuffle_grouping("raw")
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("mlproto", timeout=60)
        results = cluster._get("mlproto").results()
    assert results["sink"][0] == {s: 1 for s in SENTENCES[:50]}
    (err,) = task_errors(stats, "raw")  # what the replaced child said after is dropped
    assert says in err and "killed by signal 9" in err


def test_a_command_that_cannot_start_is_an_error_naming_it():
    t = word_count(ShellBolt(["/nonexistent/splitter"], ["word"]), "mlnocmd")
    with LocalCluster() as cluster:
        cluster.submit(t)
        with pytest.raises(
            WorkerError, match=r"cannot start subprocess \['/nonexistent/splitter'\]"
        ):
            cluster.wait_complete("mlnocmd", timeout=60)


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="ShellBolt: command must be a non-empty list"):
        ShellBolt("python3 splitter.py", ["word"])
    with pytest.raises(ValueError, match="ShellSpout: serializer must be one of"):
        ShellSpout(["x"], ["word"], serializer="thrift")


def test_a_value_the_serializer_cannot_carry_fails_its_tuple_with_an_error_naming_it():
    t = Topology("mlbytes")
    t.set_spout("rows", ListSpout([(b"\xff",), ("fine words",)], fields=["sentence"]))
    t.set_bolt("split", ShellBolt([PY, str(HERE / "splitter.py")], ["word"])).shuffle_grouping(
        "rows"
    )
    t.set_bolt("count", Count()).shuffle_grouping("split")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(lambda: cluster.statistics("mlbytes").components["count"].executed >= 2,
                 timeout=30, what="the fine row counted")  # fmt: skip
        stats = cluster.statistics("mlbytes")
        cluster.kill("mlbytes")
    (err, *_) = task_errors(stats, "split")
    assert "a tuple from 'rows' stream 'default' cannot be sent to the child as json" in err
    assert "bytes is not JSON serializable" in err


@pytest.mark.parametrize("serializer", ["json", "msgpack"])
def test_a_streamparse_bolt_through_streamparse_run(serializer):
    cmd = [PY, "-m", "streamparse.run", "sp_components.WordCountBolt", "-s", serializer]
    t = Topology(f"mlsp-{serializer}")
    t.set_spout("sentences", ListSpout([(s,) for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("split", ShellBolt([PY, str(HERE / "splitter.py")], ["word"])).shuffle_grouping(
        "sentences"
    )
    counter = ShellBolt(cmd, ["word", "count"], serializer=serializer, cwd=str(HERE))
    t.set_bolt("count", counter, parallelism=2).fields_grouping("split", ["word"])
    t.set_bolt("latest", Latest()).shuffle_grouping("count")
    with LocalCluster() as cluster:
        cluster.submit(t)
        cluster.wait_complete(f"mlsp-{serializer}", timeout=60)
        results = cluster._get(f"mlsp-{serializer}").results()
    assert results["latest"][0] == dict(expected_words(SENTENCES))
