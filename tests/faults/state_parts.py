"""The stateful word count that the kill -9 tests run (components here, not in a test
module, because worker processes import them), and readers of what it committed.

WordSpout emits word i (`w{i % VOCABULARY}`) as its own tree (msg id i), replays what
fails, and finishes when every id is acked; Lower relays each word (a bolt upstream of
the stateful one, so barriers are forwarded); Counter is the StatefulBolt. The state
lives in `topology.state.dir`, where the test reads it: each counter task's committed
counts, and the checkpoint spout's transaction.
"""

from __future__ import annotations

import glob
import os
import time

from stormish import BasicBolt, Spout, Topology
from stormish.state import StatefulBolt
from stormish.state.kv import KeyValueState
from stormish.state.sqlite import SqliteStore

VOCABULARY = 997


def word(i: int) -> str:
    return f"w{i % VOCABULARY}"


def truth(count: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in range(count):
        out[word(i)] = out.get(word(i), 0) + 1
    return out


class WordSpout(Spout):
    outputs = ["word"]

    def __init__(self, count: int, per_call: int = 64):
        self.count, self.per_call = count, per_call

    def open(self, conf, context):
        self.todo = list(range(self.count - 1, -1, -1))
        self.inflight: set[int] = set()

    def next_tuple(self):
        for _ in range(self.per_call):
            if not self.todo:
                if not self.inflight:
                    self.finish()
                return
            i = self.todo.pop()
            self.inflight.add(i)
            self.emit([word(i)], msg_id=i)

    def ack(self, msg_id):
        self.inflight.discard(msg_id)

    def fail(self, msg_id, failure=None):
        if msg_id in self.inflight:
            self.inflight.discard(msg_id)
            self.todo.append(msg_id)


class Lower(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        self.emit([tup.values[0].lower()])


class Counter(StatefulBolt):
    """`pause`: seconds each prepare and commit takes (a slow store), so that a test
    can kill a worker while one is under way."""

    def __init__(self, pause: float = 0.0):
        self.pause = pause

    def pre_prepare(self, txid):
        time.sleep(self.pause)

    def pre_commit(self, txid):
        time.sleep(self.pause)

    def init_state(self, state):
        self.counts = state

    def execute(self, tup):
        w = tup.values[0]
        self.counts.put(w, self.counts.get(w, 0) + 1)
        self.ack(tup)


def topology(name: str, count: int, state: str, pause: float = 0.0, **conf) -> Topology:
    """`state`: a directory (the embedded provider's topology.state.dir) or a Redis URL."""
    where = (
        {"topology.state.provider": "redis", "topology.state.redis.url": state}
        if state.startswith("redis://")
        else {"topology.state.dir": state}
    )
    t = Topology(
        name,
        config={
            "topology.workers": 2,
            "topology.state.checkpoint.interval.ms": 200,
            **where,
            **conf,
        },
    )
    t.set_spout("words", WordSpout(count))
    t.set_bolt("lower", Lower(), parallelism=2).shuffle_grouping("words")
    count = t.set_bolt("count", Counter(pause), parallelism=4).fields_grouping("lower", ["word"])
    if pause:  # a slow store blocks: not on the scheduler thread the spout shares
        count.add_configuration("topology.executor.own.thread", True)
    return t


def _states(state: str, name: str, component: str) -> list[KeyValueState]:
    """The states of `component`'s tasks, read from where the topology keeps them."""
    if state.startswith("redis://"):
        import redis

        from stormish.state.redis import RedisStore

        client = redis.Redis.from_url(state)
        try:
            keys = [k.decode() for k in client.scan_iter(f"{name}:{component}-*")]
        finally:
            client.close()
        spaces = [k for k in keys if "$" not in k]
        return [KeyValueState(RedisStore(state, ns), ns) for ns in spaces]
    paths = glob.glob(os.path.join(state, name, f"{component}-*.db"))
    return [KeyValueState(SqliteStore(p), os.path.basename(p)) for p in paths]


def committed_counts(state: str, name: str) -> dict[str, int]:
    """The counts every counter task committed, merged."""
    out: dict[str, int] = {}
    for s in _states(state, name, "count"):
        try:
            for w, n in s:
                out[w] = out.get(w, 0) + n
        finally:
            s.close()
    return out


def checkpoint_tx(state: str, name: str) -> tuple[int, str] | None:
    """The checkpoint spout's transaction (txid, phase) as it last saved it."""
    found = _states(state, name, "__checkpoint")
    try:
        return found[0].get("__state") if found else None
    finally:
        for s in found:
            s.close()
