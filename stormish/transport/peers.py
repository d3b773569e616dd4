"""The sending side of a worker link: one outbox per peer worker, so that a peer which
cannot take more (slow, hung, gone) never holds up the other peers, a reconnect, or a
backpressure status.

The transfer thread hands messages to ZeroMQ without blocking; what a peer cannot take
now waits in that peer's outbox, control messages (HELLO, backpressure status) before
tuples. Tuples wait as the batches the transfer queue held and are encoded when the
socket can take them, into messages of about `message_tuples` tuples, so that a peer
that is behind gets fewer, fuller messages (not one per drain). A peer's connection is
`connecting` (never up yet), `up`, or `down` (it was up and was lost: the process died,
or its host went away and closed the port); the socket's monitor events tell which. The
rules (backpressure covers a worker that is slow, as in Storm; a worker that is gone is
waited for, bounded, where Storm's Netty client drops what it cannot deliver):

- up or connecting: tuples wait in the outbox (while connecting, tuples wait for the
  connection; HELLO goes first). An outbox holding `hold_at` batches or more is *held*:
  the peer's tasks are under backpressure on this worker (`RemoteTarget` refuses, the
  executor parks its emits, never blocks) until it is down to half;
- down: the connection was lost; the worker is taken as restarting (its supervisor
  restarts a killed worker on the same address at once; a worker that moves gets a new
  address, below). What waits for it and what comes is *held* for it, in order, and
  sent when the connection is up again: at most `down_tuples` tuples, for at most
  `down_secs` seconds (the message timeout: past it the trees of what is held have
  timed out and been replayed). Past either bound the rest is dropped, counted
  (`peer_lost`), and so is what comes until the connection is back, so those trees
  fail and replay through acking. Dropping from the start lost the first checkpoint a
  restarted worker was sent, so a stateful topology's recovery waited a whole message
  timeout.
  Senders are not parked while it is down (nobody is there to push back, and parking
  would stop their traffic to healthy peers too), but load-aware shuffles steer away
  (the peer's tasks report load 1.0). Control messages wait, at most `CONTROL_BACKLOG`
  (a status supersedes the ones before it);
- back up after down (ZeroMQ reconnected the socket: the peer restarted, or the
  network blipped): our HELLO again, ahead of what was held. The receiver counts tuples
  only on a connection a HELLO bound (link.py): a reconnect is a new connection, and
  without it what was held for the peer (up to `down_tuples`) waited at the receiver
  for a HELLO it had to ask for, within its bound. Only what ZeroMQ had taken before
  the connection broke (a few messages) comes before it;
- a new address for a worker (its tasks moved, `Peers.open`): the old socket is closed
  with linger 0 and every tuple still in its outbox is dropped, counted (`peer_moved`);
  a fresh outbox starts connecting with our HELLO first.

What ZeroMQ had already taken when a connection broke (at most `HWM_MESSAGES` messages
and the kernel buffers) reaches the peer if it comes back on the same address and is
lost otherwise, uncounted: acking replays it.

`PeerQueue` is the per-peer state without sockets (tested as scenarios); `Peers` is the
shell the transfer thread drives: it owns the PUSH sockets and their monitors.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from typing import Any

import zmq

from .frames import (
    WireBatch,  # (dest_task, src_task, stream, values, metas), as the transfer holds it
)
from .security import Security

CONNECTING, UP, DOWN = "connecting", "up", "down"
CONTROL_BACKLOG = 64
DOWN_TUPLES = 100_000  # what is held for a peer whose connection is down, at most
DOWN_BYTES = 256 * 1024 * 1024  # and the large buffers among them (Storm holds nothing:
# its netty client drops while a connection is down, "the risk of OOM" it names)
# Reading a monitor costs ~10 us (a getsockopt or a failed recv), and the transfer thread
# loops thousands of times a second under load, with the GIL, beside the executors: the
# monitors are read when a wait saw an event, or at most this often otherwise (s).
EVENTS_EVERY = 0.02
_EVENTS = zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED


class PeerQueue:
    """What waits for one peer worker, and the state of its connection.

    `data` holds the tuple batches not yet handed to ZeroMQ, in order; `ready` is the
    message encoded from the first of them that the socket could not take yet (frames,
    the batches it holds, their tuples), sent before anything else. `n_batches` counts
    both (tuples are counted only when sent or dropped: no per-batch work on the way,
    except while the connection is down: `down_held` counts the tuples held for it).
    Methods that drop return the batches dropped. Not thread-safe: the transfer thread
    owns it (other threads may read `n_batches`).
    """

    __slots__ = (
        "worker",
        "hold_at",
        "down_tuples",
        "down_secs",
        "state",
        "control",
        "data",
        "ready",
        "n_batches",
        "held",
        "down_since",
        "gone",
        "down_held",
        "down_bytes",
        "down_held_bytes",
        "held_while_down",
        "starved",
        "releases",
    )

    def __init__(
        self,
        worker: int,
        hold_at: int,
        down_tuples: int = DOWN_TUPLES,
        down_secs: float = 30.0,
        down_bytes: int = DOWN_BYTES,
    ):
        if hold_at < 1:
            raise ValueError(f"hold_at must be >= 1, got {hold_at}")
        if down_tuples < 0:
            raise ValueError(f"down_tuples must be >= 0, got {down_tuples}")
        self.worker = worker
        self.hold_at = hold_at
        self.down_tuples = down_tuples
        self.down_secs = down_secs
        self.down_bytes = down_bytes
        self.down_held_bytes = 0  # the large buffers' bytes among them (row_bytes)
        self.state = CONNECTING
        self.control: deque[list] = deque()
        self.data: deque[WireBatch] = deque()
        self.ready: tuple[list, list[WireBatch], int] | None = None
        self.n_batches = 0
        self.held = False
        self.down_since = 0.0
        self.gone = False  # down past `down_secs`: what comes is dropped until it is back
        self.down_held = 0  # tuples held now while down
        self.held_while_down = 0  # tuples ever held for this peer while it was down
        # no shared-memory segment for the next message: the peer is held until the
        # link finds one free (`Peers.unstarve`)
        self.starved = False
        # SHM_RELEASE messages for the peer: sent before anything else, never dropped
        # (a lost release would take a segment from the peer's pool for good)
        self.releases: deque[list] = deque()

    def put_control(self, frames: list) -> bool:
        """Queue a control message; False when the backlog was full (the oldest status
        made room: it is superseded by the newer ones)."""
        full = len(self.control) >= CONTROL_BACKLOG
        if full:
            self.control.popleft()
        self.control.append(frames)
        return not full

    def put(self, batches: list[WireBatch]) -> list[WireBatch]:
        """Queue tuple batches; returns those dropped (the peer down too long, or what
        it holds at its bound)."""
        if self.state == DOWN:
            return self._hold(batches)
        self.data.extend(batches)
        self.n_batches += len(batches)
        self._update()
        return []

    def _hold(self, batches: list[WireBatch]) -> list[WireBatch]:
        if self.gone:
            return batches
        room = self.down_tuples - self.down_held
        for i, b in enumerate(batches):
            n = len(b[3])
            size = rows_bytes(b[3])
            if n > room or self.down_held_bytes + size > self.down_bytes:
                self._keep(batches[:i])
                return batches[i:]
            room -= n
            self.down_held += n
            self.down_held_bytes += size
            self.held_while_down += n
        self._keep(batches)
        return []

    def _keep(self, batches: list[WireBatch]) -> None:
        self.data.extend(batches)
        self.n_batches += len(batches)

    def sendable(self) -> bool:
        """Tuples may go to ZeroMQ now (control messages always may)."""
        return self.state == UP and not self.starved and (self.ready is not None or bool(self.data))

    def take(self, max_tuples: int) -> tuple[list[WireBatch], int]:
        """The batches of the next message and their tuples: whole batches from the
        front, up to about `max_tuples` tuples (a bigger batch goes alone). They stay
        counted until sent."""
        data = self.data
        first = data.popleft()
        part, size = [first], len(first[3])
        while data:
            n = len(data[0][3])
            if size + n > max_tuples:
                break
            part.append(data.popleft())
            size += n
        return part, size

    def sent(self) -> int:
        """The ready message went out: returns its tuples."""
        assert self.ready is not None
        _, batches, n = self.ready
        self.ready = None
        self.n_batches -= len(batches)
        self._update()
        return n

    def connected(self) -> None:
        self.state = UP
        self.gone = False
        self.down_held = self.down_held_bytes = 0
        self._update()

    def disconnected(self, now: float = 0.0) -> list[WireBatch]:
        """The connection was lost: what waits is held for it, up to the bound (the
        rest is returned, dropped); the peer's tasks are no longer under backpressure."""
        self.state = DOWN
        self.down_since = now
        self.gone = False
        self.starved = False
        self.releases.clear()  # the peer's segments went with it
        waiting = [*(self.ready[1] if self.ready is not None else ()), *self.data]
        self.ready = None
        self.data.clear()
        self.n_batches = 0
        self.down_held = self.down_held_bytes = 0
        dropped = self._hold(waiting)
        self.held = False
        return dropped

    def expire(self, now: float) -> list[WireBatch]:
        """Down for more than `down_secs`: the peer is taken as gone; what it holds is
        returned, dropped, and so is what comes until the connection is back."""
        if self.state != DOWN or self.gone or now - self.down_since <= self.down_secs:
            return []
        self.gone = True
        return self.clear()

    def clear(self) -> list[WireBatch]:
        """Drop every waiting tuple batch (the ready message's too)."""
        dropped = [*(self.ready[1] if self.ready is not None else ()), *self.data]
        self.ready = None
        self.data.clear()
        self.n_batches = 0
        self.down_held = self.down_held_bytes = 0
        self._update()
        return dropped

    def waiting(self) -> bool:
        return bool(self.control or self.releases or self.data or self.ready is not None)

    def _update(self) -> None:
        if self.state == DOWN:
            self.held = False  # nobody is there to push back: senders are not parked
        elif self.starved:
            self.held = True
        elif self.held:
            self.held = self.n_batches > self.hold_at // 2
        else:
            self.held = self.n_batches >= self.hold_at


def by_source(batches: list[WireBatch]) -> tuple[int, dict[int, int]]:
    """The tuples in `batches`, in all and per emitting task."""
    tasks: dict[int, int] = {}
    for b in batches:
        tasks[b[1]] = tasks.get(b[1], 0) + len(b[3])
    return sum(tasks.values()), tasks


class Peers:
    """The transfer thread's sockets, one PUSH (and its monitor) per peer worker.

    `held` and `down` are sets of worker indices that `RemoteTarget`s read on the emit
    path; only this object (the transfer thread) writes them. `encode(peer, batches)`
    makes a TUPLES message's frames, or None when the peer must wait for a shared-memory
    segment (it is *starved*, and held, until `unstarve`), and the batches it left for
    the next message (large payloads: it may cut `batches`, in place, to its front);
    `drop(reason, tuples, {emitting task: tuples})` counts what is dropped.
    """

    def __init__(
        self,
        ctx: zmq.Context,
        security: Security,
        hold_at: int,
        message_tuples: int,
        encode: Callable[[int, list[WireBatch]], tuple[list | None, list[WireBatch]]],
        drop: Callable[[str, int, dict[int, int]], None],
        hwm: int,
        sndbuf: int,
        down_tuples: int = DOWN_TUPLES,
        down_secs: float = 30.0,
        down_bytes: int = DOWN_BYTES,
    ):
        self.ctx = ctx
        self.security = security
        self.hold_at = hold_at
        self.message_tuples = message_tuples
        self.encode = encode
        self.drop = drop
        self.hwm, self.sndbuf = hwm, sndbuf
        self.down_tuples, self.down_secs = down_tuples, down_secs
        self.down_bytes = down_bytes
        self.held: set[int] = set()
        self.down: set[int] = set()
        self.boxes: dict[int, PeerQueue] = {}
        self._sock: dict[int, zmq.Socket] = {}
        self._monitor: dict[int, zmq.Socket] = {}
        self._by_monitor: dict[zmq.Socket, int] = {}
        self._hellos: dict[int, list] = {}  # each peer's HELLO, sent again on a reconnect
        self.hellos_again: dict[int, int] = {}
        self.sent_messages: dict[int, int] = {}
        self.sent_tuples: dict[int, int] = {}
        self.control_dropped = 0
        self._events_due = False
        self._next_events = 0.0

    # -- connections -------------------------------------------------------------------------
    def open(self, w: int, address: str, hello: list) -> None:
        """Connect to worker `w` at `address` (anew if it had another): HELLO first."""
        if w in self._sock:
            self._close(w, linger=0)
            self._dropped("peer_moved", self.boxes[w].clear())
        s = self.ctx.socket(zmq.PUSH)
        s.setsockopt(zmq.SNDHWM, self.hwm)
        s.setsockopt(zmq.SNDBUF, self.sndbuf)
        self.security.client(s)
        mon = s.get_monitor_socket(_EVENTS)
        s.connect(address)
        self._sock[w], self._monitor[w] = s, mon
        self._by_monitor[mon] = w
        box = PeerQueue(w, self.hold_at, self.down_tuples, self.down_secs, self.down_bytes)
        self.boxes[w] = box
        box.put_control(hello)
        self._hellos[w] = hello
        self._mirror(box)
        self._events_due = True

    def _close(self, w: int, linger: int) -> None:
        s, mon = self._sock.pop(w), self._monitor.pop(w)
        del self._by_monitor[mon]
        s.disable_monitor()
        mon.close(linger=0)
        s.close(linger=linger)

    def close(self, linger: int) -> None:
        for w in list(self._sock):
            self._close(w, linger)

    def events(self, now: float) -> None:
        """Read the monitors (connections up and down), when due (`EVENTS_EVERY`); a
        peer down for longer than `down_secs` drops what it held."""
        if not self._events_due and now < self._next_events:
            return
        self._events_due, self._next_events = False, now + EVENTS_EVERY
        for box in self.boxes.values():
            if box.state == DOWN and not box.gone:
                self._dropped("peer_lost", box.expire(now))
        for mon, w in list(self._by_monitor.items()):
            while True:
                try:
                    event = _monitor_event(mon.recv_multipart(zmq.NOBLOCK))
                except zmq.Again:
                    break
                box = self.boxes[w]
                if event == zmq.EVENT_CONNECTED:
                    hello = self._hellos[w]
                    if box.state == DOWN and not (box.control and box.control[0] is hello):
                        box.control.appendleft(hello)  # a reconnect: a new connection
                        self.hellos_again[w] = self.hellos_again.get(w, 0) + 1
                    box.connected()
                elif event == zmq.EVENT_DISCONNECTED:
                    self._dropped("peer_lost", box.disconnected(now))
                self._mirror(box)

    # -- messages ----------------------------------------------------------------------------
    def put_control(self, w: int, frames: list) -> None:
        box = self.boxes.get(w)
        if box is not None and not box.put_control(frames):
            self.control_dropped += 1

    def put_release(self, w: int, frames: list) -> None:
        box = self.boxes.get(w)
        if box is not None and box.state != DOWN:
            box.releases.append(frames)

    def starved(self) -> bool:
        return any(box.starved for box in self.boxes.values())

    def unstarve(self) -> None:
        """Segments came back (or waiting is over): starved peers try again."""
        for box in self.boxes.values():
            if box.starved:
                box.starved = False
                box._update()
                self._mirror(box)

    def put(self, w: int, batches: list[WireBatch]) -> None:
        box = self.boxes.get(w)
        if box is None:  # not told where it listens (never, once connect() ran)
            self._dropped("no_peer", batches)
            return
        self._dropped("peer_lost", box.put(batches))
        self._mirror(box)

    def _dropped(self, reason: str, batches: list[WireBatch]) -> None:
        if batches:
            self.drop(reason, *by_source(batches))

    def flush(self) -> None:
        """Hand each peer what it can take now, without blocking."""
        for w, box in self.boxes.items():
            if box.waiting():
                self._flush(w, box, self._sock[w])
                self._mirror(box)

    def _flush(self, w: int, box: PeerQueue, s: zmq.Socket) -> None:
        try:
            while box.releases:
                s.send_multipart(box.releases[0], flags=zmq.NOBLOCK, copy=False)
                box.releases.popleft()
            while box.control:
                s.send_multipart(box.control[0], flags=zmq.NOBLOCK, copy=False)
                box.control.popleft()
            while box.sendable():
                if box.ready is None:
                    part, n = box.take(self.message_tuples)
                    taken = len(part)
                    frames, rest = self.encode(w, part)
                    if rest:  # the message took the front of `part` (large payloads)
                        box.data.extendleft(reversed(rest))
                        box.n_batches += len(part) + len(rest) - taken
                        n = sum(len(b[3]) for b in part)
                    if frames is None:  # no segment: wait for one, held meanwhile
                        box.data.extendleft(reversed(part))
                        box.starved = True
                        box._update()
                        break
                    box.ready = (frames, part, n)
                s.send_multipart(box.ready[0], flags=zmq.NOBLOCK, copy=False)
                n = box.sent()
                self.sent_messages[w] = self.sent_messages.get(w, 0) + 1
                self.sent_tuples[w] = self.sent_tuples.get(w, 0) + n
        except zmq.Again:  # full: the rest waits in the outbox
            pass

    def _mirror(self, box: PeerQueue) -> None:
        w = box.worker
        if box.held:
            self.held.add(w)
        else:
            self.held.discard(w)
        if box.state == DOWN:
            self.down.add(w)
        else:
            self.down.discard(w)

    # -- waiting -----------------------------------------------------------------------------
    def waiting(self) -> bool:
        """Something waits for a peer (a connection, or room on its socket)."""
        return any(box.waiting() for box in self.boxes.values())

    def poller(self, *also: Any) -> zmq.Poller:
        """A poller over the monitors and the full sockets that have messages waiting,
        and `also` (sockets or descriptors to read)."""
        poller = zmq.Poller()
        for x in also:
            poller.register(x, zmq.POLLIN)
        for w, mon in self._monitor.items():
            poller.register(mon, zmq.POLLIN)
            box = self.boxes[w]
            if box.control or box.sendable():
                poller.register(self._sock[w], zmq.POLLOUT)
        return poller

    def noticed(self, ready: list) -> None:
        """What a poll of `poller` returned: a monitor event is read at the next pass."""
        if any(sock in self._by_monitor for sock, _ in ready):
            self._events_due = True

    def waiting_batches(self) -> int:
        return sum(box.n_batches for box in list(self.boxes.values()))

    def statistics(self) -> dict[str, dict[str, Any]]:
        return {
            str(w): {
                "state": box.state,
                "held": box.held,
                "waiting_batches": box.n_batches,
                "held_while_down": box.held_while_down,
                "messages_sent": self.sent_messages.get(w, 0),
                "tuples_sent": self.sent_tuples.get(w, 0),
                "hellos_again": self.hellos_again.get(w, 0),
            }
            for w, box in sorted(self.boxes.items())
        }


_MONITOR = struct.Struct("=Hi")  # a monitor message's frame 0: event id, value


def _monitor_event(frames: list[bytes]) -> int:
    """The event id of a socket monitor's message (libzmq's own, on an inproc pair).
    Parsed here: pyzmq's `zmq.utils.monitor` imports asyncio (~28 ms of start-up)."""
    if len(frames) != 2 or len(frames[0]) != _MONITOR.size:
        return 0
    return _MONITOR.unpack(frames[0])[0]


def rows_bytes(rows: Any) -> int:
    """The bytes of the large buffers in `rows` (bytes, bytearrays, memoryviews, numpy
    arrays and anything with `nbytes`): what holding them costs beyond the tuple count.
    Run only while a peer is down, on what is held for it."""
    if rows.__class__ is not list:  # packed rows (frames.Packed): their pickle's bytes
        return len(getattr(rows, "data", b""))
    total = 0
    for row in rows:
        for v in row:
            cls = v.__class__
            if cls is bytes or cls is bytearray:
                total += len(v)
            else:
                nbytes = getattr(v, "nbytes", None)
                if nbytes.__class__ is int:
                    total += nbytes
    return total
