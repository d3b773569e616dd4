"""Making a pystorm component live inside a stormish task instead of a subprocess.

A pystorm `Component.__init__` opens a serializer on stdin/stdout and installs a signal
handler (which only the main thread may do), and `_setup_component` hangs a handler on the
root logger that writes to Storm: neither belongs in a worker thread. So the instance is
made with `cls.__new__`, given the attributes those would have set, and what it would have
sent Storm (`send_message`: emit, ack, fail, log, error, metrics, sync) is handled here,
one call each, with no serialization."""

from __future__ import annotations

import logging
import re
import threading
from collections import namedtuple
from collections.abc import Callable, Mapping
from io import BytesIO
from typing import Any

from pystorm.component import Tuple as PTuple

# Storm's multilang log levels (pystorm's _STORM_LOG_LEVELS) -> Python's
_LEVELS = {0: 5, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_NAMES = {"trace": 5, "debug": 10, "info": 20, "warn": 30, "warning": 30, "error": 40}
_IDENT = re.compile(r"\W|^(?=\d)")


def storm_context(
    context: Any, streams: Mapping[str, tuple[str, ...]], sources: Mapping[str, Mapping]
) -> dict[str, Any]:
    """The context dict Storm's multilang handshake sends (the keys pystorm reads and
    users read), from stormish's TopologyContext."""
    return {
        "task->component": {str(t): c for t, c in context.task_components.items()},
        "taskid": context.task_id,
        "componentid": context.component_id,
        "streams": sorted(streams),
        "stream->outputfields": {s: list(f) for s, f in streams.items()},
        "source->stream->fields": {
            src: {s: list(f) for s, f in ss.items()} for src, ss in sources.items()
        },
    }


def value_types(sources: Mapping[str, Mapping[str, tuple[str, ...]]]) -> dict[tuple, Any]:
    """pystorm's namedtuple per (source, stream), named as pystorm names it."""
    out: dict[tuple, Any] = {}
    for src, streams in sources.items():
        for stream, fields in streams.items():
            name = _IDENT.sub("_", src.title()) + _IDENT.sub("_", stream.title()) + "Tuple"
            out[(src, stream)] = namedtuple(name, fields)  # noqa: PYI024 - pystorm's type
    return out


def new_instance(cls: Any, conf: Mapping[str, Any], context: Any, sctx: dict) -> Any:
    """An instance of the pystorm class `cls` set up as `run()` would have set it up
    after the handshake, without its I/O (see the module docstring): its constructor runs
    on streams nothing reads, with no signal handler; a TicklessBatchingBolt's (a signal
    handler and a timer thread) is replaced by the adapter's timer (adapter.py)."""
    from pystorm.bolt import BatchingBolt, TicklessBatchingBolt

    # never read nor written: send_message is replaced on the instance (adapter.py)
    io = {"input_stream": BytesIO(), "output_stream": BytesIO(), "rdb_signal": None}
    if issubclass(cls, TicklessBatchingBolt):
        inst = cls.__new__(cls)
        BatchingBolt.__init__(inst, **io)
        inst.exc_info = None
        inst._batch_lock = threading.RLock()
    else:
        inst = cls(**io)
    conf = dict(conf)
    conf.setdefault("topology.name", context.topology_name)
    inst.topology_name = context.topology_name
    inst.task_id = context.task_id
    inst.component_name = context.component_id
    inst.debug = bool(conf.get("topology.debug", False))
    inst.storm_conf = conf
    inst.context = sctx
    inst.logger = logging.getLogger(f"pystorm.component.{context.component_id}")
    level = _NAMES.get(str(conf.get("pystorm.log.level", "info")).lower(), logging.INFO)
    inst.logger.setLevel(logging.DEBUG if inst.debug else level)
    return inst


def log_call(logger: logging.Logger) -> Callable[..., None]:
    """`Component.log(message, level)`: to the component's logger, at Storm's level."""

    def log(message: Any, level: str | None = None) -> None:
        logger.log(_NAMES.get(str(level).lower(), logging.INFO), "%s", message)

    return log


def raise_exception_call(report: Callable[[BaseException], None]) -> Callable[..., None]:
    """`Component.raise_exception(exc, tup)`: reported as the task's error (Storm's
    `error` command shows it in the UI the same way)."""

    def raise_exception(exception: BaseException, tup: Any = None) -> None:
        report(exception)

    return raise_exception


def send_message_call(inst: Any, handlers: Mapping[str, Callable[[dict], Any]]) -> Callable:
    """`send_message`: what a subclass that overrides `emit` and calls up to pystorm's
    sends, handled by command; the task ids an emit answers wait in
    `_pending_task_ids` for `read_task_ids`, as pystorm reads them off the pipe."""
    logger = inst.logger

    def send_message(msg: dict) -> None:
        command = msg.get("command")
        if command == "emit":
            ids = handlers["emit"](msg)
            if msg.get("need_task_ids", True) and "task" not in msg:
                inst._pending_task_ids.append(ids)
        elif command in ("ack", "fail"):
            handlers[command](msg["id"])
        elif command == "log":
            logger.log(_LEVELS.get(msg.get("level", 2), logging.INFO), "%s", msg.get("msg"))
        elif command == "error":
            handlers["error"](msg.get("msg", ""))
        # sync, metrics: nothing to answer in-process

    return send_message


def anchor_ids(anchors: Any) -> list:
    """Anchors as pystorm allows them (its Tuples or their ids) -> stormish tuples."""
    return [a.id if a.__class__ is PTuple or isinstance(a, PTuple) else a for a in anchors]
