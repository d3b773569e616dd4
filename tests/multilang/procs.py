"""The child programs the multilang tests run, and a look for any left running."""

from __future__ import annotations

import os
from pathlib import Path

CHILDREN = Path(__file__).parent / "children"


def children(under: Path = CHILDREN) -> list[tuple[int, str]]:
    """Running processes whose command line names `under` (children, their helpers)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(under) in cmd and state != "Z":
            found.append((int(d), cmd))
    return found
