"""Every configuration key stormish reads, declared once with type, default and limits.

Storm's key names and defaults are kept where Storm has the key, so that a Storm user's
muscle memory works. Where a Python default differs from Storm's, the doc line says why.
A bad value is a :class:`ConfigError` naming the key: config comes from users' files and
command lines, and an error that does not name the key is a puzzle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

WAIT_STRATEGIES = ("progressive", "park")


@dataclass(frozen=True)
class Key:
    name: str
    default: Any
    check: Callable[[Any], str | None]
    doc: str


def _int(lo: int | None = None, *, optional: bool = False) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if v is None and optional:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            return f"must be an integer{' or None' if optional else ''}, got {v!r}"
        if lo is not None and v < lo:
            return f"must be >= {lo}, got {v}"
        return None

    return check


def _num(lo: float = 0.0, *, strict: bool = False, optional: bool = False):
    def check(v: Any) -> str | None:
        if v is None and optional:
            return None
        if isinstance(v, bool) or not isinstance(v, int | float):
            return f"must be a number, got {v!r}"
        if v < lo or (strict and v == lo):
            return f"must be {'>' if strict else '>='} {lo}, got {v}"
        return None

    return check


def _choice(*choices: str) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if v not in choices:
            return f"unknown value {v!r}; expected one of {', '.join(choices)}"
        return None

    return check


def _bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else f"must be true or false, got {v!r}"


def _str(v: Any) -> str | None:
    return None if v is None or isinstance(v, str) else f"must be a string, got {v!r}"


def _wait_keys(use: str, l1: int, l2: int, l3: int) -> list[Key]:
    p = f"topology.{use}.wait"
    return [
        Key(
            f"{p}.strategy",
            "progressive",
            _choice(*WAIT_STRATEGIES),
            f"how a {use} idles: 'progressive' (retry, yield, sleep) or 'park' (sleep N us)",
        ),
        Key(f"{p}.progressive.level1.count", l1, _int(0), "busy retries before yielding"),
        Key(
            f"{p}.progressive.level2.count",
            l2,
            _int(0),
            "time.sleep(0) yields (GIL handed over) before level 3",
        ),
        Key(
            f"{p}.progressive.level3.sleep.millis",
            l3,
            _num(0),
            "level 3 waits up to this long, woken early by new input",
        ),
        Key(f"{p}.park.microsec", 100, _int(0), "park sleeps this long; 0 spins"),
    ]


KEYS: dict[str, Key] = {
    k.name: k
    for k in [
        Key("topology.workers", 1, _int(1), "worker processes a topology runs in"),
        Key(
            "topology.executor.receive.buffer.size",
            32768,
            _int(1),
            "capacity of each executor's receive queue, in tuples",
        ),
        Key(
            "topology.producer.batch.size",
            512,
            _int(1),
            "tuples an emitter batches per destination before publishing; Storm's default "
            "is 1, ours is larger because a Python queue operation costs ~1 us and a "
            "batch of 512 amortises it (bench/README.md); at most half the receive buffer",
        ),
        Key(
            "topology.batch.flush.interval.millis",
            1,
            _num(0),
            "an unfilled batch is published after at most this long (bounds latency)",
        ),
        Key(
            "topology.transfer.buffer.size",
            1000,
            _int(1),
            "capacity of a worker's transfer queue to other workers, in batches",
        ),
        *_wait_keys("backpressure", 1, 1000, 1),
        *_wait_keys("spout", 0, 0, 1),
        *_wait_keys("bolt", 1, 1000, 1),
        Key(
            "topology.backpressure.check.millis",
            50,
            _num(0, strict=True),
            "period of the backpressure-check timer that clears drained tasks",
        ),
        Key(
            "topology.backpressure.resend.step",
            10000,
            _int(1),
            "overflow growth (tuples) after which a backpressure status is sent again",
        ),
        Key(
            "topology.testing.lose.backpressure.status",
            0,
            _int(-1),
            "tests only: how many backpressure status messages this topology's workers "
            "drop instead of sending (-1: all), to prove resends and the timer recover",
        ),
        Key(
            "topology.executor.overflow.limit",
            0,
            _int(0),
            "cap on a task's overflowQ (remote tuples); 0 means no cap; past it remote "
            "tuples are dropped and counted",
        ),
        Key(
            "topology.max.spout.pending",
            None,
            _int(1, optional=True),
            "reliable tuple trees in flight per spout task; None means no limit",
        ),
        Key(
            "topology.message.timeout.secs",
            30,
            _num(0, strict=True),
            "a tuple tree not completed within this time is failed back to its spout",
        ),
        Key(
            "topology.acker.executors",
            None,
            _int(0, optional=True),
            "acker tasks; None means one per worker; 0 turns acking off",
        ),
        Key(
            "topology.tick.tuple.freq.secs",
            None,
            _num(0, strict=True, optional=True),
            "send a tick tuple to each task of a bolt this often",
        ),
        Key(
            "topology.cycle.drain.budget",
            65536,
            _int(1),
            "tuples an executor on a topology cycle may hold in its pendingEmitQ while it "
            "keeps draining input; spouts feeding the cycle pause at half of it",
        ),
        Key(
            "topology.worker.gc.threshold",
            50_000,
            _int(0),
            "the cyclic GC's first threshold in workers while a topology runs (Python's "
            "default 700 costs a reliable spout half its rate: runtime/gctune.py); "
            "0 leaves the interpreter's setting",
        ),
        Key("topology.debug", False, _bool, "log every emit (slow; for debugging only)"),
        Key(
            "topology.stats.interval.secs",
            1.0,
            _num(0, strict=True),
            "how often workers publish statistics",
        ),
        Key(
            "supervisor.worker.timeout.secs",
            30,
            _num(0, strict=True),
            "a worker silent this long is restarted by its supervisor (the default of "
            "`stormish supervisor --worker-timeout`)",
        ),
        Key(
            "nimbus.task.timeout.secs",
            30,
            _num(0, strict=True),
            "a supervisor silent this long has its workers reassigned by nimbus (the default "
            "of `stormish nimbus --task-timeout`)",
        ),
        Key(
            "stormish.local.host",
            "127.0.0.1",
            _str,
            "address local-mode workers bind; loopback unless CURVE keys are configured",
        ),
        Key(
            "stormish.spark.master",
            None,
            _str,
            "the Spark master SparkSpout/SparkSink use: local[N] (default local[*]), "
            "spark://host:port, or sc://host:port (Spark Connect)",
        ),
    ]
}


def _scalar(v: Any) -> str | None:
    if isinstance(v, str | int | float | bool):
        return None
    return f"must be a string, number or boolean, got {v!r}"


# Families of keys named by a prefix: any key below it is accepted, its value checked.
PREFIXES: dict[str, tuple[Callable[[Any], str | None], str]] = {
    "stormish.spark.conf.": (_scalar, "passed to the SparkSession builder without the prefix"),
}


def defaults() -> dict[str, Any]:
    return {k.name: k.default for k in KEYS.values()}


def check_value(name: str, value: Any, where: str = "") -> None:
    """Raise ConfigError if `name` is unknown or `value` breaks its rule."""
    key = KEYS.get(name)
    place = f" (in {where})" if where else ""
    if key is None:
        for prefix, (check, _doc) in PREFIXES.items():
            if name.startswith(prefix) and len(name) > len(prefix):
                problem = check(value)
                if problem:
                    raise ConfigError(f"config key {name!r}{place} {problem}")
                return
        import difflib

        close = difflib.get_close_matches(name, KEYS, n=1, cutoff=0.8) or [
            k for k in KEYS if k.rsplit(".", 1)[-1] == name.rsplit(".", 1)[-1]
        ]
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown config key {name!r}{place}{hint}")
    problem = key.check(value)
    if problem:
        raise ConfigError(f"config key {name!r}{place} {problem}")


def resolve(*layers: Mapping[str, Any] | None, where: str = "") -> dict[str, Any]:
    """Merge config layers over the defaults (later wins) and validate the result.

    Cross-key rules are checked here too: the producer batch must fit twice in the
    receive queue or a single batch could hold a queue full on its own.
    """
    conf = defaults()
    for layer in layers:
        for k, v in (layer or {}).items():
            check_value(k, v, where)
            conf[k] = v
    batch = conf["topology.producer.batch.size"]
    cap = conf["topology.executor.receive.buffer.size"]
    place = f" (in {where})" if where else ""
    if batch > cap // 2:
        raise ConfigError(
            f"config key 'topology.producer.batch.size' ({batch}){place} must be at most "
            f"half of 'topology.executor.receive.buffer.size' ({cap})"
        )
    return conf


def parse_override(text: str) -> tuple[str, Any]:
    """Parse `key=value` from the command line; values are read as JSON when they can be."""
    import json

    if "=" not in text:
        raise ConfigError(f"config override {text!r} must look like key=value")
    name, raw = text.split("=", 1)
    name = name.strip()
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    check_value(name, value, "-c")
    return name, value


def describe() -> str:
    """One line per key, for docs and `stormish config`."""
    lines = [f"{k.name} = {k.default!r}: {k.doc}" for k in KEYS.values()]
    lines += [f"{p}<key>: {doc}" for p, (_check, doc) in PREFIXES.items()]
    return "\n".join(lines)
