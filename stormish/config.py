"""Every configuration key stormish reads, declared once with type, default and limits.

Storm's key names and defaults are kept where Storm has the key, so that a Storm user's
muscle memory works. Where a Python default differs from Storm's, the doc line says why.
A bad value is a :class:`ConfigError` naming the key: config comes from users' files and
command lines, and an error that does not name the key is a puzzle.

Keys in stormish's namespaces (`topology.`, `stormish.`, `nimbus.`, `supervisor.`,
`worker.`) must be declared here; any other key is the application's own (Storm's
`"fake.config": 123`) and reaches `open`/`prepare` unchanged, unless it is a near miss
of a declared key (`topolgy.workers`), which is refused as the typo it almost surely is.

Each key has a scope: where it may be set. A `component` key may be set per component
(`add_configuration`, `component_config`), which wins over the topology's value; a
`topology` key applies to a whole topology or each of its worker processes and is
refused per component; a `nimbus` or `supervisor` key configures that daemon
(`stormish nimbus -c ...`) and is refused in a topology.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

WAIT_STRATEGIES = ("progressive", "park")
NAMESPACES = ("topology", "stormish", "nimbus", "supervisor", "worker")
SCOPES = ("component", "topology", "nimbus", "supervisor")
# where a key may be set -> the scopes of the keys accepted there
_ACCEPTS = {
    "component": ("component",),
    "topology": ("component", "topology"),
    "nimbus": ("nimbus",),
    "supervisor": ("supervisor",),
}
QUEUE = "topology.executor.receive.buffer.size"
BATCH = "topology.producer.batch.size"
BATCH_DEFAULT = 512  # what an unset producer batch is, in a queue of 1024 tuples or more
LOADAWARE_OFF = "topology.disable.loadaware.messaging"
LOCALITY_HIGHER = "topology.localityaware.higher.bound"
LOCALITY_LOWER = "topology.localityaware.lower.bound"
ENABLE_TIMEOUTS = "topology.enable.message.timeouts"
SCHEDULER = "topology.worker.scheduler"
OWN_THREAD = "topology.executor.own.thread"


@dataclass(frozen=True)
class Key:
    """`scope`: where the key may be set, one of SCOPES (see the module docstring)."""

    name: str
    default: Any
    check: Callable[[Any], str | None]
    doc: str
    scope: str = "component"


def _int(lo: int | None = None, *, optional: bool = False) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if v is None and optional:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            return f"must be an integer{' or None' if optional else ''}, got {v!r}"
        if lo is not None and v < lo:
            return f"must be >= {lo}, got {v}"
        return None

    return check


def _num(
    lo: float = 0.0, *, strict: bool = False, optional: bool = False
) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if v is None and optional:
            return None
        if isinstance(v, bool) or not isinstance(v, int | float):
            return f"must be a number, got {v!r}"
        if isinstance(v, int):  # an int is finite, but one past a float's range breaks
            try:  # every reader's float(): say so here, without printing 400 digits
                float(v)
            except OverflowError:
                return f"must be a finite number, got an integer of {len(str(abs(v)))} digits"
        elif not math.isfinite(v):  # NaN passes every comparison; inf never comes
            return f"must be a finite number, got {v!r}"
        if v < lo or (strict and v == lo):
            return f"must be {'>' if strict else '>='} {lo}, got {v}"
        return None

    return check


def _choice(*choices: str) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if v not in choices:
            return f"unknown value {v!r}; expected one of {', '.join(choices)}"
        return None

    return check


def _bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else f"must be true or false, got {v!r}"


def _str(v: Any) -> str | None:
    return None if v is None or isinstance(v, str) else f"must be a string, got {v!r}"


def _dir(v: Any) -> str | None:
    """A directory: None (the default place) or a non-empty path. "" would mean the
    working directory to one reader and "unset" to another: refused as meaningless."""
    if v is None:
        return None
    if not isinstance(v, str):
        return f"must be a directory path (a string) or None, got {v!r}"
    if not v.strip():
        return f"must be a directory path, not an empty string (None: {_UNSET_DIR})"
    if "\0" in v:
        return f"must be a directory path, got {v!r} (a NUL character)"
    return None


_UNSET_DIR = "leave it unset for the default place"


def znode_problem(root: Any) -> str | None:
    """Why `root` is not a ZooKeeper root for a cluster (an absolute znode path below /,
    without a trailing /), or None. Shared with cluster/ha.py's --zk-root check, so the
    flag and the config key obey one rule; each error names its own source."""
    if not isinstance(root, str) or not root:
        return f"must be an absolute znode path below / (such as /stormish), got {root!r}"
    if not root.startswith("/") or root == "/" or root.endswith("/") or "//" in root:
        return (
            f"must be an absolute znode path below / (such as /stormish), without a "
            f"trailing /, got {root!r}"
        )
    return None


def _spark_master(v: Any) -> str | None:
    """Spark's master forms, checked at submit: a bad one used to surface only in a
    worker, when a SparkSpout/SparkSink opened (spark/session.py's check_master, which
    uses the same rule)."""
    if v is None:
        return None
    if not isinstance(v, str):
        return f"must be a string, got {v!r}"
    if not SPARK_MASTER.match(v):
        return f"{v!r} {SPARK_MASTER_FORMS}"
    return None


# what Spark's SparkContext accepts (SparkContext.createTaskScheduler), and Connect's sc://;
# here (not in spark/session.py, which uses it) so that config stays below the connectors
SPARK_MASTER = re.compile(
    r"^(local(\[(\*|\d+)(,\s*\d+)?\])?|local-cluster\[.+\]|yarn|spark://.+|k8s://.+"
    r"|mesos://.+|sc://.+)$"
)
SPARK_MASTER_FORMS = (
    "is not a Spark master: use local, local[N], local[*], spark://host:port, "
    "sc://host:port (Spark Connect), yarn or k8s://..."
)


def _redis_url(v: Any) -> str | None:
    """redis-py's URL forms; its own error named no config key, and came from a worker."""
    if not isinstance(v, str):
        return f"must be a string, got {v!r}"
    if not v.startswith(("redis://", "rediss://", "unix://")):
        return f"must be a URL starting redis://, rediss:// or unix:// (redis-py's), got {v!r}"
    return None


def _callable(v: Any) -> str | None:
    return None if v is None or callable(v) else f"must be a callable, got {v!r}"


def _edge_map(v: Any) -> str | None:
    if v is None or (isinstance(v, Mapping) and all(isinstance(o, Mapping) for o in v.values())):
        return None
    return f"must be a mapping of 'bolt <- source[:stream]' to edge options, got {v!r}"


def _host(v: Any) -> str | None:
    return None if isinstance(v, str) and v else f"must be a host name or address, got {v!r}"


def _wait_keys(use: str, l1: int, l2: int, l3: int) -> list[Key]:
    p = f"topology.{use}.wait"
    return [
        Key(
            f"{p}.strategy",
            "progressive",
            _choice(*WAIT_STRATEGIES),
            f"how a {use} idles: 'progressive' (retry, yield, sleep) or 'park' (sleep N us)",
        ),
        Key(f"{p}.progressive.level1.count", l1, _int(0), "busy retries before yielding"),
        Key(
            f"{p}.progressive.level2.count",
            l2,
            _int(0),
            "time.sleep(0) yields (GIL handed over) before level 3 (Storm: 1000 for bolts "
            "and backpressure; 0 here: yields were measured to cost a third of a core per "
            "worker and double p99 latency). Read only by an executor on a thread of its "
            "own (topology.worker.scheduler threads, topology.executor.own.thread, or moved "
            "there as blocking): under the default cooperative scheduler the shared "
            "scheduler thread never yields, and a value set there does nothing (warned)",
        ),
        Key(
            f"{p}.progressive.level3.sleep.millis",
            l3,
            _num(0),
            "level 3 waits up to this long, woken early by new input",
        ),
        Key(f"{p}.park.microsec", 100, _int(0), "park sleeps this long; 0 spins"),
    ]


KEYS: dict[str, Key] = {
    k.name: k
    for k in [
        Key("topology.workers", 1, _int(1), "worker processes a topology runs in", "topology"),
        Key(
            "topology.executor.receive.buffer.size",
            4096,
            _int(1),
            "capacity of each executor's receive queue, in tuples (Storm: 32,768; measured "
            "here, what a worker holds in flight costs per-tuple time in every step: word "
            "count on 1 worker 19% and on 2 workers 35-40% faster at 4,096, and a tuple "
            "waits behind less: bench/README.md)",
        ),
        Key(
            BATCH,
            None,
            _int(1, optional=True),
            "tuples an emitter batches per destination before publishing; None follows "
            f"the receive buffer: half of it, at most {BATCH_DEFAULT} (Storm's default is "
            "1; a Python queue operation costs ~1 us and a batch of 512 amortises it: "
            "bench/README.md); a value set must be at most half the receive buffer",
        ),
        Key(
            "topology.batch.flush.interval.millis",
            1,
            _num(0),
            "an unfilled batch is published after at most this long (bounds latency)",
        ),
        Key(
            LOADAWARE_OFF,
            False,
            _bool,
            "true: shuffle and none groupings are plain round-robin over every target task "
            "(Storm's ShuffleGrouping); false: locality-aware and load-aware (Storm 2's "
            "LoadAwareShuffleGrouping: the tasks in this worker while they keep up, the "
            "other workers' too when they do not; docs/workers.md)",
            "topology",
        ),
        Key(
            LOCALITY_HIGHER,
            0.8,
            _num(0),
            "a locality-aware shuffle widens one scope (this worker, this host, everything) "
            "when its in-scope targets' average load (queue fill, 0 to 1; a remote task "
            "under backpressure 1) is above this; 1 or more: it never widens",
            "topology",
        ),
        Key(
            LOCALITY_LOWER,
            0.2,
            _num(0),
            "a widened locality-aware shuffle narrows one scope again when the narrower "
            "scope's average load is below this (keep it below the higher bound: the gap "
            "is the hysteresis)",
            "topology",
        ),
        Key(
            "topology.transfer.buffer.size",
            1000,
            _int(1),
            "capacity of a worker's transfer queue to other workers, in batches",
            "topology",
        ),
        Key(
            "topology.transfer.down.hold.tuples",
            100000,
            _int(0),
            "tuples a worker holds for a peer worker whose connection was lost (taken as "
            "restarting) and sends when it is back; past this, or past the message "
            "timeout, they are dropped and counted (peer_lost) and their trees replay",
            "topology",
        ),
        Key(
            "topology.transfer.down.hold.mb",
            256,
            _int(0),
            "of the tuples held for a lost peer (topology.transfer.down.hold.tuples), the "
            "megabytes their large buffers (bytes, arrays) may take; past it they are "
            "dropped and counted (peer_lost) and their trees replay",
            "topology",
        ),
        Key(
            "topology.transport.shm",
            "auto",
            _choice("auto", "on", "off"),
            "large buffers (numpy arrays, bytes of 64 KiB or more) to a worker on this host "
            "through shared memory: 'auto' once the peer proved it maps this worker's "
            "segments (same host), 'on' from the first message (every worker on one host), "
            "'off' never (ZeroMQ frames, zero-copy, as across hosts)",
            "topology",
        ),
        Key(
            "topology.transport.bulk",
            "auto",
            _choice("auto", "off"),
            "large buffers to a worker not reached through shared memory, on keyed links: "
            "'auto' sealed with AES-256-GCM on a socket of their own beside the CURVE link "
            "(about 10x cheaper than CURVE a byte; the worker binds a second port on its "
            "link's host), 'off' inside the CURVE link like everything else",
            "topology",
        ),
        Key(
            "topology.transport.shm.pool.mb",
            64,
            _int(1),
            "shared memory a worker's segments may take, in MiB; with none free a peer is "
            "under backpressure until its receiver releases one (a message larger than "
            "this goes through ZeroMQ)",
            "topology",
        ),
        # Storm's level 2 is 1,000 yields; ours is 0 (docs/design.md, Defaults): measured, a
        # yielding Python thread keeps taking back the GIL the working threads need (a
        # third of a core per worker, twice the p99 across workers: bench/README.md)
        *_wait_keys("backpressure", 1, 0, 1),
        *_wait_keys("spout", 0, 0, 1),
        *_wait_keys("bolt", 1, 0, 1),
        Key(
            "topology.backpressure.check.millis",
            50,
            _num(0, strict=True),
            "period of the backpressure-check timer that clears drained tasks",
            "topology",
        ),
        Key(
            "topology.backpressure.resend.step",
            10000,
            _int(1),
            "overflow growth (tuples) after which a backpressure status is sent again",
            "topology",
        ),
        Key(
            "topology.link.status.filter",
            None,
            _callable,
            "fault tests: a picklable callable(status) -> bool; a backpressure status it "
            "answers True for is withheld, not sent (stormish.testing.LoseStatuses(n) "
            "withholds the first n, -1: all), to prove resends and the timer recover",
            "topology",
        ),
        Key(
            "topology.executor.overflow.limit",
            0,
            _int(0),
            "cap on a task's overflowQ (remote tuples); 0 means no cap; past it remote "
            "tuples are dropped and counted",
            "topology",
        ),
        Key(
            "topology.max.spout.pending",
            1000,
            _int(1, optional=True),
            "reliable tuple trees in flight per spout task (acking on); None means no "
            "limit. Storm's default is None; ours bounds the backlog a slow bolt holds "
            "(1,000 trees of a 1 ms bolt: 1 s of work, not the 65 s of a full queue that "
            "timed out 60% of trees) and costs a fast reliable topology on one worker "
            "nothing measurable; across workers raise it (docs/config.md)",
        ),
        Key(
            "topology.edge.policies",
            None,
            _edge_map,
            "per-edge channel policies for a topology given as a file: {'bolt <- "
            "source[:stream]': {overflow, capacity, lifespan_ms, deadline_ms, mode, "
            "readers}}; wins over the grouping's own options (docs/edges.md)",
            "topology",
        ),
        Key(
            "topology.epoch.millis",
            None,
            _num(0, strict=True, optional=True),
            "previous_tick edges: each worker advances its epoch this often (on the topology "
            "clock), making what those edges staged visible; None: only a spout's "
            "advance_epoch() and the end of the input do (docs/edges.md)",
            "topology",
        ),
        Key(
            "topology.edge.health.events",
            False,
            _bool,
            "also record each edge's overflow, stale drop, deadline miss and high-watermark "
            "crossing as an event (edge, policy, reason, depth, capacity) in a ring of the "
            "last 500 per worker, shown by `monitor` and at /api/v1/topology/{id}/events; "
            "an edge's emit_health_events=False leaves it out (docs/edges.md)",
            "topology",
        ),
        Key(
            "topology.max.replays",
            None,
            _int(1, optional=True),
            "a spout tuple whose tree has failed this many times is dead-lettered: handed "
            "to Spout.fail(msg_id, failure) as final and emitted on the spout's "
            "__dead_letter stream; None (Storm's way) replays for ever",
        ),
        Key(
            "topology.message.timeout.secs",
            30,
            _num(0, strict=True),
            "a tuple tree not completed within this time is failed back to its spout",
            "topology",
        ),
        Key(
            ENABLE_TIMEOUTS,
            True,
            _bool,
            "false: tuple trees never time out (Storm's key, meant for tests: a debugger "
            "or a slow test machine never fails a tree by its age); a reliable spout's "
            "trees then end only by ack or fail, and the acker drops no entry by age, so "
            "a lost tuple holds its tree (and a topology.max.spout.pending slot) for good",
            "topology",
        ),
        Key(
            "topology.acker.executors",
            None,
            _int(0, optional=True),
            "acker tasks; None means one per worker; 0 turns acking off",
            "topology",
        ),
        Key(
            "topology.state.provider",
            "embedded",
            _choice("embedded", "redis"),
            "where stateful bolts keep their state (docs/state.md): 'embedded' (a SQLite "
            "file per task in the worker's data directory or topology.state.dir; in memory "
            "for a single in-process worker) or 'redis' (topology.state.redis.url)",
            "topology",
        ),
        Key(
            "topology.state.checkpoint.interval.ms",
            1000,
            _int(1),
            "how often the checkpoint spout starts a checkpoint of every stateful bolt "
            "(Storm's; raised to 100 if lower); a stateful bolt's tuples are acked only "
            "when the checkpoint after them commits, so this adds up to that much to "
            "their complete latency",
            "topology",
        ),
        Key(
            "topology.state.dir",
            None,
            _dir,
            "the embedded state provider's directory (a SQLite file per task, kept after "
            "the run); None: the worker's data directory (the local cluster's, kept across "
            "worker restarts for the run; a supervisor's state directory)",
            "topology",
        ),
        Key(
            "topology.state.redis.url",
            "redis://127.0.0.1:6379/0",
            _redis_url,
            "the Redis server of topology.state.provider 'redis' (redis-py's URL form)",
            "topology",
        ),
        Key(
            "topology.tick.tuple.freq.secs",
            None,
            _num(0, strict=True, optional=True),
            "send a tick tuple to each task of a bolt this often",
        ),
        Key(
            "topology.subprocess.timeout.secs",
            30,
            _num(0, strict=True),
            "a multilang child (ShellBolt, ShellSpout) that sends nothing this long while "
            "an answer is due (a bolt's heartbeat every second; a spout's command) is "
            "killed and restarted. Storm falls back to supervisor.worker.timeout.secs (30)",
        ),
        Key(
            "topology.shellbolt.max.pending",
            100,
            _int(1),
            "messages (tuples, spout commands) queued for a multilang child's stdin; when "
            "full, the task waits for the child (backpressure) as Storm's ShellBolt does",
        ),
        Key(
            "topology.cycle.drain.budget",
            65536,
            _int(1),
            "tuples an executor on a topology cycle may hold in its pendingEmitQ while it "
            "keeps draining input; spouts feeding the cycle pause at half of it",
        ),
        Key(
            "topology.worker.scheduler",
            "cooperative",
            _choice("cooperative", "threads"),
            "how a worker runs its executors: cooperative (one scheduler thread runs them "
            "in bounded turns: under the GIL threads buy no parallelism and cost hand-offs "
            "and run-to-run spread; docs/design-notes.md) or threads (Storm's thread per "
            "executor)",
            "topology",
        ),
        Key(
            "topology.executor.own.thread",
            False,
            _bool,
            "this component's executors get a thread of their own under the cooperative "
            "scheduler: for user code that blocks (I/O, waits), so it never holds up the "
            "others",
        ),
        Key(
            "topology.lanes.concurrency",
            1,
            _int(1),
            "ordered_lanes into this bolt: how many of a task's lanes run at once, each in "
            "order, on threads of the task (for user code that blocks: I/O); 1 runs them "
            "one after another on the task's own loop",
        ),
        Key(
            "topology.scheduler.blocking.millis",
            100,
            _num(0),
            "one call into user code (in a scheduler turn) that runs longer than this "
            "moves its executor to a thread of its own (it blocks; the others go on on a "
            "new scheduler thread); a long turn of quick calls does not; 0: never",
            "topology",
        ),
        Key(
            "topology.executor.stuck.secs",
            None,
            _num(0, optional=True),
            "a call into a task's user code (execute, next_tuple, ack, fail, prepare...) "
            "that has not returned for this long is reported as stuck: an error with the "
            "stack of its thread, once per episode; with topology.fail.fast the run stops "
            "with it. None: topology.message.timeout.secs; 0: never (docs/reliability.md)",
        ),
        Key(
            "topology.worker.gc.threshold",
            50_000,
            _int(0),
            "the cyclic GC's first threshold in workers while a topology runs (Python's "
            "default 700 costs a reliable spout half its rate: runtime/gctune.py); "
            "0 leaves the interpreter's setting",
            "topology",
        ),
        Key(
            "topology.typecheck",
            False,
            _bool,
            "check every emit against its stream's Schema (typed streams: field types), per "
            "component or for all; on with topology.debug too (slow: for development)",
        ),
        Key(
            "topology.debug",
            False,
            _bool,
            "log every emit at INFO on the 'stormish.debug' logger, per component or for "
            "all (slow; for debugging only)",
        ),
        Key(
            "topology.fail.fast",
            False,
            _bool,
            "an exception out of execute (or execute_batch) ends the run as a failure "
            "instead of failing the tuple; `stormish run` turns it on unless set. Errors "
            "that repeat on every tuple (a TopologyError from emit) always end it",
        ),
        Key(
            "topology.stats.interval.secs",
            1.0,
            _num(0, strict=True),
            "how often `stormish run` gathers statistics for its status line on a terminal "
            "(each gathering asks every worker)",
            "topology",
        ),
        Key(
            "supervisor.worker.timeout.secs",
            30,
            _num(0, strict=True),
            "a worker silent this long is restarted by its supervisor (the default of "
            "`stormish supervisor --worker-timeout`; set with its -c or --config-file)",
            "supervisor",
        ),
        Key(
            "supervisor.worker.restart.backoff.secs",
            1.0,
            _num(0),
            "a worker that crashes again right after a restart waits this long before the "
            "next one, doubled for each crash in a row (the first restart is at once; 0: "
            "always at once). The default of `stormish supervisor --restart-backoff`",
            "supervisor",
        ),
        Key(
            "supervisor.worker.restart.backoff.max.secs",
            30,
            _num(0),
            "the longest wait between restarts of a crashing worker; one that stayed up "
            "longer than this has recovered (the default of --restart-backoff-max)",
            "supervisor",
        ),
        Key(
            "supervisor.worker.start",
            "spawn",
            _choice("fork", "spawn"),
            "how a supervisor starts its workers: spawn (`python -m stormish.local.process`, "
            "a command line `ps` and `pkill -f` find) or fork (from the supervisor's fork "
            "server: a worker costs a fork; named stormish-worker; docs/design-notes.md, "
            "start-up)",
            "supervisor",
        ),
        Key(
            "nimbus.task.timeout.secs",
            30,
            _num(0, strict=True),
            "a supervisor silent this long has its workers reassigned by nimbus (the default "
            "of `stormish nimbus --task-timeout`; set with its -c or --config-file)",
            "nimbus",
        ),
        Key(
            "topology.worker.start",
            "fork",
            _choice("fork", "spawn"),
            "how a local run (`stormish run -w N`, LocalCluster) starts its worker "
            "processes: fork (from a fork server that imported stormish and the topology "
            "once: a worker costs a fork; Linux, elsewhere spawn) or spawn (a fresh "
            "interpreter each, "
            "`python -m stormish.local.process`; docs/design-notes.md, start-up)",
            "topology",
        ),
        Key(
            "nimbus.zookeeper.servers",
            None,
            _str,
            "host:port[,host:port] of the ZooKeeper ensemble several nimbus share (HA: "
            "leader election, state in ZooKeeper); None: a single nimbus with its data "
            "directory. The default of `stormish nimbus --zookeeper`",
            "nimbus",
        ),
        Key(
            "nimbus.zookeeper.root",
            "/stormish",
            znode_problem,
            "the znode under which a cluster's nimbus keep their election and state (one "
            "per cluster on a shared ensemble). The default of `stormish nimbus --zk-root`",
            "nimbus",
        ),
        Key(
            "nimbus.leader.failover.secs",
            10,
            _num(0, strict=True),
            "HA: the ZooKeeper session timeout of each nimbus, so the time within which "
            "a follower takes over from a leader killed -9 (the server clamps it to 2..20 "
            "of its ticks: 4..40 s with Debian's tickTime 2000: keep it inside, the lease "
            "counts on it); a leader stops acting within half of it once cut off from "
            "ZooKeeper",
            "nimbus",
        ),
        Key(
            "topology.min.replication.count",
            None,
            _int(1, optional=True),
            "HA: how many nimbus must hold a submitted topology's code (fetched from "
            "ZooKeeper, checked, loadable) before the submit is acknowledged, as Storm's "
            "blobstore replication; None: 2 when 2 or more nimbus are in the election, else 1",
            "nimbus",
        ),
        Key(
            "topology.max.replication.wait.time.sec",
            60,
            _num(0, strict=True),
            "HA: how long a submit waits for topology.min.replication.count; then it is "
            "refused and nothing of it stays (Storm goes ahead instead)",
            "nimbus",
        ),
        Key(
            "stormish.local.host",
            "127.0.0.1",
            _host,
            "address local-mode worker processes bind their links to; loopback unless "
            "CURVE keys are configured (STORMISH_KEYS)",
            "topology",
        ),
        Key(
            "stormish.local.log.dir",
            None,
            _dir,
            "keep the output of local-mode worker processes (`stormish run -w N --log-dir`) "
            "in this directory, a file per topology and worker (TOPOLOGY-worker-N.log, as a "
            "supervisor's --log-dir) with a line per start, rolled past "
            "stormish.local.log.max.bytes; None: a temporary directory removed at exit, "
            "rolled the same way with one old file kept",
            "topology",
        ),
        Key(
            "stormish.local.log.max.bytes",
            100 << 20,
            _int(0),
            "roll a local-mode worker's log file past this size (0: never, and then the "
            "temporary logs grow for as long as the run lasts)",
            "topology",
        ),
        Key(
            "stormish.local.log.backups",
            9,
            _int(0),
            "rolled log files kept per local-mode worker in stormish.local.log.dir",
            "topology",
        ),
        Key(
            "stormish.spark.master",
            None,
            _spark_master,
            "the Spark master SparkSpout/SparkSink use: local[N] (default local[*]), "
            "spark://host:port, or sc://host:port (Spark Connect)",
        ),
    ]
}


def _scalar(v: Any) -> str | None:
    if isinstance(v, str | int | float | bool):
        return None
    return f"must be a string, number or boolean, got {v!r}"


# Families of keys named by a prefix: any key below it is accepted, its value checked.
PREFIXES: dict[str, tuple[Callable[[Any], str | None], str]] = {
    "stormish.spark.conf.": (_scalar, "passed to the SparkSession builder without the prefix"),
}


# Storm's own keys in stormish's namespaces that stormish does not declare (Storm 0.9 to
# 2.x: Config.java and DaemonConfig.java), so that a Flux file or a streamparse topology
# written for Storm runs with them set aside and named, while a key that is neither
# stormish's nor Storm's (a typo: `topology.workerz`) is refused as in the Python API.
_STORM_KEYS = """
    nimbus.admins nimbus.admins.groups nimbus.assignments.service.thread.queue.size
    nimbus.assignments.service.threads nimbus.authorizer
    nimbus.autocredential.plugins.classes nimbus.blobstore.class
    nimbus.blobstore.expiration.secs nimbus.childopts nimbus.cleanup.inbox.freq.secs
    nimbus.code.sync.freq.secs nimbus.credential.renewers.classes
    nimbus.credential.renewers.freq.secs nimbus.daemon.user nimbus.daemon.users
    nimbus.executors.perTopology nimbus.file.copy.expiration.secs nimbus.groups nimbus.host
    nimbus.impersonation.acl nimbus.impersonation.authorizer
    nimbus.inbox.jar.expiration.secs nimbus.local.assignments.backend.class
    nimbus.monitor.freq.secs nimbus.queue.size nimbus.reassign
    nimbus.scheduler.strategy.class.whitelist nimbus.seeds nimbus.slots.perTopology
    nimbus.supervisor.timeout.secs nimbus.supervisor.users nimbus.task.launch.secs
    nimbus.thrift.client.use.tls nimbus.thrift.max_buffer_size nimbus.thrift.port
    nimbus.thrift.threads nimbus.thrift.tls.client.auth.required
    nimbus.thrift.tls.client.cert.path nimbus.thrift.tls.client.key.path
    nimbus.thrift.tls.client.keystore.password nimbus.thrift.tls.client.keystore.path
    nimbus.thrift.tls.client.truststore.password nimbus.thrift.tls.client.truststore.path
    nimbus.thrift.tls.max_buffer_size nimbus.thrift.tls.port
    nimbus.thrift.tls.server.keystore.password nimbus.thrift.tls.server.keystore.path
    nimbus.thrift.tls.server.only nimbus.thrift.tls.server.truststore.password
    nimbus.thrift.tls.server.truststore.path nimbus.thrift.tls.threads
    nimbus.thrift.tls.transport nimbus.thrift.transport
    nimbus.topology.action.notifier.plugin.class nimbus.topology.blobstore.deletion.delay.ms
    nimbus.topology.validator nimbus.users nimbus.worker.heartbeats.recovery.strategy.class
    supervisor.authorizer supervisor.blobstore.class
    supervisor.blobstore.download.max_retries supervisor.blobstore.download.thread.count
    supervisor.childopts supervisor.cpu.capacity supervisor.enable
    supervisor.heartbeat.frequency.secs supervisor.localizer.cache.target.size.mb
    supervisor.localizer.cleanup.interval.ms supervisor.localizer.update.blob.interval.secs
    supervisor.memory.capacity.mb supervisor.monitor.frequency.secs supervisor.numa.meta
    supervisor.queue.size supervisor.resources.map supervisor.run.worker.as.user
    supervisor.scheduler.meta supervisor.slots.ports supervisor.thrift.client.use.tls
    supervisor.thrift.max_buffer_size supervisor.thrift.port
    supervisor.thrift.socket.timeout.ms supervisor.thrift.threads
    supervisor.thrift.tls.client.auth.required supervisor.thrift.tls.client.cert.path
    supervisor.thrift.tls.client.key.path supervisor.thrift.tls.client.keystore.password
    supervisor.thrift.tls.client.keystore.path
    supervisor.thrift.tls.client.truststore.password
    supervisor.thrift.tls.client.truststore.path
    supervisor.thrift.tls.server.keystore.password
    supervisor.thrift.tls.server.keystore.path
    supervisor.thrift.tls.server.truststore.password
    supervisor.thrift.tls.server.truststore.path supervisor.thrift.transport
    supervisor.worker.default.version supervisor.worker.heartbeats.max.timeout.secs
    supervisor.worker.launcher supervisor.worker.shutdown.sleep.secs
    supervisor.worker.start.timeout.secs supervisor.worker.version.classpath.map
    supervisor.worker.version.logwriter.map supervisor.worker.version.main.map
    topology.acker.cpu.pcore.percent topology.acker.resources.offheap.memory.mb
    topology.acker.resources.onheap.memory.mb topology.auto-credentials
    topology.auto.task.hooks topology.backpressure.enable topology.blobstore.map
    topology.bolts.late.tuple.stream topology.bolts.message.id.field.name
    topology.bolts.outgoing.overflow.buffer.enable topology.bolts.tuple.timestamp.field.name
    topology.bolts.tuple.timestamp.max.lag.ms topology.bolts.watermark.event.interval.ms
    topology.bolts.window.length.count topology.bolts.window.length.duration.ms
    topology.bolts.window.sliding.interval.count
    topology.bolts.window.sliding.interval.duration.ms
    topology.builtin.metrics.bucket.size.secs topology.classpath
    topology.classpath.beginning topology.component.cpu.pcore.percent
    topology.component.resources.map topology.component.resources.offheap.memory.mb
    topology.component.resources.onheap.memory.mb topology.disruptor.batch.size
    topology.disruptor.batch.timeout.millis topology.disruptor.wait.strategy
    topology.disruptor.wait.timeout.millis topology.enable.send.iconnection.metrics
    topology.enable.v2.metrics.tick topology.environment
    topology.error.throttle.interval.secs topology.event.logger.register
    topology.eventlogger.executors topology.eventlogger.max.retained.files
    topology.eventlogger.rotation.size.mb topology.executor.send.buffer.size
    topology.fall.back.on.java.serialization topology.groups topology.isolate.machines
    topology.kryo.decorators topology.kryo.factory topology.kryo.register
    topology.logging.config topology.logging.sensitivity
    topology.max.error.report.per.interval topology.max.task.parallelism
    topology.metrics.consumer.cpu.pcore.percent topology.metrics.consumer.register
    topology.metrics.reporters topology.multilang.log.handler topology.multilang.serializer
    topology.name topology.priority topology.producer.batch.dynamic
    topology.ras.acker.executors.per.worker topology.ras.constraint.max.state.search
    topology.ras.constraint.max.time.secs topology.ras.constraints
    topology.ras.one.component.per.worker topology.ras.one.executor.per.worker
    topology.ras.order.executors.by.proximity.needs topology.readonly.groups
    topology.readonly.users topology.receiver.buffer.size topology.scheduler.favored.nodes
    topology.scheduler.strategy topology.scheduler.unfavored.nodes
    topology.serialized.message.size.metrics topology.skip.missing.kryo.registrations
    topology.sleep.spout.wait.strategy.time.ms topology.spout.recvq.skips
    topology.spread.components topology.state.kryo.register topology.state.provider.config
    topology.state.synchronization.timeout.secs topology.stats.ewma.enable
    topology.stats.ewma.smoothing.factor topology.stats.sample.rate
    topology.submitter.principal topology.submitter.user topology.tasks
    topology.testing.always.try.serialize topology.transactional.id
    topology.transfer.batch.size topology.trident.batch.emit.interval.millis
    topology.trident.windowing.cache.tuple.limit topology.tuple.compression.enable
    topology.tuple.compression.max.decompressed.bytes topology.tuple.compression.threshold
    topology.tuple.serializer topology.upstream.feedback.enable
    topology.upstream.feedback.freq.secs topology.users
    topology.v2.metrics.tick.interval.seconds topology.version topology.worker.childopts
    topology.worker.gc.childopts topology.worker.logwriter.childopts
    topology.worker.max.heap.size.mb topology.worker.metrics
    topology.worker.nimbus.thrift.client.use.tls topology.worker.receiver.thread.count
    topology.worker.shared.thread.pool.size topology.worker.timeout.secs
    worker.blob.update.poll.interval.secs worker.childopts worker.gc.childopts
    worker.heap.memory.mb worker.heartbeat.frequency.secs worker.log.level.reset.poll.secs
    worker.max.timeout.secs worker.metrics worker.profiler.childopts worker.profiler.command
    worker.profiler.enabled
"""
# keys streamparse's CLI writes into every topology's config in stormish's namespaces
# (cli/common.py: `topology.python.path`, "for information purposes only"; cli/submit.py:
# `topology.original_name`): the Flux file `sparse run` writes carries them
STREAMPARSE_KEYS = frozenset({"topology.python.path", "topology.original_name"})
STORM_KEYS = frozenset(_STORM_KEYS.split()) | STREAMPARSE_KEYS
STORM_SET = {
    "topology.name": "set by stormish from the topology's name (Topology(name), a "
    "Flux file's `name`), as Storm sets it from the submitted name; it cannot be set"
}


def is_storm_only(name: str) -> bool:
    """A key Storm has and stormish does not use (a Flux or streamparse topology's is
    ignored with a warning; the Python API refuses it, saying whose it is)."""
    return name in STORM_KEYS and name not in KEYS


def defaults() -> dict[str, Any]:
    return {k.name: k.default for k in KEYS.values()}


def check_value(name: str, value: Any, where: str = "", level: str | None = None) -> None:
    """Raise ConfigError if `name` is unknown, `value` breaks its rule, or the key may not
    be set at `level` (one of SCOPES; None: anywhere). Keys outside stormish's namespaces
    are the application's: any value, passed on unchanged (not at a daemon's level)."""
    place = f" (in {where})" if where else ""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"config key names must be non-empty strings, got {name!r}{place}")
    key = KEYS.get(name)
    if key is None:
        _check_undeclared(name, value, place, level)
        return
    problem = key.check(value)
    if problem:
        raise ConfigError(f"config key {name!r}{place} {problem}")
    if level is not None and key.scope not in _ACCEPTS[level]:
        raise ConfigError(f"config key {name!r}{place} {_misplaced(key, level)}")


def _check_undeclared(name: str, value: Any, place: str, level: str | None) -> None:
    for prefix, (check, _doc) in PREFIXES.items():
        if name.startswith(prefix) and len(name) > len(prefix):
            problem = check(value)
            if problem:
                raise ConfigError(f"config key {name!r}{place} {problem}")
            return
    storm = is_storm_only(name)
    close = None if storm else _close_key(name)
    ours = name.split(".", 1)[0] in NAMESPACES
    if ours or close or level in ("nimbus", "supervisor"):
        hint = f"; did you mean {close!r}?" if close else ""
        if storm:
            whose = "streamparse's" if name in STREAMPARSE_KEYS else "Storm's"
            hint = "; " + STORM_SET.get(
                name,
                f"it is {whose}, and stormish does not use it (a Flux file or a streamparse "
                "topology may keep it: there it is ignored with a warning)",
            )
        if level in ("nimbus", "supervisor"):
            hint += f"; `stormish {level}` reads only " + ", ".join(
                k.name for k in KEYS.values() if k.scope == level
            )
        raise ConfigError(f"unknown config key {name!r}{place}{hint}")


def _close_key(name: str) -> str | None:
    import difflib

    # the same segments in another order (`topology.spout.max.pending`) before spelling:
    # difflib alone would rank `topology.shellbolt.max.pending` above the right key
    ours = name.split(".", 1)[0] in NAMESPACES
    segments = sorted(name.split("."))
    for k in KEYS:
        if ours and sorted(k.split(".")) == segments:
            return k
    # only a real near miss: a key sharing just its last segment (`...window.length.count`
    # -> a backpressure `...level1.count`) was a misleading hint, so none is given then
    cutoff = 0.8 if ours else 0.85
    close = difflib.get_close_matches(name, KEYS, n=1, cutoff=cutoff)
    return close[0] if close else None


def _misplaced(key: Key, level: str) -> str:
    if level in ("nimbus", "supervisor"):
        return f"cannot be given to `stormish {level}`, which reads only " + ", ".join(
            k.name for k in KEYS.values() if k.scope == level
        )
    if key.scope == "topology":
        return (
            "applies to the whole topology (or each of its worker processes) and cannot be "
            "set per component; set it in Topology(config=...) or with -c"
        )
    if key.scope in ("nimbus", "supervisor"):
        return (
            f"configures the {key.scope} daemon, not a topology: give it to "
            f"`stormish {key.scope}` (-c or --config-file)"
        )
    return f"cannot be set at {level} level"  # not reached: every scope is handled above


def resolve(
    *layers: Mapping[str, Any] | None, where: str = "", level: str | None = None
) -> dict[str, Any]:
    """Merge config layers over the defaults (later wins) and validate the result.

    Cross-key rules are checked here too: a producer batch that was set must fit twice
    in the receive queue, or a single batch could hold a queue full on its own. An unset
    batch (None) stays unset here, so that a component that sets its own receive buffer
    still gets a batch that follows it (`for_component`, `batch_size`).
    """
    conf = defaults()
    for layer in layers:
        for k, v in (layer or {}).items():
            check_value(k, v, where, level)
            conf[k] = v
    _check_batch(conf, where)
    _check_locality(conf, where)
    return conf


def split_storm(
    conf: Mapping[str, Any], where: str = "", level: str = "topology"
) -> tuple[dict[str, Any], list[str]]:
    """A Storm topology's config (a Flux file's, a streamparse topology's) as stormish
    takes it: Storm's keys that stormish does not use are set aside and returned (to be
    named in a warning, not refused: the file was written for Storm); every other key is
    checked as the Python API checks it at `level` (a typo of a declared key, a key in
    stormish's namespaces that is neither stormish's nor Storm's, or a bad value is a
    ConfigError naming the key and `where`)."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for k, v in conf.items():
        if isinstance(k, str) and is_storm_only(k):
            dropped.append(k)
            continue
        check_value(k, v, where, level)
        kept[k] = v
    return kept, sorted(dropped)


def advice(conf: Mapping[str, Any], own: Mapping[str, Any] | None = None) -> list[str]:
    """Settings that are valid but do nothing as configured, for a warning at submit:
    `conf` is the resolved topology config, `own` a component's own keys (its resolved
    config then being `conf` with them). Today: a progressive wait's level 2 (yields),
    which only an executor on a thread of its own reads (runtime/wait.py spin_count: the
    cooperative scheduler's shared thread has nobody in the worker to yield to)."""
    merged = {**conf, **(own or {})}
    if merged.get(SCHEDULER) != "cooperative" or merged.get(OWN_THREAD):
        return []
    out = []
    for use in ("backpressure", "spout", "bolt"):
        name = f"topology.{use}.wait.progressive.level2.count"
        value = merged.get(name) if own is None or name in own else None
        if value:  # 0 (the default) and 0 set are the same: nothing yields
            out.append(
                f"config key {name!r} is {value}, which does nothing under the "
                f"cooperative scheduler ({SCHEDULER!r}): only an executor on a thread of "
                f"its own yields ({SCHEDULER!r} 'threads', or {OWN_THREAD!r} true)"
            )
    return out


def for_component(
    conf: Mapping[str, Any], layer: Mapping[str, Any] | None, where: str = ""
) -> dict[str, Any]:
    """A component's config: its own keys over the topology's resolved `conf`, checked at
    component level, with the unset producer batch filled in from its receive buffer."""
    out = dict(conf)
    for k, v in (layer or {}).items():
        check_value(k, v, where, "component")
        out[k] = v
    _check_batch(out, where)
    out[BATCH] = batch_size(out)
    return out


def batch_size(conf: Mapping[str, Any]) -> int:
    """The producer batch: as set, or (unset) half the receive queue, at most 512."""
    batch = conf[BATCH]
    if batch is not None:
        return int(batch)
    return max(1, min(BATCH_DEFAULT, conf[QUEUE] // 2))


def _check_locality(conf: Mapping[str, Any], where: str) -> None:
    """The locality-aware shuffle widens above the higher bound and narrows below the
    lower one; a lower bound above the higher one would widen and narrow on the same
    load, flapping between scopes on every check (no hysteresis at all)."""
    low, high = conf[LOCALITY_LOWER], conf[LOCALITY_HIGHER]
    if low > high:
        place = f" (in {where})" if where else ""
        raise ConfigError(
            f"config key {LOCALITY_LOWER!r} ({low}){place} must be at most "
            f"{LOCALITY_HIGHER!r} ({high}): the gap between them is the hysteresis"
        )


def _check_batch(conf: Mapping[str, Any], where: str) -> None:
    batch, cap = conf[BATCH], conf[QUEUE]
    if batch is not None and batch > cap // 2:
        place = f" (in {where})" if where else ""
        raise ConfigError(
            f"config key {BATCH!r} ({batch}){place} must be at most half of {QUEUE!r} "
            f"({cap}); left unset it follows the queue"
        )


def parse_override(text: str, level: str | None = "topology") -> tuple[str, Any]:
    """Parse `key=value` from the command line; values are read as JSON when they can be.
    `level`: where the value goes (a topology's `-c`, or a daemon's)."""
    import json

    if "=" not in text:
        raise ConfigError(f"config override {text!r} must look like key=value")
    name, raw = text.split("=", 1)
    name = name.strip()
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    check_value(name, value, "-c", level)
    return name, value


def describe() -> str:
    """One line per key, for docs and `stormish config`: name, default, scope, meaning."""
    lines = [f"{k.name} = {k.default!r} [{k.scope}]: {k.doc}" for k in KEYS.values()]
    lines += [f"{p}<key> [component]: {doc}" for p, (_check, doc) in PREFIXES.items()]
    lines.append(
        "any other key outside the namespaces "
        + ", ".join(f"{n}.*" for n in NAMESPACES)
        + " [component]: the application's own, passed to open()/prepare() unchanged"
    )
    return "\n".join(lines)
