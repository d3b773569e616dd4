"""The stateful word count that the kill -9 tests run (components here, not in a test
module, because worker processes import them), and readers of what it committed.

WordSpout emits words 0..N-1 (word i is `w{i % VOCABULARY}`) in trees of `per_tree`
consecutive words (a sentence), replays what fails, and finishes when every tree is
acked; Split emits each word of a tree (a BasicBolt upstream of the stateful one, so
barriers are forwarded; fields grouping sends a tree's words to several counter tasks);
Counter is the StatefulBolt. The state lives in `topology.state.dir` (or Redis), where
the test reads it: each counter task's committed counts, and the checkpoint spout's
transaction. With `audit`, the counters and the spout record what they did
(`Audit`, read back by state_audit.py).
"""

from __future__ import annotations

import glob
import os
import signal
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


class Audit:
    """An append-only record of what a process did (one `os.write` a line, so a process
    killed -9 keeps every line it wrote): the counters' executions and checkpoint steps,
    the spout's acks and fails. state_audit.py reads them back."""

    def __init__(self, directory: str | None):
        self.directory = directory
        self.fd: int | None = None

    def write(self, *fields) -> None:
        if self.directory is None:
            return
        if self.fd is None:
            os.makedirs(self.directory, exist_ok=True)
            path = os.path.join(self.directory, f"{os.getpid()}.log")
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        line = " ".join(str(f) for f in (os.getpid(), time.time(), *fields))
        os.write(self.fd, (line + "\n").encode())


class WordSpout(Spout):
    """Emits the words 0..count-1 as trees of `per_tree` consecutive words (a sentence:
    msg id i holds words i*per_tree..), replays what fails, finishes once all are acked."""

    outputs = ["first", "n"]

    def __init__(self, count: int, per_tree: int = 1, per_call: int = 64, audit: str | None = None):
        if count % per_tree:
            raise ValueError(f"{count} words do not make trees of {per_tree}")
        self.trees, self.per_tree, self.per_call = count // per_tree, per_tree, per_call
        self.audit_dir = audit

    def open(self, conf, context):
        self.todo = list(range(self.trees - 1, -1, -1))
        self.inflight: set[int] = set()
        self.audit = Audit(self.audit_dir)

    def next_tuple(self):
        for _ in range(self.per_call):
            if not self.todo:
                if not self.inflight:
                    self.finish()
                return
            i = self.todo.pop()
            self.inflight.add(i)
            self.emit([i * self.per_tree, self.per_tree], msg_id=i)

    def ack(self, msg_id):
        self.audit.write("a", msg_id)
        self.inflight.discard(msg_id)

    def fail(self, msg_id, failure=None):
        self.audit.write("f", msg_id, getattr(failure, "reason", "?").replace(" ", "_"))
        if msg_id in self.inflight:
            self.inflight.discard(msg_id)
            self.todo.append(msg_id)


class Split(BasicBolt):
    """A tree's words (a bolt upstream of the stateful one, so barriers are forwarded),
    each with its word id; fields grouping sends them to several counter tasks."""

    outputs = ["word", "id"]

    def execute(self, tup):
        first, n = tup.values
        for i in range(first, first + n):
            self.emit([word(i), i])


class Counter(StatefulBolt):
    """`pause`: seconds each prepare and commit takes (a slow store), so that a test
    can kill a worker while one is under way."""

    def __init__(self, pause: float = 0.0, audit: str | None = None):
        self.pause = pause
        self.audit_dir = audit

    def prepare(self, conf, context):
        self.task = context.task_id
        self.audit = Audit(self.audit_dir)

    def pre_prepare(self, txid):
        self.audit.write("P", self.task, txid)
        time.sleep(self.pause)

    def pre_commit(self, txid):
        self.audit.write("C", self.task, txid)
        time.sleep(self.pause)

    def pre_rollback(self):
        self.audit.write("R", self.task)

    def init_state(self, state):
        self.audit.write("I", self.task)
        self.counts = state

    def execute(self, tup):
        w, i = tup.values
        if self.audit_dir is not None:
            self.audit.write("x", self.task, i, tup.meta[0][0])
        self.counts.put(w, self.counts.get(w, 0) + 1)
        self.ack(tup)


class DiesAfterCommit(Counter):
    """A Counter that, once the file `order` names its task, commits its next
    checkpoint itself and dies (SIGKILL) before the engine can send the acks it held
    for it: the state has the commit, the ackers never heard of it."""

    def __init__(self, order: str, **kw):
        super().__init__(**kw)
        self.order = order

    def pre_commit(self, txid):
        super().pre_commit(txid)
        try:
            with open(self.order) as f:
                task = int(f.read())
        except (OSError, ValueError):
            return
        if task == self.task and not os.path.exists(self.order + ".done"):
            self.counts.commit(txid)
            with open(self.order + ".done", "w") as f:
                f.write(str(txid))
            os.kill(os.getpid(), signal.SIGKILL)


def topology(
    name: str,
    count: int,
    state: str,
    pause: float = 0.0,
    audit: str | None = None,
    per_tree: int = 1,
    counter: Counter | None = None,
    **conf,
) -> Topology:
    """`state`: a directory (the embedded provider's topology.state.dir) or a Redis URL;
    `audit`: a directory for the audit records (none when None)."""
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
    t.set_spout("words", WordSpout(count, per_tree, audit=audit))
    t.set_bolt("split", Split(), parallelism=2).shuffle_grouping("words")
    counter = counter or Counter(pause, audit)
    count = t.set_bolt("count", counter, parallelism=4).fields_grouping("split", ["word"])
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
