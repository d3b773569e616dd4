"""Every line a component's code writes carries its tag, in every mode: prepare/open and
cleanup/close too, not only execute; in a `-w 1` run (executors in the CLI's own process)
as in worker processes and their log files, so `stormish logs NAME --component C`
(logs.component_lines) finds them all."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stormish.logs import component_lines

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]

TOPOLOGY = textwrap.dedent(
    """
    import logging
    from stormish import BasicBolt, Spout, Topology

    class Nums(Spout):
        outputs = ["n"]
        def open(self, conf, context):
            self.n = 0
            print("nums says open")
        def next_tuple(self):
            if self.n >= 3:
                self.finish()
                return
            self.n += 1
            self.emit([self.n], msg_id=self.n)
        def close(self):
            print("nums says close")

    class Count(BasicBolt):
        def prepare(self, conf, context):
            print("count says prepare")
        def execute(self, tup):
            print("count says execute", tup["n"])
        def cleanup(self):
            print("count says cleanup")
            logging.getLogger("user").warning("count logs cleanup")

    topology = Topology("printy")
    topology.set_spout("nums", Nums())
    topology.set_bolt("count", Count()).shuffle_grouping("nums")
    """
)
SAID = {
    "nums": ["nums says open", "nums says close"],
    "count": ["count says prepare", "count says execute 1", "count says cleanup",
              "count logs cleanup"],
}  # fmt: skip


def check(text: str) -> None:
    for comp, lines in SAID.items():
        mine = "\n".join(component_lines(text, comp))
        for said in lines:
            assert said in mine, f"{said!r} not tagged [{comp}:N] in:\n{text}"
    for line in text.splitlines():  # and no line of theirs untagged
        if " says " in line or " logs " in line:
            assert "[nums:" in line or "[count:" in line, line


@pytest.mark.parametrize("workers", ["1", "2"])
def test_every_line_of_a_component_is_tagged(tmp_path, workers):
    topo = tmp_path / "printy.py"
    topo.write_text(TOPOLOGY)
    r = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(topo), "-w", workers],
        cwd=ROOT, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    check(r.stdout + r.stderr)
    assert (
        r.stdout.startswith("topology 'printy': complete")
        or "[" not in r.stdout.split("topology 'printy'")[1]
    ), r.stdout  # the summary itself is not tagged


def test_worker_log_files_tag_cleanup_too(tmp_path):
    topo = tmp_path / "printy.py"
    topo.write_text(TOPOLOGY)
    logs = tmp_path / "logs"
    r = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(topo), "-w", "2",
         "--log-dir", str(logs)],
        cwd=ROOT, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    check("".join(p.read_text() for p in sorted(logs.glob("printy-worker-*.log"))))
