"""KeyValueState over the in-memory and the SQLite store: Storm's KeyValueState and
InMemoryKeyValueState tests' scenarios, and what a restarted process sees."""

from __future__ import annotations

import pytest

from stormish.state.kv import KeyValueState, MemoryStore
from stormish.state.sqlite import SqliteStore, db_path


@pytest.fixture(params=["memory", "sqlite"])
def make(request, tmp_path):
    """A factory of states over one durable store: calling it again is a restart."""
    path = db_path(str(tmp_path), "topo", "count-3")
    mem = MemoryStore()
    opened = []

    def open_state():
        store = mem if request.param == "memory" else SqliteStore(path)
        s = KeyValueState(store, "count-3")
        opened.append(s)
        return s

    yield open_state
    for s in opened:
        s.close()


def test_get_put_delete_and_iterate(make):
    s = make()
    assert s.get("a") is None
    assert s.get("a", 0) == 0
    s.put("a", 1)
    s.put("b", 2)
    assert s.get("a") == 1
    assert s.delete("a") == 1
    assert s.get("a") is None
    assert "a" not in s and "b" in s
    assert dict(s) == {"b": 2}
    assert len(s) == 1


def test_prepare_then_commit_keeps_the_writes(make):
    s = make()
    s.put("a", 1)
    s.prepare_commit(1)
    s.put("a", 2)  # after the prepare: the next transaction's
    assert s.get("a") == 2
    s.commit(1)
    assert make().get("a") == 1  # a restart sees what was committed, not what followed


def test_rollback_returns_to_the_last_commit(make):
    s = make()
    s.put("a", 1)
    s.put("gone", 9)
    s.commit()
    s.delete("gone")
    s.put("a", 2)
    s.prepare_commit(2)
    s.put("b", 3)
    s.rollback()
    assert dict(s) == {"a": 1, "gone": 9}


def test_storms_prepare_commit_rollback(make):
    """Storm's InMemoryKeyValueStateTest.testPrepareCommitRollback, step by step: a
    rollback with nothing committed empties the state; one after a commit returns to it,
    deletes included; a prepare or a commit changes no value read; and a restart reads
    the last commit (beyond Storm's in-memory state)."""
    s = make()

    def abc(state=s):
        return [state.get("a"), state.get("b"), state.get("c")]

    s.put("a", "1")
    s.put("b", "2")
    s.prepare_commit(1)
    s.put("c", "3")
    assert abc() == ["1", "2", "3"]
    s.rollback()
    assert abc() == [None, None, None]
    s.put("a", "1")
    s.put("b", "2")
    s.prepare_commit(1)
    s.commit(1)
    s.put("c", "3")
    assert abc() == ["1", "2", "3"]
    s.rollback()
    assert abc() == ["1", "2", None]
    s.put("c", "3")
    assert s.delete("b") == "2"
    assert s.delete("c") == "3"
    assert abc() == ["1", None, None]
    s.prepare_commit(2)
    assert abc() == ["1", None, None]
    s.commit(2)
    assert abc() == ["1", None, None]
    s.put("b", "2")
    s.prepare_commit(3)
    s.put("c", "3")
    assert abc() == ["1", "2", "3"]
    s.rollback()
    assert abc() == ["1", None, None]
    assert abc(make()) == ["1", None, None]


def test_a_prepared_transaction_is_invisible_after_a_restart_until_committed(make):
    s = make()
    s.put("a", 1)
    s.prepare_commit(7)
    again = make()  # the process died after the prepare
    assert again.get("a") is None
    again.commit(7)  # the spout rolls it forward (it was COMMITTING)
    assert again.get("a") == 1
    again.commit(7)  # a repeated COMMIT changes nothing
    assert dict(again) == {"a": 1}


def test_a_commit_returns_the_held_acks_and_keeps_them_as_the_last_commits(make):
    """The acks a bolt held for a prepared transaction are kept with it: the commit
    returns them, whether this process prepared it or a restarted one rolls it forward
    (its predecessor died before sending them); a repeated commit gets none. The last
    commit's acks stay in the store with its txid: a process that starts after the
    commit sends them again (its predecessor may have died before they left)."""
    s = make()
    assert s.committed_acks() is None
    s.put("a", 1)
    s.prepare_commit(1, [(11, 5), (12, 6)])
    assert s.commit(1) == [(11, 5), (12, 6)]
    assert s.committed_acks() == (1, [(11, 5), (12, 6)])
    s.put("a", 2)
    s.prepare_commit(2, [(13, 7)])
    again = make()
    assert again.committed_acks() == (1, [(11, 5), (12, 6)])  # 2 is only prepared
    assert again.commit(2) == [(13, 7)]
    assert again.commit(2) == []
    assert again.committed_acks() == (2, [(13, 7)])
    assert make().committed_acks() == (2, [(13, 7)])
    assert again.get("a") == 2
    again.put("a", 3)
    again.prepare_commit(3, [(14, 8)])
    again.rollback()
    assert make().committed_acks() == (2, [(13, 7)])  # a rollback keeps the last commit's


def test_a_prepared_transaction_rolled_back_after_a_restart_is_gone(make):
    s = make()
    s.put("a", 1)
    s.commit()
    s.put("a", 2)
    s.prepare_commit(2)
    again = make()
    again.rollback()
    again.commit(2)  # nothing prepared any more: nothing to commit
    assert again.get("a") == 1


def test_deletes_reach_the_store_at_commit(make):
    s = make()
    s.put("a", 1)
    s.commit()
    s.delete("a")
    s.prepare_commit(2)
    assert make().get("a") == 1
    s.commit(2)
    assert make().get("a") is None


def test_only_one_transaction_is_prepared_at_a_time(make):
    s = make()
    s.prepare_commit(1)
    with pytest.raises(RuntimeError, match="txid 1 is prepared"):
        s.prepare_commit(2)


def test_keys_and_values_are_python_values(tmp_path):
    s = KeyValueState(SqliteStore(db_path(str(tmp_path), "t", "n")), "n")
    s.put(("w", 1), {"count": [1, 2]})
    s.commit()
    s.close()
    again = KeyValueState(SqliteStore(db_path(str(tmp_path), "t", "n")), "n")
    assert again.get(("w", 1)) == {"count": [1, 2]}
    again.close()


def test_a_store_opened_while_another_connection_holds_a_lock_waits_for_it(tmp_path):
    """Setting WAL does not wait on SQLite's busy handler: a store opened while another
    process holds the database (a worker still dying, a reader of its state) failed at
    once with "database is locked"; it retries until the lock goes."""
    import sqlite3
    import threading

    from stormish.state import sqlite as sq
    from stormish.testing import poll_for

    path = str(tmp_path / "held.db")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    before = sq.LOCKED_RETRIES[0]
    opened: list = []
    errors: list = []

    def open_it() -> None:
        try:
            opened.append(sq.SqliteStore(path))
        except Exception as exc:  # noqa: BLE001 - the test says what it was
            errors.append(exc)

    t = threading.Thread(target=open_it)
    t.start()
    poll_for(lambda: sq.LOCKED_RETRIES[0] > before or errors, 10, 0.005, "a retry on the lock")
    holder.execute("COMMIT")
    holder.close()
    t.join(15)
    assert not errors, errors
    store = opened[0]
    store.prepare(1, {"k": 1})
    store.commit(1)
    assert store.get("k") == 1
