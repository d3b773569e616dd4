"""A worker process: `python -m stormish.local.process --control ADDR --index N`
(also `stormish worker`).

It knows nothing but where its controller listens and which worker it is; the
controller (the local cluster now, a supervisor later) sends it the topology, tells it
where its peers listen and when to start, and asks it for statistics and to stop. The
process's main thread serves the control socket; executors, the link's receive and
transfer threads and the tick timer run beside it. It exits when told to stop, when its
controller process is gone, or when the control socket stays silent past
`--orphan-seconds` (a controller that died without closing it).
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

import cloudpickle
import zmq

from .. import pickling
from ..runtime import gctune, nudge
from ..transport import control as ct
from ..transport.security import LOOPBACK, Curve, Security, security_for
from .forkserver import mark

if TYPE_CHECKING:
    from ..transport.link import WorkerLink

POLL_MS = 100
# The GIL hand-off interval. A worker's link threads (receive, transfer) must get the GIL
# promptly while executors run flat out: with CPython's 5 ms default a backpressure status
# waited up to two hand-offs on each side, and the overflowQ grew by what the spout emitted
# meanwhile (measured halt-lag overflow: 24k-44k tuples at 5 ms, 16k-26k at 0.5 ms).
SWITCH_INTERVAL = 0.0005

log = logging.getLogger("stormish.worker")
# exit status of a worker whose --bind port another program holds (98: Linux's
# EADDRINUSE): its supervisor reports the slot failed and nimbus places it elsewhere,
# where an error answer to `assign` would have failed the topology
PORT_TAKEN_EXIT = 98


class PortTaken(Exception):
    """The worker's --bind address is taken: it cannot serve this slot."""


class WorkerServer:
    """Carries out control requests for one worker process."""

    def __init__(
        self,
        index: int,
        bind: str | None,
        advertise: str | None = None,
        security: Security = LOOPBACK,
        nudge_fd: int | None = None,
    ):
        self.index = index
        self.bind = bind
        self.advertise = advertise
        self.security = security
        self.nudge_fd = nudge_fd  # the local run's pipe: every spout here is done
        self.worker: Any = None
        self.link: WorkerLink | None = None
        self.linked = False
        self.started = False
        self.done = False

    def handle(self, verb: str, payload: Any) -> Any:
        return getattr(self, f"do_{verb}")(payload)

    def do_ping(self, _payload: object) -> int:
        return os.getpid()

    def do_assign(self, payload: Any) -> str:
        from ..runtime.acker import AckerBolt
        from ..runtime.plan import build_plan
        from ..runtime.worker import Worker
        from ..transport.link import WorkerLink, run_topology_id

        if self.worker is not None:
            raise RuntimeError(f"worker {self.index} already has a topology")
        topology, conf, assignment, *run = cloudpickle.loads(payload)  # run: its id
        gctune.hold(conf["topology.worker.gc.threshold"])  # this process: kept until exit
        plan = build_plan(topology, conf, AckerBolt())
        if dict(plan.assignment) != dict(assignment):
            raise RuntimeError(
                f"worker {self.index} planned a different task assignment than its "
                "controller (a topology whose plan is not deterministic?)"
            )
        try:
            link = WorkerLink(
                self.index,
                run_topology_id(plan.name, run[0] if run else None),
                plan.assignment,
                plan.conf,
                host=plan.conf["stormish.local.host"],  # used when no --bind was given
                bind=self.bind,
                security=self.security,
                advertise=self.advertise,
            )
        except zmq.ZMQError as exc:
            if self.bind and exc.errno == zmq.EADDRINUSE:
                raise PortTaken(f"{self.bind}: {exc.strerror}") from exc
            raise
        try:
            worker = Worker(plan, self.index, remote_target=link.remote_target)
        except BaseException:
            link.stop()
            raise
        link.attach(worker.queues)
        link.latched = worker.latched_for  # a (re)connected worker gets the latched tuples
        if worker.credits:  # fail edges between workers: grants and rejections travel
            link.credits = worker.credits
            worker.credits.reports.wake = link.transfer.wake
        link.on_epoch = lambda n: worker.advance_epoch(to=n)  # a peer's spout advanced it
        link.on_cycle = worker.remote_cycle  # a peer's cycle executor congested: spouts pause
        link.on_unsendable = worker.unsendable  # a value that does not pickle fails its task
        link.on_fatal = worker.engine_failed  # a link thread that raised fails the worker
        worker.link = link
        if self.nudge_fd is not None:  # this process's copy: closed only at its exit
            worker.on_spouts_done = functools.partial(nudge.tell, self.nudge_fd)
        self.worker, self.link = worker, link
        return link.address

    def do_peers(self, book: dict[int, str]) -> None:
        link = self._need_link()
        link.connect(book)
        if not self.linked:
            link.start()
            self.linked = True

    def do_start(self, _payload: object) -> None:
        self._need()
        self.worker.start()
        self.started = True

    @property
    def state(self) -> str:
        """What a hello says: new (no topology yet), assigned (a topology, not started)
        or running (executors started)."""
        if self.worker is None:
            return "new"
        return "running" if self.started else "assigned"

    def do_quiescence(self, _payload: object) -> dict[str, Any]:
        self._need()
        q = self.worker.quiescence()
        q["failure"] = self.worker.failure()
        return q

    def do_stats(self, _payload: object) -> tuple[list, dict, str | None]:
        self._need()
        return self.worker.task_stats(), self.worker.link_stats(), self.worker.failure()

    def do_end_input(self, _payload: object) -> int:
        self._need()
        return self.worker.end_of_input()

    def do_active(self, active: bool) -> None:
        self._need()
        self.worker.set_active(bool(active))

    def do_stop(self, timeout: float) -> dict[str, Any]:
        self.done = True
        if self.worker is None:
            return {"stuck": [], "tasks": [], "links": {}, "results": {}, "errors": []}
        stuck = self.worker.stop(float(timeout)) if self.linked else self._stop_unstarted()
        results = {}
        for comp, parts in self.worker.results().items():
            results[comp] = [(task, _portable(value)) for task, value in parts]
        return {
            "stuck": stuck,
            "tasks": self.worker.task_stats(),
            "links": self.worker.link_stats(),
            "results": results,
            "errors": self.worker.errors(),
            "failure": self.worker.failure(),
        }

    def _stop_unstarted(self) -> list[str]:
        self._need_link().stop()
        return []

    def _need(self) -> None:
        if self.worker is None:
            raise RuntimeError(f"worker {self.index} has no topology yet (assign first)")

    def _need_link(self) -> WorkerLink:
        self._need()
        assert self.link is not None  # assigned with the worker
        return self.link


def _portable(value: Any) -> Any:
    """A task's result() crosses the process boundary; one that cannot be pickled is
    reported by its repr rather than losing the others."""
    try:
        pickling.dumps(value)
        return value
    except Exception as exc:
        return f"<unpicklable result {type(value).__name__}: {exc}>"


def serve(
    control: str,
    index: int,
    bind: str | None,
    parent: int | None,
    orphan: float,
    topology: str | None = None,
    advertise: str | None = None,
    security: Security = LOOPBACK,
    heartbeat: float = 0.0,
    heartbeat_file: str | None = None,
    preassign: bytes | None = None,
    control_file: str | None = None,
    nudge_fd: int | None = None,
) -> int:
    """Serve one worker. `heartbeat` > 0 (under a supervisor): say hello again every so
    many seconds, so that a nimbus that restarted learns where its workers are and a
    dead one is noticed; such a worker keeps running while its nimbus is down. With
    `heartbeat_file` it also touches that file each time (Storm's local heartbeat): its
    supervisor restarts a worker whose file goes stale (a hung process). With
    `control_file`, the controller's address is read from that file at each heartbeat:
    when another nimbus took over, the supervisor writes its address there and the
    worker says hello to it, running on (nothing restarts).
    `preassign` (a forked worker's fork request carried it): the `assign` payload,
    carried out before the first hello, which then says `assigned` with the link's
    address; on an error the controller's own `assign` asks again and is answered
    with it."""
    sys.setswitchinterval(SWITCH_INTERVAL)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, f"w{index}-{os.getpid()}".encode())
    sock.setsockopt(zmq.LINGER, 2000)
    sock.setsockopt(zmq.MAXMSGSIZE, ct.MAX_FRAME)  # no frame is larger (control.py)
    security.client(sock)
    sock.connect(control)
    server = WorkerServer(index, bind, advertise, security, nudge_fd)
    if preassign is not None:
        try:
            server.do_assign(preassign)
        except Exception:  # noqa: S110 - the controller's assign is answered with it
            pass

    def hello() -> None:
        info = {"index": index, "pid": os.getpid(), "topology": topology}
        info["state"] = server.state
        info["address"] = server.link.address if server.link is not None else None
        sock.send_multipart(ct.request("hello", 0, info))

    current = [control]

    def follow() -> None:
        try:
            with open(control_file or "") as fh:
                address = fh.read().strip()
        except OSError:
            return
        if address and address != current[0]:
            log.info("worker %d: controller moved to %s", index, address)
            sock.disconnect(current[0])
            sock.connect(address)
            current[0] = address

    def beat() -> None:
        if control_file:
            follow()
        hello()
        if heartbeat_file:
            with open(heartbeat_file, "a"):
                os.utime(heartbeat_file)

    beat()
    beating = _Beats(
        ctx,
        security,
        current,
        {"index": index, "pid": os.getpid(), "topology": topology},
        heartbeat,
    )
    mark(f"worker {index} said hello ({server.state})")
    last_heard = last_hello = next_parent_check = time.monotonic()
    try:
        while not server.done:
            if heartbeat and time.monotonic() - last_hello >= heartbeat:
                beat()
                last_hello = time.monotonic()
            now = time.monotonic()
            if parent is not None and now >= next_parent_check:
                # looked at on time, not only when the control socket is quiet: a nimbus
                # asking every few ms would otherwise keep an orphan alive on its port
                next_parent_check = now + POLL_MS / 1000
                if os.getppid() != parent:
                    break  # the controller is gone: nobody will stop us
            if not sock.poll(POLL_MS):
                if orphan and time.monotonic() - last_heard > orphan:
                    break
                continue
            last_heard = time.monotonic()
            try:
                # the controller is trusted: keyed, its server key was checked; unkeyed,
                # it is the address this worker was started to obey
                verb, req_id, payload = ct.decode_request(sock.recv_multipart(), code_ok=True)
            except ct.ControlError as exc:
                log.warning("worker %d: dropped a control message: %s", index, exc)
                continue
            mark(f"worker {index} {verb}")
            try:
                out = ct.answer(verb, req_id, server.handle(verb, payload))
            except PortTaken as exc:  # no answer: the exit status says it (PORT_TAKEN_EXIT)
                log.error("worker %d: cannot listen on %s; exiting for its slot", index, exc)
                return PORT_TAKEN_EXIT
            except Exception as exc:
                detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                traceback.print_exc()
                out = ct.reply(req_id, detail, ok=False)
            sock.send_multipart(out)
    finally:
        if not server.done and server.worker is not None:
            server.do_stop(5.0)
        beating.stop()
        sock.close()
        security.release(ctx)
        ctx.term()
        mark(f"worker {index} leaves")
    return 0


class _Beats:
    """A thread that says "still here" every `every` seconds on a socket of its own,
    while the worker's loop may be busy carrying out one request (an `assign` that
    unpickles and builds a topology takes seconds on a loaded host; nimbus takes a
    worker silent for its worker timeout as gone, and gave up on such a worker during
    its assign). Only under a supervisor (`every` > 0): a local run watches its
    workers' processes. It follows the controller's address as the loop does
    (`current`, read at each beat)."""

    def __init__(
        self, ctx: zmq.Context, security: Security, current: list[str], info: dict, every: float
    ):
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if every > 0:
            frames = ct.request("beat", 0, info)
            self._thread = threading.Thread(
                target=self._run, args=(ctx, security, current, frames, every),
                name="stormish-beat", daemon=True,
            )  # fmt: skip
            self._thread.start()

    def _run(
        self, ctx: zmq.Context, security: Security, current: list[str], frames: list, every: float
    ) -> None:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 4)  # a beat that cannot go is of no use later
        sock.setsockopt(zmq.MAXMSGSIZE, ct.MAX_FRAME)
        try:
            security.client(sock)
            address = current[0]
            sock.connect(address)
            while not self._stop.wait(every):
                if current[0] != address:
                    sock.disconnect(address)
                    address = current[0]
                    sock.connect(address)
                try:
                    sock.send_multipart(frames, zmq.NOBLOCK)
                except zmq.Again:
                    pass
        finally:
            sock.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)


def setup_logging(topology: str | None, index: int, level: str) -> None:
    """Every line of this worker says when, how bad, which worker and (inside a task's
    code) which component and task; a bolt's print is tagged the same way."""
    from .. import logs

    raw = sys.stderr  # log records carry their tag in the format: not tagged twice
    logs.configure(f"worker {topology}/{index}" if topology else f"worker {index}", level, raw)
    sys.stdout = logs.TaggedOutput(sys.stdout)
    sys.stderr = logs.TaggedOutput(sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stormish-worker", description=__doc__)
    p.add_argument("--control", required=True, help="the controller's address (tcp://...)")
    p.add_argument("--index", type=int, required=True, help="this worker's index")
    p.add_argument("--bind", default=None, help="the link's receive address (default: any)")
    p.add_argument("--parent", type=int, default=None, help="exit when this pid is gone")
    p.add_argument("--orphan-seconds", type=float, default=0.0)
    p.add_argument("--topology", default=None, help="the topology this worker is for")
    p.add_argument("--advertise", default=None, help="the link address peers connect to")
    p.add_argument(
        "--keys",
        default=None,
        help="CURVE keys directory (or STORMISH_KEYS); '-': a key pair line on stdin",
    )
    p.add_argument("--heartbeat", type=float, default=0.0, help="re-hello every N seconds")
    p.add_argument("--heartbeat-file", default=None, help="touched at each heartbeat")
    p.add_argument("--control-file", default=None, help="the controller's address, re-read")
    p.add_argument(
        "--nudge-fd",
        type=int,
        default=None,
        help="a local run's pipe, written when this worker's spouts are done",
    )
    p.add_argument(
        "--log-level",
        default=os.environ.get("STORMISH_LOG_LEVEL", "INFO"),
        help="DEBUG, INFO, WARNING or ERROR (default: STORMISH_LOG_LEVEL, else INFO)",
    )
    a = p.parse_args(argv)
    setup_logging(a.topology, a.index, a.log_level)
    if a.nudge_fd is not None:  # passed to us (pass_fds), not to what we start
        os.set_inheritable(a.nudge_fd, False)
    return serve(
        a.control,
        a.index,
        a.bind,
        a.parent,
        a.orphan_seconds,
        topology=a.topology,
        advertise=a.advertise,
        security=security_for(a.keys),
        heartbeat=a.heartbeat,
        heartbeat_file=a.heartbeat_file,
        control_file=a.control_file,
        nudge_fd=a.nudge_fd,
    )


def run_forked(spec: dict[str, Any]) -> int:
    """A worker forked by a fork server (`forkserver.py`): what `main` reads from its
    command line comes in `spec`, its key pair (`keys`, `Curve.export`'s line) too, after
    the fork and over the server's private socket (never argv or the environment)."""
    import io

    setup_logging(spec.get("topology"), spec["index"], spec.get("log_level") or "INFO")
    keys = spec.get("keys")
    if isinstance(keys, bytes):
        security: Security = Curve.read(io.BytesIO(keys))
    else:
        security = security_for(keys)
    return serve(
        spec["control"],
        spec["index"],
        spec.get("bind"),
        os.getppid(),  # the fork server: it ends with the run (or when the run died)
        spec.get("orphan", 0.0),
        topology=spec.get("topology"),
        advertise=spec.get("advertise"),
        security=security,
        heartbeat=spec.get("heartbeat", 0.0),
        heartbeat_file=spec.get("heartbeat_file"),
        preassign=spec.get("assign"),
        control_file=spec.get("control_file"),
        nudge_fd=spec.get("nudge_fd"),
    )


if __name__ == "__main__":
    sys.exit(main())
