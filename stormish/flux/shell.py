"""Storm's Flux shell wrappers (`org.apache.storm.flux.wrappers.spouts.FluxShellSpout`,
`...bolts.FluxShellBolt`) as stormish's multilang components, so that the Flux files
streamparse writes (`Topology.to_flux_dict`) and Storm's multilang examples run.

Flux constructs them with `[command, args...]` and the default stream's fields, then calls
`setDefaultStream`, `setNamedStream` and `addComponentConfig`: this records those and
becomes a multilang ShellSpout/ShellBolt once the definition is read."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import TopologyError


class FluxShell:
    """What a FluxShellSpout/FluxShellBolt definition says."""

    is_spout = False

    def __init__(self, command: Sequence[str], fields: Sequence[str] | None = None):
        if isinstance(command, str) or not command:
            raise TopologyError(
                "the first constructor argument is the command line, a list: [cmd, args...]"
            )
        self.command = [str(c) for c in command]
        self.streams: dict[str, list[str]] = {}
        if fields is not None:
            self.streams["default"] = [str(f) for f in fields]
        self.config: dict[str, Any] = {}

    def setDefaultStream(self, fields: Sequence[str]) -> None:  # noqa: N802 - Flux's name
        self.streams["default"] = [str(f) for f in fields]

    def setNamedStream(self, name: str, fields: Sequence[str]) -> None:  # noqa: N802
        self.streams[str(name)] = [str(f) for f in fields]

    def addComponentConfig(self, key: str, value: Any) -> None:  # noqa: N802
        self.config[str(key)] = value

    def component(self, flux_file: Path) -> Any:
        """The multilang component: run where Storm runs a shell component, the
        topology's resources: the `resources/` directory beside the Flux file when there
        is one (a topology jar's layout: Storm's flux-examples keep their scripts there),
        else the Flux file's directory; that directory, the Flux file's and the working
        directory on the child's PYTHONPATH (as `className`s are resolved)."""
        try:
            from ..multilang import ShellBolt, ShellSpout
        except ImportError as exc:
            raise TopologyError(
                f"{' '.join(self.command)!r} runs as a multilang subprocess, and this "
                "stormish has no stormish.multilang"
            ) from exc
        here = flux_file.resolve().parent
        run_in = here / "resources" if (here / "resources").is_dir() else here
        dirs = dict.fromkeys((str(run_in), str(here), os.getcwd(), os.environ.get("PYTHONPATH")))
        path = os.pathsep.join(p for p in dirs if p)
        cls = ShellSpout if self.is_spout else ShellBolt
        return cls(self.command, streams=self.streams, cwd=str(run_in), env={"PYTHONPATH": path})


class FluxShellSpout(FluxShell):
    is_spout = True


class FluxShellBolt(FluxShell):
    is_spout = False


SHELL_CLASSES = {
    "org.apache.storm.flux.wrappers.spouts.FluxShellSpout": FluxShellSpout,
    "org.apache.storm.flux.wrappers.bolts.FluxShellBolt": FluxShellBolt,
}
