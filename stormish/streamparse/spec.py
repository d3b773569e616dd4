"""A streamparse `Topology` subclass -> a stormish Topology: its specs (components, `par`,
inputs with their groupings, outputs and streams, config) read as Storm would read the
Thrift topology streamparse makes of them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import config as _config
from ..errors import StormishError, TopologyError, TopologyFileError
from ..topology import Topology

STREAMPARSE_RUN = "streamparse_run"
TICK_KEY = "topology.tick.tuple.freq.secs"
LOGGER = "stormish.streamparse"


def find_topology_class(module: Any) -> type | None:
    """The module's streamparse Topology subclass, as `sparse` finds it (the first)."""
    from streamparse import Topology as SPTopology

    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, SPTopology) and value is not SPTopology:
            return value
    return None


def build(topo_cls: Any, path: Path, multilang: bool = False) -> Topology:
    """The stormish topology of `topo_cls`, named after its file as `sparse run` names it;
    errors name the file and the component."""
    where = f"topology file {str(path)!r}"
    try:
        conf, dropped = storm_config(_mapping(topo_cls.config, "config"), "topology config")
    except StormishError as exc:
        raise TopologyFileError(f"{where}: {exc}") from exc
    topology = Topology(path.stem, config=conf)
    topology.storm_only_config = dropped  # type: ignore[attr-defined]
    say_dropped(dropped, where, LOGGER)
    outputs = {s.name: _streams(s) for s in topo_cls.specs}
    for spec in sorted(topo_cls.specs, key=lambda s: not _is_spout(s)):
        try:
            _add(topology, spec, outputs, path, multilang)
        except StormishError as exc:
            raise TopologyFileError(f"{where}: component {spec.name!r}: {exc}") from exc
    return topology


def storm_config(
    conf: Mapping[str, Any], where: str = "", level: str = "topology"
) -> tuple[dict[str, Any], list[str]]:
    """Storm's topology (or, `level` "component", a component's) config as stormish takes
    it: the keys stormish declares and the application's own keys pass, checked as the
    Python API checks them; Storm's keys stormish has no use for
    (`topology.worker.childopts`, say) are set aside and named, not refused: the file was
    written for Storm. A key that is neither (a typo, `topology.workerz`) is a
    ConfigError naming it and `where`, with the key it is close to (config.split_storm)."""
    return _config.split_storm(conf, where, level)


def say_dropped(dropped: list[str], where: str, logger: str) -> None:
    """The warning for Storm's keys set aside (storm_config): named, so that a key
    someone expected to act is not lost without a word."""
    if dropped:
        import logging

        logging.getLogger(logger).warning(
            "%s: Storm config keys stormish does not use, ignored: %s", where, ", ".join(dropped)
        )


def _mapping(conf: Any, what: str) -> dict[str, Any]:
    """A spec's config as a dict (streamparse allows a JSON string); anything else is an
    error naming it, not a bare ValueError out of dict()."""
    if isinstance(conf, str):
        try:
            conf = json.loads(conf or "{}")
        except ValueError as exc:
            raise TopologyError(f"{what} is not valid JSON: {exc}") from None
    if conf is None:
        return {}
    if not isinstance(conf, Mapping):
        raise TopologyError(
            f"{what} must be a mapping of config keys to values, got {type(conf).__name__}"
        )
    return dict(conf)


def declared_outputs(cls: type) -> dict[str, tuple[str, ...]]:
    """A streamparse class's `outputs` (field names, or `Stream`s) as streams."""
    from streamparse.dsl.stream import Stream

    streams: dict[str, tuple[str, ...]] = {}
    for out in getattr(cls, "outputs", None) or []:
        if isinstance(out, Stream):
            streams[out.name] = tuple(out.fields)
        else:
            streams["default"] = (*streams.get("default", ()), str(out))
    return streams


def _is_spout(spec: Any) -> bool:
    from streamparse.dsl.spout import JavaSpoutSpec, ShellSpoutSpec

    return isinstance(spec, (JavaSpoutSpec, ShellSpoutSpec))


def _streams(spec: Any) -> dict[str, tuple[str, ...]]:
    return {name: tuple(info.output_fields) for name, info in (spec.outputs or {}).items()}


def _add(
    topology: Topology,
    spec: Any,
    outputs: Mapping[str, dict],
    path: Path,
    multilang: bool,
) -> None:
    from streamparse.dsl.component import JavaComponentSpec

    if isinstance(spec, JavaComponentSpec):
        raise TopologyError(
            "a Java component (JavaBolt/JavaSpout.spec) cannot run in stormish: write it "
            "in Python or as a multilang ShellBolt/ShellSpout"
        )
    par = spec.par
    if isinstance(par, dict):
        raise TopologyError(f"par per environment {par!r} is not supported: give one integer")
    streams = outputs[spec.name]
    sources = {src: outputs[src] for src in {g.componentId for g in spec.inputs or {}}}
    comp = _component(spec, streams, sources, path, multilang)
    if _is_spout(spec):
        declarer = topology.set_spout(spec.name, comp, par)
    else:
        declarer = topology.set_bolt(spec.name, comp, par)
        for gsid, grouping in (spec.inputs or {}).items():
            _subscribe(declarer, gsid.componentId, gsid.streamId, grouping)
    own = _mapping(spec.config, "config")
    kept, dropped = storm_config(own, "component config", "component")
    say_dropped(dropped, f"topology file {str(path)!r}: component {spec.name!r}", LOGGER)
    for k, v in kept.items():
        declarer.add_configuration(k, v)
    secs = getattr(comp, "batch_every", None)
    if secs is not None and TICK_KEY not in own and TICK_KEY not in topology.config:
        declarer.set_tick_frequency(secs)  # a TicklessBatchingBolt's timer (adapter.py)


def _component(spec: Any, streams: dict, sources: dict, path: Path, multilang: bool) -> Any:
    import pystorm

    shell = spec.component_object.shell
    command, script = shell.execution_command, shell.script
    cls = spec.component_cls
    python = command == STREAMPARSE_RUN and isinstance(cls, type)
    if python and not multilang and issubclass(cls, pystorm.Bolt):
        from .adapter import PystormBolt

        return PystormBolt.of(cls, streams, sources)
    if python and not multilang and issubclass(cls, pystorm.Spout):
        from .adapter import PystormSpout

        return PystormSpout(cls, streams)
    from .shell import shell_component, src_dir

    argv = [command, script] if script else [command]  # as Storm runs it: one argument
    return shell_component(argv, streams, _is_spout(spec), path, src_dir(path))


def _subscribe(declarer: Any, source: str, stream: str, grouping: Any) -> None:
    """streamparse's Grouping (Storm's Thrift union) -> the stormish grouping."""
    kind = next((k for k, v in vars(grouping).items() if v is not None), "shuffle")
    if kind == "fields":
        if grouping.fields:
            declarer.fields_grouping(source, list(grouping.fields), stream)
        else:  # Storm's global grouping is fields with none
            declarer.global_grouping(source, stream)
    elif kind in ("shuffle", "all", "none", "direct", "local_or_shuffle"):
        getattr(declarer, f"{kind}_grouping")(source, stream)
    else:
        raise TopologyError(
            f"the {kind} grouping on {source!r} stream {stream!r} names a Java class, "
            "which stormish cannot run; use a Python grouping in a Flux file or the "
            "stormish API (custom_grouping)"
        )
