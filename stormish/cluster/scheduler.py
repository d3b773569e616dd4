"""Which supervisor slot runs which worker of a topology. Pure: nimbus calls it with what
the supervisors last reported, and tests call it with whatever they like.

Storm's even scheduler spreads a topology's workers over the supervisors; so does this:
each worker goes to the live supervisor with the most free slots (ties by id, so the
answer is deterministic) among those holding the fewest of these workers, so two workers
of one topology share a host only when no other host has room.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def schedule(
    indices: Iterable[int], free: Mapping[str, Iterable[int]]
) -> dict[int, tuple[str, int]]:
    """Slots `(supervisor, port)` for worker `indices`, from `free` ports per supervisor.
    Returns only what fits: a worker left out waits for a slot to come free."""
    pool = {sid: sorted(ports) for sid, ports in free.items()}
    held = dict.fromkeys(pool, 0)
    placed: dict[int, tuple[str, int]] = {}
    for index in sorted(indices):
        candidates = [sid for sid, ports in pool.items() if ports]
        if not candidates:
            break
        sid = min(candidates, key=lambda s: (held[s], -len(pool[s]), s))
        held[sid] += 1
        placed[index] = (sid, pool[sid].pop(0))
    return placed


def free_slots(
    offered: Mapping[str, Iterable[int]], used: Iterable[tuple[str, int]]
) -> dict[str, list[int]]:
    """The ports each supervisor offers that no worker holds."""
    taken = set(used)
    return {sid: [p for p in ports if (sid, p) not in taken] for sid, ports in offered.items()}
