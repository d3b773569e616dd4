"""Worker processes forked from a run's fork server (`topology.worker.start`: fork).

Real runs on 127.0.0.1: the workers are forks (their parent is the fork server, not a
fresh interpreter), a worker killed with SIGKILL is seen dead with its signal and
restarted from the same server, the server is a fresh interpreter when this process has
threads, and `spawn` starts `python -m stormish.local.process` as before. Their keys:
tests/integration/test_hostile_peer.py."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
from collections import Counter

import psutil
import pytest

from stormish import LocalCluster, Topology, WorkerError
from stormish.local.forkserver import can_fork_here
from stormish.testing import ListSpout, poll_for

from .parts import Count, Split

pytestmark = pytest.mark.usefixtures("no_leaks")  # no process or socket left (conftest)

SENTENCES = ["the cat sat", "the dog ran", "a cat ran"] * 20
EXPECTED = Counter(w for s in SENTENCES for w in s.split())


def wordcount(name: str, start: str = "fork") -> Topology:
    t = Topology(name, config={"topology.worker.start": start})
    t.set_spout("s", ListSpout([[s] for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("split", Split(), parallelism=2).shuffle_grouping("s")
    t.set_bolt("count", Count(), parallelism=2).fields_grouping("split", ["word"])
    return t


def merged(results) -> Counter:
    total: Counter = Counter()
    for part in results["count"]:
        total.update(part)
    return total


def run(t: Topology, workers: int = 2) -> tuple[Counter, list[str], set[int]]:
    """The counts, a worker's command line and the workers' parents (seen running)."""
    with LocalCluster(workers=workers, config={"topology.acker.executors": 0}) as c:
        c.submit(t, active=False)
        running = c._get(t.name)
        procs = [psutil.Process(h.pid) for h in running.group.handles]
        parents = {p.ppid() for p in procs}
        cmdline = procs[0].cmdline()
        c.activate(t.name)
        c.wait_complete(t.name, timeout=60)
        return merged(running.results()), cmdline, parents


FORKED_RUN = """
import json, os, sys
import psutil
sys.path[:0] = [sys.argv[1]]
from stormish import LocalCluster
from stormish.local.forkserver import can_fork_here
from tests.integration.test_fork_start import merged, wordcount
assert can_fork_here(), "a fresh interpreter has one thread"
t = wordcount("forked")
out = {}
with LocalCluster(workers=3, config={"topology.acker.executors": 0}) as c:
    c.submit(t)
    running = c._get(t.name)
    server = running.group.forkserver
    out["forked"] = server is not None and server.forked
    out["server_parent_is_us"] = psutil.Process(server.pid).ppid() == os.getpid()
    out["workers_parent_is_server"] = [
        psutil.Process(h.pid).ppid() == server.pid for h in running.group.handles
    ]
    out["assigned"] = [h.assigned for h in running.group.handles]
    c.wait_complete(t.name, timeout=60)
    out["counts"] = dict(merged(running.results()))
out["server_gone"] = not psutil.pid_exists(server.pid)
# a group that fails to start leaves no fork server behind
bad = wordcount("bad-host")
bad.config["stormish.local.host"] = "0.0.0.0"  # no configured keys: refused
try:
    with LocalCluster(workers=2, config={"topology.acker.executors": 0}) as c:
        c.submit(bad)
    out["refused"] = None
except Exception as exc:
    out["refused"] = str(exc)
out["children_left"] = [p.name() for p in psutil.Process().children(recursive=True)]
print(json.dumps(out))
"""


def test_workers_are_forks_of_the_runs_fork_server_and_count_exactly():
    """In a process of one thread (as `stormish run` is) the fork server is a fork of
    that process. Run in a fresh interpreter: the test process may have threads of
    libraries other tests imported (pyarrow's allocator, a BLAS)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", FORKED_RUN, root], capture_output=True, text=True,
        timeout=90, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["forked"] and out["server_parent_is_us"]
    assert all(out["workers_parent_is_server"]) and len(out["workers_parent_is_server"]) == 3
    assert all(out["assigned"])  # the fork request carried its assignment: no assign asked
    assert Counter(out["counts"]) == EXPECTED
    assert out["server_gone"]  # ended and waited for with the run
    assert out["refused"] and "stormish.local.host" in out["refused"], out["refused"]
    assert out["children_left"] == []  # nothing of the refused group is left


def test_a_forked_worker_killed_with_sigkill_is_seen_dead_and_restarted():
    t = wordcount("killed")
    t.config["topology.acker.executors"] = 0
    with LocalCluster(workers=2) as c:
        c.submit(t, active=False)
        running = c._get("killed")
        h = running.group.handles[1]
        old = h.pid
        os.kill(old, signal.SIGKILL)  # as a user's kill -9: not through the handle
        poll_for(lambda: h.failure() is not None, timeout=10, what="the death seen")
        assert "killed by signal SIGKILL" in str(h.failure())
        with pytest.raises(WorkerError, match="SIGKILL"):
            running.check_failed()
        running.restart_worker(1)
        assert h.pid != old and h.alive()
        assert psutil.Process(h.pid).ppid() == running.group.forkserver.pid
        c.activate("killed")
        c.wait_complete("killed", timeout=60)


def test_a_killed_fork_server_fails_the_run_naming_the_server_and_leaves_no_worker():
    """kill -9 of a run's fork server: its workers are lost with it (they see their
    parent change and stop), and the run fails saying so. It said the worker had been
    killed by SIGKILL, which no one had done."""
    t = wordcount("server-killed")
    t.config["topology.acker.executors"] = 0
    with LocalCluster(workers=2) as c:
        c.submit(t, active=False)
        running = c._get("server-killed")
        server = running.group.forkserver
        workers = [psutil.Process(h.pid) for h in running.group.handles]
        os.kill(server.pid, signal.SIGKILL)
        with pytest.raises(WorkerError) as caught:
            poll_for(lambda: running.check_failed(), timeout=20, what="the failure seen")
        text = str(caught.value)
        assert f"is lost: its fork server (pid {server.pid}) was killed by signal SIGKILL" in text
        gone = lambda: not any(w.is_running() and w.status() != "zombie" for w in workers)  # noqa: E731
        poll_for(gone, timeout=20, what="the workers gone")


def test_with_threads_in_this_process_the_fork_server_is_a_fresh_interpreter():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        assert not can_fork_here()
        counts, _cmdline, parents = run(wordcount("threads"))
    finally:
        stop.set()
        t.join()
    assert counts == EXPECTED
    (server,) = parents
    assert server != os.getpid()  # a fork server, started as `python -m ...forkserver`


def test_spawn_starts_a_fresh_interpreter_per_worker():
    counts, cmdline, parents = run(wordcount("spawned", start="spawn"))
    assert counts == EXPECTED
    assert parents == {os.getpid()}
    assert "stormish.local.process" in cmdline


def test_a_forked_workers_print_and_traceback_reach_the_cli_user(tmp_path):
    topo = tmp_path / "loud.py"
    topo.write_text(
        "from stormish import BasicBolt, Topology\n"
        "from stormish.testing import ListSpout\n"
        "class Loud(BasicBolt):\n"
        "    def execute(self, tup):\n"
        "        print('heard', tup.values[0], flush=True)\n"
        "        if tup.values[0] == 'boom':\n"
        "            raise ValueError('bad word')\n"
        "topology = Topology('loud')\n"
        "topology.set_spout('s', ListSpout([['hi'], ['boom']], fields=['w']))\n"
        "topology.set_bolt('loud', Loud(), parallelism=2).shuffle_grouping('s')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(topo), "-w", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert p.returncode != 0
    out = p.stdout + p.stderr
    assert "heard hi" in out and "heard boom" in out
    assert "ValueError: bad word" in out and "Traceback" in out


ORPHAN_CHAIN = """
import os, sys, time
from stormish.local.forkserver import SERVER_NAME, WORKER_NAME, set_name
set_name(SERVER_NAME)
pid = os.fork()
if pid == 0:
    set_name(WORKER_NAME)
    time.sleep(60)  # a hung worker: it never looks at its parent
    os._exit(0)
print(pid, flush=True)
time.sleep(60)
"""


def test_a_forked_worker_is_an_orphan_once_its_fork_server_is_gone():
    """cluster/orphans.py: a process named stormish-worker is its supervisor's while its
    parent is a fork server whose parent runs; once the server is gone (its supervisor
    killed), a supervisor started on the port stops it."""
    from stormish.cluster import orphans

    server = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_CHAIN],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    worker = psutil.Process(int(server.stdout.readline()))
    try:
        poll_for(lambda: worker.name() == "stormish-worker", 10, what="the worker's name")
        assert orphans.orphaned_worker(worker) is None  # its server and owner (us) run
        server.kill()
        server.wait(10)
        poll_for(lambda: worker.ppid() != server.pid, 10, what="the worker reparented")
        assert orphans.orphaned_worker(worker) is not None
    finally:
        worker.kill()
        worker.wait(10)
        server.stdout.close()


DRAWS = """
import random

from stormish import BasicBolt, Topology
from stormish.testing import ListSpout

try:  # numpy's global generator too, where numpy is installed (the spark extra)
    import numpy as np
except ImportError:
    np = None

if np is not None:
    np.random.random()  # the module's draws seed both generators before the fork
random.random()


class Draws(BasicBolt):
    def prepare(self, conf, context):
        other = float(np.random.random()) if np is not None else "none"
        print("draws", random.random(), other, flush=True)

    def execute(self, tup):
        pass


topology = Topology("draws", config={"topology.acker.executors": 0})
topology.set_spout("s", ListSpout([["x"]], fields=["w"]), parallelism=2)
topology.set_bolt("d", Draws(), parallelism=2).shuffle_grouping("s")  # one a worker
"""


def test_forked_workers_do_not_share_their_random_draws(tmp_path):
    """`random` and numpy's global generator, seeded in the CLI before the fork, draw
    differently in each worker, as in spawned ones (one thread: numpy forks here)."""
    topo = tmp_path / "draws.py"
    topo.write_text(DRAWS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), OPENBLAS_NUM_THREADS="1")
    env["OMP_NUM_THREADS"] = "1"
    p = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(topo), "-w", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    draws = [ln.split("draws ", 1)[1].split() for ln in (p.stdout + p.stderr).splitlines()
             if "draws " in ln]  # fmt: skip
    assert len(draws) == 2, p.stdout + p.stderr
    assert draws[0][0] != draws[1][0]
    assert draws[0][1] == draws[1][1] == "none" or draws[0][1] != draws[1][1]


PARENT = os.getpid()


class Fussy(Split):
    """Refuses to be unpickled outside the test's process: a worker's assign fails."""

    def __init__(self):
        self.state = "some"  # an instance with no state is unpickled without __setstate__

    def __setstate__(self, state):
        if os.getpid() != PARENT:
            raise RuntimeError("fussy: not unpickled in a worker")
        self.__dict__.update(state)


def test_an_assign_that_fails_in_a_forked_worker_is_reported_as_before():
    """The fork request's assignment fails in the worker: its hello says `new`, the
    controller asks `assign`, and the error answer names the cause."""
    t = Topology("fussy", config={"topology.acker.executors": 0})
    t.set_spout("s", ListSpout([["a b"]], fields=["sentence"]))
    t.set_bolt("split", Fussy()).shuffle_grouping("s")
    with LocalCluster(workers=2) as c, pytest.raises(WorkerError, match="fussy: not unpickled"):
        c.submit(t)


TRACED = (
    "from stormish import BasicBolt, Topology\n"
    "from stormish.testing import ListSpout\n"
    "class Split(BasicBolt):\n"
    "    outputs = ['word']\n"
    "    def execute(self, tup):\n"
    "        for w in tup.values[0].split():\n"
    "            self.emit([w])\n"
    "class Count(BasicBolt):\n"
    "    def execute(self, tup):\n"
    "        pass\n"
    "topology = Topology('traced')\n"
    "topology.set_spout('s', ListSpout([['the cat sat'], ['a dog ran']], fields=['sentence']))\n"
    "topology.set_bolt('split', Split(), parallelism=3).shuffle_grouping('s')\n"
    "topology.set_bolt('count', Count(), parallelism=3).fields_grouping('split', ['word'])\n"
)


def test_the_start_trace_has_every_workers_steps_in_order(tmp_path):
    """STORMISH_START_TRACE: the timeline of a `-w 3` run (its three workers forked by
    one batch of requests), every process's steps in the order they must happen, and the
    command's own end (it leaves without the interpreter's teardown)."""
    topo, trace = tmp_path / "traced.py", tmp_path / "trace.txt"
    topo.write_text(TRACED)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env["STORMISH_START_TRACE"] = str(trace)
    p = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(topo), "-w", "3"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    lines = [line.split(" ", 2) for line in trace.read_text().splitlines()]
    by_pid: dict[str, list[str]] = {}
    for _, pid, event in lines:
        by_pid.setdefault(pid, []).append(event)
    cli = next(events for events in by_pid.values() if "cli: run" in events)
    order = ["cli: run", "planned", "workers spawned", "hellos in", "peers told"]
    order += ["workers started", "complete", "stopping", "workers exited", "cli: leaves"]
    assert [e for e in cli if e in order] == order
    assert "fork server ready" in {e for events in by_pid.values() for e in events}
    for w in range(3):
        mine = next(events for events in by_pid.values() if f"worker {w} forked" in events)
        steps = [f"worker {w} forked", f"worker {w} said hello (assigned)", f"worker {w} peers"]
        steps += [f"worker {w} start", f"worker {w} stop", f"worker {w} leaves"]
        assert [e for e in mine if e in steps] == steps


def test_the_cli_flushes_what_a_bolt_left_open_before_it_leaves(tmp_path):
    """The command leaves with os._exit (no teardown): a file a bolt wrote in `cleanup`
    and never closed (-w 1, in this process) still has what was written."""
    topo, out = tmp_path / "leaky.py", tmp_path / "leaked.txt"
    topo.write_text(
        "from stormish import BasicBolt, Topology\n"
        "from stormish.testing import ListSpout\n"
        "class Leaky(BasicBolt):\n"
        "    def prepare(self, conf, context):\n"
        f"        self.f = open({str(out)!r}, 'w')\n"
        "        self.n = 0\n"
        "    def execute(self, tup):\n"
        "        self.n += 1\n"
        "    def cleanup(self):\n"
        "        self.f.write(f'seen {self.n}')  # buffered, never closed\n"
        "topology = Topology('leaky')\n"
        "topology.set_spout('s', ListSpout([['a'], ['b'], ['c']], fields=['w']))\n"
        "topology.set_bolt('leaky', Leaky()).shuffle_grouping('s')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(topo), "--stats-json",
         str(tmp_path / "stats.json")],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert out.read_text() == "seen 3"
    assert json.loads((tmp_path / "stats.json").read_text())["status"].lower() == "complete"


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_a_process_with_over_1024_open_files_runs_worker_processes(start):
    """Its descriptors for the fork server's socket, the workers' pidfds and the run's
    pipe are past 1023, which select() refuses: the fork server died at once ("did not
    answer"), and the run's wait for completion raised."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard}: cannot open 1,100 files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # an app's sockets
    try:
        counts, _, _ = run(wordcount(f"many-files-{start}", start=start))
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert counts == EXPECTED
