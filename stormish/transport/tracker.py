"""Storm 2.0's backpressure between workers, as two sans-I/O state machines.

Workers talk fire-and-forget, so a receiver cannot refuse a tuple: it parks what does not
fit in the task's overflowQ and tells its upstream workers to stop sending to that task.
`BackpressureTracker` is the receiver's side: events in (a tuple was parked, a peer
connected, the backpressure-check timer ticked), instructions out (`Broadcast` or `SendTo`
a `BackpressureStatus`). `RemoteBackpressure` is the sender's side: one flag per remote
task, read on every emit. Neither does I/O nor reads a clock, so both are tested as
scenarios and the worker shell only has to carry out the instructions.

Rules kept from Storm (`BackPressureTracker`, `WorkerState.transferLocalBatch`):
- a status is a worker's FULL list of tasks under and not under backpressure, so any one
  status is enough to resynchronise a peer that missed earlier ones;
- a status can be lost, so while a task's overflow keeps growing the status is resent
  every `resend_step` parked tuples. The step is counted per task (STORM-3510 shipped one
  counter shared by every executor, which resent too rarely or too often);
- every new connection gets the current status once its handshake is done (STORM-3763);
- status ids only grow, and a sender never lets an older status override a newer one.

And one of our own: a status counts only in its worker's current epoch. A worker's HELLO
opens an epoch bound to the connection it came on (`hello`), announcing where its status
ids start; a status from another connection (a forged one, or one left over from a former
incarnation) or with an id outside the announced range is refused, so no peer can freeze
a task by sending an absurd id that every real status would then be "older" than.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

# The ids one epoch may use, from the first its HELLO announced: 2**40 statuses (35
# years at a thousand a second), and far short of 2**64, so an id of 2**64-1 is refused.
STATUS_ID_SPAN = 2**40


@dataclass(frozen=True, slots=True)
class BackpressureStatus:
    """One worker's full backpressure picture; `status_id` orders the statuses of a worker.

    `bp_tasks` and `non_bp_tasks` are disjoint and together are every task of the worker.
    """

    worker_id: int
    status_id: int
    bp_tasks: frozenset[int]
    non_bp_tasks: frozenset[int]

    def __post_init__(self) -> None:
        both = self.bp_tasks & self.non_bp_tasks
        if both:
            raise ValueError(
                f"backpressure status {self.status_id} of worker {self.worker_id} lists "
                f"tasks {sorted(both)} both under and not under backpressure"
            )


@dataclass(frozen=True, slots=True)
class Broadcast:
    """Send `status` to every connected upstream worker."""

    status: BackpressureStatus


@dataclass(frozen=True, slots=True)
class SendTo:
    """Send `status` to one worker, `peer`."""

    peer: int
    status: BackpressureStatus


Instruction = Broadcast | SendTo


@dataclass(frozen=True, slots=True)
class TrackerStatistics:
    """What a `BackpressureTracker` has announced.

    - `sent`: statuses broadcast because the set of tasks under backpressure changed.
    - `resent`: reminders broadcast because an overflow kept growing past the resend step.
    - `sent_on_connect`: statuses sent to one newly connected worker.
    - `tasks_under_backpressure`: how many local tasks are under backpressure now.
    - `bp_tasks`: which ones (what `monitor` shows as the cause).
    """

    sent: int
    resent: int
    sent_on_connect: int
    tasks_under_backpressure: int
    bp_tasks: frozenset[int]


class _TaskState:
    """Per-task state: never share it between tasks (STORM-3510)."""

    __slots__ = ("under_bp", "overflow_at_last_send")

    def __init__(self) -> None:
        self.under_bp = False
        self.overflow_at_last_send = 0


class BackpressureTracker:
    """The receiving worker's backpressure state: which local tasks are under backpressure.

    Each method takes an event and returns the instructions (possibly none) the shell must
    carry out, in order. Status ids start at `first_status_id` and grow by one per status:
    give a restarted worker a start above anything its previous life sent (a wall-clock
    nanosecond count, say), or peers that still remember the old ids ignore it as stale.
    `resume_fill` adds hysteresis: a task leaves backpressure only when its overflow is
    empty and its receive queue is at most this full (0.0 to 1.0; 1.0, the default, is
    Storm's rule: an empty overflow is enough). Not thread-safe: drive it from one thread
    (the receive thread can run the timer between polls).
    """

    def __init__(
        self,
        worker_id: int,
        local_tasks: Iterable[int],
        resend_step: int = 10000,
        *,
        first_status_id: int = 1,
        resume_fill: float = 1.0,
    ):
        if resend_step < 1:
            raise ValueError(f"resend_step must be >= 1, got {resend_step}")
        if not 0.0 <= resume_fill <= 1.0:
            raise ValueError(f"resume_fill must be within [0.0, 1.0], got {resume_fill}")
        self.worker_id = worker_id
        self.resend_step = resend_step
        self.resume_fill = resume_fill
        self._tasks = {task: _TaskState() for task in local_tasks}
        self._bp: set[int] = set()
        self._next_id = first_status_id
        self._sent = self._resent = self._sent_on_connect = 0

    @property
    def bp_tasks(self) -> frozenset[int]:
        """The local tasks under backpressure now."""
        return frozenset(self._bp)

    def overflow_grew(self, task: int, overflow_size: int) -> list[Instruction]:
        """The receive path parked tuples in `task`'s overflowQ, now `overflow_size` long.

        Call it at least once per parked batch. Enters backpressure (and broadcasts) the
        first time; afterwards broadcasts a reminder whenever the overflow has grown by
        more than `resend_step` since the last status sent on this task's account.
        """
        state = self._tasks.get(task)
        if state is None:
            raise ValueError(f"task {task} is not a task of worker {self.worker_id}")
        if not state.under_bp:
            state.under_bp = True
            self._bp.add(task)
            state.overflow_at_last_send = overflow_size
            self._sent += 1
            return [Broadcast(self._new_status())]
        if overflow_size - state.overflow_at_last_send > self.resend_step:
            state.overflow_at_last_send = overflow_size
            self._resent += 1
            return [Broadcast(self._new_status())]
        return []

    def peer_connected(self, peer_worker_id: int) -> list[Instruction]:
        """A worker connected and finished its handshake: it gets the full status."""
        self._sent_on_connect += 1
        return [SendTo(peer_worker_id, self._new_status())]

    def timer(
        self, overflow_sizes: Mapping[int, int], queue_fill: Mapping[int, float]
    ) -> list[Instruction]:
        """The backpressure-check timer ticked: release the tasks that have drained.

        `overflow_sizes` and `queue_fill` map a local task to its overflow length and its
        receive-queue fill (0.0 to 1.0). A task missing from a map counts as empty: when
        in doubt a task is released (if it is still swamped it re-enters at once) rather
        than left flagged forever, which would stall its upstream workers.
        """
        released = [
            task
            for task in self._bp
            if overflow_sizes.get(task, 0) <= 0 and queue_fill.get(task, 0.0) <= self.resume_fill
        ]
        if not released:
            return []
        for task in released:
            self._tasks[task].under_bp = False
            self._bp.discard(task)
        self._sent += 1
        return [Broadcast(self._new_status())]

    def statistics(self) -> TrackerStatistics:
        bp = frozenset(self._bp)
        return TrackerStatistics(self._sent, self._resent, self._sent_on_connect, len(bp), bp)

    def _new_status(self) -> BackpressureStatus:
        status_id = self._next_id
        self._next_id += 1
        bp = frozenset(self._bp)
        return BackpressureStatus(self.worker_id, status_id, bp, frozenset(self._tasks) - bp)


@dataclass(frozen=True, slots=True)
class RemoteStatistics:
    """What a `RemoteBackpressure` has seen.

    - `received`: statuses passed to `apply`, refused and stale ones included.
    - `stale_ignored`: statuses ignored because their id was not above the last applied.
    - `tasks_flagged`: remote tasks flagged as under backpressure now.
    - `refused_unbound`: statuses refused because they did not come on the connection
      their worker said HELLO on (or it never did).
    - `refused_out_of_range`: statuses refused because their id was outside the range
      their worker's HELLO announced.
    """

    received: int
    stale_ignored: int
    tasks_flagged: int
    refused_unbound: int = 0
    refused_out_of_range: int = 0


class Greeting(Enum):
    """What a HELLO meant to `RemoteBackpressure.hello`."""

    FIRST = "first"  # the first HELLO of this worker: a new epoch
    RESTARTED = "restarted"  # a new incarnation: its predecessor's flags are released
    RECONNECTED = "reconnected"  # the same incarnation on another connection
    KNOWN = "known"  # the same incarnation on the same connection: nothing changes


class Verdict(Enum):
    """What `RemoteBackpressure.apply` did with a status."""

    APPLIED = "applied"
    STALE = "stale"  # not newer than the last applied of its epoch
    UNBOUND = "unbound"  # not from the connection its worker said HELLO on
    OUT_OF_RANGE = "out_of_range"  # an id outside the range that HELLO announced


@dataclass(slots=True)
class _Epoch:
    incarnation: str
    connection: Hashable
    first_id: int
    last_id: int = -1  # the last applied, -1 before the first


class RemoteBackpressure:
    """The sending worker's view: which remote tasks it must not send to.

    `flagged` is a plain set, read on the emit path (`task in remote.flagged`); only this
    object writes it. A task is flagged by the worker whose status last put it under
    backpressure; a status listing the task as free, from any worker (the task may have
    moved), releases it, and so does `forget_worker` on the worker that flagged it.
    A status counts only within its worker's epoch: on the connection that worker's
    latest HELLO came on (`hello`), with an id in the range that HELLO announced, and
    above the last applied. Connections are opaque: whatever names the connection a
    message came on (the ZAP handler's User-Id under CURVE; None where nothing can tell
    connections apart, when every connection is the same one).
    One thread writes (the receive thread); emitters on other threads may read `flagged`
    (a set lookup is atomic under the GIL, and a task that stays flagged from one status
    to the next is never released in between).
    """

    def __init__(self) -> None:
        self.flagged: set[int] = set()
        self._flagged_by: dict[int, int] = {}
        self._epochs: dict[int, _Epoch] = {}
        self._asked: set[tuple[int, Hashable]] = set()
        self._received = self._stale = self._unbound = self._out_of_range = 0
        self._since: dict[int, float] = {}
        self.flagged_seconds: dict[int, float] = {}
        self.now: Any = None  # a clock (callable) to time flags by; None: not timed

    def is_flagged(self, task: int) -> bool:
        return task in self.flagged

    def hello(self, worker: int, incarnation: str, connection: Hashable, first_id: int) -> Greeting:
        """`worker` said HELLO on `connection` as `incarnation`, whose status ids start at
        `first_id`: unless nothing changed, its statuses now count on that connection
        only, with ids in [first_id, first_id + STATUS_ID_SPAN), in a new epoch."""
        epoch = self._epochs.get(worker)
        if epoch is not None and (epoch.incarnation, epoch.connection) == (incarnation, connection):
            return Greeting.KNOWN
        self._epochs[worker] = _Epoch(incarnation, connection, first_id)
        self._asked = {(w, c) for w, c in self._asked if w != worker}
        if epoch is None:
            return Greeting.FIRST
        if epoch.incarnation == incarnation:
            return Greeting.RECONNECTED
        self.forget_worker(worker)
        return Greeting.RESTARTED

    def apply(self, status: BackpressureStatus, connection: Hashable = None) -> Verdict:
        """Apply `status`, received on `connection`, if it counts in its worker's epoch."""
        self._received += 1
        worker = status.worker_id
        epoch = self._epochs.get(worker)
        if epoch is None or epoch.connection != connection:
            self._unbound += 1
            return Verdict.UNBOUND
        if not epoch.first_id <= status.status_id < epoch.first_id + STATUS_ID_SPAN:
            self._out_of_range += 1
            return Verdict.OUT_OF_RANGE
        if status.status_id <= epoch.last_id:
            self._stale += 1
            return Verdict.STALE
        epoch.last_id = status.status_id
        listed = status.bp_tasks | status.non_bp_tasks
        dropped = [
            task
            for task, by in self._flagged_by.items()
            if (by == worker and task not in listed) or task in status.non_bp_tasks
        ]
        for task in dropped:
            self._release(task)
        for task in status.bp_tasks:
            self._flagged_by[task] = worker
            if self.now is not None and task not in self._since:
                self._since[task] = self.now()
        self.flagged.update(status.bp_tasks)
        return Verdict.APPLIED

    def ask_hello(self, worker: int, connection: Hashable) -> bool:
        """A status of `worker` was refused as unbound on `connection`: True the first
        time since that worker's last HELLO, when the shell should ask it to say HELLO
        again (its connection may have been re-established under it, or its HELLO
        may still be on the way: either way its next HELLO binds the right one)."""
        if (worker, connection) in self._asked:
            return False
        self._asked.add((worker, connection))
        return True

    def unask(self, worker: int, connection: Hashable) -> None:
        """What `worker`'s connection carried waited for a HELLO in vain: the next
        refusal on it asks again (`ask_hello`)."""
        self._asked.discard((worker, connection))

    def forget_worker(self, worker_id: int) -> None:
        """`worker_id` disconnected: release its flags (its epoch stays: a new
        incarnation's HELLO starts the next one)."""
        for task in [t for t, by in self._flagged_by.items() if by == worker_id]:
            self._release(task)

    def statistics(self) -> RemoteStatistics:
        return RemoteStatistics(
            self._received, self._stale, len(self.flagged), self._unbound, self._out_of_range
        )

    def flag_times(self) -> dict[int, float]:
        """Seconds each remote task has spent flagged (the current spell included)."""
        out = dict(self.flagged_seconds)
        if self.now is not None and self._since:
            now = self.now()
            for task, since in self._since.items():
                out[task] = out.get(task, 0.0) + now - since
        return out

    def _release(self, task: int) -> None:
        del self._flagged_by[task]
        self.flagged.discard(task)
        since = self._since.pop(task, None)
        if since is not None:
            self.flagged_seconds[task] = self.flagged_seconds.get(task, 0.0) + self.now() - since
