"""An in-memory partitioned log with Kafka's consumer-group contract, for tests with no
broker: topics of partitions with offsets, committed positions per group (with
metadata), pause/resume, and eager rebalances (every member revokes, then the group is
assigned again) when a member joins or leaves.

    with MemoryLog("orders") as log:         # found by name: bootstrap "memory://orders"
        log.create_topic("in", partitions=4)
        log.produce("in", b"v", key=b"k")
        spout = KafkaSpout(log.address, topics=["in"], group_id="g")
        ... run a topology (one worker: the log lives in this process) ...
        log.committed("g", "in", 0)

A `KafkaSpout` whose bootstrap_servers is `memory://NAME` reads the `MemoryLog` named
NAME in its own process, so the topology must run its workers in the test's process
(`topology.workers` 1, LocalCluster's default). `log.consumer(group_id)` is the same
consumer the spout uses, for driving it by hand; `log.events` records every assignment
and revocation, in order, for assertions.
"""

from __future__ import annotations

import re
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from typing import Any

TP = tuple[str, int]
BEGINNING, END = "earliest", "latest"
_LOGS: dict[str, MemoryLog] = {}
_LOGS_LOCK = threading.Lock()


def memory_log(name: str) -> MemoryLog:
    """The MemoryLog called `name` in this process; a clear error when there is none."""
    with _LOGS_LOCK:
        log = _LOGS.get(name)
    if log is None:
        raise LookupError(
            f"no MemoryLog named {name!r} in this process (bootstrap 'memory://{name}'): "
            "create it with stormish.testing.MemoryLog(name) and run the topology's workers "
            "in this process (topology.workers 1)"
        )
    return log


class MemoryLog:
    """Topics, groups and their consumers; thread-safe (one lock, one condition that
    wakes pollers when a record arrives or a group changes)."""

    def __init__(self, name: str = "default"):
        self.name = name
        self.topics: dict[str, list[list[tuple]]] = {}
        self.groups: dict[str, _Group] = {}
        self.events: list[tuple[str, str, int, tuple[TP, ...]]] = []
        self.rejected_commits = 0
        self._cond = threading.Condition()
        self._rr = 0
        with _LOGS_LOCK:
            if name in _LOGS:
                raise ValueError(f"a MemoryLog named {name!r} exists already in this process")
            _LOGS[name] = self

    @property
    def address(self) -> str:
        """What to give KafkaSpout as bootstrap_servers."""
        return f"memory://{self.name}"

    def close(self) -> None:
        with _LOGS_LOCK:
            if _LOGS.get(self.name) is self:
                del _LOGS[self.name]

    def __enter__(self) -> MemoryLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- producing -----------------------------------------------------------------------------
    def create_topic(self, topic: str, partitions: int = 1) -> None:
        if not isinstance(partitions, int) or partitions < 1:
            raise ValueError(f"topic {topic!r}: partitions must be an integer >= 1")
        with self._cond:
            if topic in self.topics:
                raise ValueError(f"topic {topic!r} exists already in MemoryLog {self.name!r}")
            self.topics[topic] = [[] for _ in range(partitions)]
            for g in self.groups.values():
                g.rebalance()  # a pattern subscription may now match it
            self._cond.notify_all()

    def produce(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> int:
        """Append a record; returns its offset. Without `partition`: by the key's hash
        (crc32 of its bytes), round robin for no key."""
        with self._cond:
            parts = self._partitions(topic)
            if partition is None:
                if key is None:
                    partition, self._rr = self._rr % len(parts), self._rr + 1
                else:
                    partition = zlib.crc32(_bytes(key)) % len(parts)
            if not 0 <= partition < len(parts):
                raise ValueError(f"topic {topic!r} has no partition {partition}")
            log = parts[partition]
            ts = int(time.time() * 1000) if timestamp is None else timestamp
            log.append((topic, partition, len(log), key, value, ts))
            self._cond.notify_all()
            return len(log) - 1

    def _partitions(self, topic: str) -> list[list[tuple]]:
        try:
            return self.topics[topic]
        except KeyError:
            raise KeyError(f"MemoryLog {self.name!r} has no topic {topic!r}") from None

    def end_offsets(self, topic: str) -> list[int]:
        with self._cond:
            return [len(p) for p in self._partitions(topic)]

    def records(self, topic: str, partition: int) -> list[tuple]:
        with self._cond:
            return list(self._partitions(topic)[partition])

    # -- groups --------------------------------------------------------------------------------
    def committed(self, group_id: str, topic: str, partition: int) -> int | None:
        """The group's committed position (the next offset to read), None when none."""
        with self._cond:
            g = self.groups.get(group_id)
            got = g.committed.get((topic, partition)) if g else None
            return None if got is None else got[0]

    def consumer(self, group_id: str) -> MemoryConsumer:
        """A new member of `group_id` (it joins when it subscribes)."""
        with self._cond:
            g = self.groups.get(group_id)
            if g is None:
                g = self.groups[group_id] = _Group(self, group_id)
            g.next_member += 1
            return MemoryConsumer(self, g, g.next_member)

    def _matching(self, sub: tuple[tuple[str, ...], str | None]) -> list[TP]:
        topics, pattern = sub
        rx = re.compile(pattern) if pattern else None
        names = [t for t in sorted(self.topics) if t in topics or (rx and rx.match(t))]
        return [(t, p) for t in names for p in range(len(self.topics[t]))]


class _Group:
    def __init__(self, log: MemoryLog, name: str):
        self.log, self.name = log, name
        self.members: list[MemoryConsumer] = []
        self.generation = 0
        self.assigned = True  # the current generation's assignment has been made
        self.committed: dict[TP, tuple[int, str]] = {}
        self.next_member = 0

    def rebalance(self) -> None:
        """Eager: every member revokes all it has (on its next poll); once all have, each
        is given its share (round robin over the sorted partitions)."""
        self.generation += 1
        self.assigned = False
        for m in self.members:
            m.must_revoke = True
        self.log._cond.notify_all()

    def maybe_assign(self) -> None:
        if self.assigned or any(m.joined != self.generation for m in self.members):
            return
        self.assigned = True
        wanted = sorted({tp for m in self.members for tp in self.log._matching(m.sub)})
        shares: dict[int, list[TP]] = {m.member: [] for m in self.members}
        for i, tp in enumerate(wanted):
            candidates = [m for m in self.members if tp in self.log._matching(m.sub)]
            shares[candidates[i % len(candidates)].member].append(tp)
        for m in self.members:
            m.pending_assign = shares[m.member]


class MemoryConsumer:
    """One group member: the client interface KafkaSpout's feed drives (stormish.kafka
    calls it on one thread; callbacks run inside `poll`, as confluent-kafka's do)."""

    def __init__(self, log: MemoryLog, group: _Group, member: int):
        self.log, self.group, self.member = log, group, member
        self.sub: tuple[tuple[str, ...], str | None] = ((), None)
        self.owned: list[TP] = []
        self.position: dict[TP, int] = {}
        self.paused: set[TP] = set()
        self.high: dict[TP, int] = {}
        self.must_revoke = False
        self.joined = -1
        self.pending_assign: list[TP] | None = None
        self.closed = False
        self._on_assign: Callable[[list[TP]], dict[TP, Any]] | None = None
        self._on_revoke: Callable[[list[TP]], None] | None = None

    def subscribe(
        self,
        topics: Iterable[str] | None,
        pattern: str | None,
        on_assign: Callable[[list[TP]], dict[TP, Any]],
        on_revoke: Callable[[list[TP]], None],
    ) -> None:
        with self.log._cond:
            self.sub = (tuple(topics or ()), pattern)
            self._on_assign, self._on_revoke = on_assign, on_revoke
            self.group.members.append(self)
            self.group.rebalance()

    def poll(self, max_records: int, timeout: float) -> list[tuple]:
        """Rebalance callbacks first (revoke, then assign), then up to `max_records`
        records of owned, unpaused partitions; waits up to `timeout` for one."""
        self._rebalance_callbacks()
        deadline = time.monotonic() + timeout
        with self.log._cond:
            while True:
                out = self._fetch(max_records)
                left = deadline - time.monotonic()
                if out or left <= 0 or self.must_revoke or self.pending_assign is not None:
                    return out
                self.log._cond.wait(left)

    def _fetch(self, max_records: int) -> list[tuple]:
        out: list[tuple] = []
        for tp in self.owned:
            records = self.log.topics[tp[0]][tp[1]]
            self.high[tp] = len(records)
            if tp in self.paused:
                continue
            pos = self.position[tp]
            take = records[pos : pos + max_records - len(out)]
            out.extend(take)
            self.position[tp] = pos + len(take)
            if len(out) >= max_records:
                break
        return out

    def _rebalance_callbacks(self) -> None:
        with self.log._cond:
            revoke = list(self.owned) if self.must_revoke else None
        if revoke is not None:
            if revoke:
                self.log.events.append(("revoke", self.group.name, self.member, tuple(revoke)))
                if self._on_revoke is not None:
                    self._on_revoke(revoke)  # may commit: it still owns them
            with self.log._cond:
                # a pause outlives the revoke, as librdkafka's does: a partition given
                # back to this member is still paused until resumed
                self.owned, self.must_revoke = [], False
                self.joined = self.group.generation
                self.group.maybe_assign()
        with self.log._cond:
            assign, self.pending_assign = self.pending_assign, None
        if assign is not None:
            self.log.events.append(("assign", self.group.name, self.member, tuple(assign)))
            starts = self._on_assign(assign) if self._on_assign else {}
            with self.log._cond:
                self.owned = list(assign)
                for tp in assign:
                    self.position[tp] = self._resolve(tp, starts.get(tp))

    def _resolve(self, tp: TP, start: Any) -> int:
        n = len(self.log.topics[tp[0]][tp[1]])
        if start == BEGINNING:
            return 0
        if start == END:
            return n
        if isinstance(start, int):
            return min(max(start, 0), n)
        got = self.group.committed.get(tp)
        return got[0] if got else 0

    def committed(self, tps: Iterable[TP]) -> dict[TP, tuple[int, str] | None]:
        """Each partition's committed (position, metadata), None where none."""
        with self.log._cond:
            return {tp: self.group.committed.get(tp) for tp in tps}

    def commit(self, offsets: dict[TP, int], sync: bool, metadata: str = "") -> bool:
        """Store positions of owned partitions; one it does not own is rejected (counted
        in `log.rejected_commits`, as Kafka fences a member of an older generation)."""
        ok = True
        with self.log._cond:
            for tp, pos in offsets.items():
                if tp in self.owned and not self.closed:
                    self.group.committed[tp] = (pos, metadata)
                else:
                    self.log.rejected_commits += 1
                    ok = False
        return ok

    def pause(self, tps: Iterable[TP]) -> None:
        with self.log._cond:
            self.paused.update(tp for tp in tps if tp in self.owned)

    def resume(self, tps: Iterable[TP]) -> None:
        with self.log._cond:
            self.paused.difference_update(tps)

    def high_watermarks(self, tps: Iterable[TP]) -> dict[TP, int]:
        """The end offsets as of the last fetch (Kafka's cached high watermark)."""
        with self.log._cond:
            return {tp: self.high[tp] for tp in tps if tp in self.high}

    def positions(self, tps: Iterable[TP]) -> dict[TP, int]:
        """The next offset `poll` hands over, per owned partition."""
        with self.log._cond:
            return {tp: self.position[tp] for tp in tps if tp in self.owned}

    def close(self) -> None:
        """Leave the group, revoking what it owns first (as confluent-kafka's close)."""
        if self.closed:
            return
        with self.log._cond:
            owned = list(self.owned)
        if owned and self._on_revoke is not None:
            self.log.events.append(("revoke", self.group.name, self.member, tuple(owned)))
            self._on_revoke(owned)
        with self.log._cond:
            self.closed = True
            self.owned = []
            if self in self.group.members:
                self.group.members.remove(self)
                self.group.rebalance()
                self.group.maybe_assign()


def _bytes(key: Any) -> bytes:
    if isinstance(key, bytes):
        return key
    return str(key).encode()
