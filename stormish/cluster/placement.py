"""Which supervisor slot runs which worker of a topology. Pure: nimbus calls it with what
the supervisors last reported, and tests call it with whatever they like.

Storm's even scheduler spreads a topology's workers over the supervisors; so does this:
each worker goes to the live supervisor with the most free slots (ties by id, so the
answer is deterministic) among those holding the fewest of these workers, so two workers
of one topology share a host only when no other host has room.

A port is a host's, not a supervisor's: two supervisors on one host that offer the same
port (both left at the default 6700,6701, say) share it, so a worker holding it on one
makes it taken on the other, and one placing never gives it twice (`hosts`). A port its
supervisor reported failed (another program holds it) is not offered (`failed`). A host
is a supervisor's `--host`, the name peers reach its workers by: two workers advertising
one host and port could not be told apart by their peers either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def schedule(
    indices: Iterable[int],
    free: Mapping[str, Iterable[int]],
    hosts: Mapping[str, str] | None = None,
) -> dict[int, tuple[str, int]]:
    """Slots `(supervisor, port)` for worker `indices`, from `free` ports per supervisor;
    `hosts` (supervisor -> host): a port given to one supervisor is gone from the others
    on its host. Returns only what fits: a worker left out waits for a slot to come free."""
    pool = {sid: sorted(ports) for sid, ports in free.items()}
    held = dict.fromkeys(pool, 0)
    placed: dict[int, tuple[str, int]] = {}
    for index in sorted(indices):
        candidates = [sid for sid, ports in pool.items() if ports]
        if not candidates:
            break
        sid = min(candidates, key=lambda s: (held[s], -len(pool[s]), s))
        held[sid] += 1
        port = pool[sid].pop(0)
        placed[index] = (sid, port)
        if hosts is not None:
            for other, ports in pool.items():
                if other != sid and hosts.get(other) == hosts.get(sid) and port in ports:
                    ports.remove(port)
    return placed


def free_slots(
    offered: Mapping[str, Iterable[int]],
    used: Iterable[tuple[str, int]],
    hosts: Mapping[str, str] | None = None,
    failed: Mapping[str, Iterable[int]] | None = None,
) -> dict[str, list[int]]:
    """The ports each supervisor offers that no worker holds (on its host, with `hosts`)
    and that it did not report failed."""
    taken = set(used)
    bad = {(sid, p) for sid, ports in (failed or {}).items() for p in ports}
    if hosts is not None:
        on_host = {(hosts.get(sid), p) for sid, p in taken}
        taken |= {
            (sid, p) for sid, ps in offered.items() for p in ps if (hosts.get(sid), p) in on_host
        }
    return {
        sid: [p for p in ports if (sid, p) not in taken and (sid, p) not in bad]
        for sid, ports in offered.items()
    }


def shared_ports(
    offered: Mapping[str, Iterable[int]], hosts: Mapping[str, str]
) -> dict[tuple[str, int], list[str]]:
    """(host, port) -> the supervisors that offer it, where more than one does: they can
    run only one worker there at a time (nimbus warns; `schedule` gives it once)."""
    by: dict[tuple[str, int], list[str]] = {}
    for sid in sorted(offered):
        for p in offered[sid]:
            by.setdefault((hosts.get(sid, sid), p), []).append(sid)
    return {k: sids for k, sids in sorted(by.items()) if len(sids) > 1}
