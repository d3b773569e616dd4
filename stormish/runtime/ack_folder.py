"""A task's side of XOR acking: tree and edge ids, anchoring, acks folded per tree, and
the messages to its ackers (the acker's side is `acker.py`).

- A spout's tree gets a root id from the task's counter (a random start, so roots of
  different tasks do not meet; the acker only needs them unique). Every delivery of a
  tuple in the tree gets a random 63-bit edge id, recorded beside the values as the
  tuple's meta `((root, edge), ...)`, one pair per tree it belongs to.
- Announced trees (beyond Storm, same outcome): a spout tree with exactly one first
  delivery sends no init. Its tuple's edge is the *announcement* `spout_task << 64`, above
  every edge id, and whoever acks that tuple folds it in as any edge: the acker reads the
  high bits of an ack value as the spout's init arriving with it (init and ack in one
  message; see acker.py). Fails and resets carry the announced task too (`task_of`), so
  the acker can tell the spout of a tree it had not yet heard of.
- Root metas: an announced tuple's meta `((root, spout_task << ANNOUNCE),)` says nothing
  its batch does not (the batch's source task is the spout task), so a reliable spout's
  emit writes the root alone (an int) into an outbox bound for a local task that takes
  them (routing.Outbox.roots_ok): two tuples a row fewer to make, read and free. Every
  reader of a meta here and in the emitters reads a root meta as that pair
  (`tree_pairs`); a consumer that does not take them gets its batches' metas written out
  first (`expand_roots`, bolt_executor.py).
- Anchoring follows Storm: per delivery, each tracked anchor gets a fresh edge id, XORed
  into that anchor's ack value and, for every tree the anchor belongs to, into the
  child's id for that tree. (One edge shared by two anchors of one tree cancels out and
  completes the tree before the child is acked.)
- Acking a tuple tells each of its trees `edge ^ ack value`. Acks are folded: XOR is
  associative and commutative, so a task's acks for one tree between two flushes are
  one `(root, xor)` message. A tree of many tuples (a spout's `emit_many`, a sentence
  split into words that one bolt acks) costs the acker one message per flush. An
  announced tuple acked with nothing anchored to it is its whole tree: such roots go as
  one list per spout task (`done`), which the acker hands back to the spout as it is.
- Acker routing: messages for a tree go to acker `root % ackers`. A spout chooses its
  roots so that this is an acker on its own worker (beyond Storm, which hashes them
  anywhere): the tree's init and the acker's verdict never cross a link.
- A stateful bolt's acks of a committed checkpoint go as one message per acker tagged
  (task, txid), `committed`: a restarted task sends its last commit's again (its previous
  process may have died before they left), and the acker applies each tag once.
- Fails carry why (this component, and the error when an exception failed the tuple);
  resets are published at once (a bolt resets because it is inside a long execute).
- A tuple is settled once: its first ack or fail is the one its trees hear, and a later
  ack or fail of it does nothing (its ack value turns negative, `~value`, which an
  anchoring after it keeps). Storm sends every call, and its acker applies a fail before
  a later ack, ignores an ack after its tree completed and a fail after its tree failed;
  folded acks would instead hear fail-then-ack as an ack (the fail leaves after the acks
  it follows) and ack-twice as no ack at all (the two XORs cancel). ShellBolt refuses a
  second ack or fail of an id, as Storm's does.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Sequence
from operator import length_hint
from typing import Any, cast

from ..tuple import TrackedTuple, Tuple, TupleBatch
from .fastack import expand_roots as _c_expand_roots
from .fastack import fold_runs as _c_fold_runs
from .plan import ACK_ACK, ACK_FAIL, ACK_INIT, ACK_RESET, COMMITTED_ACKS, FIRST_DONE
from .routing import Outbox, Route

_NATIVE = sys.byteorder
# An announcement is `spout_task << ANNOUNCE` (task ids start at 1); edge ids are 63-bit,
# so an ack value's bits from ANNOUNCE up name the tree's spout task, the rest its XOR.
ANNOUNCE = 64
LOW = (1 << ANNOUNCE) - 1
# roots per task: a range this long from a random start stays below 2**63 (a C long:
# the range iterator's fast path) for any acker count up to 2**60 // ROOT_SPAN
ROOT_SPAN = 1 << 59
NO_RUN: Any = object()  # a fold's "no run yet"


def announcement(spout_task: int) -> int:
    """The edge of an announced tree's one first delivery (module doc)."""
    return spout_task << ANNOUNCE


def tree_pairs(meta: Any, task: int) -> Any:
    """A tuple's ((root, edge), ...), a root meta (module doc) of a tuple from `task`
    written out; any other meta as it is."""
    return ((meta, task << ANNOUNCE),) if meta.__class__ is int else meta


def root_meta_error(meta: int) -> ValueError:
    """A root meta (module doc) in a batch whose source is no spout: the folds' error."""
    return ValueError(f"a root meta ({meta}) in a batch that is not from a spout")


def expand_roots(metas: list, announce: int) -> list | None:
    """`metas` with each root meta written out as ((root, announce),), or None when it
    has none: for a consumer that does not take root metas (module doc)."""
    if _c_expand_roots is not None:
        return _c_expand_roots(metas, announce)
    if not any(m.__class__ is int for m in metas):
        return None
    return [((m, announce),) if m.__class__ is int else m for m in metas]


def task_of(edge: int) -> int:
    """The spout task an edge (or a folded ack value) announces; 0 if none."""
    return edge >> ANNOUNCE


def xor_words(raw: bytes) -> int:
    """XOR of the native-order unsigned 64-bit words of `raw`, by folding one big int in
    halves: a few C-level big-int operations instead of a Python XOR per word (~40 ns
    each: a 64-bit int is a fresh object)."""
    words = len(raw) // 8
    x = int.from_bytes(raw, _NATIVE)
    width = 1 << (words - 1).bit_length() if words > 1 else 1  # words, a power of two
    while width > 1:
        width >>= 1
        shift = width << 6
        x = (x >> shift) ^ (x & ((1 << shift) - 1))
    return x


def _acker_boxes(route: Route | None) -> list[Outbox]:
    """The acker outboxes of an ack stream, indexed so that box i is acker task i."""
    return list(route.outboxes) if route is not None and route.single is not None else []


class AckFolder:
    """Ids, anchoring and folded acks for one task; `flush_box` publishes an outbox."""

    __slots__ = (
        "component",
        "task",
        "batch_size",
        "flush_box",
        "rand",
        "randbytes",
        "ack_boxes",
        "init_boxes",
        "fail_route",
        "reset_route",
        "root_n",
        "root_k",
        "roots",
        "root_stop",
        "root_step",
        "acks",
        "done_n",
    )

    def __init__(
        self,
        component: str,
        task: int,
        routes: dict[str, Route],
        local_tasks: set[int],
        batch_size: int,
        flush_box: Callable[[Outbox], None],
        rand: Any,
    ):
        self.component = component
        self.task = task
        self.batch_size = batch_size
        self.flush_box = flush_box
        self.rand: Callable[[int], int] = rand.getrandbits
        self.randbytes: Callable[[int], bytes] = rand.randbytes
        self.ack_boxes = _acker_boxes(routes.get(ACK_ACK))
        self.init_boxes = _acker_boxes(routes.get(ACK_INIT))
        self.fail_route = routes.get(ACK_FAIL)
        self.reset_route = routes.get(ACK_RESET)
        n = len(self.init_boxes)
        local = [i for i, ob in enumerate(self.init_boxes) if ob.task in local_tasks]
        self.root_n = n if local and n > 1 else 0  # 0: any root will do
        self.root_k = local[task % len(local)] if local else 0
        # roots: a counter from a random start, stepping by the ackers so that every root
        # is `root_k` modulo them (new_root); a C iterator, so a root costs one next()
        step = self.root_n or 1
        # never 0: a root meta (module doc) is the root itself, and 0 reads as no tree
        start = (self.rand(60) or 1) * step + (self.root_k if self.root_n else 0)
        self.root_step = step
        self.root_stop = start + step * ROOT_SPAN
        self.roots = iter(range(start, self.root_stop, step))
        self.acks: dict[int, int] = {}  # root -> XOR of acks not yet sent
        self.done_n = 0  # roots in `done` rows not yet flushed

    # -- ids ------------------------------------------------------------------------------
    def new_root(self) -> int:
        return next(self.roots)

    def next_root(self) -> int:
        """The root `new_root` returns next, without taking it (the spout's stamps)."""
        return self.root_stop - length_hint(self.roots) * self.root_step

    def first_edges(self, deliveries: int) -> tuple[list[int], int | None]:
        """The edges of a new spout tree's first deliveries, and the init's XOR (None: no
        init). One delivery: the announcement, no init; else a random edge each."""
        if deliveries == 1:
            return [announcement(self.task)], None
        rand = self.rand
        edges = [rand(63) for _ in range(deliveries)]
        xor = 0
        for e in edges:
            xor ^= e
        return edges, xor

    def anchor(self, anchors: Sequence[Tuple]) -> tuple[tuple[int, int], ...] | None:
        """The meta of one delivery anchored to `anchors` (Storm's rule, module doc)."""
        rand = self.rand
        ids: dict[int, int] = {}
        for a in anchors:
            meta = a.meta
            if meta:
                if meta.__class__ is int:
                    meta = tree_pairs(meta, a.source.task)
                e = rand(63)
                cast(TrackedTuple, a).ack_val ^= e
                for r, _ in meta:
                    ids[r] = ids.get(r, 0) ^ e
        return tuple(ids.items()) if ids else None

    def edges(self, n: int) -> tuple[list[int], int]:
        """n fresh edge ids in one C call (seedable: the task's Random), and their XOR."""
        raw = self.randbytes(8 * n)
        return array("Q", raw).tolist(), xor_words(raw)

    # -- messages to the ackers -------------------------------------------------------------
    def init(self, root: int, xor: int) -> None:
        """A spout's new tree: `xor` is the XOR of its first deliveries' edge ids."""
        boxes = self.init_boxes
        if boxes:
            ob = boxes[root % len(boxes)]
            ob.append((root, xor, self.task))
            if len(ob) >= self.batch_size:
                self.flush_box(ob)

    def ack(self, tup: Tuple) -> None:
        meta = tup.meta
        if meta:
            val = tup.ack_val
            if val < 0:
                return  # settled already (module doc)
            cast(TrackedTuple, tup).ack_val = ~val
            if meta.__class__ is int:
                meta = tree_pairs(meta, tup.source.task)
            acks = self.acks
            get = acks.get
            for root, e in meta:
                acks[root] = get(root, 0) ^ e ^ val
            if len(acks) >= self.batch_size:
                self.flush()

    def ack_batch(self, batch: TupleBatch) -> None:
        """Ack every tuple of a received batch: those iterated carry the ack values of
        the emits anchored to them; the rest are acked from their metas, no Tuple made."""
        metas = batch.metas
        if not metas:
            return
        acks = self.acks
        get = acks.get
        made = batch._made
        for t in made:
            meta = t.meta
            if meta:
                val = t.ack_val
                if val < 0:
                    continue  # acked or failed by itself before (module doc)
                if meta.__class__ is int:
                    meta = tree_pairs(meta, t.source.task)
                for root, e in meta:
                    acks[root] = get(root, 0) ^ e ^ val
        fold_runs(metas[len(made) :] if made else metas, acks, batch.source.task << ANNOUNCE)
        if len(acks) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        """Send the folded acks, one message per tree."""
        acks = self.acks
        if not acks:
            return
        boxes = self.ack_boxes
        n, size = len(boxes), self.batch_size
        for root, x in acks.items():
            if x:  # a zero contribution changes nothing at the acker
                ob = boxes[root % n]
                ob.append((root, x))
                if len(ob) >= size:
                    self.flush_box(ob)
        acks.clear()

    def committed(self, txid: int, acks: Sequence[tuple[int, int]]) -> None:
        """A stateful bolt's acks of checkpoint `txid`, folded per tree: one message per
        acker, `(COMMITTED_ACKS, (task, txid, pairs))`, sent at once. The acker applies
        a (task, txid) once, so sending them again is safe (module doc)."""
        boxes = self.ack_boxes
        if not boxes or not acks:
            return
        n = len(boxes)
        groups: dict[int, list[tuple[int, int]]] = {}
        for root, x in acks:
            groups.setdefault(root % n, []).append((root, x))
        for i, pairs in groups.items():
            ob = boxes[i]
            ob.append((COMMITTED_ACKS, (self.task, txid, pairs)))
            self.flush_box(ob)

    def fail(self, tup: Tuple, error: str | None = None) -> None:
        """The fail carries why to the spout: this component, and the error ("Type:
        message") when an uncaught exception failed the tuple."""
        meta = tup.meta
        if meta:
            val = tup.ack_val
            if val < 0:
                return  # settled already (module doc)
            cast(TrackedTuple, tup).ack_val = ~val
            why = (self.component, error)
            for root, e in tree_pairs(meta, tup.source.task):
                self._send(self.fail_route, (root, why, e >> ANNOUNCE))

    def fail_batch(self, batch: TupleBatch, error: str | None = None) -> None:
        """Fail every tree a batch's tuples belong to: one fail message per tree."""
        if batch.metas:
            why = (self.component, error)
            for root, task in _trees(batch.metas, batch.source.task).items():
                self._send(self.fail_route, (root, why, task))

    def fail_lost(self, metas: list, reason: str, src: int = 0) -> None:
        """Fail the trees of tuples an edge's policy let go (never executed here), with
        the policy's reason (stormish.edges): one fail message per tree. `src`: the
        tuples' source task, for their root metas."""
        why = (self.component, None, reason)
        for root, task in _trees(metas, src).items():
            self._send(self.fail_route, (root, why, task))

    def reset(self, tup: Tuple) -> None:
        """Published at once, not when `execute` returns."""
        meta = tup.meta
        route = self.reset_route
        if meta and route is not None and route.single is not None:
            for root, e in tree_pairs(meta, tup.source.task):
                row = (root, e >> ANNOUNCE)
                route.single(row).append(row)
            for ob in route.outboxes:
                if ob:
                    self.flush_box(ob)

    def _send(self, route: Route | None, values: tuple) -> None:
        if route is None or route.single is None:
            return
        ob = route.single(values)
        ob.append(values)
        if len(ob) >= self.batch_size:
            self.flush_box(ob)

    def done(self, spout_task: int, roots: list[int]) -> None:
        """Announced tuples of `spout_task` acked with nothing anchored to them: each
        is its whole tree, complete. One row per acker, `(FIRST_DONE, (task, roots))`;
        the boxes leave once a batch of roots waits in them."""
        boxes = self.ack_boxes
        if not boxes or not roots:
            return
        n = len(boxes)
        if n == 1:
            boxes[0].append((FIRST_DONE, (spout_task, roots)))
        else:
            groups: dict[int, list[int]] = {}
            for root in roots:
                groups.setdefault(root % n, []).append(root)
            for i, part in groups.items():
                boxes[i].append((FIRST_DONE, (spout_task, part)))
        self.done_n += len(roots)
        if self.done_n >= self.batch_size:
            self.done_n = 0
            for ob in boxes:
                if ob:
                    self.flush_box(ob)

    def buffered(self) -> int:
        return len(self.acks) + self.done_n


def _trees(metas: Sequence[Any], src: int = 0) -> dict[int, int]:
    """Every tree of `metas` (of tuples from task `src`), with the spout task its edge
    announces (0: none)."""
    trees: dict[int, int] = {}
    for meta in metas:
        if meta.__class__ is int:
            trees[meta] = src
        elif meta:
            for r, e in meta:
                if e >> ANNOUNCE or r not in trees:
                    trees[r] = e >> ANNOUNCE
    return trees


def fold_runs(metas: Any, acks: dict[int, int], announced: int = -1, done: Any = None) -> None:
    """XOR the edges of `metas` (each tuple's ((root, edge), ...), a root meta (module
    doc) for ((root, announced),), or None when untracked) into `acks`. Runs of one root
    (a tree's rows, or a sentence's words, in a row) are folded before they meet the
    dict: a batch of one tree is one XOR a row and one dict update. With `done`, a
    tuple whose edge is `announced` is its whole tree (ack_folder's announced trees):
    its root goes to `done` instead. Compiled where built (fastack.fold_runs), up to the
    first meta that is not a root meta or (int, int) pairs."""
    if _c_fold_runs is not None and metas.__class__ is list:
        start = _c_fold_runs(metas, acks, announced, done, 0)
        if start == len(metas):
            return
        metas = metas[start:]
    py_fold_runs(metas, acks, announced, done)


def py_fold_runs(metas: Any, acks: dict[int, int], announced: int = -1, done: Any = None) -> None:
    """fold_runs in Python (the compiled one's twin)."""
    get = acks.get
    # the root of the run being folded (none yet: a sentinel no root equals, not None,
    # which a peer's odd meta may carry as its root), its XOR so far
    last: Any = NO_RUN
    x = 0
    for m in metas:
        if m.__class__ is int:  # a root meta: the batch's spout task's announcement
            if announced < 0:
                raise root_meta_error(m)
            r, e = m, announced
        else:
            try:
                ((r, e),) = m
            except (TypeError, ValueError):  # untracked (None), or in several trees
                if m:
                    for r, e in m:
                        acks[r] = get(r, 0) ^ e
                continue
        if e == announced and done is not None:
            done.append(r)
        elif r == last:
            x ^= e
        else:
            if last is not NO_RUN:
                acks[last] = get(last, 0) ^ x
            last, x = r, e
    if last is not NO_RUN:
        acks[last] = get(last, 0) ^ x
