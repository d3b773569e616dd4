"""A map whose entries expire in buckets (Storm's RotatingMap): O(1) insert, delete and
expiry, with no scan of live entries. An entry lives between `buckets - 1` and
`buckets` rotations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class RotatingMap:
    __slots__ = ("_buckets",)

    def __init__(self, buckets: int = 3):
        if buckets < 2:
            raise ValueError("a rotating map needs at least 2 buckets")
        self._buckets: list[dict[Any, Any]] = [{} for _ in range(buckets)]

    def put(self, key: Any, value: Any) -> None:
        head = self._buckets[0]
        for b in self._buckets[1:]:
            b.pop(key, None)
        head[key] = value

    def put_new(self, key: Any, value: Any) -> None:
        """For a key known to be absent (a fresh random root id): one dict store."""
        self._buckets[0][key] = value

    def get(self, key: Any, default: Any = None) -> Any:
        for b in self._buckets:
            if key in b:
                return b[key]
        return default

    def pop(self, key: Any, default: Any = None) -> Any:
        for b in self._buckets:
            if key in b:
                return b.pop(key)
        return default

    def pop_found(self, keys: Any) -> list[Any]:
        """Pop each of `keys` (newest bucket first), in order; the values found (a key
        expired or popped already is skipped). One call for a batch of acks."""
        buckets = self._buckets
        out: list[Any] = []
        append = out.append
        for key in keys:
            for b in buckets:
                v = b.pop(key, None)
                if v is not None:
                    append(v)
                    break
        return out

    def renew(self, key: Any) -> Any:
        """`touch`, returning the entry's value (None when absent)."""
        if self.touch(key):
            return self._buckets[0][key]
        return None

    def touch(self, key: Any) -> bool:
        """Move an entry to the newest bucket (reset its timeout)."""
        for b in self._buckets[1:]:
            if key in b:
                self._buckets[0][key] = b.pop(key)
                return True
        return key in self._buckets[0]

    def rotate(self) -> dict[Any, Any]:
        """Drop the oldest bucket and return what it held (the expired entries)."""
        dead = self._buckets.pop()
        self._buckets.insert(0, {})
        return dead

    def __len__(self) -> int:
        return sum(map(len, self._buckets))  # on the spout's hot path: no generator

    def __contains__(self, key: Any) -> bool:
        return any(key in b for b in self._buckets)

    def items(self) -> Iterator[tuple[Any, Any]]:
        for b in self._buckets:
            yield from b.items()
