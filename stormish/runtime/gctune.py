"""The cyclic garbage collector's thresholds while a topology runs.

Why: a topology allocates tuples by the million and frees almost all of them by
reference counting; they form no cycles. Python's default first threshold (700
allocations) still runs a young-generation pass every few hundred tuples, and each
pass that promotes in-flight batches brings the next full collection, which walks the
whole heap (a spout holding a million pending rows walks them all). Measured: reliable
rows spout -> null bolt, 0.40 M rows/s with the default, 0.73-0.89 M rows/s with
50,000-200,000 (bench/README.md). `topology.worker.gc.threshold` sets it; 0 leaves the
interpreter's thresholds alone. In a worker process the setting simply stays; in the
embedded cluster (the user's own process) it holds while any topology runs and the
previous thresholds come back when the last one stops.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_holders = 0
_saved: tuple[int, int, int] | None = None


def hold(threshold: int) -> bool:
    """Raise the first threshold to `threshold` (never lower it). True when held: call
    `release()` once for each True."""
    global _holders, _saved
    if threshold <= 0:
        return False
    with _lock:
        if _holders == 0:
            _saved = gc.get_threshold()
        _holders += 1
        current = gc.get_threshold()
        if current[0] != 0 and current[0] < threshold:  # 0: the user disabled the GC
            gc.set_threshold(threshold, max(current[1], 20), max(current[2], 20))
        return True


def release() -> None:
    global _holders, _saved
    with _lock:
        if _holders == 0:
            return
        _holders -= 1
        if _holders == 0 and _saved is not None:
            gc.set_threshold(*_saved)
            _saved = None
