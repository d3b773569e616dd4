"""`KeyValueState`: Storm's KeyValueState over a durable store, with prepare/commit.

Three layers, newest first: the writes since the last prepare (`pending`, in memory),
the writes of the prepared transaction (`prepared`, in memory and in the store's
prepare area), and what the store committed. A read looks in that order; a delete is a
tombstone until it reaches the committed layer. The store (`Store`) keeps what must
survive the process: the committed data, one prepared transaction at most, and the
txids of both, each change atomic.

A process that starts again sees only the committed layer: a prepared transaction left
in the store waits for the checkpoint spout's verdict (COMMIT rolls it forward,
ROLLBACK drops it), which always comes before INITSTATE lets the bolt run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

TOMBSTONE: Any = object()  # a deleted key, until the delete is committed
_MISSING: Any = object()


Acks = Sequence[tuple[int, int]]  # (root, ack value) pairs, as a bolt's acks go to ackers


class Store(Protocol):
    """A backend (sqlite.py, redis.py, MemoryStore). `prepare` replaces any prepared
    transaction (its writes, and the acks the bolt holds for them); `commit` applies the
    prepared one of that txid and returns its acks (nothing when it was committed
    already: recovery may repeat a COMMIT), and keeps them as the last commit's
    (`committed_acks`) until the next commit; each is atomic."""

    def get(self, key: Any) -> Any: ...  # TOMBSTONE when absent
    def items(self) -> Iterator[tuple[Any, Any]]: ...
    def prepare(self, txid: int, writes: dict[Any, Any], acks: Acks = ()) -> None: ...
    def commit(self, txid: int) -> Acks: ...  # the acks prepared with it, [] if none
    def committed_acks(self) -> tuple[int, Acks] | None: ...  # the last commit's (txid, acks)
    def rollback(self) -> None: ...
    def txids(self) -> tuple[int | None, int | None]: ...  # (committed, prepared)
    def close(self) -> None: ...


class KeyValueState:
    """`put`, `get`, `delete`, iteration (as Storm's KeyValueState), and the checkpoint
    operations the engine calls: `prepare_commit(txid)`, `commit(txid)`, `commit()`
    (prepare and commit at once, for state outside the protocol), `rollback()`.

    Keys and values are any picklable Python values; a key is compared by its pickled
    bytes in the store, so use plain keys (str, int, tuples of those)."""

    def __init__(self, store: Store, namespace: str = ""):
        self.store = store
        self.namespace = namespace
        self.pending: dict[Any, Any] = {}
        self.prepared: dict[Any, Any] = {}
        self.prepared_txid: int | None = None

    # -- Storm's KeyValueState ---------------------------------------------------------------
    def put(self, key: Any, value: Any) -> None:
        self.pending[key] = value

    def get(self, key: Any, default: Any = None) -> Any:
        v = self.pending.get(key, _MISSING)
        if v is _MISSING:
            v = self.prepared.get(key, _MISSING)
            if v is _MISSING:
                v = self.store.get(key)
        return default if v is TOMBSTONE else v

    def delete(self, key: Any) -> Any:
        """Remove `key`; returns the value it had (None if none), as Storm's."""
        old = self.get(key)
        self.pending[key] = TOMBSTONE
        return old

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        """(key, value) of every key, newest layer winning."""
        merged = dict(self.store.items())
        merged.update(self.prepared)
        merged.update(self.pending)
        return ((k, v) for k, v in merged.items() if v is not TOMBSTONE)

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(self)

    def __contains__(self, key: Any) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def __len__(self) -> int:
        return sum(1 for _ in self)

    # -- the checkpoint protocol ---------------------------------------------------------------
    def prepare_commit(self, txid: int, acks: Acks = ()) -> None:
        """Make the writes since the last prepare durable as transaction `txid`, not yet
        visible to a restart. One prepared transaction at a time, as Storm's. `acks`:
        what the bolt acks when it commits (the engine's; see `commit`)."""
        if self.prepared_txid is not None and txid != self.prepared_txid:
            raise RuntimeError(
                f"state {self.namespace!r}: cannot prepare txid {txid} while txid "
                f"{self.prepared_txid} is prepared and not committed"
            )
        writes = dict(self.prepared)
        writes.update(self.pending)
        self.store.prepare(txid, writes, acks)
        self.prepared, self.pending, self.prepared_txid = writes, {}, txid

    def commit(self, txid: int | None = None) -> Acks:
        """Commit prepared transaction `txid`; without a txid, prepare and commit the
        writes so far at once (Storm's State.commit()).

        Returns the acks prepared with `txid` (nothing if it was committed already): the
        bolt sends them now, whether this process prepared them or an earlier one did
        (a restarted bolt rolling a commit forward: that process died before it could
        send them, and they complete their trees now instead of a replay)."""
        if txid is None:
            committed, _ = self.store.txids()
            txid = (committed or 0) + 1 if self.prepared_txid is None else self.prepared_txid
            self.prepare_commit(txid)
        acks = self.store.commit(txid)
        if self.prepared_txid == txid:
            self.prepared, self.prepared_txid = {}, None
        return list(acks)

    def committed_acks(self) -> tuple[int, Acks] | None:
        """The last committed transaction's txid and acks, as the store keeps them: a
        restarted bolt sends them again, since its previous process may have died after
        the commit and before they left (the ackers apply them once: `AckFolder.committed`)."""
        return self.store.committed_acks()

    def rollback(self) -> None:
        """Back to the last committed state: the prepared transaction and every write
        since are dropped."""
        self.store.rollback()
        self.pending, self.prepared, self.prepared_txid = {}, {}, None

    def close(self) -> None:
        self.store.close()

    def __repr__(self) -> str:
        return f"KeyValueState({self.namespace!r}, {type(self.store).__name__})"


class MemoryStore:
    """A store in this process only (tests, and a single in-process worker's default
    when it has no data directory: nothing there can restart)."""

    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}
        self.pending: dict[Any, Any] | None = None
        self.acks: Acks = ()
        self.last_acks: tuple[int, Acks] | None = None
        self.committed_txid: int | None = None
        self.prepared_txid: int | None = None

    def get(self, key: Any) -> Any:
        return self.data.get(key, TOMBSTONE)

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(list(self.data.items()))

    def prepare(self, txid: int, writes: dict[Any, Any], acks: Acks = ()) -> None:
        self.pending, self.prepared_txid, self.acks = dict(writes), txid, list(acks)

    def commit(self, txid: int) -> Acks:
        if self.prepared_txid != txid or self.pending is None:
            return []  # committed already (a repeated COMMIT), or nothing was prepared
        for k, v in self.pending.items():
            if v is TOMBSTONE:
                self.data.pop(k, None)
            else:
                self.data[k] = v
        self.pending, self.prepared_txid, self.committed_txid = None, None, txid
        acks, self.acks = self.acks, ()
        self.last_acks = (txid, list(acks))
        return acks

    def committed_acks(self) -> tuple[int, Acks] | None:
        return self.last_acks

    def rollback(self) -> None:
        self.pending, self.prepared_txid = None, None

    def txids(self) -> tuple[int | None, int | None]:
        return self.committed_txid, self.prepared_txid

    def close(self) -> None:
        pass
