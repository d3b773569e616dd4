"""A bolt's `execute`, once per tuple: Storm's own execution.

Tuples are made without their `__init__` (a Python call, ~35 ns of ~130 a tuple): the
same two or four slots it sets, written here. A BasicBolt's tuple is acked as its
execute returns, failed when it raises; a Bolt settles its own. The acks of a BasicBolt's
batch are folded in one pass after it (`_fold`: AckFolder.ack's rule, with the tuples
nothing was anchored to, the most, folded from their metas alone). The BasicBolt loop is
compiled where stormish._acking was built (fastack.run_basic, the same loop). A batch of an edge
that checks an age runs a few rows at a time, each tuple judged when it would be executed
(`Screen.judge`).
"""

from __future__ import annotations

from collections.abc import Container
from operator import length_hint
from typing import Any

from ...tuple import TrackedTuple, Tuple
from ..ack_folder import ANNOUNCE, NO_RUN, fold_runs, root_meta_error
from ..fastack import run_basic
from .base import Batch, Execution, error_text

_new = object.__new__  # makes a Tuple without calling its __init__
# rows of a batch with an age executed between two looks at the clock
STAMPED_STEP = 16


class PerTuple(Execution):
    def __init__(self, ex: Any):
        super().__init__(ex)
        self.late = False  # the rows executing now missed their edge's deadline
        # announced edges (ack_folder.py) come only from spout tasks: from a bolt, no
        # tuple is looked at for one
        plan = getattr(ex, "plan", None)
        self.spout_tasks: Container[int] = (
            _ANY
            if plan is None
            else frozenset(t for t, c in plan.task_component.items() if plan.components[c].is_spout)
        )

    def run(self, batch: Batch) -> int | None:
        """The batch's rows, each executed once; None, or the index of the first row not
        executed: emits parked (checked before each row, as Storm's JCQueue.consume checks
        its exit condition before each tuple; Execution), and the loop puts the rest back."""
        src_task, stream, values, metas = batch
        if values.__class__ is not list:
            return self._stamped(batch)
        source = self.source(src_task, stream)
        if self.late:
            source = source.late_twin()
        execute = self.obj.execute
        new = _new
        pending, stop = self.pending, self.stop
        n = len(values)  # the rows executed: all, unless emits parked
        if metas is None:
            if self.basic and not self.collector.acking:
                if run_basic is not None:  # the loop below, compiled (fastack)
                    i = 0
                    args: tuple = (source, execute, None, [], pending, stop)
                    while stopped := run_basic(values, None, i, *args):
                        if isinstance(stopped, int):  # emits parked before row `stopped`
                            n = stopped
                            break
                        at, _, err = stopped
                        self.on_error(_engine_called(err), None, at)
                        i = at + 1
                else:
                    rows = iter(values)
                    for v in rows:
                        if pending and stop():
                            n -= length_hint(rows) + 1
                            break
                        t = new(Tuple)
                        t.values = v
                        t.source = source
                        try:
                            execute(t)
                        except Exception as exc:  # noqa: BLE001 - the tuple fails, the worker lives
                            self.on_error(exc, None, len(values) - length_hint(rows) - 1)
                self.counts.acked += n
            else:
                col = self.collector
                rows = iter(values)
                for v in rows:
                    if pending and stop():
                        n -= length_hint(rows) + 1
                        break
                    t = new(Tuple)
                    t.values = v
                    t.source = source
                    col.current = t
                    try:
                        execute(t)
                    except Exception as exc:  # noqa: BLE001
                        self.on_error(exc, t, len(values) - length_hint(rows) - 1)
        elif self.basic:
            col = self.collector
            folder = col.acks
            fail = folder.fail
            failed = 0
            # Acks are folded per batch, after the loop (`_fold`): the loop keeps only the
            # metas and ack values of the tuples something was anchored to (`anchored`, the
            # value as execute returned, when Storm acks) and skips a failed tuple's meta;
            # an announced tuple of this batch's spout acked with nothing anchored to it is
            # its whole tree and joins the done list
            announced = src_task << ANNOUNCE if src_task in self.spout_tasks else -1
            done: list[int] = []
            anchored: list[tuple[Any, int]] = []
            start = 0  # metas[start:] are not folded yet
            if run_basic is not None and metas.__class__ is list:  # compiled (fastack)
                # a failed row's index + 1 is where the loop goes on and the fold starts
                while stopped := run_basic(
                    values, metas, start, source, execute, col, anchored, pending, stop
                ):
                    if isinstance(stopped, int):  # emits parked before row `stopped`
                        n = stopped
                        break
                    at, bad, err = stopped
                    err = _engine_called(err)
                    _fold(metas[start:at], anchored, folder.acks, done, announced)
                    start, anchored = at + 1, []
                    failed += 1
                    self.accounts.uncaught_at(err, at, failed - 1)
                    fail(bad, error_text(err))
            else:
                rows = iter(values)
                for v, m in zip(rows, metas, strict=True):
                    if pending and stop():
                        n -= length_hint(rows) + 1
                        break
                    if m:
                        t = new(TrackedTuple)
                        t.meta = m
                        t.ack_val = 0
                    else:
                        t = new(Tuple)
                    t.values = v
                    t.source = source
                    col.current = t
                    try:
                        execute(t)
                    except Exception as exc:  # noqa: BLE001
                        at = len(values) - length_hint(rows) - 1
                        _fold(metas[start:at], anchored, folder.acks, done, announced)
                        start, anchored = at + 1, []
                        failed += 1
                        self.accounts.uncaught_at(exc, at, failed - 1)
                        fail(t, error_text(exc))
                        continue
                    val = t.ack_val
                    if val:
                        anchored.append((m, val))
            whole = start == 0 and n == len(values)
            _fold(metas if whole else metas[start:n], anchored, folder.acks, done, announced)
            if done:
                folder.done(src_task, done)
            if len(folder.acks) >= folder.batch_size:
                folder.flush()
            counts = self.counts
            counts.acked += n - failed
            counts.failed += failed
        else:
            rows = iter(values)
            for v, m in zip(rows, metas, strict=True):
                if pending and stop():
                    n -= length_hint(rows) + 1
                    break
                if m:
                    t = new(TrackedTuple)
                    t.meta = m
                    t.ack_val = 0
                else:
                    t = new(Tuple)
                t.values = v
                t.source = source
                try:
                    execute(t)
                except Exception as exc:  # noqa: BLE001
                    self.on_error(exc, t, len(values) - length_hint(rows) - 1)
        self.accounts.executed(src_task, stream, n)
        return None if n == len(values) else n

    def _stamped(self, batch: Batch) -> int | None:
        src_task, stream, values, metas = batch
        n, i = len(values), 0
        judge = self.screen.judge
        while i < n:
            j = min(n, i + STAMPED_STEP)
            late = judge(src_task, stream, values, metas, i, j)
            if late is None:
                return None
            self.late = late
            try:
                k = self.run((src_task, stream, values[i:j], None if metas is None else metas[i:j]))
            finally:
                self.late = False
            if k is not None:  # emits parked: rows i + k: go back, judged again then
                self.screen.unjudged(src_task, stream, j - i - k, late)
                return i + k
            i = j
            if i < n and self.pending and self.stop():
                return i
        return None


def _engine_called(exc: Exception) -> Exception:
    """`exc`, raised in a call the compiled loop made, with this engine frame in front of
    its traceback, as when Python's loop made the call: the error report names the
    method the engine called into by the engine frame before it (error_report.py)."""
    try:
        raise exc
    except Exception as e:  # noqa: BLE001 - it is handed back, not handled
        return e
    finally:
        del exc  # this frame joins the traceback: no cycle through it to the exception


class _Any:
    def __contains__(self, item: object) -> bool:
        return True


_ANY = _Any()


def _fold(
    metas: list,
    anchored: list[tuple[Any, int]],
    acks: dict[int, int],
    done: list[int],
    announced: int,
) -> None:
    """Ack the tuples of `metas`, executed without failing, into the folded `acks`
    (AckFolder.ack per tuple, in one pass): each tuple's edges, and the ack values in
    `anchored` (meta, value) of the tuples that had emits anchored to them. A tuple whose
    edge is `announced` (the batch's spout task's announcement, -1 when the batch is not
    from a spout) and whose ack value is 0 is its whole tree: its root goes to `done`
    instead (ack_folder.py).

    Runs of one root (a sentence's words, in a row) are folded before they meet the dict."""
    get = acks.get
    # the root of the run being folded (none yet: a sentinel no root equals, not None,
    # which a peer's odd meta may carry as its root), its XOR so far
    last: Any = NO_RUN
    x = 0
    if anchored and len(anchored) == len(metas):  # every tuple had emits anchored to it
        for m, val in anchored:
            if m.__class__ is int:  # a root meta (ack_folder.py)
                if announced < 0:  # as fold_runs says it
                    raise root_meta_error(m)
                r, e = m, announced
            else:
                try:
                    ((r, e),) = m
                except ValueError:  # in several trees
                    for r, e in m:
                        acks[r] = get(r, 0) ^ e ^ val
                    continue
            if r == last:
                x ^= e ^ val
            else:
                if last is not NO_RUN:
                    acks[last] = get(last, 0) ^ x
                last, x = r, e ^ val
        if last is not NO_RUN:
            acks[last] = get(last, 0) ^ x
        return
    fold_runs(metas, acks, announced, done)
    if anchored:  # their ack values; an announced one is not done after all
        gone: dict[int, int] = {}  # root -> how many of its done entries to take back
        for m, val in anchored:
            if m.__class__ is int or (len(m) == 1 and m[0][1] == announced):
                r = m if m.__class__ is int else m[0][0]
                gone[r] = gone.get(r, 0) + 1
                acks[r] = get(r, 0) ^ announced ^ val
            else:
                for r, _ in m:
                    acks[r] = get(r, 0) ^ val
        if gone:
            kept = []
            for r in done:
                k = gone.get(r)
                if k:
                    gone[r] = k - 1
                else:
                    kept.append(r)
            done[:] = kept
