"""Flux's property substitution, on the text before it is parsed (Storm's FluxParser):
`${key}` from the `--filter` properties file, `${ENV-NAME}` from the environment with
`--env-filter`, `${key[i]}` the i-th element of a list-valued property (`["a", "b"]`).

Substitution is line by line, so a YAML error's line number is the file's. Storm replaces
the first `${...}` of a line; this replaces each of them. One with no value is left as it
is, and named in `missing` (Storm logs a warning and goes on)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from ..errors import TopologyFileError

_VAR = re.compile(r"\$\{(?P<var>[^}]+)\}")
_INDEX = re.compile(r"(?P<list>.+)\[(?P<index>\d+)\]$")


def read_properties(path: str | Path) -> dict[str, str]:
    """A Java properties file, as Flux reads `--filter`: `key=value`, `key: value` or
    `key value` per line, `#`/`!` comments, a trailing backslash continues a line."""
    p = Path(path)
    if not p.is_file():
        raise TopologyFileError(f"properties file {str(p)!r} (--filter) does not exist")
    out: dict[str, str] = {}
    pending = ""
    for raw in p.read_text(encoding="utf-8").splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
        else:
            out[line] = ""
    return out


def substitute(text: str, props: Mapping[str, str], env: bool, where: str) -> tuple[str, list[str]]:
    """`text` with its `${...}` replaced; and the names that had no value."""
    missing: list[str] = []

    def one(m: re.Match) -> str:
        value = _value(m.group("var"), props, env, where)
        if value is None:
            missing.append(m.group("var"))
            return m.group(0)
        return value

    return "\n".join(_VAR.sub(one, line) for line in text.split("\n")), missing


def _value(var: str, props: Mapping[str, str], env: bool, where: str) -> str | None:
    m = _INDEX.match(var)
    if m and m.group("list") in props:
        return _element(props[m.group("list")], int(m.group("index")), var, where)
    if var.startswith("ENV-"):
        return os.environ.get(var[4:]) if env else None
    return props.get(var)


def _element(value: str, index: int, var: str, where: str) -> str:
    """The i-th element of `["a", "b"]`, its quotes taken off (Storm's
    parseListAndExtractElem)."""
    items = value.strip()[1:-1].split(",")
    if index >= len(items):
        raise TopologyFileError(
            f"{where}: ${{{var}}}: the property holds {len(items)} element(s), no [{index}]"
        )
    item = items[index].strip()
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "\"'":
        item = item[1:-1]
    return item
