"""Flux YAML topologies (Storm's flux/README.md): `stormish run topology.yaml`,
`stormish plan topology.yaml`.

substitute.py replaces `${...}` in the text, parse.py reads it with PyYAML's safe loader
and checks every key (errors name file, line and key) and merges includes, objects.py and
build.py make the components and the topology. A `className` is a Python import path,
resolved with the YAML file's directory and the working directory on the import path;
Storm's FluxShellSpout/FluxShellBolt are stormish's multilang components (shell.py).
docs/migrating.md says what differs from Storm."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import cloudpickle

from ..topology import Topology


def load_flux(
    path: Path,
    props: str | None = None,
    env_filter: bool = False,
    multilang: bool = False,
    **_: Any,
) -> Topology:
    """The topology of the Flux file at `path`; `props`: a properties file for `${key}`
    (--filter), `env_filter`: `${ENV-NAME}` from the environment (--env-filter)."""
    from .build import build
    from .parse import read
    from .substitute import read_properties

    values = read_properties(props) if props else {}
    top = read(path, values, env_filter)
    here = str(path.resolve().parent)
    # the file's directory, those of the files it included (an included file names
    # classes beside it), then the working directory
    dirs = dict.fromkeys((here, *top.included_dirs, str(Path.cwd())))
    added = [p for p in dirs if p not in sys.path]
    sys.path[:0] = added
    before = set(sys.modules)
    try:
        return build(top, path, multilang)
    finally:
        for p in added:
            sys.path.remove(p)
        _ship_by_value([n for n in sys.modules if n not in before], added)


def _ship_by_value(names: list[str], dirs: list[str]) -> None:
    """The modules the file's classes came from, from its directory or the working
    directory, travel by value to worker processes (as a topology file's own do)."""
    roots = [Path(d).resolve() for d in dirs]
    for name in names:
        f = getattr(sys.modules.get(name), "__file__", None)
        if not f or "." in name or "site-packages" in f:
            continue
        if any(r in Path(f).resolve().parents for r in roots):
            cloudpickle.register_pickle_by_value(sys.modules[name])
