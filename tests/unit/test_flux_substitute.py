"""Flux's substitution (stormish.flux.substitute): pure text in, text out."""

from __future__ import annotations

import pytest

from stormish.errors import TopologyFileError
from stormish.flux.substitute import read_properties, substitute

PROPS = {"a": "1", "l": '["x", "y z"]', "name": "t"}


def test_keys_lists_and_environment(monkeypatch) -> None:
    monkeypatch.setenv("FLUX_X", "env")
    text = "name: ${name}\nv: [${a}, ${a}]\nfirst: ${l[0]}\nsecond: ${l[1]}\ne: ${ENV-FLUX_X}"
    out, missing = substitute(text, PROPS, True, "f.yaml")
    assert out == "name: t\nv: [1, 1]\nfirst: x\nsecond: y z\ne: env"
    assert missing == []


def test_missing_values_stay_and_are_named(monkeypatch) -> None:
    monkeypatch.setenv("FLUX_X", "env")
    out, missing = substitute("a: ${nope}\nb: ${ENV-FLUX_X}", PROPS, False, "f.yaml")
    assert out == "a: ${nope}\nb: ${ENV-FLUX_X}"  # --env-filter off: env not read
    assert missing == ["nope", "ENV-FLUX_X"]


def test_lines_are_kept() -> None:
    text = "a: 1\n\n# ${a}\nb: ${a}\n"
    assert substitute(text, PROPS, False, "f")[0].count("\n") == text.count("\n")


def test_list_index_out_of_range() -> None:
    with pytest.raises(TopologyFileError, match=r"f.yaml: \$\{l\[5\]\}: .* 2 element"):
        substitute("x: ${l[5]}", PROPS, False, "f.yaml")


def test_properties_file(tmp_path) -> None:
    p = tmp_path / "p.properties"
    p.write_text("# comment\n! also\na=1\nb: two words\nc   3\nlong = x\\\n  y\nempty\n")
    assert read_properties(p) == {"a": "1", "b": "two words", "c": "3", "long": "xy", "empty": ""}
    with pytest.raises(TopologyFileError, match="does not exist"):
        read_properties(tmp_path / "none")
