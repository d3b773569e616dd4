"""Reads back what the stateful word count's processes recorded (`state_parts.Audit`) and
replays the checkpoint protocol over it: which execution of which word id ended in the
committed state, and in which transaction. A word id committed twice is a duplicate;
`explain` says how each came about (its executions, their trees, and the spout's fails).

Records, one a line, each `pid time kind ...`:
- `x task id root`: a counter task executed word id `id` of the tree `root`;
- `P task txid`, `C task txid`: it prepared, committed transaction `txid`;
- `R task`: it rolled back (a ROLLBACK, or an INITSTATE that found it initialised);
- `I task`: it initialised its state (a fresh process);
- `a id`, `f id reason`: the spout's ack and fail of id.
"""

from __future__ import annotations

import glob
import os
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Execution:
    pid: int
    time: float
    task: int
    id: int
    root: int
    fate: str = "pending"  # committed TXID, rolled back, lost (process died)


@dataclass
class _Store:
    committed: list[Execution] = field(default_factory=list)
    prepared: tuple[int, list[Execution]] | None = None


@dataclass
class Audit:
    executions: list[Execution]
    committed: dict[int, list[Execution]]  # word id -> its executions in committed state
    spout: dict[int, list[tuple[float, str]]]  # word id -> (time, "ack" or the fail reason)
    steps: list[tuple[float, int, int, str, int | None]]  # (time, pid, task, kind, txid)

    def duplicates(self) -> dict[int, list[Execution]]:
        return {i: ex for i, ex in self.committed.items() if len(ex) > 1}

    def explain(self, i: int, since: float, per_tree: int = 1) -> str:
        """Word id `i`'s story, times in seconds from `since`."""
        lines = [f"word id {i} (tree {i // per_tree}):"]
        for e in sorted((e for e in self.executions if e.id == i), key=lambda e: e.time):
            lines.append(
                f"  {e.time - since:8.3f} executed by task {e.task} pid {e.pid} root "
                f"{e.root:x}: {e.fate}"
            )
        for t, what in self.spout.get(i // per_tree, []):
            lines.append(f"  {t - since:8.3f} spout: {what}")
        return "\n".join(lines)


def read(directory: str) -> Audit:
    rows: list[list[str]] = []
    for path in glob.glob(os.path.join(directory, "*.log")):
        with open(path) as fh:
            rows.extend(ln.split() for ln in fh if ln.endswith("\n"))
    # one process's lines are in its order; processes interleave by time
    rows.sort(key=lambda r: float(r[1]))
    stores: dict[int, _Store] = defaultdict(_Store)
    memory: dict[tuple[int, int], list[Execution]] = defaultdict(list)  # (pid, task): since P
    held: dict[tuple[int, int], tuple[int, list[Execution]] | None] = {}
    executions: list[Execution] = []
    spout: dict[int, list[tuple[float, str]]] = defaultdict(list)
    steps: list[tuple[float, int, int, str, int | None]] = []
    for r in rows:
        pid, t, kind = int(r[0]), float(r[1]), r[2]
        if kind == "a":
            spout[int(r[3])].append((t, "ack"))
            continue
        if kind == "f":
            spout[int(r[3])].append((t, "fail " + r[4]))
            continue
        task = int(r[3])
        key, store = (pid, task), stores[task]
        if kind == "x":
            e = Execution(pid, t, task, int(r[4]), int(r[5]))
            executions.append(e)
            memory[key].append(e)
            continue
        txid = int(r[4]) if kind in "PC" else None
        steps.append((t, pid, task, kind, txid))
        if kind == "P":
            assert txid is not None
            mine = held.get(key)
            batch = (mine[1] if mine else []) + memory.pop(key, [])
            held[key] = (txid, batch)
            store.prepared = (txid, batch)
        elif kind == "C":
            mine = held.get(key)
            if store.prepared is not None and store.prepared[0] == txid:
                for e in store.prepared[1]:
                    e.fate = f"committed {txid}" + ("" if mine else " (rolled forward)")
                store.committed.extend(store.prepared[1])
                store.prepared = None
            held[key] = None
        elif kind == "R":
            for e in memory.pop(key, []):
                e.fate = "rolled back"
            if store.prepared is not None:
                for e in store.prepared[1]:
                    e.fate = "rolled back (prepared)"
            store.prepared = None
            held[key] = None
    for e in executions:
        if e.fate == "pending":
            e.fate = "never committed"
    committed: dict[int, list[Execution]] = defaultdict(list)
    for store in stores.values():
        for e in store.committed:
            committed[e.id].append(e)
    return Audit(executions, dict(committed), dict(spout), steps)


def causes(a: Audit, per_tree: int = 1) -> dict[str, int]:
    """Each duplicated word id's first committed execution, classified by what became of
    the other words of its tree copy (the same root) and what the spout heard:
    - `split`: other words of the same tree copy were rolled back or lost, so the tree
      failed and was replayed while this word's effect stayed committed;
    - `waited`: executed by a restarted task at its INITSTATE (it waited for it);
    - `acks lost`: every word of the copy committed, yet the tree failed (its acks, or
      its acker, were lost)."""
    by_root: dict[int, list[Execution]] = defaultdict(list)
    for e in a.executions:
        by_root[e.root].append(e)
    inits = defaultdict(list)
    for t, pid, task, kind, _ in a.steps:
        if kind == "I":
            inits[(pid, task)].append(t)
    out: dict[str, int] = defaultdict(int)
    for ex in a.duplicates().values():
        first = min(ex, key=lambda e: e.time)
        fates = {e.fate.split(" (")[0] for e in by_root[first.root]}
        committed = {f for f in fates if f.startswith("committed")}
        tags = []
        if fates - committed:
            tags.append("split:" + "+".join(sorted(fates - committed)))
        if len(committed) > 1:
            tags.append("straddles " + "+".join(sorted(committed)))
        if any(0 <= first.time - t < 0.05 for t in inits.get((first.pid, first.task), [])):
            tags.append("waited")
        if not tags:
            tags.append("acks lost")
        tree = first.id // per_tree
        after = [w for t, w in a.spout.get(tree, []) if t > first.time]
        tags.append("then " + (after[0] if after else "nothing"))
        out[", ".join(tags)] += 1
    return dict(out)
