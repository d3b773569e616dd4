"""`WindowedBolt`: Storm's windowed bolt as a Bolt, driven by the engine's tick tuples.

The bolt is a thin shell around the pure window logic (manager.py, session.py,
watermark.py): tuples and ticks in, and it carries out what comes back: `Expired`
tuples are acked, a `Window` is handed to `execute_window` with every emit anchored to
the window's tuples. Time comes from the topology clock (`context.clock`) and ticks
(`topology.tick.tuple.freq.secs`, set from the window), so the whole bolt runs in
simulated time under `stormish.testing`'s FakeClock.

Acking, as Storm: a tuple is acked when it leaves the window (expires), so a failure
downstream replays it; a late tuple (event time, older than the watermark) is emitted on
the late tuple stream, if any, and acked at once, never replayed. A tuple is therefore
unacked for about length + slide + lag: `check_in_topology`, called at submit, refuses a
`topology.message.timeout.secs` shorter than that, naming the component and the keys.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..component import Bolt
from ..errors import TopologyError
from ..tuple import END_OF_INPUT, Tuple
from .checks import TICK, check_read_field, check_window, window_advice
from .manager import WindowManager
from .session import SessionManager
from .spec import Count, Duration, Expired, Output, Size, Window, as_size, to_ms
from .watermark import WatermarkGenerator

# A late tuple, as the late tuple stream carries it: its fields and values as a dict,
# its timestamp (seconds) and where it came from.
LATE_FIELDS = ("late_tuple", "timestamp", "component", "stream")
# An int timestamp above this is almost surely milliseconds: 10^11 s is the year 5138,
# 10^11 ms is 1973.
MS_LIKELY = 10**11

log = logging.getLogger("stormish.windowing")


class WindowedBolt(Bolt):
    """Define `execute_window(self, window)` and configure the window on the instance;
    each builder method returns the bolt, as Storm's `BaseWindowedBolt` does:

        Counts().with_window(length=Duration(seconds=20), slide=Duration(seconds=10))
                .with_timestamp_field("ts").with_lag(seconds=5)
                .with_late_tuple_stream("late")

    A subclass may override `prepare` without calling `super().prepare(...)`: the
    engine sets the windows up before it (`_engine_prepare`)."""

    window_length: Size | None = None
    window_slide: Size | None = None
    session_gap: Duration | None = None
    session_grace: Duration | None = None
    session_key: str | Callable[[Tuple], Any] | None = None
    timestamp_field: str | Callable[[Tuple], Any] | None = None
    lag: Duration = Duration()
    watermark_interval: Duration = Duration(seconds=1)
    late_tuple_stream: str | None = None
    # each component's input streams, recorded at submit (one object may serve several)
    _inputs_of: dict[str, tuple[tuple[str, str], ...]] | None = None
    # the engine gives it a last tick (END_OF_INPUT) when a finite run's input has ended
    closes_at_end_of_input = True

    # -- builder (Storm's withWindow, withTumblingWindow, ...) ------------------------------
    def with_window(self, length: Any, slide: Any = None) -> WindowedBolt:
        """A sliding window; `slide` defaults to Count(1) (Storm: every tuple)."""
        self.window_length = as_size(length, "window length")
        self.window_slide = Count(1) if slide is None else as_size(slide, "window slide")
        self.session_gap = None
        return self._configured()

    def with_tumbling_window(self, length: Any) -> WindowedBolt:
        """Windows that do not overlap: the slide is the length."""
        size = as_size(length, "window length")
        return self.with_window(size, size)

    def with_session_window(
        self, gap: Any, grace: Any = None, key: str | Callable[[Tuple], Any] | None = None
    ) -> WindowedBolt:
        """Sessions of tuples (per `key`, a field name or a function of the tuple)
        closer than `gap`; each is activated once, `grace` after it went quiet."""
        g = as_size(gap, "session gap")
        grace_size = Duration() if grace is None else as_size(grace, "grace", allow_zero=True)
        if not isinstance(g, Duration) or not isinstance(grace_size, Duration):
            raise TypeError("a session's gap and grace are Durations")
        self.session_gap, self.session_grace, self.session_key = g, grace_size, key
        self.window_length = self.window_slide = None
        return self._configured()

    def with_timestamp_field(self, field: str | Callable[[Tuple], Any]) -> WindowedBolt:
        """Event time: each tuple's timestamp (seconds, or a datetime) is this field, or
        what this function returns for it."""
        if not (isinstance(field, str) or callable(field)):
            raise TypeError(f"a timestamp field is a field name or a function, got {field!r}")
        self.timestamp_field = field
        return self._configured()

    def with_lag(self, seconds: float | Duration = 0.0) -> WindowedBolt:
        """How far out of order tuples may arrive (event time): the watermark trails the
        latest timestamp by this much (seconds, or a Duration)."""
        self.lag = as_size(seconds, "lag", allow_zero=True)  # type: ignore[assignment]
        if not isinstance(self.lag, Duration):
            raise TypeError(f"a lag is a time, not {seconds!r}")
        return self._configured()

    def with_watermark_interval(self, seconds: float | Duration) -> WindowedBolt:
        """How often the watermark is computed and windows evaluated (event time), or
        sessions checked for closing (processing time); seconds, or a Duration."""
        interval = as_size(seconds, "watermark interval")
        if not isinstance(interval, Duration):
            raise TypeError(f"a watermark interval is a time, not {seconds!r}")
        self.watermark_interval = interval
        return self._configured()

    def with_late_tuple_stream(self, stream: str) -> WindowedBolt:
        """Late tuples leave on this stream (fields LATE_FIELDS), declared by the bolt."""
        if not isinstance(stream, str) or not stream or stream.startswith("__"):
            raise ValueError(f"a late tuple stream needs a name not starting '__', got {stream!r}")
        self.late_tuple_stream = stream
        return self._configured()

    def _configured(self) -> WindowedBolt:
        """Ticks drive watermarks and processing-time slides: the component's tick
        frequency follows the window (a class's own component_config is kept)."""
        conf = dict(type(self).component_config or {})
        freq = self.tick_seconds()
        if freq is not None:
            conf[TICK] = freq
        self.component_config = conf
        return self

    def tick_seconds(self) -> float | None:
        if self.timestamp_field is not None or self.session_gap is not None:
            return self.watermark_interval.secs
        if isinstance(self.window_slide, Duration):
            return self.window_slide.secs
        return None

    # -- declared to the topology -----------------------------------------------------------
    def declared_streams(self) -> dict[str, tuple[str, ...]]:
        streams = super().declared_streams()
        if self.late_tuple_stream is not None:
            streams[self.late_tuple_stream] = LATE_FIELDS
        return streams

    def check_in_topology(
        self,
        name: str,
        conf: Mapping[str, Any],
        inputs: Sequence[tuple[str, str]],
        fields: Mapping[tuple[str, str], Sequence[str]] | None = None,
    ) -> None:
        """Called by Topology.validate (at submit) with this component's resolved config
        and its input streams (and their fields): the checks only a whole topology
        allows, and the input streams the watermark waits for (per component: one bolt
        object given to two components waited, in both, for the last one's inputs)."""
        where = f"windowed bolt {name!r}"
        cls = type(self)
        if cls.execute is not WindowedBolt.execute and (
            cls.execute_window is WindowedBolt.execute_window
        ):
            raise TopologyError(
                f"{where} defines execute(), which is Storm's IWindowedBolt.execute"
                "(TupleWindow): here a window comes to execute_window(window); rename it "
                "(execute is the engine's, which fills the windows)"
            )
        late = self.late_tuple_stream
        if late is not None and late in Bolt.declared_streams(self):
            raise TopologyError(
                f"{where}: its late tuple stream {late!r} is also one of its declared "
                "streams (outputs): name the late stream apart (Storm refuses it too: "
                f"fields for {late!r} already set)"
            )
        check_window(self, name, conf)
        from ..topology import _warn

        _warn(window_advice(self, conf), where)
        read = (("timestamp field", self.timestamp_field), ("session key", self.session_key))
        for what, f in read:
            if isinstance(f, str) and fields:
                check_read_field(f"windowed bolt {name!r}", what, f, fields)
        self._inputs_of = {**(self._inputs_of or {}), name: tuple(sorted(set(inputs)))}

    # -- running ----------------------------------------------------------------------------
    def _engine_prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        """Run by the engine before the user's `prepare` (component.prepare_bolt)."""
        self._component = getattr(context, "component_id", type(self).__name__)
        clock = getattr(context, "clock", None)
        if clock is None:
            from ..clock import SYSTEM_CLOCK

            clock = SYSTEM_CLOCK
        self._now = clock.now
        self._event_time = self.timestamp_field is not None
        self._ms_warned = False
        self._windows = self._make_windows()
        grace = self.session_grace.ms if self.session_gap and self.session_grace else 0
        inputs = (self._inputs_of or {}).get(self._component)
        self._watermarks = WatermarkGenerator(self.lag.ms, inputs, grace)
        self._anchors: list[Tuple] | None = None
        # the tuples of open sessions have their timeouts reset every third of the
        # message timeout (Storm's resetTimeout): a session has no bound on its length
        timeout = conf.get("topology.message.timeout.secs")
        acking = conf.get("topology.acker.executors") != 0
        self._refresh_every = timeout / 3.0 if timeout and acking else 0.0
        self._next_refresh = self._now() + self._refresh_every
        self._bind_anchored_emits()

    def _make_windows(self) -> WindowManager | SessionManager:
        if self.session_gap is not None:
            return SessionManager(self.session_gap, self.session_grace)
        if self.window_length is None or self.window_slide is None:
            raise TopologyError(f"windowed bolt {self._component!r} has no window")
        return WindowManager(self.window_length, self.window_slide, self._event_time)

    def _bind_anchored_emits(self) -> None:
        """Emits without anchors inside execute_window are anchored to the window's
        tuples (Storm's WindowedOutputCollector), `emit_tasks` too (Storm's emit that
        returns the task ids: its results were lost unreplayed); elsewhere they are
        left as given."""
        emit, emit_many, emit_direct = self.emit, self.emit_many, self.emit_direct
        emit_tasks = self.emit_tasks
        self._emit_raw = emit

        def anchored_emit(values, stream="default", anchors=None, msg_id=None):  # type: ignore[no-untyped-def]
            emit(values, stream, self._anchors if anchors is None else anchors, msg_id)

        def anchored_emit_many(rows, stream="default", anchors=None, msg_id=None):  # type: ignore[no-untyped-def]
            emit_many(rows, stream, self._anchors if anchors is None else anchors, msg_id)

        def anchored_emit_direct(task, values, stream="default", anchors=None, msg_id=None):  # type: ignore[no-untyped-def]
            a = self._anchors if anchors is None else anchors
            emit_direct(task, values, stream, a, msg_id)

        def anchored_emit_tasks(values, stream="default", anchors=None, msg_id=None):  # type: ignore[no-untyped-def]
            a = self._anchors if anchors is None else anchors
            return emit_tasks(values, stream, a, msg_id)

        self.emit, self.emit_many = anchored_emit, anchored_emit_many
        self.emit_direct, self.emit_tasks = anchored_emit_direct, anchored_emit_tasks

    def execute(self, tup: Tuple) -> None:
        windows = self._windows
        if tup.is_tick:
            if tup.values[0] == END_OF_INPUT:
                self._carry_out(self._windows.end_of_input())
            else:
                self._carry_out(self._on_time())
            return
        if self._event_time:
            ts = self._timestamp(tup)
            if not self._ms_warned and type(ts) is int and ts > MS_LIKELY:
                self._warn_ms(ts)
            if not self._watermarks.track((tup.source_component, tup.stream), to_ms(ts)):
                self._late(tup, ts)
                return
        else:
            ts = self._now()
        try:
            self._carry_out(self._add_tuple(windows, tup, ts), tup)
        except Exception:
            windows.discard({id(tup)})  # the engine fails it: it must not stay windowed
            raise

    def _add_tuple(
        self, windows: WindowManager | SessionManager, tup: Tuple, ts: Any
    ) -> list[Output]:
        if isinstance(windows, SessionManager):
            return windows.add(tup, ts, self._key(tup))
        return windows.add(tup, ts)

    def _on_time(self) -> list[Output]:
        """A tick: the watermark moves (event time), or the clock does (processing)."""
        w = self._windows
        if isinstance(w, SessionManager) and self._refresh_every:
            t = self._now()
            if t >= self._next_refresh:  # a session lasts as long as its key keeps coming
                self._next_refresh = t + self._refresh_every
                for held in w.held():
                    self.reset_timeout(held)
        if self._event_time:
            wm = self._watermarks.advance()
            if wm is None:
                return []
            now: Any = wm / 1000.0
        else:
            now = self._now()
        if isinstance(w, SessionManager):
            return w.advance(now)
        return w.on_watermark(now) if self._event_time else w.on_timer(now)

    def _carry_out(self, outputs: list[Output], current: Tuple | None = None) -> None:
        """Ack what expired, run each window. A window whose execute_window raises has
        its tuples failed (the spout replays them) and dropped from every window; the
        other outputs still run, and the first error is raised after them. `current`:
        the tuple being executed, which the engine fails as the error is raised (failed
        here too, it counted twice)."""
        failed: set[int] = set()
        error: Exception | None = None
        for out in outputs:
            if failed:
                out = _without(out, failed)
            if isinstance(out, Expired):
                for t in out.items:
                    self.ack(t)
            elif out.tuples:
                try:
                    self._activate(out)
                except Exception as exc:
                    failed |= self._give_back(out.tuples, current)
                    error = error or exc
        if error is not None:
            raise error

    def _activate(self, window: Window) -> None:
        self._anchors = list(window.tuples)
        try:
            self.execute_window(window)
        finally:
            self._anchors = None

    def _give_back(self, tuples: Sequence[Tuple], current: Tuple | None = None) -> set[int]:
        ids = {id(t) for t in tuples}
        self._windows.discard(ids)
        for t in tuples:
            if t is not current:
                self.fail(t)
        return ids

    def _warn_ms(self, ts: int) -> None:
        """Seconds are the unit here; Storm's timestamps are milliseconds, and a Storm
        user's field holding them would put every window 1000 times too far. Said once
        per task: the run goes on as written."""
        self._ms_warned = True
        log.warning(
            "windowed bolt %r: timestamp %d in field %r looks like milliseconds (Storm's "
            "unit); stormish timestamps are seconds: divide by 1000 (docs/windows.md)",
            self._component,
            ts,
            self.timestamp_field if isinstance(self.timestamp_field, str) else "(a function)",
        )

    def _timestamp(self, tup: Tuple) -> Any:
        f = self.timestamp_field
        return f(tup) if callable(f) else tup[f]  # type: ignore[index]

    def _key(self, tup: Tuple) -> Any:
        k = self.session_key
        if k is None:
            return None
        return k(tup) if callable(k) else tup[k]

    def _late(self, tup: Tuple, ts: Any) -> None:
        """Late: never in a window, acked now (this bolt never has it replayed: it would
        only be late again). On the late stream it is anchored, as in Storm, so a
        consumer of that stream that fails it does have it replayed."""
        if self.late_tuple_stream is not None:
            values = (tup.as_dict(), to_ms(ts) / 1000.0, tup.source_component, tup.stream)
            self._emit_raw(values, self.late_tuple_stream, [tup])
        self.ack(tup)

    def execute_window(self, window: Window) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define execute_window(window)")


def _without(out: Output, failed: set[int]) -> Output:
    """`out` without the tuples in `failed` (by id): they were given back already."""
    if isinstance(out, Expired):
        return Expired([t for t in out.items if id(t) not in failed])

    def keep(ts: Sequence[Any]) -> list[Any]:
        return [t for t in ts if id(t) not in failed]

    return replace(out, tuples=keep(out.tuples), new=keep(out.new), expired=keep(out.expired))
