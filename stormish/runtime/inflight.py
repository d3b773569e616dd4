"""A reliable spout's trees in flight: message ids by root, expiry in buckets (Storm's
RotatingMap: O(1) insert, delete and expiry, no scan of live entries), pending counted
without a call per tree, and complete latency per stamp.

Costs are per batch wherever they can be: a tree of one row with nothing else kept (the
usual) is one store at emit (`head[root] = msg_id`, done by the spout's emit closure
itself) and one C-level pop when the acker's completion list comes back. Where
stormish._acking is built, the head is a `RootTable`: a mapping whose roots at the
spout's step from a base live in an array, so the store is an append and the pop a slot
read, nothing hashed (stormish/_roottable.h); else a dict. Only trees with more to keep
(`emit_many`'s row count, the values for `topology.max.replays`) hold a `Tree`.

Complete latency is measured from stamps, not per tree: the spout executor stamps the
next root id with the time at the start of a turn (at most one stamp every
`STAMP_EVERY` seconds), and a completed tree's emit time is its turn's stamp. Roots
come from a counter (ack_folder.AckFolder.new_root), so the stamps are ordered and a
completion list is matched to them with a few bisects per stamp, not per tree. A tree's
latency is therefore over-estimated by at most the turn it was emitted in plus
`STAMP_EVERY` (a turn is bounded: a burst of next_tuple calls).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import MutableMapping
from itertools import repeat
from typing import Any

from .fastack import RootTable
from .fastack import pop_many as _c_pop_many

STAMP_EVERY = 0.00025  # seconds: the resolution of complete latency (buckets from 1 ms)


class Tree:
    """An in-flight tree with more than its message id to keep."""

    __slots__ = ("msg_id", "rows", "values", "stream")

    def __init__(self, msg_id: Any, rows: int, values: Any, stream: str):
        self.msg_id, self.rows, self.values, self.stream = msg_id, rows, values, stream


def parts(entry: Any) -> tuple[Any, int, Any, str]:
    """(msg_id, rows, values, stream) of an entry (a bare message id: one row)."""
    if entry.__class__ is Tree:
        return entry.msg_id, entry.rows, entry.values, entry.stream
    return entry, 1, None, ""


class InFlight:
    """`head` is the newest bucket and never replaced (rotation copies it out), so an
    emit closure may hold it. An entry lives between `buckets - 1` and `buckets`
    rotations. Values are message ids (never None: an unreliable emit is not tracked)
    or `Tree`s. `step`: the step of the spout's roots (ack_folder.AckFolder.root_step),
    which the compiled head's array is laid out by."""

    __slots__ = ("head", "older", "older_n", "trees", "stamp_roots", "stamp_times")

    def __init__(self, buckets: int = 3, step: int = 1):
        if buckets < 2:
            raise ValueError("an in-flight map needs at least 2 buckets")
        self.head: MutableMapping[int, Any] = {} if RootTable is None else RootTable(step)
        self.older: list[dict[int, Any]] = [{} for _ in range(buckets - 1)]
        self.older_n = 0  # entries in the older buckets (len(self) = len(head) + this)
        self.trees = 0  # Tree entries in flight: completions look for them only if any
        self.stamp_roots: list[int] = []  # ascending: the first root of each stamp
        self.stamp_times: list[float] = []

    def __len__(self) -> int:
        return len(self.head) + self.older_n

    def put(self, root: int, entry: Any) -> None:
        if entry.__class__ is Tree:
            self.trees += 1
        self.head[root] = entry

    def pop(self, root: int) -> Any:
        entry = self.head.pop(root, None)
        if entry is None:
            entry = self._pop_older(root)
        if entry is not None and entry.__class__ is Tree:
            self.trees -= 1
        return entry

    def pop_many(self, roots: list[int]) -> tuple[list[Any], list[int]]:
        """Pop each of `roots`: the entries found and their roots, in order (a root
        timed out or failed already is skipped). One C-level pass in the usual case."""
        if _c_pop_many is not None and roots.__class__ is list:
            found, missing = _c_pop_many(self.head, roots)
            if not missing:
                return found, roots
        else:
            found = list(map(self.head.pop, roots, repeat(None, len(roots))))
            if None not in found:
                return found, roots
        entries: list[Any] = []
        kept: list[int] = []
        for root, entry in zip(roots, found, strict=True):
            if entry is None:
                entry = self._pop_older(root)
                if entry is None:
                    continue
            entries.append(entry)
            kept.append(root)
        return entries, kept

    def _pop_older(self, root: int) -> Any:
        """Pop `root` from the older buckets (not the head); None if absent."""
        for b in self.older:
            entry = b.pop(root, None)
            if entry is not None:
                self.older_n -= 1
                return entry
        return None

    def renew(self, root: int) -> Any:
        """Move an entry to the newest bucket (its timeout restarts); None if absent."""
        entry = self.head.get(root)
        if entry is not None:
            return entry
        entry = self._pop_older(root)
        if entry is not None:
            self.head[root] = entry
        return entry

    def rotate(self, now: float, keep_stamps: float) -> dict[int, Any]:
        """Drop the oldest bucket and return it (the expired entries); stamps older
        than `keep_stamps` seconds go too (no live tree is that old)."""
        dead = self.older.pop()
        self.older.insert(0, dict(self.head.items()))
        self.head.clear()
        self.older_n = sum(map(len, self.older))
        if self.trees:
            self.trees -= sum(1 for e in dead.values() if e.__class__ is Tree)
        self.trim_stamps(now, keep_stamps)
        return dead

    def trim_stamps(self, now: float, keep_stamps: float) -> None:
        """Drop the stamps older than `keep_stamps` seconds, the newest always kept. With
        message timeouts off (`topology.enable.message.timeouts` false) nothing rotates,
        and this alone keeps the stamps bounded; a tree older than every stamp kept is
        counted from the oldest (its latency under-stated, never lost)."""
        times = self.stamp_times
        cut = bisect_left(times, now - keep_stamps)
        if cut and cut < len(times):  # the newest stamp always stays
            del times[:cut], self.stamp_roots[:cut]

    def stamp(self, next_root: int, now: float) -> None:
        """Roots from `next_root` on are emitted from `now` on."""
        times = self.stamp_times
        if not times or now - times[-1] >= STAMP_EVERY:
            roots = self.stamp_roots
            if roots and roots[-1] == next_root:
                times[-1] = now  # nothing emitted since the last stamp: move it
            else:
                roots.append(next_root)
                times.append(now)

    def latency(self, roots: list[int], now: float, hist: list[int], bounds: Any) -> float:
        """Count each root's latency into `hist` (by `bounds`, as bisect_right); their sum."""
        sroots, times = self.stamp_roots, self.stamp_times
        if not sroots:
            return 0.0
        ordered = sorted(roots)
        n, pos, total = len(ordered), 0, 0.0
        last = len(sroots) - 1
        while pos < n:
            i = bisect_right(sroots, ordered[pos]) - 1
            if i < 0:
                i = 0  # before the first stamp kept (a very old tree): the oldest time
            end = n if i == last else bisect_left(ordered, sroots[i + 1], pos)
            if end == pos:  # cannot happen with ordered roots; never loop forever
                end = pos + 1
            took = now - times[i]
            hist[bisect_right(bounds, took)] += end - pos
            total += took * (end - pos)
            pos = end
        return total

    def extra_rows(self, entries: list[Any]) -> int:
        """Rows beyond one per entry (emit_many trees), and Tree entries forgotten."""
        if not self.trees:
            return 0
        extra = 0
        for e in entries:
            if e.__class__ is Tree:
                self.trees -= 1
                extra += e.rows - 1
        return extra

    def items(self) -> Any:
        yield from self.head.items()
        for b in self.older:
            yield from b.items()
