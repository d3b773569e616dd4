"""The tuple a bolt receives.

A tuple's values are a Python tuple (or list) shared, not copied, inside a worker: read
them as immutable. Everything else a tuple knows (source component, task, stream and the
field names) is one `Source` record shared by every tuple of a batch, so making a tuple
costs one small object per value row: the per-tuple hot path allocates nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TICK_STREAM = "__tick"
SYSTEM_COMPONENT = "__system"


class Source:
    """Where a batch of tuples came from; one per (source task, stream) per receiver."""

    __slots__ = ("component", "task", "stream", "fields", "index")

    def __init__(self, component: str, task: int, stream: str, fields: Sequence[str]):
        self.component = component
        self.task = task
        self.stream = stream
        self.fields = tuple(fields)
        self.index = {f: i for i, f in enumerate(self.fields)}


class Tuple:
    """One tuple as a bolt sees it. `meta` carries the acking anchors (None when off)."""

    __slots__ = ("values", "source", "meta", "ack_val")

    def __init__(self, values: Sequence[Any], source: Source, meta: Any = None):
        self.values = values
        self.source = source
        self.meta = meta
        self.ack_val = 0

    def __getitem__(self, field: str | int) -> Any:
        if isinstance(field, int):
            return self.values[field]
        try:
            return self.values[self.source.index[field]]
        except KeyError:
            raise KeyError(
                f"stream {self.source.stream!r} of {self.source.component!r} has no field "
                f"{field!r}; its fields are {list(self.source.fields)}"
            ) from None

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):
        return iter(self.values)

    @property
    def fields(self) -> tuple[str, ...]:
        return self.source.fields

    @property
    def stream(self) -> str:
        return self.source.stream

    @property
    def source_component(self) -> str:
        return self.source.component

    @property
    def source_task(self) -> int:
        return self.source.task

    def get(self, field: str, default: Any = None) -> Any:
        i = self.source.index.get(field)
        return default if i is None else self.values[i]

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(self.source.fields, self.values, strict=False))

    def is_tick(self) -> bool:
        return self.source.stream == TICK_STREAM

    def __repr__(self) -> str:
        s = self.source
        return f"Tuple({s.component}:{s.task}/{s.stream} {tuple(self.values)!r})"
