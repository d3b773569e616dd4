"""streamparse topologies, unchanged: `stormish run topologies/wordcount.py` on a file that
defines a `streamparse.Topology` subclass.

The project's `src/` goes on the import path (as `sparse run` puts it on Storm's), the
topology's specs become a stormish Topology (spec.py) and each Python component runs in
the task's thread through a thin adapter (adapter.py, shim.py): no subprocess, no JVM.
With `--multilang` each runs as Storm would run it, `streamparse_run module.Class` in a
subprocess speaking the multilang protocol (shell.py). docs/migrating.md says what differs
from Storm.

This package imports streamparse and pystorm, so only a topology that uses them loads it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import cloudpickle

from ..errors import TopologyFileError
from ..topology import Topology


def project_src(path: Path) -> Path | None:
    """The streamparse project's `src/` for topology file `path` (`topologies/NAME.py`
    beside `src/`), when there is one."""
    src = path.resolve().parent.parent / "src"
    return src if src.is_dir() else None


def uses_streamparse(path: Path) -> bool:
    """Whether the topology file imports streamparse (read, not run)."""
    try:
        return "streamparse" in path.read_text(errors="replace")
    except OSError:
        return False


def topology_of(module: Any, path: Path, multilang: bool = False) -> Topology | None:
    """The stormish topology of the module's streamparse Topology subclass (None when it
    defines none). The modules it imported from `src/` travel by value to worker
    processes, which do not have `src/` on their path."""
    if "streamparse" not in sys.modules:
        return None
    from .spec import build, find_topology_class

    cls = find_topology_class(module)
    if cls is None:
        return None
    src = project_src(path)
    if src is not None:
        _ship_by_value(src)
    try:
        return build(cls, path, multilang)
    except TopologyFileError:
        raise
    except (TypeError, ValueError) as exc:
        raise TopologyFileError(f"topology file {str(path)!r}: {exc}") from exc


def failing_component(exc: BaseException) -> str:
    """`, component 'NAME'` when streamparse refused a spec while making the Topology
    class (a grouping on a field the source does not declare, an unknown source): its
    message names the source, the component being checked is in the checking frame."""
    tb = exc.__traceback__
    name = None
    while tb is not None:
        if "streamparse" in tb.tb_frame.f_code.co_filename:
            spec = tb.tb_frame.f_locals.get("spec")
            name = getattr(spec, "name", None) or name
        tb = tb.tb_next
    return f", component {name!r}" if isinstance(name, str) else ""


def _ship_by_value(src: Path) -> None:
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if f and src in Path(f).resolve().parents and "." not in name:
            cloudpickle.register_pickle_by_value(mod)
