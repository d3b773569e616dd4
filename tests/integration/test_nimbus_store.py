"""Nimbus's data directory against what goes wrong with it, on real daemons on
127.0.0.1 (the `Cluster` of test_cluster.py): a stored topology whose code no longer
loads, a disk that fills up, a directory others could plant code in. None of them may
stop nimbus, or leave a topology `running` for ever; and a pause of nimbus itself is
not its supervisors' silence (`_credit_pause`, with a fake clock)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from types import SimpleNamespace

import cloudpickle
import pytest

from stormish import StormishError, Topology
from stormish.cluster import nimbus as nimbus_mod
from stormish.cluster.nimbus import Nimbus, SupervisorInfo
from stormish.testing import ListSpout, poll_for

from .harness import running
from .parts import CountingSpout
from .test_cluster import Cluster, Null

pytestmark = pytest.mark.timeout(120)

GONE_MODULE = """
from stormish import BasicBolt


class Echo(BasicBolt):
    outputs = ["x"]

    def execute(self, tup):
        self.emit(tup.values)
"""


def one_worker(name: str) -> Topology:
    t = Topology(name, config={"topology.workers": 1})
    t.set_spout("s", ListSpout([[1]], fields=["x"]))
    return t


def rows(c: Cluster) -> dict[str, dict]:
    return {r["name"]: r for r in c.call("list")}


def test_a_stored_topology_whose_code_no_longer_loads_is_listed_failed(tmp_path):
    """A module a stored topology imports was removed (an upgrade), another's pickle is
    damaged: nimbus starts all the same, lists both failed with the reason, restores
    the others, and `kill` removes them (it exited 1 before: nothing was manageable)."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "nimbusrob_gone.py").write_text(GONE_MODULE)
    sys.path.insert(0, str(mods))  # nimbus, started now, imports what this process does
    try:
        import nimbusrob_gone  # type: ignore[import-not-found]

        (tmp_path / "c").mkdir()
        with running(lambda: Cluster(str(tmp_path / "c"), supervisors=0), ("nimbus.log",)) as c:
            gone = one_worker("uses-gone")
            gone.set_bolt("b", nimbusrob_gone.Echo()).shuffle_grouping("s")
            for t in (one_worker("good"), gone, one_worker("garbled")):
                c.call("submit", (t, {}))
            c.stop_nimbus()
            shutil.rmtree(mods)
            pkl = os.path.join(c.data, "topologies", "garbled", "topology.pkl")
            with open(pkl, "wb") as fh:
                fh.write(cloudpickle.dumps(42))  # not (topology, conf): TypeError
            c.start_nimbus()
            listed = rows(c)
            assert listed["good"]["status"] == "starting"
            assert listed["uses-gone"]["status"] == "failed"
            assert "ModuleNotFoundError" in listed["uses-gone"]["error"]
            assert listed["garbled"]["status"] == "failed"
            assert "TypeError" in listed["garbled"]["error"]
            shown = subprocess.run(
                [sys.executable, "-m", "stormish.cli", "list", "--nimbus", f"127.0.0.1:{c.api}"],
                env=c.env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert shown.returncode == 0, shown.stderr
            assert re.search(r"uses-gone +failed .*ModuleNotFoundError", shown.stdout)
            assert c.call("kill", ("uses-gone", 0)) == "failed"
            assert set(rows(c)) == {"good", "garbled"}
            assert not os.path.exists(os.path.join(c.data, "topologies", "uses-gone"))
            assert c.nimbus.poll() is None
            assert "'uses-gone' failed: its stored code no longer loads" in c.log("nimbus.log")
    finally:
        sys.path.remove(str(mods))
        sys.modules.pop("nimbusrob_gone", None)


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_nimbus_directories_are_private_whatever_the_umask(tmp_path):
    """Under umask 000 the data directory and topologies/ are made 0700 (topologies/
    was 0777: another local user planted a pickle nimbus ran at its next start); one
    that others can write, or that another user owns, is refused at start (exit 2,
    naming it)."""
    with umask(0), running(lambda: Cluster(str(tmp_path), supervisors=0), ("nimbus.log",)) as c:
        topologies = os.path.join(c.data, "topologies")
        c.call("submit", (one_worker("private"), {}))
        assert mode(c.data) == 0o700
        assert mode(topologies) == 0o700
        assert mode(os.path.join(topologies, "private")) == 0o700
        c.stop_nimbus()

        os.chmod(topologies, 0o777)
        c.start_nimbus()
        assert c.nimbus.wait(30) == 2
        assert f"nimbus topologies directory {topologies!r} is mode 0777" in c.log("nimbus.log")
        os.chmod(topologies, 0o700)
        if os.geteuid() == 0:  # only root gives a directory away
            os.chown(topologies, 12345, 12345)
            c.start_nimbus()
            assert c.nimbus.wait(30) == 2
            assert f"{topologies!r} is owned by uid 12345" in c.log("nimbus.log")
            os.chown(topologies, 0, 0)
        c.start_nimbus()
        assert rows(c)["private"]["status"] == "starting"


@contextmanager
def tmpfs(path: str, size: str) -> Iterator[None]:
    """A small tmpfs at `path` (root only: the test is skipped otherwise)."""
    os.makedirs(path, mode=0o700)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", path],
        capture_output=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", path], check=True)


def fill(path: str) -> None:
    """Fill the file system of `path` until it refuses (ENOSPC)."""
    with open(os.path.join(path, "fill"), "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass


def test_a_full_disk_neither_stops_nimbus_nor_leaves_a_topology_running(tmp_path):
    """The data directory's disk fills while a topology runs: a submit is refused and
    leaves nothing behind; a kill is taken, the topology ends, the failed save is
    logged and tried again until space is freed (a save that raised in `tick` made
    nimbus exit 1, and it restarted with the topology `running` for ever)."""
    data = str(tmp_path / "nimbus-data")
    with tmpfs(data, "4m"), running(lambda: Cluster(str(tmp_path))) as c:
        endless = Topology("endless", config={"topology.workers": 2})
        endless.set_spout("s", CountingSpout(10**12, per_call=10))
        endless.set_bolt("null", Null()).shuffle_grouping("s")
        c.call("submit", (endless, {}))
        c.wait_status("endless", "running")
        fill(data)
        with pytest.raises(StormishError, match="No space left"):
            c.call("submit", (one_worker("refused"), {}))
        assert "refused" not in rows(c)
        assert not os.path.exists(os.path.join(data, "topologies", "refused"))

        assert c.call("kill", ("endless", 0)) == 0
        c.wait_status("endless", "killed")
        assert c.nimbus.poll() is None
        mine = os.path.join(data, "topologies", "endless")
        assert [f for f in os.listdir(mine) if f.startswith(".")] == []  # no temp file
        log = c.log("nimbus.log")
        assert log.count("endless: cannot save its state") == 1

        os.remove(os.path.join(data, "fill"))

        def saved() -> bool:
            with open(os.path.join(mine, "state.json")) as fh:
                return json.load(fh)["status"] == "killed"

        poll_for(saved, 30, 0.1, "the state saved again")
        poll_for(lambda: "endless: its state is saved again" in c.log("nimbus.log"), 10, 0.1)
        with closing(c.client()) as client:
            assert client.call("stats", "endless").status == "killed"


def test_a_pause_of_nimbus_is_not_its_supervisors_silence():
    """`_credit_pause` with a fake clock: a turn of the loop longer than PAUSED moves
    every supervisor's `heard` on by the gap (capped at now), a short one changes
    nothing; a supervisor silent before the pause stays as silent as it was."""
    paused = nimbus_mod.PAUSED
    s0 = SupervisorInfo("s0", "h", [1], heard=100.0)
    s1 = SupervisorInfo("s1", "h", [2], heard=90.0)
    fake = SimpleNamespace(_looked=100.5, supervisors={"s0": s0, "s1": s1})
    assert not Nimbus._credit_pause(fake, 100.5 + paused / 2)  # type: ignore[arg-type]
    assert (s0.heard, s1.heard) == (100.0, 90.0)
    assert Nimbus._credit_pause(fake, 120.0)  # type: ignore[arg-type]
    gap = 120.0 - (100.5 + paused / 2)
    assert s0.heard == pytest.approx(100.0 + gap)
    assert s1.heard == pytest.approx(90.0 + gap)
    assert fake._looked == 120.0


def test_a_pause_inside_the_loops_poll_is_credited_before_the_tick(monkeypatch):
    """The loop's own turn with a fake clock: nimbus is stopped while it waits in its
    poll (where it spends most of its time), so the pause falls between the turn's
    first look and its tick. The tick must see every supervisor credited, not silent
    for the whole pause (a CI run lost both supervisors this way: 'supervisor s0 lost'
    logged before 'did not look for 7.1s')."""
    clock = [100.0]
    monkeypatch.setattr(nimbus_mod, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    timeout = 5.0
    seen: list[float] = []

    def poll(ms: int) -> int:
        if not seen and clock[0] < 110.0:
            clock[0] += 10.0  # SIGSTOP for 10 s, longer than the timeout
        return 0

    def tick() -> None:
        seen.append(max(clock[0] - s.heard for s in fake.supervisors.values()))
        fake._stop = True

    fake = SimpleNamespace(
        _stop=False,
        _looked=100.0,
        leadership=None,
        leading=True,
        supervisors={"s0": SupervisorInfo("s0", "h", [1], heard=99.0)},
        api=SimpleNamespace(poll=poll),
        control=SimpleNamespace(pump=lambda timeout: None),
        tick=tick,
    )
    fake._credit_pause = lambda now: Nimbus._credit_pause(fake, now)  # type: ignore[arg-type]
    Nimbus.serve(fake)  # type: ignore[arg-type]
    assert seen and seen[0] < timeout, seen


def test_an_ended_topology_is_still_listed_after_a_restart_and_its_name_starts_past_its_epoch(
    tmp_path,
):
    """A killed topology stays in `list` (with its error, when it failed) and in `stats`
    (its saved final statistics) until a kill removes it; it vanished when nimbus
    restarted, and with it the epoch its workers
    had reached, so the same name submitted again started at the old epoch (workers a
    supervisor still reports under it could stand for the new ones)."""
    with running(lambda: Cluster(str(tmp_path), supervisors=0), ("nimbus.log",)) as c:
        c.call("submit", (one_worker("ended"), {}))
        c.call("kill", ("ended", 0))
        c.wait_status("ended", "killed")
        before = c.call("stats", "ended")
        saved = os.path.join(c.data, "topologies", "ended", "state.json")
        with open(saved) as fh:
            epoch = json.load(fh)["epoch"]
        c.stop_nimbus()
        c.start_nimbus()
        assert rows(c)["ended"]["status"] == "killed"
        assert c.call("stats", "ended") == before  # its saved final statistics
        with closing(c.client()) as client, pytest.raises(StormishError, match="is killed"):
            client.call("activate", "ended")
        assert c.call("kill", ("ended", 0)) == "killed"  # removed, as before the restart
        assert "ended" not in rows(c)
        c.call("submit", (one_worker("ended"), {}))
        with open(saved) as fh:
            assert json.load(fh)["epoch"] > epoch
