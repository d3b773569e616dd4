"""JetStreamSpout's decisions and the in-memory JetStream, with no server.

Scenarios: the bound (at max_ack_pending un-acked nothing is fetched), ack/nak/term/
in_progress as a tree ends, redelivery after ack_wait, max_deliver, stop_at_end; driven by
hand on a fake clock, then in a LocalCluster."""

from __future__ import annotations

import sys

import pytest

from stormish import Failure
from stormish.nats import JetStreamSink, JetStreamSpout
from stormish.nats.pull import NAK, TERM, ConsumerPosition, Window, reached_end, settle_failure
from stormish.testing import FakeClock, MemoryJetStream
from stormish.testing.jetstream import subject_matches


def test_window_bounds_each_fetch_by_batch_and_the_outstanding_by_max_ack_pending():
    w = Window(max_ack_pending=10, batch=4)
    assert w.want() == 4
    w.delivered(7)
    assert w.want() == 0  # 3 free: less than a batch, no fetch of crumbs
    w.settled(1)
    assert w.want() == 4
    w.delivered(4)
    w.delivered(0)
    assert w.want() == 0 and w.high == 10
    small = Window(max_ack_pending=6, batch=256)  # a batch bigger than the bound
    assert small.want() == 6
    small.delivered(6)
    small.settled(2)
    assert small.want() == 0
    small.settled(1)
    assert small.want() == 3


def test_a_failed_tree_naks_with_the_delay_and_a_dead_letter_terms():
    assert settle_failure(Failure("failed"), 2.5) == (NAK, 2.5)
    assert settle_failure(None, None) == (NAK, None)
    assert settle_failure(Failure("failed", failures=3, dead_letter=True), 2.5) == (TERM, None)


def test_the_end_waits_for_delivery_to_the_end_and_for_every_ack():
    assert not reached_end(10, ConsumerPosition(9, 0, 1), 0)
    assert not reached_end(10, ConsumerPosition(10, 1, 0), 0)
    assert not reached_end(10, ConsumerPosition(10, 0, 0), 1)
    assert reached_end(10, ConsumerPosition(10, 0, 5), 0)  # published after the start
    assert reached_end(0, ConsumerPosition(0, 0, 0), 0)


def test_subjects_match_as_nats_wildcards():
    assert subject_matches("orders.>", "orders.eu.1")
    assert not subject_matches("orders.>", "orders")
    assert subject_matches("orders.*", "orders.eu")
    assert not subject_matches("orders.*", "orders.eu.1")
    assert not subject_matches("orders.eu", "orders.us")


def _js(n: int, clock: FakeClock) -> MemoryJetStream:
    js = MemoryJetStream(clock=clock)
    js.add_stream("S", ["s.>"])
    for i in range(n):
        js.publish(f"s.{i % 3}", str(i).encode())
    return js


class Driver:
    """A spout opened by hand: emits are recorded, ack/fail called by the test."""

    def __init__(self, spout: JetStreamSpout):
        self.spout, self.emitted, self.finished = spout, [], False
        spout.emit = lambda values, msg_id=None, **kw: self.emitted.append((values, msg_id))
        spout.finish = lambda: setattr(self, "finished", True)
        spout.open({}, None)

    def turn(self, n: int = 1) -> None:
        for _ in range(n):
            self.spout.next_tuple()


def test_memory_consumer_redelivers_after_ack_wait_and_stops_at_max_deliver():
    clock = FakeClock()
    js = _js(2, clock)
    c = js.consumer("S", "d", ack_wait=5, max_deliver=2)
    first = c.fetch(10)
    assert [m.seq for m in first] == [1, 2] and c.fetch(10) == []
    first[1].ack()
    clock.advance(5)
    again = c.fetch(10)
    assert [(m.seq, m.num_delivered) for m in again] == [(1, 2)]
    first[0].ack()  # an older delivery's ack: not the current one, ignored
    assert c.position().num_ack_pending == 1
    clock.advance(5)
    assert c.fetch(10) == [] and c.position().num_ack_pending == 0  # max_deliver reached
    assert c.acked == {2}


def test_memory_consumer_nak_delay_term_in_progress_and_max_ack_pending():
    clock = FakeClock()
    js = _js(3, clock)
    c = js.consumer("S", "d", ack_wait=10, max_ack_pending=2)
    a, b = c.fetch(10)
    assert c.fetch(10) == []  # at max_ack_pending
    a.nak(3)
    clock.advance(2.9)
    assert c.fetch(10) == []
    clock.advance(0.1)
    (a2,) = c.fetch(10)
    assert a2.seq == 1
    a2.ack()
    b.term()
    (m3,) = c.fetch(10)
    assert m3.seq == 3 and c.terminated == {2}
    clock.advance(9)
    m3.in_progress()  # still working on it: ack_wait starts again
    clock.advance(9)
    assert [m.seq for m in c.fetch(10)] == []
    clock.advance(1)
    assert [(m.seq, m.num_delivered) for m in c.fetch(10)] == [(3, 2)]


def test_spout_holds_no_more_than_max_ack_pending_and_acks_naks_terms():
    clock = FakeClock()
    js = _js(10, clock)
    d = Driver(JetStreamSpout(js, "S", "s.>", "d", max_ack_pending=4, batch=2, nak_delay_secs=2))
    d.turn(5)
    assert [m for _, m in d.emitted] == [1, 2, 3, 4]  # the bound: no fetch past 4
    d.spout.ack(1)
    d.spout.fail(2, Failure("failed"))
    d.spout.fail(3, Failure("failed", failures=5, dead_letter=True))
    d.turn()  # the settles go out; three places free
    c = js.consumer("S", "d")
    assert c.acked == {1} and c.terminated == {3}
    # a nak'ed message stays ack-pending on the server until redelivered (as JetStream's)
    assert [m for _, m in d.emitted][4:] == [5, 6]
    d.spout.ack(4)
    d.turn()
    assert [m for _, m in d.emitted][6:] == [7]
    clock.advance(2)
    d.spout.ack(5)
    d.turn()
    assert [m for _, m in d.emitted][7:] == [2, 8]  # 2 nak'ed: back after its delay
    assert d.spout.source.window.high == 4


def test_reset_timeout_sends_in_progress_and_stop_at_end_finishes_after_the_acks():
    clock = FakeClock()
    js = _js(3, clock)
    d = Driver(JetStreamSpout(js, "S", "s.>", "d", ack_wait_secs=10, stop_at_end=True))
    d.turn()
    js.publish("s.9", b"late")  # after the start: not waited for
    c = js.consumer("S", "d")
    clock.advance(8)
    d.spout.timeout_reset(2)
    d.turn()
    assert c.pending[2].due == 18 and c.pending[1].due == 10
    for seq in (1, 2, 3):
        d.spout.ack(seq)
    d.turn(2)
    assert not d.finished  # the late message was fetched: its tree must end first
    d.spout.ack(4)
    d.turn(2)
    assert d.finished and c.acked == {1, 2, 3, 4}


def test_an_inactive_spout_sends_its_acks_at_once():
    js = _js(3, FakeClock())
    d = Driver(JetStreamSpout(js, "S", "s.>", "d"))
    d.turn()
    d.spout.ack(1)
    assert js.consumer("S", "d").acked == set()  # gathered for the next turn
    d.spout.deactivate()  # no next turn while inactive
    d.spout.ack(2)
    assert js.consumer("S", "d").acked == {1, 2}


def test_bad_options_name_the_option():
    with pytest.raises(ValueError, match="max_ack_pending"):
        JetStreamSpout("nats://x", "S", "s", "d", max_ack_pending=0)
    with pytest.raises(ValueError, match="durable"):
        JetStreamSpout("nats://x", "S", "s", "")
    with pytest.raises(ValueError, match="subject= or subject_field="):
        JetStreamSink("nats://x")


def test_the_package_needs_nats_py_only_when_a_component_opens():
    """Run where `import nats` fails: building works, opening names the extra."""
    import subprocess

    code = (
        "import sys; sys.modules['nats'] = None\n"
        "from stormish.nats import JetStreamSink, JetStreamSpout\n"
        "s = JetStreamSpout('nats://127.0.0.1:1', 'S', 's', 'd')\n"
        "JetStreamSink('nats://127.0.0.1:1', subject='x')\n"
        "try:\n"
        "    s.open({}, None)\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "pip install 'stormish[nats]'" in r.stdout
