"""The control channel's server end: the ROUTER that workers say hello to and answer.

The local cluster's `WorkerGroup` and nimbus both talk to their workers through it, so
it lives below both (the layering test: tests/unit/test_layers.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from ..errors import Interrupted, WorkerError, WorkerTimeout
from . import control as ct
from .security import LOOPBACK, Security

log = logging.getLogger("stormish.control")


# the read-only requests a stop may cut short (`interrupted`): the looks at a run
LOOKS = frozenset({"quiescence", "stats"})

# A worker that answers and then exits (stop) can be seen dead before its answer is read:
# how long its answer is still looked for once it is seen dead (s).
DEAD_LOOK = 0.2
# what a fenced worker is given to stop in (s): it is to stop, not to drain
FENCED_STOP = 1.0


@dataclasses.dataclass(frozen=True)
class Hello:
    """A worker's latest hello: who it is and when it was last heard."""

    ident: bytes
    pid: int
    info: dict
    heard: float


class ControlServer:
    """The ROUTER end of the control channel; one request at a time (a lock), replies
    matched by id, late replies dropped. Workers say hello on connecting (and, under a
    supervisor, again every few seconds as a heartbeat): the latest hello per
    (topology, index) is kept with its identity, pid, state and time."""

    def __init__(self, bind: str = "tcp://127.0.0.1", security: Security = LOOPBACK) -> None:
        self.ctx = zmq.Context()
        self.security = security
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.ROUTER_HANDOVER, 1)
        self.sock.setsockopt(zmq.MAXMSGSIZE, ct.MAX_FRAME)  # read before the handshake: control.py
        security.check_bind(bind)
        security.server(self.sock)
        if bind.count(":") >= 2:  # tcp://host:port
            self.sock.bind(bind)
            self.address = bind
        else:
            port = self.sock.bind_to_random_port(bind)
            self.address = f"{bind}:{port}"
        self.lock = threading.RLock()
        # set (from a signal handler: a plain attribute, no lock) to cut a look short:
        # a stop must not wait a look's timeout for a worker that does not answer
        # (Ctrl-C took 85 s). Only requests in LOOKS are cut; a stop never is.
        self.interrupted = False
        self.closed = False
        self._ids = itertools.count(1)
        self.hellos: dict[tuple[str | None, int], Hello] = {}
        # the fence (nimbus's): None, or why a hello comes from an incarnation that is not
        # its slot's current one (a stale worker: its supervisor stalled past the task
        # timeout and its slot moved). Such a hello is not kept (it must not stand for
        # the current incarnation) and its worker is told to stop at each of them.
        self.admit: Callable[[tuple[str | None, int], Hello], str | None] | None = None
        self.fenced: set[tuple[str | None, int, int]] = set()  # said once each
        # the stop requests of fences (request id -> (topology, index, pid)), and the
        # incarnations that answered theirs: stopped (nimbus places a replacement then)
        self._fence_ids: dict[int, tuple[str | None, int, int | None]] = {}
        self.fence_answered: set[tuple[str | None, int, int | None]] = set()
        # a worker's answer may carry code (a task's results) only on a keyed socket
        self.code_ok = getattr(security, "public", None) is not None

    def _pump(self, timeout_ms: int) -> list[tuple[bytes, list[bytes]]]:
        out = []
        if self.sock.poll(timeout_ms):
            while True:
                try:
                    frames = self.sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                ident, rest = frames[0], frames[1:]
                if rest and rest[0] == b"beat":
                    self._beat(rest)
                    continue
                if rest and rest[0] == b"hello":
                    try:
                        _, _, info = ct.decode_request(rest)
                        hello = Hello(ident, int(info["pid"]), info, time.monotonic())
                        key = (info.get("topology"), int(info["index"]))
                        if self.admit is None or self._admitted(key, hello):
                            self.hellos[key] = hello
                    except (ct.ControlError, KeyError, TypeError, ValueError) as exc:
                        log.info("control: dropped a hello: %s", exc)
                    continue
                if self._fence_ids:
                    self._answered_fence(rest)
                out.append((ident, rest))
        return out

    def _answered_fence(self, frames: list[bytes]) -> None:
        try:
            _, rid, _ = ct.decode_reply(frames, self.code_ok)
        except ct.ControlError:
            return
        who = self._fence_ids.pop(rid, None)
        if who is not None:
            self.fence_answered.add(who)

    def _admitted(self, key: tuple[str | None, int], hello: Hello) -> bool:
        """The fence: a stale incarnation is told to stop (no wait for its answer: a
        late reply is dropped as any is) at once, at its first hello after it woke."""
        assert self.admit is not None
        why = self.admit(key, hello)
        if why is None:
            return True
        self.fence(key, hello.ident, hello.pid)
        if (*key, hello.pid) not in self.fenced:
            self.fenced.add((*key, hello.pid))
            log.warning(
                "control: worker %s/%d pid %d is fenced (%s): told to stop",
                key[0], key[1], hello.pid, why,
            )  # fmt: skip
        return False

    def fence(self, key: tuple[str | None, int], ident: bytes, pid: int | None) -> None:
        """Tell a worker incarnation that is not its slot's any longer to stop, without
        waiting for its answer (a late reply is dropped as any is); its hello stands
        for the slot no more. Nimbus does it as it moves a slot away (`_forget_supervisor`)
        and at each hello of a stale incarnation (a worker told while it was stalled)."""
        with self.lock:
            if self.closed or not ident:
                return
            got = self.hellos.get(key)
            if got is not None and got.pid == pid:  # known till now: gone from now on
                del self.hellos[key]
            req_id = next(self._ids)
            self._fence_ids[req_id] = (*key, pid)
            while len(self._fence_ids) > 1024:  # never answered (gone): the oldest go
                del self._fence_ids[next(iter(self._fence_ids))]
            self.sock.send_multipart([ident, *ct.request("stop", req_id, FENCED_STOP)])

    def _beat(self, frames: list[bytes]) -> None:
        """A worker's beat (sent by a thread of its own, so it goes on while the worker
        carries out a long request such as `assign`): the process named by its last
        hello is still there. It refreshes that hello only: its identity and address
        stay what the hello said (replies go to the worker's control socket)."""
        try:
            _, _, info = ct.decode_request(frames)
            key = (info.get("topology"), int(info["index"]))
            pid = int(info["pid"])
        except (ct.ControlError, KeyError, TypeError, ValueError) as exc:
            log.info("control: dropped a beat: %s", exc)
            return
        got = self.hellos.get(key)
        if got is not None and got.pid == pid:
            self.hellos[key] = dataclasses.replace(got, heard=time.monotonic())

    def pump(self, timeout_ms: int = 0) -> None:
        """Read hellos (and drop stray replies) without a request under way."""
        with self.lock:
            if not self.closed:
                self._pump(timeout_ms)

    def wait_hello(
        self, topology: str | None, index: int, pid: int | None, alive: Any, timeout: float
    ) -> bytes:
        """The identity of worker `index` once it said hello (from process `pid`, when
        given: a restarted worker's first hello, not its predecessor's)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            self._open(f"worker {index}", "for its hello")
            while True:
                got = self.hellos.get((topology, index))
                if got is not None and (pid is None or got.pid == pid):
                    return got.ident
                if not alive():
                    raise WorkerError(f"worker {index} died before it said hello")
                if time.monotonic() > deadline:
                    raise WorkerError(f"worker {index} did not say hello within {timeout}s")
                self._pump(50)

    def request(
        self, ident: bytes, verb: str, payload: Any, alive: Any, timeout: float, who: str
    ) -> Any:
        with self.lock:
            self._open(who, verb)
            req_id = next(self._ids)
            self.sock.send_multipart([ident, *ct.request(verb, req_id, payload)])
            deadline = time.monotonic() + timeout
            dead_since: float | None = None  # when it was first seen dead
            while True:
                for src, frames in self._pump(20):
                    if src != ident:
                        continue
                    try:
                        ok, rid, value = ct.decode_reply(frames, self.code_ok)
                    except ct.ControlError:
                        continue
                    if rid != req_id:
                        continue
                    if not ok:
                        raise WorkerError(f"{who}: {verb} failed: {value}")
                    return value
                if not alive():
                    now = time.monotonic()
                    dead_since = now if dead_since is None else dead_since
                    if now - dead_since > DEAD_LOOK:  # its answer was not on the way
                        raise WorkerError(f"{who} died during {verb}")
                    continue
                if self.interrupted and verb in LOOKS:
                    raise Interrupted(f"{who}: {verb} cut short, the run is stopping")
                if time.monotonic() > deadline:
                    raise WorkerTimeout(f"{who} did not answer {verb} within {timeout}s", (ident,))

    def request_all(
        self, asks: list[tuple[bytes, str, Any, Any, str]], timeout: float
    ) -> list[Any]:
        """Several requests, each to its own worker, under way at once: `asks` holds
        (ident, verb, payload, alive, who); the replies come back in that order. Workers
        carry out start and stop side by side instead of one after the other."""
        with self.lock:
            if asks:
                self._open(asks[0][4], asks[0][1])
            want: dict[tuple[bytes, int], int] = {}
            for i, (ident, verb, payload, _alive, _who) in enumerate(asks):
                req_id = next(self._ids)
                want[(ident, req_id)] = i
                self.sock.send_multipart([ident, *ct.request(verb, req_id, payload)])
            out: list[Any] = [None] * len(asks)
            deadline = time.monotonic() + timeout
            dead: dict[int, float] = {}  # when each was first seen dead
            while want:
                for src, frames in self._pump(20):
                    try:
                        ok, rid, value = ct.decode_reply(frames, self.code_ok)
                    except ct.ControlError:
                        continue
                    i = want.pop((src, rid), -1)
                    if i < 0:
                        continue
                    if not ok:
                        raise WorkerError(f"{asks[i][4]}: {asks[i][1]} failed: {value}")
                    out[i] = value
                for i in list(want.values()):
                    _ident, verb, _payload, alive, who = asks[i]
                    if not alive():
                        now = time.monotonic()
                        if now - dead.setdefault(i, now) > DEAD_LOOK:
                            raise WorkerError(f"{who} died during {verb}")
                if want and time.monotonic() > deadline:
                    silent = sorted(want.values())
                    _ident, verb, _payload, _alive, who = asks[silent[0]]
                    others = f" (and {len(silent) - 1} more)" if len(silent) > 1 else ""
                    raise WorkerTimeout(
                        f"{who}{others} did not answer {verb} within {timeout}s",
                        tuple(asks[i][0] for i in silent),
                        out,
                    )
            return out

    def close(self) -> None:
        """After a request under way on another thread (never under its feet: the socket
        is not thread-safe); a request after this says the channel is closed."""
        with self.lock:
            self.closed = True
            self.sock.close(0)
        self.security.release(self.ctx)
        self.ctx.term()

    def _open(self, who: str, verb: str) -> None:
        if self.closed:
            raise WorkerError(f"{who}: cannot ask {verb}: the run's control channel is closed")
