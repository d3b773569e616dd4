"""The fault-injection suite (marker `faults`, run with `python -m pytest -m faults tests`).

Every test in this directory is watched (the autouse `watch` fixture):

- memory: the RSS of this process and of every process it started, sampled every
  0.5 s with psutil (`rss_mb`: start, peak, end, of the whole tree (`all`) and of the
  started processes alone (`started`); `procs`: the most started processes alive at
  once). A test calls `watch.begin()` once its run is under way and `watch.freeze()`
  once it completed: start is the sample at `begin` (else the test's start), peak the
  largest after it, end the last sample before `freeze` in which as many processes were
  alive as at `begin` (the run's processes, before they stopped at completion). A
  process that left our tree (a worker orphaned when its supervisor was killed) stays
  watched;
- processes: every process the test started, seen in those samples, must be gone at
  teardown; one still running is killed by its pid and fails the test. So must every
  socket this process opened;
- figures: what the test puts in `watch.figures` (ids lost, duplicates, time to
  recover, ...) plus its outcome, seconds and RSS make one JSON line, printed as
  `FAULTS {...}`, appended to the file named by `STORMISH_FAULTS_REPORT` when set, and
  listed under "fault figures" at the end of the run (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import psutil
import pytest
from integration.test_cluster import Cluster

from stormish.testing import poll_for

REPORT_ENV = "STORMISH_FAULTS_REPORT"
SAMPLE_EVERY = 0.5
_RECORDS: list[dict[str, Any]] = []
_CALL = pytest.StashKey[pytest.TestReport]()
_WATCH = pytest.StashKey["Watch"]()


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class Watch:
    """Samples the RSS of this process and its descendants in a thread; remembers every
    descendant it saw (by pid and start time: a reused pid is another process)."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.before = {p.pid for p in self.me.children(recursive=True)}
        self.conns = self._conns()
        self.seen: dict[tuple[int, float], psutil.Process] = {}
        self.figures: dict[str, Any] = {}
        # every sample: (this process's RSS, the started processes' RSS, how many alive)
        self.rss: list[tuple[int, int, int]] = []
        self.first = 0  # the sample `begin` took
        self.procs = 0
        self.frozen = False
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.sample()
        self._thread = threading.Thread(target=self._run, name="faults-watch", daemon=True)
        self._thread.start()

    def _conns(self) -> set:
        return {(c.laddr, c.raddr, c.status) for c in self.me.net_connections("all")}

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            self.sample()

    def sample(self) -> None:
        """Take one sample now (tests call it before a kill, so the victim is known)."""
        with self._lock:
            try:
                kids = self.me.children(recursive=True)
            except psutil.Error:
                kids = []
            for p in kids:
                if p.pid not in self.before:
                    try:
                        self.seen.setdefault((p.pid, p.create_time()), p)
                    except psutil.Error:
                        pass
            if self.frozen:
                return
            total = alive = 0
            for p in self.seen.values():
                try:
                    if _alive(p):
                        total += p.memory_info().rss
                        alive += 1
                except psutil.Error:
                    pass
            try:
                mine = self.me.memory_info().rss
            except psutil.Error:
                mine = 0
            self.rss.append((mine, total, alive))
            self.procs = max(self.procs, alive)

    def begin(self) -> None:
        """The run is under way: the start figure is now."""
        self.sample()
        self.first = len(self.rss) - 1

    def freeze(self) -> None:
        """Take the end figure now (a test calls it once its run completed, before its
        cluster stops; otherwise the end of the test's call)."""
        self.sample()
        self.frozen = True

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def left_running(self, grace: float = 15.0) -> list[psutil.Process]:
        """Started by the test and still running after `grace` seconds (a worker whose
        supervisor was killed exits by itself, a second or two later)."""
        self.sample()
        try:
            poll_for(lambda: not any(_alive(p) for p in self.seen.values()), grace, 0.1)
        except TimeoutError:
            pass
        return [p for p in self.seen.values() if _alive(p)]

    def leaked_sockets(self) -> list:
        return [c for c in self._conns() - self.conns if c[2] != psutil.CONN_TIME_WAIT]

    def rss_mb(self) -> dict[str, dict[str, float]]:
        """start/peak/end in MB of the whole tree (this process included: the soak's
        worker runs in it) and of the processes the test started."""
        run = self.rss[self.first :]
        if not run:
            return {}
        up = run[0][2]
        end = next((s for s in reversed(run) if s[2] >= up), run[-1])
        out = {}
        for name, part in (("all", lambda s: s[0] + s[1]), ("started", lambda s: s[1])):
            if part(run[0]) or part(end):
                out[name] = {
                    "start": round(part(run[0]) / 2**20, 1),
                    "peak": round(max(part(s) for s in run) / 2**20, 1),
                    "end": round(part(end) / 2**20, 1),
                }
        return out


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.stash[_CALL] = rep
        watch = item.stash.get(_WATCH, None)
        if watch is not None:
            watch.freeze()


def call_failed(item: pytest.Item) -> bool:
    rep = item.stash.get(_CALL, None)
    return rep is None or rep.failed


@pytest.fixture(autouse=True)
def watch(request, capsys):
    w = Watch()
    request.node.stash[_WATCH] = w
    yield w
    left = w.left_running()
    w.stop()
    for p in left:
        p.kill()
    printed = [ln[:300] for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    rep = request.node.stash.get(_CALL, None)
    record = {
        "test": request.node.name,
        "outcome": _outcome(rep),
        "seconds": round(rep.duration if rep is not None else 0.0, 1),
        **w.figures,
        "rss_mb": w.rss_mb(),
        "procs": w.procs,
    }
    if printed:
        record["printed"] = printed[-5:]
    _write(record)
    assert not left, f"processes left running (killed now): {[p.pid for p in left]}"
    leaked = w.leaked_sockets()
    assert not leaked, f"sockets left open: {leaked}"


def _outcome(rep: pytest.TestReport | None) -> str:
    if rep is None:
        return "error"
    if hasattr(rep, "wasxfail"):
        return "xfailed" if rep.skipped else "xpassed"
    return rep.outcome


def _write(record: dict[str, Any]) -> None:
    line = json.dumps(record, sort_keys=False)
    print(f"FAULTS {line}")
    _RECORDS.append(record)
    path = os.environ.get(REPORT_ENV)
    if path:
        with open(path, "a") as fh:
            fh.write(line + "\n")


def pytest_terminal_summary(terminalreporter):
    if not _RECORDS:
        return
    terminalreporter.section("fault figures")
    for record in _RECORDS:
        terminalreporter.write_line(json.dumps(record))


@pytest.fixture
def ledger(tmp_path) -> str:
    path = tmp_path / "ledger"
    path.mkdir()
    return str(path)


@pytest.fixture
def cluster(request, tmp_path, watch):
    """nimbus and two supervisors (two slots each) as processes on 127.0.0.1: the
    `Cluster` of tests/integration/test_cluster.py. Their logs are shown when the test
    failed."""
    c = Cluster(str(tmp_path))
    watch.sample()
    yield c
    c.close()
    if call_failed(request.node):
        for name in ("nimbus.log", "s0.log", "s1.log"):
            print(f"--- {name}\n{c.log(name)[-3000:]}")


@pytest.fixture
def zk(watch):
    """Debian's ZooKeeper on 127.0.0.1, one per test (tests/zk_server.py)."""
    from zk_server import ZooKeeper

    z = ZooKeeper()
    watch.sample()
    yield z
    z.close()
