"""Simulated time, settled: after a FakeClock moved, wait until a topology has done all
that the new time allows before the clock moves again (Storm's advance-cluster-time
waits until every thread sleeps in simulated time; Trio's mock clock jumps only when
every task is blocked).

A worker is settled when two snapshots taken one poll apart show:
- every thread waiting on the clock waits for a future time (a timer that woke and has
  not waited again, or a sleeper whose time has come, is still at work);
- every executor either *dormant* in both (a spout submitted inactive, not opened
  yet), *held* in both (asleep in the clock until a future time: a
  component in `context.clock.sleep` inside its callback) or *idle* in the second, with
  nothing in its queue, outboxes or pendingEmitQ, the same counters in both, and at
  least two loop turns between them. Two turns mean an iteration that began after the
  first snapshot (so it read the new time, ran timeouts, rotations and flushes) ended;
  a thread inside user code makes no turns, so it is never taken for idle. A look that
  finds only executors short of turns keeps its first snapshot (on a loaded machine a
  thread may not loop twice in one poll), any other change starts afresh.

`settled` is the rule, pure over snapshots (scenario tests in tests/unit); `wait_settled`
is the shell that takes them from an in-process worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

POLL = 0.003  # seconds of real time between the two snapshots


@dataclass(frozen=True)
class ExecutorView:
    name: str  # "component[task]", for messages
    turns: int
    held: bool  # asleep in the clock until a future time
    counters: tuple[int, ...]
    idle: bool  # empty queue, outboxes and pendingEmitQ
    dormant: bool = False  # a spout submitted inactive, waiting to be opened


@dataclass(frozen=True)
class Snapshot:
    now: float
    waits: dict[int, float | None]  # clock waiters: thread id -> time waited for
    executors: tuple[ExecutorView, ...]


MOVED = "moved"  # something changed or is due: the next look compares with a new first
SLOW = "slow"  # an executor has not looped twice yet: keep the first, look again later


def settled(a: Snapshot, b: Snapshot) -> list[tuple[str, str]]:
    """[] when nothing more happens at this time; otherwise what is still at work, as
    (MOVED or SLOW, what)."""
    out = []
    for snap in (a, b):
        for ident, until in snap.waits.items():
            if until is None or until <= snap.now:
                out.append((MOVED, f"thread {ident} woke at time {snap.now}, not waiting again"))
    for ea, eb in zip(a.executors, b.executors, strict=True):
        if (ea.held and eb.held) or (ea.dormant and eb.dormant):
            continue
        if eb.held:
            out.append((MOVED, f"{eb.name} just fell asleep in the clock"))
        elif not eb.idle:
            out.append((MOVED, f"{eb.name} has tuples queued, buffered or pending"))
        elif ea.counters != eb.counters:
            out.append((MOVED, f"{eb.name} is processing"))
        elif eb.turns < ea.turns + 2:
            out.append((SLOW, f"{eb.name} has not looped since the last look (in user code?)"))
    return out


def snapshot(worker: Any, clock: Any) -> Snapshot:
    """Read an in-process worker (its executors' counters; thread-safe reads of ints)."""
    now = clock.now()
    views = []
    for ex in worker.executors.values():
        col = ex.collector
        thread = ex.thread
        until = clock.sleeping_until(thread.ident if thread is not None else None)
        sched = ex.scheduler
        if sched is not None and sched.current is not ex:
            until = None  # its scheduler's thread sleeps in another executor's turn
        views.append(
            ExecutorView(
                f"{ex.component}[{ex.task}]",
                ex.turns,
                until is not None and until > now,
                (col.transferred, ex.consumed, ex.executed, ex.acked, ex.failed),
                not (col.pending_count or col.buffered() or len(ex.queue)),
                ex.turns == 0 and not getattr(ex, "wanted_active", True),
            )
        )
    return Snapshot(now, clock.waiting(), tuple(views))


def wait_settled(running: Any, clock: Any, timeout: float) -> None:
    """Block until every worker of `running` (in-process, on `clock`) is settled.
    Raises WorkerError when an executor died, TimeoutError naming what did not settle."""
    deadline = time.monotonic() + timeout
    before = [snapshot(w, clock) for w in running.workers]
    while True:
        running.check_failed()
        time.sleep(POLL)
        after = [snapshot(w, clock) for w in running.workers]
        why = [r for pair in zip(before, after, strict=True) for r in settled(*pair)]
        if not why:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"topology {running.name!r} did not settle at simulated time {clock.now()} "
                f"within {timeout}s of real time: {'; '.join(text for _, text in why)}"
            )
        if any(kind == MOVED for kind, _ in why):
            before = after
