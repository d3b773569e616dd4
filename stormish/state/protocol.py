"""Storm's checkpoint protocol as pure state machines: no I/O, no clock of their own.

Three parts, each driven by events and answering with what to do:

- `TxState` (Storm's CheckPointState): the checkpoint spout's transaction, a txid and a
  phase, with the transitions

      COMMITTED(n) --PREPARE(n+1) acked--> PREPARING(n+1) --COMMIT acked--> COMMITTED(n+1)
      PREPARING(n+1) --recovery: ROLLBACK(n+1) acked--> COMMITTED(n)

  A PREPARING transaction found on recovery is rolled back (some bolts may not have
  prepared); a COMMITTING one is rolled forward (some bolts may already have committed).
- `CheckpointDriver` (Storm's CheckpointSpout): when to emit which action, given the
  time and the acks and fails of the previous one. At most one checkpoint tuple is in
  flight; its message id is its txid.
- `BarrierAligner` and `StatefulCore` (Storm's BaseStatefulBoltExecutor and
  StatefulBoltExecutor): a bolt acts on a checkpoint once its copy came from every
  input task, holding each task's later tuples meanwhile (an aligned cut), and the acks
  of the tuples it executed are held until the checkpoint that includes their effect
  commits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CHECKPOINT_STREAM = "$checkpoint"
# Storm's (txid, action), and which emission of the checkpoint spout it is: a number
# that grows with every emission, across restarts of the spout (`emission_number`)
CHECKPOINT_FIELDS = ("txid", "action", "emission")
PREPARE, COMMIT, ROLLBACK, INITSTATE = "PREPARE", "COMMIT", "ROLLBACK", "INITSTATE"
ACTIONS = (PREPARE, COMMIT, ROLLBACK, INITSTATE)
COMMITTED, COMMITTING, PREPARING = "COMMITTED", "COMMITTING", "PREPARING"
INTERVAL_FLOOR_MS = 100  # Storm's: a checkpoint interval below this is raised to it


@dataclass(frozen=True)
class TxState:
    """The checkpoint spout's transaction. Kept in its own state store, so that a
    restarted spout resumes (rolls back, or forward) where it stood."""

    txid: int = -1
    phase: str = COMMITTED

    def next_state(self, recovering: bool) -> TxState:
        if self.phase == PREPARING:
            if recovering:
                return TxState(self.txid - 1, COMMITTED)
            return TxState(self.txid, COMMITTING)
        if self.phase == COMMITTING:
            return TxState(self.txid, COMMITTED)
        return self if recovering else TxState(self.txid + 1, PREPARING)

    def next_action(self, recovering: bool) -> str:
        if self.phase == PREPARING:
            return ROLLBACK if recovering else PREPARE
        if self.phase == COMMITTING:
            return COMMIT
        return INITSTATE if recovering else PREPARE


@dataclass(frozen=True)
class Emit:
    """Emit (txid, action) on the checkpoint stream with message id txid."""

    txid: int
    action: str


@dataclass(frozen=True)
class Save:
    """Store the spout's transaction durably (before anything is emitted for it)."""

    tx: TxState


class CheckpointDriver:
    """The checkpoint spout's decisions. Events: `poll(now)` (from next_tuple), `ack(txid)`
    and `fail(txid)`; each returns the instructions to carry out, in order.

    It starts recovering (as Storm's spout does on open): the saved transaction's
    recovery action goes out first (ROLLBACK a PREPARING one, COMMIT a COMMITTING one),
    then INITSTATE, which every stateful bolt needs before it executes anything. A fail
    (or a timeout) of any checkpoint tuple starts recovery again."""

    def __init__(self, saved: TxState | None, interval_ms: float):
        self.tx = saved or TxState()
        self.interval = max(float(interval_ms), INTERVAL_FLOOR_MS) / 1000.0
        self.recovering = True
        self.in_progress = False  # a checkpoint tuple is in flight
        self.last_checkpoint = float("-inf")

    def poll(self, now: float) -> list[Emit | Save]:
        if self.in_progress:
            return []
        if self.recovering:
            self.in_progress = True
            return [Emit(self.tx.txid, self.tx.next_action(True))]
        if self.tx.phase == COMMITTED and now - self.last_checkpoint < self.interval:
            return []
        out: list[Emit | Save] = []
        if self.tx.phase == COMMITTED:
            out.append(self._save(self.tx.next_state(False)))
            self.last_checkpoint = now
        self.in_progress = True
        out.append(Emit(self.tx.txid, self.tx.next_action(False)))
        return out

    def ack(self, txid: int) -> list[Emit | Save]:
        self.in_progress = False
        if txid != self.tx.txid:  # a late ack of an old transaction: nothing to do
            return []
        nxt = self.tx.next_state(self.recovering)
        if self.recovering and nxt == self.tx:
            self.recovering = False  # INITSTATE went round: recovery is over
            return []
        return [self._save(nxt)]

    def fail(self, txid: int) -> list[Emit | Save]:
        self.in_progress = False
        self.recovering = True
        return []

    def _save(self, tx: TxState) -> Save:
        self.tx = tx
        return Save(tx)


# -- bolts ---------------------------------------------------------------------------------
PROCESS, WAIT, OLD, STALE = "process", "wait", "old", "stale"
_EMISSION_BITS = 32


def emission_number(incarnation: int, n: int) -> int:
    """The number of the checkpoint spout's `n`th emission in its `incarnation`th process
    (incarnations are counted in its state): larger for every later emission."""
    return (incarnation << _EMISSION_BITS) | (n & ((1 << _EMISSION_BITS) - 1))


class BarrierAligner:
    """Aligns a checkpoint's copies, one per input task of the checkpoint stream, and says
    which input tasks are *blocked*: those whose copy came, until the last copy does.

    The shell holds every later tuple of a blocked task (any stream) unexecuted, and the
    bolt acts on the checkpoint when the last copy arrives (PROCESS), then runs what it
    held. So each checkpoint cuts every task's input at one point, its copy, and the cut
    is the same in every bolt downstream of that task (its tuples and its copies reach
    them in the order it sent them). A tuple tree is then on one side of each
    checkpoint in every stateful bolt: never prepared or rolled back in one bolt and
    kept in another (Chandy-Lamport's aligned snapshot; Flink's aligned checkpoints).
    Storm's executor counts copies without holding anything: a tuple that came after
    one copy and before the last was executed before the checkpoint in one bolt and
    after it in another, and a rollback then failed a tree whose other half was
    committed, which its replay counted again.

    Copies are known by their emission number (the checkpoint spout sends the same
    action and txid again after a fail; its emissions are numbered in order). Every
    task forwards emissions in that order, so a copy of a later emission than the one
    being aligned, from a task that is not blocked, means a copy of that one was lost
    (a worker died with it): that alignment is dropped (its tasks are unblocked; the
    spout's checkpoint fails and is sent again) and the later one starts. A copy of an
    earlier emission, or of one already acted on, is STALE (a copy held for a
    restarting worker, delivered after newer ones went round): acked, not counted. A
    whole checkpoint older than the last one acted on is OLD: acked and not acted on
    (Storm's; a rollback lowers that mark to txid - 1, so the txid that was rolled back
    can be prepared again)."""

    def __init__(self, input_tasks: int):
        if input_tasks < 1:
            raise ValueError(
                f"a bolt reads the checkpoint stream from >= 1 task, not {input_tasks}"
            )
        self.input_tasks = input_tasks
        self.pending: int | None = None  # the emission being aligned
        self.arrived: set[Any] = set()  # input tasks whose copy of it came: blocked
        self.last_emission = -1  # the last emission acted on (or found old)
        self.last_txid: int | None = None
        self.abandoned = 0  # alignments dropped because a copy was lost
        self.stale = 0  # copies of earlier emissions, ignored

    def blocked(self, task: Any) -> bool:
        return task in self.arrived

    def arrive(self, action: str, txid: int, task: Any, emission: int) -> str:
        """A copy from input task `task` (not blocked: a blocked task's tuples are held)."""
        pending = self.pending
        if emission <= self.last_emission or (pending is not None and emission < pending):
            self.stale += 1
            return STALE
        if pending is not None and emission > pending:
            self.abandoned += 1
            self.arrived = set()
        self.pending = emission
        self.arrived.add(task)
        if len(self.arrived) < self.input_tasks:
            return WAIT
        self.pending, self.arrived, self.last_emission = None, set(), emission
        if self.last_txid is not None and txid < self.last_txid:
            return OLD
        self.last_txid = txid - 1 if action == ROLLBACK else txid
        return PROCESS


# what a stateful bolt's shell carries out
INIT_STATE, EXECUTE, PREPARE_STATE, COMMIT_STATE, ROLLBACK_STATE = (
    "init_state",
    "execute",
    "prepare",
    "commit",
    "rollback",
)
ACK, FAIL, FORWARD, ACK_BARRIER, FAIL_BARRIER = (
    "ack",
    "fail",
    "forward",
    "ack_barrier",
    "fail_barrier",
)


@dataclass
class StatefulCore:
    """A stateful bolt's decisions. Events: `tuple_in(t)`, `acked(t)` (the bolt acked t)
    and `checkpoint(action, txid)` once aligned; each returns [(instruction, arg)].

    Rules kept: nothing is executed before the state is initialised (tuples wait in
    `waiting`; a PREPARE before INITSTATE is failed, which makes the spout recover); a
    tuple the bolt acked is held (`acked_since`) until a PREPARE moves it to `prepared`,
    whose COMMIT acks it for real; a ROLLBACK fails both, so the spout replays them.

    INITSTATE means the same in every bolt: the state is the last commit's, and every
    tuple that reached the bolt before the INITSTATE (before its cut, `BarrierAligner`)
    and is not in that commit is failed, so its tree is replayed once. A bolt already
    initialised rolls back (fails what it held); a fresh one (its worker restarted, or
    the topology starting) fails what waited for the INITSTATE. Storm's executor runs
    what waited instead, and keeps an initialised bolt's work: the same tree was then
    rolled back and failed in one bolt and counted in another, and its replay counted
    it twice."""

    initialized: bool = False
    waiting: list[Any] = field(default_factory=list)
    acked_since: list[Any] = field(default_factory=list)
    prepared: list[Any] = field(default_factory=list)

    def tuple_in(self, tup: Any) -> list[tuple[str, Any]]:
        if self.initialized:
            return [(EXECUTE, tup)]
        self.waiting.append(tup)
        return []

    def acked(self, tup: Any) -> None:
        self.acked_since.append(tup)

    def checkpoint(self, action: str, txid: int) -> list[tuple[str, Any]]:
        handler: Callable[[int], list[tuple[str, Any]]] = getattr(self, "_" + action.lower())
        return handler(txid)

    def _prepare(self, txid: int) -> list[tuple[str, Any]]:
        if not self.initialized:  # restarted mid-way: its state is not loaded yet
            return [(FAIL_BARRIER, txid)]
        self.prepared.extend(self.acked_since)
        self.acked_since = []
        return [(PREPARE_STATE, txid), (FORWARD, txid), (ACK_BARRIER, txid)]

    def _commit(self, txid: int) -> list[tuple[str, Any]]:
        done, self.prepared = self.prepared, []
        out: list[tuple[str, Any]] = [(COMMIT_STATE, txid)]
        out += [(ACK, t) for t in done]
        return out + [(FORWARD, txid), (ACK_BARRIER, txid)]

    def _rollback(self, txid: int) -> list[tuple[str, Any]]:
        undone = self.prepared + self.acked_since
        self.prepared, self.acked_since = [], []
        out: list[tuple[str, Any]] = [(ROLLBACK_STATE, txid)]
        out += [(FAIL, t) for t in undone]
        return out + [(FORWARD, txid), (ACK_BARRIER, txid)]

    def _initstate(self, txid: int) -> list[tuple[str, Any]]:
        if self.initialized:
            return self._rollback(txid)
        self.initialized = True
        out: list[tuple[str, Any]] = [(INIT_STATE, txid)]
        out += [(FAIL, t) for t in self.waiting]
        self.waiting = []
        return out + [(FORWARD, txid), (ACK_BARRIER, txid)]
