"""Typed streams: a stream's fields with their types, checked on emit when asked.

```python
class Split(BasicBolt):
    outputs = Schema(word=str, count=int)                 # the default stream
    streams = {"long": Schema(word=str, length=int)}      # or per stream
```

A dataclass type works as a schema too (its fields, in order, with their annotations).
The field names are the stream's fields as with a list; the types are checked on every
emit only in debug mode (`topology.typecheck: true` or `topology.debug: true`, per
component or for all), with an error naming the component, stream, field, the expected
type and the value: a check per value costs more than the emit, so it is for
development and tests, not production.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from .errors import TopologyError


class Schema:
    """Field names, in order, and the type each value must have (`object`: any; a
    tuple of types: any of them; `None` allowed with `Optional[...]` / `X | None`)."""

    __slots__ = ("fields", "types")

    def __init__(self, **fields: Any):
        if not fields:
            raise TopologyError("a Schema needs at least one field: Schema(word=str)")
        self.fields = tuple(fields)
        self.types = {k: _checkable(k, v) for k, v in fields.items()}

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={_name(t)}" for k, t in self.types.items())
        return f"Schema({inner})"


def _checkable(field: str, t: Any) -> Any:
    """A type isinstance can check: a class, a tuple of classes, or a union of them."""
    if t is None or t is type(None):
        return type(None)
    if t is Any:
        return object
    args = typing.get_args(t)
    origin = typing.get_origin(t)
    if origin is typing.Union or origin is types.UnionType:
        return tuple(_checkable(field, a) for a in args)
    if origin is not None:  # list[int], dict[str, int]: the container's class is checked
        return origin
    if isinstance(t, type) or (isinstance(t, tuple) and all(isinstance(x, type) for x in t)):
        return t
    raise TopologyError(f"Schema field {field!r}: {t!r} is not a type")


def _name(t: Any) -> str:
    if isinstance(t, tuple):
        return " | ".join(_name(x) for x in t)
    return getattr(t, "__name__", repr(t))


def as_schema(spec: Any) -> Schema | None:
    """A Schema, or one made of a dataclass type; None for a plain list of fields."""
    if isinstance(spec, Schema):
        return spec
    if isinstance(spec, type) and dataclasses.is_dataclass(spec):
        hints = typing.get_type_hints(spec)
        return Schema(**{f.name: hints.get(f.name, object) for f in dataclasses.fields(spec)})
    return None


def field_names(spec: Any) -> tuple[str, ...]:
    if isinstance(spec, str):  # outputs = "word": one field was meant, not four letters
        raise TopologyError(
            f"fields are a list of names, got the string {spec!r}: write [{spec!r}]"
        )
    s = as_schema(spec)
    return s.fields if s is not None else tuple(spec)
