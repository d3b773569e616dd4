"""Which nimbus leads, on ZooKeeper: kazoo's leader election recipe, and a lease that
keeps a leader from acting once it may have lost.

Every nimbus given `--zookeeper` runs `Leadership`: a thread contends in kazoo's
`Election` under `ROOT/leader` with its identity (id, API and control addresses) as the
contender's data, so anyone can read who leads (`leader()`: the first contender). The
winner holds an ephemeral sequential znode; its sequence number is its **term** (terms
only grow), and the znode lives as long as its ZooKeeper session.

A leader **acts** (decides, writes, talks to workers) only while

- it holds the election (its znode exists), and
- its lease is fresh: the last round trip that found its znode started less than half
  the session timeout ago.

ZooKeeper expires a session no sooner than the session timeout after the client's last
request reached it, so a nimbus cut off from ZooKeeper (a partition, a process paused
with SIGSTOP) stops acting before its znode can go and another nimbus can win: no two
leaders act at once. Every write a leader makes is a transaction that also checks its
znode (`zkstate.ZkStore`), a second fence for a write that was already on its way.
A kill -9 of the leader frees its znode when its session expires: the session timeout is
`nimbus.leader.failover.secs`. A leader stopped cleanly deletes its znode at once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

log = logging.getLogger("stormish.nimbus")

LEASE_CHECKS_PER_TIMEOUT = 6  # lease round trips per session timeout


class Leadership:
    """One nimbus's part in the election. `acting()` is read by nimbus's loop each turn;
    `me` is this nimbus's identity (JSON-able: id, api, control), the data others read."""

    def __init__(self, client: Any, root: str, me: dict[str, Any], session_timeout: float):
        self.client = client
        self.path = f"{root}/leader"
        self.me = me
        self.timeout = session_timeout
        self.election = client.Election(self.path, json.dumps(me, sort_keys=True))
        self.node: str | None = None  # our znode's full path while we hold the election
        self.term: int | None = None
        self._lease_from = -1e9  # monotonic start of the last round trip that found our znode
        self._release = threading.Event()
        self._closed = threading.Event()
        self._holding = threading.Event()
        # who leads, as last read: nimbus's loop reads it, never ZooKeeper (a call to a
        # ZooKeeper that cannot be reached would hold the loop)
        self._leader: dict[str, Any] | None = None
        client.ensure_path(self.path)
        client.ChildrenWatch(self.path, lambda _children: self._refresh())
        client.add_listener(self._on_state)
        self._thread = threading.Thread(target=self._contend, name="nimbus-election", daemon=True)
        self._lease = threading.Thread(target=self._keep_lease, name="nimbus-lease", daemon=True)
        self._thread.start()
        self._lease.start()

    # -- what nimbus's loop asks ------------------------------------------------------------
    def acting(self) -> bool:
        fresh = time.monotonic() - self._lease_from < self.timeout / 2
        return self._holding.is_set() and fresh and not self._release.is_set()

    def leader(self) -> dict[str, Any] | None:
        """Who holds the election (None: nobody, or ZooKeeper cannot be reached), as
        last read: on every change of the contenders, and with each lease round."""
        return self._leader

    def _refresh(self) -> None:
        try:
            contenders = self.election.contenders()
            self._leader = dict(json.loads(contenders[0])) if contenders else None
        except Exception:  # noqa: BLE001 - ZooKeeper away, or a contender's data unreadable
            self._leader = None

    def step_down(self, why: str) -> None:
        """Give the election up (a fenced write failed: another nimbus may lead): the
        thread contends again."""
        if self._holding.is_set():
            log.warning(f"nimbus {self.me['id']}: stepping down as leader: {why}")
        self._release.set()

    def close(self) -> None:
        self._closed.set()
        self._release.set()
        self.election.cancel()
        self._thread.join(10)
        self._lease.join(10)

    # -- the threads ------------------------------------------------------------------------
    def _contend(self) -> None:
        while not self._closed.is_set():
            self._release.clear()
            try:
                self.election.run(self._lead)
            except Exception as exc:  # noqa: BLE001 - ZooKeeper away, or the lock was lost
                log.info(f"nimbus {self.me['id']}: election: {type(exc).__name__}: {exc}")
            self._holding.clear()
            self._closed.wait(0.2)

    def _lead(self) -> None:
        node = self.election.lock.node
        self.node = f"{self.path}/{node}"
        self.term = int(node[-10:])
        self._check_lease()
        self._holding.set()
        log.info(f"nimbus {self.me['id']}: elected leader (term {self.term})")
        self._release.wait()
        self._holding.clear()
        log.info(f"nimbus {self.me['id']}: no longer leader (term {self.term})")

    def _keep_lease(self) -> None:
        while not self._closed.wait(self.timeout / LEASE_CHECKS_PER_TIMEOUT):
            if self._holding.is_set():
                self._check_lease()
            if self.client.connected:
                self._refresh()

    def _check_lease(self) -> None:
        started = time.monotonic()
        node = self.node
        try:
            found = (
                node is not None
                and self.client.exists_async(node).get(timeout=self.timeout / 2) is not None
            )
        except Exception:  # noqa: BLE001 - unreachable: the lease runs out by itself
            return
        if found:
            self._lease_from = started
        elif self._holding.is_set():
            self.step_down(f"its election znode {node} is gone (session expired)")

    def _on_state(self, state: str) -> None:
        """kazoo's connection thread: nothing that waits here."""
        if state != "CONNECTED":
            self._leader = None  # unknown until ZooKeeper answers again
        if state == "LOST":  # the session expired: our znode is gone
            self._release.set()
