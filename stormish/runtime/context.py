"""What a component learns about its place in the running topology (Storm's
TopologyContext), handed to `open`/`prepare`.

`clock` is the topology's clock (`now()`, `sleep(secs)`): a component that waits or
reads time through it runs in simulated time under `LocalCluster(clock=FakeClock())`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .plan import Plan


@dataclass(frozen=True)
class TopologyContext:
    topology_name: str
    component_id: str
    task_id: int
    task_index: int
    component_tasks: tuple[int, ...]
    worker_index: int
    streams: dict[str, tuple[str, ...]]
    task_components: dict[int, str]
    clock: Any = None  # a stormish.clock.ComponentClock
    # Storm's getThisSources / getThisTargets: (source, stream) -> (grouping, fields) of
    # this component's subscriptions, and stream -> {target component: (grouping,
    # fields)}; grouping is stormish's name ('shuffle', 'fields', ...)
    sources: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    targets: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = field(default_factory=dict)
    # the fields of every component's streams (Storm's getComponentOutputFields)
    component_streams: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    # wakes this task's loop from another thread (a multilang child's reader does)
    wake: Any = None

    def get_this_task_id(self) -> int:
        return self.task_id

    def get_this_component_id(self) -> str:
        return self.component_id

    def get_component_tasks(self, component: str) -> list[int]:
        return sorted(t for t, c in self.task_components.items() if c == component)

    def get_this_output_fields(self, stream: str = "default") -> tuple[str, ...]:
        try:
            return self.streams[stream]
        except KeyError:
            raise KeyError(
                f"component {self.component_id!r} declares no stream {stream!r}; its streams: "
                f"{sorted(s for s in self.streams if not s.startswith('__'))}"
            ) from None

    # Storm's other TopologyContext methods a ported component reads
    def get_this_task_index(self) -> int:
        """This task's index among its component's tasks (0..n-1)."""
        return self.task_index

    def get_component_id(self, task: int) -> str:
        """The component of task `task`."""
        return self.task_components[task]

    def get_this_sources(self) -> dict[tuple[str, str], tuple[str, tuple[str, ...]]]:
        """(source component, stream) -> (grouping, fields) of this component's inputs."""
        return dict(self.sources)

    def get_this_targets(self) -> dict[str, dict[str, tuple[str, tuple[str, ...]]]]:
        """stream -> {target component: (grouping, fields)} of this component's outputs."""
        return {k: dict(v) for k, v in self.targets.items()}

    def get_component_output_fields(
        self, component: str | tuple[str, str], stream: str | None = None
    ) -> tuple[str, ...]:
        """The fields `component` declares on `stream`; or of a (component, stream) pair,
        as Storm's overload of a GlobalStreamId (what a custom grouping's `prepare` is
        given as its stream)."""
        if stream is None:
            if not isinstance(component, tuple):
                raise TypeError(
                    "get_component_output_fields(component, stream) or ((component, stream))"
                )
            component, stream = component
        assert isinstance(component, str)
        return self.component_streams[component][stream]

    def __reduce__(self) -> Any:  # contexts are built per worker; never shipped
        raise TypeError("a TopologyContext belongs to one worker and is not picklable")


def task_context(plan: Plan, task: int, clock: Any = None, wake: Any = None) -> TopologyContext:
    """The context of task `task` of `plan` (its worker's index from the plan's
    assignment): what its component's `open`/`prepare` gets, and what a custom grouping
    of its output gets in Storm's `prepare(context, stream, target_tasks)`."""
    name = plan.task_component[task]
    tasks = tuple(plan.tasks[name])
    return TopologyContext(
        plan.name,
        name,
        task,
        tasks.index(task),
        tasks,
        plan.assignment.get(task, 0),
        dict(plan.streams[name]),
        dict(plan.task_component),
        clock,
        *wiring(plan, name),
        wake,
    )


def wiring(plan: Plan, name: str) -> tuple[dict, dict, dict]:
    """`sources`, `targets` and `component_streams` of component `name` in `plan` (a
    runtime.plan.Plan), for its TopologyContext; system streams (acking, ticks) left out,
    as Storm's context leaves them out of what a multilang handshake shows."""
    sources = {
        (s.source, s.stream): (s.grouping, s.fields)
        for s in plan.components[name].subscriptions
        if not s.source.startswith("__")
    }
    targets: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {}
    for stream in plan.streams.get(name, {}):
        if stream.startswith("__"):
            continue
        targets[stream] = {
            c: (s.grouping, s.fields)
            for c, s in plan.consumers(name, stream)
            if not c.startswith("__")
        }
    streams = {
        c: {k: v for k, v in st.items() if not k.startswith("__")} for c, st in plan.streams.items()
    }
    return sources, targets, streams
