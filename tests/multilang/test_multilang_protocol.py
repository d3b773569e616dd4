"""Children that say odd but possible things, through a whole topology: a child's fault
is found, reported and its tuples replayed; what Storm takes from a child (an extra
`sync`, a shared or array message id, CRLF line ends, an odd log level) is taken."""

from __future__ import annotations

import json
import sys

import pytest
from integration.parts import Count

from stormish import LocalCluster, Topology
from stormish.multilang import ShellBolt, ShellSpout
from stormish.testing import ListSpout, poll_for

from .procs import CHILDREN

pytestmark = pytest.mark.timeout(120)
PY = sys.executable
ROWS = [f"row{i}" for i in range(30)]


Sink = Count  # counts its input's first values and acks


def errors(stats, component):
    return [e for t in stats.tasks.values() if t.component == component for e in t.last_errors]


def run_raw(tmp_path, mode, serializer="json", rows=ROWS, config=None):
    """rows -> ShellBolt(rawchild.py `mode`) -> Sink, run to completion: (sink, errors)."""
    cmd = [PY, str(CHILDREN / "rawchild.py"), mode, str(tmp_path / "once"), serializer]
    name = f"mlraw-{mode}-{serializer}"
    t = Topology(name, config={"topology.subprocess.timeout.secs": 3, **(config or {})})
    t.set_spout("rows", ListSpout([(r,) for r in rows], fields=["v"]))
    t.set_bolt("raw", ShellBolt(cmd, ["v"], serializer=serializer)).shuffle_grouping("rows")
    t.set_bolt("sink", Sink()).shuffle_grouping("raw")
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete(name, timeout=90)
        (sink,) = cluster._get(name).results()["sink"]
    assert (tmp_path / "once").exists()
    return sink, errors(stats, "raw")


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("deep_json", ["wrote garbage", "recursion"]),  # the reader died: the task hung
        ("helper_then_exit", ["still holds its stdout", "exit code 3", "exits now"]),  # hung
        ("ack_list_id", ["acked a non-existent", "killed by signal 9"]),  # the task stopped
    ],
)
def test_a_fault_the_task_did_not_hear_of_is_reported_and_its_tuples_replayed(tmp_path, mode, says):
    sink, errs = run_raw(tmp_path, mode)
    assert sink == {r: 1 for r in ROWS}
    (err,) = errs
    assert "SubprocessError" in err and all(s in err for s in says), err


@pytest.mark.parametrize("mode", ["log_list_level", "crlf", "latin1_log"])
def test_what_storm_reads_is_read(tmp_path, mode):
    """`"level": [3]` stopped the task (Storm logs it at INFO); `\\r\\n` line ends
    (Storm's readLine takes them) hung it for ever. Bytes that are not UTF-8 were
    garbage and the child was killed: Storm reads the child's stdout with a UTF-8
    InputStreamReader (JsonSerializer), which reads each bad byte as U+FFFD."""
    sink, errs = run_raw(tmp_path, mode)
    assert sink == {r: 1 for r in ROWS} and errs == []


# -- extra syncs ---------------------------------------------------------------------------
def test_a_sync_that_answers_no_heartbeat_does_not_end_the_run_early(tmp_path):
    """Acking off, a child that never acks: it sends one `sync` while a heartbeat waits
    unread in its stdin. Taken for that heartbeat's answer, it let the run complete
    while the child still worked, and its last emits were lost."""
    rows = ROWS[:6]
    sink, errs = run_raw(tmp_path, "spurious_sync", rows=rows,
                         config={"topology.acker.executors": 0})  # fmt: skip
    assert sink == {r: 1 for r in rows} and errs == []


def test_pystorms_raise_exception_in_a_bolt_that_goes_on_does_not_end_the_run_early():
    """pystorm's raise_exception writes `error` and then a `sync` of its own."""
    rows = ROWS[:6]
    t = Topology("mlraise-bolt")
    t.set_spout("rows", ListSpout([(r,) for r in rows], fields=["v"]))
    t.set_bolt("raw", ShellBolt([PY, str(CHILDREN / "raising_bolt.py")], ["v"])).shuffle_grouping(
        "rows"
    )
    t.set_bolt("sink", Sink()).shuffle_grouping("raw")
    with LocalCluster(config={"topology.acker.executors": 0}) as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete(t.name, timeout=90)
        (sink,) = cluster._get(t.name).results()["sink"]
    assert sink == {r: 1 for r in rows[1:]}
    (err,) = errors(stats, "raw")
    assert "ShellError" in err and "bad row0" in err


def test_pystorms_raise_exception_in_a_spout_does_not_get_its_child_replaced():
    """Two syncs for one `next`: the second was a protocol fault, the child was killed and
    restarted for ever, emitting its first tuples again each time."""
    t = Topology("mlraise-spout")
    t.set_spout("s", ShellSpout([PY, str(CHILDREN / "reporting_spout.py")], ["v"]))
    t.set_bolt("sink", Sink()).shuffle_grouping("s")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(
            lambda: cluster.statistics(t.name).component("s").acked >= 18,
            timeout=60, interval=0.05, what="18 tuples acked",
        )  # fmt: skip
        stats = cluster.statistics(t.name)
        (sink,) = cluster._get(t.name).results()["sink"]
        cluster.kill(t.name)
    assert sink == {f"v{i}": 1 for i in range(1, 20) if i != 3}
    (err,) = errors(stats, "s")
    assert "ShellError: Shell Process Exception: Python ValueError raised" in err


# -- spout message ids ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "want"),
    [
        ("dup_ids", sorted(["ack", f"m{i}"] for i in range(1, 6) for _ in range(2))),
        ("list_ids", sorted(["ack", ["m", i]] for i in range(1, 6))),
    ],
)
def test_every_tree_of_a_spout_is_acked_to_its_child_whatever_its_id(tmp_path, mode, want):
    """Two emits with one id got one ack (Storm sends one per tree); an id that is a
    JSON array stopped the task (unhashable)."""
    log = tmp_path / "acks"
    log.touch()
    t = Topology(f"mlids-{mode}")
    t.set_spout("s", ShellSpout([PY, str(CHILDREN / "rawspout.py"), mode, str(log)], ["v"]))
    t.set_bolt("sink", Sink()).shuffle_grouping("s")

    def acks():
        return [json.loads(line) for line in log.read_text().splitlines()]

    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(lambda: len(acks()) >= len(want), timeout=60, interval=0.05, what="the acks")
        stats = cluster.statistics(t.name)
        cluster.kill(t.name)
    assert sorted(acks()) == want
    assert errors(stats, "s") == []
