"""XOR acking: the ledger (pure) and the acker bolt that runs it.

Each reliable spout tuple starts a tree with a random 63-bit root id. Every delivery of
a tuple in the tree gets a random edge id; the acker keeps, per root, the XOR of every
edge id it has been told about. An edge is XORed once when created (by whoever emitted it)
and once when acked, so the value returns to 0 exactly when every tuple in the tree is
acked, whatever the order in which the messages arrive. The spout's init may arrive after
acks from downstream: a tree completes only once the spout task is known and the value is
0. Entries expire (rotating buckets) so a lost tree cannot hold memory forever; the spout
times the tree out on its own clock and fails it.

A stateful bolt's acks of a committed checkpoint come as one message tagged (task, txid)
(`AckFolder.committed`) and are applied once per tag: a restarted task sends its last
commit's acks again, not knowing whether its previous process sent them before it died,
and XOR would undo acks applied twice. Tags expire with the entries.
"""

from __future__ import annotations

from typing import Any

from ..component import Bolt
from ..tuple import TICK_STREAM
from .plan import ACK_ACK, ACK_FAIL, ACK_INIT, ACK_RESET, COMMITTED_ACKS

COMPLETE, FAILED = "complete", "failed"


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

    def fail(self, root: int, why: Any = None) -> tuple[str, int, int, Any] | None:
        e = self._entry(root)
        if not e[2]:  # the first fail's reason is the one the spout hears
            e[2] = why or True
        return self._settle(root, e)

    def reset(self, root: int) -> int | None:
        """Keep a tree alive; returns its spout task (to forward the reset) if known."""
        if root not in self.cur and root not in self.old:
            return None
        e = self._entry(root)
        return e[1] if e[1] >= 0 else None

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
    """The system `__acker` component: an ordinary bolt, with a batch fast path."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.ledger = AckerLedger()
        self.expired = 0

    def execute_raw(self, stream: str, values: list[Any], emit_direct: Any) -> None:
        ledger = self.ledger
        if stream == ACK_ACK:
            # the hot case, inlined: one probe of the current generation
            cur = ledger.cur
            for root, val in values:
                e = cur.get(root)
                if e is None:
                    if root == COMMITTED_ACKS:
                        for done in ledger.committed(val):
                            self._tell(done, emit_direct)
                        continue
                    e = ledger._entry(root)
                e[0] ^= val
                if e[0] == 0 and e[1] >= 0 and not e[2]:
                    del cur[root]
                    emit_direct(e[1], (root,), ACK_ACK)
        elif stream == ACK_INIT:
            init = ledger.init
            cur, old = ledger.cur, ledger.old
            for root, val, task in values:
                if val and root not in cur and root not in old:  # the usual: first word
                    cur[root] = [val, task, False]
                    continue
                out = init(root, val, task)
                if out is not None:
                    self._tell(out, emit_direct)
        elif stream == ACK_FAIL:
            for root, why in values:
                out = ledger.fail(root, why)
                if out is not None:
                    self._tell(out, emit_direct)
        elif stream == TICK_STREAM:
            self.expired += ledger.rotate()
        elif stream == ACK_RESET:
            for (root,) in values:
                task = ledger.reset(root)
                if task is not None:
                    emit_direct(task, (root,), ACK_RESET)

    @staticmethod
    def _tell(out: tuple[str, int, int, Any], emit_direct: Any) -> None:
        kind, root, task, why = out
        if kind == COMPLETE:
            emit_direct(task, (root,), ACK_ACK)
        else:
            emit_direct(task, (root, why), ACK_FAIL)
