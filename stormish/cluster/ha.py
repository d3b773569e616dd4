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
FORWARD_TIMEOUT = 90.0  # a forwarded submit waits for the code's replication (60 s)
READ_TIMEOUT = 1.0  # a forwarded read: past it, the follower answers from ZooKeeper
READS = frozenset({"list", "supervisors"})  # what a follower can answer from ZooKeeper
SILENT_FOR = 3.0  # a leader that did not answer a read is not asked reads again so soon


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
    came, to the nimbus that leads (its API address read from the election), on a
    thread of its own: a leader that died (and still holds the election until its
    session expires) must not hold up the follower's loop, which is the one that takes
    over. `done()` gives the answers to send, from the loop's thread (the API socket is
    that thread's alone)."""

    def __init__(self, security: Any, read_zookeeper: Callable[[str], Any] | None = None):
        self.security = security
        self.read_zookeeper = read_zookeeper  # verb in READS -> the answer from ZooKeeper
        self._silent: tuple[str | None, float] = (None, 0.0)  # a leader's address, until
        self._client: Any = None
        self._address: str | None = None
        self._todo: queue.Queue[tuple[Any, ...] | None] = queue.Queue()
        self._done: queue.Queue[tuple[Any, bool, Any]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="nimbus-forward", daemon=True)
        self._thread.start()

    def forward(self, tag: Any, leader: dict[str, Any] | None, verb: str, payload: Any) -> None:
        self._todo.put((tag, leader, verb, payload))

    def ask(self, leader: dict[str, Any] | None, verb: str, payload: Any, within: float) -> Any:
        """The leader's answer, waited for on the caller's thread (a follower's metrics
        scrape, on the HTTP server's thread): through the forwarding thread, which owns
        the client. Raises StormishError when there is none within `within` seconds."""
        answer: Future[Any] = Future()
        self._todo.put((answer, leader, verb, payload))
        try:
            ok, value = answer.result(within)
        except TimeoutError:
            raise StormishError(f"the leader did not answer {verb} within {within:g}s") from None
        if not ok:
            raise StormishError(value)
        return value

    def done(self) -> list[tuple[Any, bool, Any]]:
        """(tag, ok, answer or error text) of each request forwarded since."""
        out = []
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                return out

    def _run(self) -> None:
        while (item := self._todo.get()) is not None:
            tag, leader, verb, payload = item
            try:
                out: tuple[Any, bool, Any] = (tag, True, self._answer(leader, verb, payload))
            except StormishError as exc:
                out = (tag, False, str(exc))
            except Exception as exc:  # noqa: BLE001 - told to the client, not fatal here
                out = (tag, False, f"{type(exc).__name__}: {exc}")
            if isinstance(tag, Future):  # `ask`: its caller waits for it
                tag.set_result(out[1:])
            else:
                self._done.put(out)
        self._close_client()

    def _answer(self, leader: dict[str, Any] | None, verb: str, payload: Any) -> Any:
        """A read goes to the leader for at most READ_TIMEOUT; when it does not answer
        (dead, and its session not yet expired; or busy) or none leads, the follower
        answers it from what the leader last wrote to ZooKeeper."""
        from .client import NoAnswer

        if verb not in READS or self.read_zookeeper is None:
            return self._call(leader, verb, payload, FORWARD_TIMEOUT)
        address, until = self._silent
        if leader is not None and not (leader["api"] == address and time.monotonic() < until):
            try:
                return self._call(leader, verb, payload, READ_TIMEOUT)
            except NoAnswer:
                self._silent = (str(leader["api"]), time.monotonic() + SILENT_FOR)
        return self.read_zookeeper(verb)

    def _call(self, leader: dict[str, Any] | None, verb: str, payload: Any, within: float) -> Any:
        from .client import NimbusClient

        if leader is None:
            raise StormishError(
                "no nimbus leads now (an election is under way, or ZooKeeper cannot be "
                "reached): try again in a few seconds"
            )
        address = str(leader["api"])
        if address != self._address:
            self._close_client()
            self._client = NimbusClient(address, self.security, timeout=FORWARD_TIMEOUT)
            self._address = address
        return self._client.call(verb, payload, timeout=within)

    def _close_client(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = self._address = None

    def close(self) -> None:
        self._todo.put(None)
        self._thread.join(FORWARD_TIMEOUT + 5)
