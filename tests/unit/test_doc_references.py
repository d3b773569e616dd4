"""Docs that point only at what a reader of the repository can open.

A path into the repository (`docs/edges.md`, `runtime/scheduler.py`, `tests/faults/...`)
must name a file or folder that is there; a design document named in capitals
(`DESIGN.md`, "DESIGN section 6") must be in the repository too. The docs and the
package's docstrings and comments name no issue of a tracker the reader cannot see
("issue 24"): they say what the rule is instead. Scanned: README.md, CHANGELOG.md,
docs/, bench/*.md, and the comments and strings of stormish/, tests/ and bench/.
"""

from __future__ import annotations

import functools
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [f for f in out.stdout.splitlines() if (ROOT / f).exists()]


FILES = tracked()
EXISTING = set(FILES) | {str(p) for f in FILES for p in Path(f).parents}
TOP = {f.split("/")[0] for f in FILES if "/" in f}
PACKAGES = {f.split("/")[1] for f in FILES if f.startswith("stormish/") and f.count("/") >= 2}
# a path: folders, then a file with an extension (`docs/edges.md`, `parts.halt_lag_bound`:
# a name in tests/integration/parts.py) or nothing (`tests/faults/`); "a/b/c" is prose
PATH = re.compile(r"(?<![\w/.:<-])((?:[\w.-]+/)+(?:[\w*-]+\.[\w.*-]*[\w*])?)(?![\w/])")
CAPS_DOC = re.compile(r"(?<![\w/.-])([A-Z][A-Z_]{2,})(?:\.md\b|\s+section\b)")
ISSUE = re.compile(r"\bissues?\s+#?\d+", re.I)
PLACEHOLDER = re.compile(r"^[A-Z_]+$|^\.\.\.$|\*")  # workers/profiles/NAME.json, .../x.py
OTHERS = ("flux/README.md",)  # Storm's flux module's README, named as Storm's


@functools.cache
def texts(path: str) -> list[tuple[int, str]]:
    """(line, text) of what a reader reads: a markdown file whole; of Python, the
    comments and string literals (docstrings, messages, config descriptions)."""
    source = (ROOT / path).read_text()
    if path.endswith(".md"):
        return list(enumerate(source.splitlines(), 1))
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING) or tok.type == getattr(
            tokenize, "FSTRING_MIDDLE", -1
        ):
            for i, line in enumerate(tok.string.splitlines()):
                out.append((tok.start[0] + i, line))
    return out


def exists(ref: str, where: str) -> bool:
    ref = ref.rstrip("/.")
    parts = ref.split("/")
    if ref in OTHERS or any(PLACEHOLDER.search(p.split(".")[0]) for p in parts):
        return True
    here = str(Path(where).parent)
    module = "/".join([*parts[:-1], parts[-1].split(".")[0] + ".py"])  # parts.halt_lag_bound
    candidates = [c for r in (ref, module) for c in (r, f"{here}/{r}", f"stormish/{r}")]
    return any(str(Path(c)) in EXISTING for c in candidates)


def checked(ref: str) -> bool:
    """Whether `ref` is a path into this repository: it starts at one of its top-level
    folders or at one of the package's subpackages (`runtime/...`)."""
    first = ref.split("/")[0]
    return first in TOP or first in PACKAGES


SCANNED = [
    f
    for f in FILES
    if f != "tests/unit/test_doc_references.py"  # its own examples of what fails
    and (
        f in ("README.md", "CHANGELOG.md")
        or (f.startswith(("docs/", "bench/")) and f.endswith(".md"))
        or (f.startswith(("stormish/", "tests/", "bench/")) and f.endswith(".py"))
    )
]


def references() -> list[str]:
    bad = []
    for f in SCANNED:
        for line, text in texts(f):
            for m in PATH.finditer(text):
                ref = m.group(1)
                if checked(ref) and not exists(ref, f):
                    bad.append(f"{f}:{line}: {ref}")
            for m in CAPS_DOC.finditer(text):
                name = m.group(1) + ".md"
                if not any(Path(x).name == name for x in FILES):
                    bad.append(f"{f}:{line}: {m.group(0)} (no {name} in the repository)")
    return bad


def test_every_file_the_docs_name_is_in_the_repository():
    assert len(SCANNED) > 100  # README, docs, the package, the tests
    bad = references()
    assert not bad, "references to files not in the repository:\n" + "\n".join(bad)


@pytest.mark.parametrize("top", ["docs", "stormish", "README.md"])
def test_no_issue_numbers_a_reader_cannot_see(top):
    bad = [
        f"{f}:{line}: {m.group(0)}"
        for f in SCANNED
        if f == top or f.startswith(top + "/")
        for line, text in texts(f)
        for m in ISSUE.finditer(text)
    ]
    assert not bad, "issue numbers (say what the rule is instead):\n" + "\n".join(bad)


def test_the_check_sees_what_it_must():
    """It cannot pass by seeing nothing: each pattern catches its case."""
    assert checked("docs/edges.md") and exists("docs/edges.md", "README.md")
    assert checked("runtime/scheduler.py") and exists("runtime/scheduler.py", "stormish/x.py")
    assert checked("docs/gone.md") and not exists("docs/gone.md", "README.md")
    assert exists("flux/README.md", "docs/migrating.md")  # Storm's, named as such
    assert exists("workers/profiles/NAME.json", "README.md")
    assert exists("tests/integration/parts.halt_lag_bound", "docs/workers.md")
    assert [m.group(1) for m in PATH.finditer("see docs/edges.md, tests/faults/ and a/b/c")] == [
        "docs/edges.md",
        "tests/faults/",
    ]
    assert CAPS_DOC.search("as DESIGN section 6 says") and CAPS_DOC.search("see DESIGN.md")
    assert ISSUE.search("fixed in issue 24") and ISSUE.search("Issue #7")
    assert not ISSUE.search("an issue with 3 workers")
