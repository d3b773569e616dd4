"""Bad peers against a real `LocalCluster(workers=2)` run (CURVE keys by default), each
made while the run is held half way, then released: the run must complete exactly
(every id delivered once, no fail, no replay, nothing that no spout emitted).

- a peer without the run's keys (any local process) is refused at the handshake: its
  code-running pickle, its injected rows and its forged backpressure status never reach
  a decoder (`malformed` stays 0);
- a peer with the run's keys (a buggy worker) gets in, and sends junk: every frame is
  counted (`malformed`, `foreign_hellos`, `dropped.unbound`, `status_refused`)
  and dropped, and nothing of it reaches a task (tuples on a connection no HELLO of
  the run bound are held for a HELLO, then dropped: transport/link.py).

The attacks use `attack` and `Evil` of tests/integration/test_hostile_peer.py.
"""

from __future__ import annotations

import os
import pickle
import time
from dataclasses import dataclass

import pytest
from integration.test_hostile_peer import Evil, attack

from stormish import LocalCluster, Topology
from stormish.testing import poll_for
from stormish.transport import frames as fr
from stormish.transport.link import run_topology_id
from stormish.transport.tracker import BackpressureStatus

from .ledger import LedgerSink, LedgerSpout, audit

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]

IDS = 20_000
HALF = IDS // 2
COMPLETES_WITHIN = 15  # s: a run released from its hold completes in about a second


def gated(name: str, ledger: str, go: str) -> Topology:
    """src (worker 0) -> sink (one task on each worker): half the ids cross the link
    (round-robin: a locality-aware shuffle would keep them in the spout's worker)."""
    t = Topology(name, config={"topology.disable.loadaware.messaging": True})
    t.set_spout("src", LedgerSpout(ledger, IDS, hold_at=HALF, gate=go))
    t.set_bolt("sink", LedgerSink(ledger), parallelism=2).shuffle_grouping("src")
    return t


@dataclass(frozen=True)
class Where:
    src: int  # the spout's task
    sink: int  # the sink task on the other worker
    up: int  # the spout's worker
    down: int  # the other one
    address: dict[int, str]


def held(c: LocalCluster, name: str, watch) -> Where:
    """Wait until the spout is held half way; where the tasks and links are."""
    poll_for(lambda: c.statistics(name).components["src"].emitted >= HALF, 60, 0.05,
             "the spout held half way")  # fmt: skip
    stats = c.statistics(name)
    src, up = next((t, s.worker) for t, s in stats.tasks.items() if s.component == "src")
    sink, down = next(
        (t, s.worker) for t, s in stats.tasks.items() if s.component == "sink" and s.worker != up
    )
    address = {w: stats.links[f"worker-{w}"]["address"] for w in (up, down)}
    watch.begin()
    return Where(src, sink, up, down, address)


def forged_status(w: Where) -> list:
    """The downstream worker's status, with an id no real status reaches, flagging its
    sink task: applied, it would hold the spout for ever."""
    status = BackpressureStatus(w.down, 2**64 - 1, frozenset({w.sink}), frozenset())
    return fr.encode_status(w.down, 0, status)


def release_and_audit(c: LocalCluster, name: str, go: str, ledger: str, watch):
    open(go, "w").close()
    t0 = time.monotonic()
    final = c.wait_complete(name, timeout=120)
    watch.freeze()
    a = audit(ledger, IDS)
    watch.figures.update(a.figures(), complete_s=round(time.monotonic() - t0, 2))
    assert final.status == "complete"
    assert a.lost == 0 and a.never_acked == 0, a
    # exactly: no id twice, none failed, none that the spout did not emit
    assert a.delivered == IDS and a.duplicates == 0 and a.failed == 0 and a.strangers == 0, a
    return final


def test_an_unkeyed_peer_is_refused_and_the_run_is_exact(tmp_path, watch, ledger):
    go, marker = str(tmp_path / "go"), str(tmp_path / "pwned")
    with LocalCluster(workers=2) as c:
        c.submit(gated("unkeyed", ledger, go))
        w = held(c, "unkeyed", watch)
        code = [fr.encode_tuples(w.up, 1, [])[0], pickle.dumps(Evil(marker), protocol=5)]
        rows = fr.encode_tuples(w.up, 2, [(w.sink, w.src, "default", [[-1], [-2]], None)])
        t0 = time.monotonic()
        accepted = {
            "code_pickle": attack(w.address[w.down], code),
            "injected_rows": attack(w.address[w.down], rows),
            "forged_status": attack(w.address[w.up], forged_status(w)),
        }
        watch.figures["refused_in_s"] = round(time.monotonic() - t0, 2)
        watch.figures["handshakes_accepted"] = sum(accepted.values())
        final = release_and_audit(c, "unkeyed", go, ledger, watch)
    assert not any(accepted.values()), f"a peer without keys completed a handshake: {accepted}"
    assert not os.path.exists(marker), "a peer without keys ran code in a worker"
    for w_ in (w.up, w.down):  # nothing of theirs reached a decoder
        assert final.links[f"worker-{w_}"]["malformed"] == 0


def junk(w: Where, name: str) -> tuple[list[list[bytes]], int]:
    """Frames a buggy worker holding the run's keys might send the downstream worker,
    and how many of them must count as malformed."""
    header = fr.HEADER.pack
    tuples = header(fr.MAGIC, fr.VERSION, fr.Kind.TUPLES, w.up, 1)
    malformed = [
        [b"garbage"],  # no header
        [b""],  # an empty frame
        [header(fr.MAGIC, 0, fr.Kind.TUPLES, w.up, 1), b"x"],  # an unknown version
        [header(fr.MAGIC, fr.VERSION, 99, w.up, 1), b"x"],  # an unknown kind
        [tuples, b"\x80\x05garbage"],  # a corrupt pickle
        [tuples, pickle.dumps({"not": "a list"}, protocol=5)],
        [tuples, pickle.dumps([(1, 2)], protocol=5)],  # a batch of the wrong shape
        [tuples, pickle.dumps([(w.sink, w.src, "default", [[1]], ["a", "b"])], protocol=5)],
        fr.encode_hello(w.up, 0, name, {"incarnation": 5}),  # a HELLO of the wrong shape
    ]
    foreign = fr.encode_hello(w.up, 0, "another-topology", {"incarnation": "x", "status_base": 0})
    return [*malformed, foreign], len(malformed)


def test_a_keyed_peer_sending_junk_is_counted_and_dropped_and_the_run_is_exact(
    watch, ledger, tmp_path
):
    go = str(tmp_path / "go")
    with LocalCluster(workers=2) as c:
        c.submit(gated("keyed", ledger, go))
        w = held(c, "keyed", watch)
        keys = c._get("keyed").group.security  # the run's own keys: a buggy worker
        # a buggy worker of this very run: its HELLO names the run (link.run_topology_id)
        frames, n_malformed = junk(w, run_topology_id("keyed", c._get("keyed").group.run_id))
        assert attack(w.address[w.down], *frames, security=keys)
        assert attack(w.address[w.up], forged_status(w), security=keys)
        down, up = f"worker-{w.down}", f"worker-{w.up}"

        def counted() -> bool:
            links = c.statistics("keyed").links
            return (
                links[down]["malformed"] >= n_malformed
                and links[down]["foreign_hellos"] >= 1
                and links[up]["status_refused"].get("unbound", 0) >= 1
            )

        poll_for(counted, 30, 0.05, "every junk frame counted")
        final = release_and_audit(c, "keyed", go, ledger, watch)
    ln_down, ln_up = final.links[down], final.links[up]
    watch.figures.update(
        malformed=ln_down["malformed"],
        foreign_hellos=ln_down["foreign_hellos"],
        status_refused=ln_up["status_refused"],
    )
    assert ln_down["malformed"] == n_malformed  # each counted once, and only those
    assert ln_down["foreign_hellos"] == 1
    assert ln_up["malformed"] == 0
    assert ln_down["dropped"] == {} and ln_up["dropped"] == {}


def test_a_keyed_peer_sending_tuples_for_no_task_does_not_stop_completion(watch, ledger, tmp_path):
    go = str(tmp_path / "go")
    with LocalCluster(workers=2) as c:
        c.submit(gated("notask", ledger, go))
        w = held(c, "notask", watch)
        keys = c._get("notask").group.security
        stray = fr.encode_tuples(w.up, 2, [(9999, w.src, "default", [[-1], [-2]], None)])
        assert attack(w.address[w.down], stray, security=keys)
        down = f"worker-{w.down}"
        # no HELLO bound its connection: held, then dropped as a stranger's (link.py)
        poll_for(
            lambda: c.statistics("notask").links[down]["dropped"].get("unbound", 0) == 2,
            30, 0.05, "the stray tuples dropped",
        )  # fmt: skip
        open(go, "w").close()
        watch.figures["dropped"] = {"unbound": 2}
        # a clean run completes within a second of its release (the test above)
        c.wait_complete("notask", timeout=COMPLETES_WITHIN)
    a = audit(ledger, IDS)
    watch.figures.update(a.figures())
    assert a.lost == 0 and a.never_acked == 0 and a.duplicates == 0 and a.strangers == 0, a
