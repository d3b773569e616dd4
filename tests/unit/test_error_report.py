"""Error reports: the method that raised and the user's line read from the traceback, and
the terminal's closing lines. The engine is simulated by code compiled under a file name
inside stormish/runtime, which is all the report looks at."""

from __future__ import annotations

import json
import pickle
from traceback import FrameSummary

from stormish.errors import TopologyError
from stormish.runtime.error_report import (
    ENGINE,
    LIBRARY,
    called_into,
    headline,
    new_errors,
    report,
    summary,
    user_frame,
)
from stormish.runtime.stats import TaskStats

ENGINE_SRC = """
def call(method, *args):
    try:
        method(*args)
    except Exception as exc:
        return exc

def emit(values):
    raise TopologyError(f"component 'c' emitted {len(values)} values on stream 'default'")
"""
engine: dict = {"TopologyError": TopologyError}
exec(compile(ENGINE_SRC, ENGINE + "fake_executor.py", "exec"), engine)


def frame(filename: str, name: str, line: int = 1) -> FrameSummary:
    return FrameSummary(filename, line, name, lookup_line=False)


class Parse:
    def execute(self, n):
        check(n)

    def execute_json(self, text):
        return json.loads(text)  # the user's line, below it only the library's

    def execute_emit(self, values):
        engine["emit"](values)  # the user's emit, below it only the engine's

    def next_tuple(self):
        raise ValueError("no more")


def check(n):
    raise ValueError(f"bad row {n}")  # LINE_CHECK


def line_of(marker: str) -> int:
    with open(__file__) as fh:
        return next(i for i, text in enumerate(fh, 1) if marker in text and "def " not in text)


def test_the_method_is_the_first_frame_the_engine_called_into():
    frames = [
        frame("/usr/lib/python3.11/threading.py", "run"),
        frame(ENGINE + "executor.py", "_main"),
        frame(ENGINE + "bolt_executor.py", "_execute_batch"),
        frame("/home/me/topo.py", "execute"),
        frame("/home/me/helpers.py", "check"),
    ]
    assert called_into(frames) == 3
    assert called_into(frames[3:]) is None  # never passed through the engine


def test_a_reraised_error_still_finds_the_method_past_the_engine_frames():
    frames = [
        frame(ENGINE + "executor.py", "_main"),
        frame(ENGINE + "bolt_executor.py", "_on_error"),
        frame(ENGINE + "executor.py", "_uncaught"),
        frame(ENGINE + "bolt_executor.py", "_execute_batch"),
        frame("/home/me/topo.py", "execute"),
        frame(ENGINE + "collector.py", "emit"),
    ]
    assert frames[called_into(frames)].name == "execute"
    assert user_frame(frames).name == "execute"  # not the collector's frame


def test_the_users_line_skips_the_library_and_the_engine():
    lib = LIBRARY[0]
    frames = [
        frame("/home/me/topo.py", "execute", 10),
        frame("/home/me/helpers.py", "parse", 20),
        frame(lib + "json/decoder.py", "decode", 30),
        frame(ENGINE + "collector.py", "emit", 40),
    ]
    assert (user_frame(frames).filename, user_frame(frames).lineno) == ("/home/me/helpers.py", 20)
    only_lib = [frame(lib + "json/decoder.py", "decode", 30), frame("<frozen x>", "f", 2)]
    assert user_frame(only_lib).lineno == 2  # nothing of the user's: outside the engine
    assert user_frame([frame(ENGINE + "x.py", "f", 5)]).lineno == 5
    assert user_frame([]) is None


def test_the_users_line_skips_stormish_outside_the_runtime_too():
    """An editable install (the README's) is in no library path: a KeyError raised in
    stormish/tuple.py was placed there, not in the user's execute (first-hour walk)."""
    from stormish.runtime.error_report import PACKAGE

    frames = [
        frame(ENGINE + "execution/per_tuple.py", "run", 5),
        frame("/home/me/topo.py", "execute", 4),
        frame(PACKAGE + "tuple.py", "__getitem__", 141),
    ]
    assert (user_frame(frames).filename, user_frame(frames).lineno) == ("/home/me/topo.py", 4)


def test_report_of_an_execute_error_names_method_file_line_and_trims_the_engine():
    exc = engine["call"](Parse().execute, 50)
    r = report(exc, "execute", "parse", 3, "Parse")
    assert r.error == "ValueError: bad row 50"
    assert (r.method, r.file, r.line) == ("execute", __file__, line_of("LINE_CHECK"))
    assert r.headline == f"ValueError: bad row 50 (in Parse.execute at {__file__}:{r.line})"
    lines = r.text.splitlines()
    assert lines[0] == "ValueError: bad row 50"
    assert lines[1] == f"  in Parse.execute at {__file__}:{r.line}; the tuple failed"
    assert lines[2] == "Traceback (most recent call last):"
    assert "fake_executor.py" not in r.text  # the engine's frames are left out
    assert "in execute\n    check(n)" in r.text and "in check" in r.text


def test_a_library_error_is_placed_at_the_users_call():
    r = report(engine["call"](Parse().execute_json, "{"), "execute", "p", 1, "Parse")
    assert r.method == "execute_json" and r.line == line_of("the user's line, below it only")
    assert "json" in r.trace  # the whole traceback is still there


def test_a_topology_error_from_emit_is_placed_at_the_users_emit():
    r = report(engine["call"](Parse().execute_emit, [1, 2]), "fatal", "p", 1, "Parse")
    assert r.method == "execute_emit" and r.line == line_of("the user's emit, below it")
    assert r.text.splitlines()[1].endswith("; the task stopped")


def test_a_reported_error_takes_its_method_from_where_it_was_reported():
    stack = [
        frame(ENGINE + "bolt_executor.py", "_execute_batch"),
        frame("/home/me/topo.py", "execute", 12),
        frame(ENGINE + "executor.py", "report_error"),
    ]
    never_raised = ValueError("odd row")
    r = report(never_raised, "reported", "p", 1, "Parse", stack)
    assert (r.method, r.file, r.line) == ("execute", "/home/me/topo.py", 12)
    try:
        check(7)
    except ValueError as e:
        caught_by_user = e  # its traceback starts in the user's code: no engine frame
    r = report(caught_by_user, "reported", "p", 1, "Parse", stack)
    assert r.method == "execute" and r.line == line_of("LINE_CHECK")


def test_an_error_without_user_frames_still_reports():
    r = report(engine["call"](Parse().next_tuple), "fatal", "s", 1, "Spout")
    assert r.method == "next_tuple"
    r = report(RuntimeError("engine bug"), "fatal", "s", 1, "Spout")
    assert r.method is None and r.where == "an unknown place" and r.trace.endswith("engine bug")


def test_a_report_pickles_as_text():
    r = report(engine["call"](Parse().execute, 1), "execute", "parse", 3, "Parse")
    back = pickle.loads(pickle.dumps(r))
    assert back.text == r.text and back.captured is None


def test_a_long_traceback_keeps_its_innermost_end():
    def long(n):
        raise ValueError("x" * n + " end")

    r = report(engine["call"](long, 5000), "execute", "p", 1, "P")
    assert r.trace.startswith("...\n") and r.trace.endswith("x end")
    assert len(r.trace) == 4 + 4000


def task(task: int, component: str, worker: int, errors: int, last: tuple = ()) -> TaskStats:
    return TaskStats(task, component, worker, "bolt", errors=errors, last_errors=last)


ENTRY = "ValueError: bad row 50\n  in Parse.execute at /t.py:6; the tuple failed\nTraceback..."


def test_headline_joins_the_error_and_where():
    assert headline(ENTRY) == (
        "ValueError: bad row 50 (in Parse.execute at /t.py:6; the tuple failed)"
    )
    assert headline("ValueError: old style") == "ValueError: old style"


def test_summary_counts_what_the_terminal_did_not_show_per_component_and_worker():
    tasks = [
        task(1, "parse", 0, 200_000, (ENTRY,)),
        task(2, "parse", 0, 47_998, (ENTRY,)),
        task(3, "parse", 1, 2, (ENTRY,)),  # both shown in full by worker 1
        task(4, "quiet", 0, 0),
        task(5, "one", 1, 6, ("KeyError: 'x'",)),
    ]
    assert summary(tasks, 5) == [
        "component 'one': 1 more error like KeyError: 'x'",
        "component 'parse': 247,993 more errors like "
        "ValueError: bad row 50 (in Parse.execute at /t.py:6; the tuple failed)",
    ]
    assert summary(tasks[2:4], 5) == []  # all shown already
    assert summary(tasks[4:], 0) == ["component 'one': 6 errors, the last: KeyError: 'x'"]


def test_new_errors_tell_each_growth_once_with_the_traceback_the_first_time():
    told: dict[str, int] = {}
    first = new_errors([task(1, "parse", 0, 3, (ENTRY,))], told)
    assert first[0] == (
        "  component 'parse': 3 new (3 in all), the last: "
        "ValueError: bad row 50 (in Parse.execute at /t.py:6; the tuple failed)"
    )
    assert first[1:] == ["    Traceback..."]
    assert new_errors([task(1, "parse", 0, 3, (ENTRY,))], told) == []
    again = new_errors([task(1, "parse", 0, 10, (ENTRY,))], told)
    assert len(again) == 1 and again[0].startswith("  component 'parse': 7 new (10 in all)")


def test_an_engine_failure_names_the_thread_and_where_its_cause_was_raised():
    from stormish.runtime.error_report import engine_failure

    def engine_step():
        raise RuntimeError("engine bug")  # LINE_ENGINE_BUG

    try:
        engine_step()
    except RuntimeError as e:
        cause = e
    r = report(engine_failure("the worker's timer thread", cause), "fatal", "s", 1, "Spout")
    assert r.error == "WorkerError: the worker's timer thread failed: RuntimeError: engine bug"
    assert r.file is not None and r.file.endswith("test_error_report.py")
    assert r.line == line_of("LINE_ENGINE_BUG") and "engine bug" in r.trace
