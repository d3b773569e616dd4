"""PerTuple stops at the row after which its emits parked (the collector's pendingEmitQ is
not empty and the executor's `stops()` says so), in each of its loops, compiled
(fastack.run_basic) and Python: it returns the first row not executed, and counts,
acks and folds exactly the rows it executed. Storm's bolt does the same per tuple
(JCQueue.consume checks tillNoPendingEmits before each element)."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest

from stormish import BasicBolt, Bolt
from stormish.runtime.execution import per_tuple
from stormish.runtime.execution.accounting import Accounts
from stormish.runtime.execution.per_tuple import PerTuple
from stormish.runtime.task_counts import TaskCounts
from stormish.tuple import Source

N = 10


class Parks:
    """Records the rows it executes; parks a batch (as a refused publish does) at row
    `park_at`, and raises at the rows in `raises`."""

    park_at = -1
    raises: frozenset[int] = frozenset()

    def execute(self, tup: Any) -> None:
        i = tup.values[0]
        self.seen.append(i)
        if i == self.park_at:
            self.col.pending.append(("target", "batch", 3))
            self.col.parked.count += 3
        if i in self.raises:
            raise ValueError(f"row {i}")


class BasicParks(Parks, BasicBolt):
    pass


class HandParks(Parks, Bolt):
    pass


def executor(bolt: Any, tracked: bool, stops: bool = True) -> tuple[PerTuple, Any]:
    counts = TaskCounts()
    folder = SimpleNamespace(
        acks={}, fail=lambda t, why: None, done=lambda src, d: None, batch_size=10**9
    )
    col = SimpleNamespace(
        acking=tracked, current=None, pending=deque(), parked=SimpleNamespace(count=0), acks=folder
    )
    bolt.seen, bolt.col = [], col
    ex = SimpleNamespace(
        obj=bolt,
        collector=col,
        counts=counts,
        source=lambda task, stream: Source("src", task, stream, ("x",)),
        accounts=Accounts(counts, {}, lambda key, n: None, True, lambda exc: None),
        screen=None,
        fail_tuple=lambda t, why: None,
        stops=lambda: stops and col.parked.count >= 1,
    )
    return PerTuple(ex), col


@pytest.fixture(params=[True, False], ids=["compiled", "python"])
def compiled(request):
    if request.param and per_tuple.run_basic is None:
        pytest.skip("stormish._acking is not built here")
    saved = per_tuple.run_basic
    if not request.param:
        per_tuple.run_basic = None
    yield request.param
    per_tuple.run_basic = saved


KINDS = [(BasicParks, False), (BasicParks, True), (HandParks, False), (HandParks, True)]


@pytest.mark.parametrize(("cls", "tracked"), KINDS)
@pytest.mark.parametrize("park_at", [0, 4, N - 1])
@pytest.mark.parametrize("raises", [frozenset(), frozenset({2, 4})])
def test_the_rows_after_the_one_that_parked_do_not_run(compiled, cls, tracked, park_at, raises):
    bolt = cls()
    bolt.park_at, bolt.raises = park_at, raises
    run, col = executor(bolt, tracked)
    metas = [((100 + i, 1 << i),) for i in range(N)] if tracked else None
    left = run.run((7, "default", [(i,) for i in range(N)], metas))
    ran = park_at + 1
    assert left == (None if ran == N else ran)
    assert bolt.seen == list(range(ran))
    counts = run.counts
    assert counts.executed == counts.consumed == ran
    failed = len([i for i in raises if i < ran])
    if cls is BasicParks:
        assert (counts.acked, counts.failed) == (ran - failed, failed)
        if tracked:  # only what ran is folded: each tree's edge, acked
            ok = [i for i in range(ran) if i not in raises]
            assert col.acks.acks == {100 + i: 1 << i for i in ok}


@pytest.mark.parametrize(("cls", "tracked"), KINDS)
def test_a_drain_below_its_budget_runs_the_batch_whole(compiled, cls, tracked):
    """`stops()` False (an executor on a cycle, draining below its budget): every row."""
    bolt = cls()
    bolt.park_at = 1
    run, _col = executor(bolt, tracked, stops=False)
    metas = [((100 + i, 1),) for i in range(N)] if tracked else None
    assert run.run((7, "default", [(i,) for i in range(N)], metas)) is None
    assert bolt.seen == list(range(N))
    assert run.counts.executed == N
