"""The thread that applies runtime/stuck.py's rule to a worker's executors.

A few times per limit it reads what each executor's thread is doing: the turn or
`prepare`/`open` a cooperative scheduler is in (stamped there already), or an own
thread's turn count. Past the limit it reads the stuck thread's stack
(`sys._current_frames`) and hands the executor an error with it (error_report.py's
`stuck_report`), shown and counted as its errors are; with fail-fast the worker fails.
Nothing here runs on an executor's thread, and nothing is added per tuple or per turn.
"""

from __future__ import annotations

import logging
import os
import sys
import sysconfig
import threading
import time
import traceback
from collections.abc import Hashable, Sequence
from traceback import FrameSummary
from typing import TYPE_CHECKING, Any

from .error_report import ENGINE, stuck_report
from .stuck import BACK, STUCK, StuckRule, look_every

if TYPE_CHECKING:
    from .executor import Executor
    from .scheduler import Scheduler

log = logging.getLogger("stormish.executor")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# where an executor's thread waits for work between calls into user code: the runtime,
# the wake-ups it parks on (transport) and the clock; with the standard library (not
# its site-packages) nothing of these is user code
_IDLE_PLACES = (ENGINE, _PACKAGE + "transport" + os.sep, _PACKAGE + "clock.py")
_STDLIB = tuple(
    {os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")}
)
_SITE = tuple({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("purelib", "platlib")})


def in_user_code(stack: Sequence[FrameSummary]) -> bool:
    """Whether a thread's stack holds a frame of user code: one outside the places an
    executor waits in (the runtime, transport, clock) and outside the standard library
    (a site-packages frame is someone's code). An own thread whose turn count stands
    still is waiting in the engine (a spout submitted inactive), or in user code."""
    for f in stack:
        name = f.filename
        if name.startswith(_IDLE_PLACES) or name.startswith("<"):
            continue
        if name.startswith(_STDLIB) and not name.startswith(_SITE):
            continue
        return True
    return False


class StuckWatch:
    """Looks at `executors` every `look_every` of their limits (see the module doc)."""

    def __init__(self, topology: str, executors: list[Executor], schedulers: list[Scheduler]):
        self.topology = topology
        self.executors = executors
        self.schedulers = schedulers  # the worker's list: the blocking watchdog adds to it
        self.rule = StuckRule()
        self.every = look_every([ex.stuck_limit for ex in executors])
        self.stop = threading.Event()
        self.looks = 0
        self._calls: dict[int, Any] = {}  # per task, the user call its turn is in
        self.thread = threading.Thread(target=self._run, name="stuck-watch", daemon=True)

    def start(self) -> None:
        if self.every > 0:
            self.thread.start()

    def close(self) -> None:
        """After the executors stopped: one last look, so that a stuck call that
        returned since the last one is not left in the final statistics as stuck."""
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(1.0)
        if self.every > 0:
            self.look(time.monotonic())

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            try:
                self.look(time.monotonic())
            except Exception:  # noqa: BLE001 - a watch that dies watches nothing
                log.exception("the stuck-executor watch of topology %r failed", self.topology)
            self.looks += 1

    def look(self, now: float) -> None:
        """One look at every executor: report the newly stuck, say which returned."""
        in_turn = self._in_turns()
        frames: dict[int, Any] | None = None
        if any(what == "turn" for _, what, _ in in_turn.values()) or any(
            ex.thread is not None and ex.scheduler is None for ex in self.executors
        ):
            frames = sys._current_frames()  # which call each turn is in (`_call`)
        for ex in self.executors:
            mark, entered = self._mark(ex, in_turn, frames)
            v = self.rule.observe(ex.task, mark, now, ex.stuck_limit, entered)
            if v.what == BACK:
                ex.stuck_since = None
                log.warning(
                    "component %r task %d: returned after %.0f s stuck",
                    ex.component, ex.task, v.seconds,
                )  # fmt: skip
            elif v.what == STUCK:
                if frames is None:
                    frames = sys._current_frames()
                thread = _thread_of(ex, in_turn)
                ident = thread.ident if thread is not None else None
                frame = frames.get(ident) if ident is not None else None
                if frame is None:
                    continue
                stack = traceback.extract_stack(frame)
                if entered is None and not in_user_code(stack):
                    continue  # waiting in the engine: looked at again next time
                self._report(ex, stack, v.since, v.seconds)

    @staticmethod
    def _call(thread: threading.Thread | None, frames: dict[int, Any] | None) -> Any:
        """The user call `thread` is in now (its outermost user frame), or None."""
        if thread is None or frames is None or thread.ident is None:
            return None
        frame = frames.get(thread.ident)
        return None if frame is None else _outermost_user_frame(frame)

    def _report(self, ex: Executor, stack: Any, since: float, seconds: float) -> None:
        rep = stuck_report(
            stack, self.topology, ex.component, ex.task, type(ex.obj).__name__, seconds,
            ex.stuck_limit, ex.fail_fast,
        )  # fmt: skip
        self.rule.reported(ex.task)
        ex.report_stuck(rep, since)

    def _in_turns(self) -> dict[int, tuple[Scheduler, str, float]]:
        """Per task, the scheduler whose thread is in its turn or its begin, and since."""
        out: dict[int, tuple[Scheduler, str, float]] = {}
        for s in list(self.schedulers):
            with s.lock:
                cur, since = s.current, s.since
            if cur is not None:
                out[cur.task] = (s, "turn", since)
            begin = s.beginning  # one read: (executor, since) or None
            if begin is not None:
                out[begin[0].task] = (s, "begin", begin[1])
        return out

    def _mark(
        self,
        ex: Executor,
        in_turn: dict[int, tuple[Scheduler, str, float]],
        frames: dict[int, Any] | None = None,
    ) -> tuple[Hashable | None, float | None]:
        """What shows the executor's progress, and when its call began if known."""
        if ex.done:
            self._calls.pop(ex.task, None)
            return None, None
        seen = in_turn.get(ex.task)
        if seen is not None:
            s, what, since = seen
            call = self._call(s.thread, frames) if what == "turn" else None
            if call is None:
                self._calls.pop(ex.task, None)
                return (what, since), since
            # A turn runs a whole batch: a slow execute called hundreds of times in one
            # turn is no call that has not returned (it was reported stuck, and a run
            # with fail-fast stopped). The call is the outermost user frame of the
            # turn's thread: the same frame object from look to look is the same call
            # (it is held here, so its id is not reused); when it began is not known,
            # so it is measured from the first look that saw it.
            self._calls[ex.task] = call
            return ("call", since, id(call)), None
        self._calls.pop(ex.task, None)
        if ex.scheduler is not None:  # a scheduler's, between turns
            return None, None
        if ex.thread is None:
            return None, None
        call = self._call(ex.thread, frames)  # its turn is a batch too: the call in it
        if call is None:
            return ("turns", ex.turns), None
        self._calls[ex.task] = call
        return ("turns", ex.turns, id(call)), None


def _outermost_user_frame(frame: Any) -> Any:
    """The frame where user code was entered (the engine called it): the outermost one
    outside the runtime's places and the standard library; None when none is."""
    found = None
    while frame is not None:
        name = frame.f_code.co_filename
        if not (
            name.startswith(_IDLE_PLACES)
            or name.startswith("<")
            or (name.startswith(_STDLIB) and not name.startswith(_SITE))
        ):
            found = frame
        frame = frame.f_back
    return found


def _thread_of(
    ex: Executor, in_turn: dict[int, tuple[Scheduler, str, float]]
) -> threading.Thread | None:
    seen = in_turn.get(ex.task)
    if seen is not None:
        return seen[0].thread
    return ex.thread
