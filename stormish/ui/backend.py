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
    """A backend raises `NotFound` for a topology it does not know."""

    def topologies(self) -> list[dict[str, Any]]: ...
    def supervisors(self) -> list[dict[str, Any]]: ...
    def stats(self, name: str) -> TopologyStatistics: ...
    def graph(self, name: str) -> dict[str, Any]: ...
    def act(self, name: str, verb: str, arg: float | None) -> None: ...


class LocalBackend:
    """One topology on the embedded local cluster (`stormish run --ui`)."""

    def __init__(
        self,
        running: RunningTopology,
        topology: Topology,
        conf: dict[str, Any],
        on_kill: Callable[[], None],
    ):
        self.running = running
        self.topology = topology
        self.conf = conf  # the run's overrides (the plan's conf holds daemons' keys too)
        self.started = time.time()
        self.lock = threading.Lock()
        self._graph: dict[str, Any] | None = None
        self.on_kill = on_kill  # a kill from the page: the run command stops, as on Ctrl-C
        self.killed = False
        # whether the spouts run: a local run starts active (`run` has no --inactive) and
        # only this page changes it; a kill deactivates them first
        self.active = True

    def topologies(self) -> list[dict[str, Any]]:
        r = self.running
        status = TopologyStatus.KILLED if self.killed else r.status
        return [
            {"name": r.name, "status": status, "workers": r.plan.workers,
             "uptime_seconds": round(time.time() - self.started, 1), "error": r.error,
             "active": self.active and not self.killed}
        ]  # fmt: skip

    def supervisors(self) -> list[dict[str, Any]]:
        return []

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

    def act(self, name: str, verb: str, arg: float | None) -> None:
        self._check(name)
        if verb == "kill":
            self.killed = True
            self.on_kill()  # the run command's loop stops and prints its summary
        elif verb in ("activate", "deactivate"):
            with self.lock:
                self.running.set_active(verb == "activate")
                self.active = verb == "activate"
        else:
            raise StormishError(f"{verb} needs a cluster: the local run has one fixed plan")

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

    def stats(self, name: str) -> TopologyStatistics:
        self._known(name)
        return self._call("stats", name)

    def graph(self, name: str) -> dict[str, Any]:
        self._known(name)
        return self._call("graph", name)

    def act(self, name: str, verb: str, arg: float | None) -> None:
        self._known(name)
        if verb == "kill":
            self._call("kill", Kill(name, float(arg or 0)))
        elif verb == "rebalance":
            if arg is None:
                raise StormishError("rebalance needs a number of workers: .../rebalance/N")
            self._call("rebalance", Rebalance(name, int(arg)))
        else:
            self._call(verb, name)

    def _known(self, name: str) -> None:
        if not any(r["name"] == name for r in self.topologies()):
            raise NotFound(name)
