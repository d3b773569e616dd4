"""The warning `stormish run` and `stormish monitor` give when a spout's trees time out
faster than they complete: a run in that state replays into its own backlog
and stops making progress."""

from __future__ import annotations

import io
import threading

from click.testing import CliRunner

from stormish.runtime.stats import (
    TaskStats,
    TopologyStatistics,
    aggregate,
    timeout_warning,
    timing_out,
)


def stats(acked: int, timed_out: int, status: str = "running") -> TopologyStatistics:
    tasks = [
        TaskStats(1, "fast", 0, "spout", acked=acked, failed=timed_out, timed_out=timed_out),
        TaskStats(2, "slow", 0, "bolt", executed=acked, acked=acked),
    ]
    return TopologyStatistics("soak", status, 1.0, 1, {t.task: t for t in tasks}, aggregate(tasks))


def test_timing_out_compares_what_happened_between_two_statistics():
    assert timing_out(None, stats(0, 0)) == []
    assert timing_out(None, stats(10, 11)) == ["fast"]
    assert timing_out(stats(10, 11), stats(500, 12)) == []  # caught up: 490 acked, 1 timed out
    assert timing_out(stats(500, 12), stats(510, 600)) == ["fast"]
    assert timing_out(stats(500, 12), stats(510, 12)) == []


def test_the_warning_names_the_spouts_and_what_to_change():
    assert timeout_warning([]) == ""
    text = timeout_warning(["fast"])
    assert "fast" in text and "time out faster than they complete" in text
    assert "topology.max.spout.pending" in text and "topology.message.timeout.secs" in text


class TTY(io.StringIO):
    def isatty(self):
        return True


class FakeRunning:
    """What `stormish run`'s status loop reads: statistics that get worse each time."""

    name = "soak"
    plan = type("Plan", (), {"conf": {"topology.stats.interval.secs": 0.001}})()

    def __init__(self, stop: threading.Event):
        self.calls = 0
        self.stop = stop

    def poll_complete(self, timeout):
        return False

    def statistics(self):
        self.calls += 1
        if self.calls >= 3:
            self.stop.set()
        return stats(10 * self.calls, 100 * self.calls)


def test_the_run_status_line_warns(monkeypatch):
    from stormish import cli

    err = TTY()
    monkeypatch.setattr(cli.sys, "stderr", err)
    # the status line is cut to the terminal's width (rich reads COLUMNS; 80 without it)
    monkeypatch.setenv("COLUMNS", "250")
    stop = threading.Event()
    assert cli._watch(FakeRunning(stop), stop, 30.0, {}) == 0
    assert "WARNING trees of fast time out faster than they complete" in err.getvalue()


def test_monitor_warns(monkeypatch):
    from stormish import cli_cluster as commands

    seq = iter([stats(10, 0), stats(20, 500), stats(30, 500, status="complete")])

    class Client:
        def call(self, verb, name=None):
            if verb == "list":  # monitor looks the topology up first (starting: why)
                return [{"name": "soak", "status": "running", "waiting": None}]
            return next(seq)

        def close(self):
            pass

    monkeypatch.setattr(commands, "connect", lambda nimbus, keys: Client())
    out = CliRunner().invoke(commands.monitor, ["soak", "--every", "0", "--nimbus", "x"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert len(lines) == 4  # three status lines, one warning after the second
    assert lines[2].startswith("WARNING trees of fast time out faster than they complete")
