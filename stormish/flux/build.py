"""A checked Flux definition (parse.py) -> a stormish Topology, as Storm's FluxBuilder
builds one: components first (in order, so a `ref` names one defined before it), then
spouts, bolts and the streams between them; or the topology a `topologySource` makes."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from ..component import Bolt, Spout
from ..errors import StormishError, TopologyFileError
from ..streamparse.spec import say_dropped
from ..topology import Topology
from .objects import configure, import_class, make, setup_ops
from .parse import Node
from .shell import FluxShell

GROUPINGS = {
    "SHUFFLE": "shuffle_grouping",
    "LOCAL_OR_SHUFFLE": "local_or_shuffle_grouping",
    "ALL": "all_grouping",
    "GLOBAL": "global_grouping",
    "NONE": "none_grouping",
    "DIRECT": "direct_grouping",
}


def build(top: Node, path: Path, multilang: bool = False) -> Topology:
    config, dropped = _storm_config(top, "config", {}, "topology")
    name = top.get("name")
    if name is None:  # no name: the file's (a topologySource keeps its own)
        name = path.stem
    elif not isinstance(name, str):
        raise TopologyFileError(f"{top.at('name')}: 'name' must be a string")
    else:  # written, even empty: checked as a topologySource's is, at its line
        from ..names import check_name

        _guard(top, "name", lambda: check_name(name, "topology name"))
    if top.get("workerHooks"):
        raise TopologyFileError(
            f"{top.at('workerHooks')}: workerHooks are Storm worker hooks (Java); stormish "
            "has none: do that work in a spout's open() or a bolt's prepare()"
        )
    beans: dict[str, Any] = {}
    for comp in top.get("components") or []:
        ident = _ident(comp, "component", beans)
        beans[ident] = make(comp, beans, f"component {ident!r}")
    if top.get("topologySource"):
        topology = _from_source(top, config, beans)
    else:
        topology = _wire(top, name, config, beans, path, multilang)
    say_dropped(dropped, str(path), "stormish.flux")
    topology.storm_only_config = dropped  # type: ignore[attr-defined]
    return topology


def _storm_config(
    node: Node, key: str, extra: dict[str, Any], level: str
) -> tuple[dict[str, Any], list[str]]:
    """`node[key]` (a config mapping) over `extra` (a shell component's
    addComponentConfig), as stormish takes a Storm config (streamparse.spec.storm_config):
    Storm's keys stormish does not use set aside, every other key checked where it is
    written, so that a typo (`topology.tick.tuple.freq.sec`) is an error naming the file,
    the line and the key it is close to, not a setting silently dropped."""
    from .. import config as _config

    written = node.get(key)
    if written is not None and not isinstance(written, Node):
        raise TopologyFileError(
            f"{node.at(key)}: {key!r} must be a mapping of config keys to values, got "
            f"{type(written).__name__}"
        )
    where = f"{level} config"
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for k, v in extra.items():  # no line of its own: the component's
        if _config.is_storm_only(k):
            dropped.append(k)
        else:
            _guard(node, "className", lambda k=k, v=v: _config.check_value(k, v, where, level))
            kept[k] = v
    if isinstance(written, Node):
        for k, v in written.items():
            if isinstance(k, str) and _config.is_storm_only(k):
                dropped.append(k)
                continue
            _guard(written, k, lambda k=k, v=v: _config.check_value(k, v, where, level))
            kept[k] = v
    return kept, sorted(set(dropped))


def _ident(node: Node, kind: str, seen: Any) -> str:
    ident = node.get("id")
    if not isinstance(ident, str) or not ident:
        raise TopologyFileError(f"{node.at()}: a {kind} needs an 'id'")
    if ident in seen:
        raise TopologyFileError(f"{node.at('id')}: duplicate {kind} id {ident!r}")
    return ident


def _wire(top: Node, name: str, config: dict, beans: dict, path: Path, multilang: bool) -> Topology:
    if not top.get("spouts"):
        raise TopologyFileError(f"{top.at()}: a Flux topology needs 'spouts' (or a topologySource)")
    topology = _guard(top, "name", lambda: Topology(name, config=config))
    declarers: dict[str, Any] = {}
    for kind in ("spout", "bolt"):
        for vertex in top.get(f"{kind}s") or []:
            ident = _ident(vertex, kind, declarers)
            declarers[ident] = _vertex(topology, vertex, ident, kind, beans, path, multilang)
    for stream in top.get("streams") or []:
        _stream(stream, declarers, beans)
    _tell_pystorm_bolts(topology)
    return topology


def _is_pystorm(cls: Any) -> bool:
    pystorm = sys.modules.get("pystorm")
    return pystorm is not None and isinstance(cls, type) and issubclass(cls, pystorm.Component)


def _pystorm(cls: type, kind: str, multilang: bool, path: Path) -> Any:
    from ..streamparse.adapter import PystormBolt, PystormSpout
    from ..streamparse.shell import shell_component
    from ..streamparse.spec import declared_outputs

    streams = declared_outputs(cls)
    if multilang:
        argv = ["streamparse_run", f"{cls.__module__}.{cls.__qualname__}"]
        return shell_component(argv, streams, kind == "spout", path, path.resolve().parent)
    return PystormSpout(cls, streams) if kind == "spout" else PystormBolt.of(cls, streams, {})


def _tell_pystorm_bolts(topology: Topology) -> None:
    """A pystorm bolt learns its inputs' fields (its tuples' namedtuples) once the
    streams are known."""
    from ..streamparse.adapter import PystormBolt

    for spec in topology.components.values():
        if isinstance(spec.obj, PystormBolt):
            spec.obj.sources = {
                s.source: dict(topology.components[s.source].streams) for s in spec.subscriptions
            }


def _vertex(
    topology: Topology,
    node: Node,
    ident: str,
    kind: str,
    beans: dict,
    path: Path,
    multilang: bool,
) -> Any:
    extra: dict[str, Any] = {}
    cls = import_class(node)
    if _is_pystorm(cls):  # a streamparse/pystorm class: in-process (stormish.streamparse)
        ops = setup_ops(node, beans, f"{kind} {ident!r}")
        if ops and multilang:
            raise TopologyFileError(
                f"{node.at()}: {kind} {ident!r}: properties and configMethods of a "
                "streamparse/pystorm class apply in-process; with --multilang its process "
                "is made by streamparse_run, which takes none"
            )
        obj = _pystorm(cls, kind, multilang, path)
        if ops:
            obj.setup = functools.partial(configure, ops)
    else:
        obj = make(node, beans, f"{kind} {ident!r}")
    if isinstance(obj, FluxShell):
        if obj.is_spout != (kind == "spout"):
            raise TopologyFileError(f"{node.at('className')}: {kind} {ident!r} is a shell {kind}?")
        extra = obj.config
        obj = _guard(node, "className", lambda: obj.component(path))
    want = Spout if kind == "spout" else Bolt
    if not isinstance(obj, want):
        raise TopologyFileError(
            f"{node.at('className')}: {kind} {ident!r}: {node['className']} makes a "
            f"{type(obj).__name__}, not a stormish {want.__name__}"
        )
    tasks = node.get("numTasks") or node.get("parallelism", 1)  # a task per executor here
    setter: Any = topology.set_spout if kind == "spout" else topology.set_bolt
    declarer = _guard(node, "parallelism", lambda: setter(ident, obj, tasks))
    conf, dropped = _storm_config(node, "config", extra, "component")
    say_dropped(dropped, f"{node.at()}: {kind} {ident!r}", "stormish.flux")
    for k, v in conf.items():
        _guard(node, "config", lambda k=k, v=v: declarer.add_configuration(k, v))
    return declarer


def _stream(node: Node, declarers: dict[str, Any], beans: dict[str, Any]) -> None:
    src, dst = node.get("from"), node.get("to")
    for key, ident in (("from", src), ("to", dst)):
        if ident not in declarers:
            raise TopologyFileError(
                f"{node.at(key)}: stream {key} {ident!r}: no spout or bolt has that id; "
                f"known: {sorted(declarers)}"
            )
    grouping = node.get("grouping")
    if not isinstance(grouping, Node):
        raise TopologyFileError(f"{node.at()}: stream {src!r} -> {dst!r} needs a 'grouping'")
    kind = str(grouping.get("type", "")).upper()
    stream = grouping.get("streamId") or "default"
    declarer = declarers[str(dst)]
    if kind == "FIELDS":
        fields = grouping.get("args")
        call = lambda: declarer.fields_grouping(src, list(fields or []), stream)  # noqa: E731
    elif kind == "CUSTOM":
        custom = grouping.get("customClass")
        if not isinstance(custom, Node):
            raise TopologyFileError(f"{grouping.at('type')}: a CUSTOM grouping needs customClass")
        chooser = make(custom, beans, f"stream {src!r} -> {dst!r} customClass")
        call = lambda: declarer.custom_grouping(src, chooser, stream)  # noqa: E731
    elif kind in GROUPINGS:
        call = lambda: getattr(declarer, GROUPINGS[kind])(src, stream)  # noqa: E731
    else:
        raise TopologyFileError(
            f"{grouping.at('type')}: unknown grouping type {grouping.get('type')!r}; Flux "
            f"knows {sorted([*GROUPINGS, 'FIELDS', 'CUSTOM'])}"
        )
    _guard(grouping, "type", call)


def _from_source(top: Node, config: dict, beans: dict) -> Topology:
    """`topologySource`: an object whose `getTopology(config)` (or `methodName`; or
    its snake_case spelling) returns the stormish Topology; Flux's config is submitted with
    it, over what the code set (Storm's Flux submits the file's config)."""
    node = top["topologySource"]
    if top.get("spouts") or top.get("bolts") or top.get("streams"):
        raise TopologyFileError(
            f"{top.at('topologySource')}: a topologySource excludes spouts, bolts and streams"
        )
    import_class(node)
    source = make(node, beans, "topologySource")
    from .objects import _method

    method = _method(source, node.get("methodName") or "getTopology", node, "className")
    topology = _guard(node, "className", lambda: method(dict(config)))
    if not isinstance(topology, Topology):
        raise TopologyFileError(
            f"{node.at('className')}: topologySource returned a {type(topology).__name__}, "
            "not a stormish Topology"
        )
    topology.config.update(config)  # Storm submits the Flux config as the topology's
    name = top.get("name")
    if name is not None:  # Storm's Flux submits under the file's name, a source's too
        if not isinstance(name, str):
            raise TopologyFileError(f"{top.at('name')}: 'name' must be a string")
        from ..names import check_name

        topology.name = _guard(top, "name", lambda: check_name(name, "topology name"))
    return topology


def _guard(node: Node, key: str, fn: Any) -> Any:
    """`fn()`, a stormish error in it named with the file and line of `key`."""
    try:
        return fn()
    except TopologyFileError:
        raise
    except StormishError as exc:
        raise TopologyFileError(f"{node.at(key)}: {exc}") from exc
