"""On a terminal, what a bolt prints goes above `stormish run`'s
status line (rich's Live display), never after it on the same line; a spout that reports
its progress gets a bar under it. A real pseudo-terminal, a real run (1 worker in
process, and 2 worker processes whose output is pumped through the parent)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import textwrap
import time

import pytest

from stormish.local.workers import _child_env

TOPOLOGY = """
from stormish import BasicBolt, Spout, Topology


class Ticks(Spout):
    outputs = ["n"]

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        import time

        if self.n < 60:
            self.n += 1
            self.emit([self.n])
            time.sleep(0.03)
        else:
            self.finish()


class Talker(BasicBolt):
    def execute(self, tup):
        if tup.values[0] % 10 == 0:
            print(f"talker says {tup.values[0]}")
        if tup.values[0] % 20 == 0:
            import logging

            logging.getLogger("talky").warning("talker warns %d", tup.values[0])


t = Topology("talky", config={"topology.stats.interval.secs": 0.05})
t.set_spout("s", Ticks())
t.set_bolt("talker", Talker()).shuffle_grouping("s")
topology = t
"""


def run_on_a_terminal(path: str, *args: str) -> str:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "run", path, *args],
        stdin=slave, stdout=slave, stderr=slave, env=_child_env(), close_fds=True,
    )  # fmt: skip
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
    assert proc.returncode == 0, out.decode(errors="replace")[-2000:]
    return out.decode(errors="replace")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_prints_go_above_the_status_line(tmp_path, workers):
    path = tmp_path / "talky.py"
    path.write_text(textwrap.dedent(TOPOLOGY))
    out = run_on_a_terminal(str(path), "-w", workers)
    assert "tuples/s" in out  # a status line was shown
    said = [m.start() for m in re.finditer(r"(\[talker:\d+\] )?talker says \d+", out)]
    assert len(said) == 6, out[-3000:]
    # a log record (to stderr: in this process with 1 worker, pumped with 2) as well
    warned = [m.start() for m in re.finditer(r"(\[talker:\d+\] )?talker warns \d+", out)]
    assert len(warned) == 3, out[-3000:]
    for at in warned:  # its line (with 2 workers, its time, level and worker first) is its own
        start = max(out.rfind("\n", 0, at), out.rfind("\x1b[2K", 0, at))
        assert start >= 0 and "tuples/s" not in out[start:at], repr(out[max(0, at - 120) : at])
    for at in said:
        before = out[max(0, at - 4) : at]
        # at the start of a line: after a newline, or after rich wiped the status line
        # (carriage return, then erase-line for each of its lines going up)
        assert before.endswith(("\n", "\x1b[2K")), repr(out[max(0, at - 120) : at + 30])


LISTED = """
import time
from stormish import BasicBolt, Topology
from stormish.testing import ListSpout


class Slow(BasicBolt):
    def execute(self, tup):
        time.sleep(0.005)  # simulated work: the run lasts about 1.5 s


t = Topology("listed", config={"topology.stats.interval.secs": 0.05,
                               "topology.max.spout.pending": 10})
t.set_spout("words", ListSpout([[f"w{i}"] for i in range(300)], ["word"]))
t.set_bolt("slow", Slow()).shuffle_grouping("words")
topology = t
"""

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_status_line_shows_the_progress_of_a_finite_spout(tmp_path, workers):
    path = tmp_path / "listed.py"
    path.write_text(textwrap.dedent(LISTED))
    out = ANSI.sub("", run_on_a_terminal(str(path), "-w", workers))
    # rich's bar under the status line: "words ━━━━╸━━━ 128/300  43% 0:00:01"
    done = [int(n) for n in re.findall(r"words [━╸╺]+ +(\d+)/300 ", out)]
    assert done, out[-3000:]
    assert any(0 < n < 300 for n in done), done  # seen moving
    assert done == sorted(done), done
    assert done[-1] == 300, done  # the bar as the spout ended
    assert "100%" in out
