"""`stormish supervisor`: offers worker slots on its host, starts, watches and restarts the
worker processes nimbus assigns to it.

It works by reconciliation, not commands: every heartbeat it tells nimbus which slots it
offers and which workers run, and nimbus answers with the workers it wants here. The
supervisor starts what is missing, stops what is no longer wanted, and restarts a worker
that died (a non-zero exit or a signal) on the same port, where its peers' sockets
reconnect by themselves: at once after a good run, with a growing wait when it keeps
crashing (`restarts.RestartPolicy`). A worker that exited 0 was stopped by nimbus and is
not restarted. A worker whose heartbeat file has not been touched for `worker_timeout`
seconds (Storm's `supervisor.worker.timeout.secs`: a hung process) is killed and
restarted the same way. Each heartbeat reports every worker's state, restart count and
last death (how it ended, when, and its log's last line), which nimbus shows in `list`
and `monitor`. When nimbus is down the supervisor keeps the last answer, and keeps its
workers running and restarted.

With several nimbus (`--nimbus a,b,c`, HA on ZooKeeper) it talks to one at a time: a
follower's answer names the leader (and says nothing of the workers, which run on as
they are), and the supervisor talks to the leader from then on; a nimbus silent for two
heartbeats makes way for the next. When another nimbus leads, its control address
differs: the workers are not restarted, they are told the new address (a file each
re-reads at its heartbeat) and say hello there. The supervisor itself never talks to
ZooKeeper: an outage there does not touch its workers.

Its slot ports must be free: at start it binds each (where its workers will) and lets
go, and refuses to start, naming the port, when one is taken. A port another program
takes later is a failed slot: before starting a worker there the supervisor tries the
port again, and when it is taken does not start the worker but reports the port to
nimbus (`failed_ports`), which places the worker on another slot; the port is offered
again once it is free.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import psutil
import zmq

from ..errors import StormishError
from ..local.forkserver import WORKER_NAME, Forked, ForkServer, describe_exit
from ..local.forkserver import supported as forkserver_supported
from ..local.process import PORT_TAKEN_EXIT
from ..logs import RotatingFile, private_dir, read_log, start_line, worker_log_name
from ..plugins import DATA_ENV, RESTART_ENV
from ..transport import control as ct
from ..transport import shm
from ..transport.security import Security
from . import orphans
from .api import API_VERBS, LogAsk
from .listen import listen_address
from .restarts import RestartPolicy, last_line

log = logging.getLogger("stormish.supervisor")

HEARTBEAT = 1.0
# a loop this many heartbeats late woke from a stall (SIGSTOP, a paused VM, swap): what
# nimbus said before it is stale, the workers it no longer assigns here are stopped at
# its first answer
STALL_BEATS = 3
# nimbus silent this many heartbeats is said (once, until it answers): a supervisor whose
# beats go nowhere (nimbus down, a firewall) otherwise waits without a word
SILENT_BEATS = 10
# what the supervisor's connection to nimbus says of its handshakes: a keyed nimbus that
# refuses this supervisor's keys (or one with other keys) is silent otherwise
HANDSHAKE_EVENTS = (
    zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)


Key = tuple[str, int]  # (topology, worker index)
Spec = tuple[int, str, int]  # (port, control address, epoch)


def changes(
    have: dict[Key, Spec], wanted: list[dict[str, Any]]
) -> tuple[list[Key], dict[Key, Spec]]:
    """Which workers to stop and which to start so that `have` becomes `wanted` (each
    `topology`, `index`, `port`, `control`, `epoch`). A worker whose port or epoch
    changed is stopped and started again: a new epoch is a new process even on the same
    port. One whose control address alone changed (another nimbus leads now) is neither:
    it is told the new address (`moved`). Pure, for tests; the supervisor does the I/O."""
    want: dict[Key, Spec] = {}
    for w in wanted:
        want[(w["topology"], int(w["index"]))] = (
            int(w["port"]), str(w["control"]), int(w.get("epoch", 0))
        )  # fmt: skip

    def same(a: Spec | None, b: Spec | None) -> bool:
        return a is not None and b is not None and (a[0], a[2]) == (b[0], b[2])

    stop = [k for k, spec in have.items() if not same(want.get(k), spec)]
    start = {k: spec for k, spec in want.items() if not same(have.get(k), spec)}
    return stop, start


def moved(have: dict[Key, Spec], wanted: list[dict[str, Any]]) -> dict[Key, str]:
    """Workers kept (same port and epoch) whose controller moved: key -> new address."""
    out = {}
    for w in wanted:
        k = (w["topology"], int(w["index"]))
        spec = have.get(k)
        if spec is None or (spec[0], spec[2]) != (int(w["port"]), int(w.get("epoch", 0))):
            continue
        if spec[1] != str(w["control"]):
            out[k] = str(w["control"])
    return out


def port_taken(host: str, port: int) -> str | None:
    """Why a worker could not listen on `host:port` (None: it can). A bind, let go at
    once, with SO_REUSEADDR as ZeroMQ binds: a port in TIME_WAIT is free, one a process
    listens on is not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


STATE_PREFIX = "stormish-supervisor-"
OWNER_FILE = "owner-pid"  # in a state directory: "pid start-time" of its supervisor


def _own_state_dir(sid: str) -> str:
    """A fresh state directory for supervisor `sid` (heartbeat and control files); the
    ones earlier supervisors of this id left when killed -9 (close() removes its own)
    go first, each only once its owner (pid and start time, in OWNER_FILE) is dead: a
    live supervisor's is never touched, nor one without the file (found leaking, one
    directory per kill, by a fault hunt)."""
    import glob

    base = tempfile.gettempdir()
    for old in glob.glob(os.path.join(base, glob.escape(f"{STATE_PREFIX}{sid}-") + "*")):
        if _owner_dead(old):
            log.info(f"supervisor {sid}: removing {old}, left by a supervisor that died")
            shutil.rmtree(old, ignore_errors=True)
    path = tempfile.mkdtemp(prefix=f"{STATE_PREFIX}{sid}-")
    me = psutil.Process()
    with open(os.path.join(path, OWNER_FILE), "w") as fh:
        fh.write(f"{me.pid} {me.create_time()!r}\n")
    return path


def _owner_dead(path: str) -> bool:
    """Whether the supervisor that made state directory `path` is dead (False when it
    is not known: no owner file, not ours)."""
    try:
        if os.stat(path).st_uid != os.getuid():
            return False
        with open(os.path.join(path, OWNER_FILE)) as fh:
            pid_text, started_text = fh.read().split()
        pid, started = int(pid_text), float(started_text)
    except (OSError, ValueError):
        return False
    try:
        return abs(psutil.Process(pid).create_time() - started) > 0.01  # a pid reused
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


@dataclass
class Slot:
    """One worker this supervisor runs (or ran) for nimbus."""

    topology: str
    index: int
    port: int
    control: str
    epoch: int = 0
    proc: subprocess.Popen | Forked | None = None
    restarts: int = 0
    finished: bool = False
    started: float = 0.0  # monotonic
    heartbeat_file: str = ""
    # the heartbeat file's mtime as last seen, and when (monotonic) it was seen to change:
    # silence is measured on this host's monotonic clock, not as wall clock minus mtime,
    # which a clock step (NTP, a resumed VM) turns into every worker silent at once (a
    # step forward past the worker timeout) or none for as long as the step (back)
    beat_mtime: float | None = None
    beat_seen: float = 0.0
    control_file: str = ""  # the controller's address, which the worker re-reads
    log: Any = field(default=None, repr=False)  # its RotatingFile, with --log-dir
    pump: Any = field(default=None, repr=False)  # the thread copying its output there
    log_path: str | None = None
    crashes: int = 0  # in a row: sets the wait before the next restart
    restart_at: float | None = None  # monotonic: dead, waiting to be restarted
    last_exit: str | None = None  # how the last incarnation ended
    last_exit_at: float | None = None  # wall clock
    last_words: str | None = None  # the last line of its log then

    def report(self, now: float) -> dict[str, Any]:
        """What nimbus shows of this worker (plain JSON values: wall-clock times)."""
        alive = self.proc is not None and self.proc.poll() is None
        state = "finished" if self.finished else "running" if alive else "waiting"
        return {
            "pid": self.proc.pid if alive and self.proc is not None else None,
            "state": state,
            "port": self.port,
            "restarts": self.restarts,
            "crashes_in_a_row": self.crashes,
            "last_exit": self.last_exit,
            "last_exit_at": self.last_exit_at,
            "last_words": self.last_words,
            "restart_in": None
            if self.restart_at is None
            else round(max(0.0, self.restart_at - now), 2),
        }


class Supervisor:
    def __init__(
        self,
        nimbus: str | list[str],
        ports: list[int],
        host: str,
        security: Security,
        keys_dir: str | None = None,
        supervisor_id: str | None = None,
        log_dir: str | None = None,
        heartbeat: float = HEARTBEAT,
        bind_host: str | None = None,
        worker_timeout: float = 30.0,
        state_dir: str | None = None,
        restart_policy: RestartPolicy | None = None,
        metrics_port: int | None = None,
        log_level: str = "INFO",
        log_max_bytes: int = 100 << 20,
        log_backups: int = 9,
        worker_start: str = "spawn",
    ):
        if not ports:
            raise ValueError("a supervisor needs at least one slot port")
        # first, before this process makes a ZeroMQ context or a thread: `fork` forks its
        # workers from a fork server (local/forkserver.py), `spawn` starts interpreters
        self.forkserver: ForkServer | None = None
        if worker_start == "fork" and forkserver_supported():
            self.forkserver = ForkServer()
        try:
            self.id = supervisor_id or f"{socket.gethostname()}-{os.getpid()}"
            # this process's: nimbus tells two supervisors started with one id apart
            self.nonce = secrets.token_hex(8)
            self.refused: str | None = None  # nimbus refused this id: why
            self.ports = list(ports)
            self.host = host
            self.bind_host = bind_host or listen_address(host)  # the workers' links, the metrics
            security.check_bind(f"tcp://{self.bind_host}:{self.ports[0]}")
            for port in self.ports:
                self._take_port(port)
            self.failed_ports: dict[int, str] = {}  # slot port -> why: taken by another program
            self.security = security
            self.keys_dir = keys_dir
            self.heartbeat = heartbeat
            self.log_dir = log_dir
            self.worker_timeout = worker_timeout
            self.restart_policy = restart_policy or RestartPolicy()
            self.log_level = log_level
            self.log_max_bytes, self.log_backups = log_max_bytes, log_backups
            self._own_state = state_dir is None  # heartbeat files: ours to remove at close
            if state_dir is None:
                state_dir = _own_state_dir(self.id)
            self.state_dir = state_dir
            self.ctx = zmq.Context()
            self.sock = self.ctx.socket(zmq.DEALER)
            self.sock.setsockopt(zmq.LINGER, 0)
            self.sock.setsockopt(zmq.MAXMSGSIZE, ct.MAX_FRAME)  # no frame is larger: control.py
            security.client(self.sock)
            self.monitor = self.sock.get_monitor_socket(HANDSHAKE_EVENTS)
            self._said: str | None = None  # the trouble with nimbus said last, once
            # several nimbus (HA): the one that answers is used; a follower's answer names
            # the leader, which is used from then on; a silent one makes way for the next
            self.nimbuses = [nimbus] if isinstance(nimbus, str) else list(nimbus)
            self.nimbus = self.nimbuses[0]
            self._switched = time.monotonic()
            self.sock.connect(self.nimbus)
            self.slots: dict[tuple[str, int], Slot] = {}
            self._ids = itertools.count(1)
            self._floor = 0  # replies to beats sent before this id are stale (a stall)
            self._stop = False
            self._log_pieces: list[dict[str, Any]] = []  # answers to nimbus's log asks
            self.nimbus_heard: float | None = None
            self.metrics = None
            if metrics_port is not None:
                from ..httpd import metrics_server
                from ..metrics import FamiliesCollector, registry

                reg = registry(list, FamiliesCollector(self._metric_families))
                self.metrics = metrics_server(self.bind_host, metrics_port, reg)
                log.info(f"supervisor {self.id}: metrics at {self.metrics.url}/metrics")
        except BaseException:
            if self.forkserver is not None:
                self.forkserver.close()
            raise

    def _take_port(self, port: int) -> None:
        """A slot port must be free at start; one held by an orphaned worker (its
        supervisor was killed: cluster/orphans.py) is freed by stopping that worker."""
        why = port_taken(self.bind_host, port)
        if why is None:
            return
        holder = orphans.listener(port)
        dead = orphans.orphaned_worker(holder) if holder is not None else None
        if holder is not None and dead is not None:
            log.warning(
                f"supervisor: slot port {port} is held by worker pid {holder.pid}, left by a "
                f"supervisor (pid {dead}) that is gone: stopping it"
            )
            orphans.stop(holder)
            deadline = time.monotonic() + orphans.STOP_WAIT
            while (why := port_taken(self.bind_host, port)) is not None:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)  # the kernel lets go of the listener after the exit
            if why is None:
                return
        raise StormishError(
            f"supervisor: slot port {port} on {self.bind_host} is taken ({why})"
            f"{orphans.describe(holder)}: another program or supervisor listens there; give "
            f"this supervisor free ports with --ports (now {','.join(map(str, self.ports))})"
        )

    # -- the loop ----------------------------------------------------------------------------
    def serve(self) -> None:
        """Until stopped; a StormishError when nimbus refuses this supervisor (its id is
        a live one's): its workers are stopped (`close`)."""
        next_beat = last = 0.0
        while not self._stop:
            now = time.monotonic()
            if last and now - last > STALL_BEATS * self.heartbeat:
                self._woke(now - last)
                next_beat = now
            last = now
            if now >= next_beat:
                self._send_heartbeat()
                next_beat = now + self.heartbeat
            if self.sock.poll(100):
                self._on_reply(self.sock.recv_multipart())
            self._try_next_nimbus()
            self._check_nimbus(now)
            self._watch()

        if self.refused is not None:
            raise StormishError(self.refused)

    def _check_nimbus(self, now: float) -> None:
        """Say why nimbus does not answer, once until it does: its handshake failed
        (other keys: a supervisor's own pair is the cluster's, so a nimbus with the same
        keys always lets it in), or it is silent (down, or out of reach). The workers
        here run on meanwhile."""
        from zmq.utils.monitor import recv_monitor_message

        keys = getattr(self.security, "keys_dir", None) or "(none: --insecure)"
        while self.monitor.poll(0):
            event = recv_monitor_message(self.monitor)
            if event["event"] != zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._say(
                    f"the handshake with nimbus at {self.nimbus} failed: it is not keyed with "
                    f"the keys in --keys {keys} (a nimbus with other keys, a keyed nimbus "
                    "and an --insecure supervisor, or the reverse), or it is not a nimbus"
                )
        heard = max(self.nimbus_heard or 0.0, self._switched)
        if self._said is None and now - heard > SILENT_BEATS * self.heartbeat:
            self._say(
                f"no answer from nimbus at {self.nimbus} for {now - heard:.0f}s: is it "
                "running, and reachable from this host? (the workers here run on)"
            )

    def _say(self, why: str) -> None:
        if why != self._said:
            log.warning(f"supervisor {self.id}: {why}")
            self._said = why

    def _woke(self, stalled: float) -> None:
        """After a stall nimbus may have given this supervisor's slots to another: what
        it answered before is stale (dropped), and a beat goes at once; its answer
        stops the workers no longer assigned here first thing (`reconcile`)."""
        log.warning(
            f"supervisor {self.id}: stalled for {stalled:.1f}s: asking nimbus which "
            "workers are still ours"
        )
        self._floor = next(self._ids)

    def stop(self, signum: int | None = None, frame: FrameType | None = None) -> None:
        self._stop = True

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
        for s in self.slots.values():
            self._terminate(s)
        if self._own_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        self.sock.disable_monitor()
        self.monitor.close(0)
        self.sock.close(0)
        self.security.release(self.ctx)
        self.ctx.term()
        if self.forkserver is not None:
            self.forkserver.close()

    def _metric_families(self) -> list[Any]:
        """Its workers, as this host sees them (the HTTP server's thread: reads only)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        labels = ["supervisor", "topology", "worker"]
        restarts = CounterMetricFamily(
            "stormish_supervisor_worker_restarts", "times this supervisor restarted the worker",
            labels=labels,
        )  # fmt: skip
        up = GaugeMetricFamily(
            "stormish_supervisor_worker_up", "1 while the worker process runs", labels=labels
        )
        slots = GaugeMetricFamily(
            "stormish_supervisor_slots", "worker slots on this host, by use", labels=["state"]
        )
        now = time.monotonic()
        rows = list(self.slots.items())
        for (topology, index), s in rows:
            rep = s.report(now)
            restarts.add_metric([self.id, topology, str(index)], s.restarts)
            up.add_metric([self.id, topology, str(index)], 1 if rep["state"] == "running" else 0)
        used = sum(1 for _, s in rows if not s.finished)
        slots.add_metric(["used"], used)
        slots.add_metric(["free"], max(0, len(self.ports) - used))
        return [restarts, up, slots]

    # -- nimbus ------------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        running = {
            f"{t}/{i}": s.proc.pid
            for (t, i), s in self.slots.items()
            if s.proc is not None and s.proc.poll() is None
        }
        now = time.monotonic()
        workers = {f"{t}/{i}": s.report(now) for (t, i), s in self.slots.items()}
        pieces, self._log_pieces = self._log_pieces, []
        self._recheck_failed()
        return {
            "id": self.id,
            "nonce": self.nonce,
            "host": self.host,
            "ports": self.ports,
            "running": running,
            "workers": workers,
            "logs": pieces,
            "failed_ports": {str(p): why for p, why in self.failed_ports.items()},
        }

    def _recheck_failed(self) -> None:
        """A failed port that is free again is a slot again."""
        for port in list(self.failed_ports):
            if port_taken(self.bind_host, port) is None:
                del self.failed_ports[port]
                log.info(f"supervisor {self.id}: slot port {port} is free again")

    def _port_free(self, s: Slot) -> bool:
        """Before a worker starts on its port: True when it can listen there; otherwise
        the slot failed (said once), to be reported to nimbus."""
        why = port_taken(self.bind_host, s.port)
        if why is None:
            return True
        if s.port not in self.failed_ports:
            log.warning(
                f"supervisor {self.id}: slot port {s.port} is taken ({why}): worker "
                f"{s.topology}/{s.index} not started there; nimbus places it elsewhere"
            )
        self.failed_ports[s.port] = f"taken by another program: {why}"
        return False

    def _slot_failed(self, s: Slot, why: str) -> None:
        """Worker `s` exited for its port (taken between our check and its bind): the
        slot failed; the worker is let go, for nimbus to place elsewhere."""
        log.warning(
            f"supervisor {self.id}: worker {s.topology}/{s.index}: slot port {s.port} is "
            f"taken ({why}); nimbus places it elsewhere"
        )
        self.failed_ports[s.port] = f"taken by another program: {why}"
        self._close_log(s)
        self.slots.pop((s.topology, s.index), None)

    def _use_nimbus(self, address: str, why: str) -> None:
        if address == self.nimbus:
            return
        log.info(f"supervisor {self.id}: talking to nimbus at {address} ({why})")
        self.sock.disconnect(self.nimbus)
        self.sock.connect(address)
        self.nimbus = address
        self._switched = time.monotonic()

    def _try_next_nimbus(self) -> None:
        """With several nimbus: one silent for two heartbeats makes way for the next
        (its workers run on meanwhile, as they do while no nimbus answers)."""
        if len(self.nimbuses) < 2:
            return
        heard = max(self.nimbus_heard or 0.0, self._switched)
        if time.monotonic() - heard > 2 * self.heartbeat:
            i = self.nimbuses.index(self.nimbus) if self.nimbus in self.nimbuses else -1
            self._use_nimbus(self.nimbuses[(i + 1) % len(self.nimbuses)], "the last is silent")

    def _send_heartbeat(self) -> None:
        try:
            self.sock.send_multipart(
                ct.request("heartbeat", next(self._ids), self.report(), API_VERBS), zmq.NOBLOCK
            )
        except zmq.Again:  # nimbus unreachable and the queue full: the next beat retries
            pass

    def _on_reply(self, frames: list[bytes]) -> None:
        try:
            ok, rid, wanted = ct.decode_reply(frames)
        except ct.ControlError as exc:
            log.warning(f"supervisor {self.id}: dropped a reply: {exc}")
            return
        if rid < self._floor:  # answered before a stall: what it wants may have moved
            return
        if not ok:
            log.warning(f"supervisor {self.id}: nimbus refused: {wanted}")
            return
        self.nimbus_heard = time.monotonic()
        if self._said is not None:
            log.info(f"supervisor {self.id}: nimbus at {self.nimbus} answers")
            self._said = None
        asks: list[LogAsk] = []
        if isinstance(wanted, dict):
            if wanted.get("refused"):  # another live supervisor has this id
                self.refused = f"supervisor {self.id}: nimbus refused it: {wanted['refused']}"
                log.error(self.refused)
                self._stop = True
                return
            if wanted.get("leader"):  # a follower: the leader is elsewhere
                self._use_nimbus(str(wanted["leader"]), "the nimbus that leads")
            wanted, asks = wanted["wanted"], wanted.get("logs") or []
        if wanted is None:  # no word on the workers (a follower): they run on as they are
            return
        self.reconcile(wanted)
        if asks:  # `stormish logs` waits: answer now, not at the next beat
            self._log_pieces = self.read_logs(asks)
            self._send_heartbeat()

    def reconcile(self, wanted: list[dict[str, Any]]) -> None:
        """Make the running workers what nimbus wants."""
        have = {k: (s.port, s.control, s.epoch) for k, s in self.slots.items()}
        # a slot on a port not offered now (a nimbus that has not heard the new --ports
        # yet) is not ours: its worker is not started (or is stopped)
        wanted = [w for w in wanted if int(w["port"]) in self.ports]
        stop, start = changes(have, wanted)
        for key, address in moved(have, wanted).items():
            s = self.slots[key]
            s.control = address
            if s.control_file:
                _write_file(s.control_file, address)
        for key in stop:
            self._terminate(self.slots.pop(key))
        for key, spec in start.items():
            s = Slot(key[0], key[1], *spec)
            if self._port_free(s):  # else not started: reported, nimbus moves it
                self.slots[key] = s
                self._launch_or_retry(s)

    # -- worker processes -----------------------------------------------------------------------
    def _watch(self) -> None:
        now, mono = time.time(), time.monotonic()
        for s in list(self.slots.values()):
            if s.finished or (s.proc is None and s.restart_at is None):
                continue
            if s.restart_at is not None:  # dead, waiting out its backoff
                if mono >= s.restart_at:
                    self._restart(s)
                continue
            assert s.proc is not None
            code = s.proc.poll()
            if code is not None:  # a crashed worker's segments (one that stops removes its own)
                shm.remove_for(s.proc.pid)
            if code is None:
                silent = mono - self._last_beat(s, mono)
                if silent <= self.worker_timeout:
                    continue
                why = f"silent for {silent:.1f}s (worker timeout {self.worker_timeout:g}s)"
                s.proc.kill()
                s.proc.wait(10)
                shm.remove_for(s.proc.pid)
            elif code == 0:
                s.finished = True  # stopped by nimbus: its topology ended
                continue
            elif code == PORT_TAKEN_EXIT:  # its port was taken after our check
                self._slot_failed(s, "the worker could not listen: Address already in use")
                continue
            else:
                why = describe_exit(code)
                lost = s.proc.lost() if isinstance(s.proc, Forked) else None
                if lost is not None:  # its fork server is gone: the worker may run on
                    why = f"is lost: {lost}"
                    self._stop_lost(s)
            self._died(s, why, now, mono)

    def _stop_lost(self, s: Slot) -> None:
        """A forked worker whose fork server is gone runs on, holding its port, until it
        sees its parent change: stopped now (it is this slot's worker and an orphan), so
        that it starts again on its port from a new server rather than losing the slot
        to its own predecessor ('port taken')."""
        assert s.proc is not None
        try:
            proc = psutil.Process(s.proc.pid)
        except psutil.Error:
            return
        server = self.forkserver.pid if self.forkserver is not None else None
        try:  # an orphan, or a child of the server whose socket ended (it may still run)
            ours = proc.name() == WORKER_NAME and proc.ppid() == server
        except psutil.Error:
            ours = False
        if ours or orphans.orphaned_worker(proc) is not None:
            orphans.stop(proc)

    def _died(self, s: Slot, why: str, now: float, mono: float) -> None:
        """Note how worker `s` ended and when it starts again (at once, or after a wait
        when it keeps crashing)."""
        s.last_exit, s.last_exit_at = why, now
        self._close_log(s)  # all it wrote, before its last line is read
        s.last_words = last_line(s.log_path) if s.log_path else None
        s.crashes = self.restart_policy.crashes_after(s.crashes, mono - s.started)
        delay = self.restart_policy.delay(s.crashes)
        when = "at once" if delay == 0 else f"in {delay:g}s ({s.crashes} crashes in a row)"
        log.warning(
            f"supervisor {self.id}: worker {s.topology}/{s.index} {why}; "
            f"restarting it on port {s.port} {when} (restart {s.restarts + 1})"
            + (f"; its log ended: {s.last_words}" if s.last_words else "")
        )
        s.restart_at = mono + delay
        if delay == 0:
            self._restart(s)

    def _restart(self, s: Slot) -> None:
        s.restart_at = None
        if not self._port_free(s):  # another program took its port meanwhile
            self._close_log(s)
            del self.slots[(s.topology, s.index)]
            return
        s.restarts += 1
        self._launch_or_retry(s)

    def _launch_or_retry(self, s: Slot) -> None:
        """`_launch`, and when the process cannot be started (a fork server that cannot
        fork: ENOMEM after an OOM kill, or gone between the check and the fork; no new
        one), the slot counts as crashed and is tried again after its back-off: an
        OSError here ended the supervisor, and with it every slot."""
        try:
            self._launch(s)
        except OSError as exc:
            s.crashes = self.restart_policy.crashes_after(s.crashes, 0.0)
            delay = max(1.0, self.restart_policy.delay(s.crashes))
            s.last_exit, s.last_exit_at = f"could not be started: {exc}", time.time()
            log.warning(
                f"supervisor {self.id}: worker {s.topology}/{s.index} could not be started "
                f"on port {s.port}: {exc}; trying again in {delay:g}s"
            )
            s.restart_at = time.monotonic() + delay

    def _last_beat(self, s: Slot, mono: float) -> float:
        """When (monotonic) the worker was last seen to touch its heartbeat file (its
        start, before the first): a change of its mtime, whichever way the wall clock
        moved, is a beat seen now."""
        try:
            mtime = os.stat(s.heartbeat_file).st_mtime
        except OSError:
            return s.beat_seen
        if mtime != s.beat_mtime:
            s.beat_mtime, s.beat_seen = mtime, mono
        return s.beat_seen

    def _launch(self, s: Slot) -> None:
        s.heartbeat_file = os.path.join(self.state_dir, f"{s.topology}-{s.index}.heartbeat")
        s.control_file = os.path.join(self.state_dir, f"{s.topology}-{s.index}.control")
        _write_file(s.control_file, s.control)
        with contextlib.suppress(OSError):
            os.unlink(s.heartbeat_file)
        s.started = s.beat_seen = time.monotonic()
        s.beat_mtime = None
        cmd = [
            sys.executable,
            "-m",
            "stormish.local.process",
            "--control",
            s.control,
            "--index",
            str(s.index),
            "--topology",
            s.topology,
            "--bind",
            f"tcp://{self.bind_host}:{s.port}",
            "--advertise",
            f"tcp://{self.host}:{s.port}",
            "--heartbeat",
            str(self.heartbeat),
            "--heartbeat-file",
            s.heartbeat_file,
            "--control-file",
            s.control_file,
            "--parent",
            str(os.getpid()),  # a worker does not outlive its supervisor (its ports would)
            "--log-level",
            self.log_level,
        ]
        if self.keys_dir:
            cmd += ["--keys", self.keys_dir]
        self._close_log(s)  # a restart: the previous incarnation's pump and file
        # the worker's data directory (stateful bolts' embedded state) outlives it
        env = {**os.environ, DATA_ENV: os.path.join(self.state_dir, "data")}
        if s.restarts:  # what it kept there is its own to restore (latched edges)
            env[RESTART_ENV] = "1"
        spec = {
            "control": s.control,
            "index": s.index,
            "topology": s.topology,
            "bind": f"tcp://{self.bind_host}:{s.port}",
            "advertise": f"tcp://{self.host}:{s.port}",
            "heartbeat": self.heartbeat,
            "heartbeat_file": s.heartbeat_file,
            "control_file": s.control_file,
            "log_level": self.log_level,
            "keys": self.keys_dir,  # a directory's path (the secret stays in its file)
            "env": {k: env[k] for k in (DATA_ENV, RESTART_ENV) if k in env},
        }
        if not self.log_dir:
            s.proc = self._start(cmd, env, spec, None)
            s.finished = False
            return
        private_dir(self.log_dir)
        s.log_path = self.log_path(s.topology, s.index)
        s.log = RotatingFile(s.log_path, self.log_max_bytes, self.log_backups)
        read, write = os.pipe()
        try:
            s.proc = self._start(cmd, env, spec, write)
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        output = open(read, "rb")  # noqa: SIM115 - the pump closes it
        details = f"port {s.port}, restart {s.restarts}, supervisor {self.id}"
        s.log.write(start_line(s.topology, s.index, s.proc.pid, details))
        s.pump = threading.Thread(
            target=_pump, args=(output, s.log), name=f"log-{s.topology}-{s.index}",
            daemon=True,
        )  # fmt: skip
        s.pump.start()
        s.finished = False

    def _start(
        self, cmd: list[str], env: dict[str, str], spec: dict[str, Any], output: int | None
    ) -> subprocess.Popen | Forked:
        """A worker's process: forked from the fork server with `spec`, or `cmd` spawned;
        its stdout and stderr on `output` (a pipe's write end), else on ours."""
        if self.forkserver is not None:
            if self.forkserver.closed:  # killed (kill -9, the OOM killer): a new one
                old = self.forkserver
                how = old.ended_how()
                new = ForkServer()  # a fresh interpreter: we have threads now (may raise)
                old.close()
                self.forkserver = new
                log.warning(
                    f"supervisor {self.id}: the workers' {how}; a new one forks them "
                    f"(pid {self.forkserver.pid})"
                )
            out = (output, output) if output is not None else (1, 2)
            return self.forkserver.fork(spec, *out)
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT if output is not None else None,
            env=env,
        )

    def log_path(self, topology: str, index: int) -> str:
        return os.path.join(self.log_dir or "", worker_log_name(topology, index))

    def _close_log(self, s: Slot) -> None:
        """Let the pump write what the dead process left in its pipe, then close."""
        if s.pump is not None:
            s.pump.join(5)
            s.pump = None
        if s.log is not None:
            s.log.close()
            s.log = None

    def read_logs(self, asks: list[LogAsk]) -> list[dict[str, Any]]:
        """Pieces of worker logs that nimbus relays to `stormish logs`."""
        out = []
        for ask in asks:
            rid, topology, index, offset, most = (
                ask.rid,
                ask.topology,
                ask.index,
                ask.offset,
                ask.most,
            )
            piece: dict[str, Any] = {"rid": rid, "topology": topology, "index": int(index)}
            if not self.log_dir:
                piece["error"] = (
                    f"supervisor {self.id} keeps no log files (start it with --log-dir)"
                )
            else:
                path = self.log_path(str(topology), int(index))
                try:
                    piece.update(read_log(path, offset, int(most)))
                except (OSError, ValueError, TypeError, IndexError) as exc:
                    # a bad ask (nimbus checks them) must never end the supervisor,
                    # and with it every worker it runs
                    piece["error"] = f"supervisor {self.id}: cannot read that log piece: {exc}"
            out.append(piece)
        return out

    def _terminate(self, s: Slot) -> None:
        if s.proc is not None and s.proc.poll() is None:
            s.proc.send_signal(signal.SIGTERM)
            try:
                s.proc.wait(10)
            except subprocess.TimeoutExpired:
                s.proc.kill()
                s.proc.wait(10)
        if s.proc is not None:
            shm.remove_for(s.proc.pid)
        self._close_log(s)


def _write_file(path: str, text: str) -> None:
    """Replaced whole (a reader never sees half an address)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _pump(pipe: Any, log: RotatingFile) -> None:
    """A worker's output into its log file, line by line, until the worker is gone."""
    with pipe:
        for line in pipe:
            try:
                log.write(line)
            except (OSError, ValueError):  # the file was closed: the slot was let go
                return
