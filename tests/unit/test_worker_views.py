"""Nimbus's `ClusterWorker` and the local cluster's `WorkerHandle` are two answers to one
declared protocol (`WorkerView`), not a subclass that overrides its base and writes its
private members; what they share (`WorkerAnswers`) is composed."""

from __future__ import annotations

import ast
import time
from pathlib import Path
from types import SimpleNamespace

from stormish.cluster.deployment import ClusterWorker
from stormish.errors import WorkerError
from stormish.local.answers import NOT_QUIET, QUIET, WorkerAnswers
from stormish.local.running import WorkerView
from stormish.local.workers import WorkerHandle
from stormish.transport.control_server import Hello

ROOT = Path(__file__).resolve().parents[2] / "stormish"
# the worker handles and the code that drives them
HANDLERS = [ROOT / "local" / "workers.py", ROOT / "local" / "answers.py"]
HANDLERS += sorted((ROOT / "cluster").glob("*.py"))


def protocol_members(proto: type) -> set[str]:
    own = {n for n in vars(proto) if not n.startswith("_")}
    return own | set(getattr(proto, "__annotations__", {}))


def test_cluster_worker_is_its_own_class_implementing_the_worker_view():
    assert not issubclass(ClusterWorker, WorkerHandle)
    assert WorkerHandle not in ClusterWorker.__mro__
    wanted = protocol_members(WorkerView)
    assert {"index", "quiescence", "stats_snapshot", "failure", "stop"} <= wanted
    for cls in (ClusterWorker, WorkerHandle):
        defined = {n for n in dir(cls) if not n.startswith("_")}
        missing = wanted - defined - {"index"}  # an instance attribute
        assert not missing, f"{cls.__name__} lacks {sorted(missing)}"
        for name in wanted - {"index"}:
            assert name in vars(cls), f"{cls.__name__}.{name} is inherited, not its own"


def test_no_handle_reaches_into_another_objects_private_members():
    """`x._name` only on self (or cls): a private member is its class's own business."""
    reach = []
    for path in HANDLERS:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            name = node.attr
            if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", "os", "sys"):
                continue
            reach.append(f"{path.relative_to(ROOT.parent)}:{node.lineno} .{name}")
    assert not reach, "\n".join(reach)


class FakeControl:
    """The control channel as a ClusterWorker sees it: hellos, and requests answered
    from a table (or refused as a dead worker's would be)."""

    def __init__(self):
        self.hellos: dict = {}
        self.answers: dict = {}
        self.asked: list = []

    def request(self, ident, verb, payload, alive, timeout, who):
        self.asked.append(verb)
        if verb not in self.answers:
            raise WorkerError(f"{who} died during {verb}")
        return self.answers[verb]


def cluster_worker() -> tuple[ClusterWorker, FakeControl]:
    control = FakeControl()
    nimbus = SimpleNamespace(control=control, worker_timeout=3.0)
    return ClusterWorker("t", 0, nimbus), control  # type: ignore[arg-type]


def test_a_cluster_worker_not_heard_from_is_not_quiet_and_asked_nothing():
    w, control = cluster_worker()
    assert w.quiescence() == NOT_QUIET
    assert w.stats_snapshot() == ([], {})
    assert w.stop() == [] and w.failure() is None
    w.set_active(False)
    assert control.asked == [] and w.results() == {} and w.errors() == []


def test_a_cluster_worker_keeps_its_final_record_until_its_next_incarnation():
    w, control = cluster_worker()
    control.hellos[("t", 0)] = Hello(b"id", 42, {}, time.monotonic())
    w.new_incarnation(b"id", 42)
    assert w.alive() and w.pid == 42
    control.answers["quiescence"] = {**NOT_QUIET, "failure": "executor split:2 died"}
    assert w.quiescence()["transferred"] == -1
    assert w.failure() == "worker 0: executor split:2 died"
    final = {"tasks": ["task"], "links": {}, "stuck": ["split:2"], "results": {"c": [(1, 5)]},
             "errors": []}  # fmt: skip
    control.answers["stop"] = final
    assert w.stop(1.0) == ["split:2"]
    assert w.quiescence() == QUIET and w.stats_snapshot() == (["task"], {})
    assert w.results() == {"c": [(1, 5)]}
    asked = len(control.asked)
    w.set_active(True)
    assert w.stop(1.0) == [] and len(control.asked) == asked  # stopped: asked nothing more
    w.new_incarnation(b"id2", 43)  # its supervisor started it again
    assert w.failure() is None and w.results() == {} and not w.alive()


def test_a_worker_that_dies_while_asked_is_its_supervisors_to_restart():
    w, control = cluster_worker()
    control.hellos[("t", 0)] = Hello(b"id", 42, {}, time.monotonic())
    w.new_incarnation(b"id", 42)
    gone = time.monotonic() - 10  # its last hello is older than the worker timeout
    control.hellos[("t", 0)] = Hello(b"id", 42, {}, gone)
    assert w.quiescence() == NOT_QUIET and w.stats_snapshot() == ([], {})
    assert w.failure() is None


def test_worker_answers_say_what_a_stop_left_and_a_refused_stop():
    a = WorkerAnswers(3)

    def refuse(verb, payload=None, timeout=0.0):
        raise WorkerError("did not answer stop within 11s")

    assert a.stop(refuse, 1.0) == ["worker 3: did not answer stop within 11s"]
    assert not a.ended
    assert a.stopped_with({"stuck": [], "results": {}, "errors": [{"e": 1}]}) == []
    assert a.ended and a.errors() == [{"e": 1}]
    a.reset()
    assert not a.ended and a.failure is None
