"""A reliable run whose every message id can be audited from outside the workers.

The spout and the sink write what happens to each id to files in a ledger directory, one
file per process (a worker killed -9 keeps what it wrote: every record is one `write`
to the kernel before the call that it records returns):

- `spout-<pid>.log`: a line `a <id>` per ack and `f <id>` per fail the spout received;
- `sink-<task>-<pid>.log`: a line `<id>` per tuple the sink executed, written before it
  acks the tuple.

So an id the spout saw acked and no sink file holds is an acked id lost: what
at-least-once forbids. An id a sink holds twice is a duplicate (a replay after a fault):
allowed, and counted. A spout restarted in a new process (its worker was killed) reads
the acks its earlier incarnations recorded and emits only the ids not yet acked, as a
source with durable offsets would.

The components live in this module, not in a test module, because worker processes
import them (they get the test process's sys.path).
"""

from __future__ import annotations

import glob
import os
import time
from dataclasses import asdict, dataclass

from stormish import BasicBolt, Bolt, Spout, Topology


class LedgerSpout(Spout):
    """Emits ids 0..count-1 reliably (msg id = the id), replays every failed id, and
    finishes when every id is acked. With `gate`, it emits no new id past `hold_at`
    until the file `gate` exists (a test makes its fault meanwhile)."""

    outputs = ["id"]

    def __init__(
        self, ledger: str, count: int, per_call: int = 32, hold_at: int = 0, gate: str = ""
    ):
        self.ledger, self.count, self.per_call = ledger, count, per_call
        self.hold_at, self.gate = hold_at, gate

    def open(self, conf, context):
        done = read_spout_acks(self.ledger)
        self.todo = [i for i in range(self.count - 1, -1, -1) if i not in done]
        self.fresh = self.count - len(self.todo)  # ids emitted for the first time, ever
        self.inflight: set[int] = set()
        self.file = open(  # noqa: SIM115 - open for the worker's life; line buffered
            os.path.join(self.ledger, f"spout-{os.getpid()}.log"), "a", buffering=1
        )

    def next_tuple(self):
        for _ in range(self.per_call):
            if not self.todo:
                if not self.inflight:
                    self.finish()
                return
            if self._held():
                return
            i = self.todo.pop()
            self.inflight.add(i)
            self.emit([i], msg_id=i)

    def _held(self) -> bool:
        if not self.gate or self.count - len(self.todo) < self.hold_at:
            return False
        if os.path.exists(self.gate):
            self.gate = ""  # released for good
            return False
        return True

    def ack(self, msg_id):
        self.file.write(f"a {msg_id}\n")
        self.inflight.discard(msg_id)

    def fail(self, msg_id, failure=None):
        self.file.write(f"f {msg_id}\n")
        if msg_id in self.inflight:
            self.inflight.discard(msg_id)
            self.todo.append(msg_id)  # replayed next


class Relay(BasicBolt):
    """Passes the id on, anchored: the tree has two hops."""

    outputs = ["id"]

    def execute(self, tup):
        self.emit(tup.values)


class LedgerSink(Bolt):
    """Records every id it executes (one `write` each, before the ack), after `work`
    seconds of sleep: a sink that slow makes the run last while a fault is made."""

    def __init__(self, ledger: str, work: float = 0.0):
        self.ledger, self.work = ledger, work

    def prepare(self, conf, context):
        path = os.path.join(self.ledger, f"sink-{context.task_id}-{os.getpid()}.log")
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def execute(self, tup):
        if self.work:
            time.sleep(self.work)
        os.write(self.fd, b"%d\n" % tup.values[0])
        self.ack(tup)

    def cleanup(self):
        os.close(self.fd)


def pipeline(name: str, ledger: str, count: int, work: float = 0.0, **conf) -> Topology:
    """src -> relay (shuffle, 2 tasks) -> sink (fields on the id, 2 tasks), 2 workers.
    The fields grouping sends an id to the same sink task on every replay, so an id
    whose task was lost completes only once that task runs again."""
    t = Topology(name, config={"topology.workers": 2, **conf})
    t.set_spout("src", LedgerSpout(ledger, count))
    t.set_bolt("relay", Relay(), parallelism=2).shuffle_grouping("src")
    t.set_bolt("sink", LedgerSink(ledger, work), parallelism=2).fields_grouping("relay", ["id"])
    return t


def read_spout_acks(ledger: str) -> set[int]:
    acks: set[int] = set()
    for path in glob.glob(os.path.join(ledger, "spout-*.log")):
        acks.update(i for kind, i in _records(path) if kind == "a")
    return acks


def _records(path: str) -> list[tuple[str, int]]:
    out = []
    with open(path) as fh:
        for line in fh:
            kind, _, rest = line.strip().partition(" ")
            if rest.lstrip("-").isdigit():
                out.append((kind, int(rest)))
    return out


def sink_files(ledger: str) -> list[str]:
    return sorted(glob.glob(os.path.join(ledger, "sink-*.log")))


def sink_pids(ledger: str) -> set[int]:
    return {int(os.path.basename(p)[:-4].rsplit("-", 1)[1]) for p in sink_files(ledger)}


def deliveries(ledger: str, pids: set[int] | None = None) -> int:
    """Lines in the sink files (of processes `pids`, or all): ids delivered so far."""
    n = 0
    for path in sink_files(ledger):
        if pids is None or int(os.path.basename(path)[:-4].rsplit("-", 1)[1]) in pids:
            with open(path, "rb") as fh:
                n += fh.read().count(b"\n")
    return n


@dataclass(frozen=True)
class Audit:
    """What happened to every id. `lost` (acked by the spout, in no sink file) must be
    0; `never_acked` is 0 once a run completed; `duplicates` are deliveries past the
    first of an id (replays after a fault); `failed` the fails the spout received."""

    ids: int
    acked: int
    never_acked: int
    lost: int
    delivered: int
    duplicates: int
    failed: int
    acks_twice: int
    strangers: int
    spout_incarnations: int
    sink_processes: int

    def figures(self) -> dict[str, int]:
        return asdict(self)


def audit(ledger: str, count: int) -> Audit:
    acks: list[int] = []
    fails = 0
    spouts = glob.glob(os.path.join(ledger, "spout-*.log"))
    for path in spouts:
        for kind, i in _records(path):
            if kind == "a":
                acks.append(i)
            else:
                fails += 1
    seen: dict[int, int] = {}
    for path in sink_files(ledger):
        with open(path) as fh:
            for line in fh:
                if line.strip().lstrip("-").isdigit():
                    seen[int(line)] = seen.get(int(line), 0) + 1
    ids = set(range(count))
    acked = set(acks)
    return Audit(
        ids=count,
        acked=len(acked & ids),
        never_acked=len(ids - acked),
        lost=len(acked - set(seen)),
        delivered=sum(seen.values()),
        duplicates=sum(n - 1 for n in seen.values()),
        failed=fails,
        acks_twice=len(acks) - len(acked),
        strangers=len(set(seen) - ids) + len(acked - ids),  # ids no spout ever emitted
        spout_incarnations=len(spouts),
        sink_processes=len(sink_pids(ledger)),
    )
