"""Acking's per-tuple steps, compiled where stormish._acking was built (a C compiler at
install), else None: every caller keeps its Python path, which does the same tuple for
tuple (tests/unit/test_fastack.py compares them on the same input).

- `TreeEmitter(py, own, arity, size, flush, only, shuffle, head, roots, announce)`: a
  reliable spout's bound emit (emitters.SpoutCollector.bound_emit) for an emit with a
  message id; anything else calls `py`, the Python closure.
- `fold_runs(metas, acks, announced, done, start)`: ack_folder.fold_runs over
  `metas[start:]` up to the first meta that is not None or (int, int) pairs; returns
  that index, the Python loop takes the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_compiled: Any
try:
    from .. import _acking as _compiled
except ImportError:  # no compiler at install: the Python paths
    _compiled = None

COMPILED = _compiled is not None

TreeEmitter: Callable[..., Callable[..., None]] | None = None
fold_runs: Callable[[list, dict, int, Any, int], int] | None = None
if _compiled is not None:
    TreeEmitter = _compiled.TreeEmitter
    fold_runs = _compiled.fold_runs
