"""FeederSpout: a spout a test feeds while the topology runs, with an ack/fail tracker
(Storm's FeederSpout with an AckFailMapTracker). Import it from `stormish.testing`.

The spout object a test builds its topology with is not the one that runs: each task
gets a cloudpickled copy, in this process or in a worker process. So the two meet over
a ZeroMQ channel that works for both. The test's object owns a ROUTER bound on `ipc://`
inside a private `tempfile.mkdtemp()` directory (mode 0700: another user cannot reach a
socket that carries pickles), served by one thread that owns it; each running task
connects a DEALER, asks for tuples when it may emit (the answer comes at once: the
tuples waiting, or "parked", and then what is fed later is handed to the standing pull
and taken without blocking in `next_tuple`), reports what it emitted, and sends its
acks and fails back. Fed tuples wait on the test's side until a task asks, so tuples
fed before the topology is up, or while a spout is deactivated, are not lost.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import threading
import uuid
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from ..component import Spout

PULL_MAX = 64  # tuples handed to a task per pull
ANSWER_TIMEOUT_MS = 2_000  # a task waits this long for the test's side to answer


class FeederSpout(Spout):
    """`feed(values, msg_id=None)` from the test; every fed tuple is emitted once, by one
    of the spout's tasks, reliably (a fed tuple without a msg id gets a fresh one, as in
    Storm) and never replayed. `is_acked(id)`, `is_failed(id)`, `acked`, `failed` and
    `emitted` read what the running tasks reported. Close it (`close()`, or use it as a
    context manager) when the test ends; a forgotten one is closed when collected."""

    def __init__(self, fields: Sequence[str] = ("value",)):
        if isinstance(fields, str):
            fields = [fields]
        self.outputs = self._fields = list(fields)
        self._channel: _Channel | None = _Channel()
        self._address = self._channel.address
        self._channel.finalizer = weakref.finalize(self, self._channel.close)

    # -- the test's side ----------------------------------------------------------------
    def feed(self, values: Sequence[Any], msg_id: Any = None) -> Any:
        """Queue one tuple for the running spout; returns its message id."""
        values = tuple(values)
        if len(values) != len(self._fields):
            raise ValueError(
                f"FeederSpout.feed: {len(values)} values {list(values)!r} for the fields "
                f"{self._fields}"
            )
        if msg_id is None:
            msg_id = uuid.uuid4().hex
        self._test_side("feed").send([(values, msg_id)])
        return msg_id

    def is_acked(self, msg_id: Any) -> bool:
        return msg_id in self._test_side("is_acked").seen("ack")

    def is_failed(self, msg_id: Any) -> bool:
        return msg_id in self._test_side("is_failed").seen("fail")

    @property
    def acked(self) -> list[Any]:
        """Message ids acked so far, in the order the acks arrived."""
        return self._test_side("acked").events("ack")

    @property
    def failed(self) -> list[Any]:
        """Message ids failed so far (timeouts included), in arrival order."""
        return self._test_side("failed").events("fail")

    @property
    def emitted(self) -> int:
        """Fed tuples the running tasks have emitted (as last reported)."""
        return self._test_side("emitted").emitted()

    def __enter__(self) -> FeederSpout:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _test_side(self, what: str) -> _Channel:
        if self._channel is None:
            raise RuntimeError(
                f"FeederSpout.{what}(): this is a running copy of the spout; ask the "
                "FeederSpout object the test built its topology with"
            )
        return self._channel

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_channel"] = None  # the running copy only connects to it
        for k in ("_zctx", "_sock"):
            state.pop(k, None)
        return state

    # -- the running copy (on the spout's thread) ----------------------------------------
    # A task pulls when it may emit, asking for no more than topology.max.spout.pending
    # allows (it counts its own trees in flight), and waits for the answer: the tuples
    # waiting, emitted at once, or "parked" (the pull stands, and what is fed later is
    # handed to it). Deactivated, it takes a standing pull back with what it brought. So
    # a next_tuple call never ends with a pull on its way, and what a task was handed
    # is emitted at its next call, which comes: advance_time relies on both.
    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        import zmq

        self._zctx = zmq.Context()
        self._sock = self._zctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.SNDHWM, 0)  # acks are never dropped nor block
        self._sock.connect(self._address)
        self._max_pending = conf.get("topology.max.spout.pending")
        self._emitted = 0
        self._in_flight = 0
        self._asked = False  # a pull stands
        self._active = True
        self._gone = False  # the test's side stopped answering (closed)

    def next_tuple(self) -> None:
        import zmq

        if not self._asked:
            self._pull()
            return
        try:
            kind, batch = pickle.loads(self._sock.recv(zmq.NOBLOCK))
        except zmq.Again:
            return
        self._asked = False
        self._emit_batch(batch)

    def _pull(self) -> None:
        room = PULL_MAX
        if self._max_pending is not None:
            room = min(room, self._max_pending - self._in_flight)
        if self._gone or not self._active or room <= 0:
            return
        self._send("pull", room)
        answer = self._answer()
        if answer is None:
            return
        kind, batch = answer
        if kind == "parked":
            self._asked = True
        else:
            self._emit_batch(batch)

    def _emit_batch(self, batch: list[tuple[tuple[Any, ...], Any]]) -> None:
        for values, msg_id in batch:
            self.emit(values, msg_id=msg_id)
        self._emitted += len(batch)
        self._in_flight += len(batch)
        self._send("emitted", self._emitted)

    def _answer(self) -> tuple[str, Any] | None:
        """The test's side answers at once; silence means it was closed."""
        if not self._sock.poll(ANSWER_TIMEOUT_MS):
            self._gone = True
            return None
        return pickle.loads(self._sock.recv())

    def _send(self, kind: str, arg: Any) -> None:
        self._sock.send(pickle.dumps((kind, arg)))

    def ack(self, msg_id: Any) -> None:
        self._in_flight -= 1
        self._send("ack", msg_id)

    def fail(self, msg_id: Any, failure: Any = None) -> None:
        self._in_flight -= 1
        self._send("fail", msg_id)

    def progress(self) -> tuple[int, None]:
        """Fed tuples this task emitted and saw acked or failed, of a total nobody knows
        (the test feeds on): the statistics' progress, a count on the status line."""
        return getattr(self, "_emitted", 0) - getattr(self, "_in_flight", 0), None

    def activate(self) -> None:
        self._active = True

    def deactivate(self) -> None:
        """Take back the standing pull, and give back what it brought."""
        self._active = False
        if not self._asked:
            return
        self._asked = False
        self._send("cancel", None)
        back: list[Any] = []
        while (answer := self._answer()) is not None and answer[0] != "cancelled":
            back.extend(answer[1])  # handed before the cancel arrived
        if back:
            self._send("return", back)

    def close(self) -> None:
        """On the test's object: stop the channel. On a running copy (Spout.close): close
        its socket."""
        sock = self.__dict__.pop("_sock", None)
        if sock is not None:
            sock.close(0)
            self.__dict__.pop("_zctx").term()
        if self._channel is not None:
            self._channel.finalizer.detach()
            self._channel.close()


class _Channel:
    """The test's end: a ROUTER served by one thread (which alone touches it) and a PAIR
    pair carrying what callers send to that thread. Callers read the tracker's record
    under a lock."""

    def __init__(self) -> None:
        import zmq

        self.dir = tempfile.mkdtemp(prefix="stormish-feeder-")  # mode 0700
        self.address = "ipc://" + os.path.join(self.dir, "feed")
        self.ctx = zmq.Context()
        self._wire = f"inproc://feeder-{id(self)}"
        self._lock = threading.Lock()
        self._events: dict[str, list[Any]] = {"ack": [], "fail": []}
        # per task (DEALER identity): reported emits, tuples handed, room of its pull
        self._emitted: dict[bytes, int] = {}
        self._handed: dict[bytes, int] = {}
        self._room: dict[bytes, int] = {}
        self._backlog: deque[tuple[tuple[Any, ...], Any]] = deque()  # fed, not handed
        self._waiting: deque[bytes] = deque()  # tasks with a pull outstanding
        self._fed = self._received = 0  # sent by feed(), and taken in by the thread
        self._closed = False
        self.finalizer: Any = None
        ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._serve, args=(ready,), name="feeder-spout", daemon=True
        )
        self._thread.start()
        ready.wait()
        if self._error is not None:
            self._shut()
            raise self._error
        self._caller = self.ctx.socket(zmq.PAIR)  # used under self._lock
        self._caller.setsockopt(zmq.LINGER, 0)
        self._caller.connect(self._wire)

    def send(self, items: list[tuple[tuple[Any, ...], Any]]) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("FeederSpout.feed() after close()")
            self._caller.send(pickle.dumps(("feed", items)))
            self._fed += len(items)

    def seen(self, kind: str) -> set[Any]:
        with self._lock:
            return set(self._events[kind])

    def events(self, kind: str) -> list[Any]:
        with self._lock:
            return list(self._events[kind])

    def emitted(self) -> int:
        with self._lock:
            return sum(self._emitted.values())

    def reported(self) -> int:
        """Acks and fails received: what tracked waits compare with the statistics."""
        with self._lock:
            return len(self._events["ack"]) + len(self._events["fail"])

    def _serve(self, ready: threading.Event) -> None:
        import zmq

        try:
            router = self.ctx.socket(zmq.ROUTER)
            router.setsockopt(zmq.LINGER, 0)
            router.bind(self.address)
            inbox = self.ctx.socket(zmq.PAIR)
            inbox.setsockopt(zmq.LINGER, 0)
            inbox.bind(self._wire)
        except BaseException as exc:  # noqa: BLE001 - raised again in the constructor
            self._error = exc
            ready.set()
            return
        ready.set()
        try:
            self._loop(router, inbox)
        finally:
            router.close(0)
            inbox.close(0)

    def _loop(self, router: Any, inbox: Any) -> None:
        import zmq

        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        poller.register(inbox, zmq.POLLIN)
        while True:
            for sock, _ in poller.poll():
                if sock is inbox:
                    kind, items = pickle.loads(inbox.recv())
                    if kind == "stop":
                        return
                    with self._lock:
                        self._backlog.extend(items)
                        self._received += len(items)
                else:
                    ident, payload = router.recv_multipart()
                    for reply in self._heard(ident, pickle.loads(payload)):
                        router.send_multipart(reply)
            for reply in self._hand_out():
                router.send_multipart(reply)

    def _heard(self, ident: bytes, msg: tuple[str, Any]) -> list[list[bytes]]:
        kind, arg = msg
        with self._lock:
            if kind == "pull":
                if not self._backlog:
                    self._room[ident] = arg
                    self._waiting.append(ident)
                    return [[ident, pickle.dumps(("parked", None))]]
                return [self._hand(ident, arg)]
            elif kind == "emitted":
                self._emitted[ident] = arg
            elif kind == "cancel":
                if ident in self._waiting:
                    self._waiting.remove(ident)
                return [[ident, pickle.dumps(("cancelled", None))]]
            elif kind == "return":
                self._handed[ident] -= len(arg)
                self._backlog.extendleft(reversed(arg))
            elif kind in self._events:
                self._events[kind].append(arg)
        return []

    def _hand_out(self) -> list[list[bytes]]:
        """Fed tuples to the tasks whose pulls stand."""
        with self._lock:
            out = []
            while self._backlog and self._waiting:
                ident = self._waiting.popleft()
                out.append(self._hand(ident, self._room[ident]))
            return out

    def _hand(self, ident: bytes, room: int) -> list[bytes]:
        backlog = self._backlog
        batch = [backlog.popleft() for _ in range(min(len(backlog), room))]
        self._handed[ident] = self._handed.get(ident, 0) + len(batch)
        return [ident, pickle.dumps(("items", batch))]

    def quiet(self) -> bool:
        """Nothing on its way: every tuple handed to a task was emitted and reported,
        and no fed tuple waits while a task asks (advance_time's part for feeders)."""
        with self._lock:
            if self._fed != self._received or (self._backlog and self._waiting):
                return False
            return all(self._emitted.get(i, 0) >= n for i, n in self._handed.items())

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._caller.send(pickle.dumps(("stop", None)))
        self._thread.join(10)
        self._caller.close(0)
        self._shut()

    def _shut(self) -> None:
        self.ctx.term()
        shutil.rmtree(self.dir, ignore_errors=True)
