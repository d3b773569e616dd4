"""Loading a topology file: a plain Python module with a module-level `topology`, and
shipping the modules of its own directory that it imports (`ship_local_modules`)."""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle

from .errors import ConfigError, TopologyFileError
from .sources import in_package
from .topology import Topology

# users' own profiles, looked up first: `workers/profiles/` where stormish runs; the
# built-in ones ship in the package (stormish/profiles/*.json, read as resources, so a
# wheel or a docker image has them too)
PROFILE_DIRS = (Path("workers/profiles"),)
SHIP_LIMIT = 4 << 20  # bytes of source `submit` ships with a topology at most


@dataclass(frozen=True)
class LocalModule:
    """A module the topology file imported from its own directory (or a package there)."""

    name: str
    files: tuple[str, ...]  # its source files that were imported
    size: int  # their bytes


def load_topology_module(
    path: str | Path, **options: Any
) -> tuple[Topology, Any, list[LocalModule]]:
    """`load_topology_file`, and the modules of the file's own directory that it imported
    (directly or not): what `submit` ships with the topology."""
    return _load(Path(path), **options)


def ship_local_modules(modules: list[LocalModule], limit: int = SHIP_LIMIT) -> int:
    """Make `modules` travel with the topology, by value (cloudpickle pickles their code
    with it, as Storm ships the topology jar), so that nimbus's and the workers' hosts
    need not have them; returns their size. Past `limit` bytes, refuses, naming the
    largest: shipping that much with every submit is a sign they belong installed."""
    size = sum(m.size for m in modules)
    if size > limit:
        biggest = ", ".join(
            f"{m.name} ({m.size:,} bytes)" for m in sorted(modules, key=lambda m: -m.size)[:3]
        )
        raise TopologyFileError(
            f"the modules the topology file imports from its directory are {size:,} bytes, "
            f"more than submit ships ({limit:,} bytes): {biggest}; install them where nimbus and "
            "the workers run and submit with --no-ship"
        )
    for m in modules:
        cloudpickle.register_pickle_by_value(sys.modules[m.name])
    return size


def load_topology(path: str | Path) -> Topology:
    return load_topology_file(path)[0]


def load_topology_file(path: str | Path, **options: Any) -> tuple[Topology, Any]:
    """The file's `topology` and an optional module-level `after_run(stats)` (run by
    `stormish run` once the topology stopped: a Spark query over a sink's output, say).
    `options`: `multilang` (a streamparse topology's components as subprocesses),
    `props` and `env_filter` (a Flux file's substitution; stormish.flux)."""
    topo, after, _ = _load(Path(path), **options)
    return topo, after


def _load(p: Path, **options: Any) -> tuple[Topology, Any, list[LocalModule]]:
    if not p.exists():
        raise TopologyFileError(f"topology file {str(p)!r} does not exist")
    if p.suffix in (".yaml", ".yml") and p.is_file():  # Flux (stormish/flux)
        from .flux import load_flux

        return load_flux(p, **options), None, []
    if p.is_dir() or p.suffix != ".py":
        raise TopologyFileError(f"topology file {str(p)!r} must be a .py or a Flux .yaml file")
    name = f"_stormish_topology_{p.stem}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise TopologyFileError(f"topology file {str(p)!r} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # its classes travel to worker processes by value: no worker can import this name
    cloudpickle.register_pickle_by_value(module)
    sys.path.insert(0, str(p.resolve().parent))
    src = _streamparse_src(p)  # a streamparse project's src/, as `sparse run` adds it
    if src is not None and src not in sys.path:
        sys.path.append(src)
    before = set(sys.modules)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        tb = traceback.extract_tb(exc.__traceback__)
        mine = str(p.resolve())
        where = next(
            (f"line {f.lineno}" for f in reversed(tb) if os.path.abspath(f.filename) == mine), ""
        )
        if src is not None:  # streamparse checks the specs as the class is made
            from .streamparse import failing_component

            where += failing_component(exc)
        raise TopologyFileError(
            f"topology file {str(p)!r} failed to import{' at ' + where if where else ''}: "
            f"{type(exc).__name__}: {exc}" + _user_traceback(tb)
        ) from exc
    finally:
        sys.path.remove(str(p.resolve().parent))
    local = _local_modules(p.resolve().parent, [n for n in sys.modules if n not in before])
    topo = getattr(module, "topology", None)
    if topo is None and "streamparse" in sys.modules:
        from .streamparse import topology_of

        topo = topology_of(module, p, bool(options.get("multilang")))
    if topo is None:
        raise TopologyFileError(
            f"topology file {str(p)!r} defines no module-level `topology` "
            "(expected `topology = Topology(...)`)"
        )
    if not isinstance(topo, Topology):
        raise TopologyFileError(
            f"topology file {str(p)!r}: `topology` is a {type(topo).__name__}, not a Topology"
        )
    after = getattr(module, "after_run", None)
    if after is not None and not callable(after):
        raise TopologyFileError(
            f"topology file {str(p)!r}: `after_run` must be a function of the final statistics"
        )
    return topo, after, local


def _streamparse_src(p: Path) -> str | None:
    """`src/` beside the directory of a topology file that imports streamparse."""
    src = p.resolve().parent.parent / "src"
    if src.is_dir() and "streamparse" in p.read_text(errors="replace"):
        return str(src)
    return None


def _local_modules(directory: Path, imported: list[str]) -> list[LocalModule]:
    """Of the modules `imported` while the topology file ran, those found in its
    `directory` (a module `NAME.py` or a package `NAME/` there), by top-level name: not
    what was installed (a virtualenv inside the directory is under site-packages, not
    a top-level name there)."""
    files: dict[str, list[str]] = {}
    for name in imported:
        top = name.split(".", 1)[0]
        where = getattr(sys.modules.get(name), "__file__", None)
        if where is None or name.startswith("_stormish_topology_"):
            continue
        f = Path(where).resolve()
        if f == directory / f"{top}.py" or (directory / top) in f.parents:
            files.setdefault(top, []).append(str(f))
    out = []
    for top, fs in sorted(files.items()):
        size = sum(Path(f).stat().st_size for f in fs if Path(f).is_file())
        out.append(LocalModule(top, tuple(sorted(fs)), size))
    return out


def load_profile(name: str) -> dict[str, Any]:
    """A wait-strategy profile: `{"config": {...}}` (a `"description"` beside it allowed,
    nothing else), or an object of stormish's config keys (a misspelt wrapper, `"confg"`,
    used to apply nothing without a word): a path to such a file,
    `workers/profiles/NAME.json` where stormish runs (users' own), or one that ships with
    stormish (stormish/profiles/)."""
    candidates = [Path(name)] if name.endswith(".json") else []
    candidates += [d / f"{name}.json" for d in PROFILE_DIRS]
    for c in candidates:
        if c.is_file():
            return _read_config(c, "profile", wrapped=True)
    shipped = _shipped_profiles()
    if name in shipped:
        with importlib.resources.as_file(shipped[name]) as path:
            return _read_config(Path(path), "profile", wrapped=True)
    known = sorted(
        {p.stem for d in PROFILE_DIRS if d.is_dir() for p in d.glob("*.json")} | set(shipped)
    )
    raise ConfigError(f"unknown profile {name!r}; known profiles: {known}")


def _shipped_profiles() -> dict[str, Any]:
    root = importlib.resources.files("stormish") / "profiles"
    return {f.name[: -len(".json")]: f for f in root.iterdir() if f.name.endswith(".json")}


def load_config_file(path: str | Path, level: str | None = None) -> dict[str, Any]:
    """A config file: a JSON object of config keys (or `{"config": {...}}`, as a
    profile), each checked as set at `level` (a daemon's, say)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    return _read_config(p, "config file", level)


WRAPPER = "config"  # a profile's keys are inside {"config": {...}}
BESIDE_WRAPPER = ("description",)  # what may stand beside it


def _read_config(
    path: Path, what: str, level: str | None = None, wrapped: bool = False
) -> dict[str, Any]:
    """The config keys of a JSON file, each checked. `wrapped` (a profile): the keys must
    be inside `{"config": {...}}`; else (a daemon's config file) a plain object of keys
    also does. Where the wrapper is, nothing but a description may stand beside it: a
    key there would be silently ignored."""
    from . import config

    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise ConfigError(f"{what} {str(path)!r} is not valid JSON: {exc}") from exc
    place = f"{what} {str(path)!r}"
    shape = f'{{"{WRAPPER}": {{...config keys...}}}} (a "description" beside it allowed)'
    if not isinstance(data, dict):
        raise ConfigError(f"{place} must hold a JSON object of config keys")
    if wrapped and WRAPPER not in data:
        # a plain object of stormish's own keys (the older form) is a profile too; any
        # other key (an application's, a misspelt wrapper) would be read by nobody
        strange = [
            k for k in data if k not in BESIDE_WRAPPER and k not in config.KEYS
            and not any(k.startswith(p) for p in config.PREFIXES)
        ]  # fmt: skip
        if strange:
            raise ConfigError(
                f"{place} must be {shape} or an object of stormish's config keys; "
                f"{strange[0]!r} is neither"
            )
        data = {k: v for k, v in data.items() if k not in BESIDE_WRAPPER}
    if WRAPPER in data:
        other = [k for k in data if k != WRAPPER and k not in BESIDE_WRAPPER]
        if other:
            raise ConfigError(
                f"{place}: key {other[0]!r} beside {WRAPPER!r} is not read; the file must "
                f"be {shape}"
            )
        conf = data[WRAPPER]
    else:
        conf = data
    if not isinstance(conf, dict):
        raise ConfigError(f"{place}: {WRAPPER!r} must be a JSON object of config keys")
    for k, v in conf.items():
        config.check_value(k, v, place, level)
    return conf


def _user_traceback(tb: traceback.StackSummary) -> str:
    """The frames of an import that raised, the user's files only (the import machinery's
    and stormish's own left out), outermost first: where in the topology file, and in a
    module it imported, the error is (a KeyError in a helper the file imports was
    reported with neither file nor line)."""
    frames = [f for f in tb if not f.filename.startswith("<") and not in_package(f.filename)]
    return "".join(f"\n  at {f.filename}:{f.lineno}: {(f.line or '').strip()}" for f in frames)
