"""The handshake's `context` as Storm sends it (TopologyContext.toJSONString).

Keys: `task->component`, `taskid`, `componentid`, `streams`, `stream->outputfields`,
`stream->target->grouping`, `source->stream->grouping`, `source->stream->fields`. A
grouping is `{"type": NAME}` with Storm's thrift field name (`SHUFFLE`, `FIELDS`, ...),
plus `"fields"` for a fields grouping; a global grouping is FIELDS with no fields, as
Storm builds it. stormish's own groupings (partial key, custom) are Storm's
CUSTOM_SERIALIZED, which is what a Java custom grouping is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_STORM_GROUPING = {
    "shuffle": "SHUFFLE",
    "local_or_shuffle": "LOCAL_OR_SHUFFLE",
    "fields": "FIELDS",
    "global": "FIELDS",
    "all": "ALL",
    "none": "NONE",
    "direct": "DIRECT",
}


def grouping_json(grouping: str, fields: tuple[str, ...]) -> dict[str, Any]:
    kind = _STORM_GROUPING.get(grouping, "CUSTOM_SERIALIZED")
    out: dict[str, Any] = {"type": kind}
    if kind == "FIELDS":
        out["fields"] = list(fields) if grouping == "fields" else []
    return out


def context_json(ctx: Any) -> dict[str, Any]:
    """The handshake context of a task, from its stormish TopologyContext."""
    sources: dict[str, dict[str, Any]] = {}
    source_fields: dict[str, dict[str, list[str]]] = {}
    for (src, stream), (grouping, fields) in ctx.sources.items():
        sources.setdefault(src, {})[stream] = grouping_json(grouping, fields)
        declared = ctx.component_streams.get(src, {}).get(stream, ())
        source_fields.setdefault(src, {})[stream] = list(declared)
    targets = {
        stream: {t: grouping_json(g, f) for t, (g, f) in subs.items()}
        for stream, subs in ctx.targets.items()
    }
    streams: Mapping[str, tuple[str, ...]] = {
        k: v for k, v in ctx.streams.items() if not k.startswith("__")
    }
    return {
        "task->component": {str(t): c for t, c in ctx.task_components.items()},
        "taskid": ctx.task_id,
        "componentid": ctx.component_id,
        "streams": sorted(streams),
        "stream->outputfields": {k: list(v) for k, v in streams.items()},
        "stream->target->grouping": targets,
        "source->stream->grouping": sources,
        "source->stream->fields": source_fields,
    }


def conf_json(conf: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The topology's config as the child gets it: JSON-safe values only (a value JSON
    cannot carry is passed as its repr, as a Java object's toString would be)."""
    out: dict[str, Any] = {"topology.name": name}
    for k, v in conf.items():
        out[str(k)] = v if _plain(v) else repr(v)
    return out


def _plain(v: Any) -> bool:
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    if isinstance(v, (list, tuple)):
        return all(_plain(x) for x in v)
    if isinstance(v, Mapping):
        return all(isinstance(k, str) and _plain(x) for k, x in v.items())
    return False
