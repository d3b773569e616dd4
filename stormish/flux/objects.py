"""Flux's object definitions made Python objects (Storm's FluxBuilder, by reflection):
`className` imported, `constructorArgs` (with `ref`/`reflist` to components) or
`factory`/`factoryArgs`, then `properties` set and `configMethods` called."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Mapping
from typing import Any

from ..errors import TopologyFileError
from .parse import Node
from .shell import SHELL_CLASSES


def import_class(node: Node, key: str = "className") -> Any:
    """The class (or callable) a `className` names, as `package.module.Class`; Storm's
    Flux shell wrappers are stormish's (shell.py). An error names the file and line."""
    name = node.get(key)
    if not isinstance(name, str) or "." not in name:
        raise TopologyFileError(
            f"{node.at(key)}: {key} must be a Python import path 'package.module.Class', "
            f"got {name!r}"
        )
    if name in SHELL_CLASSES:
        return SHELL_CLASSES[name]
    module, _, attr = name.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        hint = " (a Java class: give a Python class in its place)" if _javaish(name) else ""
        raise TopologyFileError(
            f"{node.at(key)}: {key} {name!r} cannot be imported{hint}: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise TopologyFileError(
            f"{node.at(key)}: importing {key} {name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return found


def _javaish(name: str) -> bool:
    return name.startswith(("org.apache.", "com.", "java.")) or "$" in name


def make(node: Node, beans: Mapping[str, Any], what: str) -> Any:
    """The object `node` defines: constructed, then its properties and config methods."""
    cls = import_class(node)
    try:
        if node.get("factory"):
            factory = _method(cls, node["factory"], node, "factory")
            args = resolve_args(node.get("factoryArgs"), beans, node, "factoryArgs")
            label = f"factory {node['className']}.{factory.__name__}"
            key = "factoryArgs" if "factoryArgs" in node else "factory"
            check_arity(factory, args, node, key, what, label)
            obj = factory(*args)
        else:
            args = resolve_args(node.get("constructorArgs"), beans, node, "constructorArgs")
            key = "constructorArgs" if "constructorArgs" in node else "className"
            check_arity(cls, args, node, key, what, str(node["className"]))
            obj = cls(*args)
    except TopologyFileError:
        raise
    except Exception as exc:
        raise TopologyFileError(
            f"{node.at('className')}: {what}: {node['className']}(...) failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    for prop in node.get("properties") or []:
        _set_property(obj, prop, beans, what)
    for call in node.get("configMethods") or []:
        _config_method(obj, call, beans, what)
    return obj


def setup_ops(node: Node, beans: Mapping[str, Any], what: str) -> list[tuple[str, str, Any]]:
    """`properties` and `configMethods` of an object the runtime makes later (a pystorm
    class: each task's instance is made with its streams), as plain operations
    (refs resolved) that `configure` applies to each instance; a method named that the
    class does not have is an error here, naming its line."""
    cls = import_class(node)
    for key in ("constructorArgs", "factory", "factoryArgs"):
        if node.get(key) is not None:
            raise TopologyFileError(
                f"{node.at(key)}: {what}: a streamparse/pystorm class is made by the runtime "
                f"with its streams, so '{key}' cannot apply: use properties or configMethods"
            )
    ops: list[tuple[str, str, Any]] = []
    for prop in node.get("properties") or []:
        name = prop.get("name")
        if not isinstance(name, str):
            raise TopologyFileError(f"{prop.at()}: a property needs a 'name'")
        value = _bean(prop["ref"], beans, prop, "ref") if "ref" in prop else prop.get("value")
        ops.append(("property", name, value))
    for call in node.get("configMethods") or []:
        name = call.get("name")
        if not isinstance(name, str):
            raise TopologyFileError(f"{call.at()}: a config method needs a 'name'")
        method = _method(cls, name, call, "name")
        ops.append(("call", method.__name__, resolve_args(call.get("args"), beans, call, "args")))
    return ops


def configure(ops: list[tuple[str, str, Any]], obj: Any) -> None:
    """`setup_ops`' operations on a new instance, as `make` applies them (a setter
    `setName` or `set_name`, else the attribute; a method with its args)."""
    for kind, name, value in ops:
        if kind == "call":
            getattr(obj, name)(*value)
            continue
        for setter in (f"set{name[:1].upper()}{name[1:]}", f"set_{snake(name)}"):
            method = getattr(obj, setter, None)
            if callable(method):
                method(value)
                break
        else:
            setattr(obj, name, value)


def resolve_args(args: Any, beans: Mapping[str, Any], node: Node, key: str) -> list[Any]:
    """Flux arguments: `{ref: id}` is that component, `{reflist: [ids]}` the list of
    them; anything else is the value itself."""
    if args is None:
        return []
    if not isinstance(args, list):
        raise TopologyFileError(f"{node.at(key)}: {key!r} must be a list")
    return [_arg(a, beans, node, key) for a in args]


def _arg(a: Any, beans: Mapping[str, Any], node: Node, key: str) -> Any:
    if isinstance(a, Node) and len(a) == 1 and "ref" in a:
        return _bean(a["ref"], beans, a, "ref")
    if isinstance(a, Node) and len(a) == 1 and "reflist" in a:
        return [_bean(r, beans, a, "reflist") for r in a["reflist"] or []]
    return a


def _bean(ref: Any, beans: Mapping[str, Any], node: Node, key: str) -> Any:
    if ref not in beans:
        raise TopologyFileError(
            f"{node.at(key)}: {key} {ref!r} names no component defined before it; "
            f"components: {sorted(beans)}"
        )
    return beans[ref]


def _set_property(obj: Any, prop: Node, beans: Mapping[str, Any], what: str) -> None:
    """Storm calls the setter `setName`, else sets the public field `name`; here also a
    `set_name` method, else the attribute."""
    name = prop.get("name")
    if not isinstance(name, str):
        raise TopologyFileError(f"{prop.at()}: a property needs a 'name'")
    value = _bean(prop["ref"], beans, prop, "ref") if "ref" in prop else prop.get("value")
    for setter in (f"set{name[:1].upper()}{name[1:]}", f"set_{snake(name)}"):
        method = getattr(obj, setter, None)
        if callable(method):
            _call(method, [value], prop, what, f"property {name!r}")
            return
    try:
        setattr(obj, name, value)
    except Exception as exc:
        raise TopologyFileError(
            f"{prop.at('name')}: {what}: property {name!r} cannot be set: {exc}"
        ) from exc


def _config_method(obj: Any, call: Node, beans: Mapping[str, Any], what: str) -> None:
    name = call.get("name")
    if not isinstance(name, str):
        raise TopologyFileError(f"{call.at()}: a config method needs a 'name'")
    method = _method(obj, name, call, "name")
    args = resolve_args(call.get("args"), beans, call, "args")
    check_arity(method, args, call, "name", what, f"config method {name}")
    _call(method, args, call, what, name)


def check_arity(fn: Any, args: list, node: Node, key: str, what: str, label: str) -> None:
    """Storm's Flux finds the constructor, factory or method that takes the arguments
    given, or says none does ("Unable to find configuration method"); here a call whose
    arguments the callable cannot take is that error, naming its parameters, before it is
    made (not a TypeError that counts `self` among the arguments)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin with no signature: the call will say
        return
    try:
        sig.bind(*args)
    except TypeError:
        stars: dict[Any, str] = {
            inspect.Parameter.VAR_POSITIONAL: "*",
            inspect.Parameter.VAR_KEYWORD: "**",
        }
        params = ", ".join(stars.get(p.kind, "") + p.name for p in sig.parameters.values())
        raise TopologyFileError(
            f"{node.at(key)}: {what}: {label}({params}) cannot take the {len(args)} "
            f"argument(s) given"
        ) from None


def _method(obj: Any, name: str, node: Node, key: str) -> Any:
    """`name` on `obj`, or its snake_case spelling (a Java `withFoo` is `with_foo`)."""
    for n in (name, snake(name)):
        m = getattr(obj, n, None)
        if callable(m):
            return m
    raise TopologyFileError(
        f"{node.at(key)}: {getattr(obj, '__name__', type(obj).__name__)} has no method "
        f"{name!r}" + (f" or {snake(name)!r}" if snake(name) != name else "")
    )


def _call(method: Any, args: list, node: Node, what: str, label: str) -> None:
    try:
        method(*args)
    except Exception as exc:
        raise TopologyFileError(
            f"{node.at()}: {what}: {label}: {type(exc).__name__}: {exc}"
        ) from exc


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
