"""kill -9 of the worker that runs a JetStreamSpout, mid-stream (100,000 messages on four
subjects, killed a fifth of the way), in a nimbus + two supervisors cluster:
the supervisor restarts the worker, its new spout binds the same durable consumer,
JetStream redelivers what the dead one held once ack_wait passes, and the run completes
with every message in the output stream.

At-least-once, checked on the server: the consumer's ack floor and delivered sequence
reach the stream's last sequence with nothing ack-pending, and every input value is in
the output stream. Duplicates (what was in flight at the kill) are allowed and counted.
"""

from __future__ import annotations

import signal
import time
import uuid

import pytest

from stormish.testing import poll_for

from .nats_parts import fill, pipeline, read, state

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]

N = 100_000
WORK = 0.0001  # per message and relay task: the run lasts several seconds


def test_kill_9_the_jetstream_spouts_worker_loses_nothing(cluster, watch, nats):
    c = cluster
    tag = uuid.uuid4().hex[:8]
    stream, subject, out = f"K{tag}", f"k{tag}", f"KOUT{tag}"
    fill(nats.address, stream, subject, out, N)
    poll_for(lambda: len(c.call("supervisors")) == 2, 30, 0.1, "two supervisors")
    c.call("submit", (pipeline("js", nats.address, stream, f"{subject}.>", out, WORK), {}))
    c.wait_status("js", "running")
    poll_for(lambda: len(c.workers()) == 2, 30, 0.1, "two workers")
    stats = c.call("stats", "js")
    index = next(s.worker for s in stats.tasks.values() if s.component == "src")
    (proc,) = [p for p in c.workers() if f"--index {index} " in " ".join(p.cmdline()) + " "]
    poll_for(lambda: state(nats.address, out)[0].state.messages >= N // 5, 60, 0.05, "under way")
    watch.begin()
    before = state(nats.address, out)[0].state.messages
    t0 = time.monotonic()
    proc.send_signal(signal.SIGKILL)
    c.wait_status("js", "complete", timeout=150)
    watch.figures["complete_s"] = round(time.monotonic() - t0, 2)
    watch.freeze()
    _, ci = state(nats.address, stream, "kill")
    assert ci.num_ack_pending == 0 and ci.num_pending == 0
    assert ci.delivered.stream_seq == N and ci.ack_floor.stream_seq == N
    values = [int(v) for v in read(nats.address, out)]
    assert set(values) == set(range(N)), f"lost: {sorted(set(range(N)) - set(values))[:20]}"
    watch.figures.update(
        killed_at=before, published=len(values), duplicates=len(values) - N,
        redelivered=ci.delivered.consumer_seq - N,
    )  # fmt: skip
    assert before < N  # the kill came mid-stream
    assert "restarting it on port" in c.log("s0.log") + c.log("s1.log")
