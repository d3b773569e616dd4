"""Nimbus's decisions, apart from its sockets: (what nimbus knows, now) -> what to do.

Nimbus's loop gathers what it knows into a `View` (each topology's status, plan size,
slots, kill time and the workers it has brought up; the supervisors and when each was
last heard; the workers' latest hellos), asks `decide`, and carries the actions out:
the talking to workers (assign, peers, start, stop) stays in nimbus, the choosing is
here, pure, so that scenarios (a lost supervisor, a slot whose port another program
took, a slow worker, too few slots, a nimbus
restart under running workers, a worker restarted by its supervisor) are tested without
a process (tests/unit/test_nimbus_decide.py), as `supervisor.changes` is for the
supervisor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import StormishError
from ..runtime.status import ENDED, TopologyStatus

STALE_HELLO = 5.0  # seconds: an older hello does not announce a new incarnation
# the longest wait of a kill or a rebalance: Storm's KillOptions/RebalanceOptions
# wait_secs is an i32 (`storm kill -w` parses an int)
MAX_WAIT_SECS = 2**31 - 1


def wait_seconds(verb: str, name: str, wait: Any) -> float:
    """A kill's or a rebalance's wait, checked: a finite number of seconds from 0 to
    MAX_WAIT_SECS; otherwise a StormishError naming it. `inf` left a topology killing
    for good and `nan` killed it at once (found by a bug hunt): what nimbus is sent by
    any client, not only ours, is checked here before anything changes."""
    number = isinstance(wait, int | float) and not isinstance(wait, bool)
    if not number or not math.isfinite(wait) or not 0 <= wait <= MAX_WAIT_SECS:
        raise StormishError(
            f"{verb} {name!r}: the wait must be a finite number of seconds from 0 to "
            f"{MAX_WAIT_SECS} (Storm's -w), got {wait!r}"
        )
    return float(wait)


@dataclass(frozen=True)
class HelloSeen:
    pid: int
    state: str | None  # "new", "assigned" or "running" (what the worker said)
    heard: float


@dataclass(frozen=True)
class TopologyView:
    name: str
    status: TopologyStatus
    workers: int  # the plan's
    slots: dict[int, str]  # worker index -> supervisor id
    kill_at: float | None = None
    rebalance_at: float | None = None  # a rebalance's wait ends then (spouts deactivated)
    known_pids: dict[int, int | None] = field(default_factory=dict)  # brought up, by index
    ports: dict[int, int] = field(default_factory=dict)  # worker index -> its slot's port


@dataclass(frozen=True)
class View:
    now: float
    supervisor_timeout: float
    supervisors: dict[str, float]  # id -> when last heard
    topologies: list[TopologyView]
    hellos: dict[tuple[str, int], HelloSeen]
    failed: dict[str, frozenset[int]] = field(default_factory=dict)  # supervisor -> ports


# -- actions ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ForgetSupervisor:
    """Silent too long: gone; its workers are to be placed elsewhere."""

    supervisor: str


@dataclass(frozen=True)
class Move:
    """Workers whose slot failed (its supervisor found the port taken by another
    program): let go of that slot, to be placed on another, not the topology failed."""

    topology: str
    indices: tuple[int, ...]


@dataclass(frozen=True)
class Place:
    """Workers without a slot: give them free ones (or say why it waits)."""

    topology: str
    missing: tuple[int, ...]


@dataclass(frozen=True)
class Start:
    """Every worker said hello: bring them all up, each from the state it reported."""

    topology: str
    states: tuple[tuple[int, str | None], ...]


@dataclass(frozen=True)
class Adopt:
    """A worker running already (nimbus restarted under it): take it as it is."""

    topology: str
    index: int
    pid: int


@dataclass(frozen=True)
class BringUp:
    """A new incarnation (its supervisor restarted it): assign, tell, start it."""

    topology: str
    index: int
    pid: int
    state: str | None


@dataclass(frozen=True)
class End:
    topology: str
    status: TopologyStatus  # killed (complete and failed: the completion rule's, the workers')


@dataclass(frozen=True)
class Rebalance:
    """A rebalance's wait is over (its spouts were deactivated so that trees in flight
    complete): stop the workers and start the new plan."""

    topology: str


@dataclass(frozen=True)
class CheckCompletion:
    topology: str


Action = (
    ForgetSupervisor | Move | Place | Start | Adopt | BringUp | End | Rebalance | CheckCompletion
)


def decide(view: View) -> list[Action]:
    """What nimbus does now, in order."""
    out: list[Action] = []
    gone = {
        sid for sid, heard in view.supervisors.items() if view.now - heard > view.supervisor_timeout
    }
    out += [ForgetSupervisor(sid) for sid in sorted(gone)]
    for t in view.topologies:
        if t.status in ENDED:
            continue
        if t.status == TopologyStatus.STARTING and t.kill_at is not None:
            out.append(End(t.name, TopologyStatus.KILLED))  # never ran: nothing to drain
            continue
        slots = {i: s for i, s in t.slots.items() if s not in gone}
        moved = tuple(
            i for i, s in sorted(slots.items()) if t.ports.get(i) in view.failed.get(s, ())
        )
        if moved:
            out.append(Move(t.name, moved))
            slots = {i: s for i, s in slots.items() if i not in moved}
        missing = tuple(i for i in range(t.workers) if i not in slots)
        if missing:
            out.append(Place(t.name, missing))
        if t.status == TopologyStatus.STARTING:
            hellos = [view.hellos.get((t.name, i)) for i in range(t.workers)]
            if not missing and all(h is not None for h in hellos):
                out.append(Start(t.name, tuple((i, h.state) for i, h in enumerate(hellos) if h)))
            continue
        for i in range(t.workers):  # running
            h = view.hellos.get((t.name, i))
            if h is None or h.pid == t.known_pids.get(i) or view.now - h.heard > STALE_HELLO:
                continue
            if h.state == "running":
                out.append(Adopt(t.name, i, h.pid))
            else:
                out.append(BringUp(t.name, i, h.pid, h.state))
        if t.kill_at is not None and view.now >= t.kill_at:
            out.append(End(t.name, TopologyStatus.KILLED))
        elif t.kill_at is None and t.rebalance_at is not None and view.now >= t.rebalance_at:
            out.append(Rebalance(t.name))
        else:
            out.append(CheckCompletion(t.name))
    return out
