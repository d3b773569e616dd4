"""No module imports upward.

stormish is layered, bottom to top: the core (tuples, config, errors, components, the
topology), `transport` (the wire: frames, links, security, keys, the control channel,
wake-ups), `runtime` (executors, the in-worker data plane), `local` (the local cluster: its worker
processes, their handles and the run's completion; the worker program), and the
programs on top (`cluster`, `ui`, `spark`, the CLI, metrics, the test kit). A module may
import its own layer and those below, at the top of the file or inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "stormish"
CORE, TRANSPORT, RUNTIME, LOCAL, TOP = range(5)
TOP_MODULES = {
    "cli", "cli_cluster", "metrics", "httpd", "lint", "loader", "testing",
    "__init__", "__main__",
}  # fmt: skip
PACKAGES = {
    "transport": TRANSPORT, "runtime": RUNTIME, "local": LOCAL,
    "cluster": TOP, "ui": TOP, "spark": TOP,
}  # fmt: skip
# the test kit's in-memory brokers sit low: the connectors open them for memory:// URLs
SUBMODULES = {"testing.memory_log": CORE, "testing.jetstream": CORE}


def layer(module: str) -> int:
    parts = module.split(".")[1:] or ["__init__"]
    if ".".join(parts[:2]) in SUBMODULES:
        return SUBMODULES[".".join(parts[:2])]
    if parts[0] in PACKAGES:
        return PACKAGES[parts[0]]
    return TOP if parts[0] in TOP_MODULES else CORE


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
