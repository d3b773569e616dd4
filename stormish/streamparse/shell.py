"""A streamparse component that runs as a multilang subprocess: `--multilang`, or a
`ShellBolt.spec(command=..., script=...)` in another language."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import TopologyError


def shell_component(argv: list[str], streams: dict, is_spout: bool, path: Path, cwd: Path) -> Any:
    """The multilang ShellBolt/ShellSpout running `argv` in `cwd` (a streamparse
    project's `src/`: where Storm runs it, the topology jar's resources), declaring
    `streams`."""
    try:
        from ..multilang import ShellBolt, ShellSpout
    except ImportError as exc:
        raise TopologyError(
            f"{' '.join(argv)!r} runs as a multilang subprocess, and this stormish has no "
            "stormish.multilang"
        ) from exc
    cls = ShellSpout if is_spout else ShellBolt
    return cls(command=argv, streams=streams, cwd=str(cwd))


def src_dir(path: Path) -> Path:
    """A streamparse project's `src/`: next to the topology file's directory."""
    return path.resolve().parent.parent / "src"
