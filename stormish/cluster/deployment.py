"""A topology as nimbus runs it: its plan, its worker slots, and handles on its workers.

`ClusterWorker` is nimbus's handle on a worker a supervisor runs: it is known by its
hellos (heartbeats), not as a child process, and a worker that is silent is not waited
for (its supervisor restarts it). It answers `RunningTopology`'s questions (the
`WorkerView` protocol) as the local cluster's `WorkerHandle` does, sharing with it what
a worker's answers mean (`local.answers.WorkerAnswers`). `Deployment` keeps what nimbus
persists (status, slots, epoch) and hands `RunningTopology` its workers, so that
completion, statistics and stopping work as on the local cluster.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from .. import pickling
from ..errors import WorkerError, WorkerTimeout
from ..local.answers import NOT_QUIET, WorkerAnswers
from ..local.running import Completion, RunningTopology
from ..runtime.acker import AckerBolt
from ..runtime.plan import build_plan
from ..runtime.status import TopologyStatus
from ..topology import Topology

if TYPE_CHECKING:
    from ..transport.control_server import ControlServer


class Host(Protocol):
    """What a deployment needs of its nimbus (nimbus.Nimbus is one)."""

    control: ControlServer  # its workers' hellos, and requests to them
    worker_timeout: float  # a worker not heard from for this long is taken as gone


# Requests to a worker: nimbus's one loop must not stall long on a dead host's workers.
ASK_TIMEOUT = 5.0
# A look (quiescence, stats) waits less: a worker that misses it is "not quiet" and shows
# its last statistics, and nimbus's loop (supervisors' heartbeats, the API, requests a
# follower forwards within their own bounds) goes on. A worker is taken as alive until
# its beats (a thread of its own, going on while a starved loop answers late) have been
# missing nimbus's worker timeout.
LOOK_TIMEOUT = 1.5
SILENT_RETRY = 2.0  # a worker that let a look time out is asked again this late


class ClusterWorker:
    """A worker run by a supervisor: known by its hellos, not by a child process. A dead
    one is its supervisor's to restart: it is no failure here, only not quiet, and what
    it held is gone (its next incarnation is brought up by nimbus: `new_incarnation`)."""

    def __init__(self, name: str, index: int, nimbus: Host):
        self.topology = name
        self.index = index
        self.nimbus = nimbus
        self.ident = b""
        self.address: str | None = None
        self.worker_pid: int | None = None
        # the process nimbus last gave up on as dead (it may only have been out of reach)
        self.given_up: int | None = None
        self.answers = WorkerAnswers(index)
        self.stopped = False
        self.silent_at: float | None = None  # when it last let a look time out
        self.last_stats: tuple[list, dict] = ([], {})  # its last answer to `stats`

    @property
    def pid(self) -> int | None:
        return self.worker_pid

    def alive(self) -> bool:
        h = self.nimbus.control.hellos.get((self.topology, self.index))
        return (
            h is not None
            and h.pid == self.worker_pid
            and time.monotonic() - h.heard < self.nimbus.worker_timeout
        )

    def ask(self, verb: str, payload: Any = None, timeout: float = ASK_TIMEOUT) -> Any:
        try:
            return self.nimbus.control.request(
                self.ident, verb, payload, self.alive, timeout,
                f"worker {self.index} (pid {self.pid})",
            )  # fmt: skip
        except WorkerError:
            if self.answers.failure is not None:  # it said why: say that
                raise WorkerError(self.answers.failure) from None
            raise

    def new_incarnation(self, ident: bytes, pid: int) -> None:
        """Its supervisor started it again: a new process, nothing known of it yet."""
        self.ident, self.worker_pid, self.given_up = ident, pid, None
        self.answers.reset()
        self.stopped = False
        self.silent_at = None
        self.last_stats = ([], {})

    # -- the WorkerView protocol (local/running.py) ----------------------------------------
    def failure(self) -> str | None:
        return self.answers.failure  # a dead process is the supervisor's to restart

    def quiescence(self) -> dict[str, Any]:
        """A live worker that does not answer in time (hung, or starved on a loaded host)
        is not quiet, and is asked again only after SILENT_RETRY: a hung one is its
        supervisor's to kill and restart when its heartbeat stops (Storm's
        supervisor.worker.timeout.secs), as Storm's nimbus leaves it. (Found in a loaded
        CI run: a worker a test had stopped failed the whole topology at this ask.)"""
        if not self.answers.ended and not self.alive():
            return dict(NOT_QUIET)
        if self._silent_lately():
            return dict(NOT_QUIET)
        try:
            got = self.answers.quiescence(self._look)
        except WorkerTimeout:
            self.silent_at = time.monotonic()
            return dict(NOT_QUIET)
        except WorkerError:
            if self.alive():
                raise
            return dict(NOT_QUIET)  # it died while asked: its supervisor restarts it
        self.silent_at = None
        return got

    def stats_snapshot(self) -> tuple[list, dict]:
        """A live worker that does not answer within LOOK_TIMEOUT shows its last
        statistics, as Storm's UI shows a worker's last heartbeat: `stats` waited 5 s on
        each hung worker, nimbus's whole loop with it (a loaded CI run: a follower's
        forwarded stats, 5 s at most, was refused)."""
        if not self.answers.ended and not self.alive():
            return [], {}  # gone: its supervisor restarts it; its counters went with it
        if self._silent_lately():
            return self.last_stats
        try:
            got = self.answers.stats(self._look)
        except WorkerTimeout:
            self.silent_at = time.monotonic()
            return self.last_stats
        except WorkerError:
            if self.alive():
                raise
            return [], {}
        self.silent_at = None
        self.last_stats = got
        return got

    def _look(self, verb: str, payload: Any = None, timeout: float = LOOK_TIMEOUT) -> Any:
        return self.ask(verb, payload, min(timeout, LOOK_TIMEOUT))

    def _silent_lately(self) -> bool:
        return self.silent_at is not None and time.monotonic() - self.silent_at < SILENT_RETRY

    def end_of_input(self) -> int:
        if not self.alive() or self.answers.ended:
            return 0
        try:
            return int(self.ask("end_input"))
        except WorkerError:
            if self.alive():
                raise
            return 0  # it died meanwhile: its supervisor restarts it; asked again then

    def set_active(self, active: bool) -> None:
        if not self.alive() or self.answers.ended:
            return
        try:
            self.ask("active", active)
        except WorkerError:
            if self.alive():
                raise

    def stop(self, timeout: float = 10.0) -> list[str]:
        self.stopped = True
        return self.answers.stop(self.ask, timeout) if self.alive() else []

    def results(self) -> dict[str, list[tuple[int, Any]]]:
        return self.answers.results()

    def errors(self) -> list[dict[str, Any]]:
        return self.answers.errors()


class Deployment:
    """One submitted topology on the cluster."""

    def __init__(self, nimbus: Host, topology: Topology, conf: dict[str, Any]):
        self.nimbus = nimbus
        self.name = topology.name
        self.topology = topology
        self.conf = conf
        self.control = nimbus.control  # its workers' hellos
        self.status = TopologyStatus.STARTING
        self.slots: dict[int, tuple[str, int]] = {}
        self.error: str | None = None
        self.kill_at: float | None = None
        # a rebalance waiting for its trees in flight: when, onto how many workers, and
        # whether the spouts are active again after it (as they were before the wait)
        self.rebalance_at: float | None = None
        self.rebalance_to = 0
        self.resume_active = True
        self.submitted = time.time()
        self.restarts = 0
        self.waiting: str | None = None  # why it is not placed yet (slots), for list/monitor
        self.log_hosts: dict[int, list[str]] = {}  # worker -> every supervisor it ran on
        self.epoch = 0
        self.active = True  # spouts active; RunningTopology.set_active keeps it current
        # running workers not told yet that their spouts are as `active` says (alive,
        # they did not answer; adopted): nimbus tells them again from `tell_at` on
        self.untold: set[int] = set()
        self.tell_at = 0.0
        self.next_check = 0.0  # when nimbus next applies the completion rule
        self.replan()

    def replan(self) -> None:
        """A fresh plan and workers (submit, rebalance): the epoch tells supervisors to
        start new processes even on the same ports, and old hellos mean nothing now."""
        self.epoch += 1
        self.untold = set()  # new workers: they start with their spouts as `active` says
        for key in [k for k in self.control.hellos if k[0] == self.name]:
            del self.control.hellos[key]
        self.plan = build_plan(self.topology, self.conf, AckerBolt())
        self._blob: tuple[int, bytes] | None = None
        self.handles = [ClusterWorker(self.name, i, self.nimbus) for i in range(self.plan.workers)]
        self.running = RunningTopology(self.topology, self.plan, self.handles)
        self.running.group = self
        self.completion = Completion(self.running)

    @property
    def blob(self) -> bytes:
        """What a worker is assigned: the topology, its config, the task assignment and
        the run's id, its epoch (final only once nimbus placed it past a removed
        topology's epoch, or restored it: so made when first asked, per epoch). Every
        worker of an epoch, restarted or adopted, names the same run."""
        if self._blob is None or self._blob[0] != self.epoch:
            run = f"e{self.epoch}"
            assignment = dict(self.plan.assignment)
            self._blob = (self.epoch, pickling.dumps((self.topology, self.conf, assignment, run)))
        return self._blob[1]

    def note_hosts(self) -> None:
        """Remember where each worker runs: its logs stay there after it moved or ended."""
        for index, (sid, _port) in self.slots.items():
            hosts = self.log_hosts.setdefault(index, [])
            if sid not in hosts:
                hosts.append(sid)

    def restart(self, index: int) -> None:
        raise WorkerError(
            f"topology {self.name!r}: worker {index} runs under a supervisor, which restarts "
            "it when it dies; nimbus does not"
        )

    def close(self) -> None:
        """RunningTopology calls this when it finishes: the slots are free again."""
        self.slots = {}

    def state(self) -> dict[str, Any]:
        # a kill or a rebalance under way is kept as a wall-clock time: a nimbus that
        # restarts (or takes over) finishes it (a forgotten kill ran on, active again,
        # for good; a forgotten rebalance left the spouts deactivated for good)
        return {
            "kill_at": _wall(self.kill_at),
            "rebalance_at": _wall(self.rebalance_at),
            "rebalance_to": self.rebalance_to,
            "resume_active": self.resume_active,
            "status": self.status,
            "workers": self.plan.workers,
            "slots": {str(i): list(s) for i, s in self.slots.items()},
            "error": self.error,
            "submitted": self.submitted,
            "epoch": self.epoch,
            "active": self.active,
        }

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "workers": self.plan.workers,
            "tasks": len(self.plan.task_component),  # the ackers' too, as Storm counts
            # a kill's and a rebalance's default wait (the REST API's msgTimeout)
            "message_timeout": self.plan.conf["topology.message.timeout.secs"],
            "slots": {i: f"{sid}:{port}" for i, (sid, port) in sorted(self.slots.items())},
            "active": self.active,
            "uptime_seconds": round(time.time() - self.submitted, 1),
            "error": self.error,
            "waiting": self.waiting,
            "killing": self.kill_at is not None,
            "rebalancing": self.rebalance_at is not None,
        }


def _wall(at: float | None) -> float | None:
    """A monotonic deadline as a wall-clock time, for the saved state: a nimbus that
    restarts (or takes over) meets the deadline where it was."""
    return None if at is None else time.time() + at - time.monotonic()
