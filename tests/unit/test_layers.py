"""No module imports upward, and every module and package has its floor.

stormish is layered, bottom to top: the core (tuples, config, errors, components, the
topology), `transport` (the wire: frames, links, security, keys, the control channel,
wake-ups), `runtime` (executors, the in-worker data plane), `local` (the local cluster:
its worker processes, their handles and the run's completion; the worker program), and
on top the programs (`cluster`, `ui`, the CLI, metrics, the test kit) and what is built
on the component API (connectors, windowing, multilang, the topology loaders). A module
may import its own layer and those below, at the top of the file or inside a function.
A module or package of stormish that FLOORS does not list fails the test: a new room
gets its floor when it is made, not the core's by default.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "stormish"
CORE, TRANSPORT, RUNTIME, LOCAL, TOP = range(5)
FLOORS = {
    # the core: the API a topology is written against, and leaves every layer uses
    "tuple": CORE, "errors": CORE, "config": CORE, "component": CORE, "topology": CORE,
    "schema": CORE, "settle": CORE, "failure": CORE, "clock": CORE, "edges": CORE,
    "names": CORE, "offsets": CORE, "pickling": CORE, "private": CORE, "logs": CORE,
    "statusline": CORE, "summary_table": CORE, "plugins": CORE, "rowcodec": CORE,
    "sources": CORE, "methods": CORE, "_speedups": CORE,  # rowcodec's compiled twin (C; optional)
    "_acking": CORE,  # runtime/fastack's compiled part (C; optional)
    "transport": TRANSPORT,
    "runtime": RUNTIME,
    "local": LOCAL,
    # the programs
    "__init__": TOP, "__main__": TOP, "cli": TOP, "cli_cluster": TOP, "monitor": TOP,
    "cluster": TOP, "ui": TOP,
    "httpd": TOP, "metrics": TOP, "lint": TOP, "loader": TOP, "testing": TOP,
    # built on the component API: connectors, windowing, other languages, loaders
    # state is a plug-in the runtime does not name (it registers in stormish.plugins)
    "state": TOP,
    "kafka": TOP, "nats": TOP, "spark": TOP, "windowing": TOP, "multilang": TOP,
    "streamparse": TOP, "flux": TOP,
}  # fmt: skip


def on_disk() -> set[str]:
    """stormish's modules (Python, or C compiled to one) and packages (those with
    Python files), by name."""
    return {p.stem for p in (*ROOT.glob("*.py"), *ROOT.glob("*.c"))} | {
        p.name for p in ROOT.iterdir() if p.is_dir() and any(p.rglob("*.py"))
    }


def layer(module: str) -> int:
    name = (module.split(".")[1:] or ["__init__"])[0]
    if name in FLOORS:
        return FLOORS[name]
    if name not in on_disk():  # `from stormish import LocalCluster`: stormish/__init__'s
        return FLOORS["__init__"]
    raise LookupError(
        f"stormish.{name} has no floor: list it in FLOORS (tests/unit/test_layers.py)"
    )


def imports(path: Path) -> list[tuple[str, int]]:
    """(the stormish module imported, line) for every import in `path`."""
    rel = path.relative_to(ROOT.parent).with_suffix("")
    package = list(rel.parts[:-1])  # a module's package; an __init__'s is its own
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "stormish" or target.startswith("stormish."):
                names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
                out += [(n, node.lineno) for n in names]
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("stormish")]
    return out


def test_no_module_imports_a_layer_above_its_own():
    upward = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        module = ".".join(p for p in rel.parts if p != "__init__")
        for target, line in imports(path):
            if layer(target) > layer(module):
                upward.append(f"{module}:{line} imports {target}")
    assert not upward, "\n".join(upward)


def test_the_layer_rule_sees_relative_and_lazy_imports(tmp_path):
    """The check itself: a lazy relative import from transport into cluster is caught."""
    assert layer("stormish.transport.security") == TRANSPORT
    assert layer("stormish.cluster.keys") == TOP > layer("stormish.runtime.worker") == RUNTIME
    src = ROOT / "transport" / "security.py"
    found = [t for t, _ in imports(src)]
    assert "stormish.transport.keys" in found  # `from .keys import load`, in a function


def test_every_module_and_package_has_its_floor():
    assert sorted(on_disk() - FLOORS.keys()) == [], "not in FLOORS: give each its floor"
    assert sorted(FLOORS.keys() - on_disk()) == [], "in FLOORS but not in stormish/"


def test_an_unlisted_module_is_an_error_not_the_core(monkeypatch):
    assert layer("stormish.errors.StormishError") == CORE
    assert layer("stormish.LocalCluster") == TOP  # a name stormish/__init__ exports
    monkeypatch.delitem(FLOORS, "errors")
    with pytest.raises(LookupError, match="stormish.errors has no floor"):
        layer("stormish.errors")
