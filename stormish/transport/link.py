"""A worker's ZeroMQ link: one bound receive socket, one push socket per peer worker.

Ownership (one socket, one owner thread at a time):
- the receive thread owns the PULL socket: it decodes frames (pure `frames.decode`),
  places tuple batches with `publish_remote` (never blocks: overflowQ), feeds the
  backpressure tracker and runs the backpressure-check timer between polls;
- the transfer thread owns the PUSH sockets (`peers.Peers`, one outbox per peer): it
  queues the receive thread's status messages first, then drains the transfer queue
  into the outboxes grouped by destination worker, and hands each peer what it can take
  without blocking, encoded as TUPLES messages of up to about MESSAGE_TUPLES tuples
  (batched transfer). A peer that cannot take more puts its tasks under backpressure
  here; one whose connection was lost has its tuples held for it (bounded), then
  dropped and counted; neither holds up the other peers or a new address (peers.py).
While the worker's scheduler runs its executors it serves both sides itself, between
turns (`serve`, `service`, `park`); the two threads run before that, after it, and in
the `threads` execution model. Either way each socket has one owner at a time.
Executors never touch a socket: they publish to RemoteTargets, which refuse rather than
block. Statuses travel on the same links as tuples, to every peer (any peer may be
upstream). Every peer gets a HELLO as its first message; the receiver answers a HELLO
with its full backpressure status (STORM-3763: status on every new connection).

A HELLO names the sender's incarnation (a nonce per process) and the first id of its
backpressure statuses, and binds the sender's epoch to the connection it came on (under
CURVE the ZAP handler names every connection: `security.CONNECTION`). A status counts only
on that connection and within that range (`RemoteBackpressure`), so a forged status, or
one left over from a former incarnation, freezes nothing. A HELLO from an incarnation not
seen before means a new connection: the receiver forgets the flags the peer's former
incarnation set, answers with its own HELLO (unless the HELLO was itself a reply), then
sends its status, so a restarted peer, whose push sockets reconnect silently on the other
side, still hears every worker's status, and hears it after the HELLO that lets it count.
A status refused because its connection is not bound (a reconnect the sender did not
notice) makes the receiver ask that peer to say HELLO again, once per connection.

Tuples are bound the same way (under CURVE: `_bind_tuples`). A TUPLES, SHM_TUPLES or
BULK_TUPLES message is placed only when it comes on a connection that a HELLO of this
topology, from the incarnation we know for the sender index it names, bound to that
index (one dict lookup a message, never per tuple). Every topology of a cluster holds
the cluster's keys, so without this a stale worker (of a killed or rebalanced topology,
of an earlier assignment on the same ports) or a worker of another topology placed
tuples in our tasks. On a connection whose HELLO named another topology they are
dropped, counted (`foreign`). On one no HELLO bound yet (ZeroMQ reconnected a peer's
PUSH socket silently: the sender goes on without a new HELLO) they are held, in order,
and the peer is asked for a HELLO (once per connection, as for a status); its HELLO on
that connection delivers them, one naming another topology drops them (`foreign`).
What is held is bounded (HOLD_MESSAGES, HOLD_BYTES, in all): past it tuples are dropped,
counted once their connection's HELLO comes (`unbound_limit`: with acking their trees
replay, without it they are lost); what no HELLO claims within `hold_secs` is dropped
as a stranger's (`unbound`, outside the run's completion balance, as `foreign` and
`unknown_task` are: `run_drops`). Without keys there is no
connection id (every message looks alike; anyone on the host may send anything): tuples
are not bound, as before (docs/security.md).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, cast

import zmq

from ..tuple import RejectedRows, StampedRows
from . import bulk, shm
from . import frames as fr
from .peers import Peers
from .peers import by_source as peers_by_source
from .remote import RemoteTarget, TransferQueue
from .security import CONNECTION, LOOPBACK, Security, host_of
from .tracker import BackpressureTracker, Broadcast, Greeting, RemoteBackpressure, Verdict
from .wakeup import FdWakeup

_log = logging.getLogger("stormish.link")

POLL_MS = 5
# dropped tuples are logged at the first drop of a reason, then at most this often (s)
DROP_SAY_EVERY = 10.0
DROP_WHY = {
    "overflow_limit": ": the receiving task's overflowQ is at topology.executor.overflow.limit",
    "unknown_task": ": no such task in this worker",
    "bulk_missing": ": a large payload's shared memory was gone",
    "unsendable": ": no connection to the receiving worker",
    "foreign": ": their connection's HELLO named another topology (a stale or foreign worker)",
    "unbound": ": no HELLO of this topology bound their connection in time (asked for one)",
    "unbound_limit": ": they came before their connection's HELLO, past what is held for that",
}
# Tuples held for connections no HELLO bound yet (a reconnect its sender did not notice):
# in all at most this many messages and bytes (what a busy peer sends in the round trip
# of our ask and its HELLO, with room), each for at most HOLD_SECS
# (`WorkerLink.hold_secs`), past which no HELLO is coming for it: dropped
HOLD_MESSAGES = 64
HOLD_BYTES = 64 * 1024 * 1024
HOLD_SECS = 5.0
# drops of tuples that no worker of this run sent (`WorkerLink.run_drops`)
STRANGERS = frozenset({"unknown_task", "foreign", "unbound"})
BOUND_PER_PEER = 4  # connections of one incarnation kept bound (the newest; a reconnect
# leaves the former one dead, but what it carried may still be read after the new HELLO)
RECV_BURST = 64  # messages received in one go before the timer and sending get a turn
# What may be in flight on one link, past the point where a backpressure status can stop
# it: a few messages queued on each side (a message holds up to about MESSAGE_TUPLES
# tuples) and small kernel buffers. Deep ZeroMQ queues would hide a slow receiver from the
# sender and let the overflowQ grow by whatever they held (the halt-lag).
HWM_MESSAGES = 4
SOCKET_BUFFER_BYTES = 64 * 1024
# credit totals (runtime/credits.py) are sent again this often (s), for a grant lost
CREDIT_TOTALS_EVERY = 1.0
# A message's out-of-band buffers (large payloads) up to about this many bytes: one
# message of 1,000 1 MiB arrays (one spout batch) was a gigabyte, sent as one piece, and
# a message holds its shared-memory segments until its last tuple is done. 16 MiB rather
# than 4: 1 MiB arrays took ~20% less CPU a message in both workers (fewer messages, and
# releases, for the same bytes; bench/payloads.py, children's CPU over 3 paired runs).
MESSAGE_BYTES = 16 * 1024 * 1024
MESSAGE_TUPLES = 2048  # a message holds whole batches up to about this many tuples (1,024:
# the batch word count across 2 workers 6% slower, ~2,300 messages a way instead of
# ~1,150, each a wake-up of both sides' ZeroMQ threads and a pre-emption of a busy one)


def run_topology_id(name: str, run: str | None) -> str:
    """What a worker's HELLO names: its topology and the run of it (a local run's nonce,
    a cluster topology's epoch: a submission or a rebalance). By name alone, a stale
    worker of an earlier run of the same name (killed and submitted again, rebalanced)
    passed for one of this run's and placed tuples in its tasks."""
    return f"{name}#{run}" if run else name


# what came on a connection not bound yet: (arrived, message, bytes, tuples, sender); the
# message None: its tuples were past the bound (dropped, their count kept in its place)
_Held = tuple[float, "fr.Message | None", int, int, int]


class WorkerLink:
    def __init__(
        self,
        index: int,
        topology: str,
        assignment: Mapping[int, int],
        conf: Mapping[str, Any],
        host: str = "127.0.0.1",
        bind: str | None = None,
        security: Security | None = None,
        advertise: str | None = None,
    ):
        self.index = index
        self.topology = topology
        self.queues: Mapping[int, Any] = {}
        self.assignment = dict(assignment)
        self.conf = conf
        self.security = security if security is not None else LOOPBACK
        self.incarnation = secrets.token_hex(8)
        self.ctx = zmq.Context()
        self.pull = self.ctx.socket(zmq.PULL)
        self.pull.setsockopt(zmq.LINGER, 0)
        self.pull.setsockopt(zmq.RCVHWM, HWM_MESSAGES)
        self.pull.setsockopt(zmq.RCVBUF, SOCKET_BUFFER_BYTES)
        # read whole before the handshake judges its sender: no frame past a piece (a
        # larger one comes in pieces, frames.in_pieces), or a stranger's 500 MiB is held
        self.pull.setsockopt(zmq.MAXMSGSIZE, fr.MAX_FRAME)
        self.security.server(self.pull)
        if bind is None:
            self.security.check_bind(host)
            port = self.pull.bind_to_random_port(f"tcp://{host}")
            self.address = f"tcp://{host}:{port}"
        else:
            self.security.check_bind(bind)
            self.pull.bind(bind)
            self.address = advertise or bind  # bound on an address, reached by the name peers know
        self.transfer = TransferQueue(conf["topology.transfer.buffer.size"])
        self.remote = RemoteBackpressure()
        self.remote.now = time.monotonic
        # status ids start above anything a former incarnation sent, and every HELLO
        # announces this start: the receiver accepts ids from it on (tracker.py)
        self.status_base = time.time_ns()
        self.tracker = BackpressureTracker(index, [], 1, first_status_id=self.status_base)
        self.check_every = conf["topology.backpressure.check.millis"] / 1000.0
        self.overflow_limit = conf["topology.executor.overflow.limit"]
        self._control: deque[tuple[int, list]] = deque()
        self._init_shm(conf)
        self._init_bulk(conf, host_of(bind) if bind else host, host_of(self.address))
        self._out = Peers(
            self.ctx,
            self.security,
            hold_at=conf["topology.transfer.buffer.size"],
            message_tuples=MESSAGE_TUPLES,
            encode=self._encode,
            drop=self._drop,
            hwm=HWM_MESSAGES,
            sndbuf=SOCKET_BUFFER_BYTES,
            down_tuples=conf["topology.transfer.down.hold.tuples"],
            down_secs=float(conf["topology.message.timeout.secs"]),
            down_bytes=conf["topology.transfer.down.hold.mb"] * 1024 * 1024,
        )
        self._peers: dict[int, str] = {}
        self.reconnects = 0
        self.foreign = 0
        self._new_peers: deque[tuple[int, str]] = deque()
        self._draining = False
        self._seq = 0
        self._drain_hint = False
        self._stop = threading.Event()
        self._halt = threading.Event()  # the threads hand the link to a serving thread
        # ends the threads' polls when they are told to stop or halt: a scheduler taking
        # the link back (after a lent turn) waited for the receive thread's poll to time
        # out (POLL_MS), ~2.5 ms a take-back, dozens of them a second under per-tuple load
        self._end_wake = FdWakeup()
        self._wakeup: FdWakeup | None = None  # set while a scheduler serves the link
        self._next_check = 0.0
        self._threads: list[threading.Thread] = []
        # statistics
        self.sent_batches = self.sent_bytes = self.recv_batches = self.recv_bytes = 0
        self.recv_tuples = 0
        self.dropped: dict[str, int] = {}
        # the same per local task, where the drop happened: the receiving task (overflow
        # limit) or the emitting one (a peer gone); the task's statistics show them
        self.task_dropped: dict[int, dict[str, int]] = {}
        self._drop_lock = threading.Lock()  # the receive and transfer threads both drop
        self._drop_said: dict[str, float] = {}  # reason -> when its total was last logged
        self.malformed = 0
        # an injected filter (fault tests: stormish.testing.LoseStatuses): a backpressure
        # status it answers True for is withheld, counted in lost_status
        self.status_filter: Callable[[Any], bool] | None = conf.get("topology.link.status.filter")
        self.lost_status = 0
        # the worker's latched edges: (peer) -> transfer items to send it again when it
        # (re)connects (runtime.modes.Latching); None: no worker attached
        self.latched: Any = None
        # the worker's advance_epoch(to=n), for a peer's spout that advanced the epoch
        self.on_epoch: Any = None
        # the worker's unsendable(task, stream, value index, error): a tuple that task
        # emitted to another worker did not pickle (the task fails; None: not attached)
        self.on_unsendable: Any = None
        # the worker's engine_failed(where, error): a link thread raised (the worker
        # fails; None: not attached, the thread's error is only printed)
        self.on_fatal: Any = None
        # the worker's credits for `fail` edges between workers (runtime.credits.
        # WorkerCredits): grants go out as CONTROL messages, rejections as TUPLES; None:
        # no such edge, nothing paid
        self.credits: Any = None
        self._incs: dict[int, str] = {}  # each peer's incarnation, from its HELLO
        # tuples count only on a connection bound by a HELLO of this topology (under
        # CURVE: without keys no connection has a name): connection -> the peer index
        # whose current incarnation bound it; connections whose HELLO was foreign; what
        # came on connections not bound yet: connection -> `_Held` entries, in order.
        # The receive side (one owner at a time) alone touches them.
        self._bind_tuples = self.security.name == "curve"
        self._bound: dict[Any, int] = {}
        self._foreign_conns: dict[Any, None] = {}  # an ordered set, bounded
        self._held: dict[Any, deque[_Held]] = {}
        self._held_messages = self._held_bytes = 0
        self.hold_secs = HOLD_SECS
        self.rebound = 0  # messages delivered once a HELLO bound their connection
        # cycle congestion (Worker.cycle_congestion): the congested cycle tasks of this
        # worker as last announced, and as last re-sent by the timer; each peer's, as it
        # announced them; `on_cycle(bool)`: the worker's remote_cycle, told whenever
        # whether any peer has one changes (None: not attached)
        self._cycle_mine: list[int] = []
        self._cycle_resent: list[int] = []
        self._cycle_peers: dict[int, list[int]] = {}
        self._cycle_any = False
        self._cycle_lock = threading.Lock()  # the receive and transfer threads both change them
        self.on_cycle: Any = None
        self.cycle_sent = self.cycle_received = 0
        self.credits_ignored = 0
        self.credit_syncs = 0  # connections on which credits started over or were re-sent
        self._next_totals = 0.0

    def _init_shm(self, conf: Mapping[str, Any]) -> None:
        """The shared-memory path (shm.py): our pool of segments for peers that map them,
        and our mappings of theirs."""
        mode = conf.get("topology.transport.shm", "auto")
        if mode != "off" and not shm.usable():
            mode = "off"
        self.shm_mode = mode
        self.pool: shm.Pool | None = None
        self.reader: shm.Reader | None = None
        if mode != "off":
            self.pool = shm.Pool(int(conf.get("topology.transport.shm.pool.mb", 64)) << 20)
            self.reader = shm.Reader()
        self._shm_peers: set[int] = set()  # peers that said they map our segments
        self._releases: deque[tuple[int, str, int]] = deque()  # (peer, its prefix, segment)
        self._starved_at: dict[int, float] = {}
        self._returned = 0
        self._row_bytes = 0  # large-buffer bytes a tuple in the last message (MESSAGE_BYTES)
        # a message must fit in the pool several times over, or it would wait for ever
        self._message_bytes = MESSAGE_BYTES
        if self.pool is not None:
            self._message_bytes = max(1, min(MESSAGE_BYTES, self.pool.limit // 4))
        self.shm_messages = self.shm_bytes = self.shm_fallback = self.shm_received = 0

    def _init_bulk(self, conf: Mapping[str, Any], host: str, advertised: str) -> None:
        """Large buffers sealed on a socket of their own (bulk.py): only where the links
        are CURVE-encrypted (in the clear there is nothing to gain)."""
        mode = conf.get("topology.transport.bulk", "auto")
        self.bulk_out: bulk.Sender | None = None
        self.bulk_in: bulk.Receiver | None = None
        self._bulk_address: str | None = None
        if mode == "off" or self.security.name != "curve" or not bulk.usable():
            return
        self.bulk_in = bulk.Receiver(
            self.ctx, host, self.index, self.security, self.assignment.values()
        )
        self._bulk_address = self.bulk_in.advertise(advertised)
        self.bulk_out = bulk.Sender(self.ctx, self.index, SOCKET_BUFFER_BYTES)

    # -- wiring ------------------------------------------------------------------------------
    def attach(self, queues: Mapping[int, Any]) -> None:
        """The local tasks' receive queues (the worker is built with our remote targets,
        so the link exists first)."""
        self.queues = queues
        for q in queues.values():
            q.on_drain = self._drained
        self.tracker = BackpressureTracker(
            self.index,
            list(queues),
            self.conf["topology.backpressure.resend.step"],
            first_status_id=self.status_base,
        )

    def remote_target(self, task: int) -> RemoteTarget:
        return RemoteTarget(
            task,
            self.assignment[task],
            self.transfer,
            self.remote.flagged,
            held=self._out.held,
            down=self._out.down,
        )

    def connect(self, peers: Mapping[int, str]) -> None:
        """Tell the link where the other workers listen (may be called again on restart)."""
        for w, addr in peers.items():
            if w != self.index and self._peers.get(w) != addr:
                self._peers[w] = addr
                self._new_peers.append((w, addr))
        self.transfer.wake()

    def start(self) -> None:
        """The receive and transfer threads (none while a scheduler serves the link)."""
        if self._wakeup is not None or self._threads:
            return
        self._next_check = time.monotonic() + self.check_every
        for fn, name in ((self._recv_loop, "link-recv"), (self._send_loop, "link-send")):
            name = f"{name}-{self.index}"
            t = threading.Thread(target=self._guarded, args=(fn, name), name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def _guarded(self, loop: Callable[[], None], name: str) -> None:
        """A link thread's loop; an error that ends it fails the worker (`on_fatal`):
        a worker that no longer receives or sends would hold its tuples, and the run,
        for good. Stopping (sockets closed under the loop) is no failure."""
        try:
            loop()
        except BaseException as exc:  # noqa: BLE001 - the worker is told, never lost
            if self._stop.is_set() or self.on_fatal is None:
                raise
            self.on_fatal(f"the worker's link thread {name!r}", exc)

    def stop(self) -> None:
        self._end_threads(self._stop)
        self._out.close(linger=200)
        self.pull.close(linger=0)
        if self.bulk_out is not None and self.bulk_in is not None:
            self.bulk_out.close()
            self.bulk_in.close()
        if self.pool is not None:
            self.pool.close()
        self.security.release(self.ctx)
        self.ctx.term()
        self._end_wake.close()

    # -- receive thread ------------------------------------------------------------------------
    def _recv_loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self.pull, zmq.POLLIN)
        poller.register(self._end_wake.readable_fd(), zmq.POLLIN)
        while not (self._stop.is_set() or self._halt.is_set()):
            if poller.poll(POLL_MS):
                self._receive()
            self._check(time.monotonic())

    def _receive(self) -> int:
        """Up to RECV_BURST messages already received, without waiting; it stops early
        when one gave a status (or a HELLO) to send: a task that overflows is announced
        before more is read for it. Served by the scheduler, sending waits for the end of
        this pass: reading on, one pass took up to 64 messages (~64k tuples) into the
        overflowQ before the upstream heard of it (the halt-lag test: 87k against ~12k
        with the link's own threads)."""
        pull, n, control = self.pull, 0, self._control
        while n < RECV_BURST:
            try:
                parts = pull.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            self._on_message([p.buffer for p in parts], parts[0])
            n += 1
            if control:
                break
        return n

    def _check(self, now: float) -> None:
        """The backpressure-check timer, and the check a drained overflowQ asks for; room a
        task freed on a `fail` edge fed on credit goes back to its senders."""
        credits = self.credits
        if credits is not None and credits.dirty():
            self._send_credits(credits.top_up())
        if now >= self._next_check or self._drain_hint:
            self._drain_hint = False
            self._next_check = now + self.check_every
            self._timer()
            self._resend_cycle()
            if self._held:
                self._expire_held(now)
            if self.bulk_in is not None:
                self.bulk_in.idle(now)
            if credits is not None and now >= self._next_totals:
                self._next_totals = now + CREDIT_TOTALS_EVERY
                self._send_credits(credits.totals())

    def _drained(self) -> None:
        """A task's overflowQ just emptied (its consumer's thread): check at the next poll
        (within POLL_MS) instead of at the next timer tick (Storm: up to the whole
        backpressure-check period, during which the remote upstreams stay stopped)."""
        self._drain_hint = True

    def _on_message(self, parts: list, first: Any = None) -> None:
        """One received message; `first`, its first zmq.Frame, says which connection it
        came on (read for HELLO, status and, under CURVE, tuples: `_bind_tuples`)."""
        try:
            msg = fr.decode(parts)
        except fr.FrameError:
            self.malformed += 1
            return
        kind = msg.kind
        if kind == fr.Kind.TUPLES or kind == fr.Kind.SHM_TUPLES or kind == fr.Kind.BULK_TUPLES:
            size = sum(len(p) for p in parts)
            if self._bind_tuples:
                connection = _connection(first)
                if self._bound.get(connection) != msg.sender:
                    self._unbound(msg, connection, size)
                    return
            self._tuples(msg, size)
        elif msg.kind == fr.Kind.SHM_RELEASE:
            self._on_release(msg.sender, msg.body)
        elif msg.kind == fr.Kind.BP_STATUS:
            self._on_status(msg.body, _connection(first))
        elif msg.kind == fr.Kind.HELLO:
            self._on_hello(msg.sender, msg.body, _connection(first))
        elif msg.kind == fr.Kind.CONTROL:
            self._on_control(msg.sender, msg.body)

    def _tuples(self, msg: fr.Message, size: int) -> None:
        """A TUPLES, SHM_TUPLES or BULK_TUPLES message that counts, into its tasks."""
        if msg.kind == fr.Kind.TUPLES:
            self._received(msg.body, size)
        elif msg.kind == fr.Kind.SHM_TUPLES:
            self._on_shm(msg.sender, msg.body)
        else:
            self._on_bulk(msg.sender, msg.body)

    def _unbound(self, msg: fr.Message, connection: Any, size: int) -> None:
        """Tuples on a connection that no HELLO of this topology bound to their sender:
        dropped if its HELLO was foreign; else held (bounded) until a HELLO binds it,
        and the peer they name is asked for one (once per connection, as for a status:
        `RemoteBackpressure.ask_hello`). Never unpacked here: shared memory and sealed
        buffers are looked up only once the connection counts (a foreign worker's
        segment numbers name none of ours). Past the bound only their count is kept,
        in its place: dropped either way, counted once it is known whether a worker of
        this run sent them (`unbound_limit`: its HELLO came) or not (`_expire_held`,
        `_refuse`)."""
        n = _count(msg)
        if connection in self._foreign_conns:
            self._drop("foreign", n)
            return
        held = self._held.get(connection)
        if held is None:
            held = self._held[connection] = deque()
        peer = msg.sender
        if self._held_messages >= HOLD_MESSAGES or self._held_bytes + size > HOLD_BYTES:
            if held and held[-1][1] is None:  # the count of what went before it grows
                at, _, _, k, _ = held[-1]
                held[-1] = (at, None, 0, k + n, peer)
            else:
                held.append((time.monotonic(), None, 0, n, peer))
        else:
            held.append((time.monotonic(), msg, size, n, peer))
            self._held_messages += 1
            self._held_bytes += size
        if peer in self._peers and self.remote.ask_hello(peer, connection):
            self._control.append((peer, self._hello(reply=False, again=True)))
            self.transfer.wake()

    def _bind(self, peer: int, connection: Any, greeting: Greeting) -> None:
        """A HELLO of this topology from `peer` came on `connection`: its tuples count
        there from now on, and what was held for that connection is placed, in order.
        A new incarnation's HELLO unbinds its predecessor's connections."""
        bound = self._bound
        mine = [c for c, p in bound.items() if p == peer and c != connection]
        if greeting is not Greeting.RECONNECTED:
            for c in mine:
                del bound[c]
        elif len(mine) >= BOUND_PER_PEER:
            for c in mine[: len(mine) - BOUND_PER_PEER + 1]:
                del bound[c]
        bound[connection] = peer
        self._foreign_conns.pop(connection, None)
        for _, msg, size, n, sender in self._unhold(connection):
            if sender != peer:  # another worker's index on this worker's connection
                self._drop("unbound", n)
            elif msg is None:  # sent by this run's worker, past the bound
                self._drop("unbound_limit", n)
            else:
                self.rebound += 1
                self._tuples(msg, size)

    def _refuse(self, connection: Any) -> None:
        """A HELLO that named another topology (or this worker) came on `connection`:
        what it carries counts no more, and what was held for it is dropped."""
        self._bound.pop(connection, None)
        foreign = self._foreign_conns
        foreign[connection] = None
        if len(foreign) > 1024:  # each handshake names a new one: keep the newest
            del foreign[next(iter(foreign))]
        for _, _, _, n, _ in self._unhold(connection):
            self._drop("foreign", n)

    def _unhold(self, connection: Any) -> list[_Held]:
        """What was held for `connection`, in order, held no more."""
        held = self._held.pop(connection, None)
        if not held:
            return []
        for _, msg, size, _, _ in held:
            if msg is not None:
                self._held_messages -= 1
                self._held_bytes -= size
        return list(held)

    def _expire_held(self, now: float) -> None:
        """The timer: tuples held longer than `hold_secs` for a connection still not
        bound are dropped, counted (`unbound`: no HELLO of this run's workers claimed
        them); the next that comes on it asks again."""
        limit = now - self.hold_secs
        for connection, held in list(self._held.items()):
            while held and held[0][0] <= limit:
                _, msg, size, n, peer = held.popleft()
                if msg is not None:
                    self._held_messages -= 1
                    self._held_bytes -= size
                self._drop("unbound", n)
                self.remote.unask(peer, connection)
            if not held:
                del self._held[connection]

    def run_drops(self) -> int:
        """Tuples dropped here that a worker of this run sent (the completion balance:
        the sender counted them as transferred); not those of a task no worker has, nor
        a stranger's (a foreign HELLO's connection, or one no HELLO bound in time)."""
        with self._drop_lock:
            return sum(n for why, n in self.dropped.items() if why not in STRANGERS)

    def _on_shm(self, peer: int, body: fr.ShmTuples) -> None:
        """Tuples whose large buffers are in the peer's segments: views of them, each
        released back to the peer when the last reference to it is gone."""
        reader = self.reader
        if reader is None or peer not in self._peers:
            self.malformed += 1
            return
        prefix = reader.prefix(peer)
        done = lambda seg: self._release(peer, prefix, seg)  # noqa: E731
        try:
            views = reader.views(peer, body.refs, done)
            batches = fr.load_tuples(body.pickle, views)
        except (shm.ShmError, fr.FrameError):
            self.malformed += 1
            return
        self.shm_received += 1
        size = len(body.pickle) + sum(len(v) for v in views)
        del views  # the values hold them now
        self._received(batches, size)

    def _on_bulk(self, peer: int, body: fr.BulkTuples) -> None:
        """Tuples whose large buffers came sealed on our bulk socket (bulk.py); missing
        or forged ones lose the message's tuples, counted (`bulk_missing`): their trees
        replay."""
        opener = self.bulk_in
        if opener is None or peer not in self._peers:
            self.malformed += 1
            return
        try:
            buffers = opener.open(peer, body.first, body.count)
            batches = fr.load_tuples(body.pickle, buffers, fr.Kind.BULK_TUPLES)
        except bulk.BulkError:
            self._drop("bulk_missing", body.tuples)
            return
        except fr.FrameError:
            self.malformed += 1
            return
        self._received(batches, len(body.pickle) + sum(len(b) for b in buffers))

    def _received(self, batches: list, size: int) -> None:
        """A message's batches (TUPLES, or their buffers from shared memory or the bulk
        socket) into their tasks' queues; `size`, its bytes."""
        self.recv_batches += 1
        self.recv_bytes += size
        for dest, src, stream, values, metas in batches:
            self._place(dest, (src, stream, values, metas), len(values))

    def _on_bulk_hello(self, peer: int, info: Any) -> None:
        """A peer's HELLO names its bulk socket and its key (bulk.py), or none."""
        if self.bulk_in is None or self.bulk_out is None:
            return
        ok = type(info) is dict and bulk.is_token(info.get("token"))
        ok = ok and self.bulk_in.keyed(peer, info.get("key"))
        address = info.get("address") if ok else None
        if type(address) is str and address.startswith("tcp://"):
            self.bulk_out.want(peer, address, info["token"])
        else:
            self.bulk_in.forget(peer)
            self.bulk_out.want(peer, None)

    def _release(self, peer: int, prefix: str | None, seg: int) -> None:
        """The last view of a segment's buffers went (any thread): tell its owner."""
        self._releases.append((peer, prefix or "", seg))
        self.transfer.wake()

    def _on_release(self, peer: int, body: tuple) -> None:
        token, segs = body
        pool = self.pool
        if pool is None or token != pool.token or peer not in self._peers:
            self.malformed += 1
            return
        pool.release(peer, segs)
        self.transfer.wake()

    def _on_shm_hello(self, peer: int, prefix: Any, restarted: bool) -> None:
        """A peer's HELLO names its segments' prefix: answer that we map them (same host)."""
        if restarted and self.pool is not None:
            self._shm_peers.discard(peer)  # until it says it maps ours again
            self.pool.forget(peer)  # what the former incarnation held never returns
        reader = self.reader
        if reader is None:
            return
        if restarted or prefix is None or not shm.can_map(prefix):
            reader.forget(peer)  # a former incarnation's segments, or a host left behind
        if prefix is None:
            return
        if reader.prefix(peer) != prefix and reader.know(peer, prefix):
            body = {"shm": prefix}
            self._control.append((peer, fr.encode_control(self.index, 0, body)))

    def _on_control(self, peer: int, body: dict) -> None:
        """A peer's spout advanced the epoch (previous_tick edges): ours follows. Or a
        peer granted credit on `fail` edges into it (runtime/credits.py). Or the peer maps
        our shared-memory segments (`shm`). Or the peer's congested cycle tasks
        (`cycle`)."""
        if "credits" in body:
            self._on_credits(peer, body)
            return
        if "cycle" in body:
            self._on_cycle(peer, body)
            return
        if "shm" in body:
            if self.pool is not None and body["shm"] == self.pool.prefix and peer in self._peers:
                self._shm_peers.add(peer)
            return
        epoch = body.get("epoch")
        if peer not in self._peers or type(epoch) is not int or epoch < 0:
            self.malformed += 1
            return
        if self.on_epoch is not None:
            self.on_epoch(epoch)

    def _on_credits(self, peer: int, body: dict) -> None:
        rows, frm, to = body.get("credits"), body.get("from"), body.get("to")
        if (
            peer not in self._peers
            or type(rows) is not list
            or type(frm) is not str
            or not all(
                type(r) is list and len(r) == 3 and all(type(x) is int for x in r) for r in rows
            )
        ):
            self.malformed += 1
            return
        if to != self.incarnation or self.credits is None:  # for a former incarnation of us
            self.credits_ignored += len(rows)
            return
        self.credits_ignored += self.credits.grant(peer, frm, rows)

    def _send_credits(self, by_peer: Mapping[int, list]) -> None:
        """Credit totals to the workers whose senders hold them (any thread), addressed
        to the incarnation that said HELLO (one not heard yet gets them on its HELLO)."""
        for peer, rows in by_peer.items():
            inc = self._incs.get(peer)
            if rows and inc is not None:
                body = {"credits": rows, "from": self.incarnation, "to": inc}
                self._control.append((peer, fr.encode_control(self.index, 0, body)))
        if by_peer:
            self.transfer.wake()

    # -- cycle congestion across workers ---------------------------------------------------
    # The spouts feeding a cycle pause while a cycle executor holds more than half its
    # drain budget (runtime/bolt_executor.py). The executor and the spout may be in
    # different workers: each worker announces its congested cycle tasks to every peer,
    # whole (never a change: the last message is the state, and a peer's control backlog
    # at its bound drops the oldest), on every change, again each backpressure check
    # while the set is not empty and once after it emptied (two announcements racing
    # from two threads settle at the next check), and on every new connection. A peer's
    # set counts in its incarnation only: a HELLO from a new one forgets it.

    def announce_cycle(self, tasks: list[int]) -> None:
        """This worker's congested cycle tasks changed (any thread): tell every peer."""
        self._cycle_mine = tasks
        self._send_cycle(list(self._peers), tasks)

    def _send_cycle(self, peers: list[int], tasks: list[int]) -> None:
        body = {"cycle": tasks, "from": self.incarnation}
        for peer in peers:
            self._control.append((peer, fr.encode_control(self.index, 0, body)))
            self.cycle_sent += 1
        if peers:
            self.transfer.wake()

    def _resend_cycle(self) -> None:
        """The backpressure-check timer: the set again while it is, or just was, not
        empty."""
        mine = self._cycle_mine
        if mine or self._cycle_resent:
            self._cycle_resent = mine
            self._send_cycle(list(self._peers), mine)

    def _on_cycle(self, peer: int, body: dict) -> None:
        tasks, frm = body.get("cycle"), body.get("from")
        if (
            peer not in self._peers
            or type(tasks) is not list
            or not all(type(t) is int for t in tasks)
            or type(frm) is not str
        ):
            self.malformed += 1
            return
        if frm != self._incs.get(peer):  # a former incarnation's, or before its HELLO
            return
        self.cycle_received += 1
        with self._cycle_lock:
            self._cycle_peers[peer] = tasks
            self._cycle_changed()

    def _forget_cycle(self, peer: int) -> None:
        """Peer `peer` restarted or moved: what its former incarnation announced is void."""
        with self._cycle_lock:
            if self._cycle_peers.pop(peer, None):
                self._cycle_changed()

    def _cycle_changed(self) -> None:
        """Under `_cycle_lock`: the worker hears when whether any peer has one changes."""
        any_ = any(self._cycle_peers.values())
        if any_ != self._cycle_any:
            self._cycle_any = any_
            if self.on_cycle is not None:
                self.on_cycle(any_)

    def broadcast_control(self, payload: dict) -> None:
        """A small message to every peer, behind the statuses (any thread)."""
        for peer in list(self._peers):
            self._control.append((peer, fr.encode_control(self.index, 0, payload)))
        self.transfer.wake()

    def _on_status(self, status: Any, connection: str | None) -> None:
        """A status counts only in its worker's epoch (`RemoteBackpressure.apply`); one
        refused as unbound from a peer we know asks that peer for a HELLO, once per
        connection, so a connection re-established under us is bound again."""
        verdict = self.remote.apply(status, connection)
        peer = status.worker_id
        if (
            verdict is Verdict.UNBOUND
            and peer in self._peers
            and self.remote.ask_hello(peer, connection)
        ):
            self._control.append((peer, self._hello(reply=False, again=True)))
            self.transfer.wake()

    def _on_hello(self, peer: int, hello: fr.Hello, connection: str | None = None) -> None:
        info = hello.worker_port_info
        if hello.topology_id != self.topology or peer == self.index:
            self.foreign += 1
            if self._bind_tuples:
                self._refuse(connection)
            return
        inc, first_id = info.get("incarnation"), info.get("status_base")
        if type(inc) is not str or type(first_id) is not int or not 0 <= first_id < 2**64:
            self.malformed += 1
            return
        greeting = self.remote.hello(peer, inc, connection, first_id)
        if greeting is not Greeting.KNOWN:
            self._on_shm_hello(peer, info.get("shm"), greeting is Greeting.RESTARTED)
            self._on_bulk_hello(peer, info.get("bulk"))
        # after the segments and the key its held tuples need
        if self._bind_tuples and (
            greeting is not Greeting.KNOWN or self._bound.get(connection) != peer
        ):
            self._bind(peer, connection, greeting)
        if greeting is Greeting.KNOWN and not info.get("again"):
            return
        if greeting is Greeting.RESTARTED:  # its old flags were released
            self.reconnects += 1
        if greeting is not Greeting.KNOWN:  # a new incarnation: its old cycle set too
            self._forget_cycle(peer)
        if not info.get("reply"):  # our HELLO first: it binds the status that follows
            self._control.append((peer, self._hello(reply=True)))
        self._run(self.tracker.peer_connected(peer))
        self._incs[peer] = inc
        if self.credits is not None:  # as the status: credits start over or are re-sent
            new = greeting in (Greeting.FIRST, Greeting.RESTARTED)
            rows = self.credits.hello(peer, inc, new, greeting is Greeting.RESTARTED)
            self._send_credits({peer: rows})
            self.credit_syncs += 1
        if self._cycle_mine:  # as the status: our congested cycle tasks
            self._send_cycle([peer], self._cycle_mine)
        if self.latched is not None:  # as the status: what latched edges sent it last
            for item in self.latched(peer):
                self.transfer.put_force(peer, item, 1)
        self.transfer.wake()

    def _place(self, dest: int, batch: fr.Batch, n: int) -> None:
        q = self.queues.get(dest)
        if q is None:
            self._drop("unknown_task", n)
            return
        limit = self.overflow_limit
        if limit and q.overflow_size + n > limit:  # near the limit: checked per tuple
            room = q.overflow_room(n, limit)
            if room < n:
                self._drop("overflow_limit", n - room, {dest: n - room})
                if not room:
                    return
                batch = _head(batch, room)  # what is past the limit is dropped, in order
                n = room
        self.recv_tuples += n
        if batch[2].__class__ is fr.Packed:
            if q.channels:  # an edge with a policy reads the rows as they arrive
                batch = fr.unpack([batch])[0]
            else:
                q.packed = True  # unpacked by the task when it takes them (`consume`)
        ov = q.publish_remote(batch, n)
        if ov:
            self._run(self.tracker.overflow_grew(dest, ov))

    def _drop(self, reason: str, n: int, tasks: Mapping[int, int] | None = None) -> None:
        """Count `n` tuples dropped for `reason`; `tasks`: how many of them each local
        task lost (the receiving task, or the one that emitted them), when known."""
        with self._drop_lock:
            self.dropped[reason] = self.dropped.get(reason, 0) + n
            for task, k in (tasks or {}).items():
                mine = self.task_dropped.setdefault(task, {})
                mine[reason] = mine.get(reason, 0) + k
            now = time.monotonic()
            said = self._drop_said.get(reason)
            if said is not None and now - said < DROP_SAY_EVERY:
                return
            self._drop_said[reason] = now
            total = self.dropped[reason]
        # Storm's WorkerState.dropMessage warns of every drop; here the first, then the
        # running total at most every DROP_SAY_EVERY seconds (drops come per batch)
        _log.warning(
            "dropped %d tuple(s) arriving from other workers (%s%s); %d so far",
            n, reason, DROP_WHY.get(reason, ""), total,
        )  # fmt: skip

    def task_drops(self, task: int) -> dict[str, int]:
        with self._drop_lock:
            return dict(self.task_dropped.get(task, {}))

    def _timer(self) -> None:
        sizes = {t: q.backlog() for t, q in self.queues.items()}
        fill = {t: q.size / q.capacity for t, q in self.queues.items()}
        self._run(self.tracker.timer(sizes, fill))

    def _run(self, instructions: list) -> None:
        for ins in instructions:
            if self.status_filter is not None and self.status_filter(ins.status):
                self.lost_status += 1
                continue
            peers = list(self._peers) if isinstance(ins, Broadcast) else [ins.peer]
            for p in peers:
                self._control.append((p, fr.encode_status(self.index, 0, ins.status)))
        if instructions:
            self.transfer.wake()

    # -- transfer thread -------------------------------------------------------------------
    def _send_loop(self) -> None:
        out = self._out
        while not (self._stop.is_set() or self._halt.is_set()):
            if out.waiting():  # a connection, or room on a full socket: wait for either
                out.noticed(self._poller(self._end_wake.readable_fd()).poll(POLL_MS))
                self.transfer.wait(0)
            else:
                self.transfer.wait(0.05)
            self._send(time.monotonic())

    def _send(self, now: float) -> None:
        """New peers, connection events, control messages, then what the transfer queue
        holds, handed to each peer as far as it takes it without blocking."""
        out = self._out
        if self.bulk_out is not None:
            self.bulk_out.apply()
        while self._new_peers:
            w, addr = self._new_peers.popleft()
            if w in out.boxes:  # it moved: its old flags mean nothing now
                self.remote.forget_worker(w)
                self._forget_cycle(w)
                self._shm_peers.discard(w)
                if self.pool is not None:
                    self.pool.forget(w)
            out.open(w, addr, self._hello(reply=False))
        out.events(now)
        while self._control:
            out.put_control(*self._control.popleft())
        credits = self.credits
        if credits is not None and credits.reports.pending:  # fan-outs withheld for no credit
            for w, item in credits.reports.take():
                out.put(w, [item])
        if self._releases:
            self._send_releases()
        if self._starved_at or out.starved():
            self._unstarve(now)
        if len(self.transfer):
            self._draining = True  # busy() must not miss what is between queue and outbox
            for w, batches in self.transfer.drain().items():
                out.put(w, batches)
            self._draining = False
        out.flush()

    # -- served by a scheduler thread ----------------------------------------------------------
    def serve(self, wakeup: FdWakeup) -> None:
        """From now on the calling thread serves the link (`service`, `park`) instead of
        its receive and transfer threads, which stop here; `unserve` gives it back.

        Under the GIL the link's two threads bought no parallelism: every batch that
        crossed workers was a hand-off of the GIL between them and the scheduler (2-worker
        word count: ~0.5 s CPU a worker in the link threads, and the scheduler's share of
        each row grew with the hand-offs). Served by the scheduler between turns, a
        received batch is in its queue before the next turn, with no hand-off. A socket
        has one owner at a time: the threads are joined before this thread takes over.
        """
        self._end_threads(self._halt)
        self._halt.clear()
        self._wakeup = wakeup
        self.transfer.share_wakeup(wakeup)  # a batch from a thread of its own, new peers

    @property
    def served(self) -> bool:
        """A scheduler thread serves the link now (not its threads)."""
        return self._wakeup is not None

    def unserve(self) -> None:
        """The threads take over again: the serving thread is done (its executors ended:
        they send what the executors' ends flushed and answer peers until `stop`), or
        it is lent for a long turn (the watchdog, `Scheduler.lend_link`: a status or a
        batch must not wait for a slow bolt's turn to end). `serve` takes it back."""
        if self._wakeup is None:
            return
        self._wakeup = None
        self.transfer.own_wakeup()
        self.transfer.wake()
        if not self._stop.is_set():
            self.start()

    def service(self) -> bool:
        """One pass, never waiting: receive, the timer, send. True when a message came."""
        if self._stop.is_set():  # stopping: the sockets are being closed
            return False
        got = self._receive() if self._readable() else 0
        now = time.monotonic()
        self._check(now)
        self._send(now)
        return got > 0

    def _readable(self) -> bool:
        """A message waits on the receive socket (ZMQ_EVENTS, ~1.5 us): a receive that
        finds nothing raises zmq.Again (~7 us), once a round, ~0.05 s a worker in a
        1M-sentence run."""
        return bool(cast(int, self.pull.get(zmq.EVENTS)) & zmq.POLLIN)

    def between_turns(self) -> None:
        """Between two turns (the serving thread), what cannot wait for the next round's
        `service`, a whole round of the other executors' turns later: what the last turn
        emitted for other workers, statuses (an overflowQ it drained clears its flag
        now), and messages already received (a readiness check, ~1.5 us). Per crossing a
        tuple waited up to a round on each side: a tree that crosses twice waited for
        its ack up to four rounds more, and a spout at max.spout.pending with it."""
        if self._stop.is_set():
            return
        if self._drain_hint:
            self._check(time.monotonic())
        if self._readable():
            self._receive()
        if len(self.transfer) or self._control:
            self._send(time.monotonic())

    def park(self, timeout: float) -> None:
        """Wait up to `timeout` s for a message, the wakeup (a local publish, a transfer
        from another thread, new peers), a connection event or room on a full socket."""
        wakeup = self._wakeup
        if wakeup is None or wakeup.is_set():
            return
        timeout = min(timeout, max(0.0, self._next_check - time.monotonic()))
        ms = max(0, int(timeout * 1000))
        ready = self._poller(self.pull, wakeup.readable_fd()).poll(ms)
        if ready:
            self._out.noticed(ready)

    def _poller(self, *also: Any) -> zmq.Poller:
        """The outboxes' poller (`Peers.poller`), and the bulk sockets of peers waiting
        for room on them."""
        poller = self._out.poller(*also)
        if self.bulk_out is not None:
            for s in self.bulk_out.waiting():
                poller.register(s, zmq.POLLOUT)
        return poller

    def _end_threads(self, why: threading.Event) -> None:
        """Set `why` (`_stop`, or `_halt`: a scheduler takes over) and join the receive
        and transfer threads, which end on either."""
        why.set()
        self.transfer.wake()
        self._end_wake.set()
        for t in self._threads:
            t.join(5)
        self._threads = []
        self._end_wake.clear()

    def _encode(self, peer: int, part: list) -> tuple[list | None, list]:
        """One TUPLES message (the transfer thread encodes when the peer can take it)
        and the batches left for the next one; its large buffers in shared memory for a
        peer that maps our segments, else sealed on the peer's bulk socket (keyed links,
        bulk.py); None when no segment is free, or the bulk socket has no room (the peer
        waits, held: this path's backpressure)."""
        self._seq += 1
        rest: list = []
        most = self._message_bytes
        if self._row_bytes:  # the last message had large buffers: about as many a tuple
            rest = _cut(part, max(1, most // self._row_bytes))
        frames = self._encode_tuples(part)
        if len(frames) <= 2:
            self._row_bytes = 0
        else:
            big = sum(memoryview(f).nbytes for f in frames[2:])
            n = sum(len(b[3]) for b in part)
            self._row_bytes = big // n
            if big > 2 * most and n > 1:  # the guess was short: cut, encode again
                rest = _cut(part, max(1, n * most // big)) + rest
                frames = self._encode_tuples(part)
                n = sum(len(b[3]) for b in part)
            placed: list | None = frames
            if self.shm_mode == "on" or peer in self._shm_peers:
                placed = self._to_shm(peer, frames, n)
            if placed is frames and self.bulk_out is not None:
                try:
                    placed = self.bulk_out.seal(peer, frames, n)
                except Exception:  # noqa: BLE001 - a buffer AES-GCM refuses: inside CURVE
                    self.bulk_out.fallback += 1
            if placed is None:
                return None, rest
            frames = placed
        self.sent_batches += 1
        sizes = [memoryview(f).nbytes for f in frames]
        self.sent_bytes += sum(sizes)
        if max(sizes) > fr.PIECE:  # past what a link reads in one frame
            frames = fr.in_pieces(frames)
        return frames, rest

    def _encode_tuples(self, part: list) -> list:
        """`part` as a TUPLES message; a value that does not pickle (a lock, a generator,
        an open file emitted to a task in another worker) drops the message's tuples,
        counted (`unsendable`), fails the task that emitted it, and an empty message
        takes their place: the transfer side must go on (it died here, and the worker
        hung with the topology until a timeout, its error only in the worker's log)."""
        try:
            return fr.encode_tuples(self.index, self._seq, part)
        except Exception as exc:  # noqa: BLE001 - any pickling error of a user's value
            self._unsendable(part, exc)
            return fr.encode_tuples(self.index, self._seq, [])

    def _unsendable(self, part: list, exc: Exception) -> None:
        """Count `part`'s tuples dropped and tell the worker which task emitted the
        value that does not pickle (found again row by row: this runs only on failure)."""
        task, stream, index, error = part[0][1], part[0][2], -1, exc
        found = _first_unpicklable(part)
        if found is not None:
            task, stream, row, error = found
            if isinstance(row, (list, tuple)):
                index = next((i for i, v in enumerate(row) if _unpicklable(v)), -1)
        self._drop("unsendable", *peers_by_source(part))
        if self.on_unsendable is not None:
            self.on_unsendable(task, stream, index, error)

    def _to_shm(self, peer: int, frames: list, tuples: int) -> list | None:
        pool = self.pool
        assert pool is not None
        try:
            refs = pool.place(peer, frames[2:])
        except shm.ShmError:  # too large for the pool, or no space: ZeroMQ takes it
            self.shm_fallback += 1
            return frames
        if refs is None:
            now = time.monotonic()
            since = self._starved_at.setdefault(peer, now)
            if now - since < shm.STALL:
                return None
            self.shm_fallback += 1  # a receiver that keeps what it got: slow, not stopped
            return frames
        self._starved_at.pop(peer, None)
        self.shm_messages += 1
        self.shm_bytes += sum(memoryview(f).nbytes for f in frames[2:])
        return fr.as_shm(frames, refs, tuples)

    def _send_releases(self) -> None:
        """Segments our executors are done with, one message per peer and prefix."""
        by: dict[tuple[int, str], list[int]] = {}
        while self._releases:
            peer, prefix, seg = self._releases.popleft()
            by.setdefault((peer, prefix), []).append(seg)
        for (peer, prefix), segs in by.items():
            token = shm.token_of(prefix)
            if token is not None:
                self._out.put_release(peer, fr.encode_release(self.index, token, segs))

    def _unstarve(self, now: float) -> None:
        """Peers waiting for a segment try again once one came back, or once they have
        waited `shm.STALL` (then through ZeroMQ)."""
        pool = self.pool
        returned = pool.returned if pool is not None else 0
        late = any(now - t >= shm.STALL for t in self._starved_at.values())
        if returned != self._returned or late or self._bulk_room():
            self._returned = returned
            self._out.unstarve()

    def _bulk_room(self) -> bool:
        """A peer waiting for room on its bulk socket has some now."""
        out = self.bulk_out
        return out is not None and any(map(bulk.has_room, out.waiting()))

    def busy(self) -> bool:
        """Tuples wait on this side of the link (in the transfer queue, in the transfer
        thread's hands, or in an outbox): read in the order they move through."""
        reports = self.credits is not None and bool(self.credits.reports.pending)
        return (
            len(self.transfer) > 0 or self._draining or self._out.waiting_batches() > 0 or reports
        )

    def _hello(self, reply: bool, again: bool = False) -> list:
        """`again`: asks the peer to answer with its HELLO and status although it knows
        us (the receive side could not bind its statuses to a connection)."""
        info = {
            "address": self.address,
            "incarnation": self.incarnation,
            "reply": reply,
            "status_base": self.status_base,
        }
        if self.pool is not None:
            info["shm"] = self.pool.prefix
        if self.bulk_out is not None and self.bulk_in is not None:
            # HELLO travels CURVE-encrypted: the key and the token are safe in it
            info["bulk"] = {
                "address": self._bulk_address,
                "key": self.bulk_out.announce(),
                "token": self.bulk_in.announce(),
            }
        if again:
            info["again"] = True
        return fr.encode_hello(self.index, 0, self.topology, info)

    def statistics(self) -> dict[str, Any]:
        t, r = self.tracker.statistics(), self.remote.statistics()
        return {
            "worker": self.index,
            "address": self.address,
            "batches_sent": self.sent_batches,
            "bytes_sent": self.sent_bytes,
            "batches_received": self.recv_batches,
            "bytes_received": self.recv_bytes,
            "tuples_received": self.recv_tuples,
            "status_sent": t.sent,
            "status_resent": t.resent,
            "status_sent_on_connect": t.sent_on_connect,
            "status_received": r.received,
            "status_stale": r.stale_ignored,
            "status_refused": {
                reason: n
                for reason, n in (
                    ("unbound", r.refused_unbound),
                    ("out_of_range", r.refused_out_of_range),
                )
                if n
            },
            "remote_tasks_flagged": len(self.remote.flagged),
            "remote_flagged_seconds": {
                str(t): round(v, 6) for t, v in sorted(self.remote.flag_times().items())
            },
            "peer_reconnects": self.reconnects,
            "status_lost_by_test_hook": self.lost_status,
            "foreign_hellos": self.foreign,
            "tuples_held": {"messages": self._held_messages, "bytes": self._held_bytes},
            "tuples_rebound": self.rebound,
            "dropped": dict(self.dropped),
            "malformed": self.malformed,
            "packed_malformed": fr.Packed.malformed,
            "transfer_refused": self.transfer.refused,
            "peers_held": sorted(self._out.held),
            "peers_down": sorted(self._out.down),
            "peers": self._out.statistics(),
            "status_backlog_dropped": self._out.control_dropped,
            "cycle_sent": self.cycle_sent,
            "cycle_received": self.cycle_received,
            "cycle_congested_peers": sorted(p for p, t in self._cycle_peers.items() if t),
            "credits_ignored": self.credits_ignored,
            "credit_syncs": self.credit_syncs,
            "shm": self._shm_statistics(),
            "bulk": self._bulk_statistics(),
        }

    def _shm_statistics(self) -> dict[str, Any]:
        pool = self.pool
        return {
            "mode": self.shm_mode,
            "peers": sorted(self._shm_peers),
            "messages_sent": self.shm_messages,
            "bytes_sent": self.shm_bytes,
            "messages_received": self.shm_received,
            "fallback": self.shm_fallback,
            "pool_bytes": pool.used if pool is not None else 0,
            "segments_lent": pool.lent() if pool is not None else 0,
            "bad_releases": pool.bad_releases if pool is not None else 0,
        }

    def _bulk_statistics(self) -> dict[str, Any]:
        out, opener = self.bulk_out, self.bulk_in
        if out is None or opener is None:
            return {"on": False}
        return {
            "on": True,
            "address": self._bulk_address,
            "peers": out.peers(),
            "messages_sent": out.messages,
            "bytes_sent": out.bytes,
            "fallback": out.fallback,
            "messages_received": opener.received,
            "missing": opener.missing,
            "forged": opener.forged,
            "overrun": opener.overrun,
            "buffers_made": out.buffers.made + opener.buffers.made,
            "buffers_reused": out.buffers.reused + opener.buffers.reused,
        }


def _first_unpicklable(part: list) -> tuple[int, str, Any, Exception] | None:
    """(emitting task, stream, row, error) of the first row of `part` that does not
    pickle (packed rows were pickled already), or None."""
    for _, src, stream, values, _ in part:
        if values.__class__ is fr.Packed:
            continue
        for row in values:
            bad = _unpicklable(row)
            if bad is not None:
                return src, stream, row, bad
    return None


def _unpicklable(value: Any) -> Exception | None:
    """Why `value` does not pickle, or None when it does."""
    import pickle

    try:
        pickle.dumps(value, protocol=5)
    except Exception as exc:  # noqa: BLE001 - any pickling error
        return exc
    return None


def _cut(part: list, keep: int) -> list:
    """Cut `part` (in place) to its first `keep` tuples; the batches cut off, in order."""
    rest: list = []
    for i, b in enumerate(part):
        n = len(b[3])
        if keep <= 0:
            rest.extend(part[i:])
            del part[i:]
            break
        # a rejection report stays whole, and so do packed rows (never large: fr.pack)
        if n > keep and type(b[3]) is not RejectedRows and type(b[3]) is not fr.Packed:
            dest, src, stream, values, metas = b
            part[i] = (dest, src, stream, _rows(values, values[:keep]), metas and metas[:keep])
            rest.append((dest, src, stream, _rows(values, values[keep:]), metas and metas[keep:]))
            rest.extend(part[i + 1 :])
            del part[i + 1 :]
            break
        keep -= n
    return rest


def _rows(values: Any, rows: list) -> Any:
    """A slice of a batch's rows, stamped as the batch was (an edge with an age)."""
    if type(values) is StampedRows:
        return StampedRows(rows, values.born)
    return rows


def _connection(frame: Any) -> str | None:
    """The name the ZAP handler gave the connection `frame` came on; None without keys
    (no handshake names connections: every one looks the same)."""
    if frame is None:
        return None
    try:
        return frame.get(CONNECTION)
    except zmq.ZMQError:
        return None


def _count(msg: fr.Message) -> int:
    """The tuples a TUPLES, SHM_TUPLES or BULK_TUPLES message carries (read unpacked)."""
    if msg.kind == fr.Kind.TUPLES:
        return sum(len(b[3]) for b in msg.body)
    return cast(int, msg.body.tuples)


def _head(batch: fr.Batch, k: int) -> fr.Batch:
    """The first `k` tuples of `batch` (its rows unpacked first when packed)."""
    if batch[2].__class__ is fr.Packed:
        batch = fr.unpack([batch])[0]
    src, stream, values, metas = batch
    return (src, stream, values[:k], None if metas is None else metas[:k])
