"""Acking's per-tuple steps, compiled where stormish._acking was built (a C compiler at
install), else None: every caller keeps its Python path, which does the same tuple for
tuple (tests/unit/test_fastack.py compares them on the same input).

- `TreeEmitter(py, own, arity, size, flush, only, shuffle, head, roots, announce,
  compact)`: a
  reliable spout's bound emit (emitters.SpoutCollector.bound_emit) for an emit with a
  message id; anything else calls `py`, the Python closure.
- `AnchoredEmitter(py, col, own, arity, size, flush, only, cache, fidx, rand)`: a
  BasicBolt's bound emit with acking on (emitters.BasicCollector.bound_emit), anchored
  to `col.current`; anything else calls `py`, the Python closure.
- `fold_runs(metas, acks, announced, done, start)`: ack_folder.fold_runs over
  `metas[start:]` up to the first meta that is not None or (int, int) pairs; returns
  that index, the Python loop takes the rest.
- `run_basic(values, metas, start, source, execute, col, anchored, pending, stop)`: a
  BasicBolt's per-tuple loop (execution/per_tuple.py) from row `start`: None when every
  row ran, the next row's index when a row's emits parked (`pending` not empty and
  `stop()`), or (index, tuple, exception) of the row whose execute raised, for the
  caller's failure path, which calls again from the next row.
- `expand_roots(metas, announce)`: ack_folder.expand_roots (root metas written out).
- `ack_run(values, start, cur, old, done)`: the acker's ACK_ACK loop (acker.py) up to
  the first message it leaves to Python; returns that index.
- `pop_many(head, roots)`: (entries, missing): `head.pop(root, None)` for each root, in
  order, and how many were missing (inflight.InFlight.pop_many's first pass).
- `RootTable(step)`: the in-flight map's newest bucket (inflight.py), a mapping whose
  ints at `step`s of a base live in an array (stormish/_roottable.h); its twin is a dict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_compiled: Any
try:
    from .. import _acking as _compiled
except ImportError:  # no compiler at install: the Python paths
    _compiled = None
# a module built before root metas (ack_folder.py), not rebuilt after a pull: its
# TreeEmitter takes one argument less; the Python paths run until it is rebuilt
if _compiled is not None and not hasattr(_compiled, "ROOT_METAS"):
    _compiled = None

COMPILED = _compiled is not None

TreeEmitter: Callable[..., Callable[..., None]] | None = None
AnchoredEmitter: Callable[..., Callable[..., None]] | None = None
fold_runs: Callable[[list, dict, int, Any, int], int] | None = None
run_basic: Callable[..., int | tuple[int, Any, Exception] | None] | None = None
pop_many: Callable[[Any, list], tuple[list, int]] | None = None
expand_roots: Callable[[list, int], list | None] | None = None
RootTable: Callable[..., Any] | None = None
ack_run: Callable[[list, int, dict, dict, dict], int] | None = None
if _compiled is not None:
    from ..tuple import TrackedTuple, Tuple

    # a module built from an older tree (not rebuilt after a pull) lacks what is new:
    # each piece is taken where it is there, and the Python paths run the rest
    TreeEmitter = getattr(_compiled, "TreeEmitter", None)
    fold_runs = getattr(_compiled, "fold_runs", None)
    pop_many = getattr(_compiled, "pop_many", None)
    expand_roots = getattr(_compiled, "expand_roots", None)
    ack_run = getattr(_compiled, "ack_run", None)
    RootTable = getattr(_compiled, "RootTable", None)
    try:
        _compiled.set_tuple_types(Tuple, TrackedTuple)
    except (AttributeError, TypeError):  # older, or the tuple classes changed shape
        pass
    else:
        # one built before it stopped where emits park takes two arguments less
        if hasattr(_compiled, "RUN_STOPS"):
            run_basic = getattr(_compiled, "run_basic", None)
        AnchoredEmitter = getattr(_compiled, "AnchoredEmitter", None)
