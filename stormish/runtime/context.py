"""What a component learns about its place in the running topology (Storm's
TopologyContext), handed to `open`/`prepare`.

`clock` is the topology's clock (`now()`, `sleep(secs)`): a component that waits or
reads time through it runs in simulated time under `LocalCluster(clock=FakeClock())`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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

    def get_this_task_id(self) -> int:
        return self.task_id

    def get_this_component_id(self) -> str:
        return self.component_id

    def get_component_tasks(self, component: str) -> list[int]:
        return sorted(t for t, c in self.task_components.items() if c == component)

    def get_this_output_fields(self, stream: str = "default") -> tuple[str, ...]:
        return self.streams[stream]

    def __reduce__(self) -> Any:  # contexts are built per worker; never shipped
        raise TypeError("a TopologyContext belongs to one worker and is not picklable")
