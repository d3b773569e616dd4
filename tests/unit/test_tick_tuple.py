"""`tup.is_tick` is a property: `if tup.is_tick:` is false for data (as a
method, the spelling a Python user writes first was always true), and the call
`tup.is_tick()` is an error whose report says what to write."""

from __future__ import annotations

import pytest

from stormish.runtime.error_report import ENGINE, IS_TICK_CALLED, report
from stormish.tuple import SYSTEM_COMPONENT, TICK_STREAM, Source, TrackedTuple, Tuple

DATA = Source("words", 1, "default", ["word"])
TICK = Source(SYSTEM_COMPONENT, -1, TICK_STREAM, [])


def test_a_data_tuple_is_not_a_tick():
    tup = Tuple(["cat"], DATA)
    assert tup.is_tick is False
    assert not tup.is_tick
    assert TrackedTuple(["cat"], DATA, ((1, 2),)).is_tick is False


def test_a_tick_tuple_is_a_tick():
    assert Tuple([], TICK).is_tick is True


def test_calling_it_is_an_error_not_a_silent_truth():
    with pytest.raises(TypeError):
        Tuple(["cat"], DATA).is_tick()  # type: ignore[operator]


class Counts:
    def execute(self, tup):
        if tup.is_tick():  # type: ignore[operator]  # Storm's isTick() spelling
            return


def test_the_report_of_the_call_says_it_is_a_property():
    engine: dict = {}
    src = (
        "def call(m, *a):\n    try:\n        m(*a)\n    except Exception as e:\n        return e\n"
    )
    exec(compile(src, ENGINE + "fake_executor.py", "exec"), engine)
    exc = engine["call"](Counts().execute, Tuple(["cat"], DATA))
    r = report(exc, "execute", "count", 1, "Counts")
    assert r.error == "TypeError: 'bool' object is not callable" + IS_TICK_CALLED
    assert "if tup.is_tick:" in r.text.splitlines()[0]


def test_other_bool_calls_get_no_hint():
    def execute(flag):
        flag()

    engine: dict = {}
    src = (
        "def call(m, *a):\n    try:\n        m(*a)\n    except Exception as e:\n        return e\n"
    )
    exec(compile(src, ENGINE + "fake_executor.py", "exec"), engine)
    r = report(engine["call"](execute, True), "execute", "c", 1, "C")
    assert r.error == "TypeError: 'bool' object is not callable"
