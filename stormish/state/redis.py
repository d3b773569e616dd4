"""The Redis state store (Storm's RedisKeyValueState), for clusters: redis-py against
`topology.state.redis.url`, extra `stormish[redis]`.

Keys, all under the namespace NS (TOPOLOGY:COMPONENT-TASK):
- `NS` a hash of the committed data (pickled key -> pickled value);
- `NS$prepare` a hash of the prepared transaction's writes, a delete as an empty value
  (a pickle is never empty);
- `NS$acks` the acks held for the prepared writes (a pickled list);
- `NS$committed_acks` the acks of the last committed transaction, with its txid (a
  restarted task sends them again: its previous process may have died before they left);
- `NS$txid` a hash with the committed and the prepared txid.
Prepare and commit are each one MULTI/EXEC transaction, so the server applies all of
it or none; a commit checks the prepared txid inside a WATCH, so a repeated COMMIT is
a no-op as in the embedded store.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from .kv import TOMBSTONE, Acks

_DELETED = b""


class RedisStore:
    def __init__(self, url: str, namespace: str):
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - the message is the point
            raise ImportError(
                "topology.state.provider 'redis' needs redis-py: pip install 'stormish[redis]'"
            ) from exc
        self.client: Any = redis.Redis.from_url(url)  # typed loosely: bytes replies
        self.ns = namespace
        self.prepare_key = f"{namespace}$prepare"
        self.tx_key = f"{namespace}$txid"
        self.acks_key = f"{namespace}$acks"
        self.committed_acks_key = f"{namespace}$committed_acks"

    def get(self, key: Any) -> Any:
        v = self.client.hget(self.ns, _dump(key))
        return TOMBSTONE if v is None else pickle.loads(v)

    def items(self) -> Iterator[tuple[Any, Any]]:
        for k, v in self.client.hscan_iter(self.ns):
            yield pickle.loads(k), pickle.loads(v)

    def prepare(self, txid: int, writes: dict[Any, Any], acks: Acks = ()) -> None:
        mapping = {_dump(k): _DELETED if v is TOMBSTONE else _dump(v) for k, v in writes.items()}
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(self.prepare_key)
        if mapping:
            pipe.hset(self.prepare_key, mapping=mapping)
        pipe.set(self.acks_key, _dump(list(acks)))
        pipe.hset(self.tx_key, "prepared", txid)
        pipe.execute()

    def commit(self, txid: int) -> Acks:
        applied: list[Acks] = []

        def apply(pipe: Any) -> None:
            applied.clear()
            if _int(pipe.hget(self.tx_key, "prepared")) != txid:
                pipe.multi()
                return  # committed already (a repeated COMMIT), or nothing was prepared
            acks = pipe.get(self.acks_key)
            applied.append([] if acks is None else pickle.loads(acks))
            kept_acks = _dump((txid, applied[0]))
            writes = pipe.hgetall(self.prepare_key)
            gone = [k for k, v in writes.items() if v == _DELETED]
            kept = {k: v for k, v in writes.items() if v != _DELETED}
            pipe.multi()
            if gone:
                pipe.hdel(self.ns, *gone)
            if kept:
                pipe.hset(self.ns, mapping=kept)
            pipe.delete(self.prepare_key, self.acks_key)
            pipe.hdel(self.tx_key, "prepared")
            pipe.hset(self.tx_key, "committed", txid)
            pipe.set(self.committed_acks_key, kept_acks)

        self.client.transaction(apply, self.tx_key, self.prepare_key, self.acks_key)
        return applied[0] if applied else []

    def committed_acks(self) -> tuple[int, Acks] | None:
        raw = self.client.get(self.committed_acks_key)
        return None if raw is None else pickle.loads(raw)

    def rollback(self) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(self.prepare_key, self.acks_key)
        pipe.hdel(self.tx_key, "prepared")
        pipe.execute()

    def txids(self) -> tuple[int | None, int | None]:
        committed, prepared = self.client.hmget(self.tx_key, ["committed", "prepared"])
        return _int(committed), _int(prepared)

    def close(self) -> None:
        self.client.close()


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def _dump(value: Any) -> bytes:
    return pickle.dumps(value, protocol=5)
