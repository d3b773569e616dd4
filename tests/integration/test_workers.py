"""Topologies on several real worker processes linked by ZeroMQ on 127.0.0.1.

Every test checks at teardown that the worker processes it started are gone and that
this process holds no socket it did not hold before (the `no_leaks` fixture)."""

from __future__ import annotations

import os
import sys
import time
from collections import Counter

import pytest

from stormish import BasicBolt, Bolt, LocalCluster, Spout, Topology, WorkerError
from stormish.loader import load_topology
from stormish.testing import ListSpout, LoseStatuses, poll_for, run_topology

from .parts import Count, Split, halt_lag_bound, sentences

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SENTENCES = sentences(50, 7, 5, 3000)


pytestmark = pytest.mark.usefixtures("no_leaks")  # no process or socket left (conftest)


def wordcount(name="wc", acking=True):
    t = Topology(name, config={} if acking else {"topology.acker.executors": 0})
    t.set_spout("s", ListSpout([[s] for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("split", Split(), parallelism=3).shuffle_grouping("s")
    t.set_bolt("count", Count(), parallelism=3).fields_grouping("split", ["word"])
    return t


def merged(results):
    total = Counter()
    for part in results["count"]:
        total.update(part)
    return total


EXPECTED = Counter(w for s in SENTENCES for w in s.split())


@pytest.mark.parametrize("workers", [2, 3])
def test_wordcount_exact_and_acked_on_several_worker_processes(workers):
    one = run_topology(wordcount(), workers=1)
    many = run_topology(wordcount(), workers=workers, timeout=90)
    assert merged(one.results) == EXPECTED
    assert merged(many.results) == EXPECTED
    assert many.results["s"][0]["acked"] == {i: 1 for i in range(len(SENTENCES))}
    stats = many.stats
    assert stats.workers == workers and stats.status == "complete"
    assert {t.worker for t in stats.tasks.values()} == set(range(workers))
    acker_workers = {t.worker for t in stats.tasks.values() if t.kind == "acker"}
    assert acker_workers == set(range(workers))  # one acker per worker, by default
    for name, link in stats.links.items():
        assert link["batches_sent"] > 0 and link["bytes_received"] > 0, name
        assert link["malformed"] == 0 and link["dropped"] == {}


def test_wordcount_acking_off_on_two_workers():
    res = run_topology(wordcount("wc0", acking=False), workers=2, timeout=90)
    assert merged(res.results) == EXPECTED


PAD = "p" * 16  # a realistic tuple size: the kernel buffers hold fewer of them


class FastSpout(Spout):
    outputs = ["n", "pad"]

    def __init__(self, count, reliable=False):
        self.count = count
        self.reliable = reliable

    def open(self, conf, context):
        self.n = 0
        self.pending = set()
        self.replay = []

    def next_tuple(self):
        for _ in range(100):
            if self.replay:
                i = self.replay.pop()
            elif self.n < self.count:
                i = self.n
                self.n += 1
            else:
                if not self.pending:
                    self.finish()
                return
            if self.reliable:
                self.pending.add(i)
                self.emit([i, PAD], msg_id=i)
            else:
                self.emit([i, PAD])

    def ack(self, msg_id):
        self.pending.discard(msg_id)

    def fail(self, msg_id):
        self.replay.append(msg_id)

    def result(self):
        return {"unacked": len(self.pending) + len(self.replay), "emitted_ids": self.n}


class Slow(Bolt):
    """About `work_us` of work per tuple: far slower than the spout."""

    def __init__(self, work_us=20):
        self.work = work_us / 1e6

    def prepare(self, conf, context):
        self.seen = set()

    def execute(self, tup):
        end = time.perf_counter() + self.work
        while time.perf_counter() < end:
            pass
        self.seen.add(tup.values[0])
        self.ack(tup)

    def result(self):
        return len(self.seen)


def bp_topology(name, count, extra=None, reliable=False, work_us=20):
    conf = {
        "topology.acker.executors": 1 if reliable else 0,
        "topology.executor.receive.buffer.size": 1024,
        "topology.producer.batch.size": 128,
        "topology.transfer.buffer.size": 50,
        **(extra or {}),
    }
    t = Topology(name, config=conf)
    t.set_spout("fast", FastSpout(count, reliable))  # task 1 -> worker 0
    t.set_bolt("slow", Slow(work_us)).shuffle_grouping("fast")  # task 2 -> worker 1
    return t


def _flagged(cluster, name, worker="worker-0"):
    return cluster.statistics(name).links[worker]["remote_tasks_flagged"] > 0


def test_spout_stalls_on_remote_backpressure_and_resumes():
    n = 300_000
    with LocalCluster(workers=2) as c:
        c.submit(bp_topology("bp", n))
        poll_for(lambda: _flagged(c, "bp"), timeout=30, what="slow task flagged upstream")
        s = poll_for(
            lambda: (st := c.statistics("bp")).components["fast"].pending_emits and st,
            timeout=30,
            what="the spout's emits parked",
        )
        assert s.components["fast"].emitted < n  # stalled, not finished
        final = c.wait_complete("bp", timeout=120)
    slow = final.components["slow"]
    assert slow.executed == n
    # the overflow is bounded by the halt-lag (what the bounded queues between the
    # spout and the slow task can hold), not by the 200,000-tuple stream
    slow_task = next(t for t in final.tasks.values() if t.component == "slow")
    # (x1.5: ZeroMQ's high-water marks and the kernel's buffer sizes are approximate)
    bound = 1.5 * halt_lag_bound((100_000, "p" * 16))  # as FastSpout emits them
    assert bound < n / 4
    assert 0 < slow_task.overflow_high <= bound
    w1 = final.links["worker-1"]
    assert w1["status_sent"] >= 2  # entered, and cleared by the timer when drained
    assert final.links["worker-0"]["status_received"] >= 2
    assert final.links["worker-0"]["remote_flagged_seconds"]["2"] > 0


def test_overflow_limit_sent_equals_delivered_plus_dropped():
    n = 30_000
    extra = {
        "topology.executor.overflow.limit": 256,
        "topology.link.status.filter": LoseStatuses(-1),  # the upstream is never told
    }
    final = run_topology(bp_topology("ovl", n, extra), workers=2, timeout=120).stats
    sent = final.components["fast"].transferred
    delivered = final.components["slow"].executed
    dropped = final.links["worker-1"]["dropped"]["overflow_limit"]
    assert sent == n
    assert dropped > 0
    assert sent == delivered + dropped
    # and on the task that lost them, as docs/statistics.md says
    assert final.components["slow"].dropped == {"overflow_limit": dropped}
    assert final.components["fast"].dropped == {}


@pytest.mark.parametrize("lose", [1, 3])
def test_lost_status_is_recovered_by_resend_or_timer(lose):
    n = 60_000
    extra = {
        "topology.link.status.filter": LoseStatuses(lose),
        "topology.backpressure.resend.step": 512,
    }
    final = run_topology(bp_topology(f"lost{lose}", n, extra), workers=2, timeout=120).stats
    w1 = final.links["worker-1"]
    assert w1["status_lost_by_test_hook"] == lose
    assert final.components["slow"].executed == n
    # the upstream heard a status after the lost ones: a resend or the timer's
    assert final.links["worker-0"]["status_received"] >= 1
    assert w1["status_resent"] + w1["status_sent"] > lose


@pytest.mark.faults  # kill/restart timing: in CI's faults run, out of the default suite
def test_downstream_killed_and_restarted_under_backpressure_finishes():
    n = 40_000
    extra = {"topology.message.timeout.secs": 4, "topology.max.spout.pending": 20_000}
    t = bp_topology("restart", n, extra, reliable=True, work_us=60)
    with LocalCluster(workers=2) as c:
        c.submit(t)
        running = c._get("restart")
        tasks = c.statistics("restart").tasks.values()
        down = next(t.worker for t in tasks if t.component == "slow")
        up = next(t.worker for t in tasks if t.component == "fast")
        assert down != up
        poll_for(
            lambda: c.statistics("restart").links[f"worker-{down}"]["status_sent"] >= 1,
            timeout=30,
            what="backpressure before the kill",
        )
        running.group.handles[down].kill()
        running.restart_worker(down)
        final = c.wait_complete("restart", timeout=120)
        results = running.results()
    assert final.links[f"worker-{up}"]["peer_reconnects"] >= 1
    # the restarted worker told the upstream its status on the new connection (STORM-3763)
    assert final.links[f"worker-{down}"]["status_sent_on_connect"] >= 1
    assert results["fast"][0]["unacked"] == 0
    assert final.components["fast"].acked >= n


def test_cycle_topology_completes_on_two_workers():
    t = load_topology(os.path.join(REPO, "topologies", "cycle.py"))
    final = run_topology(t, workers=2, timeout=120).stats
    assert final.status == "complete"
    assert final.components["sink"].executed == final.components["items"].acked


class Dies(BasicBolt):
    def execute(self, tup):
        if tup.values[0] == 500:
            os._exit(7)


def test_a_dead_worker_is_named_with_its_exit_status():
    t = Topology("dies", config={"topology.acker.executors": 0})
    t.set_spout("s", ListSpout([[i] for i in range(1000)], fields=["n"]))
    t.set_bolt("b", Dies()).shuffle_grouping("s")
    # the worker may die before submit returns (it starts the workers and asks them once
    # more): either call must name it
    named = pytest.raises(WorkerError, match=r"worker process \d \(pid \d+\) exited with code 7")
    with LocalCluster(workers=2) as c, named:
        c.submit(t)
        c.wait_complete("dies", timeout=60)


def test_stormish_run_reports_the_dead_worker_and_exits_non_zero(tmp_path):
    import subprocess

    f = tmp_path / "dying.py"
    f.write_text(
        "import os\n"
        "from stormish import BasicBolt, Topology\n"
        "from stormish.testing import ListSpout\n"
        "class Dies(BasicBolt):\n"
        "    def execute(self, tup):\n"
        "        if tup.values[0] == 50:\n"
        "            os._exit(3)\n"
        "topology = Topology('dying', config={'topology.acker.executors': 0})\n"
        "topology.set_spout('s', ListSpout([[i] for i in range(100)], fields=['n']))\n"
        "topology.set_bolt('b', Dies()).shuffle_grouping('s')\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(f), "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode != 0
    assert "worker process" in out.stderr + out.stdout
    assert "exited with code 3" in out.stderr + out.stdout


def test_a_worker_started_on_its_own_serves_its_controller():
    """What a supervisor will do: start `stormish worker` pointed at a control address,
    hand it a topology, start it, ask for statistics and stop it. Keyed, as a controller
    must be for a worker's results (user objects, pickled) to be read."""
    import shutil
    import subprocess

    import cloudpickle

    from stormish.local.workers import _child_env
    from stormish.runtime.acker import AckerBolt
    from stormish.runtime.plan import build_plan
    from stormish.transport.control_server import ControlServer
    from stormish.transport.security import Curve

    t = wordcount("solo", acking=False)
    conf = t.validate({})
    plan = build_plan(t, conf, AckerBolt())
    security = Curve.ephemeral()
    server = ControlServer(security=security)
    exe = shutil.which("stormish") or sys.executable
    cmd = [exe, "worker"] if exe != sys.executable else [exe, "-m", "stormish.cli", "worker"]
    proc = subprocess.Popen(
        [
            *cmd,
            "--control",
            server.address,
            "--index",
            "0",
            "--parent",
            str(os.getpid()),
            "--topology",
            "solo",
            "--keys",
            "-",
        ],  # fmt: skip
        env=_child_env(),  # the test module's classes travel by reference
        stdin=subprocess.PIPE,
    )
    proc.stdin.write(security.export())
    proc.stdin.close()
    try:
        ident = server.wait_hello("solo", 0, proc.pid, lambda: proc.poll() is None, 30)

        def ask(verb, payload=None):
            return server.request(ident, verb, payload, lambda: proc.poll() is None, 30, "solo")

        blob = cloudpickle.dumps((t, conf, dict(plan.assignment)))
        assert ask("assign", blob).startswith("tcp://127.0.0.1:")
        ask("peers", {})
        ask("start")

        def drained():
            q = ask("quiescence")
            return q["spouts_done"] and q["idle"] and q["transferred"] == q["consumed"]

        poll_for(drained, timeout=30, what="every tuple consumed")
        final = ask("stop", 10.0)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        server.close()
    assert merged({"count": [r for _, r in final["results"]["count"]]}) == EXPECTED


def test_malformed_and_foreign_frames_are_counted_and_dropped():
    import zmq

    from stormish.transport import frames as fr

    with LocalCluster(workers=2) as c:
        c.submit(bp_topology("junk", 20_000, work_us=5))
        address = c.statistics("junk").links["worker-1"]["address"]
        ctx = zmq.Context()
        s = ctx.socket(zmq.PUSH)
        s.setsockopt(zmq.LINGER, 1000)
        # a peer holding the run's keys (a buggy worker): one without is refused at the
        # handshake (test_hostile_peer.py)
        c._get("junk").group.security.client(s)
        s.connect(address)
        try:
            s.send_multipart([b"garbage"])
            s.send_multipart([b"SMSH" + b"\0" * 14, b"x"])  # a header of the wrong shape
            s.send_multipart(fr.encode_hello(0, 0, "another-topology", {"incarnation": "x"}))
            poll_for(
                lambda: (
                    (ln := c.statistics("junk").links["worker-1"])["malformed"] >= 2
                    and ln["foreign_hellos"] >= 1
                ),
                timeout=30,
                what="the junk counted",
            )
        finally:
            s.close()
            ctx.term()
        final = c.wait_complete("junk", timeout=120)
    assert final.components["slow"].executed == 20_000
