"""Config keys the commands read: the daemons' timeouts (`-c`, `--config-file`, flags
win) and `topology.stats.interval.secs` for `stormish run`'s status line."""

from __future__ import annotations

import json
import sys
import threading
import types

import pytest
from click.testing import CliRunner

from stormish import cli
from stormish import cli_cluster as cc


@pytest.fixture
def daemons(monkeypatch, tmp_path):
    """The nimbus and supervisor commands up to the daemon they build (not served), in
    a directory of their own (nimbus makes its data directory and keys there)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STORMISH_KEYS", raising=False)
    made: dict[str, dict] = {}

    class Fake:
        id, ports = "fake", [6700]

        def __init__(self, role, *args, **kwargs):
            made[role] = kwargs

    import stormish.cluster.nimbus as nimbus_mod
    import stormish.cluster.supervisor as supervisor_mod

    monkeypatch.setattr(nimbus_mod, "Nimbus", lambda *a, **k: Fake("nimbus", *a, **k))
    monkeypatch.setattr(supervisor_mod, "Supervisor", lambda *a, **k: Fake("supervisor", *a, **k))
    monkeypatch.setattr(cc, "_serve", lambda daemon, banner: None)
    return made


def invoke(*args):
    return CliRunner().invoke(cli.main, list(args), catch_exceptions=False)


def test_nimbus_task_timeout_defaults_to_its_key(daemons):
    assert invoke("nimbus").exit_code == 0
    assert daemons["nimbus"]["supervisor_timeout"] == 30


def test_nimbus_task_timeout_from_c_and_config_file_flag_wins(daemons, tmp_path):
    assert invoke("nimbus", "-c", "nimbus.task.timeout.secs=7.5").exit_code == 0
    assert daemons["nimbus"]["supervisor_timeout"] == 7.5
    f = tmp_path / "nimbus.json"
    f.write_text(json.dumps({"nimbus.task.timeout.secs": 12}))
    assert invoke("nimbus", "--config-file", str(f)).exit_code == 0
    assert daemons["nimbus"]["supervisor_timeout"] == 12
    args = ["--config-file", str(f), "-c", "nimbus.task.timeout.secs=9"]
    assert invoke("nimbus", *args).exit_code == 0
    assert daemons["nimbus"]["supervisor_timeout"] == 9  # -c over the file
    assert invoke("nimbus", *args, "--task-timeout", "4").exit_code == 0
    assert daemons["nimbus"]["supervisor_timeout"] == 4  # the flag over both


def test_supervisor_worker_timeout_from_c_and_config_file_flag_wins(daemons, tmp_path):
    base = ["supervisor", "--nimbus", "127.0.0.1:6627", "--insecure"]
    assert invoke(*base).exit_code == 0
    assert daemons["supervisor"]["worker_timeout"] == 30
    assert invoke(*base, "-c", "supervisor.worker.timeout.secs=5").exit_code == 0
    assert daemons["supervisor"]["worker_timeout"] == 5
    f = tmp_path / "sup.json"
    f.write_text(json.dumps({"config": {"supervisor.worker.timeout.secs": 11}}))
    assert invoke(*base, "--config-file", str(f)).exit_code == 0
    assert daemons["supervisor"]["worker_timeout"] == 11
    assert invoke(*base, "--config-file", str(f), "--worker-timeout", "2").exit_code == 0
    assert daemons["supervisor"]["worker_timeout"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["nimbus", "-c", "supervisor.worker.timeout.secs=5"],
            "cannot be given to `stormish nimbus`",
        ),
        (["nimbus", "-c", "nimbus.task.timeout.secs=0"], "'nimbus.task.timeout.secs' (in -c)"),
        (["nimbus", "-c", "nimbus.task.timout.secs=3"], "did you mean 'nimbus.task.timeout.secs'"),
        (
            ["supervisor", "--nimbus", "x:1", "-c", "topology.workers=2"],
            "cannot be given to `stormish supervisor`",
        ),
        (["nimbus", "--config-file", "/no/such/file.json"], "config file '/no/such/file.json'"),
    ],
)
def test_a_daemon_key_problem_exits_2_naming_the_key(daemons, args, message):
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 2
    assert message in result.output
    assert not daemons


# -- topology.stats.interval.secs drives `stormish run`'s status line
class TTY:
    def __init__(self):
        self.lines = 0

    def isatty(self):
        return True

    def write(self, text):
        self.lines += text.startswith("\r")

    def flush(self):
        pass


class Running:
    """What `_watch` asks of a RunningTopology: a run that never completes."""

    name = "t"

    def __init__(self, interval):
        self.plan = types.SimpleNamespace(conf={"topology.stats.interval.secs": interval})
        self.gathered = 0
        self._never = threading.Event()

    def poll_complete(self, timeout):
        self._never.wait(timeout)  # blocks as the real one does, then says "not yet"
        return False

    def statistics(self):
        self.gathered += 1
        return types.SimpleNamespace(components={}, tasks={})


@pytest.mark.parametrize(("interval", "least", "most"), [(0.05, 3, 12), (60.0, 0, 0)])
def test_the_status_line_is_refreshed_every_stats_interval(monkeypatch, interval, least, most):
    tty = TTY()
    monkeypatch.setattr(sys, "stderr", tty)
    running = Running(interval)
    assert cli._watch(running, threading.Event(), 0.5, {"why": ""}) == 0
    assert least <= running.gathered <= most
    assert tty.lines == running.gathered
