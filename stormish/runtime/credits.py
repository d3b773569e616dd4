"""Credits: the all-or-nothing fan-out (runtime/fanout.py) for `fail` edges into tasks of
another worker.

A sender cannot ask a remote edge for room at each emit (a round trip per tuple), so the
receiving worker hands room out ahead: each sending task holds credits, a part of the
edge's channel reserved for it (`EdgeChannel.reserved_by`). An emit spends one credit a
tuple (`SenderCredit.reserve`); a tuple sent on a credit is placed whatever the fill when
it arrives (the room was set aside for it), so it is never rejected there. With no
credit left the edge is full for that sender: the guard withholds the whole fan-out and
reports the rejection to the receiving worker (`RejectedRows`), which counts it on the
edge as it counts a local one. As the task consumes, the receiving worker tops each
sender's credit up again from the channel's free room (`ReceiverCredits.top_up`) and
sends the new totals on the worker link (a CONTROL message `{"credits": ...}`).

Totals are cumulative, so a lost or repeated grant does no harm (the next one carries
the total). Both sides start from the same grants without a message, computed from the
plan (`initial_credits`). A new incarnation of either side starts over: the receiver,
told by a sender's HELLO that the sender restarted, releases what the old one held and
grants the initial share again; the sender, told by a receiver's HELLO that it
restarted, forgets what it spent and starts from the initial share (grants carry both
incarnations, so one meant for a former incarnation is ignored). Tuples in flight at a
restart may then land beyond the channel's capacity, by a share at most, once.

Pure: no sockets, no threads; the link calls these under the queue's lock (receiver)
or under the credit's own lock (sender).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

from ..tuple import RejectedRows
from .seams import Batch


def share_of(capacity: int, senders: Sequence[int]) -> int:
    """The credit a remote sender may hold unspent: an equal share of the channel per
    sending task (local ones included: they reserve from what is left), at least 1."""
    return max(1, capacity // max(1, len(senders)))


def initial_credits(capacity: int, senders: Sequence[int], remote: Iterable[int]) -> dict[int, int]:
    """The credit each remote sender starts with: its share (`share_of`), never more in
    all than `capacity` (more senders than room: the last start with none, and get
    credit as room frees). Both sides compute it from the plan."""
    share = share_of(capacity, senders)
    left = capacity
    out = {}
    for src in sorted(remote):
        give = min(share, left)
        out[src] = give
        left -= give
    return out


class ReceiverCredits:
    """One `fail` edge at one task: what it granted each remote sending task (a total
    since that sender's incarnation started), and the share each may hold unspent.
    The outstanding credit of a sender is the channel's `reserved_by[src]`: room set
    aside, taken back as its tuples arrive (`EdgeChannel.offer_local`)."""

    __slots__ = ("initial", "share", "granted", "dirty", "turn")

    def __init__(self, initial: dict[int, int], share: int | None = None):
        self.initial = dict(initial)
        # what each may hold unspent (its initial credit, or `share` where that is more)
        self.share = {s: max(k, share or 0) for s, k in initial.items()}
        self.granted = dict(initial)
        self.dirty = False  # the task consumed: room may be handed out again
        self.turn = 0  # where the next top-up starts: room short for all goes round

    def start(self, reserved_by: dict[int, int]) -> int:
        """The initial grants, reserved in the channel; returns the room they take."""
        for src, k in self.initial.items():
            reserved_by[src] = reserved_by.get(src, 0) + k
        return sum(self.initial.values())

    def top_up(self, free: int, reserved_by: dict[int, int]) -> tuple[int, list[tuple[int, int]]]:
        """Hand out up to `free` room, each sender up to its share unspent. Returns the
        room given and the senders whose total changed, with their new total."""
        self.dirty = False
        given = 0
        changed = []
        srcs = list(self.share)
        start = self.turn % len(srcs) if srcs else 0
        for i in range(start, start + len(srcs)):
            if free <= 0:
                break
            src = srcs[i % len(srcs)]
            want = self.share[src] - reserved_by.get(src, 0)
            if want <= 0:
                continue
            k = min(want, free)
            reserved_by[src] = reserved_by.get(src, 0) + k
            self.granted[src] += k
            free -= k
            given += k
            changed.append((src, self.granted[src]))
            self.turn = i + 1
        return given, changed

    def restart(self, srcs: Iterable[int], reserved_by: dict[int, int]) -> int:
        """Senders `srcs` restarted: what their predecessor held is released and they
        start from their initial grant again. Returns the change in room reserved."""
        delta = 0
        for src in srcs:
            if src not in self.initial:
                continue
            k = self.initial[src]
            delta += k - reserved_by.get(src, 0)
            reserved_by[src] = k
            self.granted[src] = k
        return delta

    def totals(self, srcs: Iterable[int]) -> list[tuple[int, int]]:
        return [(s, self.granted[s]) for s in srcs if s in self.granted]


class SenderCredit:
    """A sending task's view of one task in another worker on a `fail` edge: the outbox's
    target, wrapped. `reserve` spends credit at emit (the guard's thread), `grant` and
    `restart` come from the link's thread: a lock keeps them apart. Rejections wait in
    `report` until the link sends them (`take_report`)."""

    __slots__ = (
        "target",
        "task",
        "worker",
        "src",
        "stream",
        "initial",
        "limit",
        "spent",
        "peer",
        "report",
        "_lock",
        "reports",
    )

    def __init__(
        self, target: Any, task: int, worker: int, src: int, stream: str, initial: int, reports: Any
    ):
        self.target, self.task, self.worker = target, task, worker
        self.src, self.stream = src, stream
        self.initial = initial
        self.limit = initial  # the total granted (this incarnation of us and of the peer)
        self.spent = 0
        self.peer: str | None = None  # the receiving worker's incarnation, once heard
        self.report: list | None = None  # [values, metas or None, n, withheld]
        self._lock = threading.Lock()
        self.reports = reports  # the worker's Reports: tells the link there is one

    # -- the sender's thread --------------------------------------------------------------
    def try_publish(self, batch: Batch, n: int) -> bool:
        return self.target.try_publish(batch, n)

    def load(self) -> float:
        return self.target.load()

    def reserve(self, src: int, k: int) -> bool:
        with self._lock:
            if self.spent + k > self.limit:
                return False
            self.spent += k
            return True

    def unreserve(self, src: int, k: int) -> None:
        with self._lock:
            self.spent -= k

    def reject(self, batch: Batch, k: int, withheld: int) -> None:
        """No credit for the emit: kept for the link to report to the edge's worker."""
        _, _, values, metas = batch
        with self._lock:
            rep = self.report
            if rep is None:
                rep = self.report = [[], None, 0, 0]
                self.reports.add(self)
            if metas is not None and rep[1] is None:
                rep[1] = [None] * len(rep[0])
            rep[0].extend(values)
            if rep[1] is not None:
                rep[1].extend(metas if metas is not None else [None] * k)
            rep[2] += k
            rep[3] += withheld

    def room(self) -> int:
        return self.limit - self.spent

    # -- the link's thread ----------------------------------------------------------------
    def grant(self, peer: str, total: int) -> bool:
        """The receiver's total for us; False: from another incarnation (ignored)."""
        with self._lock:
            if self.peer is None:
                self.peer = peer
            elif peer != self.peer:
                return False
            if total > self.limit:
                self.limit = total
            return True

    def restart(self, peer: str) -> None:
        """The receiving worker is a new incarnation: it starts from the initial grant."""
        with self._lock:
            self.peer = peer
            self.spent = 0
            self.limit = self.initial

    def meet(self, peer: str) -> None:
        """The receiving worker's first HELLO: the incarnation the initial grant is with."""
        with self._lock:
            if self.peer is None:
                self.peer = peer

    def take_report(self) -> tuple | None:
        """The rejections kept, as a transfer item (dest, src, stream, rows, metas)."""
        with self._lock:
            rep, self.report = self.report, None
        if rep is None:
            return None
        values, metas, n, withheld = rep
        return (self.task, self.src, self.stream, RejectedRows(values, withheld), metas)


class Reports:
    """The credits of a worker with rejections to report; the link takes them."""

    __slots__ = ("pending", "_lock", "wake")

    def __init__(self) -> None:
        self.pending: list[SenderCredit] = []
        self._lock = threading.Lock()
        self.wake: Any = None  # the transfer queue's wake, once a link is attached

    def add(self, credit: SenderCredit) -> None:
        with self._lock:
            self.pending.append(credit)
        if self.wake is not None:
            self.wake()

    def take(self) -> list[tuple[int, tuple]]:
        """(worker, transfer item) for every rejection kept."""
        with self._lock:
            credits, self.pending = self.pending, []
        out = []
        for c in credits:
            item = c.take_report()
            if item is not None:
                out.append((c.worker, item))
        return out


class WorkerCredits:
    """A worker's credits, for its link: the `fail` channels of its tasks fed on credit
    (`inbound`: queue, channel, sender task -> worker) and the credits its tasks hold
    on edges into other workers (`outbound`, by (dest task, sender task))."""

    def __init__(self) -> None:
        self.inbound: list[tuple[Any, Any, dict[int, int]]] = []
        self.outbound: dict[tuple[int, int], SenderCredit] = {}
        self.reports = Reports()

    def __bool__(self) -> bool:
        return bool(self.inbound or self.outbound)

    def dirty(self) -> bool:
        """A task consumed from a channel fed on credit: room to hand out again."""
        return any(ch.credits.dirty for _, ch, _ in self.inbound)

    def top_up(self) -> dict[int, list[list[int]]]:
        """New totals to send, by sending worker: [[dest task, sender task, total]]."""
        out: dict[int, list[list[int]]] = {}
        for q, ch, workers in self.inbound:
            if ch.credits.dirty:
                for src, total in q.top_up(ch):
                    out.setdefault(workers[src], []).append([ch.stats.task, src, total])
        return out

    def totals(self) -> dict[int, list[list[int]]]:
        """Every total granted, by sending worker: sent again now and then, as a grant
        message lost (a peer's control backlog at its bound) would otherwise leave a
        sender short of credit until the next HELLO."""
        out: dict[int, list[list[int]]] = {}
        for q, ch, workers in self.inbound:
            for src, total in q.totals(ch, list(workers)):
                out.setdefault(workers[src], []).append([ch.stats.task, src, total])
        return out

    def hello(self, peer: int, incarnation: str, new: bool, restarted: bool) -> list[list[int]]:
        """Worker `peer` said HELLO (`new`: an incarnation not seen before; `restarted`:
        one that replaced another). As a receiver: a new incarnation's senders start
        from their initial credit; as a sender: a restarted receiver has forgotten what
        we spent. Returns every total `peer`'s senders hold from us, to send it."""
        for c in self.outbound.values():
            if c.worker == peer:
                c.restart(incarnation) if restarted else c.meet(incarnation)
        rows: list[list[int]] = []
        for q, ch, workers in self.inbound:
            srcs = [s for s, w in workers.items() if w == peer]
            if not srcs:
                continue
            totals = q.restart_senders(ch, srcs) if new else q.totals(ch, srcs)
            rows += [[ch.stats.task, s, t] for s, t in totals]
        return rows

    def grant(self, peer: int, incarnation: str, rows: list) -> int:
        """Totals from worker `peer`'s `incarnation`; returns how many were ignored
        (unknown edges, another incarnation of the peer)."""
        ignored = 0
        for dest, src, total in rows:
            c = self.outbound.get((dest, src))
            if c is None or c.worker != peer or not c.grant(incarnation, total):
                ignored += 1
        return ignored
