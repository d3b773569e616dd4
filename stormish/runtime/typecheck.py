"""Typed streams in debug mode: emits checked against their stream's Schema.

Here, in the engine's package, so that an error's location is the user's emit, not this
check (stormish.runtime.error_report skips engine frames)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import TopologyError
from ..schema import Schema, _name


def checked_emits(obj: Any, component: str, schemas: Mapping[str, Schema]) -> None:
    """Wrap the emit methods the executor bound on `obj` with the schemas' checks."""
    for method in ("emit", "emit_many", "emit_direct"):
        fn = getattr(obj, method, None)
        if fn is not None:
            setattr(obj, method, _wrap(method, fn, component, schemas))


def _wrap(
    method: str, fn: Callable[..., Any], component: str, schemas: Mapping[str, Schema]
) -> Callable[..., Any]:
    def check(values: Sequence[Any], stream: str) -> None:
        schema = schemas.get(stream)
        if schema is None:
            return
        for name, v in zip(schema.fields, values, strict=False):
            t = schema.types[name]
            if not isinstance(v, t):
                raise TopologyError(
                    f"component {component!r} emitted on stream {stream!r} field {name!r} a "
                    f"{type(v).__name__} ({v!r:.60}); its schema wants {_name(t)}"
                )

    if method == "emit_many":

        def emit_many(rows: Any, stream: str = "default", *a: Any, **kw: Any) -> Any:
            rows = list(rows)
            for r in rows:
                check(r, stream)
            return fn(rows, stream, *a, **kw)

        return emit_many
    if method == "emit_direct":

        def emit_direct(task: int, values: Any, stream: str = "default", *a: Any, **kw: Any) -> Any:
            check(values, stream)
            return fn(task, values, stream, *a, **kw)

        return emit_direct

    def emit(values: Any, stream: str = "default", *a: Any, **kw: Any) -> Any:
        check(values, stream)
        return fn(values, stream, *a, **kw)

    return emit
