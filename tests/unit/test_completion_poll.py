"""How often completion looks: backing off while busy, close to the end once spouts finish."""

from __future__ import annotations

from stormish.runtime.running import POLL, POLL_BUSY_MAX, next_poll


def test_a_busy_run_is_looked_at_less_and_less_often_up_to_the_cap():
    seen, interval = [], POLL
    for _ in range(20):
        interval = next_poll(interval, quiet=False, spouts_finished=False)
        seen.append(interval)
    assert seen == sorted(seen) and seen[0] > POLL and seen[-1] == POLL_BUSY_MAX


def test_once_the_spouts_finished_the_end_is_looked_for_every_other_poll():
    backed_off = POLL_BUSY_MAX
    assert next_poll(backed_off, quiet=False, spouts_finished=True) == 2 * POLL
    assert next_poll(backed_off, quiet=True, spouts_finished=True) == POLL
    assert next_poll(backed_off, quiet=True, spouts_finished=False) == POLL
