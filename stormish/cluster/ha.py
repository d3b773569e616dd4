"""Several nimbus processes on ZooKeeper (`stormish nimbus --zookeeper ...`): the
connection, its ACLs, and what a follower does with a request.

A nimbus without `--zookeeper` is the single nimbus with a data directory (`store.Store`)
and needs none of this (kazoo is imported only here, only when asked for).

Keys: ZooKeeper never holds a key. A keyed cluster's nimbuses authenticate to ZooKeeper
with a digest credential derived from the cluster's secret key (`digest_credential`:
every nimbus holding the keys derives the same one, nothing to configure) and create
every znode under the root with a digest ACL granting that credential alone all rights:
a client without the cluster's keys can neither read the topologies' code nor write the
state nimbus trusts (it unpickles the code it finds there). An `--insecure` cluster uses
open ACLs, like its loopback-only sockets.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, StormishError

log = logging.getLogger("stormish.nimbus")

DIGEST_USER = "stormish"
# a forwarded request's bound, queueing included: every one below the client's 30 s
FORWARD_TIMEOUT = 20.0  # a write (kill, activate, rebalance, ...)
SUBMIT_TIMEOUT = 25.0  # a submit: the leader answers once its code is replicated
STATS_TIMEOUT = 5.0  # stats: optional (list shows the rows without them)
CONNECT_BOUND = 2.0  # a leader whose handshake does not complete within this is silent
READ_TIMEOUT = 1.0  # a forwarded read: past it, the follower answers from ZooKeeper
READS = frozenset({"list", "supervisors"})  # what a follower can answer from ZooKeeper
SILENT_FOR = 5.0  # a leader that did not answer is not asked again so soon (any verb)
FORWARD_THREADS = 8  # requests forwarded at once, at most


@dataclass(frozen=True)
class HaConfig:
    """What `--zookeeper` turns on. `failover` is the ZooKeeper session timeout
    (`nimbus.leader.failover.secs`): a leader killed -9 is replaced within it."""

    hosts: str
    root: str = "/stormish"
    failover: float = 10.0
    min_replicas: int | None = None
    replication_wait: float = 30.0
    nimbus_id: str = ""
    credential: str | None = None  # "user:password" for the digest ACLs (a keyed cluster)


def digest_credential(secret: bytes) -> str:
    """The cluster's ZooKeeper credential, derived from its secret key (never the key)."""
    mac = hmac.new(secret, b"stormish zookeeper digest v1", hashlib.sha256).hexdigest()
    return f"{DIGEST_USER}:{mac[:40]}"


def check_root(root: Any, source: str = "--zk-root") -> str:
    """`root` if it is a cluster's znode (config.znode_problem, the rule the config key
    `nimbus.zookeeper.root` is checked by too); else a ConfigError naming `source`, the
    flag or the key it came from. None (a config file's null) is refused, not crashed on."""
    from ..config import znode_problem

    problem = znode_problem(root)
    if problem:
        raise ConfigError(f"{source} {problem}")
    return str(root)


def zk_client(cfg: HaConfig) -> Any:
    """A started kazoo client (raises, naming --zookeeper, when no server answers)."""
    try:
        from kazoo.client import KazooClient
        from kazoo.security import make_digest_acl
    except ImportError:
        raise ConfigError(
            "nimbus --zookeeper needs kazoo: pip install 'stormish[zookeeper]'"
        ) from None
    kw: dict[str, Any] = {}
    if cfg.credential is not None:
        user, password = cfg.credential.split(":", 1)
        kw["auth_data"] = [("digest", cfg.credential)]
        kw["default_acl"] = [make_digest_acl(user, password, all=True)]
    client = KazooClient(
        hosts=cfg.hosts,
        timeout=cfg.failover,
        connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
        command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1.0},
        **kw,
    )
    try:
        client.start(timeout=max(5.0, cfg.failover))
    except Exception as exc:  # noqa: BLE001 - kazoo's timeout, refused connections
        client.close()
        raise StormishError(
            f"nimbus: no ZooKeeper answered at --zookeeper {cfg.hosts} ({exc})"
        ) from None
    return client


class Forwarder:
    """A follower's way to the leader: each request it cannot answer goes on, as it
    came, to the nimbus that leads, on a thread of a small pool (`FORWARD_THREADS`): a
    leader that died (and still holds the election until its session expires) must not
    hold up the follower's loop, which is the one that takes over, nor one stuck
    request every other. `done()` gives the answers to send, from the loop's thread
    (the API socket is that thread's alone).

    A forward never outlives the client's wait (its 30 s): the leader is looked up when
    a thread takes the request (not when it was queued); a request queued when the
    leader changed (`new_term`), or once this nimbus leads, is sent nowhere and answered
    "ask again"; each forward has a socket of its own, closed with LINGER 0 when its
    bound passes, so nothing of it is delivered later (a leader restarted on its old
    address got a kill its client was told had failed: found by a fault hunt). A
    leader that completed no handshake, or let a forward's whole bound pass, is silent
    for `SILENT_FOR` seconds: every request is answered at once meanwhile (reads from
    ZooKeeper). One that missed a read's short READ_TIMEOUT is only late."""

    def __init__(
        self,
        security: Any,
        leader: Callable[[], dict[str, Any] | None],
        me: str = "",
        failover: float = 10.0,
        read_zookeeper: Callable[[str], Any] | None = None,
    ):
        self.security = security
        self.leader = leader  # who leads now (nimbus's view of the election)
        self.me = me
        self.failover = failover
        self.read_zookeeper = read_zookeeper  # verb in READS -> the answer from ZooKeeper
        self._lock = threading.Lock()
        self._term = 0  # bumped when leadership changes: what waits is not sent
        self._silent: dict[str, float] = {}  # a leader's address -> silent until (monotonic)
        self._todo: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._done: queue.Queue[tuple[Any, bool, Any]] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    # -- from nimbus's loop ---------------------------------------------------------------------
    def forward(self, tag: Any, verb: str, payload: Any) -> None:
        term, deadline = self._term, time.monotonic() + bound(verb)

        def run() -> None:
            out: tuple[Any, bool, Any]
            try:
                out = (tag, True, self._answer(term, deadline, verb, payload))
            except StormishError as exc:
                out = (tag, False, str(exc))
            except Exception as exc:  # noqa: BLE001 - told to the client, not fatal here
                out = (tag, False, f"{type(exc).__name__}: {exc}")
            self._done.put(out)

        self._submit(run)

    def new_term(self) -> None:
        """Who leads changed (or this nimbus took over): requests still queued are not
        sent (they are answered: ask again)."""
        with self._lock:
            self._term += 1

    def done(self) -> list[tuple[Any, bool, Any]]:
        """(tag, ok, answer or error text) of each request forwarded since."""
        out = []
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                return out

    def ask(self, verb: str, payload: Any, within: float) -> Any:
        """The leader's answer, waited for on the caller's thread (a follower's metrics
        scrape, on the HTTP server's thread), through the pool. Raises StormishError
        when there is none within `within` seconds."""
        answer: Future[Any] = Future()
        term, deadline = self._term, time.monotonic() + within

        def run() -> None:
            try:
                answer.set_result(self._answer(term, deadline, verb, payload))
            except Exception as exc:  # noqa: BLE001 - raised on the caller's thread
                answer.set_exception(exc)

        self._submit(run)
        try:
            return answer.result(within + 1)
        except TimeoutError:
            raise StormishError(f"the leader did not answer {verb} within {within:g}s") from None

    def close(self) -> None:
        """Stop the threads (daemons: one waiting on a silent leader is not waited for
        longer than a second)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._todo.put(None)
        for t in threads:
            t.join(1.0)

    # -- the pool -------------------------------------------------------------------------------
    def _submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._closed:
                return
            self._todo.put(job)
            if self._idle == 0 and len(self._threads) < FORWARD_THREADS:
                t = threading.Thread(target=self._work, name="nimbus-forward", daemon=True)
                self._threads.append(t)
                t.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._todo.get()
            with self._lock:
                self._idle -= 1
            if job is None:
                return
            job()

    # -- one request ----------------------------------------------------------------------------
    def _answer(self, term: int, deadline: float, verb: str, payload: Any) -> Any:
        """A read goes to the leader for at most READ_TIMEOUT; when it does not answer
        (dead, and its session not yet expired; or busy) or none leads, the follower
        answers it from what the leader last wrote to ZooKeeper. Anything else goes to
        the leader within the verb's bound, or is refused, saying why."""
        from .client import NoAnswer

        if term != self._term:
            raise StormishError(
                "the nimbus that leads changed while this request waited here: it was not "
                "sent anywhere; ask again"
            )
        leader = self.leader()
        if leader is not None and leader.get("id") == self.me and self.me:
            raise StormishError(
                f"nimbus {self.me} leads now (it took over while this request waited "
                "here): it was not sent anywhere; ask again"
            )
        if verb in READS and self.read_zookeeper is not None:
            if leader is not None and not self._is_silent(leader):
                try:
                    return self._call(leader, verb, payload, deadline, READ_TIMEOUT)
                except NoAnswer as exc:
                    # READ_TIMEOUT is short because ZooKeeper can answer instead: a leader
                    # that completed the handshake and is late is busy, not gone, and the
                    # writes and stats after this read still go to it
                    if not exc.handshake:
                        self._mark_silent(leader)
            return self.read_zookeeper(verb)
        if leader is None:
            raise StormishError(
                "no nimbus leads now (an election is under way, or ZooKeeper cannot be "
                "reached): try again in a few seconds"
            )
        if self._is_silent(leader):
            raise StormishError(self._does_not_answer(leader, verb))
        try:
            return self._call(leader, verb, payload, deadline, None)
        except NoAnswer as exc:
            self._mark_silent(leader)
            raise StormishError(self._does_not_answer(leader, verb, exc)) from None

    def _call(
        self, leader: dict[str, Any], verb: str, payload: Any, deadline: float, most: float | None
    ) -> Any:
        """One request on a socket of its own, closed (LINGER 0) whatever happens."""
        from .client import NimbusClient, NoAnswer

        within = deadline - time.monotonic()
        if most is not None:
            within = min(within, most)
        if within <= 0:
            raise NoAnswer(f"no time left to forward {verb}")
        client = NimbusClient(str(leader["api"]), self.security, timeout=within)
        try:
            return client.call(verb, payload, timeout=within, connect_within=CONNECT_BOUND)
        finally:
            client.close()

    def _is_silent(self, leader: dict[str, Any]) -> bool:
        with self._lock:
            return time.monotonic() < self._silent.get(str(leader["api"]), 0.0)

    def _mark_silent(self, leader: dict[str, Any]) -> None:
        with self._lock:
            self._silent[str(leader["api"])] = time.monotonic() + SILENT_FOR

    def _does_not_answer(self, leader: dict[str, Any], verb: str, exc: Any = None) -> str:
        who = f"the leader {leader.get('id') or '?'} ({leader['api']})"
        after = (
            f"(it may have died; a new one is elected within nimbus.leader.failover.secs, "
            f"{self.failover:g}s): try again"
        )
        if verb == "stats":
            return f"statistics are unavailable while {who} does not answer {after}"
        if exc is not None and getattr(exc, "sent", False):
            return (
                f"{who} does not answer {verb} {after}; if it took the request before it "
                "went away, it may still have been carried out (stormish list shows)"
            )
        return f"{who} does not answer {verb} (not sent to it) {after}"


def bound(verb: str) -> float:
    """How long a forwarded request may take, queueing included: below the client's
    30 s wait, so a client never gives up on a request still on its way."""
    if verb == "submit":
        return SUBMIT_TIMEOUT
    if verb == "stats":
        return STATS_TIMEOUT
    return FORWARD_TIMEOUT
