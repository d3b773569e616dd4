"""XOR acking: the ledger (pure) and the acker bolt that runs it.

Each reliable spout tuple starts a tree with a random 63-bit root id. Every delivery of
a tuple in the tree gets a random edge id; the acker keeps, per root, the XOR of every
edge id it has been told about. An edge is XORed once when created (by whoever emitted it)
and once when acked, so the value returns to 0 exactly when every tuple in the tree is
acked, whatever the order in which the messages arrive. The spout's init may arrive after
acks from downstream: a tree completes only once the spout task is known and the value is
0. Entries expire (rotating buckets) so a lost tree cannot hold memory forever; the spout
times the tree out on its own clock and fails it.

An announced tree (ack_folder.py) sends no init: the high bits of an ack value name the
spout task, and the ack is read as the init and the ack together. One whose value is then
0 is complete at once and never stored; a bolt's list of announced tuples acked with
nothing anchored to them (`FIRST_DONE`) is handed to the spout as it is when none of its
roots has an entry. Completions go to each spout task as one list per executed batch.

A stateful bolt's acks of a committed checkpoint come as one message tagged (task, txid)
(`AckFolder.committed`) and are applied once per tag: a restarted task sends its last
commit's acks again, not knowing whether its previous process sent them before it died,
and XOR would undo acks applied twice. Tags expire with the entries.
"""

from __future__ import annotations

from typing import Any

from ..component import Bolt
from ..tuple import TICK_STREAM
from .ack_folder import ANNOUNCE, LOW
from .fastack import ack_run as _c_ack_run
from .plan import ACK_ACK, ACK_FAIL, ACK_INIT, ACK_RESET, COMMITTED_ACKS, FIRST_DONE

COMPLETE, FAILED = "complete", "failed"
EVERY_SPOUT = -1  # an outcome's spout task when it is not known: each spout task hears it


def rotation_period(message_timeout: float) -> float:
    """How often the acker's ledger rotates (a tick each period). An entry lives between
    one and two periods, so the period is the whole message timeout (as Storm ticks its
    acker): the spout fails a tree after 1 to 1.5 timeouts, and an ack that arrives
    before then must still find the entry. Half a timeout lost acks that came at 0.8 x."""
    return max(float(message_timeout), 0.05)


class AckerLedger:
    """Events in (init, ack, fail, reset, rotate), outcomes out as (kind, root, spout_task,
    why): `why` is None for a completed tree, and for a failed one what the failing bolt
    said, (component, error text or None), or None when nothing was said.

    Two generations of entries (current and old) instead of a general rotating map: a
    lookup is at most two dict probes, and rotation drops the old generation, so an
    entry lives between one and two rotation periods. Entry: [xor, spout task or -1,
    failed: False, or the fail's why (True when none was given)]."""

    __slots__ = ("cur", "old", "tags", "old_tags", "repeated")

    def __init__(self) -> None:
        self.cur: dict[int, list[Any]] = {}
        self.old: dict[int, list[Any]] = {}
        self.tags: set[tuple[int, int]] = set()  # (task, txid) of committed acks applied
        self.old_tags: set[tuple[int, int]] = set()
        self.repeated = 0  # committed acks that came again and were not applied

    def _entry(self, root: int) -> list[Any]:
        e = self.cur.get(root)
        if e is None:
            e = self.old.pop(root, None)
            if e is None:
                e = [0, -1, False]
            self.cur[root] = e
        return e

    def init(self, root: int, val: int, spout_task: int) -> tuple[str, int, int, Any] | None:
        e = self._entry(root)
        e[0] ^= val
        e[1] = spout_task
        return self._settle(root, e)

    def ack(self, root: int, val: int) -> tuple[str, int, int, Any] | None:
        if val > LOW:  # announced: the spout's init comes with this ack
            return self.init(root, val & LOW, val >> ANNOUNCE)
        e = self._entry(root)
        e[0] ^= val
        return self._settle(root, e)

    def committed(self, tagged: Any) -> list[tuple[str, int, int, Any]]:
        """A checkpoint's acks from one stateful task, `(task, txid, [(root, xor)])`:
        applied once per (task, txid), and what completed."""
        task, txid, pairs = tagged
        tag = (task, txid)
        if tag in self.tags or tag in self.old_tags:
            self.repeated += 1
            return []
        self.tags.add(tag)
        out = []
        for root, val in pairs:
            done = self.ack(root, val)
            if done is not None:
                out.append(done)
        return out

    def fail(self, root: int, why: Any = None, task: int = 0) -> tuple[str, int, int, Any] | None:
        """`task`: the spout task the failed tuple's edge announces (0: none). A fail
        whose spout task is not known yet (an announced tree whose first tuple is still
        held unacked, by a window say, when a tuple below it fails) is told at once all
        the same: to every spout task (`EVERY_SPOUT`), the one that holds the root
        failing it. Storm's acker keeps such a fail until the tree's init names its
        spout, but a Storm spout sends that init as it emits, so the spout hears at once
        there too; an announced tree has no init until its first tuple is acked, which
        a window may hold for its whole length. Its entry goes, as Storm drops a failed
        tree's: the acks that come later make a new one, which cannot complete (the
        failed tuple's edge is never acked) and expires."""
        e = self._entry(root)
        if not e[2]:  # the first fail's reason is the one the spout hears
            e[2] = why or True
        if task and e[1] < 0:
            e[1] = task
        if e[1] < 0:
            del self.cur[root]
            return (FAILED, root, EVERY_SPOUT, None if e[2] is True else e[2])
        return self._settle(root, e)

    def done(
        self, spout_task: int, roots: list[int]
    ) -> tuple[list[int], list[tuple[str, int, int, Any]]]:
        """Announced one-tuple trees acked with nothing below them: each completes, or
        fails if a fail came first. Returns the roots complete without an entry (all
        of them when the ledger holds none: the usual, checked in C) and the outcomes
        of those it held."""
        cur, old = self.cur, self.old
        if (not cur or cur.keys().isdisjoint(roots)) and (not old or old.keys().isdisjoint(roots)):
            return roots, []
        free, out = [], []
        for r in roots:
            if r not in cur and r not in old:
                free.append(r)
            else:
                got = self.init(r, 0, spout_task)
                if got is not None:
                    out.append(got)
        return free, out

    def reset(self, root: int, task: int = 0) -> int | None:
        """Keep a tree alive; returns its spout task (to forward the reset) if known,
        from the ledger or from the reset's announcement (`task`, 0: none)."""
        if root not in self.cur and root not in self.old:
            return task or None
        e = self._entry(root)
        return e[1] if e[1] >= 0 else (task or None)

    def _settle(self, root: int, e: list[Any]) -> tuple[str, int, int, Any] | None:
        if e[1] < 0:
            return None
        if e[2]:
            del self.cur[root]
            return (FAILED, root, e[1], None if e[2] is True else e[2])
        if e[0] == 0:
            del self.cur[root]
            return (COMPLETE, root, e[1], None)
        return None

    def rotate(self) -> int:
        dead = len(self.old)
        self.old = self.cur
        self.cur = {}
        self.old_tags, self.tags = self.tags, set()
        return dead

    def __len__(self) -> int:
        return len(self.cur) + len(self.old)


class AckerBolt(Bolt):
    """The system `__acker` component: an ordinary bolt, with a batch fast path. What
    completes in one executed batch goes to each spout task as one list."""

    spout_tasks: tuple[int, ...] = ()  # the topology's, set by build_plan
    rotates = True  # entries expire by age (prepare reads topology.enable.message.timeouts)

    def prepare(self, conf: Any, context: Any) -> None:
        self.ledger = AckerLedger()
        self.expired = 0
        # Storm's topology.enable.message.timeouts false: the acker drops no entry by
        # age (Storm sends its acker no tick then); the worker's timer still ticks it,
        # and the tick is ignored
        self.rotates = bool(conf.get("topology.enable.message.timeouts", True))

    def execute_raw(self, stream: str, values: list[Any], emit_direct: Any) -> None:
        ledger = self.ledger
        done: dict[int, list[int]] = {}  # spout task -> roots completed in this batch
        if stream == ACK_ACK:
            run = _c_ack_run
            if run is None or values.__class__ is not list:
                self._acks(values, done, emit_direct)
            else:  # compiled (fastack): what it leaves, one message at a time here
                cur, old, n = ledger.cur, ledger.old, len(values)
                i = run(values, 0, cur, old, done)
                while i < n:
                    self._acks(values[i : i + 1], done, emit_direct)
                    i = run(values, i + 1, cur, old, done)
        elif stream == ACK_INIT:
            init = ledger.init
            cur, old = ledger.cur, ledger.old
            for root, val, task in values:
                if val and root not in cur and root not in old:  # the usual: first word
                    cur[root] = [val, task, False]
                    continue
                self._tell(init(root, val, task), done, emit_direct)
        elif stream == ACK_FAIL:
            for root, why, task in values:
                self._tell(ledger.fail(root, why, task), done, emit_direct)
        elif stream == TICK_STREAM:
            if self.rotates:
                self.expired += ledger.rotate()
        elif stream == ACK_RESET:
            for root, task in values:
                to = ledger.reset(root, task)
                if to is not None:
                    emit_direct(to, (root,), ACK_RESET)
        for task, roots in done.items():
            emit_direct(task, (roots,), ACK_ACK)

    def _acks(self, values: Any, done: dict[int, list[int]], emit_direct: Any) -> None:
        """The ACK_ACK loop in Python: all of a batch where stormish._acking was not built,
        else each message the compiled loop leaves (fastack.ack_run: specials, the old
        generation, failed entries); one probe of the current generation in the hot case."""
        ledger = self.ledger
        cur, old = ledger.cur, ledger.old
        last_task, last = 0, []
        for root, val in values:
            e = cur.get(root)
            if e is None:
                if root < 0:
                    if root == FIRST_DONE:
                        task, roots = val
                        free, outs = ledger.done(task, roots)
                        if free:
                            got = done.get(task)
                            if got is None:
                                done[task] = free
                            else:
                                got.extend(free)
                        for out in outs:
                            self._tell(out, done, emit_direct)
                        last_task = 0
                    elif root == COMMITTED_ACKS:
                        for out in ledger.committed(val):
                            self._tell(out, done, emit_direct)
                        last_task = 0
                    continue
                if val > LOW:  # announced: init and ack in one (ack_folder.py)
                    if root not in old:
                        low = val & LOW
                        if low:  # edges below it: the tree's first entry
                            cur[root] = [low, val >> ANNOUNCE, False]
                            continue
                        task = val >> ANNOUNCE  # nothing below it: complete
                        if task != last_task:
                            last_task, last = task, done.setdefault(task, [])
                        last.append(root)
                        continue
                    told = ledger.init(root, val & LOW, val >> ANNOUNCE)
                    self._tell(told, done, emit_direct)
                    continue
                e = ledger._entry(root)
            elif val > LOW:
                told = ledger.init(root, val & LOW, val >> ANNOUNCE)
                self._tell(told, done, emit_direct)
                continue
            e[0] ^= val
            if e[0] == 0 and e[1] >= 0 and not e[2]:
                del cur[root]
                task = e[1]
                if task != last_task:
                    last_task, last = task, done.setdefault(task, [])
                last.append(root)

    def _tell(
        self, out: tuple[str, int, int, Any] | None, done: dict[int, list[int]], emit_direct: Any
    ) -> None:
        """A completion joins its spout task's list; a fail is told at once (to every
        spout task when its own is not known yet: the others hold no such root)."""
        if out is None:
            return
        kind, root, task, why = out
        if kind == COMPLETE:
            done.setdefault(task, []).append(root)
        elif task == EVERY_SPOUT:
            for t in self.spout_tasks:
                emit_direct(t, (root, why), ACK_FAIL)
        else:
            emit_direct(task, (root, why), ACK_FAIL)
