"""What an exception in user code becomes: the method that raised, the user's file and
line, and the traceback, all found on the error path (nothing is paid per tuple).

The method is read from the traceback, not flagged per call: the first frame outside
the engine (this package) that an engine frame called into is the component's method
(`execute`, `next_tuple`, `prepare`, `ack`, `activate`...). The user's line is the
innermost frame outside the engine, the standard library and installed packages, so an
error raised inside `json.loads` is placed at the user's call of it, and a TopologyError
raised by `emit` at the user's `emit`.

An entry of `TaskStats.last_errors` is `ErrorReport.text`: the first line is the error
(`ValueError: bad row 50`), the second where it was raised and what it cost, then the
traceback from the method called into (the engine's frames above it are left out).

A stuck executor (runtime/stuck.py) is reported the same way with no exception: its
thread's stack, read from outside (`stuck_report`), in the shape of a traceback whose
last line is the error, so that what shows an error's last line shows this one too.
"""

from __future__ import annotations

import os
import sysconfig
import time
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from traceback import FrameSummary
from typing import Any

from ..sources import PACKAGE
from ..transport.wire import record

ENGINE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# the base classes' own calls into the user's methods (component.prepare_bolt, the
# default execute_batch) are the engine's, not the component's
BASES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "component.py")
LIBRARY = tuple(
    {os.path.abspath(p) + os.sep for k, p in sysconfig.get_paths().items() if "lib" in k}
)
# the whole package (sources.py): an installed one is in LIBRARY, but an editable
# install (the README's) is not, and a KeyError raised in stormish/tuple.py was placed
# there, not in the user's `execute` that asked for the field
SHOWN = 5  # errors per component and worker written to the terminal in full
TRACE_CHARS = 4000  # a traceback longer than this keeps its end (the innermost frames)
OUTCOME = {
    "execute": "the tuple failed",
    "reported": "reported; the run goes on",
    "fatal": "the task stopped",
    "stuck": "it has not returned; the run goes on",
    "stuck-fatal": "it has not returned; topology.fail.fast: the run stops",
}
STUCK_ERROR = "ExecutorStuck"


def is_engine(filename: str) -> bool:
    return filename.startswith(ENGINE) or filename == BASES


def is_library(filename: str) -> bool:
    return filename.startswith(LIBRARY) or filename.startswith(PACKAGE) or filename.startswith("<")


def called_into(frames: Sequence[FrameSummary]) -> int | None:
    """Index of the frame the engine called into (the component's method): the first
    frame outside the engine right after an engine frame; None when there is none."""
    for i in range(1, len(frames)):
        if is_engine(frames[i - 1].filename) and not is_engine(frames[i].filename):
            return i
    return None


def user_frame(frames: Sequence[FrameSummary]) -> FrameSummary | None:
    """The innermost frame of the user's code: outside the engine and the libraries if
    any is, else outside the engine, else the innermost frame."""
    for mine in (
        lambda f: not is_engine(f) and not is_library(f),
        lambda f: not is_engine(f),
    ):
        for f in reversed(frames):
            if mine(f.filename):
                return f
    return frames[-1] if frames else None


@partial(record, skip=("captured", "stack"), extra=("trace",))
@dataclass(frozen=True)
class ErrorReport:
    """One error. The traceback is kept as frame summaries and formatted when first read
    (most of an error's cost; a run failing every tuple keeps only the last few)."""

    # "execute" (the tuple failed) | "reported" | "fatal" (the task stopped) | "stuck" |
    # "stuck-fatal" (a call into user code has not returned; with fail-fast)
    kind: str
    component: str
    task: int
    error: str  # "ValueError: bad row 50"
    owner: str  # the component's class name
    method: str | None  # the method the engine called into, None if not found
    file: str | None  # the innermost frame of the user's code
    line: int | None
    time: float
    captured: traceback.TracebackException | None = field(default=None, repr=False)
    stack: traceback.StackSummary | None = field(default=None, repr=False)  # a stuck thread's

    @cached_property
    def trace(self) -> str:
        if self.captured is not None:
            text = "".join(self.captured.format()).rstrip("\n")
        elif self.stack is not None:
            head = "Stack of the thread that has not returned (most recent call last):\n"
            text = head + "".join(self.stack.format()) + self.error
        else:
            return ""
        return "...\n" + text[-TRACE_CHARS:] if len(text) > TRACE_CHARS else text

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a worker process's final report) as text: the capture refers to the
        exception's class, which the other side may not be able to import."""
        state = dict(self.__dict__, trace=self.trace)
        state["captured"] = state["stack"] = None
        return state

    @property
    def where(self) -> str:
        place = f"{self.file}:{self.line}" if self.file else "an unknown place"
        return f"{self.owner}.{self.method} at {place}" if self.method else place

    @property
    def headline(self) -> str:
        return f"{self.error} (in {self.where})"

    @property
    def text(self) -> str:
        outcome = OUTCOME.get(self.kind, self.kind)
        return f"{self.error}\n  in {self.where}; {outcome}\n{self.trace}"


def report(
    exc: BaseException,
    kind: str,
    component: str,
    task: int,
    owner: str,
    stack: Sequence[FrameSummary] = (),
) -> ErrorReport:
    """`stack`: where the error was reported from (report_error), used for the method
    when the exception's own traceback never passed through the engine."""
    te = traceback.TracebackException.from_exception(exc, lookup_lines=False)
    frames = list(te.stack)
    start = called_into(frames)
    if start is not None:
        te.stack = traceback.StackSummary.from_list(frames[start:])
        method: str | None = frames[start].name
    else:
        at = called_into(stack)
        method = stack[at].name if at is not None else None
    inner = user_frame(frames[start or 0 :]) or user_frame(stack) or _raised_at(exc)
    return ErrorReport(
        kind=kind,
        component=component,
        task=task,
        error=f"{type(exc).__name__}: {safe_str(exc)}{hint(exc, inner)}",
        owner=owner,
        method=method,
        file=inner.filename if inner else None,
        line=inner.lineno if inner else None,
        time=time.time(),
        captured=te,
    )


IS_TICK_CALLED = "; tup.is_tick is a property (a bool), not a method: write `if tup.is_tick:`"


def hint(exc: BaseException, inner: FrameSummary | None) -> str:
    """What the bare message does not say, for a mistake it names badly: the call
    `tup.is_tick()` (Storm's `isTick()` is a method) raises "'bool' object is not
    callable" on the user's line."""
    if (
        isinstance(exc, TypeError)
        and "'bool' object is not callable" in str(exc)
        and inner is not None
        and ".is_tick(" in (inner.line or "")
    ):
        return IS_TICK_CALLED
    return ""


def stuck_report(
    stack: Sequence[FrameSummary],
    topology: str,
    component: str,
    task: int,
    owner: str,
    seconds: float,
    limit: float,
    fatal: bool,
) -> ErrorReport:
    """A call into user code that has not returned for `seconds`: `stack` is its
    thread's, outermost first (traceback.extract_stack of the thread's frame)."""
    frames = list(stack)
    start = called_into(frames)
    method = frames[start].name if start is not None else None
    shown = frames[start:] if start is not None else frames
    inner = user_frame(shown)
    what = f"{owner}.{method}" if method else "its user code"
    return ErrorReport(
        kind="stuck-fatal" if fatal else "stuck",
        component=component,
        task=task,
        error=(
            f"{STUCK_ERROR}: component {component!r} task {task} of topology {topology!r}: "
            f"{what} has not returned for {seconds:.{0 if seconds >= 10 else 1}f} s "
            f"(topology.executor.stuck.secs: {limit:g})"
        ),
        owner=owner,
        method=method,
        file=inner.filename if inner else None,
        line=inner.lineno if inner else None,
        time=time.time(),
        stack=traceback.StackSummary.from_list(shown),
    )


def headline(entry: str) -> str:
    """One line for a `last_errors` entry: the error and where it was raised."""
    lines = entry.splitlines()
    if len(lines) > 1 and lines[1].startswith("  in "):
        return f"{lines[0]} ({lines[1].strip()})"
    return lines[0] if lines else entry


def _by_component(tasks: Iterable[Any]) -> tuple[dict, dict, dict]:
    """Errors per component, per (component, worker), and a component's last entry (of
    its first task with one)."""
    count: dict[str, int] = {}
    per_worker: dict[tuple[str, int], int] = {}
    last: dict[str, str] = {}
    for t in tasks:
        if not t.errors:
            continue
        count[t.component] = count.get(t.component, 0) + t.errors
        key = (t.component, t.worker)
        per_worker[key] = per_worker.get(key, 0) + t.errors
        if t.last_errors and t.component not in last:
            last[t.component] = t.last_errors[-1]
    return count, per_worker, last


def _distinct(tasks: Iterable[Any]) -> dict[str, dict[str, tuple[int, set[int]]]]:
    """Per component, each distinct error (its headline) with its count and tasks; a
    task's errors beyond those it kept are counted as its last one."""
    out: dict[str, dict[str, tuple[int, set[int]]]] = {}
    for t in tasks:
        if not t.errors or not t.last_errors:
            continue
        heads = [headline(e) for e in t.last_errors]
        extra = t.errors - len(heads)
        per = out.setdefault(t.component, {})
        for i, h in enumerate(heads):
            n, ids = per.get(h, (0, set()))
            per[h] = (n + 1 + (extra if i == len(heads) - 1 else 0), ids | {t.task})
    return out


def summary(tasks: Iterable[Any], shown: int) -> list[str]:
    """Closing lines for a terminal, one per component with errors. `shown`: errors per
    component and worker already written in full as they happened (the executors write
    the first SHOWN; 0 when nothing was shown, as for a topology on a remote cluster)."""
    tasks = list(tasks)
    count, per_worker, last = _by_component(tasks)
    seen: dict[str, int] = {}
    for (comp, _), n in per_worker.items():
        seen[comp] = seen.get(comp, 0) + min(shown, n)
    lines = []
    distinct = _distinct(tasks)
    for comp in sorted(count):
        more = count[comp] - seen[comp]
        if not more:  # all written in full, once per distinct error: each with its tasks
            for head, (n, ids) in distinct.get(comp, {}).items():
                if len(ids) > 1:
                    tids = ", ".join(str(i) for i in sorted(ids))
                    lines.append(f"component {comp!r}: {n:,} errors in tasks {tids}: {head}")
            continue
        s = "" if more == 1 else "s"
        last_one = headline(last[comp]) if comp in last else None
        if shown:
            text = f"component {comp!r}: {more:,} more error{s}"
            lines.append(text + (f" like {last_one}" if last_one else ""))
        else:
            text = f"component {comp!r}: {more:,} error{s}"
            lines.append(text + (f", the last: {last_one}" if last_one else ""))
    return lines


def new_errors(tasks: Iterable[Any], told: dict[str, int]) -> list[str]:
    """Lines for a live view (`stormish monitor`): per component whose error count grew
    past `told` (updated in place), how many are new and the last; the first time, with
    its traceback."""
    count, _, last = _by_component(tasks)
    lines = []
    for comp in sorted(count):
        n, before = count[comp], told.get(comp, 0)
        told[comp] = n
        if n <= before:  # none new (or fewer: a restarted worker counts from zero)
            continue
        entry = last.get(comp)
        what = f", the last: {headline(entry)}" if entry else ""
        lines.append(f"  component {comp!r}: {n - before:,} new ({n:,} in all){what}")
        if before == 0 and entry:
            lines += [f"    {line}" for line in entry.splitlines()[2:]]
    return lines


def safe_str(exc: BaseException) -> str:
    """`str(exc)`, or a placeholder when its `__str__` raises (as `traceback` prints
    it): a report must not fail on the error it reports (the task's failure was lost,
    and a thread of its own died with it)."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - any error of the user's __str__
        return f"<exception str() failed: {type(exc).__name__}>"


def engine_failure(where: str, exc: BaseException) -> Exception:
    """The error a worker fails with when the engine itself raised on one of its threads
    outside every task's turn (`where`: which thread), with the original as its cause
    (its report takes the place from there: `_raised_at`)."""
    from ..errors import WorkerError

    err = WorkerError(f"{where} failed: {type(exc).__name__}: {safe_str(exc)}")
    err.__cause__ = exc
    return err


def _raised_at(exc: BaseException) -> FrameSummary | None:
    """Where an error that was never raised itself (an engine failure's WorkerError)
    was raised: its cause's innermost frame, the engine's own included (no user frame
    names the place of an engine error)."""
    if exc.__traceback__ is not None or exc.__cause__ is None:
        return None
    tb = traceback.extract_tb(exc.__cause__.__traceback__)
    return tb[-1] if tb else None
