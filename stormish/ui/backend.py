"""Where the UI's data comes from: a topology running here, or a nimbus.

The REST layer asks a `Backend` and never knows which: the local cluster's running
topology, or a nimbus reached through its API socket with the cluster's keys (so the
UI is behind the keys even when it runs on an operator's laptop). One lock per backend:
the HTTP server is threaded, a ZeroMQ socket is not.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..cluster.api import Kill, Rebalance
from ..cluster.decide import wait_seconds
from ..errors import StormishError
from ..runtime.status import TopologyStatus

if TYPE_CHECKING:
    from ..cluster.client import NimbusClient
    from ..local.running import RunningTopology
    from ..runtime.stats import TopologyStatistics
    from ..topology import Topology


class NotFound(LookupError):
    """No such topology (or component, or path): the REST API's 404. A `KeyError` from a
    view is a bug, a 500 with its traceback, never taken for a missing topology."""


class Backend(Protocol):
    """A backend raises `NotFound` for a topology it does not know.

    `topologies()` gives nimbus's list rows (`status`, `active`, `killing`,
    `rebalancing`, ...: what `runtime.status.shown_status` reads); a row may carry
    `message_timeout` (seconds), the default wait of a kill or a rebalance.
    `act(name, verb, wait, workers)`: `wait` in seconds for a kill or a rebalance (None:
    the topology's message timeout, as `storm kill` waits), `workers` for a rebalance
    (None: the number it has, spread again, as Storm's rebalance without -n)."""

    def topologies(self) -> list[dict[str, Any]]: ...
    def supervisors(self) -> list[dict[str, Any]]: ...
    def nimbuses(self) -> list[dict[str, Any]]: ...
    def stats(self, name: str) -> TopologyStatistics: ...
    def graph(self, name: str) -> dict[str, Any]: ...
    def act(
        self, name: str, verb: str, wait: float | None = None, workers: int | None = None
    ) -> None: ...


def _timer(seconds: float, fn: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(seconds, fn)
    timer.daemon = True
    timer.start()
    return timer


class LocalBackend:
    """One topology on the embedded local cluster (`stormish run --ui`).

    A kill with a wait does what a nimbus does: the spouts deactivated at once, the
    topology "killing" for `wait` seconds (trees in flight complete), then stopped; a
    second kill may shorten the wait, never lengthen it. `later(seconds, fn)` runs `fn`
    after `seconds` and returns what `cancel()`s it (a daemon `threading.Timer`), on
    `clock`'s time; a test passes its own."""

    def __init__(
        self,
        running: RunningTopology,
        topology: Topology,
        conf: dict[str, Any],
        on_kill: Callable[[], None],
        later: Callable[[float, Callable[[], None]], Any] = _timer,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.running = running
        self.topology = topology
        self.conf = conf  # the run's overrides (the plan's conf holds daemons' keys too)
        self.started = time.time()
        self.lock = threading.Lock()
        self._graph: dict[str, Any] | None = None
        self.on_kill = on_kill  # a kill from the page: the run command stops, as on Ctrl-C
        self.killed = False
        self.later, self.clock = later, clock
        self.pending_kill: Any = None  # a kill's wait under way: what cancels it
        self.kill_at = 0.0  # ... and when it ends (clock's time)
        # whether the spouts run: a local run starts active (`run` has no --inactive) and
        # only this page changes it; a kill deactivates them first
        self.active = True

    def topologies(self) -> list[dict[str, Any]]:
        r = self.running
        status = TopologyStatus.KILLED if self.killed else r.status
        return [
            {"name": r.name, "status": status, "workers": r.plan.workers,
             "tasks": len(r.plan.task_component),
             "uptime_seconds": round(time.time() - self.started, 1), "error": r.error,
             "active": self.active and not self.killed,
             "killing": self.pending_kill is not None and not self.killed,
             "message_timeout": self.message_timeout()}
        ]  # fmt: skip

    def message_timeout(self) -> float:
        return float(self.running.plan.conf["topology.message.timeout.secs"])

    def supervisors(self) -> list[dict[str, Any]]:
        return []

    def nimbuses(self) -> list[dict[str, Any]]:
        """The embedded local cluster is its own nimbus, and leads."""
        up = round(time.time() - self.started, 1)
        return [{"address": None, "leader": True, "uptime_seconds": up}]

    def stats(self, name: str) -> TopologyStatistics:
        self._check(name)
        with self.lock:
            return self.running.statistics()

    def graph(self, name: str) -> dict[str, Any]:
        self._check(name)
        if self._graph is None:
            from ..lint import analyse

            self._graph = analyse(self.topology, self.conf).as_dict()
        return self._graph

    def act(
        self, name: str, verb: str, wait: float | None = None, workers: int | None = None
    ) -> None:
        self._check(name)
        if wait is not None:  # as nimbus checks it (the REST layer did, for its paths)
            wait = wait_seconds(verb, name, wait)
        if verb == "kill":
            self._kill(self.message_timeout() if wait is None else wait)
        elif verb in ("activate", "deactivate"):
            if self.pending_kill is not None:
                raise StormishError(f"topology {name!r} is being killed")
            with self.lock:
                self.running.set_active(verb == "activate")
                self.active = verb == "activate"
        else:
            raise StormishError(f"{verb} needs a cluster: the local run has one fixed plan")

    def _kill(self, wait: float) -> None:
        if self.killed:
            return
        at = self.clock() + wait
        if self.pending_kill is not None:
            if at >= self.kill_at:
                return  # the wait under way ends first: it holds
            self.pending_kill.cancel()
        if wait <= 0:
            self._killed()
            return
        with self.lock:
            self.running.set_active(False)  # as nimbus: the spouts stop first
            self.active = False
        self.kill_at = at
        self.pending_kill = self.later(wait, self._killed)

    def _killed(self) -> None:
        self.killed = True
        self.on_kill()  # the run command's loop stops and prints its summary

    def close(self) -> None:
        """The server closes: a kill's wait under way is dropped (the run stops anyway)."""
        if self.pending_kill is not None:
            self.pending_kill.cancel()

    def _check(self, name: str) -> None:
        if name != self.running.name:
            raise NotFound(name)


class ClusterBackend:
    """A nimbus, through its API (the keys' CURVE when the cluster has them)."""

    def __init__(self, client: NimbusClient):
        self.client = client
        self.lock = threading.Lock()
        self._graphs: dict[tuple[str, float], dict[str, Any]] = {}

    def _call(self, verb: str, payload: Any = None) -> Any:
        with self.lock:
            return self.client.call(verb, payload)

    def topologies(self) -> list[dict[str, Any]]:
        return list(self._call("list"))

    def supervisors(self) -> list[dict[str, Any]]:
        return list(self._call("supervisors"))

    def nimbuses(self) -> list[dict[str, Any]]:
        """The nimbus this UI asks (whether it leads, its uptime) and, with HA, the
        leader it names when that is another: Storm's leader check."""
        got = self._call("leader")
        me = {
            "address": got.get("api") or self.client.address,
            "leader": bool(got.get("leading")),
            "uptime_seconds": got.get("uptime_seconds"),
        }
        out = [me]
        leader = got.get("leader") or {}
        if not me["leader"] and leader.get("api") and leader.get("api") != me["address"]:
            out.append({"address": leader["api"], "leader": True, "uptime_seconds": None})
        return out

    def stats(self, name: str) -> TopologyStatistics:
        self._known(name)
        return self._call("stats", name)

    def graph(self, name: str) -> dict[str, Any]:
        self._known(name)
        return self._call("graph", name)

    def act(
        self, name: str, verb: str, wait: float | None = None, workers: int | None = None
    ) -> None:
        rows = self._known(name)
        if verb == "kill":
            self._call("kill", Kill(name, wait))
        elif verb == "rebalance":
            if workers is None:  # Storm's: the number it has, spread again
                workers = int(next(r for r in rows if r["name"] == name)["workers"])
            self._call("rebalance", Rebalance(name, workers, wait))
        else:
            self._call(verb, name)

    def _known(self, name: str) -> list[dict[str, Any]]:
        """Nimbus's list rows; NotFound when `name` is not among them."""
        rows = self.topologies()
        if not any(r["name"] == name for r in rows):
            raise NotFound(name)
        return rows
