"""Custom groupings' signatures (runtime/grouping.py `Custom`): Storm's
`prepare(context, stream, target_tasks)` / `choose_tasks(task_id, values)` and
stormish's `prepare(target_tasks)` / `choose_tasks(values)` are told apart by the
positional parameters they require: one with a default does not make a user's method
Storm's (found by a review: `choose_tasks(self, values, extra=None)` was called as
`(task_id, values)`, its values the source task's id)."""

from __future__ import annotations

from typing import Any

import pytest

from stormish.runtime.grouping import Custom

pytestmark = pytest.mark.timeout(60)

BOXES = ["ob0", "ob1", "ob2", "ob3"]
TASKS = [5, 6, 7, 8]
WHERE = "'sink' on 'src' stream 'default'"


def picks(g: Any, source_task: int = 2) -> list[Any]:
    c = Custom(BOXES, TASKS, g, WHERE, source_task=source_task, stream=("src", "default"))
    return [c.pick([i]) for i in range(5)]


class ByValue:
    """Picks the target task at values[0] (mod the tasks); records what it was given."""

    def remember(self, tasks: Any) -> None:
        self.tasks = list(tasks)

    def choose(self, values: Any) -> list[int]:
        self.values = values
        return [self.tasks[values[0] % len(self.tasks)]]


WANT = [["ob0"], ["ob1"], ["ob2"], ["ob3"], ["ob0"]]


def test_stormish_signatures_with_defaulted_extras_are_stormish() -> None:
    class G(ByValue):
        def prepare(self, target_tasks, extra=None, *more, **kw):
            self.remember(target_tasks)

        def choose_tasks(self, values, extra=None):
            assert extra is None
            return self.choose(values)

    g = G()
    assert picks(g) == WANT and g.tasks == TASKS and g.values == [4]


def test_storms_signatures_are_storms_with_or_without_defaulted_extras() -> None:
    class Plain(ByValue):
        def prepare(self, context, stream, target_tasks):
            self.stream = stream
            self.remember(target_tasks)

        def choose_tasks(self, task_id, values):
            self.from_task = task_id
            return self.choose(values)

    class Extras(ByValue):
        def prepare(self, context, stream, target_tasks, extra=None):
            self.stream = stream
            self.remember(target_tasks)

        def choose_tasks(self, task_id, values, extra=None, *, more=1):
            self.from_task = task_id
            return self.choose(values)

    for cls in (Plain, Extras):
        g = cls()
        assert picks(g, source_task=3) == WANT, cls
        assert (g.stream, g.from_task, g.tasks) == (("src", "default"), 3, TASKS)


def test_a_positional_only_or_static_choose_tasks_is_read_the_same_way() -> None:
    class G(ByValue):
        def prepare(self, target_tasks, /):
            self.remember(target_tasks)

        def choose_tasks(self, values, /, extra=0):
            return self.choose(values)

    assert picks(G()) == WANT

    class S:
        @staticmethod
        def choose_tasks(task_id, values, extra=None):
            return [TASKS[values[0] % 4]]

    assert picks(S()) == WANT
