"""The embedded state store: one SQLite database file per namespace (a bolt task, or the
checkpoint spout), in the worker's data directory.

Tables: `kv` (the committed data), `prepared` (the one prepared transaction's writes,
a NULL value for a delete), `prepared_acks` (the acks held for them) and `tx` (the
committed and prepared txids). Prepare, commit
and rollback are each one SQLite transaction, so a process killed at any instant leaves
either the old or the new state, never a mix. Keys and values are pickled; the journal
is WAL with synchronous=FULL (a commit is on disk when it returns).

The files are the owner's alone: a database is created 0600 before SQLite opens it (its
WAL and shared-memory files take its mode) and the directories made for it 0700,
whatever the umask; the path made of a topology's name is checked to stay inside the
state directory (`names`).
"""

from __future__ import annotations

import os
import pickle
import re
import sqlite3
from collections.abc import Iterator
from typing import Any

from .. import private
from ..names import check_name, inside
from .kv import TOMBSTONE, Acks

_SAFE = re.compile(r"[^A-Za-z0-9_.\-]")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS prepared (k BLOB PRIMARY KEY, v BLOB);
CREATE TABLE IF NOT EXISTS tx (name TEXT PRIMARY KEY, txid INTEGER);
CREATE TABLE IF NOT EXISTS prepared_acks (one INTEGER PRIMARY KEY CHECK (one = 1), acks BLOB);
CREATE TABLE IF NOT EXISTS committed_acks (
  one INTEGER PRIMARY KEY CHECK (one = 1), txid INTEGER, acks BLOB
);
"""


def _locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


LOCKED_RETRIES = [0]  # set-ups retried on a lock, in this process (tests read it)


def _set_up(db: sqlite3.Connection) -> None:
    """WAL, FULL sync and the tables. Setting the journal mode does not wait on SQLite's
    busy handler: opened while another process (a worker still dying, a reader of its
    state) holds a lock, it fails at once with "database is locked"; try again for up
    to 10 s, with tenacity's backoff, before that error stands."""
    from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

    for attempt in Retrying(
        retry=retry_if_exception(_locked),
        stop=stop_after_delay(10),
        wait=wait_exponential(multiplier=0.005, max=0.2),
        before_sleep=lambda _state: LOCKED_RETRIES.__setitem__(0, LOCKED_RETRIES[0] + 1),
        reraise=True,
    ):
        with attempt:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.executescript(_SCHEMA)


def db_path(directory: str, topology: str, namespace: str) -> str:
    """Where namespace `namespace` of `topology` keeps its database file: inside
    `directory`, whatever the names (an error naming them otherwise)."""
    name = check_name(topology, "topology name")
    return inside(directory, name, _SAFE.sub("_", namespace) + ".db")


class SqliteStore:
    def __init__(self, path: str):
        """`path`: a database file (its directory is created), or ":memory:"."""
        if path != ":memory:":
            private.make_dir(os.path.dirname(path) or ".")
            private.open_file(path, 0o600)
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        _set_up(self.db)

    def get(self, key: Any) -> Any:
        row = self.db.execute("SELECT v FROM kv WHERE k = ?", (_dump(key),)).fetchone()
        return TOMBSTONE if row is None else pickle.loads(row[0])

    def items(self) -> Iterator[tuple[Any, Any]]:
        rows = self.db.execute("SELECT k, v FROM kv").fetchall()
        return ((pickle.loads(k), pickle.loads(v)) for k, v in rows)

    def prepare(self, txid: int, writes: dict[Any, Any], acks: Acks = ()) -> None:
        rows = [(_dump(k), None if v is TOMBSTONE else _dump(v)) for k, v in writes.items()]
        with self._transaction() as db:
            db.execute("DELETE FROM prepared")
            db.executemany("INSERT INTO prepared (k, v) VALUES (?, ?)", rows)
            db.execute("INSERT OR REPLACE INTO prepared_acks VALUES (1, ?)", (_dump(list(acks)),))
            db.execute("INSERT OR REPLACE INTO tx (name, txid) VALUES ('prepared', ?)", (txid,))

    def commit(self, txid: int) -> Acks:
        with self._transaction() as db:
            if self._txid(db, "prepared") != txid:
                return []  # committed already (a repeated COMMIT), or nothing was prepared
            row = db.execute("SELECT acks FROM prepared_acks").fetchone()
            db.execute("DELETE FROM kv WHERE k IN (SELECT k FROM prepared WHERE v IS NULL)")
            db.execute("INSERT OR REPLACE INTO kv SELECT k, v FROM prepared WHERE v IS NOT NULL")
            db.execute("DELETE FROM prepared")
            db.execute("DELETE FROM prepared_acks")
            db.execute("DELETE FROM tx WHERE name = 'prepared'")
            db.execute("INSERT OR REPLACE INTO tx (name, txid) VALUES ('committed', ?)", (txid,))
            acks = _dump([]) if row is None else row[0]
            db.execute("INSERT OR REPLACE INTO committed_acks VALUES (1, ?, ?)", (txid, acks))
        return [] if row is None else pickle.loads(row[0])

    def committed_acks(self) -> tuple[int, Acks] | None:
        row = self.db.execute("SELECT txid, acks FROM committed_acks").fetchone()
        return None if row is None else (int(row[0]), pickle.loads(row[1]))

    def rollback(self) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM prepared")
            db.execute("DELETE FROM prepared_acks")
            db.execute("DELETE FROM tx WHERE name = 'prepared'")

    def txids(self) -> tuple[int | None, int | None]:
        return self._txid(self.db, "committed"), self._txid(self.db, "prepared")

    def close(self) -> None:
        self.db.close()

    @staticmethod
    def _txid(db: sqlite3.Connection, name: str) -> int | None:
        row = db.execute("SELECT txid FROM tx WHERE name = ?", (name,)).fetchone()
        return None if row is None else int(row[0])

    def _transaction(self) -> _Tx:
        return _Tx(self.db)


class _Tx:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on an exception."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")


def _dump(value: Any) -> bytes:
    return pickle.dumps(value, protocol=5)
