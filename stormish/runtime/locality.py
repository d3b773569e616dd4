"""Locality scopes of a shuffle (Storm 2's LoadAwareShuffleGrouping), as pure functions.

Each target task of a shuffle has a scope as seen from the emitting task: WORKER_LOCAL
(same worker process), HOST_LOCAL (another worker on the same host), EVERYTHING. A
scope's targets are those of that scope and every narrower one. A shuffle sends only to
the targets of its current scope; on each load refresh it widens one scope when the
average load of those targets is above the higher bound (`topology.localityaware.
higher.bound`), and narrows one scope when the narrower scope's average load is below
the lower bound (`topology.localityaware.lower.bound`). The gap between the bounds is
the hysteresis that keeps a shuffle from flapping between scopes.

Beyond Storm, a spill that finds no room ends (`no_room`): stormish's remote load is
only 1 under backpressure and 0 otherwise, so a widened shuffle cannot see that the other
worker is as busy until it has flooded it; when the added targets come under
backpressure it narrows and stays narrow for a hold-off that doubles with each such
spill (Shuffle). Without it a CPU-bound word count whose first edge is a shuffle sent
more sentences across than round-robin did and stalled on the other worker's
backpressure (bench/README.md).

Unlike Storm, scopes that hold no target of their own are passed over (a widening goes
to the next scope that adds targets): stormish knows no racks, and a remote task whose
host is unknown is EVERYTHING, so a worker-local shuffle with remote targets widens in
one refresh, not two. Loads are 0..1 per target (above 1 counts as 1).
"""

from __future__ import annotations

from collections.abc import Sequence

WORKER_LOCAL, HOST_LOCAL, EVERYTHING = 0, 1, 2
SCOPE_NAMES = ("WORKER_LOCAL", "HOST_LOCAL", "EVERYTHING")


def scope_of(target: int, local: set[int], hosts: dict[int, str] | None, here: str | None) -> int:
    """A target task's scope from an emitter in `local` (its worker's tasks) on host
    `here`; `hosts` (task -> host) when the assignment tells it, else remote is
    EVERYTHING."""
    if target in local:
        return WORKER_LOCAL
    if hosts is not None and here is not None and hosts.get(target) == here:
        return HOST_LOCAL
    return EVERYTHING


def initial_scope(scopes: Sequence[int]) -> int:
    """The narrowest scope that has a target (Storm starts at WORKER_LOCAL and widens
    past empty scopes)."""
    return min(scopes, default=EVERYTHING)


def _average(scopes: Sequence[int], loads: Sequence[float], scope: int) -> float:
    total, n = 0.0, 0
    for s, x in zip(scopes, loads, strict=True):
        if s <= scope:
            total += min(1.0, x)
            n += 1
    return total / n


def next_scope(
    scope: int, scopes: Sequence[int], loads: Sequence[float], higher: float, lower: float
) -> int:
    """The scope after one load refresh, from `scope` (one of `scopes`, the targets')."""
    present = sorted(set(scopes))
    k = present.index(scope) if scope in present else 0
    if _average(scopes, loads, present[k]) > higher:
        return present[min(k + 1, len(present) - 1)]
    if k > 0 and _average(scopes, loads, present[k - 1]) < lower:
        return present[k - 1]
    return present[k]


def no_room(scope: int, scopes: Sequence[int], loads: Sequence[float], higher: float) -> bool:
    """A widened shuffle found no room: the targets its scope adds to the next narrower
    one average above the higher bound (a remote task reads 1 only under backpressure)."""
    present = sorted(set(scopes))
    k = present.index(scope) if scope in present else 0
    if k == 0:
        return False
    added = [min(1.0, x) for s, x in zip(scopes, loads, strict=True) if s == present[k]]
    return sum(added) / len(added) > higher


def ring(scopes: Sequence[int], loads: Sequence[float] | None, scope: int) -> list[int]:
    """The rotation of target indices in `scope`: each target gets slots by its free
    capacity (load in tenths: 11 slots idle, 1 full), interleaved so that consecutive
    picks spread; with equal loads (or none) it is plain round-robin over the scope."""
    idx = [i for i, s in enumerate(scopes) if s <= scope]
    if loads is None:
        return idx
    weights = [max(1, 11 - min(10, int(loads[i] * 10))) for i in idx]
    top = max(weights)
    if min(weights) == top:
        return idx
    return [i for step in range(top) for i, w in zip(idx, weights, strict=True) if step < w]
