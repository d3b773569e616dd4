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
from stormish.state.protocol import COMMIT, INITSTATE, PREPARE, ROLLBACK
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
        shell.report_error = lambda exc: self.log.append(("error", str(exc)))

    def take(self) -> list[tuple]:
        out, self.log = self.log, []
        return out


def _id(t):
    return t.meta[0][0] if t.meta else t.values


def batch(stream: str, task: int, *rows, root0: int = 100) -> TupleBatch:
    src = Source("up", task, stream, ("txid", "action") if stream == CHECKPOINT_STREAM else ("w",))
    metas = [((root0 + i, 1),) for i in range(len(rows))]
    return TupleBatch([tuple(r) for r in rows], src, metas, SimpleNamespace(current=None))


@pytest.fixture
def counter(monkeypatch):
    store = MemoryStore()
    monkeypatch.setattr(shells, "open_state", lambda conf, ctx: KeyValueState(store, "count-1"))
    shell = wrap(Counter(), input_tasks=2)
    col = Collector()
    col.bind(shell)
    shell.prepare({}, None)
    return shell, col, store


def test_tuples_before_initstate_wait_then_run(counter):
    shell, col, _ = counter
    shell.execute_batch(batch("default", 1, ("a",), ("b",)))
    assert col.take() == []  # not initialised: nothing executed, nothing acked
    shell.execute_batch(batch(CHECKPOINT_STREAM, 1, (-1, INITSTATE), root0=1))
    assert col.take() == [("ack", 1)]  # the first of two input tasks: acked, not acted on
    shell.execute_batch(batch(CHECKPOINT_STREAM, 2, (-1, INITSTATE), root0=2))
    assert col.take() == [("emit", CHECKPOINT_STREAM, (-1, INITSTATE)), ("ack", 2)]
    assert dict(shell.bolt.counts) == {"a": 1, "b": 1}


def test_acks_wait_for_the_commit_after_them(counter):
    shell, col, store = counter
    for task in (1, 2):
        shell.execute_batch(batch(CHECKPOINT_STREAM, task, (0, INITSTATE), root0=task))
    col.take()
    shell.execute_batch(batch("default", 1, ("a",), root0=100))
    assert col.take() == []  # acked by the bolt, held by the shell
    for task in (1, 2):
        shell.execute_batch(batch(CHECKPOINT_STREAM, task, (1, PREPARE), root0=10 + task))
    assert ("ack", 100) not in col.take()
    assert store.prepared_txid == 1 and store.data == {}
    for task in (1, 2):
        shell.execute_batch(batch(CHECKPOINT_STREAM, task, (1, COMMIT), root0=20 + task))
    assert col.take() == [
        ("ack", 21),
        ("ack", 100),
        ("emit", CHECKPOINT_STREAM, (1, COMMIT)),
        ("ack", 22),
    ]
    assert store.data == {"a": 1} and store.committed_txid == 1


def test_rollback_fails_what_was_held_and_restores_the_commit(counter):
    shell, col, store = counter
    for task in (1, 2):
        shell.execute_batch(batch(CHECKPOINT_STREAM, task, (0, INITSTATE), root0=task))
    shell.execute_batch(batch("default", 1, ("a",), root0=100))
    col.take()
    for task in (1, 2):
        shell.execute_batch(batch(CHECKPOINT_STREAM, task, (1, ROLLBACK), root0=30 + task))
    assert ("fail", 100) in col.take()
    assert dict(shell.bolt.counts) == {}


def test_prepare_before_initstate_fails_the_barrier(counter):
    shell, col, _ = counter
    for task in (1, 2):
        shell.execute_batch(batch(CHECKPOINT_STREAM, task, (1, PREPARE), root0=40 + task))
    assert col.take() == [("ack", 41), ("fail", 42)]


def test_a_failing_prepare_fails_the_barrier_and_reports(counter):
    shell, col, _ = counter
    for task in (1, 2):
        shell.execute_batch(batch(CHECKPOINT_STREAM, task, (0, INITSTATE), root0=task))
    col.take()
    shell.bolt.pre_prepare = lambda txid: (_ for _ in ()).throw(OSError("disk full"))
    for task in (1, 2):
        shell.execute_batch(batch(CHECKPOINT_STREAM, task, (1, PREPARE), root0=50 + task))
    assert col.take() == [("ack", 51), ("fail", 52), ("error", "disk full")]


def test_a_forwarder_runs_the_bolt_and_forwards_aligned_barriers():
    shell = wrap(Relay(), input_tasks=2)
    col = Collector()
    col.bind(shell)
    shell.prepare({}, None)
    shell.execute_batch(batch("default", 1, ("a",), root0=100))
    assert col.take() == [("emit", "default", ("a",)), ("ack", 100)]  # not held
    shell.execute_batch(batch(CHECKPOINT_STREAM, 1, (3, PREPARE), root0=1))
    shell.execute_batch(batch(CHECKPOINT_STREAM, 2, (3, PREPARE), root0=2))
    assert col.take() == [("ack", 1), ("emit", CHECKPOINT_STREAM, (3, PREPARE)), ("ack", 2)]


def test_a_basic_bolts_forwarder_leaves_acking_to_the_executor():
    class Split(BasicBolt):
        def execute(self, tup):
            self.emit(tup.values)

    shell = wrap(Split(), input_tasks=1)
    assert isinstance(shell, BasicBolt)
    col = Collector()
    col.bind(shell)
    shell.prepare({}, None)
    shell.execute_batch(batch(CHECKPOINT_STREAM, 1, (3, COMMIT), root0=1))
    assert col.take() == [("emit", CHECKPOINT_STREAM, (3, COMMIT))]


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
    assert col.take() == [("ack", 100), ("emit", CHECKPOINT_STREAM, (1, COMMIT)), ("ack", 1)]
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
        ("fail", 101),
        ("error", "no"),
        ("emit", "default", ("b",)),
    ]
