"""Nimbus's state in ZooKeeper, behind the data directory store's interface (`store.Store`),
for several nimbus processes: what one leader wrote, the next one reads.

Under the root (`--zk-root`, default /stormish):

- `topologies/NAME`: a topology's state (status, slots, epoch, workers, active, the id of
  its code), JSON, written only when it changed, by the leader, in a transaction that
  checks the leader's election znode (a nimbus that lost the election cannot write). The
  znode's existence is what "submitted" means: it is created after the code is in place
  and replicated, so a submit interrupted by the leader's death left nothing, or all.
- `code/ID` (ID: the name and the hash of the pickle): its size and hash, created once
  every piece is under `blobs/ID/` (pieces under ZooKeeper's 1 MB znode limit). Every
  nimbus fetches new code, checks its hash, unpickles it (the modules it needs import on
  that host) and keeps a copy in its data directory (`blobs/ID.pkl`), then says so with
  an ephemeral `code/ID/holders/NIMBUS`. A submit is acknowledged once
  `topology.min.replication.count` nimbuses hold its code (Storm's blobstore
  replication), so the nimbus that takes over can run it.
- `final/NAME`: the final statistics of an ended topology.
- `supervisors/ID`: what the leader knows of a supervisor (host, ports, failed ports,
  its workers' states), written when it changed: the worker heartbeats batched per
  supervisor. A new leader starts from them (a supervisor that died with the old leader
  is noticed by its silence).
- `assignments/a-NNNNNNNNNN`: who assigned what: each change of a topology's slots, with
  the leader's id and term, in ZooKeeper's order (the fault tests read it).

ZooKeeper holds no secrets: no keys, and the code only behind digest ACLs when the
cluster is keyed (`zk_auth`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import cloudpickle

from .. import pickling
from ..errors import StormishError
from ..names import check_name
from ..runtime.status import ENDED
from .store import write_atomic

log = logging.getLogger("stormish.nimbus")

PIECE = 512 * 1024  # bytes per blob znode (ZooKeeper's default jute.maxbuffer is 1 MB)
HOLD_TRIES = 8  # tries to hold new code (about 15 s in all) before giving up on it
PROBE_EVERY = 1.0  # a submit asks a nimbus that holds not its code whether it answers


class LostLeadership(StormishError):
    """A fenced write failed: this nimbus no longer holds the election."""


class ZkUnavailable(LostLeadership):
    """ZooKeeper did not answer in time (a partition, an outage): a leader that cannot
    write cannot lead; it steps down and contends again once ZooKeeper answers."""


class ZkStore:
    """`store.Store`'s interface on ZooKeeper. `fence()` gives the leader's election
    znode (None: not leading); `min_replicas` nimbuses must hold a topology's code before
    its submit is acknowledged, within `replication_wait` seconds (None: 2 when 2 or more
    nimbus are in the election, else 1)."""

    def __init__(
        self,
        client: Any,
        root: str,
        nimbus_id: str,
        data_dir: str,
        fence: Callable[[], tuple[str | None, int | None]],
        min_replicas: int | None = None,
        replication_wait: float = 30.0,
        op_timeout: float = 2.0,
    ):
        self.zk = client
        self.root = root.rstrip("/")
        self.id = nimbus_id
        self.fence = fence
        self.min_replicas = min_replicas
        self.replication_wait = replication_wait
        # nimbus's one loop calls in here: no call may wait on ZooKeeper for ever
        # (kazoo's sync calls do while it is disconnected)
        self.op_timeout = op_timeout
        self.blob_dir = os.path.join(os.path.abspath(data_dir), "blobs")
        os.makedirs(self.blob_dir, mode=0o700, exist_ok=True)
        os.chmod(self.blob_dir, 0o700)  # whatever the umask: nimbus unpickles what is here
        for sub in ("leader", "topologies", "code", "blobs", "final", "supervisors", "assignments"):
            client.ensure_path(f"{self.root}/{sub}")
        self._staged: dict[str, str] = {}  # name -> code id of a submit under way
        self._written: dict[str, bytes] = {}  # path -> the data last written there
        self._slots: dict[str, Any] = {}  # name -> slots last recorded in assignments/
        self._held: set[str] = set()
        self._closed = False
        self._lock = threading.Lock()
        client.ChildrenWatch(f"{self.root}/code", self._on_code)

    # -- the Store interface ------------------------------------------------------------------
    def save_topology(self, name: str, topology: Any, conf: dict[str, Any]) -> None:
        """Put the code in place and wait for its replication; the topology exists once
        its first state is saved (`save_state`). Nimbus's loop does the two apart
        (`stage_topology`, then `await_replicas` on a thread of its own)."""
        cid = self.stage_topology(name, topology, conf)
        try:
            self.await_replicas(name, cid)
        except StormishError:
            self.unstage(name, cid)
            raise

    def stage_topology(self, name: str, topology: Any, conf: dict[str, Any]) -> str:
        """Put the code in place and hold it here; its id (each submit's own: the code of
        a topology replaced or ended is removed, `drop_code`, with no other submit's
        holders to lose)."""
        check_name(name, "topology name")
        data = pickling.dumps((topology, conf))
        cid = f"{name}-{hashlib.sha256(data).hexdigest()[:20]}-{secrets.token_hex(4)}"
        if self._exists(f"{self.root}/code/{cid}") is None:
            pieces = [data[i : i + PIECE] for i in range(0, len(data), PIECE)] or [b""]
            self._ensure(f"{self.root}/blobs/{cid}")
            for i, piece in enumerate(pieces):
                path = f"{self.root}/blobs/{cid}/{i:06d}"
                if self._exists(path) is None:
                    self._create(path, piece)
                else:
                    self._set(path, piece)
            meta = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                    "pieces": len(pieces)}  # fmt: skip
            self._create(f"{self.root}/code/{cid}", json.dumps(meta).encode())
        self._hold(cid)
        self._staged[name] = cid
        return cid

    def unstage(self, name: str, cid: str) -> None:
        """A submit refused: its code goes."""
        if self._staged.get(name) == cid:
            del self._staged[name]
        self.drop_code(cid)

    def save_state(self, name: str, state: dict[str, Any]) -> None:
        path = f"{self.root}/topologies/{check_name(name, 'topology name')}"
        if name in self._staged:
            state = dict(state, code=self._staged[name])
        elif path in self._written:
            state = dict(state, code=json.loads(self._written[path])["code"])
        else:
            state = dict(state, code=self._read_state(name)["code"])
        data = json.dumps(state, sort_keys=True).encode()
        if self._written.get(path) == data:
            return  # written only on change
        node, term = self.fence()
        if node is None:
            raise LostLeadership(f"nimbus {self.id} does not lead: {name!r} not saved")
        tx = self.zk.transaction()
        tx.check(node, -1)  # our election znode still exists: we still lead
        if path in self._written or self._exists(path) is not None:
            tx.set_data(path, data)
        else:
            tx.create(path, data)
        slots = state.get("slots")
        if slots != self._slots.get(name):
            record = {"nimbus": self.id, "term": term, "topology": name,
                      "epoch": state.get("epoch"), "slots": slots, "at": time.time()}  # fmt: skip
            tx.create(f"{self.root}/assignments/a-", json.dumps(record).encode(), sequence=True)
        self._commit(tx, f"{name!r}'s state")
        self._written[path] = data
        self._slots[name] = slots
        self._staged.pop(name, None)

    def save_final(self, name: str, final: dict[str, Any]) -> None:
        """An ended topology's statistics; its code is no longer needed (a new leader
        restores no ended topology): it goes."""
        self._fenced_put(f"{self.root}/final/{check_name(name, 'topology name')}", final)
        cid = self._code_of(name)
        if cid is not None:
            self.drop_code(cid)

    def load_final(self, name: str) -> dict[str, Any] | None:
        """The final statistics saved of topology `name` (None: none were)."""
        path = f"{self.root}/final/{check_name(name, 'topology name')}"
        if self._exists(path) is None:
            return None
        final = json.loads(self._get(path))
        return final if isinstance(final, dict) else None

    def forget(self, name: str) -> None:
        """A topology removed (or replaced by a new submit): its state, statistics and
        code go."""
        check_name(name, "topology name")
        cid = self._code_of(name)
        for path in (f"{self.root}/topologies/{name}", f"{self.root}/final/{name}"):
            if self._exists(path) is not None:
                node, _ = self.fence()
                if node is None:
                    raise LostLeadership(f"nimbus {self.id} does not lead: {name!r} kept")
                tx = self.zk.transaction()
                tx.check(node, -1)
                tx.delete(path)
                self._commit(tx, f"removing {name!r}")
            self._written.pop(path, None)
        self._slots.pop(name, None)
        if cid is not None:
            self.drop_code(cid)

    def _code_of(self, name: str) -> str | None:
        """The code id of topology `name`'s state (None: no state)."""
        path = f"{self.root}/topologies/{name}"
        data = self._written.get(path)
        if data is None:
            if self._exists(path) is None:
                return None
            data = self._get(path)
        try:
            return str(json.loads(data)["code"])
        except (ValueError, KeyError, TypeError):
            return None

    def drop_code(self, cid: str) -> None:
        """Remove code `cid` (its holders, its pieces, this nimbus's copy) in one fenced
        transaction, each call bounded; one that fails (another nimbus fetching it just
        then, ZooKeeper away) leaves it to the collection at the next takeover."""
        if cid in self._staged.values():
            return
        with self._lock:
            self._held.discard(cid)
        self._remove_local(cid)
        node, _ = self.fence()
        if node is None:
            return
        code, blobs = f"{self.root}/code/{cid}", f"{self.root}/blobs/{cid}"
        try:
            tx = self.zk.transaction()
            tx.check(node, -1)
            if self._exists(code) is not None:
                if self._exists(f"{code}/holders") is not None:
                    for h in self._children(f"{code}/holders"):
                        tx.delete(f"{code}/holders/{h}")
                    tx.delete(f"{code}/holders")
                tx.delete(code)
            if self._exists(blobs) is not None:
                for piece in self._children(blobs):
                    tx.delete(f"{blobs}/{piece}")
                tx.delete(blobs)
            self._commit(tx, f"removing code {cid}")
        except StormishError as exc:
            log.info(f"nimbus {self.id}: code {cid} left for later: {exc}")

    def _remove_local(self, cid: str) -> None:
        try:
            os.unlink(os.path.join(self.blob_dir, f"{cid}.pkl"))
        except OSError:
            pass

    def load_all(self) -> list[tuple[str, Any, dict[str, Any], dict[str, Any]]]:
        """(name, topology, conf, state) of every topology in ZooKeeper; what this
        nimbus remembers of earlier writes is dropped (another leader wrote since)."""
        self._written.clear()
        self._slots.clear()
        self._staged.clear()
        out: list[tuple[str, Any, dict[str, Any], dict[str, Any]]] = []
        used: set[str] = set()
        codes = self._children(f"{self.root}/code")  # what the collection may remove
        for name in sorted(self._children(f"{self.root}/topologies")):
            try:
                state = self._read_state(name)
                path = f"{self.root}/topologies/{name}"
                if state.get("status") in ENDED:  # kept for list; its code is gone
                    self._written[path] = json.dumps(state, sort_keys=True).encode()
                    state.pop("code", None)
                    out.append((name, None, {}, state))
                    continue
                used.add(str(state["code"]))
            except (OSError, ValueError, KeyError, EOFError, StormishError) as exc:
                log.warning(f"nimbus: skipping topology {name!r} in ZooKeeper: {exc}")
                continue
            try:
                topology, conf = self._load_code(state["code"])
            except Exception as exc:  # noqa: BLE001 - unpickling runs any code
                # listed failed (`Store.load_all`): it must not keep nimbus from leading
                topology, conf = None, {}
                why = f"{type(exc).__name__}: {exc}"
                state["unloadable"] = f"its stored code no longer loads: {why}"
            self._written[path] = json.dumps(state, sort_keys=True).encode()
            self._slots[name] = state.get("slots")
            state.pop("code", None)
            out.append((name, topology, conf, state))
        unused = [cid for cid in codes if cid not in used]
        threading.Thread(
            target=self._collect_garbage, args=(unused,), name="nimbus-code-gc", daemon=True
        ).start()
        return out

    # -- supervisors, as the leader knows them ------------------------------------------------
    def save_supervisor(self, sid: str, info: dict[str, Any]) -> None:
        self._fenced_put(f"{self.root}/supervisors/{sid}", info)

    def forget_supervisor(self, sid: str) -> None:
        path = f"{self.root}/supervisors/{sid}"
        self._written.pop(path, None)
        node, _ = self.fence()
        if node is None or self._exists(path) is None:
            return
        tx = self.zk.transaction()
        tx.check(node, -1)
        tx.delete(path)
        self._commit(tx, f"forgetting supervisor {sid}")

    def supervisors(self) -> dict[str, dict[str, Any]]:
        out = {}
        for sid in self._children(f"{self.root}/supervisors"):
            data = self._get(f"{self.root}/supervisors/{sid}")
            out[sid] = json.loads(data)
        return out

    def listing(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """`list` and `supervisors` as the leader last wrote them to ZooKeeper: what a
        follower answers when no leader does (no live figures: `from_zookeeper`)."""
        now = time.time()
        sups: dict[str, dict[str, Any]] = {}
        heard: dict[str, float] = {}
        for sid in self._children(f"{self.root}/supervisors"):
            data, stat = self._wait(self.zk.get_async(f"{self.root}/supervisors/{sid}"), sid)
            sups[sid] = json.loads(data)
            heard[sid] = round(max(0.0, now - stat.mtime / 1000), 2)
        rows = []
        for name in sorted(self._children(f"{self.root}/topologies")):
            st = self._read_state(name)
            slots = {int(i): (str(s[0]), int(s[1])) for i, s in (st.get("slots") or {}).items()}
            workers = []
            for i, (sid, port) in sorted(slots.items()):
                rep = (sups.get(sid, {}).get("workers") or {}).get(f"{name}/{i}")
                workers.append({"index": i, "supervisor": sid, "port": port,
                                **(rep or {"state": "placed", "restarts": 0})})  # fmt: skip
            rows.append({
                "name": name, "status": st.get("status"), "workers": st.get("workers"),
                "slots": {i: f"{sid}:{port}" for i, (sid, port) in sorted(slots.items())},
                "active": st.get("active", True), "error": st.get("error"), "waiting": None,
                "killing": st.get("kill_at") is not None,
                "rebalancing": st.get("rebalance_at") is not None,
                "uptime_seconds": round(now - float(st.get("submitted") or now), 1),
                "worker_status": workers, "from_zookeeper": True,
                "restarts": sum(int(w.get("restarts") or 0) for w in workers),
            })  # fmt: skip
        sup_rows = [
            {"id": sid, "host": i.get("host"), "ports": i.get("ports"),
             "running": sorted(k for k, w in (i.get("workers") or {}).items()
                               if w.get("state") == "running"),
             "heard_seconds_ago": heard[sid], "failed_ports": i.get("failed") or {}}
            for sid, i in sorted(sups.items())
        ]  # fmt: skip
        return rows, sup_rows

    def assignments(self) -> list[dict[str, Any]]:
        """Who assigned what, in ZooKeeper's order (its sequence numbers)."""
        base = f"{self.root}/assignments"
        return [json.loads(self._get(f"{base}/{n}")) for n in sorted(self._children(base))]

    # -- bounded calls: kazoo's async API, waited for at most op_timeout --------------------
    def _wait(self, result: Any, what: str) -> Any:
        try:
            return result.get(timeout=self.op_timeout)
        except self.zk.handler.timeout_exception:
            raise ZkUnavailable(
                f"nimbus {self.id}: ZooKeeper did not answer ({what}) within {self.op_timeout:g}s"
            ) from None

    def _exists(self, path: str) -> Any:
        return self._wait(self.zk.exists_async(path), f"exists {path}")

    def _get(self, path: str) -> bytes:
        return bytes(self._wait(self.zk.get_async(path), f"get {path}")[0])

    def _children(self, path: str) -> list[str]:
        return list(self._wait(self.zk.get_children_async(path), f"children of {path}"))

    def _create(self, path: str, data: bytes, ephemeral: bool = False) -> None:
        self._wait(self.zk.create_async(path, data, ephemeral=ephemeral), f"create {path}")

    def _set(self, path: str, data: bytes) -> None:
        self._wait(self.zk.set_async(path, data), f"set {path}")

    def _ensure(self, path: str) -> None:
        self._wait(self.zk.ensure_path_async(path), f"ensure {path}")

    # -- internals ------------------------------------------------------------------------------
    def _fenced_put(self, path: str, value: Any) -> None:
        data = json.dumps(value, sort_keys=True).encode()
        if self._written.get(path) == data:
            return
        node, _ = self.fence()
        if node is None:
            raise LostLeadership(f"nimbus {self.id} does not lead: {path} not written")
        tx = self.zk.transaction()
        tx.check(node, -1)
        if self._exists(path) is None:
            tx.create(path, data)
        else:
            tx.set_data(path, data)
        self._commit(tx, path)
        self._written[path] = data

    def _commit(self, tx: Any, what: str) -> None:
        results = self._wait(tx.commit_async(), what)
        bad = [r for r in results if isinstance(r, Exception)]
        if bad:
            raise LostLeadership(
                f"nimbus {self.id}: ZooKeeper refused writing {what} ({bad[0]!r}): "
                "its election znode changed or is gone"
            )

    def _read_state(self, name: str) -> dict[str, Any]:
        data = self._get(f"{self.root}/topologies/{name}")
        return dict(json.loads(data))

    def _load_code(self, cid: str) -> tuple[Any, dict[str, Any]]:
        local = os.path.join(self.blob_dir, f"{cid}.pkl")
        if not os.path.exists(local):
            self._fetch(cid)
        with open(local, "rb") as fh:
            topology, conf = cloudpickle.load(fh)
        return topology, conf

    def _fetch(self, cid: str) -> None:
        """Code `cid` from ZooKeeper into the data directory, its hash checked."""
        raw = self._get(f"{self.root}/code/{cid}")
        meta = json.loads(raw)
        data = b"".join(
            self._get(f"{self.root}/blobs/{cid}/{i:06d}") for i in range(int(meta["pieces"]))
        )
        if hashlib.sha256(data).hexdigest() != meta["sha256"]:
            raise StormishError(f"code {cid} in ZooKeeper: its hash does not match its pieces")
        write_atomic(self.blob_dir, f"{cid}.pkl", data)

    def _hold(self, cid: str) -> None:
        """This nimbus holds code `cid` (fetched, checked, loadable): say so."""
        with self._lock:
            if cid in self._held:
                return
            self._load_code(cid)
            self._ensure(f"{self.root}/code/{cid}/holders")
            path = f"{self.root}/code/{cid}/holders/{self.id}"
            if self._exists(path) is None:
                self._create(path, b"", ephemeral=True)
            self._held.add(cid)

    def _on_code(self, children: list[str]) -> None:
        """Every nimbus replicates new code as it appears (kazoo's watch thread); the
        copy of code removed from ZooKeeper goes."""
        for cid in children:
            if cid not in self._held:
                self._try_hold(cid, 0)
        with self._lock:
            gone = self._held - set(children)
            self._held -= gone
        for cid in gone:
            self._remove_local(cid)

    def _try_hold(self, cid: str, attempt: int) -> None:
        """Hold `cid`; a failure (ZooKeeper slow, a module not importable yet) is tried
        again a few times, backing off, while the code is there: a submit waits for it."""
        try:
            self._hold(cid)
        except Exception as exc:  # noqa: BLE001 - not loadable here (yet): not counted
            log.warning(f"nimbus {self.id}: cannot hold code {cid} (try {attempt + 1}): {exc}")
            if attempt < HOLD_TRIES and not self._closed:
                t = threading.Timer(min(5.0, 0.2 * 2**attempt), self._retry_hold, (cid, attempt))
                t.daemon = True
                t.start()

    def _retry_hold(self, cid: str, attempt: int) -> None:
        try:
            if cid in self._held or self.zk.exists(f"{self.root}/code/{cid}") is None:
                return
        except Exception:  # noqa: BLE001 - ZooKeeper away: the watch fires again later
            return
        self._try_hold(cid, attempt + 1)

    def close(self) -> None:
        self._closed = True

    def needed_replicas(
        self,
        holders: list[str] | tuple[str, ...] = (),
        answers: Callable[[dict[str, Any]], bool] | None = None,
        asked: dict[str, tuple[float, bool]] | None = None,
    ) -> int:
        """topology.min.replication.count when set; else 2 when another nimbus is live,
        1 when this one is alone. Live: in the election (its session not expired) and,
        when `answers` is given, holding the code or answering it (asked at most once
        per PROBE_EVERY seconds, remembered in `asked`): a nimbus killed -9 keeps its
        election znode until its session expires, and must not hold a submit up."""
        if self.min_replicas is not None:
            return self.min_replicas
        asked = {} if asked is None else asked
        live = 1
        for who in self._contenders():
            nid = str(who.get("id"))
            if nid == self.id:
                continue
            if nid in holders or answers is None:
                live += 1
                continue
            at, ok = asked.get(nid, (-1e9, False))
            if time.monotonic() - at >= PROBE_EVERY:
                ok = answers(who)
                asked[nid] = (time.monotonic(), ok)
            live += 1 if ok else 0
        return 2 if live >= 2 else 1

    def _contenders(self) -> list[dict[str, Any]]:
        """The nimbus in the election (their identities: id, api, control)."""
        out = []
        base = f"{self.root}/leader"
        for child in self._children(base):
            try:
                who = json.loads(self._get(f"{base}/{child}"))
            except (ValueError, StormishError):
                continue  # gone meanwhile, or not a contender's
            except Exception:  # noqa: BLE001 - kazoo's NoNodeError: gone meanwhile
                continue
            if isinstance(who, dict) and "api" in who:
                out.append(who)
        return out

    def await_replicas(
        self,
        name: str,
        cid: str,
        answers: Callable[[dict[str, Any]], bool] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        """Wait until enough nimbus hold code `cid` (`needed_replicas`, counted again at
        each look), for at most `replication_wait` seconds; then refuse the submit. Not
        on nimbus's loop: it waits (nimbus runs it on a thread of its own)."""
        deadline = time.monotonic() + self.replication_wait
        holders: list[str] = []
        asked: dict[str, tuple[float, bool]] = {}
        need = 1
        stop = cancel or threading.Event()
        while True:
            holders = self._children(f"{self.root}/code/{cid}/holders")
            need = self.needed_replicas(holders, answers, asked)
            if len(holders) >= need:
                return
            if time.monotonic() >= deadline:
                break
            if stop.wait(0.05):  # the other nimbuses fetch it meanwhile
                raise StormishError(f"topology {name!r}: its submit was given up")
        raise StormishError(
            f"topology {name!r}: its code is held by {len(holders)} nimbus "
            f"({', '.join(sorted(holders)) or 'none'}) after {self.replication_wait:g}s, "
            f"fewer than topology.min.replication.count ({need}): not submitted (raise "
            "topology.max.replication.wait.time.sec, or start the other nimbus)"
        )

    def _collect_garbage(self, unused: list[str]) -> None:
        """Code no topology uses (a submit interrupted, a topology removed by an older
        leader) goes (on a thread of its own, after a takeover: kazoo's recursive delete
        is not bounded). Only what was there at the takeover: a submit made since is not
        touched."""
        try:
            for cid in unused:
                if cid in self._staged.values():
                    continue
                self.zk.delete(f"{self.root}/code/{cid}", recursive=True)
                self.zk.delete(f"{self.root}/blobs/{cid}", recursive=True)
        except Exception as exc:  # noqa: BLE001 - the next takeover collects it
            log.info(f"nimbus {self.id}: unused code not collected: {exc}")
