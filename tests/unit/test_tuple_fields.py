"""Reading a tuple's values by field name and by position (stormish.tuple)."""

from __future__ import annotations

import pytest

from stormish.tuple import Source, TrackedTuple, Tuple

SRC = Source("spout", 1, "default", ("word", "count"))


@pytest.mark.parametrize("cls", [Tuple, TrackedTuple])
def test_a_field_name_a_position_and_a_negative_position(cls):
    t = cls(("cow", 3), SRC) if cls is Tuple else cls(("cow", 3), SRC, ())
    assert (t["word"], t["count"]) == ("cow", 3)
    assert (t[0], t[1], t[-1], t[-2]) == ("cow", 3, 3, "cow")
    assert t.get("count") == 3 and t.get("nope", 7) == 7


def test_a_position_past_the_fields_reads_the_values_and_an_unknown_name_says_why():
    t = Tuple(("cow", 3, "extra"), SRC)  # more values than declared fields
    assert t[2] == "extra" and t[-3] == "cow"
    with pytest.raises(IndexError):
        t[3]
    with pytest.raises(KeyError, match=r"no field 'wrod'; its fields are \['word', 'count'\]"):
        t["wrod"]
