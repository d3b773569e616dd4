"""`stormish nimbus`: accepts topologies, assigns their workers to supervisor slots,
controls the workers, watches heartbeats, reassigns, kills, rebalances, and serves
status and statistics.

Two sockets: the API (clients and supervisors, `cluster/api.py`) and the worker control
channel (`transport/control.py`, the same one the local cluster uses), both secured by the
process's `Security`. One thread runs everything: a loop that answers API requests,
reads worker hellos, and steps each topology:

- place: workers without a slot get one from the live supervisors (`placement.py`);
- start: once every worker said hello, assign each its topology, tell all where the
  others listen, start them;
- run: a worker incarnation not seen before (a supervisor restarted it, or it moved
  to another supervisor) is assigned and started again and every worker learns the new
  address; after a nimbus restart, workers that say they are running are adopted as
  they are;
- end: a finite topology completes as on the local cluster (`RunningTopology`); a
  kill stops it after its wait; the workers are stopped, their slots freed.

A supervisor not heard from for `--task-timeout` seconds (`nimbus.task.timeout.secs`)
is taken as gone: its workers are placed elsewhere. A worker not heard from for
`--worker-timeout` seconds (it says hello every second) is not waited for: its
supervisor restarts it. Workers keep running while nimbus is down, and their hellos let
a restarted nimbus find them.

With `ha` (`--zookeeper`), several nimbus run: the one elected (`leader.py`) does all of
the above with its state in ZooKeeper (`zkstate.py`); the others answer supervisors with
where the leader is and forward clients' requests to it (`ha.Forwarder`). A nimbus that
becomes leader restores everything from ZooKeeper and adopts the running workers; one
that stops leading forgets it all and acts no more (the workers run on).
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import zmq

from ..errors import ConfigError, StormishError, WorkerError
from ..runtime.stats import TopologyStatistics
from ..runtime.status import ENDED, TopologyStatus
from ..topology import Topology
from ..transport import control as ct
from ..transport.control_server import FENCED_STOP, ControlServer
from ..transport.security import Security
from . import api
from . import decide as dc
from .api import API_VERBS
from .deployment import ClusterWorker, Deployment
from .ha import Forwarder, HaConfig, zk_client
from .leader import Leadership
from .placement import free_slots, schedule, shared_ports
from .store import Store
from .zkstate import LostLeadership, ZkStore

log = logging.getLogger("stormish.nimbus")

LOG_WAIT = 10.0  # seconds `stormish logs` waits for the supervisors' pieces
COMPLETION_EVERY = 0.1
ASSIGN_TIMEOUT = 60.0  # unpickling a topology and building its executors
METRICS_ASK = 5.0  # a follower's scrape waits this long for each answer of the leader
# a worker that did not answer a change of its spouts' state is told again this often
UNTOLD_EVERY = 2.0


UI_URL_FILE = "ui-url"  # in the data directory: the web UI's URL with its token

# a supervisor not heard for this long (several 1 s heartbeats) is replaced at once by
# one that joins offering its host and ports (a restart without --id)
REPLACED_SILENCE = 3.0
REPLACED_BEATS = 3  # ... and that one beat this many times since without it

# a turn of the loop longer than this (nimbus stopped, swapped out, blocked on a worker):
# the time nimbus did not look is not counted as its supervisors' silence
PAUSED = 1.0
# a fenced worker that does not answer its stop (partitioned, or still stalled) is given
# FENCED_STOP and this much more before its replacement starts anyway
FENCE_GRACE = 1.0
SAVE_RETRY = 1.0  # a state that could not be saved (a full disk) is tried again this often
SAVE_REMIND = 60.0  # ... and the error logged again this often while it fails


@dataclass
class SupervisorInfo:
    id: str
    host: str
    ports: list[int]
    heard: float
    running: dict[str, int] = field(default_factory=dict)
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)  # "topology/index" -> report
    failed: dict[int, str] = field(default_factory=dict)  # port -> why (another program has it)
    nonce: str | None = None  # its process's (a restart has another): two with one id differ


class Nimbus:
    def __init__(
        self,
        api_bind: str,
        control_bind: str,
        data_dir: str,
        security: Security,
        advertise_host: str | None = None,
        supervisor_timeout: float = 30.0,
        worker_timeout: float = 3.0,
        metrics_port: int | None = None,
        ui_port: int | None = None,
        ha: HaConfig | None = None,
    ):
        security.check_bind(api_bind)
        if advertise_host is None and _host(control_bind) in ("0.0.0.0", "::", "*"):
            raise ConfigError(
                f"nimbus listens on {_host(control_bind)!r}, which workers on other hosts "
                "cannot connect to: give the host name they reach it by (--advertise)"
            )
        self.security = security
        self.supervisor_timeout = supervisor_timeout
        self.worker_timeout = worker_timeout
        self.ctx = zmq.Context()
        self.api = self.ctx.socket(zmq.ROUTER)
        self.api.setsockopt(zmq.LINGER, 0)
        # a frame is read whole before the handshake judges its sender: none past a
        # piece (control.py), or a stranger makes nimbus hold whatever it announces
        self.api.setsockopt(zmq.MAXMSGSIZE, ct.MAX_FRAME)
        security.check_bind(api_bind)
        security.server(self.api)
        self.api.bind(api_bind)
        self.control = ControlServer(control_bind, security)
        self.control.admit = self._admit_hello  # a stale incarnation is told to stop
        host = advertise_host or _host(self.control.address)
        self.control_address = f"tcp://{host}:{self.control.address.rsplit(':', 1)[1]}"
        self.supervisors: dict[str, SupervisorInfo] = {}
        self.deployments: dict[str, Deployment] = {}
        # the epoch a removed topology had reached: a topology submitted again under its
        # name starts past it, or a supervisor still holding the old one's finished
        # workers (same name, index, port) takes them for the new ones and starts nothing
        self.removed_epochs: dict[str, int] = {}
        self._stop = False
        self.log_asks: dict[str, list[api.LogAsk]] = {}  # supervisor -> asks for its next beat
        self.log_requests: dict[int, dict[str, Any]] = {}
        self._log_ids = itertools.count(1)
        self._shared: set[tuple[str, int]] = set()  # (host, port) offered twice: warned
        self._retired: dict[str, set[str]] = {}  # id -> nonces of processes restarted since
        self._refused: set[tuple[str, str]] = set()  # (id, nonce) refused: said once
        # a supervisor -> beats since its last of one offering its host and ports
        self._outbeaten: dict[str, int] = {}
        self.store: Store | ZkStore
        self.leadership: Leadership | None = None
        self._leader_seen: tuple[Any, Any] | None = None  # who led at the last turn
        self._submitting: dict[str, _PendingSubmit] = {}  # HA: submits awaiting replication
        self._replicated: queue.Queue[tuple[str, _PendingSubmit, str | None]] = queue.Queue()
        self.leading = ha is None  # a single nimbus always leads
        # stored topologies that run no more (ended before a restart, or whose code no
        # longer loads: failed), listed from their saved state until killed
        self.stored_only: dict[str, dict[str, Any]] = {}
        self._ended_stats: dict[str, TopologyStatistics] = {}  # theirs, when saved
        # topologies whose state (and final statistics) could not be saved: retried
        self._unsaved: dict[str, float] = {}  # name -> when the error is logged again
        self._finals: dict[str, dict[str, Any]] = {}  # name -> final statistics to save
        # workers told to stop as their supervisor was lost (it may only be stalled, its
        # workers running): (topology, index) -> (pid, until when its replacement waits
        # for the stop's answer), so the two do not run side by side
        self._fencing: dict[tuple[str, int], tuple[int | None, float]] = {}
        self._save_at = 0.0
        self._looked = time.monotonic()  # the last turn of the loop
        self.started = time.time()  # its uptime (the UI's nimbus summary)
        # topologies restored from the store, until a supervisor was heard on each worker
        self._restored: set[str] = set()
        if ha is None:
            self.store = Store(data_dir)
            self._restore()
        else:
            self._start_ha(ha, api_bind, advertise_host, data_dir)
        self.metrics = None
        if metrics_port is not None:
            from ..httpd import metrics_server
            from ..metrics import FamiliesCollector, registry

            reg = registry(self._metric_samples, FamiliesCollector(self._cluster_metrics))
            self.metrics = metrics_server(_host(api_bind), metrics_port, reg)
            log.info(f"nimbus: metrics at {self.metrics.url}/metrics")
        self.ui = None
        if ui_port is not None:
            from ..cluster.client import NimbusClient
            from ..ui.serve import entry_url, ui_server

            port = str(self.api.getsockopt_string(zmq.LAST_ENDPOINT)).rsplit(":", 1)[1]
            client = NimbusClient(f"127.0.0.1:{port}", security, timeout=20)
            self.ui = ui_server(client, ui_port)
            # its URL with the token in a 0600 file of the (private) data directory, not
            # in the log: the token keeps other local users out of the UI (ui/rest.py)
            where = os.path.join(data_dir, UI_URL_FILE)
            fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            os.fchmod(fd, 0o600)  # a file left by an older start keeps no wider mode
            with os.fdopen(fd, "w") as fh:
                fh.write(entry_url(self.ui) + "\n")
            log.info(
                f"nimbus: web UI and REST API at {self.ui.url}/ (loopback; open the URL in {where})"
            )

    # -- HA: several nimbus on ZooKeeper (cluster/leader.py, zkstate.py, ha.py) ------------
    def _start_ha(self, ha: HaConfig, api_bind: str, advertise: str | None, data: str) -> None:
        port = str(self.api.getsockopt_string(zmq.LAST_ENDPOINT)).rsplit(":", 1)[1]
        self.me = {"id": ha.nimbus_id, "api": f"tcp://{advertise or _host(api_bind)}:{port}",
                   "control": self.control_address}  # fmt: skip
        self.zk = zk_client(ha)
        self.leadership = Leadership(self.zk, ha.root, self.me, ha.failover)
        self.store = ZkStore(self.zk, ha.root, ha.nimbus_id, data, self._fence,
                             ha.min_replicas, ha.replication_wait,
                             op_timeout=max(0.5, ha.failover / 4))  # fmt: skip
        self.forwarder = Forwarder(self.security, self._leader_info, ha.nimbus_id, ha.failover,
                                   self._read_zookeeper)  # fmt: skip
        log.info(f"nimbus {ha.nimbus_id}: on ZooKeeper {ha.hosts}{ha.root}, API {self.me['api']}")

    def _fence(self) -> tuple[str | None, int | None]:
        """The election znode and term a write is fenced by (None: not acting)."""
        ld = self.leadership
        if ld is None or not ld.acting():
            return None, None
        return ld.node, ld.term

    def _follow_election(self) -> None:
        assert self.leadership is not None
        acting = self.leadership.acting()
        leader = self._leader_info()
        seen = None if leader is None else (leader.get("id"), leader.get("api"))
        if seen != self._leader_seen:  # what waits to be forwarded is not sent (ask again)
            self._leader_seen = seen
            self.forwarder.new_term()
        if acting and not self.leading:
            self.forwarder.new_term()  # a forward still queued must not leave this nimbus
            self._take_over()
        elif not acting and self.leading:
            self._drop_leadership()

    def _take_over(self) -> None:
        """Elected: what the last leader left in ZooKeeper is the truth. Its topologies
        are restored and their running workers adopted as they say hello here (their
        supervisors point them at this nimbus); nothing running is stopped."""
        assert isinstance(self.store, ZkStore)
        self.deployments.clear()
        self.supervisors.clear()
        now = time.monotonic()
        for sid, info in self.store.supervisors().items():
            self.supervisors[sid] = SupervisorInfo(
                sid, str(info["host"]), [int(p) for p in info["ports"]], now, {},
                dict(info.get("workers") or {}),
                {int(p): str(w) for p, w in (info.get("failed") or {}).items()},
            )  # fmt: skip
        self._restore()
        self.leading = True
        log.info(f"nimbus {self.me['id']}: leading: {len(self.deployments)} topologies restored")

    def _drop_leadership(self) -> None:
        """No longer leading: act no more (the workers run on; the next leader adopts
        them). Requests go to the leader from now on."""
        self.leading = False
        self.deployments.clear()
        self.supervisors.clear()
        for name, p in list(self._submitting.items()):
            p.cancel.set()
            self._reply(p.ident, p.req_id, False,
                        f"nimbus {self.me['id']} stopped leading while topology {name!r}'s "
                        "code waited for its replication: not submitted; try again")  # fmt: skip
        self._submitting.clear()
        log.warning(f"nimbus {self.me['id']}: not leading: forwarding requests to the leader")

    def _leader_info(self) -> dict[str, Any] | None:
        if self.leadership is None:
            return None
        return self.leadership.leader()

    def api_leader(self, _payload: None) -> dict[str, Any]:
        """Who leads (`stormish list` shows it; a client needs it not: followers forward)."""
        up = round(time.time() - self.started, 1)
        if self.leadership is None:
            return {"id": None, "leading": True, "leader": None, "ha": False, "uptime_seconds": up}
        return {"id": self.me["id"], "leading": self.leading, "leader": self._leader_info(),
                "ha": True, "term": self.leadership.term if self.leading else None,
                "api": self.me["api"], "uptime_seconds": up}  # fmt: skip

    def _read_zookeeper(self, verb: str) -> Any:
        """`list` or `supervisors` from ZooKeeper (the forwarder's thread: reads only)."""
        assert isinstance(self.store, ZkStore)
        rows, sups = self.store.listing()
        return rows if verb == "list" else sups

    def _follower_answer(self, ident: bytes, req_id: int, verb: str, payload: Any) -> Any:
        """A follower answers a supervisor with where the leader is (None: no word on
        its workers), and forwards the rest (reads and writes) to the leader: the
        answer is sent when it comes (`_send_forwarded`)."""
        leader = self._leader_info()
        if verb == "heartbeat":
            return {"wanted": None, "logs": [], "leader": None if leader is None else leader["api"]}
        self.forwarder.forward((ident, req_id), verb, payload)
        return _FORWARDED

    def _send_forwarded(self) -> None:
        for (ident, req_id), ok, value in self.forwarder.done():
            self._reply(ident, req_id, ok, value)

    def _reply(self, ident: bytes, req_id: int, ok: bool, value: Any) -> None:
        self.api.send_multipart([ident, *ct.reply(req_id, value, ok=ok)])

    # -- HA: a submit waits for its code's replication off the loop -----------------------
    def _begin_submit(self, ident: bytes, req_id: int, req: api.Submit) -> None:
        """The code is put in ZooKeeper and held here now; the wait for other nimbus to
        hold it (topology.min.replication.count) runs on a thread of its own, the loop
        serving meanwhile (worker restarts, kills, list: found frozen 60 s by a fault
        hunt); `_finish_submits` answers once it is over (Storm too waits in its Thrift
        handler's thread, not its timer's)."""
        assert isinstance(self.store, ZkStore)
        topology, extra = req.topology, req.conf
        if not isinstance(topology, Topology):
            raise StormishError(f"submit expects a Topology, got {type(topology).__name__}")
        name = topology.name
        if name in self._submitting:
            raise StormishError(
                f"topology {name!r} is being submitted already (its code waits for its "
                "replication): that submit's answer says how it went"
            )
        old = self.deployments.get(name)
        if old is not None and old.status not in ENDED:
            raise StormishError(f"topology {name!r} is already running on this nimbus")
        conf = topology.validate(extra)
        self.store.forget(name)
        cid = self.store.stage_topology(name, topology, conf)
        p = _PendingSubmit(ident, req_id, topology, conf, bool(req.active), cid)
        self._submitting[name] = p
        threading.Thread(
            target=self._await_replicas, args=(name, p), name=f"nimbus-replication-{name}",
            daemon=True,
        ).start()  # fmt: skip

    def _await_replicas(self, name: str, p: _PendingSubmit) -> None:
        assert isinstance(self.store, ZkStore)
        error = None
        try:
            self.store.await_replicas(name, p.cid, self._answers, p.cancel)
        except StormishError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - told to the client
            error = f"{type(exc).__name__}: {exc}"
        self._replicated.put((name, p, error))

    def _answers(self, contender: dict[str, Any]) -> bool:
        """Whether another nimbus answers (`leader`, from its memory) within a second: one
        that does not is not waited for to hold a submit's code."""
        from .client import NimbusClient

        try:
            client = NimbusClient(str(contender["api"]), self.security, timeout=1.0)
        except StormishError:
            return False
        try:
            client.call("leader", timeout=1.0)
            return True
        except StormishError:
            return False
        finally:
            client.close()

    def _finish_submits(self) -> None:
        while True:
            try:
                name, p, error = self._replicated.get_nowait()
            except queue.Empty:
                return
            if self._submitting.get(name) is not p:
                continue  # answered already (this nimbus stopped leading)
            del self._submitting[name]
            assert isinstance(self.store, ZkStore)
            if error is not None:
                log.warning(f"nimbus: refused the submit of {name!r}: {error}")
                try:
                    self.store.unstage(name, p.cid)
                except StormishError as exc:
                    log.info(f"nimbus: {name}: its code is left for later: {exc}")
                self._reply(p.ident, p.req_id, False, error)
                continue
            try:
                self._deploy(p.topology, p.conf, p.active)
            except LostLeadership as exc:
                self._lost(exc)
                self._reply(p.ident, p.req_id, False,
                            f"{exc}: ask again (another nimbus leads now)")  # fmt: skip
            except StormishError as exc:
                self._reply(p.ident, p.req_id, False, str(exc))
            else:
                self._reply(p.ident, p.req_id, True, name)

    # -- lifecycle ------------------------------------------------------------------------------
    def serve(self) -> None:
        paused = False
        while not self._stop:
            paused = self._credit_pause(time.monotonic()) or paused
            drain = 1_000_000 if paused else 100
            if self.leadership is not None:
                try:
                    self._follow_election()
                except LostLeadership as exc:  # ZooKeeper went away while taking over
                    self._lost(exc)
                self._send_forwarded()
                self._finish_submits()
            if self.api.poll(50):
                for _ in range(drain):  # after a pause: all that queued, before any tick
                    try:
                        frames = self.api.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    self._on_api(frames)
            self.control.pump(0)
            # a stop inside this turn (in the poll above: where nimbus waits most) is
            # credited before anything is judged, and what queued meanwhile read first
            if self._credit_pause(time.monotonic()):
                paused = True
                continue
            paused = False
            if self.leading:
                try:
                    self.tick()
                except LostLeadership as exc:
                    self._lost(exc)

    def _credit_pause(self, now: float) -> bool:
        """Whether nimbus itself did not look for more than PAUSED seconds since the last
        turn (SIGSTOP, swapped out, a long ask): that time is not a supervisor's
        silence, so each is credited with it (`heard` moves on by the gap) and what was
        queued meanwhile is read before anything is judged."""
        gap, self._looked = now - self._looked, now
        if gap <= PAUSED:
            return False
        for info in self.supervisors.values():
            info.heard = min(now, info.heard + gap)
        if gap > 5 * PAUSED:
            log.info(f"nimbus: did not look for {gap:.1f}s: supervisors' silence counts from now")
        return True

    def _list_stored(self, name: str, state: dict[str, Any], status: str, error: Any) -> None:
        """A stored topology that runs no more (it ended, or its code no longer loads)
        listed from its saved state; a topology submitted again under its name starts
        past its workers' epoch (a supervisor may still report them)."""
        self.stored_only[name] = {
            "name": name, "status": status, "workers": int(state.get("workers") or 0),
            "slots": {}, "active": False, "error": error, "waiting": None,
            "killing": False, "rebalancing": False, "worker_status": [], "restarts": 0,
            "uptime_seconds": round(time.time() - float(state.get("submitted") or 0), 1),
        }  # fmt: skip
        self.removed_epochs[name] = int(state.get("epoch") or 0)

    def _restore_final(self, name: str) -> None:
        """An ended topology's saved final statistics, for `stats` after a restart (one
        that no longer reads is said, and its listing stays)."""
        try:
            final = self.store.load_final(name)
            if final is not None:
                self._ended_stats[name] = TopologyStatistics.from_dict(final)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning(f"nimbus: {name}: its final statistics do not read: {exc}")

    def _lost(self, exc: LostLeadership) -> None:
        assert self.leadership is not None
        self.leadership.step_down(str(exc))
        self._drop_leadership()

    def stop(self, signum: int | None = None, frame: FrameType | None = None) -> None:
        self._stop = True

    def close(self) -> None:
        """Leave the workers running (they outlive nimbus); close the sockets."""
        if self.metrics is not None:
            self.metrics.close()
        if self.ui is not None:
            self.ui.close()
        if self.leadership is not None:
            for p in self._submitting.values():  # their threads give up
                p.cancel.set()
            self.forwarder.close()
            if isinstance(self.store, ZkStore):
                self.store.close()
            self.leadership.close()  # a clean stop frees the election at once
            self.zk.stop()
            self.zk.close()
        self.api.close(0)
        self.security.release(self.ctx)
        self.ctx.term()
        self.control.close()

    def _restore(self) -> None:
        self.stored_only.clear()
        self._ended_stats.clear()
        self._restored.clear()
        for name, topology, conf, state in self.store.load_all():
            if state.get("status") in ENDED:  # listed as it ended (its error too), and
                self._list_stored(name, state, str(state["status"]), state.get("error"))
                self._restore_final(name)  # its final statistics, until a kill removes it
                continue
            if topology is None:  # its code no longer loads: failed, its workers unwanted
                why = str(state.get("unloadable"))
                self._list_stored(name, state, TopologyStatus.FAILED, why)
                log.error(f"nimbus: stored topology {name!r} failed: {why} (kill removes it)")
                continue
            workers = int(state.get("workers") or conf.get("topology.workers") or 1)
            if workers != int(conf.get("topology.workers") or 1):  # rebalanced
                conf = dict(conf, **{"topology.workers": workers})
            d = Deployment(self, topology, conf)
            d.status = TopologyStatus(state.get("status", TopologyStatus.STARTING))
            d.submitted = state.get("submitted", time.time())
            d.epoch = int(state.get("epoch", d.epoch))
            d.active = bool(state.get("active", True))
            if state.get("kill_at") is not None:  # a kill under way: it goes on here
                d.kill_at = _monotonic(state["kill_at"])
            if state.get("rebalance_at") is not None:  # so does a rebalance's wait
                d.rebalance_at = _monotonic(state["rebalance_at"])
                d.rebalance_to = int(state.get("rebalance_to") or d.plan.workers)
                d.resume_active = bool(state.get("resume_active", True))
            d.slots = {int(i): (s[0], int(s[1])) for i, s in state.get("slots", {}).items()}
            d.note_hosts()
            self.deployments[name] = d
            self._restored.add(name)
            log.info(f"nimbus: restored topology {name!r} ({d.status})")

    # -- metrics (on the HTTP server's thread: reads only) -----------------------------------
    def _metric_samples(self) -> list[Any]:
        """The running topologies' statistics, gathered from their workers (as `stats`)."""
        from ..metrics import TopologySample

        if not self.leading:
            return self._leader_samples()
        out = []
        for d in list(self.deployments.values()):
            if d.status != TopologyStatus.RUNNING:
                continue
            try:
                stats = d.running.statistics()
            except StormishError:  # a worker went away meanwhile: the next scrape
                continue
            restarts = {w["index"]: int(w.get("restarts") or 0) for w in self.worker_status(d)}
            out.append(TopologySample(stats, restarts))
        return out

    def _leader_samples(self) -> list[Any]:
        """A follower's scrape: the leader's figures (it runs the topologies; a follower
        holds none), asked through the forwarder; what was gathered when the leader stops
        answering (none while none leads). Prometheus may scrape either nimbus."""
        from ..metrics import TopologySample

        out: list[Any] = []
        try:
            for row in self._ask_leader("list"):
                if row.get("status") != TopologyStatus.RUNNING:
                    continue
                stats = self._ask_leader("stats", row["name"])
                restarts = {int(w["index"]): int(w.get("restarts") or 0)
                            for w in row.get("worker_status") or []}  # fmt: skip
                out.append(TopologySample(stats, restarts))
        except StormishError:
            pass
        return out

    def _ask_leader(self, verb: str, payload: Any = None) -> Any:
        assert self.forwarder is not None  # a follower is one of several (HA)
        return self.forwarder.ask(verb, payload, METRICS_ASK)

    def _cluster_metrics(self) -> list[Any]:
        from prometheus_client.core import GaugeMetricFamily

        if self.leading:
            ports = [len(i.ports) for i in list(self.supervisors.values())]
            used = sum(len(d.slots) for d in list(self.deployments.values()))
            states = [(d.name, str(d.status)) for d in list(self.deployments.values())]
        else:  # the leader's (or, when it does not answer, what it wrote to ZooKeeper)
            try:
                ports = [len(s.get("ports") or ()) for s in self._ask_leader("supervisors")]
                rows = self._ask_leader("list")
            except StormishError:
                ports, rows = [], []
            used = sum(len(r.get("slots") or ()) for r in rows)
            states = [(str(r["name"]), str(r.get("status"))) for r in rows]
        leader = GaugeMetricFamily("stormish_nimbus_leader", "1 on the nimbus that leads")
        leader.add_metric([], 1 if self.leading else 0)
        sups = GaugeMetricFamily("stormish_supervisors", "supervisors nimbus hears from")
        sups.add_metric([], len(ports))
        slots = GaugeMetricFamily(
            "stormish_worker_slots", "worker slots offered, by use", labels=["state"]
        )
        slots.add_metric(["used"], used)
        slots.add_metric(["free"], max(0, sum(ports) - used))
        status = GaugeMetricFamily(
            "stormish_topology_status", "1 for the topology's status", labels=["topology", "status"]
        )
        for name, st in states:
            status.add_metric([name, st], 1)
        return [leader, sups, slots, status]

    # -- API -----------------------------------------------------------------------------------
    def _on_api(self, frames: list[bytes]) -> None:
        """Requests are read in the safe format; only `submit` carries code, unpickled
        once its verb is known. A keyed nimbus's ZAP handler let in only holders of the
        cluster's keys before any frame reached here; an --insecure one accepts code
        from any local process, which its start-up warning says."""
        ident, rest = frames[0], frames[1:]
        try:
            verb, req_id, payload = ct.decode_request(rest, API_VERBS, code_ok=True)
        except ct.PayloadError as exc:  # a known verb: its sender is told why
            log.info(f"nimbus: refused {exc.verb}: {exc}")
            self.api.send_multipart([ident, *ct.reply(exc.req_id, str(exc), ok=False)])
            return
        except ct.ControlError as exc:
            log.info(f"nimbus: dropped an API message: {exc}")
            return
        try:
            msg = api.message(verb, payload)
            if not self.leading and verb != "leader":
                answer = self._follower_answer(ident, req_id, verb, msg)
                if answer is _FORWARDED:
                    return
                out = ct.reply(req_id, answer)
            elif verb == "submit" and isinstance(self.store, ZkStore):
                self._begin_submit(ident, req_id, msg)  # answered once replicated
                return
            else:
                out = ct.reply(req_id, getattr(self, f"api_{verb}")(msg))
        except LostLeadership as exc:
            self._lost(exc)
            out = ct.reply(req_id, f"{exc}: ask again (another nimbus leads now)", ok=False)
        except StormishError as exc:
            out = ct.reply(req_id, str(exc), ok=False)
        except Exception as exc:  # noqa: BLE001 - a bad request must not end nimbus
            out = ct.reply(req_id, f"{type(exc).__name__}: {exc}", ok=False)
        self.api.send_multipart([ident, *out])

    def api_heartbeat(self, report: dict[str, Any]) -> dict[str, Any]:
        """A supervisor's report; the answer: the workers wanted there, and the pieces
        of worker logs `stormish logs` waits for (it sends them at once)."""
        sid = str(report["id"])
        info = self.supervisors.get(sid)
        refused = self._duplicate(sid, info, str(report["host"]), report.get("nonce"))
        if refused is not None:  # no word on workers: it is to exit, saying why
            return {"wanted": None, "refused": refused}
        self._outbeaten.pop(sid, None)  # it beats: not replaced (_replaced_by)
        if info is None:
            log.info(f"nimbus: supervisor {sid} joined ({report['host']}, ports {report['ports']})")
        # at each beat, not only at the join: a restart faster than REPLACED_SILENCE
        # found the old one not silent yet
        self._replaced_by(sid, str(report["host"]), [int(p) for p in report["ports"]])
        failed = {int(p): str(why) for p, why in (report.get("failed_ports") or {}).items()}
        for port, why in failed.items():
            if info is None or port not in info.failed:
                log.warning(
                    f"nimbus: supervisor {sid}: slot port {port} failed ({why}): not used "
                    "until it is free again; its workers are placed on other slots"
                )
        self.supervisors[sid] = SupervisorInfo(
            sid, str(report["host"]), [int(p) for p in report["ports"]], time.monotonic(),
            dict(report.get("running", {})), _worker_reports(report.get("workers")), failed,
            None if report.get("nonce") is None else str(report["nonce"]),
        )  # fmt: skip
        if info is None or info.ports != self.supervisors[sid].ports:
            self._warn_shared_ports()
            self._unoffered(sid)
        new = self.supervisors[sid]
        self.store.save_supervisor(sid, {"host": new.host, "ports": new.ports,
                                         "failed": {str(p): w for p, w in new.failed.items()},
                                         "workers": _compact(new.workers)})  # fmt: skip
        for piece in report.get("logs") or ():
            req = self.log_requests.get(piece.get("rid"))
            if req is not None:
                req["pieces"][f"{piece['index']}@{sid}"] = dict(piece, supervisor=sid)
        return {"wanted": self.wanted(sid), "logs": self.log_asks.pop(sid, [])}

    def _duplicate(
        self, sid: str, info: SupervisorInfo | None, host: str, nonce: Any
    ) -> str | None:
        """Why a beat is refused (None: it is not): a supervisor process claiming the id
        of a live one on another host (two cloned hosts ran every worker twice, each
        adopted in turn: found by a bug hunt), or one whose id another process on its
        host took over since (a restart there: the later process is the supervisor).
        Storm refuses a duplicate supervisor id too. Said once per process, here and by
        the refused supervisor, which exits."""
        if nonce is None or info is None or info.nonce is None or info.nonce == str(nonce):
            return None
        nonce = str(nonce)
        if nonce in self._retired.get(sid, ()):
            why = (
                f"supervisor id {sid!r}: another supervisor process on {info.host} took "
                "this id over since (a restart, or a second one started with it): this one "
                "is refused; give each supervisor its own --id"
            )
        elif info.host == host:  # restarted on its host: the old process, if it lives,
            self._retired.setdefault(sid, set()).add(info.nonce)  # is refused next beat
            return None
        elif time.monotonic() - info.heard > self.supervisor_timeout:
            return None  # the old one is gone (a host replaced under its id)
        else:
            why = (
                f"supervisor id {sid!r} is taken by a live supervisor on {info.host}; "
                f"this one on {host} is refused: give each supervisor its own --id"
            )
        if (sid, nonce) not in self._refused:
            self._refused.add((sid, nonce))
            log.error(f"nimbus: {why}")
        return why

    def _unoffered(self, sid: str) -> None:
        """Workers on ports their supervisor offers no longer (restarted with other
        --ports) let go of their slots, to be placed again."""
        ports = set(self.supervisors[sid].ports)
        for d in self.deployments.values():
            gone = sorted(i for i, (s, p) in d.slots.items() if s == sid and p not in ports)
            for i in gone:
                log.warning(
                    f"nimbus: {d.name}: worker {i}: supervisor {sid} offers port "
                    f"{d.slots.pop(i)[1]} no longer: placing it again"
                )
            if gone:
                self._save(d)

    def _admit_hello(self, key: tuple[str | None, int], hello: Any) -> str | None:
        """The fence (None: admitted): a running worker whose address is not its slot's
        (topology, index) -> supervisor host and port is a stale incarnation (its
        supervisor stalled past --task-timeout and the slot moved): it is neither
        adopted nor let stand for the current one, and is told to stop. A slot is one
        port on one host, which one process at a time can listen on, so at most one
        incarnation is admitted. A worker not yet assigned says no address: its
        supervisor started it for the slot nimbus gave it."""
        name, index = key
        address = hello.info.get("address")
        d = self.deployments.get(name) if name is not None else None
        slot = d.slots.get(index) if d is not None and d.status not in ENDED else None
        info = self.supervisors.get(slot[0]) if slot is not None else None
        if not address or slot is None or info is None:
            return None
        mine = f"tcp://{info.host}:{slot[1]}"
        if address == mine:
            return None
        return f"it runs at {address}, its slot is supervisor {slot[0]}'s {mine}"

    def _replaced_by(self, sid: str, host: str, ports: list[int]) -> None:
        """A supervisor that beats offering the very ports of a silent one on its host is
        that one restarted under a new id (started without --id: host-pid): the old one
        is let go now, so its topologies' workers are placed again at once rather than
        after --task-timeout (30 s) with them down (found by a bug hunt). Silent means
        a few heartbeats missed: two live supervisors sharing ports are left alone."""
        now = time.monotonic()
        for old in list(self.supervisors.values()):
            if old.id == sid or old.host != host or sorted(old.ports) != sorted(ports):
                continue
            # beats of the newcomer handled since the old one's last, in a row: after a
            # stall of this loop both supervisors' queued beats come in turn, and time
            # alone took a live one for gone (review)
            beats = self._outbeaten[old.id] = self._outbeaten.get(old.id, 0) + 1
            if beats >= REPLACED_BEATS and now - old.heard > REPLACED_SILENCE:
                self._forget_supervisor(
                    old.id,
                    f"silent {now - old.heard:.1f}s, and {sid} offers its ports on {host}: "
                    "restarted under a new id",
                )

    def _warn_shared_ports(self) -> None:
        """Two supervisors on one host offering one port can run one worker there at a
        time (the scheduler gives it once): said once per (host, port), with the fix."""
        offered = {sid: i.ports for sid, i in self.supervisors.items()}
        hosts = {sid: i.host for sid, i in self.supervisors.items()}
        shared = shared_ports(offered, hosts)
        for (host, port), sids in shared.items():
            if (host, port) not in self._shared:
                log.warning(
                    f"nimbus: supervisors {', '.join(sids)} on host {host} all offer port "
                    f"{port}: only one worker can use it at a time (give each supervisor "
                    "its own --ports)"
                )
        self._shared = set(shared)

    # -- logs (stormish logs): asked of the supervisors at their next heartbeat -------------
    def api_logs(self, req: api.LogsRequest) -> int:
        """A request id for `logs_result`. Every supervisor that ever ran the worker is
        asked (a worker that moved left logs on each)."""
        name, index = req.name, req.index
        offsets, most = _log_request(req)
        d = self._get(name)
        rid = next(self._log_ids)
        want, pieces = [], {}
        for i, sids in sorted(d.log_hosts.items()):
            if index is not None and i != int(index):
                continue
            for sid in sids:
                key = f"{i}@{sid}"
                want.append(key)
                if sid not in self.supervisors:  # nobody to ask: say so at once
                    why = f"supervisor {sid} is gone (the log stays on its host)"
                    pieces[key] = {"index": i, "supervisor": sid, "error": why}
                    continue
                ask = api.LogAsk(rid, name, i, offsets.get(key), most)
                self.log_asks.setdefault(sid, []).append(ask)
        if not want:
            which = f"worker {index}" if index is not None else "any worker"
            raise StormishError(f"topology {name!r}: {which} never had a slot: no logs")
        self.log_requests[rid] = {"want": want, "pieces": pieces, "at": time.monotonic()}
        return rid

    def api_logs_result(self, rid: int) -> dict[str, Any]:
        """What came back for request `rid`: done once every supervisor answered or
        `LOG_WAIT` seconds passed (the missing ones are named)."""
        req = self.log_requests.get(rid)
        if req is None:
            raise StormishError(f"no logs request {rid} (answered already, or too old)")
        late = time.monotonic() - req["at"] > LOG_WAIT
        missing = [k for k in req["want"] if k not in req["pieces"]]
        done = not missing or late
        if done:
            del self.log_requests[rid]
        return {"done": done, "pieces": list(req["pieces"].values()), "missing": missing}

    def worker_status(self, d: Deployment) -> list[dict[str, Any]]:
        """Each worker of `d` as its supervisor last told: state, pid, restarts and how
        it last ended (`last_exit_ago` in seconds, from the supervisor's wall clock)."""
        out = []
        now = time.time()
        for index, (sid, port) in sorted(d.slots.items()):
            info = self.supervisors.get(sid)
            rep = info.workers.get(f"{d.name}/{index}") if info is not None else None
            row: dict[str, Any] = {"index": index, "supervisor": sid, "port": port}
            if rep is None:
                row.update(state="placed", restarts=0)
            else:
                row.update(rep)
                at = rep.get("last_exit_at")
                row["last_exit_ago"] = None if at is None else round(max(0.0, now - at), 1)
            out.append(row)
        return out

    def wanted(self, sid: str) -> list[dict[str, Any]]:
        info = self.supervisors.get(sid)
        offered = set(info.ports) if info is not None else set()
        out = []
        for d in self.deployments.values():
            if d.status in ENDED:
                continue
            for index, (s, port) in d.slots.items():
                if s == sid and port in offered:
                    out.append(
                        {"topology": d.name, "index": index, "port": port,
                         "control": self.control_address, "epoch": d.epoch}
                    )  # fmt: skip
        return out

    def api_submit(self, req: api.Submit) -> str:
        """Inactive (`req.active` False): no spout opens until `activate` (Storm's
        --inactive)."""
        topology, extra, active = req.topology, req.conf, bool(req.active)
        if not isinstance(topology, Topology):
            raise StormishError(f"submit expects a Topology, got {type(topology).__name__}")
        old = self.deployments.get(topology.name)
        if old is not None and old.status not in ENDED:
            raise StormishError(f"topology {topology.name!r} is already running on this nimbus")
        conf = topology.validate(extra)
        self.stored_only.pop(topology.name, None)  # replaced by this one
        self._ended_stats.pop(topology.name, None)
        self.store.forget(topology.name)
        self.store.save_topology(topology.name, topology, conf)
        return self._deploy(topology, conf, bool(active))

    def _deploy(self, topology: Topology, conf: dict[str, Any], active: bool) -> str:
        """A submitted topology (its code saved) placed and its state saved."""
        old = self.deployments.get(topology.name)
        d = Deployment(self, topology, conf)
        d.active = active
        # a new epoch: supervisors may still hold the previous one's finished workers,
        # which must not stand for the new ones (also when `kill` removed it)
        d.epoch += max(old.epoch if old is not None else 0, self.removed_epochs.pop(d.name, 0))
        self.deployments[d.name] = d
        self._restored.discard(d.name)
        self._place(d)
        try:  # a submit that cannot be saved is refused (a full disk), not half-taken
            self.store.save_state(d.name, d.state())
        except OSError as exc:
            del self.deployments[d.name]
            self.removed_epochs[d.name] = d.epoch
            self.store.forget(d.name)
            raise StormishError(f"topology {d.name!r} not submitted: saving it: {exc}") from exc
        return d.name

    def api_supervisors(self, _payload: None) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [
            {"id": i.id, "host": i.host, "ports": i.ports, "running": sorted(i.running),
             "heard_seconds_ago": round(now - i.heard, 2),
             "failed_ports": {str(p): why for p, why in sorted(i.failed.items())}}
            for i in sorted(self.supervisors.values(), key=lambda i: i.id)
        ]  # fmt: skip

    def api_list(self, _payload: None) -> list[dict[str, Any]]:
        out = []
        for d in self.deployments.values():
            row = d.summary()
            row["worker_status"] = self.worker_status(d)
            row["restarts"] = sum(int(w.get("restarts", 0)) for w in row["worker_status"])
            out.append(row)
        out += [dict(row) for name, row in self.stored_only.items() if name not in self.deployments]
        return out

    def api_kill(self, req: api.Kill) -> str | float:
        """Kill a live topology (after `wait` seconds; None: its message timeout, as
        Storm waits, so trees in flight can complete); the answer is the wait. An ended
        one (failed, say) is removed from this nimbus, so that `list` no longer shows
        it: the answer is then the status it had.

        The kill is recorded (and saved) before the workers are told to deactivate
        their spouts, as Storm records the transition in ZooKeeper for its workers to
        pick up: a worker that is alive but does not answer does not keep the kill from
        happening (it is told again later, `_tell_untold`)."""
        name = req.name
        if name in self.stored_only and name not in self.deployments:  # ended, or its code
            row = self.stored_only.pop(name)  # did not load: listed from its saved state
            self._ended_stats.pop(name, None)
            self.store.forget(name)
            log.info(f"nimbus: {name}: removed (it was {row['status']})")
            return str(row["status"])
        d = self._get(name)
        if d.status in ENDED:
            del self.deployments[name]
            self.removed_epochs[name] = d.epoch
            self.store.forget(name)
            log.info(f"nimbus: {name}: removed (it was {d.status})")
            return d.status
        raw = req.wait if req.wait is not None else d.conf["topology.message.timeout.secs"]
        wait = dc.wait_seconds("kill", name, raw)
        at = time.monotonic() + wait
        # killed again during the wait (Storm allows it): the sooner end holds
        d.kill_at = at if d.kill_at is None else min(d.kill_at, at)
        d.rebalance_at = None  # killed during a rebalance's wait: the kill holds
        d.active = False
        self._save(d)  # a nimbus that restarts meanwhile finishes the kill
        self._tell_active(d)
        return wait

    def api_activate(self, name: str) -> str:
        """Running or starting (as in Storm, where activate only sets the topology's
        status): a starting topology's workers start with their spouts as told. The
        answer: its status, for the client to say what happens."""
        d = self._live(name)
        d.active = True  # workers started later follow it
        self._save(d)
        self._tell_active(d)
        return d.status

    def api_deactivate(self, name: str) -> str:
        d = self._live(name)
        d.active = False
        self._save(d)
        self._tell_active(d)
        return d.status

    def api_rebalance(self, req: api.Rebalance) -> float:
        """From running or starting (a topology waiting for slots may be given fewer).
        A running one first waits `wait` seconds (None: its message timeout, as `storm
        rebalance` does) with its spouts deactivated, so that the trees in flight
        complete before its workers stop; then its spouts are as they were before. The
        answer: the wait. No number of workers (None, as Storm's RebalanceOptions
        without num_workers): the number it has, spread again."""
        name = req.name
        d = self._get(name)
        if not d.status.live:
            raise StormishError(f"topology {name!r} is {d.status}: only a live one rebalances")
        self._live(name)  # not one being killed, nor rebalancing already
        workers: Any = req.workers if req.workers is not None else d.plan.workers
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise StormishError(
                f"rebalance {name!r}: workers must be a whole number >= 1, got {workers!r}"
            )
        raw = req.wait if req.wait is not None else d.conf["topology.message.timeout.secs"]
        wait = dc.wait_seconds("rebalance", name, raw)
        if d.status != TopologyStatus.RUNNING or wait == 0:
            self._rebalance(d, workers, d.active)  # nothing in flight to wait for
            return 0.0
        # recorded and saved before the workers are told (see api_kill): a worker that
        # does not answer leaves no rebalance half made, its spouts deactivated for good
        d.resume_active, d.rebalance_to = d.active, workers
        d.rebalance_at = time.monotonic() + wait
        d.active = False
        self._save(d)  # a nimbus that restarts meanwhile finishes the rebalance
        self._tell_active(d)
        log.info(f"nimbus: {name}: rebalancing onto {workers} workers in {wait:g}s")
        return wait

    def _tell_active(self, d: Deployment, only: set[int] | None = None) -> None:
        """Tell the running workers of `d` (those in `only`, when given) whether their
        spouts are active, as `d.active` (recorded before) says. One that is alive but
        does not answer is remembered in `d.untold` and told again at a later step
        (`_tell_untold`); a dead one is started again as `d.active` says."""
        if d.status != TopologyStatus.RUNNING:
            return  # starting: its workers start with their spouts as d.active says
        for w in d.handles:
            if only is not None and w.index not in only:
                continue
            try:
                w.set_active(d.active)
            except WorkerError as exc:
                d.untold.add(w.index)
                log.warning(
                    f"nimbus: {d.name}: worker {w.index} was not told its spouts are "
                    f"{'active' if d.active else 'inactive'} ({exc}): told again in "
                    f"{UNTOLD_EVERY:g}s"
                )
            else:
                d.untold.discard(w.index)
        d.tell_at = time.monotonic() + UNTOLD_EVERY

    def _tell_untold(self, d: Deployment) -> None:
        """The workers that did not answer a change of their spouts' state, told again."""
        if d.untold and time.monotonic() >= d.tell_at:
            self._tell_active(d, set(d.untold))

    def _rebalance(self, d: Deployment, workers: int, active: bool) -> None:
        """Stop the workers and start the new plan, its spouts `active`."""
        d.rebalance_at = None
        # the new plan is saved before the old workers stop: a nimbus that takes over
        # midway finishes the rebalance (nothing is left half-stopped)
        ahead = {"workers": workers, "epoch": d.epoch + 1, "slots": {}, "active": active,
                 "status": TopologyStatus.STARTING}  # fmt: skip
        self.store.save_state(d.name, dict(d.state(), **ahead))
        if d.status == TopologyStatus.RUNNING:
            d.running.finish(TopologyStatus.REBALANCING)
        # starting: workers placed for the old plan are let go by their supervisors, the
        # new epoch (replan) replacing them; their hellos are forgotten
        d.conf = dict(d.conf, **{"topology.workers": workers})
        d.replan()
        d.active = active  # the new workers start with their spouts as this says
        d.status = TopologyStatus.STARTING
        d.slots = {}
        self._place(d)
        self._save(d)

    def api_graph(self, name: str) -> dict[str, Any]:
        from ..lint import analyse

        d = self._get(name)
        return analyse(d.topology, d.conf).as_dict()

    def api_stats(self, name: str) -> TopologyStatistics:
        if name not in self.deployments and name in self._ended_stats:  # before a restart
            return self._ended_stats[name]
        d = self._get(name)
        if d.status == TopologyStatus.STARTING:
            why = f" ({d.waiting})" if d.waiting else ""
            raise StormishError(f"topology {name!r} is starting: no statistics yet{why}")
        return d.running.statistics()

    def _get(self, name: str) -> Deployment:
        d = self.deployments.get(name)
        if d is None and name in self.stored_only:
            row = self.stored_only[name]
            raise StormishError(
                f"topology {name!r} is {row['status']}: it no longer ran when this nimbus "
                "started, so there is nothing of it here but its listing (kill removes it)"
            )
        if d is None:
            known = ", ".join(sorted(self.deployments)) or "none"
            raise StormishError(f"no topology {name!r} on this nimbus (known: {known})")
        return d

    def _live(self, name: str) -> Deployment:
        d = self._get(name)
        if not d.status.live:
            raise StormishError(f"topology {name!r} is {d.status}: it no longer runs")
        if d.kill_at is not None:  # Storm's KILLED during the wait: no more changes
            left = max(0.0, d.kill_at - time.monotonic())
            raise StormishError(f"topology {name!r} is being killed (in {left:.0f}s)")
        if d.rebalance_at is not None:  # Storm's REBALANCING: only a kill is taken
            left = max(0.0, d.rebalance_at - time.monotonic())
            raise StormishError(
                f"topology {name!r} is rebalancing onto {d.rebalance_to} workers (in "
                f"{left:.0f}s): its spouts are deactivated until then"
            )
        return d

    # -- scheduling -----------------------------------------------------------------------------
    def _forget_supervisor(self, sid: str, why: str | None = None) -> None:
        del self.supervisors[sid]
        self._outbeaten.pop(sid, None)
        self.store.forget_supervisor(sid)
        self.log_asks.pop(sid, None)
        why = why or f"silent for {self.supervisor_timeout}s"
        log.info(f"nimbus: supervisor {sid} lost ({why})")
        for d in self.deployments.values():
            lost = [i for i, (s, _) in d.slots.items() if s == sid]
            for i in lost:
                del d.slots[i]
                # its worker may run on (its supervisor stalled, not dead): told to stop
                # now, before a replacement starts elsewhere, not only at its next hello
                w = d.handles[i] if i < len(d.handles) else None
                if w is not None and w.ident and d.status not in ENDED:
                    self.control.fence((d.name, i), w.ident, w.worker_pid)
                    until = time.monotonic() + FENCED_STOP + FENCE_GRACE
                    self._fencing[(d.name, i)] = (w.worker_pid, until)
                    log.info(f"nimbus: {d.name}: worker {i} (pid {w.worker_pid}) told to stop")
            if lost and d.status not in ENDED:
                log.info(f"nimbus: {d.name}: workers {lost} to be placed elsewhere")
                self._save(d)

    def _move(self, d: Deployment, indices: tuple[int, ...]) -> None:
        """Workers whose slot failed let go of it: `decide` places them next."""
        for i in indices:
            sid, port = d.slots.pop(i)
            log.warning(
                f"nimbus: {d.name}: worker {i} leaves supervisor {sid} port {port} "
                f"({self.supervisors[sid].failed.get(port, 'failed')}): placing it elsewhere"
            )
        self._save(d)

    def _stopping(self, name: str, index: int, now: float) -> bool:
        """Whether worker `index`'s stale incarnation (fenced as its supervisor was
        lost) may still run: it has neither answered its stop nor had its time."""
        got = self._fencing.get((name, index))
        if got is None:
            return False
        pid, until = got
        if (name, index, pid) in self.control.fence_answered or now >= until:
            del self._fencing[(name, index)]
            self.control.fence_answered.discard((name, index, pid))
            return False
        return True

    def _place(self, d: Deployment) -> None:
        missing = [i for i in range(d.plan.workers) if i not in d.slots]
        if not missing:
            d.waiting = None
            return
        # a replacement starts once its stale incarnation stopped (its answer), or had
        # FENCED_STOP and a grace to: the stale spout emitted on for a moment beside
        # the new one, and ids it emitted after the new one read its offsets ran twice
        now = time.monotonic()
        held = [i for i in missing if self._stopping(d.name, i, now)]
        if held:
            missing = [i for i in missing if i not in held]
            why = f"workers {held}: waiting for their stale incarnations to stop"
            if why != d.waiting:
                log.info(f"nimbus: {d.name}: {why}")
            d.waiting = why
            if not missing:
                return
        used = [s for dep in self.deployments.values() for s in dep.slots.values()]
        offered = {sid: info.ports for sid, info in self.supervisors.items()}
        hosts = {sid: info.host for sid, info in self.supervisors.items()}
        failed = {sid: list(info.failed) for sid, info in self.supervisors.items()}
        free = free_slots(offered, used, hosts, failed)
        placed = schedule(missing, free, hosts)
        # a port two supervisors on one host share is one slot
        left = len({(hosts[s], p) for s, ports in free.items() for p in ports}) - len(placed)
        if placed:
            d.slots.update(placed)
            d.note_hosts()
            self._save(d)
        still = len(missing) - len(placed)
        if still <= 0:
            d.waiting = None
            return
        total = len({(hosts[s], p) for s, ports in offered.items() for p in ports})
        why = (
            f"waiting for {still} free worker slot{'s' if still != 1 else ''}: it needs "
            f"{d.plan.workers} and has {len(d.slots)}; {left} free of {total} on "
            f"{len(offered)} supervisor{'s' if len(offered) != 1 else ''} "
            "(add supervisors or ports, rebalance it to fewer workers, or kill it)"
        )
        if why != d.waiting:
            log.info(f"nimbus: {d.name}: {why}")
        d.waiting = why

    def _save(self, d: Deployment) -> None:
        """Save `d`'s state. One that cannot be written (a full disk, OSError) does not
        stop nimbus: logged (once, then every SAVE_REMIND seconds) and tried again
        every SAVE_RETRY seconds (`_retry_saves`) until it is written."""
        try:
            self.store.save_state(d.name, d.state())
        except OSError as exc:
            self._unsaved_error(d.name, exc)
        else:
            if d.name not in self._finals:  # its final statistics are still to be saved
                self._unsaved.pop(d.name, None)

    def _save_final(self, name: str, final: dict[str, Any]) -> None:
        self._finals[name] = final
        try:
            self.store.save_final(name, final)
        except OSError as exc:
            self._unsaved_error(name, exc)
        else:
            del self._finals[name]

    def _unsaved_error(self, name: str, exc: OSError) -> None:
        now = time.monotonic()
        if name not in self._unsaved:
            log.error(f"nimbus: {name}: cannot save its state ({exc}): trying again")
            self._unsaved[name] = now + SAVE_REMIND
        elif now >= self._unsaved[name]:
            log.error(f"nimbus: {name}: its state is still not saved ({exc}): trying again")
            self._unsaved[name] = now + SAVE_REMIND
        self._save_at = now + SAVE_RETRY

    def _retry_saves(self) -> None:
        """Save again what could not be saved (every SAVE_RETRY seconds)."""
        if not self._unsaved or time.monotonic() < self._save_at:
            return
        for name in list(self._unsaved):
            d = self.deployments.get(name)
            if d is None:  # removed meanwhile
                del self._unsaved[name]
                self._finals.pop(name, None)
                continue
            try:
                self.store.save_state(name, d.state())
                if name in self._finals:
                    self.store.save_final(name, self._finals.pop(name))
            except OSError as exc:
                self._unsaved_error(name, exc)
                continue
            del self._unsaved[name]
            log.warning(f"nimbus: {name}: its state is saved again")

    # -- stepping: decide (pure, cluster/decide.py), then act ------------------------------
    def view(self) -> dc.View:
        """What nimbus knows now, for `decide`."""
        hellos = {
            (t, i): dc.HelloSeen(h.pid, h.info.get("state"), h.heard)
            for (t, i), h in self.control.hellos.items()
            if t is not None
        }
        tops = [
            dc.TopologyView(
                d.name,
                d.status,
                d.plan.workers,
                {i: sid for i, (sid, _) in d.slots.items()},
                d.kill_at,
                d.rebalance_at,
                {w.index: w.worker_pid for w in d.handles},
                {i: port for i, (_, port) in d.slots.items()},
            )  # fmt: skip
            for d in self.deployments.values()
        ]
        heard = {sid: i.heard for sid, i in self.supervisors.items()}
        failed = {sid: frozenset(i.failed) for sid, i in self.supervisors.items() if i.failed}
        return dc.View(time.monotonic(), self.supervisor_timeout, heard, tops, hellos, failed)

    def tick(self) -> None:
        """One step of every topology: what `decide` says, carried out. A worker's
        refusal (WorkerError) fails its topology, not nimbus."""
        self._retry_saves()
        if self._restored:
            self._end_half_stopped()
        failed: set[str] = set()
        brought: dict[str, list[tuple[ClusterWorker, Any]]] = {}
        for action in dc.decide(self.view()):
            if isinstance(action, dc.ForgetSupervisor):
                self._forget_supervisor(action.supervisor)
                continue
            d = self.deployments.get(action.topology)
            if d is None or action.topology in failed or d.status in ENDED:
                continue
            try:
                self._act(d, action, brought)
            except WorkerError as exc:
                log.info(f"nimbus: {d.name}: {exc}")
                d.error = str(exc)
                failed.add(d.name)
                self._end(d, TopologyStatus.FAILED)

    def _end_half_stopped(self) -> None:
        """A restored running topology one of whose workers its supervisor reports
        `finished` (it exited 0: only nimbus stops a worker so) was being ended by a
        nimbus that died before it saved the end (an older nimbus, or a save that
        failed): that worker is never restarted, so the end is finished here, not
        left `running` for ever. Checked until every worker was adopted (or restarted)."""
        for name in list(self._restored):
            d = self.deployments.get(name)
            if d is None or d.status != TopologyStatus.RUNNING:
                self._restored.discard(name)
                continue
            reports = [
                info.workers.get(f"{name}/{i}") if (info := self.supervisors.get(sid)) else None
                for i, (sid, _) in d.slots.items()
            ]
            done = [
                i
                for i, r in zip(d.slots, reports, strict=True)
                if r and r.get("state") == "finished"
            ]
            if done:
                self._restored.discard(name)
                status = TopologyStatus.KILLED if d.kill_at is not None else TopologyStatus.COMPLETE
                d.error = (
                    f"worker{'s' if len(done) > 1 else ''} {', '.join(map(str, done))} had "
                    "finished (stopped by a nimbus that ended the topology before it restarted)"
                )
                log.warning(f"nimbus: {name}: {d.error}: ending it ({status})")
                self._end(d, status)
            elif all(w.worker_pid is not None for w in d.handles):
                self._restored.discard(name)  # every worker adopted or brought up

    def _act(self, d: Deployment, a: dc.Action, brought: dict[str, list]) -> None:
        if isinstance(a, dc.Move):
            self._move(d, a.indices)
        elif isinstance(a, dc.Place):
            self._place(d)
        elif isinstance(a, dc.Start):
            self._start(d, a)
        elif isinstance(a, dc.Adopt):
            w, h = d.handles[a.index], self._hello(d, a.index)
            w.new_incarnation(h.ident, a.pid)
            w.address = h.info.get("address")
            # its spouts' state is not known here (nimbus restarted): it is told the
            # recorded one at the next step, as Storm's workers read it from ZooKeeper
            d.untold.add(a.index)
            log.info(f"nimbus: {d.name}: worker {a.index} adopted (pid {a.pid})")
        elif isinstance(a, dc.BringUp):
            w, h = d.handles[a.index], self._hello(d, a.index)
            back = a.pid == w.given_up  # the same process: out of reach, not restarted
            w.new_incarnation(h.ident, a.pid)
            d.restarts += 0 if back else 1
            how = "answers again" if back else "restarted"
            log.info(f"nimbus: {d.name}: worker {a.index} {how} (pid {a.pid})")
            brought.setdefault(d.name, []).append((w, a.state))
        elif isinstance(a, dc.End):
            self._flush_bring_up(d, brought)
            self._end(d, a.status)
        elif isinstance(a, dc.Rebalance):
            self._flush_bring_up(d, brought)
            log.info(f"nimbus: {d.name}: rebalancing onto {d.rebalance_to} workers now")
            self._rebalance(d, d.rebalance_to, d.resume_active)
        elif isinstance(a, dc.CheckCompletion):
            self._flush_bring_up(d, brought)
            self._tell_untold(d)
            now = time.monotonic()
            if now >= d.next_check:
                d.next_check = now + COMPLETION_EVERY
                if d.completion.observe():  # the local cluster's rule (local/running.py)
                    self._end(d, TopologyStatus.COMPLETE)

    def _flush_bring_up(self, d: Deployment, brought: dict[str, list]) -> None:
        """The restarted workers of `d`, brought up together (one address book round)."""
        changed = brought.pop(d.name, [])
        if changed:
            self._bring_up(d, changed)

    def _hello(self, d: Deployment, index: int) -> Any:
        return self.control.hellos.get((d.name, index))

    def _start(self, d: Deployment, a: dc.Start) -> None:
        """Every worker said hello: bring each where it should be: a new one gets the
        topology, all learn where the others listen, and whatever is not running starts;
        one already running (nimbus restarted under it) is adopted as it is."""
        for w in d.handles:
            h = self._hello(d, w.index)
            w.ident, w.worker_pid = h.ident, h.pid
        states = [state for _, state in a.states]
        started = self._bring_up(d, list(zip(d.handles, states, strict=True)))
        adopted = states.count("running")
        lost = len(d.handles) - len(started) - adopted
        log.info(
            f"nimbus: {d.name}: running ({len(started)} started, {adopted} adopted"
            + (f", {lost} died while starting: their supervisors restart them)" if lost else ")")
        )
        d.status = TopologyStatus.RUNNING
        self._save(d)

    def _bring_up(self, d: Deployment, workers: list[tuple[ClusterWorker, Any]]) -> list:
        """Assign (state new), tell every live worker the address book, start (state not
        running); returns the workers started. The states are those their hellos gave
        before this began: a hello that arrives meanwhile must not change the plan.

        A worker that dies while being brought up is left to its supervisor, which
        restarts it (after a wait if it keeps crashing); its next incarnation's hello
        brings it up then (`decide`'s BringUp). Only a live worker's refusal (a topology it cannot
        build, a `prepare` that raises) fails the topology."""
        fresh = []
        for w, state in workers:
            if not self._ask_live(d, w, "assign" if state == "new" else "address", state):
                continue
            if state != "running":
                fresh.append(w)
            else:  # running before this nimbus knew it: told its spouts' state next step
                d.untold.add(w.index)
        book = {w.index: w.address for w in d.handles if w.address is not None}
        for w in d.handles:
            if w.alive():
                self._ask_live(d, w, "peers", book)
        started = []
        for w in fresh:
            if (d.active or self._ask_live(d, w, "active", False)) and self._ask_live(
                d, w, "start", None
            ):
                started.append(w)
                d.untold.discard(w.index)  # it started with its spouts as d.active says
        return started

    def _ask_live(self, d: Deployment, w: ClusterWorker, verb: str, payload: Any) -> bool:
        """One step of bringing worker `w` up; False if it died meanwhile."""
        try:
            if verb == "assign":
                w.address = w.ask("assign", d.blob, timeout=ASSIGN_TIMEOUT)
            elif verb == "address":
                w.address = self._hello(d, w.index).info.get("address")
            else:
                w.ask(verb, payload)
        except WorkerError as exc:
            if w.alive():
                raise
            log.info(f"nimbus: {d.name}: {exc}; its supervisor restarts it")
            # Known no longer: the next hello brings it up, whether from the next
            # incarnation or from this process, if it was only out of reach for a while
            # (it says then which state it reached: `decide`'s BringUp)
            w.given_up, w.worker_pid = w.worker_pid, None
            return False
        return True

    def _end(self, d: Deployment, status: TopologyStatus) -> None:
        """The end is saved before the workers are stopped (which takes as long as their
        cleanups): a nimbus killed meanwhile restarts with the topology ended, its
        workers no longer wanted, never with it `running` and its workers finished."""
        d.status = status
        d.slots = {}
        d.waiting = None  # an ended topology waits for nothing (list, monitor)
        for key in [k for k in self._fencing if k[0] == d.name]:  # nothing to place now
            pid, _ = self._fencing.pop(key)
            self.control.fence_answered.discard((*key, pid))
        self._save(d)
        stats = d.running.finish(status)
        self._save_final(d.name, stats.to_dict())
        log.info(f"nimbus: {d.name}: {status}")


def _worker_reports(raw: Any) -> dict[str, dict[str, Any]]:
    """A supervisor's per-worker reports, keeping only what `list` shows (an older
    supervisor sends none)."""
    if not isinstance(raw, dict):
        return {}
    keep = ("pid", "state", "restarts", "crashes_in_a_row", "last_exit", "last_exit_at",
            "last_words", "restart_in")  # fmt: skip
    return {str(k): {f: v.get(f) for f in keep} for k, v in raw.items() if isinstance(v, dict)}


_FORWARDED = object()  # an answer that the leader gives, later


@dataclass
class _PendingSubmit:
    """An HA submit whose code waits for its replication (answered when it is over)."""

    ident: bytes
    req_id: int
    topology: Topology
    conf: dict[str, Any]
    active: bool
    cid: str
    cancel: threading.Event = field(default_factory=threading.Event)


def _compact(workers: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A supervisor's workers as kept in ZooKeeper: what changes when a worker's state
    does, not each beat (`restart_in` counts down)."""
    return {k: {f: v for f, v in w.items() if f != "restart_in"} for k, w in workers.items()}


def _host(address: str) -> str:
    return address.split("://", 1)[1].rsplit(":", 1)[0]


MOST_LOG_BYTES = 16 * 1024 * 1024  # one piece of a log at most, per worker


def _log_request(req: api.LogsRequest) -> tuple[dict[str, Any], int]:
    """A `logs` request's offsets and size, checked before any supervisor is asked: a
    negative or odd offset made the supervisor's read raise, which ended it and every
    worker it ran. An offset is None, a byte offset, or [inode, byte offset]."""

    def natural(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    most = req.most
    if not natural(most) or not 1 <= most <= MOST_LOG_BYTES:
        raise StormishError(
            f"logs: 'most' must be a number of bytes from 1 to {MOST_LOG_BYTES}, got {most!r}"
        )
    if req.index is not None and not natural(req.index):
        raise StormishError(f"logs: 'index' must be a worker index >= 0, got {req.index!r}")
    offsets = req.offsets or {}
    if not isinstance(offsets, dict):
        raise StormishError(f"logs: 'offsets' must be a mapping, got {type(offsets).__name__}")
    for key, at in offsets.items():
        pair = isinstance(at, list | tuple) and len(at) == 2 and all(natural(x) for x in at)
        if not isinstance(key, str) or not (at is None or natural(at) or pair):
            raise StormishError(
                f"logs: offset {key!r}: {at!r} is not a byte offset >= 0 or [inode, offset]"
            )
    return offsets, most


def _monotonic(wall: float) -> float:
    """A saved wall-clock deadline on this process's monotonic clock (never before now)."""
    return time.monotonic() + max(0.0, float(wall) - time.time())
