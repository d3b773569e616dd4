"""The cluster daemons as real processes on 127.0.0.1: `stormish nimbus` and two
`stormish supervisor`s, topologies submitted through the nimbus client.

Each test checks at teardown that every daemon and worker process it started is gone
(supervisors stop their workers when they stop)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import closing

import psutil
import pytest

from stormish import BasicBolt, Spout, StormishError, Topology
from stormish.cluster import deployment as deployment_mod
from stormish.cluster.client import NimbusClient
from stormish.local.forkserver import SERVER_NAME
from stormish.local.workers import _child_env
from stormish.testing import ListSpout, poll_for
from stormish.transport.keys import create
from stormish.transport.security import LOOPBACK, Curve

from .harness import no_process_left, running
from .parts import Count, CountingSpout, Split, sentences
from .test_metrics import scrape

SENTENCES = sentences(40, 7, 5, 4000)


def executed(stats, component: str) -> int:
    """What `component` executed so far; 0 while no worker has reported it yet."""
    c = stats.components.get(component)
    return 0 if c is None else c.executed


WORDS = sum(len(s.split()) for s in SENTENCES)


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Cluster:
    """nimbus + supervisors as child processes on loopback, keyed as they are by default:
    nimbus makes the cluster's keys in its data directory on its first start and the
    supervisors and clients are given that directory (or `keys`: a directory made
    before; or `insecure`: every daemon started --insecure)."""

    def __init__(
        self,
        tmp,
        keys: str | None = None,
        supervisors: int = 2,
        worker_timeout=30,
        supervisor_args: tuple[str, ...] = (),
        nimbus_args: tuple[str, ...] = (),
        insecure: bool = False,
        task_timeout: float = 5,
    ):
        self.tmp = tmp
        self.task_timeout = task_timeout
        self.env = _child_env()
        self.env.pop("STORMISH_KEYS", None)
        if keys:
            self.env["STORMISH_KEYS"] = keys
        self.api, self.control, *slots = free_ports(2 + 2 * supervisors)
        self.slots = [slots[i : i + 2] for i in range(0, len(slots), 2)]
        self.nimbus: subprocess.Popen | None = None
        insecure_args = ("--insecure",) if insecure else ()
        self.nimbus_args = (*insecure_args, *nimbus_args)
        self.supervisors: list[subprocess.Popen] = []
        self.start_nimbus()
        if keys is None and not insecure:  # the keys nimbus made on its first start
            keys = os.path.join(self.data, "keys")
            made = os.path.join(keys, "cluster.key_secret")
            poll_for(lambda: os.path.exists(made), 30, 0.05, "nimbus made its keys")
            self.env["STORMISH_KEYS"] = keys
        self.keys = keys
        self.supervisor_args = (*insecure_args, *supervisor_args)
        self.worker_timeout = worker_timeout
        for i in range(len(self.slots)):
            self.supervisors.append(self.start_supervisor(i))

    def start_supervisor(self, i: int) -> subprocess.Popen:
        """Supervisor `s{i}` on its slot ports (again, after it was killed)."""
        return self._spawn(
            "supervisor",
            "--nimbus", f"127.0.0.1:{self.api}",
            "--id", f"s{i}",
            "--ports", ",".join(map(str, self.slots[i])),
            "--worker-timeout", str(self.worker_timeout),
            "--log-dir", os.path.join(self.tmp, f"s{i}-workers"),
            *self.supervisor_args,
            log=f"s{i}.log",
        )  # fmt: skip

    def _spawn(self, *args: str, log: str) -> subprocess.Popen:
        out = open(os.path.join(self.tmp, log), "ab")  # noqa: SIM115 - the child owns it
        with out:
            return subprocess.Popen(
                [sys.executable, "-m", "stormish.cli", *args],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def data(self) -> str:
        return os.path.join(self.tmp, "nimbus-data")

    def start_nimbus(self) -> None:
        self.nimbus = self._spawn(
            "nimbus", "--port", str(self.api), "--control-port", str(self.control),
            "--data", self.data, "--task-timeout", f"{self.task_timeout:g}",
            *self.nimbus_args, log="nimbus.log",
        )  # fmt: skip

    def stop_nimbus(self) -> None:
        assert self.nimbus is not None
        self.nimbus.send_signal(signal.SIGTERM)
        assert self.nimbus.wait(30) == 0

    def client(self, keys: str | None = "same") -> NimbusClient:
        k = self.keys if keys == "same" else keys
        return NimbusClient(f"127.0.0.1:{self.api}", Curve(k) if k else LOOPBACK, timeout=20)

    def call(self, verb, payload=None):
        with closing(self.client()) as c:
            return c.call(verb, payload)

    def status(self, name: str) -> str:
        return next(r["status"] for r in self.call("list") if r["name"] == name)

    def wait_status(self, name: str, wanted: str, timeout: float = 60) -> None:
        """A timeout names the status it saw and ends with the cluster's logs: a wait
        that fails only on a loaded CI machine must say why there."""
        try:
            poll_for(lambda: self.status(name) == wanted, timeout, 0.1, f"{name} {wanted}")
        except TimeoutError as e:
            try:
                seen = self.status(name)
            except Exception as why:  # noqa: BLE001 - the report must not hide the timeout
                seen = f"unknown ({why!r})"
            raise TimeoutError(f"{e} (status {seen})\n{self.log_tails()}") from None

    def log_tails(self, lines: int = 40) -> str:
        """The last `lines` of every log this cluster wrote (daemons and workers)."""
        out = []
        for root, _, files in sorted(os.walk(self.tmp)):
            for f in sorted(files):
                if f.endswith(".log"):
                    path = os.path.join(root, f)
                    with open(path, errors="replace") as fh:
                        tail = fh.read().splitlines()[-lines:]
                    out.append(f"--- {os.path.relpath(path, self.tmp)}\n" + "\n".join(tail))
        return "\n".join(out)

    def workers(self) -> list[psutil.Process]:
        """The supervisors' worker processes (a fork server's children, with
        `supervisor.worker.start` fork)."""
        out = []
        for s in self.supervisors:
            for child in psutil.Process(s.pid).children():
                try:
                    out += child.children() if child.name() == SERVER_NAME else [child]
                except psutil.NoSuchProcess:  # a worker killed (and reaped) just now
                    continue
        return out

    def log(self, name: str) -> str:
        with open(os.path.join(self.tmp, name), errors="replace") as fh:
            return fh.read()

    def close(self) -> None:
        for p in [*self.supervisors, self.nimbus]:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in [*self.supervisors, self.nimbus]:
            if p is not None:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)


@pytest.fixture
def cluster(tmp_path):
    with running(lambda: Cluster(str(tmp_path))) as c:
        yield c


def wordcount(name: str, workers: int = 2, **conf) -> Topology:
    t = Topology(name, config={"topology.workers": workers, **conf})
    t.set_spout("s", ListSpout([[s] for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("split", Split(), parallelism=2).shuffle_grouping("s")
    t.set_bolt("count", Count(), parallelism=2).fields_grouping("split", ["word"])
    return t


def test_submit_runs_on_the_supervisors_and_completes_exactly(cluster):
    assert cluster.call("submit", (wordcount("wc"), {})) == "wc"
    cluster.wait_status("wc", "complete")
    stats = cluster.call("stats", "wc")
    assert stats.components["count"].executed == WORDS
    assert stats.components["s"].acked == len(SENTENCES)
    assert stats.components["s"].failed == 0
    # the two workers ran on the two supervisors (the scheduler spreads them)
    log = cluster.log("nimbus.log")
    assert "supervisor s0 joined" in log and "supervisor s1 joined" in log
    assert "wc: running (2 started, 0 adopted)" in log


class SlowToBuild(Split):
    """Unpickles slowly, holding the CPU (and the GIL between switches): a worker's
    `assign` takes longer than nimbus's worker timeout, as a large topology's does on a
    loaded host."""

    def __setstate__(self, state):
        import time

        self.__dict__.update(state)
        end = time.monotonic() + 4.5
        while time.monotonic() < end:
            pass


def test_a_worker_busy_building_its_topology_past_the_worker_timeout_is_not_given_up(cluster):
    """Nimbus takes a worker silent for its worker timeout (3 s here) as gone; a worker
    carrying out an assign is busy, not silent: its beat thread goes on. Before, nimbus
    gave both up ("died during assign") and the topology ran on without them (CI)."""
    t = Topology("built", config={"topology.workers": 2})
    t.set_spout("s", ListSpout([[s] for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("split", SlowToBuild(), parallelism=2).shuffle_grouping("s")
    t.set_bolt("count", Count(), parallelism=2).fields_grouping("split", ["word"])
    cluster.call("submit", (t, {}))
    cluster.wait_status("built", "complete", timeout=90)
    log = cluster.log("nimbus.log")
    assert "built: running (2 started, 0 adopted)" in log, log
    assert "died during assign" not in log
    assert cluster.call("stats", "built").components["count"].executed == WORDS


class Null(BasicBolt):
    def execute(self, tup):
        pass


class Slow(BasicBolt):
    outputs = ["sentence"]

    def execute(self, tup):
        import time

        time.sleep(0.002)  # the test needs the run to last while a worker is killed
        self.emit(tup.values)


def slow_wordcount(name: str) -> Topology:
    t = Topology(
        name,
        config={
            "topology.workers": 2,
            "topology.message.timeout.secs": 3,
            "topology.max.spout.pending": 200,
        },
    )
    t.set_spout("s", ListSpout([[s] for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("slow", Slow(), parallelism=2).shuffle_grouping("s")
    t.set_bolt("split", Split(), parallelism=2).shuffle_grouping("slow")
    t.set_bolt("count", Count(), parallelism=2).fields_grouping("split", ["word"])
    return t


def test_a_killed_worker_is_restarted_by_its_supervisor_and_the_run_completes(cluster):
    cluster.call("submit", (slow_wordcount("slow"), {}))
    cluster.wait_status("slow", "running")
    # the worker without the spout: the spout's replays make up what the kill lost
    stats = cluster.call("stats", "slow")
    spout_worker = stats.tasks[next(t for t, s in stats.tasks.items() if s.component == "s")].worker
    poll_for(lambda: len(cluster.workers()) == 2, 30, 0.1, "two workers")
    victims = []
    for proc in cluster.workers():
        if f"--index {1 - spout_worker} " in " ".join(proc.cmdline()) + " ":
            victims.append(proc)
    assert len(victims) == 1
    poll_for(
        lambda: cluster.call("stats", "slow").components["count"].executed > 1000,
        30, 0.05, "the run under way",
    )  # fmt: skip
    victims[0].send_signal(signal.SIGKILL)
    cluster.wait_status("slow", "complete", timeout=90)
    stats = cluster.call("stats", "slow")
    assert stats.components["s"].acked == len(SENTENCES)  # every tree, some replayed
    logs = cluster.log("s0.log") + cluster.log("s1.log")
    assert "restarting it on port" in logs
    worker_logs = [
        os.path.join(cluster.tmp, f"s{i}-workers", f"slow-worker-{w}.log")
        for i in (0, 1)
        for w in (0, 1)
    ]
    assert sum(os.path.exists(p) for p in worker_logs) == 2  # one log per worker, kept
    assert "worker 1" in cluster.log("nimbus.log") or "worker 0" in cluster.log("nimbus.log")


@pytest.fixture
def quick_cluster(tmp_path):
    c = Cluster(str(tmp_path), worker_timeout=2)
    yield c
    c.close()


@pytest.mark.faults  # kill/restart timing: in CI's faults run, out of the default suite
def test_a_hung_worker_is_killed_and_restarted_after_the_worker_timeout(quick_cluster):
    c = quick_cluster
    c.call("submit", (slow_wordcount("hung"), {}))
    c.wait_status("hung", "running")
    stats = c.call("stats", "hung")
    spout_worker = stats.tasks[next(t for t, s in stats.tasks.items() if s.component == "s")].worker
    poll_for(lambda: len(c.workers()) == 2, 30, 0.1, "two workers")
    (victim,) = [p for p in c.workers() if f"--index {1 - spout_worker} " in " ".join(p.cmdline())]
    victim.send_signal(signal.SIGSTOP)  # alive, but silent: no exit for a supervisor to see
    c.wait_status("hung", "complete", timeout=90)
    assert c.call("stats", "hung").components["s"].acked == len(SENTENCES)
    logs = c.log("s0.log") + c.log("s1.log")
    assert "silent for" in logs and "(worker timeout 2s); restarting it" in logs
    assert not victim.is_running() or victim.status() == psutil.STATUS_ZOMBIE


@pytest.mark.faults  # SIGSTOP timing: in CI's faults run, out of the default suite
def test_stats_of_a_silent_worker_are_its_last_and_do_not_stall_nimbus(cluster):
    """A worker that stops answering (SIGSTOP) is alive to nimbus until its beats have
    been missing nimbus's worker timeout (3 s): `stats` answers within the look's bound
    (LOOK_TIMEOUT) with that worker's last numbers, at once while it stays silent, and
    nimbus answers other requests meanwhile. Before, each stats waited on it until it
    was taken as gone, nimbus's whole loop with it (5 s a worker at most), and its tasks
    vanished: a follower's forwarded stats, bounded at 5 s, was refused (a loaded CI
    run). The stop lands at any phase of the worker's beats: a try whose look outlasted
    its last beat is made again."""
    c = cluster
    c.call("submit", (_endless("hung-stats"), {}))
    c.wait_status("hung-stats", "running")
    poll_for(lambda: executed(c.call("stats", "hung-stats"), "null") > 0, 30, 0.1, "flow")
    poll_for(lambda: len(c.workers()) == 2, 30, 0.1, "two workers")
    victim = c.workers()[0]
    index = int(victim.cmdline()[victim.cmdline().index("--index") + 1])

    def tasks(st) -> set[int]:
        return {t for t, s in st.tasks.items() if s.worker == index}

    known = tasks(c.call("stats", "hung-stats"))
    assert known
    tries = []
    for _ in range(3):
        victim.suspend()
        try:
            t0 = time.monotonic()
            first = c.call("stats", "hung-stats")
            took = time.monotonic() - t0
            c.call("stats", "hung-stats")  # at once: it is not asked again so soon
            rows = c.call("list")
            took_again = time.monotonic() - t0 - took
        finally:
            victim.resume()
        tries.append((round(took, 2), sorted(tasks(first)), round(took_again, 2)))
        if tasks(first) == known:
            break
        poll_for(lambda: tasks(c.call("stats", "hung-stats")) == known, 30, 0.2, "back")
    assert tasks(first) == known, f"its tasks vanished (took, tasks, again): {tries}"
    assert took < deployment_mod.LOOK_TIMEOUT + 1.0, f"stats took {took:.1f}s"
    assert took_again < 1.0, f"stats and list again took {took_again:.1f}s"
    assert any(r["name"] == "hung-stats" and r["status"] == "running" for r in rows)
    before = executed(c.call("stats", "hung-stats"), "null")
    poll_for(lambda: executed(c.call("stats", "hung-stats"), "null") > before, 30, 0.1, "on")
    c.call("kill", ("hung-stats", 0))


def test_workers_keep_running_while_nimbus_restarts(cluster):
    cluster.call("submit", (slow_wordcount("survivor"), {}))
    cluster.wait_status("survivor", "running")
    pids = {p.pid for p in cluster.workers()}
    assert len(pids) == 2
    cluster.stop_nimbus()
    assert {p.pid for p in cluster.workers()} == pids  # nimbus gone, workers run on
    cluster.start_nimbus()
    cluster.wait_status("survivor", "complete", timeout=90)
    log = cluster.log("nimbus.log")
    assert "restored topology 'survivor' (running)" in log
    assert "survivor: worker 0 adopted" in log and "survivor: worker 1 adopted" in log
    stats = cluster.call("stats", "survivor")
    assert stats.components["s"].acked == len(SENTENCES)


def test_a_worker_restarted_after_nimbus_restarted_links_with_its_adopted_peer(cluster):
    """A worker's HELLO names its run (the topology's epoch): one restarted after nimbus
    restarted is assigned by the restored deployment, and must name the run its adopted
    peer names, or its tuples are dropped as a stale worker's (`foreign`) and the run
    never completes."""
    cluster.call("submit", (slow_wordcount("readopted"), {}))
    cluster.wait_status("readopted", "running")
    cluster.stop_nimbus()
    cluster.start_nimbus()
    poll_for(lambda: "readopted: worker 1 adopted" in cluster.log("nimbus.log"), 60, 0.1)
    victim = max(cluster.workers(), key=lambda p: p.pid)
    victim.kill()
    poll_for(lambda: victim.pid not in {p.pid for p in cluster.workers()}, 30, 0.05)
    cluster.wait_status("readopted", "complete", timeout=90)
    stats = cluster.call("stats", "readopted")
    assert stats.components["s"].acked == len(SENTENCES)
    for name, link in stats.links.items():
        assert not link["dropped"].get("foreign"), (name, link["dropped"])


def test_kill_rebalance_and_clear_errors(cluster):
    endless = Topology("endless", config={"topology.workers": 2})
    endless.set_spout("s", CountingSpout(10**12, per_call=10))
    endless.set_bolt("null", Null()).shuffle_grouping("s")
    cluster.call("submit", (endless, {}))
    with pytest.raises(StormishError, match="'endless' is already running"):
        cluster.call("submit", (endless, {}))
    with pytest.raises(StormishError, match="no topology 'nope'.*known: endless"):
        cluster.call("kill", ("nope", 0))
    with pytest.raises(StormishError, match="topology.workers"):
        cluster.call("submit", (wordcount("bad"), {"topology.workers": 0}))
    cluster.wait_status("endless", "running")
    cluster.call("rebalance", ("endless", 1, 0))
    cluster.wait_status("endless", "running")
    assert cluster.call("stats", "endless").workers == 1
    nimbus = f"127.0.0.1:{cluster.api}"

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "stormish.cli", *args, "--nimbus", nimbus],
            env=cluster.env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    out = cli("deactivate", "endless")  # each says what it did
    assert out.returncode == 0 and "deactivated topology 'endless'" in out.stdout, out.stderr
    assert "activated topology 'endless'" in cli("activate", "endless").stdout
    scripted = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "monitor", "endless", "--every", "0.2",
         "--json", "--nimbus", nimbus],
        env=cluster.env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        tick = json.loads(scripted.stdout.readline())
        assert tick["name"] == "endless" and tick["status"] == "running", tick
        assert set(tick["components"]) >= {"s", "null"} and "roots" in tick
    finally:
        scripted.kill()
        scripted.communicate(timeout=30)
    monitor = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "monitor", "endless", "--every", "0.2",
         "--nimbus", nimbus],
        env=cluster.env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        first = monitor.stdout.readline()
        assert first.startswith("endless [running] ") and "null " in first, first
        out = cli("kill", "endless", "--wait", "0")
        assert "killing topology 'endless': spouts deactivated, workers stop now" in out.stdout
        bad = cli("kill", "endless", "-w", "-1")  # Storm's -w: the wait, and it is checked
        assert bad.returncode == 2 and "'-w' / '--wait'" in bad.stderr, bad.stderr
        cluster.wait_status("endless", "killed")
        rest = monitor.communicate(timeout=60)[0]
    finally:
        if monitor.poll() is None:
            monitor.kill()
            monitor.wait(10)
    assert monitor.returncode == 0
    assert rest.strip().splitlines()[-1].startswith("endless [killed]")
    poll_for(lambda: not cluster.workers(), 30, 0.1, "the workers gone")


def test_cli_submit_list_and_kill(cluster):
    env = cluster.env
    wc = os.path.join(os.path.dirname(__file__), "..", "..", "topologies", "wordcount.py")
    nimbus = f"127.0.0.1:{cluster.api}"
    out = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "submit", wc, "--nimbus", nimbus, "-w", "2",
         "--wait", "--timeout", "60"],
        env=env, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "topology 'wordcount': complete" in out.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "list", "--nimbus", nimbus],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "wordcount" in listed.stdout and "complete" in listed.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "kill", "ghost", "--nimbus", nimbus],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "no topology 'ghost'" in bad.stderr


def test_cli_submit_inactive_opens_nothing_until_activate(cluster):
    """Activation on a cluster: `submit --inactive`, then `stormish activate`."""
    env, nimbus = cluster.env, f"127.0.0.1:{cluster.api}"
    wc = os.path.join(os.path.dirname(__file__), "..", "..", "topologies", "wordcount.py")

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "stormish.cli", *args, "--nimbus", nimbus],
            env=env, capture_output=True, text=True, timeout=90,
        )  # fmt: skip

    out = cli("submit", wc, "-w", "2", "--inactive")
    assert out.returncode == 0, out.stderr
    assert "inactive" in out.stdout
    cluster.wait_status("wordcount", "running")

    def spouts() -> list:
        stats = cluster.call("stats", "wordcount")
        return [t for t in stats.tasks.values() if t.kind == "spout"]

    poll_for(lambda: spouts(), 30, 0.1, "the spout's statistics")
    assert all(t.active is False and t.emitted == 0 for t in spouts())
    assert next(r for r in cluster.call("list") if r["name"] == "wordcount")["active"] is False
    # List says inactive (Storm's INACTIVE), in text and in JSON
    listed = cli("list")
    assert re.search(r"^wordcount\s+inactive\s+2 workers", listed.stdout, re.M), listed.stdout
    rows = json.loads(cli("list", "--json").stdout)["topologies"]
    assert [(r["name"], r["shown_status"], r["active"]) for r in rows] == [
        ("wordcount", "inactive", False)
    ]
    out = cli("activate", "wordcount")
    assert out.returncode == 0 and "activated topology 'wordcount'" in out.stdout
    cluster.wait_status("wordcount", "complete")
    assert cluster.call("stats", "wordcount").components["count"].executed > 0


@pytest.fixture
def keyed_cluster(tmp_path):
    keys = str(tmp_path / "keys")
    create(keys)
    with no_process_left():
        c = Cluster(str(tmp_path), keys=keys)
        yield c
        c.close()


def test_a_cluster_with_keys_runs_and_refuses_clients_without_them(keyed_cluster, tmp_path):
    c = keyed_cluster
    c.call("submit", (wordcount("secure"), {}))
    c.wait_status("secure", "complete")
    assert c.call("stats", "secure").components["count"].executed == WORDS
    with closing(c.client(keys=None)) as plain:  # no keys: the handshake never completes
        plain.timeout = 2
        with pytest.raises(StormishError, match="completed no handshake .* no keys"):
            plain.call("list")
    other = str(tmp_path / "other")
    create(other)
    with closing(c.client(keys=other)) as stranger:  # another cluster's keys
        stranger.timeout = 2
        with pytest.raises(StormishError, match="completed no handshake .* used CURVE keys"):
            stranger.call("list")
    assert "dropped an API message" not in c.log("nimbus.log")  # nothing reached a decoder


def test_a_topology_wanting_more_slots_than_are_free_says_so_and_can_be_rebalanced(cluster):
    """`submit -w 5` on 4 slots says at once what it waits for (submit,
    list, monitor, nimbus's log); it can be rebalanced to 4 from `starting` and then
    runs to completion."""
    env = cluster.env
    nimbus = f"127.0.0.1:{cluster.api}"
    poll_for(lambda: len(cluster.call("supervisors")) == 2, 30, 0.1, "both supervisors")
    wc = os.path.join(os.path.dirname(__file__), "..", "..", "topologies", "wordcount.py")

    def cli(*args, timeout=60):
        return subprocess.run(
            [sys.executable, "-m", "stormish.cli", *args, "--nimbus", nimbus],
            env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    why = "waiting for 1 free worker slot: it needs 5 and has 4; 0 free of 4 on 2 supervisors"
    out = cli("submit", wc, "-w", "5")
    assert out.returncode == 0 and why in out.stderr, out.stderr
    assert cluster.status("wordcount") == "starting"
    listed = cli("list")
    assert f"  {why}" in listed.stdout, listed.stdout
    monitor = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "monitor", "wordcount", "--every", "0.2",
         "--nimbus", nimbus],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        first = monitor.stdout.readline()
        assert first.startswith("wordcount [starting] waiting for 1 free worker slot"), first
    finally:
        monitor.kill()
        monitor.communicate(timeout=30)
    assert why in cluster.log("nimbus.log")
    out = cli("rebalance", "wordcount", "-n", "4")
    assert out.returncode == 0, out.stderr
    cluster.wait_status("wordcount", "complete", timeout=90)
    row = next(r for r in cluster.call("list") if r["name"] == "wordcount")
    assert row["waiting"] is None and row["workers"] == 4


class CrashingBolt(BasicBolt):
    """Ends its worker process (as a segfault or an OOM kill would) on its 20th tuple,
    in each of its first `crashes` incarnations; counted in a file, which outlives them."""

    outputs = ["sentence"]

    def __init__(self, tally: str, crashes: int):
        self.tally, self.crashes = tally, crashes

    def prepare(self, conf, context):
        with open(self.tally, "a+") as f:
            f.seek(0)
            self.incarnation = len(f.read().splitlines())
            f.write("started\n")
        self.n = 0

    def execute(self, tup):
        self.n += 1
        if self.n == 20 and self.incarnation < self.crashes:
            print(f"crash-test: incarnation {self.incarnation} gives up", file=sys.stderr)
            sys.stderr.flush()
            os._exit(3)
        self.emit(tup.values)


def metrics_url(log: str) -> str:
    """The metrics address a daemon printed (it listens on a free port: --metrics-port 0)."""
    return next(x for x in log.split() if x.startswith("http://") and x.endswith("/metrics"))


@pytest.fixture
def backoff_cluster(tmp_path):
    make = lambda: Cluster(  # noqa: E731
        str(tmp_path),
        supervisor_args=("--restart-backoff", "5", "--metrics-port", "0"),
        nimbus_args=("--metrics-port", "0"),
    )
    with running(make) as c:
        yield c


@pytest.mark.faults  # kill/restart timing: in CI's faults run, out of the default suite
def test_a_crashing_worker_is_restarted_with_backoff_and_list_tells_its_restarts(
    backoff_cluster, tmp_path
):
    """A worker that dies while processing, three times in a row, is
    restarted at once, then after 5 s, then 10 s; the topology keeps running (it used
    to fail with 'died during start'), `list` and `monitor` show the restart count, the
    state and how the worker last ended with its log's last line, and once the crashes
    stop the run completes with every tree acked."""
    c = backoff_cluster
    nimbus = f"127.0.0.1:{c.api}"
    poll_for(lambda: len(c.call("supervisors")) == 2, 30, 0.1, "both supervisors")
    data = [[s] for s in SENTENCES[:400]]
    t = Topology("crashy", config={"topology.workers": 2, "topology.message.timeout.secs": 3})
    t.set_spout("s", ListSpout(data, fields=["sentence"]))
    t.set_bolt("crash", CrashingBolt(str(tmp_path / "tally"), 3)).shuffle_grouping("s")
    t.set_bolt("null", Null(), parallelism=2).shuffle_grouping("crash")
    c.call("submit", (t, {}))
    monitor = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "monitor", "crashy", "--every", "0.2",
         "--nimbus", nimbus],
        env=c.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip

    def waiting_row():
        row = next(r for r in c.call("list") if r["name"] == "crashy")
        assert row["status"] in ("starting", "running"), row
        return next(
            (w for w in row["worker_status"] if w["state"] == "waiting" and w["restarts"] == 2),
            None,
        )

    try:
        # the wait (10 s) outlasts what follows: `list` starts a Python on a loaded machine
        w = poll_for(waiting_row, 60, 0.05, "the third crash's wait")
        assert w["last_exit"] == "exited with code 3" and w["crashes_in_a_row"] == 3, w
        # its last line, tagged with the component and task whose code printed it
        assert re.fullmatch(r"\[crash:\d+\] crash-test: incarnation 2 gives up", w["last_words"])
        assert 0 < w["restart_in"] <= 10.0, w
        listed = subprocess.run(
            [sys.executable, "-m", "stormish.cli", "list", "--nimbus", nimbus],
            env=c.env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        line = next(x for x in listed.stdout.splitlines() if f"worker {w['index']} on" in x)
        assert ": down, restarting in " in line and ", 2 restarts; last exited with code 3 " in line
        assert line.endswith("] crash-test: incarnation 2 gives up"), line
        # and in the metrics (item 9): the supervisor's and nimbus's
        sup = scrape(metrics_url(c.log(f"{w['supervisor']}.log")))
        labels = (
            ("supervisor", w["supervisor"]),
            ("topology", "crashy"),
            ("worker", str(w["index"])),
        )
        assert sup[("stormish_supervisor_worker_restarts_total", labels)] == 2
        assert sup[("stormish_supervisor_worker_up", labels)] == 0
        nim = scrape(metrics_url(c.log("nimbus.log")))
        key = (
            "stormish_worker_restarts_total",
            (("topology", "crashy"), ("worker", str(w["index"]))),
        )
        assert nim[key] >= 2
        assert (
            nim[("stormish_topology_status", (("status", "running"), ("topology", "crashy")))] == 1
        )
        c.wait_status("crashy", "complete", timeout=90)
    finally:
        if monitor.poll() is None:
            monitor.terminate()
        shown = monitor.communicate(timeout=30)[0]
    assert c.call("stats", "crashy").components["s"].acked == len(data)
    logs = c.log("s0.log") + c.log("s1.log")
    assert "exited with code 3; restarting it on port" in logs
    assert re.search(
        r" at once \(restart 1\); its log ended: \[crash:\d+\] crash-test: incar", logs
    )
    assert " in 5s (2 crashes in a row) (restart 2)" in logs
    assert " in 10s (3 crashes in a row) (restart 3)" in logs
    assert "died during" not in c.log("nimbus.log").replace("supervisor restarts it", "")
    # the third crash's wait (10 s) is long enough for monitor (every 0.2 s) to tell it
    assert re.search(r"worker \d on s\d:\d+: down, restarting in [\d.]+s, 2 restarts; last ", shown)


def test_monitor_names_the_root_of_backpressure_not_its_victims(cluster):
    """Spout -> a -> b -> slow c on 2 workers of a cluster; monitor's
    root line names c's task (with its worker), a and b only as parked behind it, and
    its rate line marks c ROOT."""
    from .test_bp_root import chain

    nimbus = f"127.0.0.1:{cluster.api}"
    cluster.call("submit", (chain("bproot"), {}))
    cluster.wait_status("bproot", "running")
    monitor = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "monitor", "bproot", "--every", "0.3",
         "--nimbus", nimbus],
        env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines = []
    try:
        for line in monitor.stdout:
            lines.append(line)
            if line.startswith("backpressure root:"):
                break
    finally:
        cluster.call("kill", ("bproot", 0))
        rest = monitor.communicate(timeout=60)[0]
    stats = cluster.call("stats", "bproot")
    c_task = next(t for t in stats.tasks.values() if t.component == "c")
    root = lines[-1]
    assert root.startswith(f"backpressure root: c task {c_task.task} on worker {c_task.worker}:")
    assert "parked behind it: a, b" in root, root
    assert not any(x.startswith("backpressure root: a") for x in lines + rest.splitlines())
    assert any(" c " in x and " ROOT" in x for x in lines + rest.splitlines()), lines


def test_nimbus_serves_storms_rest_api_and_a_kill_through_it_stops_the_topology(ui_cluster):
    """Nimbus --ui-port serves /api/v1 (on loopback,
    reaching nimbus through its own API with its keys); a POST kill ends the topology."""
    from .test_rest_api import entered, get, post

    c = ui_cluster
    where = os.path.join(c.data, "ui-url")  # its URL with the token: 0600, not in the log
    poll_for(lambda: os.path.exists(where), 30, 0.1, "nimbus's UI address")
    assert os.stat(where).st_mode & 0o777 == 0o600
    with open(where) as fh:
        printed = fh.read()
    token = printed.split("token=")[1].strip()
    assert token not in c.log("nimbus.log")
    url = entered(printed)
    api = url + "/api/v1"
    assert get(api + "/cluster/summary", token=False)[0] == 401
    poll_for(lambda: get(api + "/cluster/summary")[1]["supervisors"] == 2, 30, 0.1, "2 sups")
    _, summary = get(api + "/cluster/summary")
    assert summary["slotsTotal"] == 4 and summary["slotsUsed"] == 0
    _, sups = get(api + "/supervisor/summary")
    assert sorted(s["id"] for s in sups["supervisors"]) == ["s0", "s1"]
    c.call("submit", (slow_wordcount("webbed"), {}))
    c.wait_status("webbed", "running")
    _, tops = get(api + "/topology/summary")
    assert [(r["id"], r["status"], r["workersTotal"]) for r in tops["topologies"]] == [
        ("webbed", "ACTIVE", 2)
    ]
    code, t = get(api + "/topology/webbed")
    assert code == 200 and {b["boltId"] for b in t["bolts"]} == {"slow", "split", "count"}
    _, graph = get(api + "/topology/webbed/graph")
    assert ("split", "count") in {(e["source"], e["target"]) for e in graph["edges"]}
    _, comp = get(api + "/topology/webbed/component/split")
    assert len(comp["executorStats"]) == 2
    assert post(api + "/topology/webbed/deactivate")[0] == 200
    assert next(r for r in c.call("list") if r["name"] == "webbed")["active"] is False
    # an operator's own UI process, talking to nimbus through its API (Storm's `storm ui`)
    ui = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "ui", "--port", "0", "--nimbus",
         f"127.0.0.1:{c.api}"],
        env=c.env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = ui.stdout.readline()
        assert line.startswith(f"web UI of tcp://127.0.0.1:{c.api}: http://127.0.0.1:"), line
        own = entered(line.split(": ", 1)[1].split()[0]) + "/api/v1"
        _, tops = get(own + "/topology/summary")
        assert [r["id"] for r in tops["topologies"]] == ["webbed"]
    finally:
        ui.terminate()
        assert ui.wait(30) == 0
    # Storm's UI rebalances with no body: onto the workers it has, spread again (it was a
    # 400); a wait that is not seconds up to Storm's i32 is a 400
    assert post(api + "/topology/webbed/kill/inf")[0] == 400
    assert post(api + "/topology/webbed/rebalance/1e300")[0] == 400

    def pids() -> set:
        row = next(r for r in c.call("list") if r["name"] == "webbed")
        return {w.get("pid") for w in row["worker_status"]} if row["status"] == "running" else set()

    poll_for(lambda: None not in pids() and len(pids()) == 2, 60, 0.2, "the workers' pids")
    old = pids()
    assert post(api + "/topology/webbed/rebalance/0")[0] == 200
    poll_for(lambda: len(pids()) == 2 and not pids() & old and None not in pids(), 90, 0.2,
             "the rebalanced workers running")  # fmt: skip
    row = next(r for r in c.call("list") if r["name"] == "webbed")
    assert (row["workers"], row["active"]) == (2, False)
    assert post(api + "/topology/webbed/kill/0")[0] == 200
    c.wait_status("webbed", "killed")
    assert get(api + "/topology/ghost")[0] == 404


class Talker(BasicBolt):
    """Prints and logs now and then, as user code does."""

    outputs = ["sentence"]

    def prepare(self, conf, context):
        import logging

        self.n = 0
        self.log = logging.getLogger("talker")

    def execute(self, tup):
        self.n += 1
        if self.n % 200 == 0:
            print(f"talker says {self.n}")
            self.log.warning("talker logs %d", self.n)
        self.emit(tup.values)


class Quiet(BasicBolt):
    def execute(self, tup):
        if tup.values[0] == SENTENCES[0]:
            print("quiet says hello")


def test_stormish_logs_fetches_tagged_worker_logs_from_the_supervisors(cluster):
    """Worker logs live with their supervisor (a file per topology and
    worker, a separator per start); `stormish logs` fetches them through nimbus, every
    line tagged with its worker and, for code of a task, its component and task;
    --component and --worker filter, --follow keeps printing."""
    nimbus = f"127.0.0.1:{cluster.api}"
    t = Topology("chatty", config={"topology.workers": 2})
    t.set_spout("s", ListSpout([[s] for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("talker", Talker(), parallelism=2).shuffle_grouping("s")
    t.set_bolt("quiet", Quiet()).shuffle_grouping("talker")
    cluster.call("submit", (t, {}))
    cluster.wait_status("chatty", "complete")

    def cli(*args):
        out = subprocess.run(
            [sys.executable, "-m", "stormish.cli", "logs", "chatty", *args, "--nimbus", nimbus],
            env=cluster.env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout

    everything = cli()
    assert everything.count("==> worker ") == 2  # a log per worker, on its supervisor
    assert everything.count("=== ") == 2 and " started: pid " in everything
    said = re.findall(r"^\[talker:(\d+)\] talker says \d+$", everything, re.M)
    logged = re.findall(
        r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} WARNING worker chatty/\d \[talker:(\d+)\] "
        r"talker: talker logs \d+$",
        everything,
        re.M,
    )
    assert len(said) == len(logged) == len(SENTENCES) // 200, everything[-2000:]
    assert "[quiet:" in everything and "quiet says hello" in everything
    only = cli("--component", "quiet")
    assert "quiet says hello" in only and "talker" not in only
    quiet_worker = re.search(r"worker chatty/(\d) \[quiet:", everything) or re.search(
        r"==> worker (\d) on s\d <==\n(?:.*\n)*?\[quiet:", everything
    )
    assert quiet_worker is not None
    one = cli("--worker", "0")
    assert one.count("==> worker ") == 1 and "==> worker 0 on " in one
    bad = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "logs", "ghost", "--nimbus", nimbus],
        env=cluster.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "no topology 'ghost'" in bad.stderr
    # a misspelt component printed the workers' headers and exited 0 (a walk-through)
    typo = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "logs", "chatty", "--component", "quite",
         "--nimbus", nimbus],
        env=cluster.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert typo.returncode == 2, typo
    said = "error: topology 'chatty' has no component 'quite' (its components: quiet, s, talker)"
    assert said in typo.stderr


def test_stormish_logs_follow_prints_what_running_workers_write(cluster):
    nimbus = f"127.0.0.1:{cluster.api}"
    t = Topology("following", config={"topology.workers": 2})
    t.set_spout("s", ListSpout([[s] for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("slow", Slow(), parallelism=2).shuffle_grouping("s")
    t.set_bolt("talker", Talker(), parallelism=2).shuffle_grouping("slow")
    cluster.call("submit", (t, {}))
    cluster.wait_status("following", "running")
    follow = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "logs", "following", "--follow", "--every",
         "0.2", "--component", "talker", "--nimbus", nimbus],
        env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    seen = []
    try:
        for line in follow.stdout:  # a later round: lines tagged with worker@supervisor
            seen.append(line)
            if re.match(r"\[\d@s\d\] \[talker:\d+\] talker says \d+$", line):
                break
    finally:
        follow.terminate()
        follow.communicate(timeout=30)
    assert re.match(r"\[\d@s\d\] \[talker:\d+\] talker says \d+$", seen[-1]), seen
    assert not any("[slow:" in x for x in seen)
    cluster.call("kill", ("following", 0))
    cluster.wait_status("following", "killed")


def _cli(cluster, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stormish.cli", *args, "--nimbus", f"127.0.0.1:{cluster.api}"],
        env=cluster.env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


WORDCOUNT = os.path.join(os.path.dirname(__file__), "..", "..", "topologies", "wordcount.py")


def test_submit_json_prints_one_json_document_on_stdout(cluster):
    """`submit --json` to a nimbus: stdout is JSON alone, what a person reads goes to
    stderr. Without --wait it says what was submitted; with --wait, the final
    statistics (as `run --json`)."""
    poll_for(lambda: len(cluster.call("supervisors")) == 2, 30, 0.1, "both supervisors")
    out = _cli(cluster, "submit", WORDCOUNT, "-w", "2", "--json")
    assert out.returncode == 0, out.stderr
    sent = json.loads(out.stdout)
    assert sent["submitted"] == "wordcount" and sent["nimbus"] == f"tcp://127.0.0.1:{cluster.api}"
    assert sent["workers"] == 2 and sent["status"] in ("starting", "running"), sent
    assert sent["waiting"] is None and sent["active"] is True
    assert "submitted topology 'wordcount' to nimbus" in out.stderr
    cluster.wait_status("wordcount", "complete")
    out = _cli(cluster, "submit", WORDCOUNT, "-w", "2", "--wait", "--timeout", "60", "--json")
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout)
    assert stats["name"] == "wordcount" and stats["status"] == "complete", stats
    assert stats["components"]["count"]["executed"] > 0
    assert "submitted topology 'wordcount' to nimbus" in out.stderr


def test_a_starting_topology_can_be_deactivated_activated_and_killed(cluster):
    """A topology waiting for slots (it wants 5 of 4) is starting: deactivate and
    activate work as in Storm (they set what its spouts do once its workers run), kill
    ends it, and once ended `list` no longer says it waits for slots."""
    poll_for(lambda: len(cluster.call("supervisors")) == 2, 30, 0.1, "both supervisors")
    out = _cli(cluster, "submit", WORDCOUNT, "-w", "5")
    assert out.returncode == 0 and "waiting for 1 free worker slot" in out.stderr, out.stderr
    out = _cli(cluster, "deactivate", "wordcount")
    assert out.returncode == 0, out.stderr
    assert "deactivated topology 'wordcount': its workers start with their spouts inactive" in (
        out.stdout
    )
    row = json.loads(_cli(cluster, "list", "--json").stdout)["topologies"][0]
    assert (row["status"], row["active"]) == ("starting", False), row
    out = _cli(cluster, "activate", "wordcount")
    assert out.returncode == 0, out.stderr
    assert "activated topology 'wordcount': its spouts emit once its workers run" in out.stdout
    assert next(r for r in cluster.call("list") if r["name"] == "wordcount")["active"] is True
    out = _cli(cluster, "kill", "wordcount")
    assert out.returncode == 0, out.stderr
    cluster.wait_status("wordcount", "killed")
    listed = _cli(cluster, "list")
    assert re.search(r"^wordcount\s+killed\s+5 workers", listed.stdout, re.M), listed.stdout
    assert "waiting for" not in listed.stdout, listed.stdout
    row = json.loads(_cli(cluster, "list", "--json").stdout)["topologies"][0]
    assert row["waiting"] is None, row
    out = _cli(cluster, "activate", "wordcount")
    assert out.returncode == 2 and "'wordcount' is killed: it no longer runs" in out.stderr


def test_a_topology_deactivated_while_starting_runs_inactive_until_activated(cluster):
    """Deactivated while it waits for slots, then given fewer workers: its workers start
    with their spouts not opened (`list` says inactive, nothing is emitted) until
    `activate`, and then it completes."""
    poll_for(lambda: len(cluster.call("supervisors")) == 2, 30, 0.1, "both supervisors")
    out = _cli(cluster, "submit", WORDCOUNT, "-w", "5")
    assert out.returncode == 0 and "waiting for 1 free worker slot" in out.stderr, out.stderr
    assert _cli(cluster, "deactivate", "wordcount").returncode == 0
    assert _cli(cluster, "rebalance", "wordcount", "-n", "4").returncode == 0
    cluster.wait_status("wordcount", "running")

    def spouts() -> list:
        stats = cluster.call("stats", "wordcount")
        return [t for t in stats.tasks.values() if t.kind == "spout"]

    poll_for(spouts, 30, 0.1, "the spout's statistics")
    assert all(t.active is False and t.emitted == 0 for t in spouts())
    listed = _cli(cluster, "list").stdout
    assert re.search(r"^wordcount\s+inactive\s+4 workers", listed, re.M), listed
    out = _cli(cluster, "activate", "wordcount")
    assert out.returncode == 0 and "activated topology 'wordcount': its spouts emit\n" in (
        out.stdout
    )
    cluster.wait_status("wordcount", "complete")
    assert cluster.call("stats", "wordcount").components["count"].executed > 0


def test_a_running_topology_rebalanced_past_the_free_slots_waits_and_comes_back(cluster):
    """A running topology on 2 of 4 slots: `deactivate` shows it inactive in `list`;
    `rebalance -n 5` says it waits for a slot, `list` and `monitor` show why, and
    `rebalance -n 2` brings it back to running on 2 workers."""
    endless = Topology("endless", config={"topology.workers": 2})
    endless.set_spout("s", CountingSpout(10**12, per_call=10))
    endless.set_bolt("null", Null()).shuffle_grouping("s")
    poll_for(lambda: len(cluster.call("supervisors")) == 2, 30, 0.1, "both supervisors")
    cluster.call("submit", (endless, {}))
    cluster.wait_status("endless", "running")
    assert _cli(cluster, "deactivate", "endless").returncode == 0
    listed = _cli(cluster, "list").stdout
    assert re.search(r"^endless\s+inactive\s+2 workers", listed, re.M), listed
    assert _cli(cluster, "activate", "endless").returncode == 0
    assert re.search(r"^endless\s+running\s+2 workers", _cli(cluster, "list").stdout, re.M)
    out = _cli(cluster, "rebalance", "endless", "-n", "5", "--wait", "0")
    assert out.returncode == 0, out.stderr
    assert "rebalancing topology 'endless' onto 5 workers" in out.stdout
    warned = (
        "topology 'endless': 5 workers wanted, but at most 4 worker slots can be free for it "
        "(4 offered by 2 supervisors, 0 held by other topologies): its workers stop now"
    )
    assert out.stderr.index(warned) < out.stderr.index("waiting for 1"), out.stderr
    why = "waiting for 1 free worker slot: it needs 5 and has 4; 0 free of 4 on 2 supervisors"
    assert why in out.stderr, out.stderr
    assert cluster.status("endless") == "starting"
    assert f"  {why}" in _cli(cluster, "list").stdout
    monitor = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "monitor", "endless", "--every", "0.2",
         "--nimbus", f"127.0.0.1:{cluster.api}"],
        env=cluster.env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        first = monitor.stdout.readline()
        assert first.startswith(f"endless [starting] {why}"), first
    finally:
        monitor.kill()
        monitor.communicate(timeout=30)
    out = _cli(cluster, "rebalance", "endless", "-n", "2")
    assert out.returncode == 0 and "waiting" not in out.stderr, out.stderr
    cluster.wait_status("endless", "running")
    row = next(r for r in cluster.call("list") if r["name"] == "endless")
    assert row["waiting"] is None and row["workers"] == 2 and len(row["slots"]) == 2, row
    # the moved workers report their components once they run: until then "null" is absent
    poll_for(lambda: executed(cluster.call("stats", "endless"), "null") > 0, 30, 0.1)
    cluster.call("kill", ("endless", 0))
    cluster.wait_status("endless", "killed")
    poll_for(lambda: not cluster.workers(), 30, 0.1, "the workers gone")


@pytest.mark.parametrize(
    ("offsets", "most", "says"),
    [
        ({"0@s0": -5}, 1000, "offset '0@s0': -5 is not a byte offset"),
        ({"0@s0": "x"}, 1000, "offset '0@s0': 'x' is not a byte offset"),
        ({"0@s0": [1, -2]}, 1000, "is not a byte offset >= 0 or [inode, offset]"),
        ({}, -1, "'most' must be a number of bytes from 1"),
    ],
)
def test_a_bad_logs_request_is_refused_and_no_supervisor_dies(cluster, offsets, most, says):
    """A negative or odd offset went through nimbus to the supervisors, whose read raised
    in their loop: the supervisor exited 1 and SIGTERMed every worker it ran (found by
    a bug hunt). Nimbus refuses it, naming the field."""
    from stormish.cluster.api import LogsRequest

    t = Topology("bad-logs", config={"topology.workers": 2})
    t.set_spout("s", CountingSpout(10**12, per_call=10))
    t.set_bolt("null", Null()).shuffle_grouping("s")
    cluster.call("submit", (t, {}))
    cluster.wait_status("bad-logs", "running")
    poll_for(lambda: len(cluster.workers()) == 2, 30, 0.1, "two workers")
    with pytest.raises(StormishError, match=re.escape(says)):
        cluster.call("logs", LogsRequest("bad-logs", 0, offsets, most))
    rid = cluster.call("logs", LogsRequest("bad-logs", 0, {}, 1000))  # a good one still works
    poll_for(lambda: cluster.call("logs_result", rid)["done"], 30, 0.1, "the logs answer")
    assert [s.poll() for s in cluster.supervisors] == [None, None]
    cluster.call("kill", ("bad-logs", 0))


def _endless(name: str) -> Topology:
    t = Topology(name, config={"topology.workers": 2})
    t.set_spout("s", CountingSpout(10**12, per_call=10))
    t.set_bolt("null", Null()).shuffle_grouping("s")
    return t


def _row(cluster, name: str) -> dict:
    return next(r for r in cluster.call("list") if r["name"] == name)


def test_a_kill_with_a_wait_survives_a_nimbus_restart(cluster):
    """The kill's wait was kept in nimbus's memory only: restarted during it, nimbus
    restored the topology running and active, for good (found by a bug hunt). It is
    saved: the new nimbus finishes the kill, the spouts staying off meanwhile."""
    cluster.call("submit", (_endless("kw"), {}))
    cluster.wait_status("kw", "running")
    cluster.call("kill", ("kw", 4))
    assert _row(cluster, "kw")["killing"] and not _row(cluster, "kw")["active"]
    cluster.stop_nimbus()
    cluster.start_nimbus()
    poll_for(lambda: _row(cluster, "kw") is not None, 30, 0.2, "the restored topology")
    row = _row(cluster, "kw")
    assert row["status"] == "killed" or (row["killing"] and not row["active"]), row
    cluster.wait_status("kw", "killed", timeout=30)


class ReliableCounting(Spout):
    """Emits 0, 1, 2, ... each a tree of its own, for good."""

    outputs = ["n"]

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        self.n += 1
        self.emit([self.n], msg_id=self.n)


class Sluggish(BasicBolt):
    def execute(self, tup):
        import time

        time.sleep(0.005)  # trees stay in flight: what the rebalance's wait lets complete


def _reliable(name: str) -> Topology:
    t = Topology(
        name, config={"topology.workers": 2, "topology.max.spout.pending": 20,
                      "topology.message.timeout.secs": 60}
    )  # fmt: skip
    t.set_spout("s", ReliableCounting())
    t.set_bolt("slow", Sluggish(), parallelism=2).shuffle_grouping("s")
    return t


def _spout(cluster, name: str):
    stats = cluster.call("stats", name)
    return stats.components.get("s")


def _acked(cluster, name: str) -> int:
    s = _spout(cluster, name)
    return 0 if s is None else s.acked


def test_a_rebalance_waits_with_its_spouts_deactivated_until_the_trees_in_flight_complete(
    cluster,
):
    """Storm's rebalance deactivates the spouts for its wait (-w, by default the message
    timeout), then restarts the workers, then restores the spouts: here the workers
    stopped at once, and every tree in flight was lost with them."""
    cluster.call("submit", (_reliable("rw"), {}))
    cluster.wait_status("rw", "running")
    poll_for(lambda: _acked(cluster, "rw") > 50, 30, 0.1, "acked trees")
    out = _cli(cluster, "rebalance", "rw", "-n", "1", "--wait", "6")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (
        "rebalancing topology 'rw' onto 1 workers: spouts deactivated, workers restart in 6s\n"
    )
    assert re.search(r"^rw\s+rebalancing\s+2 workers", _cli(cluster, "list").stdout, re.M)
    for verb in ("activate", "deactivate"):
        with pytest.raises(StormishError, match="'rw' is rebalancing onto 1 workers"):
            cluster.call(verb, "rw")
    with pytest.raises(StormishError, match="'rw' is rebalancing"):
        cluster.call("rebalance", ("rw", 2, 0))

    def drained():
        s = _spout(cluster, "rw")
        return s is not None and s.emitted == s.acked and _row(cluster, "rw")["rebalancing"]

    poll_for(drained, 5, 0.05, "every tree acked before the workers stop")
    assert _spout(cluster, "rw").failed == 0
    cluster.wait_status("rw", "starting", timeout=30)
    cluster.wait_status("rw", "running", timeout=60)
    row = _row(cluster, "rw")
    assert row["workers"] == 1 and row["active"] and not row["rebalancing"], row
    poll_for(lambda: _acked(cluster, "rw") > 0, 30, 0.1, "the new plan's trees")
    cluster.call("kill", ("rw", 0))
    cluster.wait_status("rw", "killed")


def test_a_rebalance_keeps_a_deactivated_topology_deactivated(cluster):
    """Storm restores the status a topology had before the rebalance."""
    cluster.call("submit", (_endless("rd"), {}))
    cluster.wait_status("rd", "running")
    cluster.call("deactivate", "rd")
    assert cluster.call("rebalance", ("rd", 1, 0.5)) == 0.5
    poll_for(lambda: _row(cluster, "rd")["workers"] == 1, 30, 0.1, "the new plan")
    cluster.wait_status("rd", "running")
    assert _row(cluster, "rd")["active"] is False
    listed = _cli(cluster, "list").stdout
    assert re.search(r"^rd\s+inactive\s+1 workers", listed, re.M), listed
    cluster.call("kill", ("rd", 0))
    cluster.wait_status("rd", "killed")


def test_a_rebalance_with_a_wait_survives_a_nimbus_restart_and_a_kill_ends_it(cluster):
    """The wait is saved as the kill's is: a nimbus restarted during it finishes the
    rebalance (the spouts stay off meanwhile, and are on again after it). A kill
    during the wait wins over the rebalance."""
    cluster.call("submit", (_endless("rn"), {}))
    cluster.wait_status("rn", "running")
    assert cluster.call("rebalance", ("rn", 1, 3)) == 3
    cluster.stop_nimbus()
    cluster.start_nimbus()
    poll_for(lambda: _row(cluster, "rn") is not None, 30, 0.2, "the restored topology")
    row = _row(cluster, "rn")
    assert row["workers"] == 1 or (row["rebalancing"] and not row["active"]), row
    poll_for(lambda: _row(cluster, "rn")["workers"] == 1, 30, 0.1, "the new plan")
    cluster.wait_status("rn", "running")
    assert _row(cluster, "rn")["active"] is True
    cluster.call("rebalance", ("rn", 2, 30))
    cluster.call("kill", ("rn", 0))
    cluster.wait_status("rn", "killed", timeout=30)
    assert _row(cluster, "rn")["workers"] == 1  # the rebalance never ran


def test_a_topology_being_killed_refuses_activate_and_rebalance(cluster):
    """Storm shows KILLED during a kill's wait and refuses activate and rebalance: here
    activate reopened the spouts of a topology being killed (found by a bug hunt)."""
    from stormish.cluster.api import Rebalance

    cluster.call("submit", (_endless("kr"), {}))
    cluster.wait_status("kr", "running")
    cluster.call("kill", ("kr", 30))
    for verb, payload in (("activate", "kr"), ("rebalance", Rebalance("kr", 1))):
        with pytest.raises(StormishError, match="'kr' is being killed"):
            cluster.call(verb, payload)
    assert not _row(cluster, "kr")["active"]
    cluster.call("kill", ("kr", 0))  # killed again: the sooner end holds
    cluster.wait_status("kr", "killed", timeout=30)


def test_kill_waits_the_message_timeout_by_default_as_storm_kill_does(cluster):
    """`storm kill` waits topology.message.timeout.secs unless told -w: trees in flight
    complete. It stopped the workers at once."""
    t = _endless("kd")
    t.config["topology.message.timeout.secs"] = 3
    cluster.call("submit", (t, {}))
    cluster.wait_status("kd", "running")
    out = _cli(cluster, "kill", "kd")
    assert out.returncode == 0, out.stderr
    assert "workers stop in 3s (its message timeout; --wait 0 stops them now)" in out.stdout
    assert _row(cluster, "kd")["killing"]
    cluster.wait_status("kd", "killed", timeout=30)
