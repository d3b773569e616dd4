# The compiled twin of acking's per-tuple steps (stormish/_acking.c); optional.
from typing import Any

def fold_runs(
    metas: list[Any], acks: dict[int, int], announced: int, done: list[int] | None, start: int, /
) -> int: ...

class TreeEmitter:
    def __init__(
        self,
        py: Any,
        own: str,
        arity: int,
        size: int,
        flush: Any,
        only: list[Any] | None,
        shuffle: Any,
        head: dict[int, Any],
        roots: Any,
        announce: int,
        /,
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> None: ...

def set_tuple_types(plain: type, tracked: type, /) -> None: ...
def run_basic(
    values: list[Any],
    metas: list[Any] | None,
    start: int,
    source: Any,
    execute: Any,
    col: Any,
    anchored: list[Any],
    pending: Any = None,
    stop: Any = None,
    /,
) -> int | tuple[int, Any, Exception] | None: ...
def pop_many(head: dict[int, Any], roots: list[int], /) -> tuple[list[Any], int]: ...

class AnchoredEmitter:
    def __init__(
        self,
        py: Any,
        col: Any,
        own: str,
        arity: int,
        size: int,
        flush: Any,
        only: list[Any] | None,
        cache: dict[Any, Any] | None,
        fidx: int,
        rand: Any,
        /,
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> None: ...
