"""A run that fails: one wrong-arity emit in a bolt of several tasks
writes its traceback once, with the other tasks named, and the summary gives its count and
tasks; the first line says how long it ran in ms, not `0.00s`; the failing bolt's row
counts as executed the tuples whose emits it counts (`emitted 18, executed 0` before)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TOPOLOGY = """
from stormish import BasicBolt, Spout, Topology

class Words(Spout):
    outputs = ["word"]
    def open(self, conf, context): self.n = 0
    def next_tuple(self):
        if self.n >= 2000:
            self.finish(); return
        self.n += 1
        self.emit(["nathan"], msg_id=self.n)

class Exclaim(BasicBolt):
    outputs = ["word"]
    def execute(self, tup):
        self.emit([tup["word"] + "!!!"])

class Bad(BasicBolt):
    outputs = ["word"]
    def prepare(self, conf, context): self.n = 0
    def execute(self, tup):
        self.n += 1
        self.emit([tup["word"] + "!!!"] + ([1] if self.n > 9 else []))  # the 10th: 2 values

topology = Topology("excl", config={"topology.acker.executors": 1})
topology.set_spout("words", Words(), parallelism=4)
topology.set_bolt("exclaim1", Exclaim(), parallelism=3).shuffle_grouping("words")
topology.set_bolt("exclaim2", Bad(), parallelism=3).shuffle_grouping("exclaim1")
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_failed_run_writes_each_distinct_error_once(tmp_path, workers):
    path = tmp_path / "excl.py"
    path.write_text(TOPOLOGY)
    stats = tmp_path / "stats.json"
    r = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(path), "-w", workers,
         "--stats-json", str(stats)],
        cwd=ROOT, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    data = json.loads(stats.read_text())
    tasks = [t for t in data["tasks"].values() if t["component"] == "exclaim2"]
    failed = [t for t in tasks if t["errors"]]
    for t in tasks:  # a task that failed executed its 10th tuple too, the one that raised
        assert (t["emitted"], t["executed"]) == ((9, 10) if t["errors"] else (t["executed"],) * 2)
    # one traceback per worker, not one per task
    tracebacks = r.stderr.count("Traceback (most recent call last):")
    assert 1 <= tracebacks <= int(workers), r.stderr
    same = re.findall(r"component 'exclaim2' task \d+: the same error as task \d+", r.stderr)
    assert len(same) == len(failed) - tracebacks, r.stderr
    if len(failed) > 1:
        ids = ", ".join(str(t["task"]) for t in sorted(failed, key=lambda t: t["task"]))
        assert (
            f"component 'exclaim2': {len(failed)} errors in tasks {ids}: TopologyError: "
            "component 'exclaim2' emitted 2 values"
        ) in r.stdout, r.stdout
    first = r.stdout.splitlines()[0]
    assert re.fullmatch(r"topology 'excl': failed after [\d.]+ (ms|s) \(\d workers?\)", first)
