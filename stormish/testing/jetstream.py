"""MemoryJetStream: an in-memory JetStream with the contract JetStreamSpout and
JetStreamSink rely on, for deterministic tests with no server. Import it from
`stormish.testing`.

    js = MemoryJetStream(clock=FakeClock())     # or any callable returning seconds
    js.add_stream("ORDERS", ["orders.>"])
    js.publish("orders.eu", b"42")               # -> stream sequence 1
    spout = JetStreamSpout(js, "ORDERS", "orders.>", "worker", ack_wait_secs=5)

What it keeps as JetStream does: subjects with `*` and `>` wildcards, one sequence per
stream, durable pull consumers (shared by every puller of the name) with explicit acks,
`ack`, `nak(delay)`, `term`, `in_progress`, redelivery once `ack_wait` passes without
an ack, `max_deliver` (a message delivered that many times is not delivered again),
`max_ack_pending` (a fetch returns nothing at the bound), and the consumer's position
(delivered, num_ack_pending, num_pending). Time is the injected clock, so a test moves
past an ack_wait without sleeping.

The object is shared by name inside one process (a pickled copy, as each task of a
topology gets, finds the original): use it with LocalCluster's in-process worker.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..nats.pull import ACK, FORGET, NAK, PROGRESS, TERM, ConsumerPosition, Window, reached_end

_registry: dict[str, MemoryJetStream] = {}


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: `*` is one token, a final `>` one or more."""
    p, s = pattern.split("."), subject.split(".")
    for i, tok in enumerate(p):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(p) == len(s)


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    subject: str
    data: bytes
    headers: dict[str, str] | None


@dataclass
class _Pending:
    due: float  # redelivered once the clock passes this (ack_wait, or a nak's delay)
    deliveries: int


@dataclass
class MemoryMsg:
    """One delivery of a stored message (as a nats Msg: ack/nak/term/in_progress)."""

    consumer: MemoryConsumer
    message: StoredMessage
    num_delivered: int

    @property
    def seq(self) -> int:
        return self.message.seq

    def ack(self) -> None:
        self.consumer.settle(self, ACK)

    def nak(self, delay: float | None = None) -> None:
        self.consumer.settle(self, NAK, delay)

    def term(self) -> None:
        self.consumer.settle(self, TERM)

    def in_progress(self) -> None:
        self.consumer.settle(self, PROGRESS)


@dataclass
class MemoryConsumer:
    """A durable pull consumer. `acked` and `terminated` hold stream sequences."""

    js: MemoryJetStream
    stream: str
    durable: str
    filter_subject: str
    ack_wait: float = 30.0
    max_deliver: int | None = None
    max_ack_pending: int = 1000
    next_seq: int = 1  # the next stream sequence not yet delivered
    delivered_seq: int = 0
    pending: dict[int, _Pending] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    terminated: set[int] = field(default_factory=set)
    deliveries: int = 0  # every delivery, redeliveries too

    def fetch(self, batch: int) -> list[MemoryMsg]:
        """Up to `batch` deliveries: due redeliveries first (in sequence order), then new
        messages; none past max_ack_pending."""
        with self.js.lock:
            now = self.js.clock()
            out = self._redeliveries(now, batch)
            msgs = self.js.streams[self.stream].messages
            while len(out) < batch and len(self.pending) < self.max_ack_pending:
                if self.next_seq > len(msgs):
                    break
                m = msgs[self.next_seq - 1]
                self.next_seq += 1
                if subject_matches(self.filter_subject, m.subject):
                    self.delivered_seq = m.seq
                    out.append(self._deliver(m, _Pending(0.0, 0), now))
            return out

    def _redeliveries(self, now: float, batch: int) -> list[MemoryMsg]:
        out: list[MemoryMsg] = []
        msgs = self.js.streams[self.stream].messages
        for seq in sorted(self.pending):
            p = self.pending[seq]
            if p.due > now:
                continue
            if self.max_deliver is not None and p.deliveries >= self.max_deliver:
                del self.pending[seq]  # JetStream gives up on it (an advisory, no more)
                continue
            if len(out) < batch:
                out.append(self._deliver(msgs[seq - 1], p, now))
        return out

    def _deliver(self, m: StoredMessage, p: _Pending, now: float) -> MemoryMsg:
        p.deliveries += 1
        p.due = now + self.ack_wait
        self.pending[m.seq] = p
        self.deliveries += 1
        return MemoryMsg(self, m, p.deliveries)

    def settle(self, msg: MemoryMsg, op: str, delay: float | None = None) -> None:
        with self.js.lock:
            p = self.pending.get(msg.seq)
            if p is None or p.deliveries != msg.num_delivered:
                return  # settled already, or an older delivery of a redelivered message
            if op == ACK:
                del self.pending[msg.seq]
                self.acked.add(msg.seq)
            elif op == TERM:
                del self.pending[msg.seq]
                self.terminated.add(msg.seq)
            elif op == NAK:
                p.due = self.js.clock() + (delay or 0.0)
            elif op == PROGRESS:
                p.due = self.js.clock() + self.ack_wait

    def position(self) -> ConsumerPosition:
        with self.js.lock:
            msgs = self.js.streams[self.stream].messages[self.next_seq - 1 :]
            waiting = sum(subject_matches(self.filter_subject, m.subject) for m in msgs)
            return ConsumerPosition(self.delivered_seq, len(self.pending), waiting)


@dataclass
class _Stream:
    subjects: list[str]
    messages: list[StoredMessage] = field(default_factory=list)


class MemoryJetStream:
    """Streams and consumers in memory; see the module docstring."""

    def __init__(self, name: str | None = None, clock: Callable[[], float] | Any = None):
        self.name = name or uuid.uuid4().hex
        now = getattr(clock, "now", clock)
        self.clock: Callable[[], float] = now if now is not None else time.monotonic
        self.lock = threading.RLock()
        self.streams: dict[str, _Stream] = {}
        self.consumers: dict[tuple[str, str], MemoryConsumer] = {}
        _registry[self.name] = self

    def __reduce__(self) -> Any:
        return (_lookup, (self.name,))

    def add_stream(self, name: str, subjects: Sequence[str]) -> None:
        with self.lock:
            self.streams.setdefault(name, _Stream(list(subjects)))

    def publish(
        self, subject: str, data: bytes = b"", headers: dict[str, str] | None = None
    ) -> int:
        """Store a message in the stream whose subjects match; its sequence (a PubAck)."""
        with self.lock:
            for s in self.streams.values():
                if any(subject_matches(p, subject) for p in s.subjects):
                    seq = len(s.messages) + 1
                    s.messages.append(StoredMessage(seq, subject, bytes(data), headers))
                    return seq
        raise LookupError(f"no stream of MemoryJetStream {self.name!r} takes {subject!r}")

    def messages(self, stream: str) -> list[StoredMessage]:
        with self.lock:
            return list(self._stream(stream).messages)

    def last_seq(self, stream: str) -> int:
        with self.lock:
            return len(self._stream(stream).messages)

    def consumer(
        self,
        stream: str,
        durable: str,
        filter_subject: str = ">",
        ack_wait: float = 30.0,
        max_deliver: int | None = None,
        max_ack_pending: int = 1000,
    ) -> MemoryConsumer:
        """The durable consumer, created with these settings when absent."""
        with self.lock:
            self._stream(stream)
            key = (stream, durable)
            if key not in self.consumers:
                self.consumers[key] = MemoryConsumer(
                    self, stream, durable, filter_subject, ack_wait, max_deliver, max_ack_pending
                )
            return self.consumers[key]

    def _stream(self, name: str) -> _Stream:
        s = self.streams.get(name)
        if s is None:
            raise LookupError(f"MemoryJetStream {self.name!r} has no stream {name!r}")
        return s

    # -- what the spout and the sink open ---------------------------------------------
    def pull_source(self, spout: Any) -> MemorySource:
        c = self.consumer(
            spout.stream,
            spout.durable,
            spout.subject,
            spout.ack_wait_secs,
            spout.max_deliver,
            spout.max_ack_pending,
        )
        return MemorySource(
            c, Window(spout.max_ack_pending, spout.batch), self.last_seq(spout.stream)
        )

    def publisher(self, sink: Any) -> MemoryPublisher:
        return MemoryPublisher(self)


def _lookup(name: str) -> MemoryJetStream:
    js = _registry.get(name)
    if js is None:
        raise LookupError(
            f"MemoryJetStream {name!r} lives in another process: it works with LocalCluster's "
            "in-process worker only"
        )
    return js


class MemorySource:
    """The spout's source over a MemoryConsumer (synchronous: no loop thread)."""

    def __init__(self, consumer: MemoryConsumer, window: Window, end_seq: int):
        self.consumer, self.window, self.end_seq = consumer, window, end_seq

    def take(self) -> list | None:
        want = self.window.want()
        msgs = self.consumer.fetch(want) if want else []
        if not msgs:
            return None
        self.window.delivered(len(msgs))
        return [(m.message.subject, m.message.data, m.message.headers, m.seq, m) for m in msgs]

    def settle(self, ops: list) -> None:
        freed = 0
        for op, msg, delay in ops:
            if op != FORGET:
                msg.consumer.settle(msg, op, delay)
            if op != PROGRESS:
                freed += 1
        self.window.settled(freed)

    def pause(self, paused: bool) -> None:
        """Nothing to stop: this source fetches only when next_tuple takes."""

    def delivery(self, msg: MemoryMsg) -> tuple[int, tuple]:
        m = msg.message
        return msg.num_delivered, (m.subject, m.data, m.headers, msg.seq)

    def ended(self) -> bool:
        return reached_end(self.end_seq, self.consumer.position(), self.window.outstanding)

    def close(self) -> None:
        pass


class MemoryPublisher:
    """The sink's publisher: a publish is stored at once and its PubAck is immediate."""

    def __init__(self, js: MemoryJetStream):
        self.js = js
        self.done: list[tuple[Any, str | None]] = []
        self.in_flight = 0

    def publish(self, subject: str, value: bytes, headers: Any, tup: Any) -> None:
        try:
            self.js.publish(subject, value, headers)
            self.done.append((tup, None))
        except LookupError as e:
            self.done.append((tup, str(e)))
        self.in_flight += 1

    def take_done(self) -> list[tuple[Any, str | None]]:
        out, self.done = self.done, []
        self.in_flight -= len(out)
        return out

    def wait(self, timeout: float) -> None:
        pass

    def close(self, timeout: float) -> None:
        pass
