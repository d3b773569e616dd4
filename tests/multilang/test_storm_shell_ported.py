"""Storm's ShellBolt and ShellSpout, scenario by scenario, against real children.

Each test names the Storm source whose behaviour it checks (storm-client's ShellBolt,
ShellSpout, ShellProcess, JsonSerializer, ShellMsg, ShellBoltMessageQueue and its test):
what a multilang component written for Storm (pystorm, storm.js) sees there, it sees
here.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import sys

import pytest
from integration.parts import Count

from stormish import Bolt, LocalCluster, Topology
from stormish.multilang import ShellBolt, ShellSpout
from stormish.multilang.child import Child
from stormish.testing import ListSpout, poll_for

from .procs import CHILDREN

pytestmark = pytest.mark.timeout(120)
PY = sys.executable
ROWS = [f"row{i}" for i in range(30)]


class Quiet(ListSpout):
    """Emits nothing, never finishes: a topology that stays up, idle."""

    def next_tuple(self):
        pass


def errors(stats, component):
    return [e for t in stats.tasks.values() if t.component == component for e in t.last_errors]


# -- ShellSpout ------------------------------------------------------------------------------
def test_a_spout_child_with_nothing_to_emit_is_paced_by_the_spout_wait_strategy(tmp_path):
    """ShellSpout.nextTuple blocks until the child's sync; a nextTuple that emitted
    nothing is then followed by the spout wait strategy's wait (SpoutExecutor, Storm's
    defaults: sleep 1 ms, as here), so an idle child gets at most ~1,000 `next` a second.
    Here every sync woke the spout's loop, ending that wait at once: an idle pystorm
    spout was sent `next` as fast as it answered (4,000-8,000 a second) and its worker
    spun a core (97% CPU measured). 200 calls took 0.02-0.04 s; paced, 0.25-0.4 s."""
    out = tmp_path / "took"
    t = Topology("mlidle")
    cmd = [PY, str(CHILDREN / "idle_spout.py"), str(out), "200"]
    t.set_spout("s", ShellSpout(cmd, ["v"]))
    t.set_bolt("sink", Count()).shuffle_grouping("s")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(lambda: out.exists() and out.read_text(), timeout=60, interval=0.02,
                 what="200 next_tuple calls")  # fmt: skip
        stats = cluster.statistics(t.name)
        cluster.kill(t.name)
    took = float(out.read_text())
    assert took >= 0.15, f"200 empty next_tuple calls in {took:.3f}s: not paced"
    assert errors(stats, "s") == []


# -- ShellBolt: what goes to the child -----------------------------------------------------------
NODE = shutil.which("node")


class Record(Bolt):
    """Keeps each input's values by its first (an index), and acks."""

    def prepare(self, conf, context):
        self.got = {}

    def execute(self, tup):
        self.got[tup.values[0]] = tup.values[1]
        self.ack(tup)

    def result(self):
        return self.got


def echo(child, values, serializer="json"):
    """[i, v] rows -> ShellBolt(`child`, echoing its input) -> Record: ({i: v}, spout, errors)."""
    cmd = {"node": [NODE, str(CHILDREN / "echo.js")],
           "pystorm": [PY, str(CHILDREN / "echo.py"), serializer]}[child]  # fmt: skip
    name = f"mlecho-{child}-{serializer}"
    t = Topology(name, config={"topology.max.replays": 1})
    t.set_spout("rows", ListSpout(list(enumerate(values)), fields=["i", "v"]))
    t.set_bolt("echo", ShellBolt(cmd, ["i", "v"], serializer=serializer)).shuffle_grouping("rows")
    t.set_bolt("record", Record()).shuffle_grouping("echo")
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete(name, timeout=90)
        results = cluster._get(name).results()
    (got,) = results["record"]
    (spout,) = results["rows"]
    return got, spout, errors(stats, "echo")


NODE_ONLY = pytest.mark.skipif(NODE is None, reason="no node on this machine")
CHILDREN_JSON = [pytest.param("node", marks=NODE_ONLY), "pystorm"]


@pytest.mark.parametrize("child", CHILDREN_JSON)
def test_nan_and_the_infinities_reach_a_json_child_as_null(child):
    """Storm writes its JSON with json-simple (JsonSerializer.writeBoltMsg,
    JSONValue.toJSONString), which writes a NaN or infinite Double as null. Python's
    json wrote the tokens NaN and Infinity, which are not JSON: storm.js's JSON.parse
    and pystorm's (simplejson) threw and the child died, on every retry of the tuple
    and of every tuple it held with it (all four dead-lettered here)."""
    got, spout, errs = echo(child, [math.nan, math.inf, -math.inf, 1.5])
    assert got == {0: None, 1: None, 2: None, 3: 1.5}
    assert sorted(spout["acked"]) == [0, 1, 2, 3] and not spout["failed"]
    assert errs == []


VALUES = [
    "café \U0001f600 \u2028 \x00 end",  # astral, a JS line separator, NUL, `end` inside
    None,
    True,
    0,
    2**53,
    -(2**31),
    1.5,
    1e300,
    [1, [2, {"a": None}]],
    {"k": [1.5, "v"]},
    "é" * (2 << 20),  # 4 MiB of UTF-8: many reads, many chunks
    "",
]


@pytest.mark.parametrize(
    ("child", "serializer"),
    [pytest.param("node", "json", marks=NODE_ONLY), ("pystorm", "json"), ("pystorm", "msgpack")],
)
def test_values_go_round_a_child_unchanged(child, serializer):
    """JsonSerializer.writeBoltMsg / readShellMsg: a tuple's values go to the child and
    back as JSON (a JSON number 1.0 is 1 to a Node child, as from Storm)."""
    got, spout, errs = echo(child, VALUES, serializer)
    assert got == dict(enumerate(VALUES))
    assert sorted(spout["acked"]) == list(range(len(VALUES))) and not spout["failed"]
    assert errs == []


def run_raw(tmp_path, mode, rows=ROWS, config=None):
    """rows -> ShellBolt(rawchild.py `mode`) -> Count, run to completion: (sink, errors)."""
    cmd = [PY, str(CHILDREN / "rawchild.py"), mode, str(tmp_path / "once")]
    t = Topology(f"mlported-{mode}", config=config or {})
    t.set_spout("rows", ListSpout([(r,) for r in rows], fields=["v"]))
    t.set_bolt("raw", ShellBolt(cmd, ["v"])).shuffle_grouping("rows")
    t.set_bolt("sink", Count()).shuffle_grouping("raw")
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete(t.name, timeout=90)
        (sink,) = cluster._get(t.name).results()["sink"]
    return sink, errors(stats, "raw")


# -- ShellBolt: what the child says ------------------------------------------------------------
def test_log_levels_are_storms(tmp_path, caplog):
    """ShellMsg.ShellLogLevel.fromInt (0 trace .. 4 error, anything else info) of
    JsonSerializer.readShellMsg's level: a JSON number's intValue, so 3.0 and 3.7 are
    warn; a string or a boolean is no number: info. DefaultShellLogHandler logs it."""
    with caplog.at_level(1, "stormish.multilang.raw"):
        sink, errs = run_raw(tmp_path, "log_levels")
    assert sink == {r: 1 for r in ROWS} and errs == []
    levels = {
        r.getMessage(): r.levelno for r in caplog.records if r.name == "stormish.multilang.raw"
    }
    info, warn = logging.INFO, logging.WARNING
    assert levels == {
        "level 0": 5, "level 1": logging.DEBUG, "level 2": info, "level 3": warn,
        "level 4": logging.ERROR, "level 7": info, "level '3'": info, "level 3.0": warn,
        "level 3.7": warn, "level True": info,
    }  # fmt: skip


def test_a_bolt_child_ignores_nothing_but_an_unknown_command(tmp_path):
    """ShellBolt.BoltReaderRunnable: a command it does not know falls through its switch
    (`default: break`): the child goes on, nothing is reported."""
    sink, errs = run_raw(tmp_path, "unknown_command")
    assert sink == {r: 1 for r in ROWS} and errs == []


def test_a_child_that_talks_but_never_syncs_is_not_timed_out(tmp_path):
    """ShellBolt.BoltReaderRunnable calls setHeartbeat() on every message it reads ("We
    don't need to take care of sync, cause we're always updating heartbeat"): the
    heartbeat timeout kills a child that says nothing, not one that never syncs."""
    count = tmp_path / "logs"
    t = Topology("mlchatty", config={"topology.subprocess.timeout.secs": 1})
    t.set_spout("rows", Quiet([], fields=["v"]))
    chatty = ShellBolt([PY, str(CHILDREN / "chatty.py"), str(count)], ["v"])
    t.set_bolt("chatty", chatty).shuffle_grouping("rows")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(lambda: count.exists() and int(count.read_text() or 0) >= 15, timeout=60,
                 interval=0.05, what="3 s of logs, 3 timeouts' worth")  # fmt: skip
        stats = cluster.statistics(t.name)
        cluster.kill(t.name)
    assert errors(stats, "chatty") == []


def test_task_ids_are_written_before_the_tuples_already_waiting(tmp_path):
    """ShellBoltMessageQueueTest.testPollTaskIdsFirst: a bolt message is put, then task
    ids; the task ids are taken first. Here: 300 tuples offered to a child that reads
    nothing yet (the pipe fills, most wait in the queue), then task ids: once it reads,
    they come before the tuples that were still waiting."""
    go, out, n = tmp_path / "go", tmp_path / "read", 300
    os.mkfifo(go)
    cmd = [PY, str(CHILDREN / "late_reader.py"), str(go), str(out), str(n + 1)]
    child = Child(cmd, "json", "test", capacity=n, timeout=60)
    try:
        for i in range(n):
            assert child.offer({"id": str(i), "tuple": ["x" * 1000]})
        waiting = len(child._out)  # not yet taken by the writer: the pipe is full
        child.offer_now([1, 2, 3])
        assert waiting > 100
        with open(go, "w"):  # the child reads from now on
            pass
        poll_for(out.exists, timeout=30, interval=0.02, what="the child's reads")
    finally:
        child.close()
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert got.index([1, 2, 3]) <= n - waiting  # before every tuple waiting when they came
    assert [m["id"] for m in got if isinstance(m, dict)] == [str(i) for i in range(n)]


def test_a_spout_child_sending_an_unknown_command_is_replaced(tmp_path):
    """ShellSpout.querySubprocess: a command it does not know is an error ("Unknown
    command received"), where ShellBolt ignores it: the child is done for (Storm's
    worker dies; here the child is killed and a new one started)."""
    log = tmp_path / "acks"
    log.touch()
    t = Topology("mlspout-unknown")
    cmd = [PY, str(CHILDREN / "rawspout.py"), "unknown_command", str(log)]
    t.set_spout("s", ShellSpout(cmd, ["v"]))
    t.set_bolt("sink", Count()).shuffle_grouping("s")

    def acks():
        return [json.loads(line) for line in log.read_text().splitlines()]

    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(lambda: len(acks()) >= 5, timeout=60, interval=0.05, what="the acks")
        stats = cluster.statistics(t.name)
        (sink,) = cluster._get(t.name).results()["sink"]
        cluster.kill(t.name)
    assert sorted(acks()) == [["ack", f"m{i}"] for i in range(1, 6)]  # the new child's
    assert sink == {f"a{i}": 1 for i in range(1, 6)}  # the first child's emit was dropped
    (err,) = errors(stats, "s")
    assert "sent an unknown command 'foo'" in err and "killed by signal 9" in err
