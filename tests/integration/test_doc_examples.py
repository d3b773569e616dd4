"""The README's and docs' examples run as written, so an example that drifts fails here.

Every ```python block of README.md and docs/*.md runs, each in a temporary directory
with the README's first topology saved beside it as `wordcount.py` (as the README says):
- a block that defines a module-level `topology` is a file `stormish run` runs, to
  completion or, for an endless one, for a few seconds (`--time`); its statistics must
  show no error and every spout emitting;
- any other block runs as a script, and every `Topology` it leaves at module level is
  validated as a run would (sources, streams, fields, config).
An HTML comment just before a block changes that:
- `<!-- skip: REASON -->`: not run; the reason shows in the test output (`-rs`);
- `<!-- setup: CODE -->`: CODE (hidden from the reader) runs first, for a fragment that
  needs its imports or the components around it: the fragment's own calls still run.
A shell block runs only when marked `<!-- run -->`: with `stormish` as this checkout's
command, in a temporary copy of topologies/ and examples/, each in a few seconds.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BOUND = 4  # seconds an endless topology runs (finite ones complete sooner)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
COMMENT = re.compile(r"<!--\s*(skip|setup|run)\b:?((?:(?!-->).)*)-->\s*\Z", re.S)


@dataclass
class Block:
    doc: str
    line: int
    lang: str
    code: str
    directive: str | None  # skip, setup, run
    arg: str


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        before = COMMENT.search(text[max(0, m.start() - 2000) : m.start()])
        directive, arg = (before.group(1), before.group(2).strip()) if before else (None, "")
        line = text[: m.start()].count("\n") + 1
        out.append(Block(path.name, line, m.group(1), m.group(2), directive, arg))
    return out


def defines_topology(code: str) -> bool:
    return re.search(r"^topology = Topology\(", code, re.M) is not None


ALL = [b for path in DOCS for b in blocks(path)]
WORDCOUNT = next(b.code for b in ALL if b.doc == "README.md" and defines_topology(b.code))
PYTHON = [b for b in ALL if b.lang == "python"]
SHELL = [b for b in ALL if b.lang in ("", "bash", "sh") and b.directive == "run"]


def param(b: Block):
    marks = [pytest.mark.skip(reason=f"{b.doc}:{b.line}: {b.arg}")] if b.directive == "skip" else []
    return pytest.param(b, id=f"{b.doc}:{b.line}", marks=marks)


# runs a script, then validates every Topology it left at module level, as a run would
VALIDATE = """
import runpy, sys
from stormish import Topology
ns = runpy.run_path(sys.argv[1], run_name="__main__")
for value in list(ns.values()):
    if isinstance(value, Topology):
        value.validate()
"""


def test_the_examples_are_found():
    ids = [f"{b.doc}:{b.line}" for b in PYTHON]
    assert sum(i.startswith("README.md") for i in ids) >= 6, ids
    assert sum(not i.startswith("README.md") for i in ids) >= 9, ids
    for doc in ("config.md", "edges.md", "state.md", "windows.md", "connectors.md"):
        assert any(i.startswith(doc) for i in ids), (doc, ids)
    assert SHELL, "no shell block is marked <!-- run -->"
    skipped = [b for b in PYTHON if b.directive == "skip"]
    assert len(skipped) <= len(PYTHON) // 5, [f"{b.doc}:{b.line}" for b in skipped]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("block", [param(b) for b in PYTHON])
def test_a_python_example_runs_as_written(tmp_path, block):
    (tmp_path / "wordcount.py").write_text(WORDCOUNT)
    setup = textwrap.dedent(block.arg) + "\n" if block.directive == "setup" else ""
    example = tmp_path / "example.py"
    example.write_text(setup + block.code)
    stats = tmp_path / "stats.json"
    if defines_topology(block.code):
        cmd = [sys.executable, "-m", "stormish.cli", "run", str(example), "--time", str(BOUND),
               "--stats-json", str(stats)]  # fmt: skip
    else:
        (tmp_path / "validate.py").write_text(VALIDATE)
        cmd = [sys.executable, str(tmp_path / "validate.py"), str(example)]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "error" not in r.stderr.lower(), r.stderr
    if defines_topology(block.code):
        assert re.search(r"^topology '[\w-]+': (complete|stopped by --time)", r.stdout, re.M)
        data = json.loads(stats.read_text())
        for name, c in data["components"].items():
            assert c["errors"] == 0, (name, c)  # failed: an edge policy's drops may fail
            if c["kind"] == "spout":
                assert c["emitted"] > 0, (name, c)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("block", [param(b) for b in SHELL])
def test_a_shell_example_runs_as_written(tmp_path, block):
    for d in ("topologies", "examples"):
        shutil.copytree(ROOT / d, tmp_path / d)
    script = f'set -e\nstormish() {{ "{sys.executable}" -m stormish.cli "$@"; }}\n{block.code}'
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                       timeout=40)  # fmt: skip
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr, r.stderr
