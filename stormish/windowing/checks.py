"""What a windowed bolt needs from its topology, checked at submit (Storm checks the same
in `WindowedBoltExecutor.prepare`, once the topology already runs).

A tuple in a window stays unacked until it leaves the window: about length + slide
(+ lag in event time) for a time window. If `topology.message.timeout.secs` is shorter,
every tuple times out and is replayed while it still sits in its window, forever. A
count window holds length + slide tuples: a spout that may have fewer in flight
(`topology.max.spout.pending`) stops before the first window ever fills.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..errors import ConfigError, TopologyError
from .spec import Count, Duration, Size


class WindowedBolt(Protocol):
    """What the checks read of a windowed bolt (bolt.WindowedBolt is one)."""

    window_length: Size | None
    window_slide: Size | None
    session_gap: Duration | None
    session_grace: Duration | None
    timestamp_field: str | Callable[..., Any] | None
    lag: Duration
    late_tuple_stream: str | None

    def tick_seconds(self) -> float | None: ...


TIMEOUT = "topology.message.timeout.secs"
TICK = "topology.tick.tuple.freq.secs"
PENDING = "topology.max.spout.pending"
ACKERS = "topology.acker.executors"


def check_window(bolt: WindowedBolt, name: str, conf: Mapping[str, Any]) -> None:
    where = f"windowed bolt {name!r}"
    if bolt.session_gap is None and bolt.window_length is None:
        raise TopologyError(
            f"{where} has no window: call with_window(length=, slide=), "
            "with_tumbling_window(length) or with_session_window(gap=)"
        )
    if bolt.late_tuple_stream is not None and bolt.timestamp_field is None:
        raise TopologyError(
            f"{where}: a late tuple stream ({bolt.late_tuple_stream!r}) needs event time: "
            "call with_timestamp_field(...) too (only event time has late tuples)"
        )
    need = bolt.tick_seconds()
    if need is not None and not conf.get(TICK):
        raise TopologyError(
            f"{where} needs tick tuples ({TICK!r}) to move its window, and has none: "
            "configure the window before set_bolt (which reads the bolt's "
            f"component_config), or add_configuration({TICK!r}, {need:g})"
        )
    tick = conf.get(TICK)
    processing = bolt.timestamp_field is None and bolt.session_gap is None
    if need is not None and processing and tick != need:  # each tick is a slide
        raise TopologyError(
            f"{where}: config key {TICK!r} is {tick:g}, but a processing-time window "
            f"slides on its ticks, which must come every {need:g} s (its slide): leave "
            "the key to the window (set_bolt reads it from the bolt)"
        )
    if conf.get(ACKERS) == 0:
        return  # acking off: nothing times out, nothing waits for acks
    if conf.get("topology.enable.message.timeouts", True):  # off: no tree times out
        _check_timeout(bolt, where, conf)
    _check_pending(bolt, where, conf)


def window_advice(bolt: WindowedBolt, conf: Mapping[str, Any]) -> list[str]:
    """Valid but likely wrong, for a warning at submit: a time window holds every tuple
    of its length unacked, so `topology.max.spout.pending` (1000 by default here, none
    in Storm) caps what a window holds per spout task, and in event time a window that
    needs more stops the watermark (and the run) for good: nothing later is emitted."""
    pending = conf.get(PENDING)
    timed = bolt.session_gap is not None or isinstance(bolt.window_length, Duration)
    if pending is None or not timed or conf.get(ACKERS) == 0:
        return []
    held = "a session" if bolt.session_gap is not None else "a time window"
    then = (
        "an event-time window that needs more never closes: the watermark stops"
        if bolt.timestamp_field is not None
        else "each window holds at most that many"
    )
    return [
        f"{held} holds its tuples unacked, and config key {PENDING!r} ({pending}) caps "
        f"the tuples in flight per spout task: {then}. Set it to None (Storm's "
        "default) or above the tuples a window holds"
    ]


def _held_for(bolt: WindowedBolt, conf: Mapping[str, Any]) -> tuple[list[str], float]:
    """The parts of how long a tuple may stay unacked, named, and their sum in seconds."""
    lag = bolt.lag.secs if bolt.timestamp_field is not None else 0.0
    if bolt.session_gap is not None:
        # from its key's last tuple (an open session's tuples have their timeouts reset
        # every third of the timeout, bolt.py), then up to one watermark interval
        grace = bolt.session_grace.secs if bolt.session_grace else 0.0
        parts = [("gap", bolt.session_gap.secs), ("grace", grace), ("lag", lag)]
    else:
        parts = [
            (label, size.secs)
            for label, size in (("length", bolt.window_length), ("slide", bolt.window_slide))
            if isinstance(size, Duration)
        ]
        parts.append(("lag", lag))
    if bolt.timestamp_field is not None or bolt.session_gap is not None:
        # windows are evaluated (sessions closed) only at a tick: the configured one (a
        # set_tick_frequency after the window), else the window's own
        tick = conf.get(TICK) or bolt.tick_seconds()
        if tick:
            parts.append(("watermark interval", tick))
    names = [f"{label} {secs:g}" for label, secs in parts]
    return names, sum(secs for _, secs in parts)


def _check_timeout(bolt: WindowedBolt, where: str, conf: Mapping[str, Any]) -> None:
    names, held = _held_for(bolt, conf)
    timeout = conf[TIMEOUT]
    if held > 0 and timeout <= held:
        raise ConfigError(
            f"{where}: config key {TIMEOUT!r} ({timeout:g} s) must exceed how long a tuple "
            f"waits in the window unacked: {' + '.join(names)} = {held:g} s. Raise "
            f"{TIMEOUT!r} above {held:g} or shorten the window; otherwise every tuple "
            "times out and is replayed while it is still in its window"
        )


def _check_pending(bolt: WindowedBolt, where: str, conf: Mapping[str, Any]) -> None:
    counts = [
        (label, size.value)
        for label, size in (("length", bolt.window_length), ("slide", bolt.window_slide))
        if isinstance(size, Count)
    ]
    pending = conf.get(PENDING)
    total = sum(v for _, v in counts)
    if counts and pending is not None and total > pending:
        names = " + ".join(f"{label} {v}" for label, v in counts)
        raise ConfigError(
            f"{where}: config key {PENDING!r} ({pending}) must be at least the tuples a "
            f"count window holds unacked: {names} = {total}. Raise {PENDING!r} or "
            "shorten the window; otherwise the spout stops before a window fills"
        )


def check_read_field(
    where: str, what: str, field: str, fields: Mapping[tuple[str, str], Sequence[str]]
) -> None:
    """A field the bolt reads of every input tuple, declared by every input stream: a
    typo failed every tuple (and replayed it for good), or grouped them all as one key."""
    lacking = sorted(f"{src}:{stream}" for (src, stream), fs in fields.items() if field not in fs)
    if lacking:
        declared = {f"{src}:{stream}": list(fs) for (src, stream), fs in sorted(fields.items())}
        raise TopologyError(
            f"{where}: {what} {field!r} is not a field of input stream(s) {lacking}; the "
            f"input streams' fields: {declared}"
        )
