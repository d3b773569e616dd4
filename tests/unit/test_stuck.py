"""The stuck-executor rule (runtime/stuck.py) as scenarios on a fake clock, what tells a
thread in user code from one waiting in the engine, and the report a stuck thread
becomes."""

from __future__ import annotations

import os
import pickle
import threading
import traceback
from traceback import FrameSummary

import pytest

from stormish import config
from stormish.errors import ConfigError
from stormish.runtime.error_report import ENGINE, new_errors, stuck_report
from stormish.runtime.executor import stuck_limit
from stormish.runtime.stats import TaskStats
from stormish.runtime.stuck import BACK, QUIET, STILL, STUCK, StuckRule, look_every
from stormish.runtime.stuck_watch import in_user_code
from stormish.testing import FakeClock

TASK = 3


def test_a_turn_stamped_when_it_began_is_stuck_past_the_limit_and_reported_once():
    clock, rule = FakeClock(100.0), StuckRule()
    began = clock.now()
    turn = ("turn", began)
    clock.advance(0.5)
    assert rule.observe(TASK, turn, clock.now(), 1.0, began).what == QUIET
    clock.advance(0.6)
    v = rule.observe(TASK, turn, clock.now(), 1.0, began)
    assert (v.what, v.since) == (STUCK, began) and v.seconds == pytest.approx(1.1)
    rule.reported(TASK)
    clock.advance(60)
    v = rule.observe(TASK, turn, clock.now(), 1.0, began)
    assert v.what == STILL and v.seconds == pytest.approx(61.1)  # no second report


def test_a_candidate_not_reported_is_a_candidate_again():
    """The shell may decline (a thread waiting in the engine): it is asked again."""
    rule = StuckRule()
    rule.observe(TASK, ("turns", 7), 0.0, 1.0)
    assert rule.observe(TASK, ("turns", 7), 1.0, 1.0).what == STUCK
    assert rule.observe(TASK, ("turns", 7), 2.0, 1.0).what == STUCK


def test_a_turn_count_is_measured_from_the_first_look_that_saw_it():
    """An own thread's count: the call began before the first look, never after, so a
    report is never early."""
    clock, rule = FakeClock(), StuckRule()
    for _ in range(4):  # turning: a new count at every look
        clock.advance(0.25)
        assert rule.observe(TASK, ("turns", clock.now()), clock.now(), 1.0).what == QUIET
    first = clock.now()
    stuck = ("turns", 99)
    assert rule.observe(TASK, stuck, first, 1.0).what == QUIET
    clock.advance(0.75)
    assert rule.observe(TASK, stuck, clock.now(), 1.0).what == QUIET
    clock.advance(0.25)
    v = rule.observe(TASK, stuck, clock.now(), 1.0)
    assert (v.what, v.since) == (STUCK, first)


def test_the_end_of_a_reported_episode_is_said_once_and_the_next_one_reported_again():
    clock, rule = FakeClock(), StuckRule()
    rule.observe(TASK, ("turn", 0.0), clock.now(), 1.0, 0.0)
    clock.advance(2)
    assert rule.observe(TASK, ("turn", 0.0), clock.now(), 1.0, 0.0).what == STUCK
    rule.reported(TASK)
    clock.advance(3)
    v = rule.observe(TASK, None, clock.now(), 1.0)  # between turns: it returned
    assert (v.what, v.seconds) == (BACK, 5.0)
    assert rule.observe(TASK, None, clock.now(), 1.0).what == QUIET
    began = clock.now()
    clock.advance(1.5)
    assert rule.observe(TASK, ("turn", began), clock.now(), 1.0, began).what == STUCK


def test_an_episode_not_reported_ends_quietly():
    rule = StuckRule()
    rule.observe(TASK, ("turns", 1), 0.0, 1.0)
    assert rule.observe(TASK, ("turns", 2), 5.0, 1.0).what == QUIET


def test_tasks_are_judged_apart_and_a_limit_of_zero_is_off():
    rule = StuckRule()
    rule.observe(1, ("turns", 1), 0.0, 1.0)
    rule.observe(2, ("turns", 1), 0.0, 0.0)
    assert rule.observe(1, ("turns", 1), 9.0, 1.0).what == STUCK
    assert rule.observe(2, ("turns", 1), 9.0, 0.0).what == QUIET


def test_the_watch_looks_a_quarter_of_the_shortest_limit_within_bounds():
    assert look_every([30.0, 0.0]) == 1.0
    assert look_every([1.0, 30.0]) == 0.25
    assert look_every([0.01]) == 0.05
    assert look_every([0.0, 0.0]) == 0.0  # all off: no watch


# -- the config key ---------------------------------------------------------------------------
STUCK_SECS = "topology.executor.stuck.secs"


def test_unset_the_limit_is_the_message_timeout_and_zero_is_off():
    conf = config.resolve({"topology.message.timeout.secs": 12})
    assert conf[STUCK_SECS] is None and stuck_limit(conf) == 12.0
    assert stuck_limit(config.resolve({STUCK_SECS: 0})) == 0.0
    assert stuck_limit(config.resolve({STUCK_SECS: 1.5})) == 1.5
    with pytest.raises(ConfigError, match="topology.executor.stuck.secs"):
        config.resolve({STUCK_SECS: -1})


# -- user code or the engine ----------------------------------------------------------------
def frame(filename: str, name: str, line: int = 1) -> FrameSummary:
    return FrameSummary(filename, line, name, lookup_line=False)


THREADING = threading.__file__
STORMISH = os.path.dirname(ENGINE.rstrip(os.sep))


def test_a_thread_waiting_in_the_engine_is_not_in_user_code():
    """An inactive spout before open: the executor waits on its queue's wake-up."""
    stack = [
        frame(THREADING, "_bootstrap"),
        frame(ENGINE + "executor.py", "_main"),
        frame(ENGINE + "spout_executor.py", "begin_when_wanted"),
        frame(ENGINE + "queue.py", "wait"),
        frame(os.path.join(STORMISH, "transport", "wakeup.py"), "wait"),
        frame("<frozen importlib._bootstrap>", "_call"),
    ]
    assert not in_user_code(stack)


def test_a_thread_in_user_code_is_so_wherever_it_waits_below():
    base = [frame(THREADING, "_bootstrap"), frame(ENGINE + "executor.py", "_main")]
    assert in_user_code([*base, frame("/home/me/topo.py", "execute"), frame(THREADING, "wait")])
    # a component waiting on the topology's clock is still in its own call
    clock = os.path.join(STORMISH, "clock.py")
    assert in_user_code([*base, frame("/home/me/topo.py", "execute"), frame(clock, "sleep")])
    # the author API's modules outside the runtime are the component's code
    component = os.path.join(STORMISH, "component.py")
    assert in_user_code([*base, frame(component, "execute_batch")])


# -- the report ---------------------------------------------------------------------------------
def blocked(gate: threading.Event, entered: threading.Event) -> None:
    entered.set()
    gate.wait()  # BLOCKED


def test_a_stuck_report_names_the_place_and_carries_the_stack():
    import sys

    gate, entered = threading.Event(), threading.Event()
    t = threading.Thread(target=blocked, args=(gate, entered), daemon=True)
    t.start()
    try:
        assert entered.wait(10)
        stack = traceback.extract_stack(sys._current_frames()[t.ident])
    finally:
        gate.set()
        t.join(10)
    # as if the engine had called `blocked`: the frame before it is an engine frame
    at = next(i for i, f in enumerate(stack) if f.name == "blocked")
    stack = traceback.StackSummary.from_list(
        [frame(ENGINE + "bolt_executor.py", "_execute_batch"), *stack[at:]]
    )
    with open(__file__) as fh:
        line = next(i for i, s in enumerate(fh, 1) if s.rstrip().endswith("# BLOCKED"))
    rep = stuck_report(stack, "topo", "sleepy", 4, "Sleepy", 31.4, 30.0, fatal=False)
    assert rep.kind == "stuck" and rep.method == "blocked"
    assert (rep.file, rep.line) == (__file__, line)
    assert rep.error == (
        "ExecutorStuck: component 'sleepy' task 4 of topology 'topo': Sleepy.blocked has "
        "not returned for 31 s (topology.executor.stuck.secs: 30)"
    )
    lines = rep.text.splitlines()
    assert lines[0] == rep.error
    assert (
        lines[1]
        == f"  in Sleepy.blocked at {__file__}:{line}; it has not returned; the run goes on"
    )
    assert f'  File "{__file__}", line {line}, in blocked' in lines
    assert lines[-1] == rep.error  # the UI's lastError shows an entry's last line
    assert "bolt_executor" not in rep.text  # the engine's frames are left out
    again = pickle.loads(pickle.dumps(rep))  # a worker process's final report
    assert again.text == rep.text
    fatal = stuck_report(stack, "topo", "sleepy", 4, "Sleepy", 31.4, 30.0, fatal=True)
    assert "topology.fail.fast: the run stops" in fatal.text.splitlines()[1]


def test_monitor_tells_a_stuck_task_with_its_stack_the_first_time():
    stack = traceback.StackSummary.from_list(
        [frame(ENGINE + "bolt_executor.py", "_execute_batch"), frame("/me/t.py", "execute", 9)]
    )
    rep = stuck_report(stack, "topo", "sleepy", 4, "Sleepy", 40, 30, fatal=False)
    t = TaskStats(4, "sleepy", 0, "bolt", errors=1, last_errors=(rep.text,), stuck_seconds=40)
    told: dict[str, int] = {}
    lines = new_errors([t], told)
    assert "ExecutorStuck: component 'sleepy' task 4" in lines[0]
    assert "in Sleepy.execute at /me/t.py:9" in lines[0]
    assert '      File "/me/t.py", line 9, in execute' in lines
    assert new_errors([t], told) == []  # once
