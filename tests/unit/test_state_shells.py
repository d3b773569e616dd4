"""The shells that run the checkpoint protocol in bolts (stormish/state/bolt.py), driven
by hand as the executor drives them: batches in, and what they asked of the collector
out (emits, acks, fails), with the state in memory. Ported scenarios of Storm's
StatefulBoltExecutorTest and CheckpointTupleForwarderTest."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from stormish import BasicBolt, Bolt
from stormish.state import CHECKPOINT_STREAM, StatefulBolt
from stormish.state import bolt as shells
from stormish.state.bolt import wrap
from stormish.state.kv import KeyValueState, MemoryStore
from stormish.state.protocol import CHECKPOINT_FIELDS, COMMIT, INITSTATE, PREPARE, ROLLBACK
from stormish.tuple import Source, TupleBatch


class Counter(StatefulBolt):
    def init_state(self, state):
        self.counts = state

    def execute(self, tup):
        w = tup.values[0]
        self.counts.put(w, self.counts.get(w, 0) + 1)
        self.ack(tup)


class Relay(Bolt):
    def execute(self, tup):
        self.emit(tup.values, anchors=[tup])
        self.ack(tup)


class Collector:
    """Records what the shell asks for, as the executor's bound methods would do it."""

    def __init__(self) -> None:
        self.log: list[tuple] = []

    def bind(self, shell) -> None:
        shell.emit = lambda values, stream="default", anchors=None, msg_id=None: self.log.append(
            ("emit", stream, tuple(values))
        )
        shell.emit_many = shell.emit_direct = shell.reset_timeout = None
        shell.ack = lambda t: self.log.append(("ack", _id(t)))
        shell.fail = lambda t, *a: self.log.append(("fail", _id(t)))
        shell.ack_batch = shell.fail_batch = None
        shell.ack_committed = lambda txid, acks, n: self.log.append(
            ("committed", txid, list(acks), n)
        )
        shell.report_error = lambda exc: self.log.append(("error", str(exc)))

    def take(self) -> list[tuple]:
        out, self.log = self.log, []
        return out


def _id(t):
    """A data tuple by its root; a checkpoint copy by its emission (root) and its task."""
    if not t.meta:
        return t.values
    root = t.meta[0][0]
    return f"{root}@{t.source.task}" if t.source.stream == CHECKPOINT_STREAM else root


def batch(stream: str, task: int, *rows, root0: int = 100) -> TupleBatch:
    """Rows from input task `task`; row i's tree is root0 + i. A checkpoint row is
    (txid, action), numbered as an emission by its root (give a checkpoint's copies from
    every task one root, and later emissions larger ones)."""
    fields = CHECKPOINT_FIELDS if stream == CHECKPOINT_STREAM else ("w",)
    metas = [((root0 + i, 1),) for i in range(len(rows))]
    if stream == CHECKPOINT_STREAM:
        rows = tuple((*r, root0 + i) for i, r in enumerate(rows))
    src = Source("up", task, stream, fields)
    return TupleBatch([tuple(r) for r in rows], src, metas, SimpleNamespace(current=None))


def barrier(shell, action: str, txid: int, root: int, tasks=(1, 2)) -> None:
    for task in tasks:
        shell.execute_batch(batch(CHECKPOINT_STREAM, task, (txid, action), root0=root))


@pytest.fixture
def counter(monkeypatch):
    store = MemoryStore()
    monkeypatch.setattr(shells, "open_state", lambda conf, ctx: KeyValueState(store, "count-1"))
    shell = wrap(Counter(), input_tasks=2)
    col = Collector()
    col.bind(shell)
    shell.prepare({}, None)
    return shell, col, store


def test_tuples_before_initstate_wait_then_are_failed(counter):
    """INITSTATE rolls every bolt back to the last commit: what came before it is
    replayed, in a fresh bolt too (protocol.StatefulCore)."""
    shell, col, _ = counter
    shell.execute_batch(batch("default", 1, ("a",), ("b",)))
    assert col.take() == []  # not initialised: nothing executed, nothing acked
    shell.execute_batch(batch(CHECKPOINT_STREAM, 1, (-1, INITSTATE), root0=1))
    assert col.take() == [("ack", "1@1")]  # the first of two input tasks: acked, not acted on
    shell.execute_batch(batch(CHECKPOINT_STREAM, 2, (-1, INITSTATE), root0=1))
    assert col.take() == [
        ("fail", 100),
        ("fail", 101),
        ("emit", CHECKPOINT_STREAM, (-1, INITSTATE, 1)),
        ("ack", "1@2"),
    ]
    assert dict(shell.bolt.counts) == {}
    shell.execute_batch(batch("default", 2, ("a",)))
    assert dict(shell.bolt.counts) == {"a": 1}


def test_a_task_whose_copy_came_is_held_until_the_last_copy(counter):
    """The aligned cut: task 1's tuples after its PREPARE copy are in the next
    transaction, whatever task 2 still sends before its own copy."""
    shell, col, store = counter
    barrier(shell, INITSTATE, 0, root=1)
    shell.execute_batch(batch(CHECKPOINT_STREAM, 1, (1, PREPARE), root0=2))
    shell.execute_batch(batch("default", 1, ("after",), root0=200))
    shell.execute_batch(batch("default", 2, ("before",), root0=300))
    assert dict(shell.bolt.counts) == {"before": 1}  # "after" is held
    assert shell.held_tuples() == 1
    shell.execute_batch(batch(CHECKPOINT_STREAM, 2, (1, PREPARE), root0=2))
    assert store.pending == {"before": 1}  # prepared without "after"
    assert dict(shell.bolt.counts) == {"before": 1, "after": 1}  # run once aligned
    assert shell.held_tuples() == 0
    col.take()
    barrier(shell, COMMIT, 1, root=3)
    assert ("committed", 1, [(300, 1)], 1) in col.take()  # "after" waits for the next commit
    assert store.data == {"before": 1}


def test_held_tuples_run_in_order_and_a_later_copy_in_them_blocks_again(counter):
    shell, col, store = counter
    barrier(shell, INITSTATE, 0, root=1)
    shell.execute_batch(batch(CHECKPOINT_STREAM, 1, (1, PREPARE), (1, COMMIT), root0=2))
    shell.execute_batch(batch("default", 1, ("x",), root0=200))
    shell.execute_batch(batch(CHECKPOINT_STREAM, 2, (1, PREPARE), root0=2))
    # task 1's COMMIT copy (held with the rest of its batch) blocked it again: "x" waits
    assert store.prepared_txid == 1 and dict(shell.bolt.counts) == {}
    shell.execute_batch(batch(CHECKPOINT_STREAM, 2, (1, COMMIT), root0=3))
    assert store.committed_txid == 1 and dict(shell.bolt.counts) == {"x": 1}


def test_a_lost_copy_does_not_block_a_task_for_ever(counter):
    """Task 2's PREPARE copy was lost with a worker; the spout's PREPARE times out and
    it sends ROLLBACK: task 1 is let go and the ROLLBACK aligned."""
    shell, col, store = counter
    barrier(shell, INITSTATE, 0, root=1)
    shell.execute_batch(batch("default", 2, ("a",), root0=100))
    shell.execute_batch(batch(CHECKPOINT_STREAM, 1, (1, PREPARE), root0=2))
    shell.execute_batch(batch("default", 1, ("b",), root0=200))
    shell.execute_batch(batch(CHECKPOINT_STREAM, 2, (1, ROLLBACK), root0=3))
    assert dict(shell.bolt.counts) == {"a": 1, "b": 1}  # "b" ran: task 1 is not blocked
    col.take()
    shell.execute_batch(batch(CHECKPOINT_STREAM, 1, (1, ROLLBACK), root0=3))
    assert ("fail", 100) in col.take() and dict(shell.bolt.counts) == {}


def test_acks_wait_for_the_commit_after_them(counter):
    shell, col, store = counter
    barrier(shell, INITSTATE, 0, root=1)
    col.take()
    shell.execute_batch(batch("default", 1, ("a",), root0=100))
    assert col.take() == []  # acked by the bolt, held by the shell
    barrier(shell, PREPARE, 1, root=10)
    assert ("ack", 100) not in col.take()
    assert store.prepared_txid == 1 and store.data == {}
    barrier(shell, COMMIT, 1, root=20)
    assert col.take() == [
        ("ack", "20@1"),
        ("committed", 1, [(100, 1)], 1),  # one message per acker, tagged (task, txid)
        ("emit", CHECKPOINT_STREAM, (1, COMMIT, 20)),
        ("ack", "20@2"),
    ]
    assert store.data == {"a": 1} and store.committed_txid == 1


def test_rollback_fails_what_was_held_and_restores_the_commit(counter):
    shell, col, store = counter
    barrier(shell, INITSTATE, 0, root=1)
    shell.execute_batch(batch("default", 1, ("a",), root0=100))
    col.take()
    barrier(shell, ROLLBACK, 1, root=30)
    assert ("fail", 100) in col.take()
    assert dict(shell.bolt.counts) == {}


@pytest.mark.parametrize("stale_first", [True, False])
def test_a_restarted_bolt_is_not_stalled_by_a_late_copy_of_the_last_process_checkpoint(
    counter, stale_first
):
    """The hang the kill runs found: task 1's copy of the PREPARE the dead checkpoint
    spout sent (emission 5) was held for this restarting worker and delivered after the
    restarted spout's ROLLBACK (emission 9) had started aligning. Counted as a newer
    checkpoint, it dropped the ROLLBACK's alignment and blocked task 1 waiting for a
    copy no task would send: no checkpoint went through again."""
    shell, col, store = counter
    stale = batch(CHECKPOINT_STREAM, 1, (4, PREPARE), root0=5)
    if stale_first:
        shell.execute_batch(stale)  # aligning emission 5: task 1 blocked
    shell.execute_batch(batch(CHECKPOINT_STREAM, 2, (4, ROLLBACK), root0=9))
    if not stale_first:
        shell.execute_batch(stale)  # stale: acked, ignored
    shell.execute_batch(batch("default", 1, ("a",), root0=100))  # held behind its copy
    shell.execute_batch(batch(CHECKPOINT_STREAM, 1, (4, ROLLBACK), root0=9))
    barrier(shell, INITSTATE, 3, root=10)
    assert ("fail", 100) in col.take()  # before the INITSTATE: replayed
    shell.execute_batch(batch("default", 1, ("b",), root0=200))
    assert dict(shell.bolt.counts) == {"b": 1}


def test_prepare_before_initstate_fails_the_barrier(counter):
    shell, col, _ = counter
    barrier(shell, PREPARE, 1, root=40)
    assert col.take() == [("ack", "40@1"), ("fail", "40@2")]


def test_a_failing_prepare_fails_the_barrier_and_reports(counter):
    shell, col, _ = counter
    barrier(shell, INITSTATE, 0, root=1)
    col.take()
    shell.bolt.pre_prepare = lambda txid: (_ for _ in ()).throw(OSError("disk full"))
    barrier(shell, PREPARE, 1, root=50)
    assert col.take() == [("ack", "50@1"), ("fail", "50@2"), ("error", "disk full")]


def test_a_forwarder_runs_the_bolt_and_forwards_aligned_barriers():
    shell = wrap(Relay(), input_tasks=2)
    col = Collector()
    col.bind(shell)
    shell.prepare({}, None)
    shell.execute_batch(batch("default", 1, ("a",), root0=100))
    assert col.take() == [("emit", "default", ("a",)), ("ack", 100)]  # not held
    barrier(shell, PREPARE, 3, root=1)
    assert col.take() == [
        ("ack", "1@1"),
        ("emit", CHECKPOINT_STREAM, (3, PREPARE, 1)),
        ("ack", "1@2"),
    ]


def test_a_forwarder_holds_a_blocked_tasks_tuples_and_forwards_the_barrier_first():
    """Downstream, task 1's tuples after its copy come after the forwarded barrier."""
    shell = wrap(Relay(), input_tasks=2)
    col = Collector()
    col.bind(shell)
    shell.prepare({}, None)
    shell.execute_batch(batch(CHECKPOINT_STREAM, 1, (3, PREPARE), root0=1))
    shell.execute_batch(batch("default", 1, ("after",), root0=100))
    shell.execute_batch(batch("default", 2, ("before",), root0=200))
    shell.execute_batch(batch(CHECKPOINT_STREAM, 2, (3, PREPARE), root0=1))
    assert [e for e in col.take() if e[0] == "emit"] == [
        ("emit", "default", ("before",)),
        ("emit", CHECKPOINT_STREAM, (3, PREPARE, 1)),
        ("emit", "default", ("after",)),
    ]


def test_a_basic_bolts_forwarder_anchors_and_acks_as_the_executor_would():
    class Split(BasicBolt):
        def execute(self, tup):
            self.emit(tup.values)

    anchored = []
    shell = wrap(Split(), input_tasks=1)
    col = Collector()
    col.bind(shell)
    emit = shell.emit
    shell.emit = lambda v, stream="default", anchors=None, msg_id=None: (
        anchored.append([_id(a) for a in anchors or []]),
        emit(v, stream, anchors),
    )
    shell.prepare({}, None)
    shell.execute_batch(batch("default", 1, ("a",), root0=100))
    shell.execute_batch(batch(CHECKPOINT_STREAM, 1, (3, COMMIT), root0=1))
    assert col.take() == [
        ("emit", "default", ("a",)),
        ("ack", 100),
        ("emit", CHECKPOINT_STREAM, (3, COMMIT, 1)),
        ("ack", "1@1"),
    ]
    assert anchored == [[100], ["1@1"]]


def test_a_shell_answers_for_its_bolt():
    class WithResult(Counter):
        def result(self):
            return "mine"

    assert wrap(WithResult(), 1).result() == "mine"


def test_a_restarted_task_rolling_a_commit_forward_sends_the_acks_kept_with_it(monkeypatch):
    store = MemoryStore()
    store.prepare(1, {"a": 1}, [(100, 7)])  # by the task's previous process, which died
    monkeypatch.setattr(shells, "open_state", lambda conf, ctx: KeyValueState(store, "c-1"))
    shell = wrap(Counter(), input_tasks=1)
    col = Collector()
    col.bind(shell)
    shell.prepare({}, None)
    shell.execute_batch(batch(CHECKPOINT_STREAM, 1, (1, COMMIT), root0=1))
    # the kept acks go out tagged with the txid, as the previous process would have sent them
    assert col.take() == [
        ("committed", 1, [(100, 7)], 0),
        ("emit", CHECKPOINT_STREAM, (1, COMMIT, 1)),
        ("ack", "1@1"),
    ]
    assert store.data == {"a": 1}


def test_a_basic_bolt_that_raises_fails_only_that_tuple():
    class Picky(BasicBolt):
        def execute(self, tup):
            if tup.values[0] == "bad":
                raise ValueError("no")
            self.emit(tup.values)

    shell = wrap(Picky(), input_tasks=1)
    col = Collector()
    col.bind(shell)
    shell.prepare({}, None)
    shell.execute_batch(batch("default", 1, ("a",), ("bad",), ("b",), root0=100))
    assert col.take() == [
        ("emit", "default", ("a",)),
        ("ack", 100),
        ("fail", 101),
        ("error", "no"),
        ("emit", "default", ("b",)),
        ("ack", 102),
    ]


class Hooked(Counter):
    """Records Storm's hooks and the state operations in the order they come."""

    def __init__(self, log):
        self.log = log

    def init_state(self, state):
        self.log.append("init_state")
        super().init_state(state)

    def pre_prepare(self, txid):
        self.log.append(("pre_prepare", txid))

    def pre_commit(self, txid):
        self.log.append(("pre_commit", txid))

    def pre_rollback(self):
        self.log.append("pre_rollback")


@pytest.fixture
def hooked(monkeypatch):
    log: list = []

    class Recording(KeyValueState):
        def prepare_commit(self, txid, acks=()):
            log.append(("prepare_commit", txid))
            super().prepare_commit(txid, acks)

        def commit(self, txid=None):
            log.append(("commit", txid))
            return super().commit(txid)

        def rollback(self):
            log.append("rollback")
            super().rollback()

    store = MemoryStore()
    monkeypatch.setattr(shells, "open_state", lambda conf, ctx: Recording(store, "count-1"))
    shell = wrap(Hooked(log), input_tasks=1)
    col = Collector()
    col.bind(shell)
    shell.prepare({}, None)
    return shell, col, log


def test_storms_state_calls_before_initstate(hooked):
    """StatefulBoltExecutorTest testCommit, testRollback, testCommitBeforeInitstate and
    testPrepareAndRollbackBeforeInitstate: before INITSTATE a COMMIT is carried out
    (pre_commit, then the state's commit; a restarted task rolls its prepared
    transaction forward) and acked, a ROLLBACK too (pre_rollback, then rollback), and a
    PREPARE is failed (the spout recovers) with no state call."""
    shell, col, log = hooked
    barrier(shell, COMMIT, 100, root=1, tasks=(1,))
    assert log == [("pre_commit", 100), ("commit", 100)]
    assert col.take()[-1] == ("ack", "1@1")
    log.clear()
    barrier(shell, PREPARE, 101, root=2, tasks=(1,))
    assert log == [] and col.take() == [("fail", "2@1")]
    barrier(shell, ROLLBACK, 101, root=3, tasks=(1,))
    assert log == ["pre_rollback", "rollback"]
    assert col.take()[-1] == ("ack", "3@1")


def test_storms_hooks_come_before_their_state_calls(hooked):
    """StatefulBoltExecutorTest testPrepareAndCommit: INITSTATE, a tuple, PREPARE, a
    tuple, COMMIT: both tuples executed, the state committed once, each hook before
    its state call."""
    shell, col, log = hooked
    barrier(shell, INITSTATE, 0, root=1, tasks=(1,))
    shell.execute_batch(batch("default", 1, ("a",), root0=100))
    barrier(shell, PREPARE, 100, root=2, tasks=(1,))
    shell.execute_batch(batch("default", 1, ("a",), root0=200))
    barrier(shell, COMMIT, 100, root=3, tasks=(1,))
    assert log == [
        "init_state",
        ("pre_prepare", 100),
        ("prepare_commit", 100),
        ("pre_commit", 100),
        ("commit", 100),
    ]
    assert dict(shell.bolt.counts) == {"a": 2}
    # the first tuple's ack left with the commit; the second waits for the next one
    assert ("committed", 100, [(100, 1)], 1) in col.take()
