"""An executor's bounded receive queue, with the overflowQ of Storm's JCQueue.

Items are batches `(src_task, stream, values_list, metas_or_None)`; capacity is counted in
tuples. Producers inside the worker call `try_publish`, which refuses when the batch
does not fit: the caller parks it in its pendingEmitQ (emit never blocks). The receive
path from other workers calls `publish_remote`, which never refuses: a batch that does not
fit, or that arrives while the overflowQ is non-empty (order!), goes to the overflowQ.
`consume` takes the queue, then the overflow, so a task sees each upstream task's tuples
in the order they were emitted.

A consume takes at most `budget` tuples (whole batches, at least one). Taking the whole
queue at once let an executor hold a second queue's worth out of sight: at 1 ms a tuple,
65 s of work behind a 30 s message timeout. Now a tuple waits behind at most
the capacity plus one take, and `taken` (tuples handed out, ever) against the executor's
executed count tells what it holds. While the overflowQ is not empty, local producers
are refused: with a bounded take they could otherwise keep the queue full and the
overflow (remote upstreams, which backpressure has stopped) would wait for ever.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from ..edges import OVERFLOWED
from ..transport.frames import unpack
from ..transport.wakeup import Wakeup
from ..tuple import RejectedRows
from .channel import REJECTED_KEPT, EdgeChannel, LaneChannel
from .modes import BlockingChannel, EpochChannel
from .seams import Batch  # noqa: F401 - (src_task, stream, values, metas)

# an edge with a policy: a channel of channel.py (overflow, lanes) or modes.py (modes)
Channel = EdgeChannel | LaneChannel | BlockingChannel


class ReceiveQueue:
    __slots__ = (
        "capacity",
        "_q",
        "size",
        "overflow",
        "overflow_size",
        "_lock",
        "_event",
        "parked",
        "overflow_high",
        "packed",
        "published",
        "budget",
        "taken",
        "on_drain",
        "local_limit",
        "refused",
        "channels",
        "chan_list",
        "chan_size",
        "takes_roots",
    )

    def __init__(self, capacity: int, budget: int | None = None, remote_reserve: int = 0):
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        # Local producers fill the queue up to `local_limit` only: the rest is headroom for
        # batches from other workers, which cannot be refused (they go to the overflowQ,
        # and the task is flagged to its remote upstreams until it drains). Without it a
        # local upstream that emits in bursts (a split: 8 words a sentence) kept the queue
        # full, and nearly every remote batch overflowed and stopped the other worker.
        self.local_limit = max(1, capacity - remote_reserve)
        self.refused = False  # the last local publish was refused (backpressure)
        # its consumer reads root metas (ack_folder.py) as they are: set when it begins
        self.takes_roots = False
        self.budget = default_budget(capacity) if budget is None else max(1, budget)
        self.taken = 0  # tuples handed to the consumer, ever
        self._q: deque[Batch] = deque()
        self.size = 0
        self.overflow: deque[tuple[Batch, int]] = deque()
        self.overflow_size = 0
        self.overflow_high = 0
        # the link placed packed rows here (transport.frames.Packed): `consume` unpacks
        self.packed = False
        self._lock = threading.Lock()
        self._event = Wakeup()
        self.parked = False
        self.published = 0
        # called (consumer thread, under the lock: it must only set a flag) when a take
        # empties the overflowQ: the link runs its backpressure check then, not up to a
        # whole timer period later, while the remote upstreams wait for the all-clear
        self.on_drain: Any = None
        # edges with a dropping policy: their own channels, by (src_task, stream)
        self.channels: dict[tuple[int, str], Channel] = {}
        self.chan_list: list[Channel] = []
        self.chan_size = 0

    def add_channel(self, keys: list[tuple[int, str]], channel: Channel) -> None:
        """Batches from these (src_task, stream) go to `channel` (before the run)."""
        for k in keys:
            self.channels[k] = channel
        self.chan_list.append(channel)

    def _offer(self, ch: Any, batch: Batch, n: int, local: bool = False) -> None:
        with self._lock:
            ready = ch.offer_local(batch, n) if local else ch.offer(batch, n)
            self.chan_size += ready
            self.published += n
        if self.parked and ready:  # a tuple held back (staged, short of a barrier) wakes nobody
            self._event.set()

    def take_lost(self) -> tuple[list[tuple[list, str]], list[tuple[int, str, list]]]:
        """Tree ids of tuples the channels let go since the last call, with why; and the
        rows `fail` edges rejected, for dead letters."""
        out: list[tuple[list, str]] = []
        rejected: list[tuple[int, str, list]] = []
        with self._lock:
            for ch in self.chan_list:
                if ch.lost:
                    out += ch.lost
                    ch.lost = []
                r = ch.rejected
                if r:
                    rejected += r
                    ch.rejected = []
        return out, rejected

    def reserve(self, ch: EdgeChannel, src: int, k: int) -> bool:
        """Room for k tuples a sender of this worker emitted to a `fail` edge and has not
        published yet (runtime/fanout.py); False: the edge is full, nothing reserved."""
        with self._lock:
            if ch.size + ch.reserved + k > ch.capacity:
                return False
            ch.reserved += k
            ch.reserved_by[src] = ch.reserved_by.get(src, 0) + k
            return True

    def unreserve(self, ch: EdgeChannel, src: int, k: int) -> None:
        with self._lock:
            ch.reserved -= k
            ch.reserved_by[src] -= k

    def top_up(self, ch: EdgeChannel) -> list[tuple[int, int]]:
        """Room the task freed handed to ch's remote senders as credit (the link's
        thread): (sender task, its new total) for each whose total grew."""
        credits = ch.credits
        assert credits is not None
        with self._lock:
            given, changed = credits.top_up(ch.capacity - ch.size - ch.reserved, ch.reserved_by)
            ch.reserved += given
        return changed

    def totals(self, ch: EdgeChannel, srcs: list[int]) -> list[tuple[int, int]]:
        credits = ch.credits
        assert credits is not None
        with self._lock:
            return credits.totals(srcs)

    def restart_senders(self, ch: EdgeChannel, srcs: list[int]) -> list[tuple[int, int]]:
        """ch's senders `srcs` are a new incarnation: they start from their initial
        credit (runtime/credits.py). Returns their totals, to send them."""
        credits = ch.credits
        assert credits is not None
        with self._lock:
            ch.reserved += credits.restart(srcs, ch.reserved_by)
            return credits.totals(srcs)

    def reject(self, ch: EdgeChannel, batch: Batch, k: int, withheld: int) -> None:
        """A fan-out refused at emit because this `fail` edge is full (a sender here had no
        room, or one in another worker no credit): counted here as arrived and rejected,
        its trees failed by this task's executor (reason `overflow`), its rows
        dead-lettered where someone reads them."""
        src, stream, values, metas = batch
        with self._lock:
            st = ch.stats
            st.arrived += k
            st.rejected += k
            full = min(ch.size + ch.reserved, ch.capacity)
            st.note(
                f"fail: no room for {k} ({full}/{ch.capacity} held), {k} rejected with their "
                f"fan-out ({withheld} deliveries to other edges withheld)"
            )
            if metas is not None and any(metas):
                ch.lost.append((metas, OVERFLOWED))
            kept = ch.rejected
            if kept and kept[-1][0] == src and kept[-1][1] == stream:
                kept[-1][2].extend(values)  # one emit at a time: rows of a sender together
            elif kept is not None and len(kept) < REJECTED_KEPT:
                kept.append((src, stream, list(values)))
        self._event.set()  # the trees fail on its next turn

    def flush_held(self) -> int:
        """The input has ended: what channels hold back (a barrier's remainder short of n,
        an epoch edge's staged tuples) may go. Returns the tuples released."""
        return self._release(BlockingChannel, "flush")

    def advance_epoch(self) -> int:
        """The worker's epoch advanced: epoch edges' staged tuples become visible, and
        the task is woken for them (not when they were staged)."""
        return self._release(EpochChannel, "advance")

    def _release(self, kind: type, how: str) -> int:
        got = 0
        with self._lock:
            for ch in self.chan_list:
                if isinstance(ch, kind):
                    got += getattr(ch, how)()
            self.chan_size += got
        if got:
            self._event.set()
        return got

    def held(self) -> int:
        """Tuples channels hold back (not in `len`: the consumer cannot take them, and
        must not spin on them)."""
        blocking: list[Any] = [ch for ch in self.chan_list if isinstance(ch, BlockingChannel)]
        return sum(ch.size - ch.ready() for ch in blocking)

    def try_publish(self, batch: Batch, n: int) -> bool:
        """Place a batch of n tuples if it fits; False means full (nothing was placed).
        A batch of an edge with a channel always fits: its policy decides."""
        if self.channels:
            ch = self.channels.get((batch[0], batch[1]))
            if ch is not None:
                if ch.refuses(n):  # an ordered_lanes edge that is full
                    return False
                self._offer(ch, batch, n, True)
                return True
        with self._lock:
            size = self.size
            if (size + n > self.local_limit and size) or self.overflow:
                self.refused = True
                return False
            self.size = size + n
            self._q.append(batch)
            self.published += n
            self.refused = False
        if self.parked:
            self._event.set()
        return True

    def publish_force(self, batch: Batch, n: int) -> None:
        """For system tuples (ticks, local control) that must never be refused or dropped."""
        with self._lock:
            self.size += n
            self._q.append(batch)
            self.published += n
        if self.parked:
            self._event.set()

    def publish_remote(self, batch: Batch, n: int) -> int:
        """Never refuses. Returns the overflow size afterwards (0: it went to the queue,
        or to its edge's channel)."""
        if self.channels:
            ch = self.channels.get((batch[0], batch[1]))
            if ch is not None:
                if ch.credits is not None:  # a `fail` edge whose remote senders hold credits
                    values = batch[2]
                    if values.__class__ is RejectedRows:  # a fan-out withheld at its sender
                        self.reject(ch, batch, n, values.withheld)
                    else:
                        self._offer(ch, batch, n, True)  # what credit paid for is placed
                    return 0
                self._offer(ch, batch, n)
                return ch.excess()  # past an ordered_lanes edge's capacity: flag it
        with self._lock:
            if not self.overflow and (self.size + n <= self.capacity or not self.size):
                self.size += n
                self._q.append(batch)
                self.published += n
                ov = 0
            else:
                self.overflow.append((batch, n))
                ov = self.overflow_size = self.overflow_size + n
                if ov > self.overflow_high:
                    self.overflow_high = ov
                self.published += n
        if self.parked:
            self._event.set()
        return ov

    def overflow_room(self, n: int, limit: int) -> int:
        """How many of `n` tuples arriving now may go in under the overflow limit
        (Storm's JCQueue checks it per tuple): all when they fit the queue, else what the
        overflowQ has left below `limit`. A batch goes whole to the queue or whole to the
        overflowQ (publish_remote), so the answer holds for the publish that follows on
        the same thread (the consumer only empties them meanwhile)."""
        with self._lock:
            if not self.overflow and (self.size + n <= self.capacity or not self.size):
                return n
            return max(0, min(n, limit - self.overflow_size))

    def consume(self) -> list[Batch] | None:
        """Take up to `budget` tuples, the queue first, then the overflow; None when both
        are empty. Edge channels are taken after the queue, each up to the budget."""
        if self.chan_size:
            return self._consume_channels()
        with self._lock:
            q = self._q
            if not q and not self.overflow:
                return None
            size = self.size
            if not self.overflow and size <= self.budget:  # all of it fits: one step
                out = list(q)
                q.clear()
                self.size = 0
                self.taken += size
            else:
                out = self._take()
        if self.packed:  # rows from another worker still pickled: rows now, right before use
            return unpack(out)
        return out

    def put_back(self, batches: list[Batch]) -> None:
        """What the consumer took and did not execute goes back to the head of the queue,
        in order: its emits parked after some row, and Storm's consume stops there
        (JCQueue.consume checks the bolt's exit condition before each element), leaving
        the rest in the queue. `batches` is the end of a take, its first batch possibly
        a remainder. Ahead of everything, whatever part it came from (queue, overflowQ,
        an edge's channel): everything of the same upstream not taken is behind it. It
        counts in `size` (and so in the load and refusals that producers see) and is
        no longer `taken`."""
        n = 0
        for b in batches:
            n += len(b[2])
        with self._lock:
            self._q.extendleft(reversed(batches))
            self.size += n
            self.taken -= n

    def _take(self) -> list[Batch]:
        """Whole batches up to the budget, queue before overflow (order); under the lock."""
        budget, q, ov = self.budget, self._q, self.overflow
        out: list[Batch] = []
        taken = 0
        while q and taken < budget:
            b = q.popleft()
            out.append(b)
            taken += len(b[2])
        self.size -= taken
        moved = 0
        while ov and not q and taken + moved < budget:
            b, n = ov.popleft()
            out.append(b)
            moved += n
        self.overflow_size -= moved
        self.taken += taken + moved
        if moved and not ov and self.on_drain is not None:
            self.on_drain()
        return out

    def _consume_channels(self) -> list[Batch] | None:
        with self._lock:
            out = self._take() if (self._q or self.overflow) else []
            got = 0
            drained = False
            for ch in self.chan_list:
                if ch.size:  # a barrier's that is not ready gives nothing
                    over = ch.excess()
                    got += ch.take(self.budget, out)
                    drained = drained or (over > 0 and not ch.excess())
            self.chan_size -= got
            self.taken += got
            if drained and self.on_drain is not None:
                self.on_drain()
            return out or None

    def settle(self, key: tuple[int, str], n: int) -> None:
        """`n` tuples of an ordered_lanes edge settled: room for as many more."""
        ch = self.channels.get(key)
        if ch is not None:
            with self._lock:
                ch.settle(n)

    def backlog(self) -> int:
        """What backpressure towards other workers counts: the overflowQ, and what
        ordered_lanes edges hold past their capacity."""
        return self.overflow_size + sum(ch.excess() for ch in self.chan_list)

    def __len__(self) -> int:
        return self.size + self.overflow_size + self.chan_size

    def has_data(self) -> bool:
        return bool(self._q) or bool(self.overflow) or self.chan_size > 0

    def wait(self, timeout: float) -> None:
        """Park the consumer until a publish or `timeout`; safe against lost wake-ups
        because `parked` is set before the emptiness check and producers test it after
        appending."""
        self.parked = True
        if not self._q and not self.overflow and not self.chan_size:
            self._event.wait(timeout)
        self.parked = False
        self._event.clear()

    def load(self) -> float:
        """Fill ratio as this worker's producers see it, for load-aware shuffles: the
        share of `local_limit` taken; 1 while the overflowQ holds batches or when the
        last local publish was refused (backpressure). Against the whole
        capacity a remote-fed task read at most 0.5, and the fill alone peaks near 0.75
        (the consumer holds a take out of sight): a locality-aware shuffle (bound 0.8)
        never spilled to the other worker."""
        if self.overflow_size or self.refused:
            return 1.0
        return min(1.0, self.size / self.local_limit)

    def share_wakeup(self, wakeup: Wakeup) -> None:
        """Signal `wakeup` instead: one scheduler thread waits for all its queues."""
        self._event = wakeup

    def own_wakeup(self) -> None:
        """Back to a wake-up of its own (its executor got a thread of its own)."""
        self._event = Wakeup()

    def wake(self) -> None:
        self._event.set()

    def snapshot(self) -> dict[str, Any]:
        return {
            "population": self.size,
            "capacity": self.capacity,
            "overflow": self.overflow_size,
            "overflow_high": self.overflow_high,
        }


def default_budget(capacity: int) -> int:
    """What one consume takes at most: an eighth of the queue (512 of the default 4,096,
    one producer batch), so what a tuple waits behind is at most 9/8 of the capacity; a
    bolt's turn goes on taking while it lasts, so a small take costs no throughput."""
    return max(1, capacity // 8)
