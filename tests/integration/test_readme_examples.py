"""The README's and docs' examples run as written (issue 31 defect 9: the window, state
and testing examples built `t = Topology(...)`, which `stormish run` cannot run).

Each python block that defines a module-level `topology` is a file `stormish run` runs
to completion (a time bound for the endless ones); a block that imports `wordcount` (the
README's first topology, saved under that name, as it says) is run as a script beside it.
Blocks that are neither (a line of config, a grouping's options) are fragments."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BOUND = 15  # seconds: what runs to completion takes less
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def blocks(path: Path) -> list[tuple[int, str]]:
    text = path.read_text()
    return [(text[: m.start()].count("\n") + 1, m.group(1)) for m in BLOCK.finditer(text)]


def defines_topology(code: str) -> bool:
    return re.search(r"^topology = Topology\(", code, re.M) is not None


WORDCOUNT = next(code for _, code in blocks(ROOT / "README.md") if defines_topology(code))
EXAMPLES = [
    pytest.param(code, id=f"{path.name}:{line}")
    for path in DOCS
    for line, code in blocks(path)
    if defines_topology(code) or re.search(r"^from wordcount import", code, re.M)
]


def test_the_examples_are_found():
    ids = [p.id for p in EXAMPLES]
    assert sum(i.startswith("README.md") for i in ids) >= 5, ids
    for doc in ("config.md", "edges.md", "state.md", "windows.md"):
        assert any(i.startswith(doc) for i in ids), (doc, ids)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("code", EXAMPLES)
def test_an_example_runs_as_written(tmp_path, code):
    (tmp_path / "wordcount.py").write_text(WORDCOUNT)
    example = tmp_path / "example.py"
    example.write_text(code)
    stats = tmp_path / "stats.json"
    if defines_topology(code):  # a window waits for time to pass: endless, so bounded
        cmd = [sys.executable, "-m", "stormish.cli", "run", str(example), "--time", str(BOUND),
               "--stats-json", str(stats)]  # fmt: skip
    else:
        cmd = [sys.executable, str(example)]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=200)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "error" not in r.stderr.lower(), r.stderr
    if defines_topology(code):
        assert re.search(r"^topology '[\w-]+': (complete|stopped by --time)", r.stdout, re.M)
        data = json.loads(stats.read_text())
        for name, c in data["components"].items():
            assert c["errors"] == 0, (name, c)  # failed: an edge policy's drops may fail
            if c["kind"] == "spout":
                assert c["emitted"] > 0, (name, c)
