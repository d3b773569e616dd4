"""The one rule for names that end up in paths, and the check that a path stays in its root.

A topology's name becomes a directory (nimbus's store, the embedded state) and part of
file names (worker logs, heartbeats); a component id becomes part of a state file's
name. A name comes from a topology file, or from the wire when nimbus receives a
submit, so it is checked where a `Topology` is built and again wherever a path is made
of it: `.` and `..` name a directory itself and its parent (a topology named `..` once
had nimbus delete its whole data directory), a separator walks anywhere, and a name
without a bound fills a file system's name limit.
"""

from __future__ import annotations

import os
import re

from .errors import StormishError, TopologyError

MAX_LENGTH = 128
_CHARS = re.compile(r"[A-Za-z0-9_.\-]+")
RULE = (
    f"1 to {MAX_LENGTH} letters, digits, '_', '-' or '.', and not '.' or '..' "
    "(no '/', '\\', spaces or control characters)"
)


def name_problem(name: object) -> str | None:
    """Why `name` cannot be a name, or None when it can."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a string"
    if not name:
        return "is empty"
    if len(name) > MAX_LENGTH:
        return f"is {len(name)} characters long, more than {MAX_LENGTH}"
    if name in (".", ".."):
        return "names a directory itself or its parent"
    if not _CHARS.fullmatch(name):
        return "holds a character other than letters, digits, '_', '-' or '.'"
    return None


def shown(name: object) -> str:
    """`name` for an error message: a 10,000-character name is not printed whole."""
    if isinstance(name, str) and len(name) > 60:
        return f"{name[:40]!r}... ({len(name)} characters)"
    return repr(name)


def check_name(name: object, what: str = "topology name") -> str:
    """`name` when it keeps the rule; else a TopologyError naming it, what it is, and
    the rule."""
    problem = name_problem(name)
    if problem is not None or not isinstance(name, str):
        raise TopologyError(f"{what} {shown(name)} {problem}: a {what} must be {RULE}")
    return name


def inside(root: str, *parts: str) -> str:
    """`root` joined with `parts`, resolved, when that path lies strictly inside `root`
    (symbolic links followed); an error naming both otherwise. Every path built from a
    name goes through here before anything is written or removed there."""
    real_root = os.path.realpath(root)
    path = os.path.realpath(os.path.join(real_root, *parts))
    if path == real_root or os.path.commonpath([real_root, path]) != real_root:
        joined = os.path.join(root, *parts)
        raise StormishError(
            f"refusing the path {shown(joined)}: it resolves to {shown(path)}, which is not "
            f"inside {root!r}"
        )
    return path
