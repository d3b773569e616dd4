"""When an executor is stuck: the rule, sans I/O (`stuck_watch.py` is its thread).

An executor is stuck when one call into its user code (`execute`, `next_tuple`, `ack`,
`fail`, `prepare`, `open`...) has not returned for `topology.executor.stuck.secs`.
Nothing is stamped per call for this: the rule reads what the runtime already keeps.

- A cooperative scheduler stamps the start of every turn (`Scheduler.since`, which its
  blocking watchdog reads too). A turn is bounded (TURN_SECONDS), but it runs at least
  one whole batch: a slow execute over a batch of 500 makes a turn of many seconds in
  which every call returns. So a turn is told apart by the call it is in: the outermost
  user frame of its thread (stuck_watch.py), the same frame object from look to look
  being the same call. When that call began is not known: it is measured from the
  first look that saw it (a report comes at most one look, 1 s, later). A turn whose
  thread shows no user frame (the engine between calls) keeps the turn's exact start.
- An executor on a thread of its own counts its loop turns (`Executor.turns`), and its
  turn is a batch too, so the call it is in goes with the count. A count and call that
  have not moved since the rule first saw them mean one call has not returned, or the
  thread is waiting in the engine (an inactive spout before `open`): the shell tells
  the two apart by the thread's stack. The call began before the first look that saw
  the count, so measuring from that look never calls an executor stuck too early.

Each observation names a progress `mark` (a turn's start, a turn count; None: not in
user code now). The same mark seen again continues an episode; a new one starts
another. An episode is reported once (`reported`), and its end is said once (BACK),
so a bolt stuck for an hour is one error, not one a second.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

QUIET = "quiet"  # not stuck
STUCK = "stuck"  # past the limit and not reported yet in this episode: report it
STILL = "still"  # past the limit, already reported
BACK = "back"  # a reported episode ended: the call returned (or the task ended)


@dataclass(frozen=True)
class Verdict:
    what: str  # QUIET, STUCK, STILL or BACK
    since: float = 0.0  # when the call began (or was first seen going on)
    seconds: float = 0.0  # how long it has gone on (BACK: how long it went on)


@dataclass
class _Episode:
    mark: Hashable
    since: float
    reported: bool = False


class StuckRule:
    """Per task: the episode going on, fed one observation per look."""

    def __init__(self) -> None:
        self._episodes: dict[int, _Episode] = {}

    def observe(
        self, task: int, mark: Hashable | None, now: float, limit: float,
        entered: float | None = None,
    ) -> Verdict:  # fmt: skip
        """`mark`: what shows progress (None: not in user code); `entered`: when the
        call began, if known exactly; `limit` <= 0 turns the rule off for the task."""
        ep = self._episodes.get(task)
        back = None
        if ep is not None and (mark is None or mark != ep.mark or limit <= 0):
            del self._episodes[task]
            if ep.reported:
                back = Verdict(BACK, ep.since, now - ep.since)
            ep = None
        if mark is None or limit <= 0:
            return back or Verdict(QUIET)
        if ep is None:
            ep = self._episodes[task] = _Episode(mark, now if entered is None else entered)
        if back is not None:  # the next look judges the new episode
            return back
        seconds = now - ep.since
        if seconds < limit:
            return Verdict(QUIET, ep.since, seconds)
        return Verdict(STILL if ep.reported else STUCK, ep.since, seconds)

    def reported(self, task: int) -> None:
        """The shell reported the episode: not STUCK again until a new one starts."""
        ep = self._episodes.get(task)
        if ep is not None:
            ep.reported = True


def look_every(limits: list[float]) -> float:
    """The watch's period: a quarter of the shortest limit that is on, within 0.05 s
    and 1 s (a report comes at most that late; a look costs a few attribute reads per
    executor); None of them on: 0 (no watch)."""
    on = [x for x in limits if x > 0]
    return min(1.0, max(0.05, min(on) / 4)) if on else 0.0
