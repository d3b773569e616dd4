"""Acking's compiled steps in isolation (issue 29, part 5): what a reliable tuple costs
from the spout's emit to the spout's pop of its completed tree, without the engine.

The steps a reliable const spout -> BasicBolt null bolt takes per tuple, in one thread,
20,000 trees in flight (the benchmark's `max.spout.pending`):
  emit  the user's loop (`seq += 1; emit((1,), msg_id=seq)`) into `TreeEmitter`
  run   the bolt's per-tuple loop (`run_basic`, a null execute)
  fold  the batch's ack fold (`fold_runs`: every tree complete, its root to `done`)
  pop   the spout's pop of the completed roots from its in-flight map (`pop_many`)
  free  dropping the delivered batches (rows, metas)
and the same with acking off (`run` of untracked rows; `emit` is the loop into a list).
Then the acker's ACK_ACK loop on a word count's messages (each tree a sentence: the
splitter's announced ack and the counter's ack of the same edges, in either order),
compiled (`fastack.ack_run`) and in Python.
`tuples` writes each meta as ((root, announcement),), `roots` as the root alone (root
metas, runtime/ack_folder.py), both with a dict for the spout's in-flight head; `table`
is `roots` with the head a RootTable (runtime/inflight.py), as a spout has it now.
Interleaved rounds; GC off, as a worker's raised threshold nearly is. Needs
stormish._acking (a C compiler at install).

Run: python bench/acking_steps.py [--tuples N] [--rounds R]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections import Counter
from typing import Any

from stormish.runtime import fastack
from stormish.tuple import Source

ANN = 1 << 64  # the announcement of spout task 1
IN_FLIGHT = 20_000
BATCH = 512


class Outbox(list):
    __slots__ = ("metas",)


class Col:
    current = None


def steps(n: int, mode: str) -> dict[str, float]:
    """ns a tuple per step, for `mode` tuples / roots / off."""
    if fastack.TreeEmitter is None or fastack.run_basic is None:
        raise SystemExit("stormish._acking is not built: nothing to measure")
    # `table`: root metas and the in-flight head a RootTable (inflight.py), as a spout
    # has it where stormish._acking is built; the other modes keep a dict head
    head: Any = fastack.RootTable(1) if mode == "table" else {}
    roots = iter(range(1 << 58, 1 << 59))
    ob = Outbox()
    ob.metas = []
    batches: list[tuple[list, list]] = []

    def flush(o: Outbox) -> None:
        batches.append((o[:], o.metas[:]))
        o.clear()
        o.metas.clear()

    def slow(*a: object, **k: object) -> None:
        raise RuntimeError("the compiled emit declined a plain call")

    emit = fastack.TreeEmitter(
        slow, "default", 1, BATCH, flush, ob, None, head, roots, ANN, mode in ("roots", "table")
    )
    src = Source("spout", 1, "default", ("v",))
    col = Col()

    def execute(t: object) -> None:
        pass

    t_ns: Counter = Counter()
    seq = 0
    clock = time.perf_counter_ns
    calls = IN_FLIGHT // 100
    for _ in range(n // IN_FLIGHT):
        t0 = clock()
        if mode == "off":
            append = ob.append
            for _ in range(calls):
                for _ in range(100):
                    append((1,))
                    if len(ob) >= BATCH:
                        flush(ob)
        else:
            for _ in range(calls):
                for _ in range(100):
                    seq += 1
                    emit((1,), msg_id=seq)
        t_ns["emit"] += clock() - t0
        for rows, metas in batches:
            a = clock()
            if mode == "off":
                fastack.run_basic(rows, None, 0, src, execute, None, [])
                t_ns["run"] += clock() - a
                continue
            fastack.run_basic(rows, metas, 0, src, execute, col, [])
            b = clock()
            t_ns["run"] += b - a
            done: list[int] = []
            fastack.fold_runs(metas, {}, ANN, done, 0)
            c = clock()
            t_ns["fold"] += c - b
            fastack.pop_many(head, done)
            t_ns["pop"] += clock() - c
        a = clock()
        batches.clear()
        t_ns["free"] += clock() - a
    return {k: v / n for k, v in t_ns.items()}


def _teller(told: list) -> Any:
    def emit(task: int, values: tuple, stream: str) -> None:
        told.append(values)

    return emit


def acker_ns(compiled: bool, order: str, trees: int = 512) -> float:
    """ns a message of the acker's ACK_ACK loop, best of 20 batches of 2 x `trees`."""
    import random

    from stormish.runtime import acker
    from stormish.runtime.plan import ACK_ACK

    saved = acker._c_ack_run
    if not compiled:
        acker._c_ack_run = None
    try:
        best = float("inf")
        rnd = random.Random(1)
        for _ in range(20):
            bolt = acker.AckerBolt()
            bolt.prepare({}, None)
            roots = [rnd.getrandbits(60) for _ in range(trees)]
            xs = [rnd.getrandbits(63) for _ in roots]
            announced = [(r, ANN ^ x) for r, x in zip(roots, xs, strict=True)]
            plain = list(zip(roots, xs, strict=True))
            first, second = (announced, plain) if order == "announced first" else (plain, announced)
            told: list = []
            emit = _teller(told)
            t0 = time.perf_counter_ns()
            bolt.execute_raw(ACK_ACK, first, emit)
            bolt.execute_raw(ACK_ACK, second, emit)
            best = min(best, (time.perf_counter_ns() - t0) / (2 * trees))
            assert sum(len(v[0]) for v in told) == trees  # every tree complete
        return best
    finally:
        acker._c_ack_run = saved


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tuples", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    gc.disable()
    modes = ("tuples", "roots", "table", "off")
    got: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for _ in range(args.rounds):
        for m in modes:
            got[m].append(steps(args.tuples, m))
    names = ("emit", "run", "fold", "pop", "free")
    print(f"acking's steps in isolation, {args.tuples:,} tuples, {args.rounds} interleaved rounds")
    print("ns a tuple, median of the rounds (total: min-max)")
    print(f"{'metas':8}" + "".join(f"{k:>7}" for k in names) + "   total")
    totals = {}
    for m in modes:
        med = {k: statistics.median(r.get(k, 0.0) for r in got[m]) for k in names}
        tot = [sum(r.values()) for r in got[m]]
        totals[m] = statistics.median(tot)
        print(
            f"{m:8}"
            + "".join(f"{med[k]:7.0f}" for k in names)
            + f"   {totals[m]:5.0f} ({min(tot):.0f}-{max(tot):.0f})"
        )
    print("the acker's ACK_ACK loop, ns a message (best of 20 batches):")
    for order in ("announced first", "acks first"):
        c, p = acker_ns(True, order), acker_ns(False, order)
        print(f"  {order:16} compiled {c:5.0f}   Python {p:5.0f}")
    for m in ("tuples", "roots", "table"):  # off's emit here is a list append, not an emit call
        print(
            f"a reliable tuple's steps beyond an unreliable one, {m}: "
            f"{totals[m] - totals['off']:.0f} ns"
        )


if __name__ == "__main__":
    main()
