"""Reading a Flux file: substitution (substitute.py), YAML with PyYAML's safe loader,
every key checked against Flux's model (Storm's flux-core `model/*Def`), includes merged.

The YAML is composed (`yaml.compose`) and built into `Node`s, dicts that know the file and
line of each key, so that an unknown key, a bad value or a class that cannot be imported
is an error naming the file, the line and the key. Scalars are made by PyYAML's
SafeLoader: no tag can make an object."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import TopologyFileError
from .substitute import substitute

log = logging.getLogger("stormish.flux")

OBJECT = ("id", "className", "constructorArgs", "properties", "configMethods", "factory",
          "factoryArgs")  # fmt: skip
RESOURCES = ("onHeapMemoryLoad", "offHeapMemoryLoad", "cpuLoad")  # Storm's RAS: read, unused
VERTEX = (*OBJECT, "parallelism", "numTasks", "config", *RESOURCES)
SCHEMA: dict[str, tuple[str, ...]] = {
    "topology": (
        "name",
        "config",
        "components",
        "spouts",
        "bolts",
        "streams",
        "includes",
        "topologySource",
        "workerHooks",
    ),  # fmt: skip
    "component": OBJECT,
    "spout": VERTEX,
    "bolt": VERTEX,
    "stream": ("name", "from", "to", "grouping"),
    "grouping": ("type", "streamId", "args", "customClass"),
    "customClass": OBJECT,
    "topologySource": (*OBJECT, "methodName"),
    "include": ("resource", "file", "override"),
    "property": ("name", "value", "ref"),
    "configMethod": ("name", "args"),
}
LISTS = {
    "components": "component",
    "spouts": "spout",
    "bolts": "bolt",
    "streams": "stream",
    "includes": "include",
    "properties": "property",
    "configMethods": "configMethod",
}
NESTED = {"grouping": "grouping", "customClass": "customClass", "topologySource": "topologySource"}


MAP, SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


class Node(dict):
    """A YAML mapping with where it and each of its keys are (file, line)."""

    file: str = ""
    line: int = 0
    lines: dict[str, int]
    # the top file's: the directories of the files it included, whose classes are
    # imported from there as the including file's are from its own
    included_dirs: tuple[str, ...] = ()

    def at(self, key: str | None = None) -> str:
        line = self.lines.get(key, self.line) if key is not None else self.line
        return f"{self.file}:{line}"


def read(path: Path, props: Mapping[str, str], env: bool, includes: bool = True) -> Node:
    """The Flux file at `path` as checked `Node`s, its includes merged (one level, as
    Storm's: an included file's own includes are not read)."""
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologyFileError(f"Flux file {where!r} cannot be read: {exc}") from exc
    text, missing = substitute(text, props, env, where)
    for var in missing:
        log.warning("%s: no value for ${%s} (--filter, --env-filter): left as it is", where, var)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise TopologyFileError(f"Flux file {where!r} is not valid YAML: {exc}") from exc
    if root is None:
        raise TopologyFileError(f"Flux file {where!r} is empty")
    try:
        top = _build(root, where, yaml.SafeLoader(""))
    except yaml.YAMLError as exc:  # a tag the safe loader does not make, say
        raise TopologyFileError(f"Flux file {where!r} is not valid YAML: {exc}") from exc
    if not isinstance(top, Node):
        raise TopologyFileError(f"{where}:1: a Flux file is a mapping (name, spouts, bolts, ...)")
    check(top, "topology")
    if includes and top.get("includes"):
        for inc in top["includes"]:
            _include(top, inc, path, props, env)
    return top


def _build(node: yaml.Node, where: str, loader: yaml.SafeLoader) -> Any:
    if node.tag not in (MAP, SEQ) and not isinstance(node, yaml.ScalarNode):
        return loader.construct_object(node, deep=True)  # the safe loader's, or its error
    if isinstance(node, yaml.MappingNode):
        out = Node()
        out.file, out.line, out.lines = where, node.start_mark.line + 1, {}
        for k, v in node.value:
            key = loader.construct_object(k, deep=True)
            out[key] = _build(v, where, loader)
            out.lines[key] = k.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(v, where, loader) for v in node.value]
    return loader.construct_object(node, deep=True)


def check(node: Node, kind: str) -> None:
    """Every key of `node` (a Flux `kind`) is one Flux knows, recursively; lists and
    nested objects are of the types Flux gives them."""
    known = SCHEMA[kind]
    for key, value in node.items():
        if key not in known:
            raise TopologyFileError(
                f"{node.at(key)}: unknown key {key!r} in {_what(node, kind)}; "
                f"Flux knows {sorted(known)}"
            )
        sub = LISTS.get(key)
        if sub is not None:
            _check_list(node, key, value, sub)
        elif key in NESTED:
            if not isinstance(value, Node):
                raise TopologyFileError(f"{node.at(key)}: {key!r} must be a mapping")
            check(value, NESTED[key])
        elif key == "config" and value is not None and not isinstance(value, Node):
            raise TopologyFileError(f"{node.at(key)}: 'config' must be a mapping of keys")


def _check_list(node: Node, key: str, value: Any, kind: str) -> None:
    if value is None:
        return
    if not isinstance(value, list):
        raise TopologyFileError(f"{node.at(key)}: {key!r} must be a list")
    for item in value:
        if not isinstance(item, Node):
            raise TopologyFileError(f"{node.at(key)}: each of {key!r} must be a mapping")
        check(item, kind)


def _what(node: Node, kind: str) -> str:
    ident = node.get("id") or node.get("name")
    return f"{kind} {ident!r}" if isinstance(ident, str) and kind != "topology" else kind


def _include(top: Node, inc: Node, path: Path, props: Mapping[str, str], env: bool) -> None:
    """Storm's processIncludes: name and config (override or fill in), components, spouts
    and bolts by id (override or keep), streams appended."""
    f = inc.get("file")
    if not isinstance(f, str):
        raise TopologyFileError(f"{inc.at('file')}: an include needs 'file'")
    found = _resolve(f, bool(inc.get("resource")), path, inc)
    other = read(found, props, env, False)
    here = str(found.resolve().parent)
    if here not in top.included_dirs:
        top.included_dirs = (*top.included_dirs, here)
    override = bool(inc.get("override", False))
    if other.get("name") is not None and (override or top.get("name") is None):
        top["name"] = other["name"]
        top.lines["name"] = other.lines["name"]
    if other.get("workerHooks"):  # Storm merges them; stormish has none to run
        raise TopologyFileError(
            f"{other.at('workerHooks')}: workerHooks are Storm worker hooks (Java); stormish "
            "has none: do that work in a spout's open() or a bolt's prepare()"
        )
    if other.get("config"):
        conf = top.get("config")
        if not isinstance(conf, Node):  # absent, or `config:` with nothing under it
            conf = top["config"] = _empty(top)
        for k, v in other["config"].items():
            if override or k not in conf:
                conf[k] = v
    for key in ("components", "spouts", "bolts"):
        if other.get(key):
            top[key] = _merge_by_id(top.get(key) or [], other[key], override)
    if other.get("streams"):
        top["streams"] = list(top.get("streams") or []) + list(other["streams"])


def _empty(parent: Node) -> Node:
    n = Node()
    n.file, n.line, n.lines = parent.file, parent.line, {}
    return n


def _merge_by_id(mine: list, theirs: list, override: bool) -> list:
    out = {d.get("id"): d for d in mine}
    for d in theirs:
        if override or d.get("id") not in out:
            out[d.get("id")] = d
    return list(out.values())


def _resolve(name: str, resource: bool, path: Path, inc: Node) -> Path:
    """An included file: `resource: true` is looked up as Storm looks on the classpath,
    here the including file's directory and the directories above it (a resource names
    a file from the classpath root, which the including file sits under: flux-core's
    `configs/include_test.yaml` includes `/configs/shell_test.yaml`), then the import
    path (sys.path); a file is relative to the including file's directory, then the
    working directory."""
    import sys

    rel = name.lstrip("/") if resource else name
    here = path.resolve().parent
    bases = [here]
    if resource:
        bases += [*here.parents, *(Path(p) for p in sys.path if p)]
    if not resource and Path(name).is_absolute():
        bases = [Path("/")]
    for base in [*bases, Path.cwd()]:
        candidate = base / rel
        if candidate.is_file():
            return candidate
    raise TopologyFileError(
        f"{inc.at('file')}: included {'resource' if resource else 'file'} {name!r} not found"
    )
