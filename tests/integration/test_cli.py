"""The command line, run as a user runs it: a real subprocess, exit codes and output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from stormish.cli import main

ROOT = Path(__file__).resolve().parents[2]


def stormish(*args: str, cwd: Path = ROOT, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stormish.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_run_wordcount_writes_documented_stats(tmp_path):
    out = tmp_path / "stats.json"
    r = stormish(
        "run", "topologies/wordcount.py", "--stats-json", str(out), "--profile", "balanced"
    )
    assert r.returncode == 0, r.stderr
    assert "topology 'wordcount': complete" in r.stdout
    data = json.loads(out.read_text())
    assert data["schema"] == "stormish.statistics/1"
    assert data["status"] == "complete"
    count = data["components"]["count"]
    assert count["executed"] == 64_000 and count["failed"] == 0
    task = next(iter(data["tasks"].values()))
    for key in (
        "emitted",
        "transferred",
        "executed",
        "acked",
        "failed",
        "timed_out",
        "execute_latency_ms",
        "complete_latency_ms",
        "receive_population",
        "receive_capacity",
        "pending_emits",
        "backpressure_seconds",
        "dropped",
    ):
        assert key in task


def test_submit_without_nimbus_runs_locally_and_says_so():
    r = stormish("submit", "topologies/exclamation.py", "-c", "topology.acker.executors=0")
    assert r.returncode == 0, r.stderr
    assert "no nimbus configured" in r.stderr
    assert "complete" in r.stdout


def test_time_limit_stops_an_endless_topology(tmp_path):
    topo = tmp_path / "endless.py"
    topo.write_text(
        "from stormish import Spout, BasicBolt, Topology\n"
        "class S(Spout):\n    outputs=['x']\n    def next_tuple(self): self.emit([1])\n"
        "class B(BasicBolt):\n    def execute(self, t): pass\n"
        "topology = Topology('endless')\n"
        "topology.set_spout('s', S())\n"
        "topology.set_bolt('b', B()).shuffle_grouping('s')\n"
    )
    r = stormish("run", str(topo), "--time", "1")
    assert r.returncode == 0, r.stderr
    assert re.search(r"stopped by --time 1s \(ran 1\.\d\ds, 1 worker\)", r.stdout), r.stdout


BAD = {
    "missing.py": (None, "does not exist"),
    "broken.py": ("import nonexistent_module_xyz\n", "failed to import"),
    "empty.py": ("x = 1\n", "defines no module-level `topology`"),
    "unknown_source.py": (
        "from stormish import Topology\nfrom stormish.testing import ListSpout, CaptureBolt\n"
        "topology = Topology('t')\ntopology.set_spout('s', ListSpout([(1,)]))\n"
        "topology.set_bolt('b', CaptureBolt()).shuffle_grouping('nope')\n",
        "unknown component 'nope'",
    ),
    "unknown_field.py": (
        "from stormish import Topology\nfrom stormish.testing import ListSpout, CaptureBolt\n"
        "topology = Topology('t')\ntopology.set_spout('s', ListSpout([(1,)]))\n"
        "topology.set_bolt('b', CaptureBolt()).fields_grouping('s', ['zzz'])\n",
        "unknown field(s) ['zzz']",
    ),
    "duplicate.py": (
        "from stormish import Topology\nfrom stormish.testing import ListSpout\n"
        "topology = Topology('t')\ntopology.set_spout('s', ListSpout([(1,)]))\n"
        "topology.set_spout('s', ListSpout([(1,)]))\n",
        "duplicate component id 's'",
    ),
    "parallelism.py": (
        "from stormish import Topology\nfrom stormish.testing import ListSpout\n"
        "topology = Topology('t')\ntopology.set_spout('s', ListSpout([(1,)]), 0)\n",
        "parallelism must be an integer >= 1",
    ),
    "unpicklable.py": (
        "import threading\nfrom stormish import Topology\n"
        "from stormish.testing import ListSpout\n"
        "s = ListSpout([(1,)])\ns.lock = threading.Lock()\n"
        "topology = Topology('t')\ntopology.set_spout('src', s)\n",
        "attribute 'lock'",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_topology_files_are_named_and_exit_nonzero(tmp_path, name):
    body, message = BAD[name]
    path = tmp_path / name
    if body is not None:
        path.write_text(body)
    r = stormish("run", str(path))
    assert r.returncode == 2
    assert message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_a_stats_json_path_that_cannot_be_written_is_refused_before_the_run(tmp_path):
    """It ran the whole topology, then ended in a traceback (exit 1; first-hour walk)."""
    r = stormish("run", "topologies/wordcount.py", "--stats-json", str(tmp_path / "no" / "s.json"))
    assert r.returncode == 2, r.stderr
    assert "Invalid value for '--stats-json'" in r.stderr and "does not exist" in r.stderr
    assert "Traceback" not in r.stderr and "complete" not in r.stdout


def test_trees_that_timed_out_are_said_at_the_end_with_the_bolt_that_held_them(tmp_path):
    """A Bolt that forgets to ack: the run completes with every tree failed, and the
    summary said nothing of why (first-hour walk)."""
    path = tmp_path / "noack.py"
    path.write_text(
        "from stormish import Bolt, Spout, Topology\n"
        "class S(Spout):\n    outputs = ['n']\n    def open(self, conf, ctx): self.n = 0\n"
        "    def next_tuple(self):\n        if self.n < 30:\n"
        "            self.emit([self.n], msg_id=self.n); self.n += 1\n"
        "        else:\n            self.finish()\n"
        "class P(Bolt):\n    def execute(self, tup):\n        pass\n"
        "class Ticked(Bolt):\n    def execute(self, tup):\n"
        "        if not tup.is_tick: self.ack(tup)\n"
        "topology = Topology('t', config={'topology.message.timeout.secs': 1})\n"
        "topology.set_spout('src', S())\n"
        "topology.set_bolt('p', P()).shuffle_grouping('src')\n"
        "topology.set_bolt('ticked', Ticked()).shuffle_grouping('src')"
        ".add_configuration('topology.tick.tuple.freq.secs', 0.05)\n"
    )
    r = stormish("run", str(path))
    assert "note: 30 tuple trees timed out (topology.message.timeout.secs)" in r.stdout, r
    assert "'p' (executed 30, acked 0, failed 0): a Bolt must ack or fail" in r.stdout
    # tick tuples need no ack: a bolt that acked every tuple is not named (it was)
    assert "'ticked'" not in r.stdout.split("note:")[1]


def test_an_import_error_names_the_users_files_and_lines(tmp_path):
    """A topology file whose helper raises as it is imported: the files and lines it
    went through, the user's own only (it said the error alone, with neither; found by
    a first-hour walk-through); a topology error names the line that made it."""
    (tmp_path / "helper_bad.py").write_text("x = 1\ny = {}['missing']\n")
    path = tmp_path / "uses_helper.py"
    path.write_text("import os\nimport helper_bad\n")
    r = stormish("run", str(path))
    assert r.returncode == 2
    assert "failed to import at line 2: KeyError: 'missing'" in r.stderr, r.stderr
    assert f"at {path}:2: import helper_bad" in r.stderr, r.stderr
    assert f"at {tmp_path / 'helper_bad.py'}:2: y = {{}}['missing']" in r.stderr, r.stderr
    assert "importlib" not in r.stderr and "stormish/" not in r.stderr, r.stderr
    bad = tmp_path / "unknown_source.py"
    bad.write_text(BAD["unknown_source.py"][0] or "")
    r = stormish("run", str(bad))
    assert f"unknown component 'nope'; known: ['b', 's'] (at {bad}:5)" in r.stderr, r.stderr


@pytest.mark.parametrize(
    "override, message",
    [
        ("topology.executor.receive.buffer.size=0", "'topology.executor.receive.buffer.size'"),
        ("topology.bolt.wait.strategy=fancy", "unknown value 'fancy'"),
        ("topology.producer.batch.size=30000", "at most half"),
        ("topology.no.such.key=1", "unknown config key 'topology.no.such.key'"),
    ],
)
def test_bad_config_is_named(override, message):
    r = stormish("run", "topologies/wordcount.py", "-c", override)
    assert r.returncode == 2
    assert message in r.stderr, r.stderr


def test_unknown_profile_is_named():
    r = stormish("run", "topologies/wordcount.py", "--profile", "turbo")
    assert r.returncode == 2
    assert "unknown profile 'turbo'" in r.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_stops_cleanly_and_runs_cleanup(tmp_path, workers):
    """Ctrl-C as a terminal sends it: SIGINT to the whole process group. With worker
    processes they must leave it to their parent, which stops them and prints the summary:
    no KeyboardInterrupt traceback, no 'killed by signal', and exit 130 as Python and shell
    tools do on SIGINT (it exited 0, so a script could not tell an interrupted run from a
    complete one)."""
    import os
    import signal
    import time

    ready, cleaned = tmp_path / "ready", tmp_path / "cleaned"
    topo = tmp_path / "forever.py"
    topo.write_text(
        "from stormish import Spout, BasicBolt, Topology\n"
        "class S(Spout):\n    outputs=['x']\n"
        f"    def open(self, conf, ctx): open({str(ready)!r}, 'w').close()\n"
        "    def next_tuple(self): self.emit([1])\n"
        "class B(BasicBolt):\n    def execute(self, t): pass\n"
        f"    def cleanup(self): open({str(cleaned)!r}, 'w').close()\n"
        "topology = Topology('forever')\n"
        "topology.set_spout('s', S())\n"
        "topology.set_bolt('b', B()).shuffle_grouping('s')\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "run", str(topo), "-w", workers],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "topology never opened its spout"
            time.sleep(0.02)  # polling a file the spout writes, bounded by the deadline
        os.killpg(proc.pid, signal.SIGINT)  # the whole group, as Ctrl-C does
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, err
    assert "topology 'forever': interrupted" in out
    assert "KeyboardInterrupt" not in err and "killed by signal" not in err, err
    assert cleaned.exists()


def test_time_stops_on_purpose_with_exit_0_and_help_names_the_exit_codes(tmp_path):
    """`--time N` ends a run as asked: 0, not an interruption's 130."""
    topo = tmp_path / "forever.py"
    topo.write_text(
        "from stormish import Spout, BasicBolt, Topology\n"
        "class S(Spout):\n    outputs=['x']\n"
        "    def next_tuple(self): self.emit([1])\n"
        "class B(BasicBolt):\n    def execute(self, t): pass\n"
        "topology = Topology('forever')\n"
        "topology.set_spout('s', S())\n"
        "topology.set_bolt('b', B()).shuffle_grouping('s')\n"
    )
    r = stormish("run", str(topo), "--time", "1")
    assert r.returncode == 0, r.stderr
    helptext = " ".join(stormish("run", "--help").stdout.split())
    assert "130 interrupted (Ctrl-C, SIGINT)" in helptext
    assert "143 terminated (SIGTERM)" in helptext
    assert "0 complete or stopped by --time" in helptext


def test_worker_output_reaches_the_terminal_with_several_workers():
    one = stormish("run", "topologies/wordcount.py")
    two = stormish("run", "topologies/wordcount.py", "--workers", "2")
    assert one.returncode == two.returncode == 0, two.stderr

    def counts(out):  # "count: 13 words, top [...]" (ties make the top order vary; two
        # tasks' prints in one process may share a line)
        return sorted(re.findall(r"count: (\d+) words", out))

    assert counts(one.stdout) and counts(one.stdout) == counts(two.stdout)


AFTER_RUN = """
from stormish import Topology
from stormish.testing import CaptureBolt, ListSpout

topology = Topology("after", config={"topology.acker.executors": 0})
topology.set_spout("s", ListSpout([[i] for i in range(10)], fields=["n"]))
topology.set_bolt("c", CaptureBolt()).shuffle_grouping("s")


def after_run(stats):
    print("after_run:", stats.status, stats.components["c"].executed)
    FAIL
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_after_run_gets_the_final_statistics(tmp_path, workers):
    f = tmp_path / "after.py"
    f.write_text(AFTER_RUN.replace("FAIL", ""))
    out = stormish("run", str(f), "--workers", workers)
    assert out.returncode == 0, out.stderr
    assert "after_run: complete 10" in out.stdout


def test_a_failing_after_run_is_named_and_exits_non_zero(tmp_path):
    f = tmp_path / "after.py"
    f.write_text(AFTER_RUN.replace("FAIL", "raise RuntimeError('query failed')"))
    out = stormish("run", str(f))
    assert out.returncode == 1
    assert "error: after_run: RuntimeError: query failed" in out.stderr


def test_keys_are_written_once(tmp_path):
    out = stormish("keys", str(tmp_path / "k"))
    assert out.returncode == 0 and "cluster.key_secret" in out.stdout
    again = stormish("keys", str(tmp_path / "k"))
    assert again.returncode == 2 and "keys already exist" in again.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nimbus", "--insecure", "--host", "0.0.0.0"], "refusing to bind 'tcp://0.0.0.0:6627'"),
        (
            ["supervisor", "--insecure", "--nimbus", "h", "--host", "h", "--ports", "x"],
            "--ports 'x'",
        ),
        (["nimbus", "--keys", "/nonexistent"], "no cluster key in '/nonexistent'"),
        (["nimbus", "--host", "0.0.0.0", "--keys", "KEYS"], "give the host name they reach"),
        (["list", "--nimbus", "h:port"], "port 'port' is not a number"),
    ],
)
def test_daemons_refuse_bad_settings_by_name(args, message, tmp_path):
    stormish("keys", str(tmp_path / "keys"))
    args = [str(tmp_path / "keys") if a == "KEYS" else a for a in args]
    out = stormish(*args, "--data", str(tmp_path)) if args[0] == "nimbus" else stormish(*args)
    assert out.returncode == 2, out.stdout
    assert message in out.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_sensor_example_shows_each_edges_health_in_the_table_and_the_stats(tmp_path, workers):
    """topologies/sensor_latest.py: a `latest` edge with a deadline and a `drop_oldest`
    edge with a lifespan; the closing table has an edge section with the last reason,
    `--stats-json` the counters per edge and task, which add up."""
    out = tmp_path / "stats.json"
    r = stormish("run", "topologies/sensor_latest.py", "-w", workers, "--stats-json", str(out))
    assert r.returncode == 0, r.stderr
    assert re.search(r"control <- sensors:default +latest +40,000 ", r.stdout), r.stdout
    assert re.search(r"archive <- sensors:default +drop_oldest +40,000 ", r.stdout), r.stdout
    assert "control <- sensors:default: latest: " in r.stdout
    data = json.loads(out.read_text())
    for comp in ("control", "archive"):
        e = data["components"][comp]["edges"]["sensors:default"]
        lost = e["dropped"] + e["overwritten"] + e["rejected"]
        assert e["arrived"] == 40_000 == e["executed"] + lost + e["queued"]
        assert e["executed"] == data["components"][comp]["executed"]
        tasks = [t for t in data["tasks"].values() if t["component"] == comp]
        assert sum(t["edges"]["sensors:default"]["arrived"] for t in tasks) == 40_000
    control = data["components"]["control"]["edges"]["sensors:default"]
    assert control["overwritten"] > 0 and control["high_watermark"] == 1
    assert control["policy"] == {
        "overflow": "latest",
        "capacity": 1,
        "lifespan_ms": None,
        "deadline_ms": 20,
        "throttle": None,
    }


def test_plan_and_lint_explain_a_topology_without_running_it(tmp_path):
    """`stormish plan` (text and --json) and `stormish lint`: exit 0 with warnings, 1 with
    --strict, 2 with the named error of a topology that would not submit."""
    r = stormish("plan", "topologies/ledger.py", "-w", "2")
    assert r.returncode == 0, r.stderr
    assert "edge apply <- transfers:default: lanes(account), ordered lanes: 64 lanes" in r.stdout
    assert "(crosses workers)" in r.stdout
    r = stormish("plan", "topologies/sensor_latest.py", "--json")
    data = json.loads(r.stdout)
    assert {e["name"] for e in data["edges"]} == {
        "control <- sensors:default",
        "archive <- sensors:default",
    }
    risky = tmp_path / "risky.py"
    risky.write_text(
        "from stormish import Topology\n"
        "from stormish.testing import CaptureBolt, ListSpout\n"
        "topology = Topology('risky')\n"
        "topology.set_spout('s', ListSpout([(1,)]))\n"
        "topology.set_bolt('b', CaptureBolt()).shuffle_grouping('s', overflow='latest')\n"
    )
    r = stormish("lint", str(risky))
    assert (
        r.returncode == 0 and "warning: b <- s:default: overflow='latest' under acking" in r.stdout
    )
    assert stormish("lint", str(risky), "--strict").returncode == 1
    bad = tmp_path / "bad.py"
    bad.write_text(risky.read_text().replace("overflow='latest'", "overflow='lastest'"))
    r = stormish("lint", str(bad))
    assert r.returncode == 2 and "overflow='lastest' is not a policy" in r.stderr
    assert stormish("lint", "topologies/ledger.py").returncode == 0


PROFILED = """
from stormish import BasicBolt, Spout, Topology


class Once(Spout):
    outputs = ["n"]

    def open(self, conf, context):
        print("flush every", conf["topology.batch.flush.interval.millis"], "ms")

    def next_tuple(self):
        self.emit([1])
        self.finish()


class Sink(BasicBolt):
    def execute(self, tup):
        pass


t = Topology("profiled")
t.set_spout("once", Once())
t.set_bolt("sink", Sink()).shuffle_grouping("once")
topology = t
"""


def wheel_venv(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The project's wheel installed in a fresh venv of its own (no system site-packages),
    and an environment whose PYTHONPATH offers the dependencies already installed here,
    without this checkout's editable stormish: so `import stormish` is the wheel's.
    Offline: nothing is downloaded but the wheel's build backend, as `pip wheel` does."""
    import venv

    wheel_dir = tmp_path / "wheel"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(wheel_dir), str(ROOT)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    (whl,) = wheel_dir.glob("stormish-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "-q", str(whl)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    deps = tmp_path / "deps"  # site-packages here, less stormish
    deps.mkdir()
    for site in {p for p in sys.path if p.endswith("site-packages")}:
        for entry in Path(site).iterdir():
            name = entry.name.lower()
            if "stormish" in name or name.endswith(".pth") or (deps / entry.name).exists():
                continue
            (deps / entry.name).symlink_to(entry)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(deps)
    env.pop("VIRTUAL_ENV", None)
    return env_dir, env


def test_profiles_ship_in_the_wheel_and_work_from_anywhere(tmp_path):
    """The built-in profiles are package data: the wheel, installed in a
    venv of its own, runs `--profile low-cpu` from a directory that is not a checkout; a
    user's workers/profiles/NAME.json there wins; an unknown name lists what is known."""
    import zipfile

    env_dir, env = wheel_venv(tmp_path)
    (whl,) = (tmp_path / "wheel").glob("stormish-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    for p in ("low-latency", "balanced", "low-cpu"):
        assert f"stormish/profiles/{p}.json" in names
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    topo = elsewhere / "profiled.py"
    topo.write_text(PROFILED)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(env_dir / "bin" / "stormish"), "run", str(topo), *args],
            cwd=elsewhere, env=env, capture_output=True, text=True, timeout=90,
        )  # fmt: skip

    where = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", "import stormish; print(stormish.__file__)"],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert where.stdout.startswith(str(env_dir)), where  # the wheel's, not the checkout's
    r = run("--profile", "low-cpu")
    assert r.returncode == 0, r.stderr
    assert "flush every 5 ms" in r.stdout  # low-cpu's flush interval reached the spout
    assert "flush every 5 ms" not in run().stdout
    mine = elsewhere / "workers" / "profiles"
    mine.mkdir(parents=True)
    (mine / "low-cpu.json").write_text('{"topology.workers": "two"}')
    r = run("--profile", "low-cpu")
    assert r.returncode == 2 and "topology.workers" in r.stderr  # the user's file was read
    r = run("--profile", "nope")
    assert r.returncode == 2
    assert "known profiles: ['balanced', 'low-cpu', 'low-latency']" in r.stderr


@pytest.mark.parametrize(
    "command", [["list"], ["kill", "x"], ["submit", "topologies/wordcount.py"]]
)
def test_a_cluster_command_without_a_nimbus_fails_fast_and_says_what_it_tried(command):
    """Not 30 s of silence. The default is 2 s (a generous bound here:
    the point is seconds, not half a minute), --connect-timeout changes it."""
    import socket
    import time

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    r = stormish(*command, "--nimbus", f"127.0.0.1:{port}")
    took = time.monotonic() - t0
    assert r.returncode == 2
    assert f"no answer from a nimbus at tcp://127.0.0.1:{port} within 2s" in r.stderr
    assert "tries)" in r.stderr and "This client has no keys" in r.stderr
    assert "--connect-timeout" in r.stderr
    assert took < 15, took
    r = stormish(*command, "--nimbus", f"127.0.0.1:{port}", "--connect-timeout", "0.3")
    assert r.returncode == 2 and "within 0.3s (1 try" in r.stderr


def test_an_unpicklable_component_is_named_the_same_way_locally_and_to_a_nimbus(tmp_path):
    """`submit --nimbus` checks before sending, as `run` does: exit 2 and
    the attribute named, no raw traceback (the nimbus address need not even answer)."""
    topo = tmp_path / "lock.py"
    topo.write_text(
        "import threading\n"
        "from stormish import BasicBolt, Topology\n"
        "from stormish.testing import ListSpout\n"
        "class B(BasicBolt):\n"
        "    def __init__(self): self.lock = threading.Lock()\n"
        "    def execute(self, t): pass\n"
        "topology = Topology('lock')\n"
        "topology.set_spout('s', ListSpout([(1,)]))\n"
        "topology.set_bolt('b', B()).shuffle_grouping('s')\n"
    )
    local = stormish("run", str(topo))
    remote = stormish("submit", str(topo), "--nimbus", "127.0.0.1:1")
    for r in (local, remote):
        assert r.returncode == 2, r.stderr
        assert "component 'b' cannot be pickled: attribute 'lock'" in r.stderr
        assert "Traceback" not in r.stderr


def test_keys_made_inside_a_git_checkout_warn_unless_ignored(tmp_path):
    """A secret key written into a checkout where git would commit it
    is named in a warning; ignored (as keys/ is in this project), or outside any
    checkout, nothing is said."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    r = stormish("keys", "cluster-keys", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert (
        "is inside a git checkout and not ignored: add cluster-keys/ to its .gitignore" in r.stderr
    )
    (repo / ".gitignore").write_text("/keys/\n")
    r = stormish("keys", "keys", cwd=repo)
    assert r.returncode == 0 and "warning" not in r.stderr
    outside = tmp_path / "plain"
    outside.mkdir()
    r = stormish("keys", "k", cwd=outside)
    assert r.returncode == 0 and "warning" not in r.stderr
    assert (
        subprocess.run(
            ["git", "-C", str(ROOT), "check-ignore", "-q", str(ROOT / "keys" / "x.key_secret")],
            timeout=30,
        ).returncode
        == 0
    )  # this project ignores its own keys/


def option_defaults(command: click.Command) -> list[tuple[str, str]]:
    """A command's options that have a default worth showing, as click shows it: not a
    flag (an off flag shows nothing), not unset or None or empty."""
    out = []
    for p in command.params:
        if not isinstance(p, click.Option) or p.hidden or p.is_flag or p.show_default is False:
            continue
        d = p.default
        if d is None or d == () or callable(d) or type(d).__name__ == "Sentinel":
            continue
        out.append((max(p.opts, key=len), str(d)))
    return out


def option_help(text: str, flag: str) -> str:
    """An option's row of a --help text, its wrapped lines joined."""
    options = text.split("Options:", 1)[1]
    m = re.search(r"^  (?:-\w, )?" + re.escape(flag) + r"\b(.*?)(?=^  -|\Z)", options, re.S | re.M)
    assert m, f"{flag} not in {options}"
    return " ".join(m.group(1).split())


def test_run_json_prints_the_statistics_for_scripts_and_help_shows_defaults():
    """`--json` gives the closing summary's data as JSON on stdout (the
    statistics' documented shape), and every command's --help shows its defaults."""
    import json

    out = stormish("run", "topologies/wordcount.py", "--json")
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout)
    assert stats["schema"] == "stormish.statistics/1" and stats["status"] == "complete"
    assert stats["ended"] == "complete"
    assert stats["components"]["count"]["executed"] == stats["components"]["split"]["emitted"]
    checked = 0
    for name, command in sorted(main.commands.items()):
        text = stormish(name, "--help").stdout
        for flag, default in option_defaults(command):
            help_of = option_help(text, flag)
            assert f"[default: {default}" in help_of, (name, flag, default, help_of)
            checked += 1
    assert checked >= 15  # nimbus, supervisor, logs, monitor, kill, run, ui, worker
    assert "-w, --workers" in stormish("run", "--help").stdout
    # kill and rebalance take Storm's -w for their wait (they have no workers option)
    assert "-w, --wait SECONDS" in stormish("kill", "--help").stdout


LOGGING_TOPOLOGY = """
import logging
from stormish import BasicBolt, Topology
from stormish.testing import ListSpout


class Noisy(BasicBolt):
    def execute(self, tup):
        logging.getLogger("noisy").debug("saw %s", tup.values[0])


t = Topology("noisy")
t.set_spout("s", ListSpout([["a"], ["b"]], fields=["x"]))
t.set_bolt("noisy", Noisy()).shuffle_grouping("s")
topology = t
"""


def test_run_log_level_formats_records_in_this_process_and_in_worker_processes(tmp_path):
    """`stormish run -v` (or --log-level) logs with time, level, worker
    and component:task, in process (1 worker) and in the worker processes (2)."""
    import re

    path = tmp_path / "noisy.py"
    path.write_text(LOGGING_TOPOLOGY)
    quiet = stormish("run", str(path))
    assert quiet.returncode == 0 and "saw " not in quiet.stderr  # DEBUG is not shown
    one = stormish("run", str(path), "-v")
    assert one.returncode == 0, one.stderr
    line = r"^\d{{4}}-\d\d-\d\d [\d:.]+ DEBUG {} \[noisy:\d+\] noisy: saw [ab]$"
    assert len(re.findall(line.format("run"), one.stderr, re.M)) == 2, one.stderr
    two = stormish("run", str(path), "--log-level", "debug", "-w", "2")
    assert two.returncode == 0, two.stderr
    assert len(re.findall(line.format(r"worker noisy/\d"), two.stderr, re.M)) == 2, two.stderr


def test_run_warns_of_a_bolt_nothing_feeds_before_the_run(tmp_path):
    """A forgotten grouping: the run completed with the bolt's row all zeros and no
    word of why."""
    path = tmp_path / "unfed.py"
    path.write_text(
        "from stormish import Topology\n"
        "from stormish.testing import CaptureBolt, ListSpout\n"
        "topology = Topology('unfed')\n"
        "topology.set_spout('s', ListSpout([(1,)]))\n"
        "topology.set_bolt('b', CaptureBolt())\n"
    )
    r = stormish("run", str(path))
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(
        "warning: bolt 'b' subscribes to no stream and gets no tick tuples: it never executes; "
        "give it a grouping (e.g. .shuffle_grouping('s'))\n"
    ), r.stderr


def test_without_a_terminal_trees_timing_out_are_warned_as_a_line(tmp_path):
    """The warning lived in the status line, shown on a terminal only: piped to a log,
    a run sat with trees timing out and said nothing until the summary (found by a
    walk-through)."""
    path = tmp_path / "slow.py"
    path.write_text(
        "import time\n"
        "from stormish import BasicBolt, Spout, Topology\n"
        "class S(Spout):\n    outputs = ['n']\n    def open(self, conf, ctx): self.n = 0\n"
        "    def next_tuple(self):\n        self.emit([self.n], msg_id=self.n); self.n += 1\n"
        "class Slow(BasicBolt):\n    def execute(self, tup):\n        time.sleep(0.05)\n"
        "topology = Topology('slow', config={'topology.message.timeout.secs': 1,"
        " 'topology.max.spout.pending': 100, 'topology.stats.interval.secs': 0.5,"
        " 'topology.executor.stuck.secs': 0})\n"
        "topology.set_spout('src', S())\n"
        "topology.set_bolt('b', Slow()).shuffle_grouping('src')\n"
    )
    r = stormish("run", str(path), "-w", "2", "--time", "3")  # the spout on its own thread
    assert "warning: topology 'slow': trees of src time out faster than they complete" in (
        r.stderr
    ), r.stderr
    assert r.stderr.count("time out faster") == 1  # said once, not at every look
