"""What a new user trips on in the first hour, from a hunt that made newcomers'
mistakes: each is now said, with the user's file and line, or simply works as it does
under plain `python` (a component's sys.stdout is a text stream with a `buffer` and a
`reconfigure`; `submit` without a nimbus tags prints as `run` does; a print left without
its newline does not swallow the next task's tag)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_cli import stormish

pytestmark = pytest.mark.timeout(120)

SENTENCES = """\
import sys
from stormish import BasicBolt, Spout, Topology

class Sentences(Spout):
    outputs = ["sentence"]
    def open(self, conf, context):
        self.todo = ["the cow"] * 6
    def next_tuple(self):
        if not self.todo:
            self.finish()
            return
        self.emit([self.todo.pop()], msg_id=len(self.todo))
"""


def line_of(topo: Path, text: str) -> int:
    return next(i for i, ln in enumerate(topo.read_text().splitlines(), 1) if text in ln)


def write(tmp_path: Path, body: str) -> Path:
    topo = tmp_path / "topo.py"
    topo.write_text(SENTENCES + body)
    return topo


def test_a_components_stdout_is_a_text_stream_with_its_buffer(tmp_path):
    topo = write(
        tmp_path,
        """
sys.stdout.reconfigure(line_buffering=True)  # at module level: it failed the import

class Sink(BasicBolt):
    def execute(self, tup):
        sys.stdout.buffer.write(b"bytes " + tup["sentence"].encode() + b"\\n")
        sys.stdout.buffer.flush()

topology = Topology("buffer")
topology.set_spout("sentences", Sentences())
topology.set_bolt("sink", Sink()).shuffle_grouping("sentences")
""",
    )
    for workers in ("1", "2"):
        out = stormish("run", str(topo), "-w", workers)
        assert out.returncode == 0, out.stderr
        assert out.stdout.count("bytes the cow") == 6, out.stdout


def test_a_generator_execute_or_next_tuple_is_refused_with_its_line(tmp_path):
    topo = write(
        tmp_path,
        """
class Split(BasicBolt):
    outputs = ["word"]
    def execute(self, tup):
        for w in tup["sentence"].split():
            yield [w]

topology = Topology("gen")
topology.set_spout("sentences", Sentences())
topology.set_bolt("split", Split()).shuffle_grouping("sentences")
""",
    )
    out = stormish("run", str(topo))
    assert out.returncode == 2
    assert "Split.execute is a generator (it yields)" in out.stderr, out.stderr
    assert (
        f"(at {topo}:{line_of(topo, 'def execute')})" in out.stderr
    )  # the def line: its body never ran


def test_an_unknown_grouping_field_names_the_line_when_the_source_comes_later(tmp_path):
    topo = write(
        tmp_path,
        """
class Split(BasicBolt):
    outputs = ["word"]
    def execute(self, tup):
        pass

topology = Topology("order")
topology.set_bolt("split", Split()).fields_grouping("sentences", ["sentnce"])
topology.set_spout("sentences", Sentences())
""",
    )
    out = stormish("run", str(topo))
    assert out.returncode == 2
    assert (
        "unknown field(s) ['sentnce']" in out.stderr
        and f"(at {topo}:{line_of(topo, 'sentnce')})" in out.stderr
    )


def test_an_error_in_after_run_shows_its_file_and_line(tmp_path):
    topo = write(
        tmp_path,
        """
class Null(BasicBolt):
    def execute(self, tup):
        pass

topology = Topology("after")
topology.set_spout("sentences", Sentences())
topology.set_bolt("null", Null()).shuffle_grouping("sentences")

def check(stats):
    return stats.components["nul"].executed

def after_run(stats):
    check(stats)
""",
    )
    out = stormish("run", str(topo))
    assert out.returncode == 1
    assert "error: after_run: KeyError: 'nul'" in out.stderr
    line = line_of(topo, 'components["nul"]')
    assert f"at {topo}:{line}: return stats.components" in out.stderr, out.stderr


def test_a_negative_time_is_refused(tmp_path):
    topo = write(tmp_path, "topology = Topology('t')\ntopology.set_spout('s', Sentences())\n")
    out = stormish("run", "--time", "-5", str(topo))
    assert out.returncode == 2 and "'--time'" in out.stderr


PRINTS = """
class P(BasicBolt):
    def execute(self, tup):
        pass
    def cleanup(self):
        print("cleanup of", self.n if hasattr(self, "n") else "a task", end="")

topology = Topology("prints")
topology.set_spout("sentences", Sentences())
topology.set_bolt("p", P(), parallelism=3).shuffle_grouping("sentences")
"""


def test_prints_carry_their_tag_on_lines_of_their_own_with_submit_too(tmp_path):
    topo = write(tmp_path, PRINTS)
    for verb in ("run", "submit"):
        out = stormish(verb, str(topo))
        assert out.returncode == 0, out.stderr
        lines = [ln for ln in out.stdout.splitlines() if "cleanup of" in ln]
        assert len(lines) == 3, (verb, out.stdout)
        assert all(ln.startswith("[p:") and ln.count("cleanup") == 1 for ln in lines), lines
        assert any(ln.startswith("topology 'prints': complete") for ln in out.stdout.splitlines())


def test_a_helper_module_beside_the_file_is_importable_by_spawned_workers(tmp_path):
    """topology.worker.start=spawn (the default off Linux): a spawned worker gets this
    process's sys.path, and the file's directory had left it once the file was loaded
    (ModuleNotFoundError: No module named 'helpers' in every worker)."""
    (tmp_path / "helpers_of_mine.py").write_text("def shout(s):\n    return s.upper()\n")
    topo = write(
        tmp_path,
        """
from helpers_of_mine import shout

class Shout(BasicBolt):
    outputs = ["loud"]
    def execute(self, tup):
        self.emit([shout(tup["sentence"])])

topology = Topology("helpers")
topology.set_spout("sentences", Sentences())
topology.set_bolt("shout", Shout(), parallelism=2).shuffle_grouping("sentences")
""",
    )
    out = stormish("run", str(topo), "-w", "2", "--json", "-c", "topology.worker.start=spawn",
                   cwd=Path("/"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    import json

    assert json.loads(out.stdout)["components"]["shout"]["emitted"] == 6
