"""Errors a user can see: every method of a component that
raises is reported with the method and the user's file and line, in the statistics and
on the terminal; programming errors (a TopologyError from emit) end the run at once, and
`stormish run` stops at the first error unless told otherwise."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stormish import BasicBolt, Bolt, LocalCluster, Spout, Topology, WorkerError
from stormish.testing import ListSpout, poll_for

from .parts import FailAll

ROOT = Path(__file__).resolve().parents[2]
HERE = __file__


def line_of(marker: str) -> int:
    with open(HERE) as fh:
        return next(i for i, text in enumerate(fh, 1) if text.rstrip().endswith(f"# {marker}"))


def where(cls: str, method: str, marker: str) -> str:
    return f"in {cls}.{method} at {HERE}:{line_of(marker)}"


# -- item 7: each method that raises, named with the user's line ------------------------------
class BadExecute(BasicBolt):
    def execute(self, tup):
        if tup.values[0] % 10 == 0:
            raise ValueError(f"bad row {tup.values[0]}")  # EXECUTE


class BadBatch(Bolt):
    def execute_batch(self, batch):
        raise ValueError("bad batch")  # EXECUTE_BATCH


class BadPrepare(BasicBolt):
    def prepare(self, conf, context):
        raise RuntimeError("no database")  # PREPARE

    def execute(self, tup):
        pass


class BadCleanup(BasicBolt):
    def execute(self, tup):
        pass

    def cleanup(self):
        raise RuntimeError("cannot flush")  # CLEANUP


class Sink(BasicBolt):
    def execute(self, tup):
        pass


class BadOpen(ListSpout):
    def open(self, conf, context):
        raise OSError("no such file")  # OPEN


class BadNext(ListSpout):
    def next_tuple(self):
        raise KeyError("cursor")  # NEXT_TUPLE


class BadAck(ListSpout):
    def ack(self, msg_id):
        raise ValueError(f"ack {msg_id}")  # ACK


class BadFail(ListSpout):
    def fail(self, msg_id, *failure):
        raise ValueError(f"fail {msg_id}")  # FAIL


class BadActivate(ListSpout):
    def activate(self):
        raise RuntimeError("cannot connect")  # ACTIVATE


class BadClose(ListSpout):
    def close(self):
        raise RuntimeError("close failed")  # CLOSE


class Endless(Spout):
    outputs = ["n"]

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        self.n += 1
        self.emit([self.n])


class Sleepy(BasicBolt):
    """Slow work (a millisecond a tuple): its dropping edge fills."""

    def execute(self, tup):
        import time

        time.sleep(0.001)


class BadDeactivate(Endless):
    def deactivate(self):
        raise RuntimeError("cannot pause")  # DEACTIVATE


ROWS = [[i] for i in range(100)]


def topology(name: str, spout: Spout, bolt: Bolt, **conf) -> Topology:
    t = Topology(name, config={"topology.message.timeout.secs": 30, **conf})
    t.set_spout("s", spout)
    t.set_bolt("b", bolt).shuffle_grouping("s")
    return t


def last_error(stats, component: str) -> str:
    return next(t for t in stats.tasks.values() if t.component == component).last_errors[-1]


@pytest.mark.parametrize(
    "spout, bolt, component, cls, method, marker",
    [
        (ListSpout(ROWS, ["n"]), BadPrepare(), "b", "BadPrepare", "prepare", "PREPARE"),
        (BadOpen(ROWS, ["n"]), Sink(), "s", "BadOpen", "open", "OPEN"),
        (BadNext(ROWS, ["n"]), Sink(), "s", "BadNext", "next_tuple", "NEXT_TUPLE"),
        (BadAck(ROWS, ["n"]), Sink(), "s", "BadAck", "ack", "ACK"),
        (BadFail(ROWS, ["n"]), FailAll(), "s", "BadFail", "fail", "FAIL"),
        (BadActivate(ROWS, ["n"]), Sink(), "s", "BadActivate", "activate", "ACTIVATE"),
    ],
    ids=["prepare", "open", "next_tuple", "ack", "fail", "activate"],
)
def test_an_error_that_stops_a_task_names_its_method_and_the_users_line(
    spout, bolt, component, cls, method, marker
):
    with LocalCluster(workers=1) as c:
        c.submit(topology("stops", spout, bolt))
        with pytest.raises(WorkerError) as caught:
            c.wait_complete("stops", timeout=20)
        stats = c.statistics("stops")
    assert where(cls, method, marker) in str(caught.value)
    entry = last_error(stats, component)
    assert where(cls, method, marker) + "; the task stopped" in entry
    assert "Traceback (most recent call last)" in entry and f"in {method}\n" in entry


@pytest.mark.parametrize(
    "spout, bolt, component, cls, method, marker",
    [
        (ListSpout(ROWS, ["n"]), BadCleanup(), "b", "BadCleanup", "cleanup", "CLEANUP"),
        (BadClose(ROWS, ["n"]), Sink(), "s", "BadClose", "close", "CLOSE"),
    ],
    ids=["cleanup", "close"],
)
def test_an_error_at_stop_reaches_the_final_statistics(spout, bolt, component, cls, method, marker):
    with LocalCluster(workers=1) as c:
        c.submit(topology("closing", spout, bolt))
        stats = c.wait_complete("closing", timeout=20)
    assert stats.status == "complete"
    assert where(cls, method, marker) in last_error(stats, component)


def test_a_deactivate_error_is_named():
    with LocalCluster(workers=1) as c:
        c.submit(topology("pause", BadDeactivate(), Sink(), **{"topology.acker.executors": 0}))
        poll_for(lambda: c.statistics("pause").components["b"].executed, 20, what="running")
        c.deactivate("pause")
        with pytest.raises(
            WorkerError, match=re.escape(where("BadDeactivate", "deactivate", "DEACTIVATE"))
        ):
            c.wait_complete("pause", timeout=20)


@pytest.mark.parametrize("workers", [1, 2])
def test_execute_errors_fail_the_tuple_and_carry_their_traceback(workers):
    bolt, batch = BadExecute(), BadBatch()
    t = topology("rows", ListSpout(ROWS, ["n"]), bolt, **{"topology.acker.executors": 0})
    t.set_bolt("batch", batch).shuffle_grouping("s")
    with LocalCluster(workers=workers) as c:
        c.submit(t)
        stats = c.wait_complete("rows", timeout=60)
    assert stats.status == "complete"  # the run went on: the library's default
    assert stats.components["b"].errors == 10 and stats.components["b"].failed == 10
    entry = last_error(stats, "b")
    assert entry.splitlines()[0] == "ValueError: bad row 90"
    assert entry.splitlines()[1] == "  " + where("BadExecute", "execute", "EXECUTE") + (
        "; the tuple failed"
    )
    assert "Traceback (most recent call last):" in entry and "bolt_executor" not in entry
    assert where("BadBatch", "execute_batch", "EXECUTE_BATCH") in last_error(stats, "batch")
    data = json.loads(stats.to_json())
    task = next(x for x in data["tasks"].values() if x["component"] == "b")
    assert task["last_errors"][-1] == entry


# -- item 8: programming errors fail fast ------------------------------------------------------
class WrongArity(BasicBolt):
    outputs = ["n"]

    def execute(self, tup):
        self.emit([tup.values[0], "extra"])  # ARITY


class StrValues(BasicBolt):
    outputs = ["n"]

    def execute(self, tup):
        self.emit("x")  # STR


class StrRows(BasicBolt):
    outputs = ["n"]

    def execute(self, tup):
        self.emit_many(["a", "b"])  # ROWS


class StrSpout(Spout):
    """emit(word) instead of emit([word]): the tuple's values were the word's characters
    (a one-letter word passed every check)."""

    outputs = ["word"]

    def __init__(self, reliable: bool, bad: object = "a"):
        self.reliable, self.bad = reliable, bad

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        self.n += 1
        if self.n == 1:  # a good row first: the next emit takes the emit's fast path
            self.emit(["ok"], msg_id=0 if self.reliable else None)
        else:
            self.emit(self.bad, msg_id=1 if self.reliable else None)  # SPOUT


class Undeclared(BasicBolt):
    outputs = ["n"]

    def execute(self, tup):
        self.emit([tup.values[0]], stream="audit")  # UNDECLARED


class DirectToStranger(BasicBolt):
    streams = {"direct": ["n"]}

    def execute(self, tup):
        self.emit_direct(99, [tup.values[0]], stream="direct")  # DIRECT


class RegularToDirect(BasicBolt):
    streams = {"direct": ["n"]}

    def execute(self, tup):
        self.emit([tup.values[0]], stream="direct")  # REGULAR


class DirectSink(BasicBolt):
    def execute(self, tup):
        pass


def programming_error(bolt: Bolt, name: str) -> Topology:
    # 100,000 rows and a 30 s timeout: failing and replaying each would take minutes
    t = Topology(name, config={"topology.message.timeout.secs": 30})
    t.set_spout("s", ListSpout([[i] for i in range(100_000)], ["n"]))
    t.set_bolt("emitter", bolt, parallelism=2).shuffle_grouping("s")
    if isinstance(bolt, DirectToStranger | RegularToDirect):
        t.set_bolt("sink", DirectSink()).direct_grouping("emitter", "direct")
    return t


@pytest.mark.parametrize(
    "bolt, cls, marker, message",
    [
        (
            WrongArity(),
            "WrongArity",
            "ARITY",
            "component 'emitter' emitted 2 values on stream 'default', which declares 1 "
            "fields ['n']",
        ),
        (Undeclared(), "Undeclared", "UNDECLARED", "emitted on undeclared stream 'audit'"),
        (
            StrValues(),
            "StrValues",
            "STR",
            "component 'emitter' emitted a str ('x') as its values on stream 'default': "
            "values are a list or tuple, one per field ['n']; write emit([value])",
        ),
        (
            StrRows(),
            "StrRows",
            "ROWS",
            "component 'emitter' emit_many rows are strs ('a') on stream 'default': each row "
            "is a list or tuple, one value per field ['n']",
        ),
        (
            DirectToStranger(),
            "DirectToStranger",
            "DIRECT",
            "component 'emitter' emit_direct to task 99 on stream 'direct'",
        ),
        (
            RegularToDirect(),
            "RegularToDirect",
            "REGULAR",
            # Storm: "Cannot do regular emit to direct stream"; the tuples went nowhere
            "component 'emitter' emitted on stream 'direct', which ['sink'] take by "
            "direct_grouping: a stream with a direct subscriber takes emit_direct(task, "
            "values) only",
        ),
    ],
    ids=["arity", "undeclared", "str", "str_rows", "emit_direct", "regular_to_direct"],
)
def test_a_topology_error_from_emit_ends_the_run_at_once(bolt, cls, marker, message):
    with LocalCluster(workers=1) as c:
        c.submit(programming_error(bolt, "prog"))
        with pytest.raises(WorkerError) as caught:
            c.wait_complete("prog", timeout=20)  # before any tuple could time out
        stats = c.statistics("prog")
    text = str(caught.value)
    assert message in text and where(cls, "execute", marker) in text
    assert stats.status == "failed"
    assert stats.components["emitter"].failed == 0  # nothing failed and replayed
    assert stats.components["emitter"].errors <= 2  # one per task, not one per tuple


@pytest.mark.parametrize(
    "bad, shown",
    [("a", "str ('a')"), (b"a", "bytes (b'a')"), (bytearray(b"a"), "bytearray (bytearray(b'a'))")],
    ids=["str", "bytes", "bytearray"],
)
@pytest.mark.parametrize("reliable", [False, True], ids=["unreliable", "reliable"])
@pytest.mark.parametrize("acking", [False, True], ids=["acking_off", "acking_on"])
def test_a_spout_emitting_a_str_as_its_values_is_told_to_write_a_list(reliable, acking, bad, shown):
    """After a good row too, where the emit takes its fast path (bytes and bytearray went
    through it: each byte became a field, an int)."""
    t = Topology("strs", config={"topology.acker.executors": 1 if acking else 0})
    t.set_spout("s", StrSpout(reliable, bad))
    t.set_bolt("b", DirectSink()).shuffle_grouping("s")
    with LocalCluster(workers=1) as c:
        c.submit(t)
        with pytest.raises(WorkerError) as caught:
            c.wait_complete("strs", timeout=20)
    text = str(caught.value)
    assert f"component 's' emitted a {shown} as its values on stream 'default'" in text
    assert where("StrSpout", "next_tuple", "SPOUT") in text


def test_a_topology_error_ends_a_run_on_worker_processes():
    with LocalCluster(workers=2) as c:
        c.submit(programming_error(WrongArity(), "prog2"))
        with pytest.raises(WorkerError, match=r"emitted 2 values on stream 'default'") as caught:
            c.wait_complete("prog2", timeout=60)
    assert where("WrongArity", "execute", "ARITY") in str(caught.value)


@pytest.mark.parametrize("workers", [1, 2])
def test_fail_fast_ends_the_run_at_the_first_execute_error(workers):
    t = topology("fast", ListSpout(ROWS, ["n"]), BadExecute(), **{"topology.fail.fast": True})
    with LocalCluster(workers=workers) as c:
        c.submit(t)
        with pytest.raises(WorkerError, match=re.escape(where("BadExecute", "execute", "EXECUTE"))):
            c.wait_complete("fast", timeout=60)
        assert c.statistics("fast").components["b"].errors == 1


# -- the terminal ------------------------------------------------------------------------------
TOPOLOGY_FILE = """\
from stormish import BasicBolt, Topology
from stormish.testing import ListSpout


def check(n):
    if n % 10 == 0:
        raise ValueError(f"bad row {n}")  # line 7


class Parse(BasicBolt):
    outputs = ["n"]

    def execute(self, tup):
        check(tup.values[0])
        self.emit([tup.values[0]])


topology = Topology("rows", config={"topology.acker.executors": 0, **CONF})
topology.set_spout("s", ListSpout([[i] for i in range(1000)], fields=["n"]))
topology.set_bolt("parse", Parse(), parallelism=PARALLELISM).shuffle_grouping("s")
"""


def stormish(tmp_path, *args, conf="{}", parallelism=1, timeout=90):
    path = tmp_path / "rows.py"
    path.write_text(
        TOPOLOGY_FILE.replace("**CONF", f"**{conf}").replace("PARALLELISM", str(parallelism))
    )
    r = subprocess.run(
        [sys.executable, "-m", "stormish.cli", *args[:1], str(path), *args[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return r, path


@pytest.mark.parametrize("workers", ["1", "2"])
def test_run_shows_the_first_errors_in_full_then_counts(tmp_path, workers):
    stats_file = tmp_path / "stats.json"
    r, path = stormish(
        tmp_path, "run", "-w", workers, "-c", "topology.fail.fast=false",
        "--stats-json", str(stats_file), parallelism=2,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "topology 'rows': complete" in r.stdout
    place = f"in Parse.execute at {path}:7; the tuple failed"
    shown = r.stderr.count("Traceback (most recent call last):")
    assert r.stderr.count(place) == shown
    assert 5 <= shown <= 5 * int(workers)  # the first 5 per component (and worker)
    assert f'File "{path}", line 14, in execute' in r.stderr  # the whole traceback
    more = re.search(r"component 'parse': (\d+) more errors like ValueError: bad row", r.stdout)
    assert more and int(more.group(1)) == 100 - shown, r.stdout
    assert place in r.stdout.splitlines()[-1]
    data = json.loads(stats_file.read_text())
    entries = [e for t in data["tasks"].values() for e in t["last_errors"]]
    assert entries and all(place in e and "Traceback" in e for e in entries)


@pytest.mark.parametrize("command", ["run", "submit"])
def test_run_stops_at_the_first_error_with_exit_status_1(tmp_path, command):
    r, path = stormish(tmp_path, command)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "topology 'rows': failed" in r.stdout  # the summary is printed
    assert "Traceback (most recent call last):" in r.stderr
    assert f'File "{path}", line 7, in check' in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: topology 'rows'") and "ValueError: bad row 0" in last
    assert f"(in Parse.execute at {path}:7)" in last


def test_run_goes_on_when_the_topology_turns_fail_fast_off(tmp_path):
    r, _ = stormish(tmp_path, "run", conf='{"topology.fail.fast": False}')
    assert r.returncode == 0, r.stderr
    assert "topology 'rows': complete" in r.stdout


def test_run_on_two_workers_stops_at_a_programming_error(tmp_path):
    f = tmp_path / "arity.py"
    f.write_text(
        "from stormish import BasicBolt, Topology\n"
        "from stormish.testing import ListSpout\n"
        "class Pair(BasicBolt):\n"
        "    outputs = ['n']\n"
        "    def execute(self, tup):\n"
        "        self.emit([tup.values[0], 2])\n"
        "topology = Topology('arity')\n"
        "topology.set_spout('s', ListSpout([[i] for i in range(100000)], fields=['n']))\n"
        "topology.set_bolt('pair', Pair(), parallelism=2).shuffle_grouping('s')\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(f), "-w", "2",
         "-c", "topology.fail.fast=false"],
        cwd=ROOT, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "topology 'arity': failed" in r.stdout
    last = r.stderr.strip().splitlines()[-1]
    assert "component 'pair' emitted 2 values on stream 'default', which declares 1" in last
    assert f"in Pair.execute at {f}:6" in last


# -- on a cluster: stormish list and stormish monitor ------------------------------------------
def test_list_and_monitor_show_errors_with_method_and_line(tmp_path):
    import time

    import psutil

    from .test_cluster import Cluster

    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    cluster = Cluster(str(tmp_path))
    nimbus = ["--nimbus", f"127.0.0.1:{cluster.api}"]
    place = where("BadExecute", "execute", "EXECUTE") + "; the tuple failed"
    monitor = None
    try:
        t = Topology("bad-rows", config={"topology.workers": 2, "topology.acker.executors": 0})
        t.set_spout("s", Endless())
        t.set_bolt("b", BadExecute()).shuffle_grouping("s")
        # a dropping edge into a slow bolt: monitor tells its losses too
        t.set_bolt("lossy", Sleepy()).shuffle_grouping("s", overflow="drop_oldest", capacity=10)
        cluster.call("submit", (t, {}))
        cluster.wait_status("bad-rows", "running")
        poll_for(lambda: cluster.call("stats", "bad-rows").components["b"].errors, 30, 0.1)
        listed = subprocess.run(
            [sys.executable, "-m", "stormish.cli", "list", *nimbus],
            env=cluster.env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        assert re.search(
            r"\n  component 'b': [\d,]+ errors, the last: ValueError: bad row", listed.stdout
        )
        assert place in listed.stdout
        monitor = subprocess.Popen(
            [sys.executable, "-m", "stormish.cli", "monitor", "bad-rows", "--every", "0.2",
             *nimbus],
            env=cluster.env, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while not any(place in line for line in lines):
            assert time.monotonic() < deadline, lines
            lines.append(monitor.stdout.readline())
        assert re.search(r" E\d+", lines[0]), lines[0]  # the error count per component
        rest = monitor.stdout.readline()
        assert rest.startswith("    Traceback (most recent call last):"), rest
        edge = (
            r"edge lossy <- s:default \[drop_oldest\]: dropped \+[\d,]+ \([\d,]+\); drop_oldest: "
        )
        while not any(re.match(edge, line) for line in lines):
            assert time.monotonic() < deadline, lines
            lines.append(monitor.stdout.readline())
        cluster.call("kill", ("bad-rows", 0))
        monitor.communicate(timeout=60)
        assert monitor.returncode == 0
    finally:
        if monitor is not None and monitor.poll() is None:
            monitor.kill()
            monitor.wait(10)
        cluster.close()
    left = [p for p in me.children(recursive=True) if p.pid not in before]
    for p in left:
        p.kill()
    assert not left, f"processes left running: {[p.pid for p in left]}"


class LockAtTwenty(Spout):
    """Emits 1..40, a threading.Lock in place of 20: it cannot cross to another worker."""

    outputs = ["v"]

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        if self.n >= 40:
            self.finish()
            return
        self.n += 1
        if self.n == 20:
            import threading

            self.emit([threading.Lock()])
        else:
            self.emit([self.n])


class Drop(BasicBolt):
    def execute(self, tup):
        pass


def test_a_value_that_cannot_cross_to_another_worker_fails_its_task_by_name():
    """The value was pickled on the link's transfer side, where the error killed the
    thread: the worker hung and the run waited out its timeout, the error only in the
    worker's log. Now the task that emitted it fails, naming the stream and the field."""
    t = Topology("unpicklable", config={"topology.disable.loadaware.messaging": True})
    t.set_spout("s", LockAtTwenty())
    t.set_bolt("b", Drop(), 2).shuffle_grouping("s")  # one of the two in the other worker
    with LocalCluster(workers=2) as c:
        c.submit(t)
        with pytest.raises(WorkerError) as info:
            c.wait_complete("unpicklable", timeout=60)
    message = str(info.value)
    assert "component 's'" in message
    assert "cannot be sent to another worker: field 'v' does not pickle" in message
    assert "cannot pickle '_thread.lock' object" in message
    assert "emitted in its next_tuple, found as its batch left for another worker" in message
