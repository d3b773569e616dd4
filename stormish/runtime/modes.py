"""The channels of edges with a `mode` (stormish.edges, docs/edges.md): how an edge
delivers, beside what it keeps.

All of them block as Storm's edge does, never drop: a local sender is refused once the
channel holds more than its capacity (its pendingEmitQ, then backpressure), a batch from
another worker is never refused and what is past the capacity flags the task to that
worker (`excess`). What waits is `size`; what the task may take now is `ready()` (the
queue counts only that, so a consumer never spins on tuples it cannot take); the rest is
held until something happens: a barrier fills, an epoch advances, the input ends
(`flush`). Called under the owning queue's lock, as EdgeChannel.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import threading
import urllib.parse
from collections import deque
from typing import Any

from ..edges import EdgePolicy
from .channel import EdgeStats
from .seams import Batch

# The metas of a latched tuple sent again to a worker that (re)connected: no tree (its
# own completed or failed long ago), and the receiving channel takes it only if its task
# has had nothing on the edge from that sender yet (each task sees it once).
LATCHED = "__latched__"
log = logging.getLogger("stormish.edges")


class BlockingChannel:
    """Storm's edge in a channel of its own: every tuple, in order."""

    __slots__ = ("policy", "stats", "capacity", "batches", "size", "lost", "rejected")
    credits = None  # never fed on credit (a `fail` edge's, runtime/credits.py)

    def __init__(self, policy: EdgePolicy, stats: EdgeStats, capacity: int):
        self.policy = policy
        self.stats = stats
        self.capacity = max(capacity, policy.capacity or 1)
        self.batches: deque[tuple] = deque()
        self.size = 0
        self.lost: list[tuple[list, str]] = []  # never used: nothing is let go
        self.rejected: list[tuple[int, str, list]] | None = None

    def ready(self) -> int:
        return self.size

    def refuses(self, n: int) -> bool:
        return self.size > 0 and self.size + n > self.capacity

    def excess(self) -> int:
        return max(0, self.size - self.capacity)

    def settle(self, n: int) -> None:
        pass

    def flush(self) -> int:
        """The input has ended: what is held may go. Returns the change in `ready()`."""
        return 0

    def offer(self, batch: Batch, n: int) -> int:
        """Returns the change in tuples ready to leave (what the queue counts)."""
        st = self.stats
        st.arrived += n
        before = self.ready()
        self._place(batch, n)
        self.size += n
        if self.size > st.high:
            st.high = self.size
        st.queued = self.size
        return self.ready() - before

    def _place(self, batch: Batch, n: int) -> None:
        self.batches.append(batch)

    def offer_local(self, batch: Batch, n: int) -> int:
        return self.offer(batch, n)

    def take(self, budget: int, out: list) -> int:
        """Whole ready batches up to `budget` tuples (at least one) into `out`."""
        bs = self.batches
        taken = 0
        while bs and (taken < budget or not taken):
            b = bs.popleft()
            out.append(b)
            taken += len(b[2])
        self.size -= taken
        self.stats.queued = self.size
        return taken


class BarrierChannel(BlockingChannel):
    """A `mode="barrier"` edge at one task: tuples wait until `n` are here, then leave
    together as one batch, in arrival order (one upstream task's tuples in the order it
    emitted them), whichever upstream tasks they came from (the batch names the first's).
    At the end of the input the remainder leaves too, short (`flush`)."""

    __slots__ = ("n", "flushing")

    def __init__(self, policy: EdgePolicy, stats: EdgeStats, capacity: int):
        super().__init__(policy, stats, capacity)
        self.n = policy.capacity or 1
        self.flushing = False  # the input has ended: the remainder may leave, short

    def ready(self) -> int:
        if self.flushing:
            return self.size
        return self.size - self.size % self.n

    def flush(self) -> int:
        before = self.ready()
        self.flushing = True
        return self.ready() - before

    def take(self, budget: int, out: list) -> int:
        """Batches of n (at least one when ready) up to `budget` tuples into `out`."""
        taken = 0
        while self.ready() and (taken < budget or not taken):
            k = self._cut(out)
            self.size -= k
            taken += k
        self.stats.queued = self.size
        return taken

    def _cut(self, out: list) -> int:
        """One batch of n (or the flushed remainder) from the front, across batches."""
        want = min(self.n, self.size)
        bs = self.batches
        src, stream, values, metas = bs[0]
        if len(values) == want:  # the common shape: one upstream batch of exactly n
            bs.popleft()
            out.append((src, stream, values, metas))
            return want
        rows: list = []
        tracked = False
        ms: list = []
        while len(rows) < want:
            s, _, vals, m = bs[0]
            k = min(len(vals), want - len(rows))
            rows += vals[:k]
            ms += m[:k] if m is not None else [None] * k
            tracked = tracked or m is not None
            if k == len(vals):
                bs.popleft()
            else:
                bs[0] = (s, stream, vals[k:], None if m is None else m[k:])
        out.append((src, stream, rows, ms if tracked else None))
        return want


class LatchedChannel(BlockingChannel):
    """A `mode="latched"` edge at one task: Storm's edge, plus the sender's last tuple
    again when this worker (re)connects (`Latching`), taken only by a task that has seen
    nothing from that sender on the edge: a restarted worker's tasks get it once, the
    others never twice. `replayed`: tuples taken so (sent by no one in this run's counts:
    the worker adds them to what was transferred)."""

    __slots__ = ("seen", "replayed")

    def __init__(self, policy: EdgePolicy, stats: EdgeStats, capacity: int):
        super().__init__(policy, stats, capacity)
        self.seen: set[int] = set()  # upstream tasks heard from
        self.replayed = 0

    def offer(self, batch: Batch, n: int) -> int:
        src, stream, values, metas = batch
        if metas is not None and metas[0] == LATCHED:
            if src in self.seen:
                return 0  # had it (or newer) already: never twice
            self.replayed += n
            batch = (src, stream, values, None)
        self.seen.add(src)
        return super().offer(batch, n)


class Latching:
    """A sender's view of a task in another worker on a latched edge: it remembers the
    last tuple published to it, for the link to send again when that worker (re)connects
    (`again`). One attribute written by the sender's thread, read by the link's.

    With a data directory (`path`), the last tuple is also kept on disk, so that a
    restarted sending worker, whose task may never publish it again (a bolt that
    computed it once), still has it for a task that starts later (`restore`). The
    sender's publish only marks it `dirty` for the worker's LatchWriter, which writes it
    when it changed, off the sender's thread (a write costs a thousand publishes:
    bench/latch.py)."""

    __slots__ = (
        "target",
        "task",
        "worker",
        "stream",
        "src",
        "last",
        "path",
        "saved",
        "dirty",
        "writer",
    )

    def __init__(
        self,
        target: Any,
        task: int,
        worker: int,
        src: int,
        stream: str,
        path: str | None = None,
        writer: LatchWriter | None = None,
    ):
        self.target, self.task, self.worker = target, task, worker
        self.src, self.stream = src, stream
        self.last: Any = None
        self.path = path
        self.saved: Any = None  # what the file holds
        self.dirty = False  # published since the writer last looked
        self.writer = writer if path is not None else None

    def try_publish(self, batch: Batch, n: int) -> bool:
        if not self.target.try_publish(batch, n):
            return False
        self.last = batch[2][-1]
        w = self.writer
        if w is not None and not self.dirty:
            self.dirty = True
            w.wake()
        return True

    def save(self) -> None:
        """Write the last tuple if it changed since the last write (the writer's thread):
        a pickle to a temporary file renamed over the last, so that a kill leaves the
        old one or the new one, never half of one."""
        self.dirty = False
        last, path = self.last, self.path
        if path is None or not _changed(last, self.saved):
            return
        try:
            data = pickle.dumps(last, protocol=5)
        except Exception as exc:  # noqa: BLE001 - a value pickle cannot write: kept in memory
            edge = f"{self.src}->{self.task} ({self.stream})"
            log.warning(f"latched edge {edge}: not kept on disk: {exc}")
            self.path = None
            return
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        self.saved = last

    def restore(self) -> bool:
        """The last tuple kept on disk by this sender's former incarnation, if any."""
        if self.path is None or not os.path.exists(self.path):
            return False
        try:
            with open(self.path, "rb") as f:
                self.last = self.saved = pickle.load(f)
        except Exception as exc:  # noqa: BLE001 - unreadable: as if there were none
            log.warning(f"latched edge {self.src}->{self.task}: {self.path} unreadable: {exc}")
            return False
        return True

    def forget(self) -> None:
        """A first start: what a former run of the topology kept is not ours."""
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def again(self) -> tuple | None:
        """The last tuple as a transfer item (dest, src, stream, values, metas), if any."""
        last = self.last
        if last is None:
            return None
        return (self.task, self.src, self.stream, [last], [LATCHED])

    def load(self) -> float:
        return self.target.load()


class LatchWriter:
    """A worker's thread that keeps its latched edges' last tuples on disk: a publish
    wakes it, it writes each latch marked dirty (the newest value: a burst of publishes
    is one write), and at `close` it writes what is left."""

    def __init__(self, name: str = "latch-writer"):
        self.latches: list[Latching] = []
        self._event = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._event.set()

    def _run(self) -> None:
        while not self._stop:
            self._event.wait()
            self._event.clear()
            self.flush()

    def flush(self) -> None:
        for lt in self.latches:
            if lt.dirty:
                try:
                    lt.save()
                except OSError as exc:  # a full or read-only disk: kept in memory
                    log.warning(f"latched edge {lt.src}->{lt.task}: {lt.path}: {exc}")

    def close(self) -> None:
        self._stop = True
        self._event.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.flush()


def latch_path(data: str, topology: str, src: int, dest: int, stream: str) -> str:
    """Where a sender keeps a latched edge's last tuple, in its worker's data directory
    (one directory per topology, one file per sending and receiving task and stream)."""
    name = f"{src}-{dest}-{urllib.parse.quote(stream, safe='')}.latch"
    return os.path.join(data, "latched", urllib.parse.quote(topology, safe=""), name)


def _changed(value: Any, saved: Any) -> bool:
    if value is saved:
        return False
    try:
        return not bool(value == saved)
    except Exception:  # noqa: BLE001 - values that do not compare (arrays): written
        return True


class EpochChannel(BlockingChannel):
    """A `mode="previous_tick"` edge at one task: what arrives during an epoch is staged,
    invisible to the task (it does not wake it), and becomes visible when the worker's
    epoch advances (`advance`: the timer of `topology.epoch.millis`, a spout's
    `advance_epoch()`, the end of the input). Staged tuples count towards the capacity:
    a sender refused by a full channel waits for the next epoch at most."""

    __slots__ = ("staged", "staged_size")

    def __init__(self, policy: EdgePolicy, stats: EdgeStats, capacity: int):
        super().__init__(policy, stats, capacity)
        self.staged: list[tuple] = []
        self.staged_size = 0

    def ready(self) -> int:
        return self.size - self.staged_size

    def _place(self, batch: Batch, n: int) -> None:
        self.staged.append(batch)
        self.staged_size += n

    def advance(self) -> int:
        """The epoch advanced: what was staged is visible. Returns how many tuples."""
        k = self.staged_size
        if k:
            self.batches.extend(self.staged)
            self.staged = []
            self.staged_size = 0
        return k

    flush = advance
