"""Issue 15's acceptance for stateful bolts: a word count with a stateful counter over
100,000 words on 2 workers of a real cluster (nimbus and two supervisors, the `cluster`
fixture), a worker killed -9 after checkpoints committed and restarted by its
supervisor; the counts are read from what the counters committed, each word's tree
replayed by its spout until acked (tests/faults/state_parts.py).

- Killed between two checkpoints, or while a prepare is under way: every word's effect
  is in the last commit (its ack reached the spout) or is replayed into state rolled
  back to that commit; the counts equal the truth.
- Killed while a commit is under way: the commit is rolled forward (some bolts have
  committed) and the victim commits its prepared words from its SQLite file, with the
  acks it held for them (kept with the prepared transaction). Those complete their
  trees only if recovery beats the message timeout; when the first recovery
  checkpoint to the restarted worker is lost and times out (most runs here), the
  spout has replayed them by then: counted again, never lower than the truth (at
  least once; `duplicates` in the fault figures: 1,024, or 0 when it went through).
The victim is the worker without the word spout (a spout restarted from nothing would
emit everything again); it runs the checkpoint spout or not, as placed."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
from redis_server import redis_server

from stormish.state.protocol import COMMITTED, COMMITTING, PREPARING
from stormish.testing import poll_for

from .state_parts import checkpoint_tx, committed_counts, topology, truth
from .test_kill import worker

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]
WORDS = 100_000
CONF = {"topology.message.timeout.secs": 10, "topology.max.spout.pending": 2000}


def run_with_kill(
    c, watch, state: str, name: str, wanted: str, pause: float, timeout: int = 10
) -> dict[str, int]:
    """Kill the worker without the word spout when the checkpoint spout is seen to
    enter phase `wanted` (each prepare and commit taking `pause` s); `state`: where the
    topology keeps its state, a directory or a Redis URL."""
    poll_for(lambda: len(c.call("supervisors")) == 2, 30, 0.1, "two supervisors")
    conf = {**CONF, "topology.message.timeout.secs": timeout}
    c.call("submit", (topology(name, WORDS, state, pause, **conf), {}))
    c.wait_status(name, "running")
    poll_for(lambda: len(c.workers()) == 2, 30, 0.1, "two workers")
    stats = c.call("stats", name)
    spout_worker = next(s.worker for s in stats.tasks.values() if s.component == "words")
    victim = worker(c, 1 - spout_worker)
    poll_for(lambda: (checkpoint_tx(state, name) or (-1, ""))[0] >= 3, 60, 0.01,
             "three checkpoints committed")  # fmt: skip
    watch.begin()
    last = checkpoint_tx(state, name)
    poll_for(lambda: (tx := checkpoint_tx(state, name)) != last and tx[1] == wanted,
             30, 0.002, f"a checkpoint {wanted}")  # fmt: skip
    t0 = time.monotonic()
    os.kill(victim.pid, signal.SIGKILL)
    before = committed_counts(state, name)
    watch.figures["killed_at_txid"] = checkpoint_tx(state, name)[0]
    watch.figures["words_committed_before"] = sum(before.values())
    assert 0 < sum(before.values()) < WORDS, "the kill must land mid-run"
    poll_for(lambda: any(p.pid != victim.pid for p in _at(c, 1 - spout_worker)), 60, 0.05,
             "the victim restarted by its supervisor")  # fmt: skip
    c.wait_status(name, "complete", timeout=60 + 6 * timeout)
    watch.figures["complete_s"] = round(time.monotonic() - t0, 2)
    watch.freeze()
    assert "restarting it on port" in c.log("s0.log") + c.log("s1.log")
    counts = committed_counts(state, name)
    watch.figures["duplicates"] = sum(counts.values()) - WORDS
    return counts


def _at(c, index: int) -> list[psutil.Process]:
    """The live worker processes of index `index` (a killed one may linger as a zombie)."""
    out = []
    for p in c.workers():
        try:
            if f"--index {index} " in " ".join(p.cmdline()) + " ":
                out.append(p)
        except psutil.Error:
            continue
    return out


def test_kill_9_between_checkpoints_counts_exactly(cluster, watch, tmp_path):
    """Right after a commit: what the victim did since is lost with it and replayed,
    what the other worker did since is rolled back (INITSTATE) and replayed."""
    counts = run_with_kill(cluster, watch, str(tmp_path / "state"), "sb", COMMITTED, 0.0)
    assert counts == truth(WORDS)


def test_kill_9_during_a_prepare_counts_exactly(cluster, watch, tmp_path):
    """A prepared checkpoint that never committed is rolled back everywhere (the
    victim's from its SQLite file), and what it held is replayed."""
    counts = run_with_kill(cluster, watch, str(tmp_path / "state"), "sp", PREPARING, 0.03)
    assert counts == truth(WORDS)


def test_kill_9_during_a_commit_never_counts_less(cluster, watch, tmp_path):
    """A commit under way is rolled forward (some bolts committed): the victim commits
    its prepared words from its SQLite file after the restart and sends the acks kept
    with them, too late when recovery took a message timeout: the spout replayed
    them, counted again, never lost."""
    counts = run_with_kill(cluster, watch, str(tmp_path / "state"), "sc", COMMITTING, 0.03)
    want = truth(WORDS)
    low = {w: (counts.get(w, 0), n) for w, n in want.items() if counts.get(w, 0) < n}
    assert not low, f"words counted less than the truth (got, truth): {low}"
    assert set(counts) == set(want)


@pytest.fixture
def redis_url():
    yield from redis_server()


def test_kill_9_between_checkpoints_with_redis_counts_exactly(cluster, watch, redis_url):
    """The same on Redis (topology.state.provider: redis, a real redis-server)."""
    counts = run_with_kill(cluster, watch, redis_url, "rb", COMMITTED, 0.0)
    assert counts == truth(WORDS)
