"""How often completion looks: backing off while busy, close to the end once spouts finish."""

from __future__ import annotations

from stormish.local.running import POLL, POLL_BUSY_MAX, POLL_FIRST, next_poll


def test_a_busy_run_is_looked_at_less_and_less_often_up_to_the_cap():
    seen, interval = [], POLL
    for _ in range(20):
        interval = next_poll(interval, quiet=False, spouts_finished=False)
        seen.append(interval)
    assert seen == sorted(seen) and seen[0] > POLL and seen[-1] == POLL_BUSY_MAX


def test_a_run_whose_spouts_finished_early_is_looked_at_again_as_soon_as_the_back_off_says():
    first = POLL_FIRST / 1.5  # what RunningTopology starts from
    assert next_poll(first, quiet=False, spouts_finished=True) == POLL_FIRST
    assert next_poll(first, quiet=False, spouts_finished=False) == POLL_FIRST


def test_once_the_spouts_finished_the_end_is_looked_for_every_other_poll():
    backed_off = POLL_BUSY_MAX
    assert next_poll(backed_off, quiet=False, spouts_finished=True) == 2 * POLL
    assert next_poll(backed_off, quiet=True, spouts_finished=True) == POLL
    assert next_poll(backed_off, quiet=True, spouts_finished=False) == POLL


class BusyWorker:
    """A worker view that is always busy, and counts how often it was asked."""

    def __init__(self):
        self.asked = 0

    def quiescence(self):
        self.asked += 1
        return {"spouts_done": False, "idle": False, "transferred": self.asked, "consumed": 0,
                "dropped": 0}  # fmt: skip

    def failure(self):
        return None


def test_polling_keeps_its_back_off_from_one_call_to_the_next():
    """`stormish run` polls every 50 ms: a fresh rule per call looked five times in each
    call, a request to every worker each time."""
    from stormish import Topology
    from stormish.local.running import RunningTopology

    worker = BusyWorker()
    running = RunningTopology(Topology("busy"), plan=None, workers=[worker])
    for _ in range(10):  # calls in quick succession: the next look is >= 1 ms away
        assert running.poll_complete(0) is False
    assert worker.asked <= 3  # a fresh rule per call: 10 at least
    # busy: the looks back off from POLL_FIRST (1, 1.5, 2.3, 3.4, 5, 7.6, 11, 17, 26, 38,
    # 50 ms, ...): 10 in the first 0.2 s, where a fresh rule per call made ~40
    running.poll_complete(0.2)
    assert worker.asked <= 3 + 12
