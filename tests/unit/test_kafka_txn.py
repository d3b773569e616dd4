"""The KafkaSink's transaction state machine (stormish/kafka/txn.py) as scenarios, with a
scripted producer (pure logic: the broker tests are in tests/integration/
test_kafka_sink.py): when it commits, when input is held, what is acked or failed."""

from __future__ import annotations

from typing import Any

import pytest

from stormish.kafka.txn import ABORTING, IDLE, OPEN, Transaction


class Err:
    def __init__(self, retriable: bool = False, abortable: bool = False, text: str = "boom"):
        self._r, self._a, self.text = retriable, abortable, text

    def retriable(self) -> bool:
        return self._r

    def txn_requires_abort(self) -> bool:
        return self._a

    def str(self) -> str:
        return self.text


class KafkaExc(Exception):
    pass


class Producer:
    """Records calls; `outstanding` is what len() reports; `raises` scripts the next
    commit/abort outcomes (an Err to raise, None to succeed)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.outstanding = 0
        self.raises: list[Err | None] = []

    def __len__(self) -> int:
        return self.outstanding

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def poll(self, timeout: float) -> int:
        self.calls.append("poll")
        return 0

    def flush(self, timeout: float) -> int:
        self.calls.append("flush")
        return 0

    def _end(self, name: str) -> None:
        self.calls.append(name)
        err = self.raises.pop(0) if self.raises else None
        if err is not None:
            raise KafkaExc(err)

    def commit_transaction(self, timeout: float) -> None:
        self._end("commit")

    def abort_transaction(self, timeout: float) -> None:
        self._end("abort")


@pytest.fixture
def txn() -> Any:
    now = [0.0]
    acked: list = []
    failed: list = []
    p = Producer()
    t = Transaction(
        p, KafkaExc, 3, 0.1, acked.append, lambda tup, why: failed.append((tup, why)),
        "sink", clock=lambda: now[0],
    )  # fmt: skip
    t.now, t.acked, t.failed, t.p = now, acked, failed, p  # type: ignore[attr-defined]
    return t


def test_a_full_transaction_waits_for_its_deliveries_then_commits_and_acks(txn: Any) -> None:
    assert all(txn.open_for(i) for i in range(3))
    assert not txn.open_for(3)  # full: the sink holds it
    txn.p.outstanding = 2
    assert txn.turn() is True and "commit" not in txn.p.calls  # reports to come: held
    txn.p.outstanding = 0
    assert txn.turn() is False
    assert txn.acked == [0, 1, 2] and txn.state == IDLE and txn.committed == 1
    assert txn.open_for(3) and txn.p.calls.count("begin") == 2


def test_an_open_transaction_commits_when_its_time_is_up(txn: Any) -> None:
    txn.open_for("a")
    assert txn.turn() is False and txn.state == OPEN
    txn.now[0] = 0.2
    assert txn.turn() is False and txn.acked == ["a"]


def test_a_delivery_error_aborts_and_fails_every_tuple_with_the_reason(txn: Any) -> None:
    txn.open_for("a")
    txn.open_for("b")
    txn.broken("delivery to 'x' failed")
    txn.broken("a second reason is not the first")
    assert txn.turn() is False
    assert txn.p.calls[-1] == "abort" and txn.aborted == 1
    assert txn.failed == [("a", "delivery to 'x' failed"), ("b", "delivery to 'x' failed")]


def test_a_retriable_commit_error_holds_and_tries_again(txn: Any) -> None:
    txn.open_for("a")
    txn.now[0] = 1.0
    txn.p.raises = [Err(retriable=True)]
    assert txn.turn() is True and txn.acked == []
    assert txn.turn() is False and txn.acked == ["a"]
    assert txn.p.calls.count("commit") == 2


def test_a_commit_that_requires_abort_aborts(txn: Any) -> None:
    txn.open_for("a")
    txn.now[0] = 1.0
    txn.p.raises = [Err(abortable=True, text="fenced epoch")]
    assert txn.turn() is False and txn.state == IDLE
    assert txn.p.calls[-2:] == ["commit", "abort"]
    assert txn.failed == [("a", "sink: transaction commit failed: fenced epoch")]


def test_a_fatal_error_fails_the_tuples_and_ends_the_task(txn: Any) -> None:
    txn.open_for("a")
    txn.broken("x")
    txn.p.raises = [Err(text="fatal")]
    with pytest.raises(RuntimeError, match="transaction abort failed: fatal"):
        txn.turn()
    assert txn.failed == [("a", "sink: transaction abort failed: fatal")]


def test_finish_commits_what_is_open(txn: Any) -> None:
    txn.open_for("a")
    txn.finish(1.0)
    assert txn.acked == ["a"] and txn.state == IDLE
    txn.open_for("b")
    txn.broken("lost")
    txn.finish(1.0)
    assert txn.failed == [("b", "lost")] and txn.state == IDLE != ABORTING


def test_an_error_reported_while_waiting_to_commit_aborts_instead(txn: Any) -> None:
    """A record librdkafka failed before it joined the transaction (an unknown topic)
    does not fail the commit: the sink must not commit over it."""
    txn.open_for("a")
    txn.open_for("b")
    txn.now[0] = 1.0
    txn.p.outstanding = 1
    assert txn.turn() is True  # committing: waits for the last report
    txn.broken("delivery to 'bad topic!' failed")
    txn.p.outstanding = 0
    assert txn.turn() is False
    assert "commit" not in txn.p.calls and txn.p.calls[-1] == "abort"
    assert txn.failed == [
        ("a", "delivery to 'bad topic!' failed"),
        ("b", "delivery to 'bad topic!' failed"),
    ]
