"""The REST API's windows, statuses, actions and answers, over fake statistics and a
fake clock (stormish/ui/window.py, rest.py, backend.py): found by a bug hunt."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest

from stormish.clock import FakeClock
from stormish.cluster.api import Kill, Rebalance
from stormish.runtime.stats import TaskStats, TopologyStatistics, aggregate
from stormish.ui.backend import ClusterBackend, LocalBackend, NotFound
from stormish.ui.rest import RestApp
from stormish.ui.window import History, window

pytestmark = pytest.mark.timeout(60)


def bolt(task: int, executed: int, latency_ms: float = 2.0, **kw: Any) -> TaskStats:
    return TaskStats(task=task, component="b", worker=0, kind="bolt", executed=executed,
                     execute_latency_ms=latency_ms, **kw)  # fmt: skip


def spout(task: int, acked: int, latency_ms: float = 5.0, **kw: Any) -> TaskStats:
    return TaskStats(task=task, component="s", worker=0, kind="spout", emitted=acked,
                     acked=acked, complete_latency_ms=latency_ms, **kw)  # fmt: skip


def topo(uptime: float, *tasks: TaskStats, status: str = "running") -> TopologyStatistics:
    return TopologyStatistics("wc", status, uptime, 1, {t.task: t for t in tasks},
                              aggregate(tasks))  # fmt: skip


class Ticking:
    """A fake clock that moves 1 ms at each read, as a real monotonic clock moves
    between two reads; `advance` moves it further."""

    def __init__(self, start: float = 1000.0) -> None:
        self.clock = FakeClock(start)

    def __call__(self) -> float:
        self.clock.advance(0.001)
        return self.clock.now()

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


class Fake:
    """One topology 'wc': `stats` makes its statistics from the clock's time, `row`
    is its list row; what was asked of it is kept in `acts`."""

    def __init__(self, stats: Callable[[float], TopologyStatistics], clock: Ticking,
                 row: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.make, self.clock = stats, clock
        self.row = {"name": "wc", "status": "running", **(row or {})}
        self.acts: list[tuple[str, float | None, int | None]] = []

    def topologies(self) -> list[dict[str, Any]]:
        return [self.row]

    def supervisors(self) -> list[dict[str, Any]]:
        return []

    def stats(self, name: str) -> TopologyStatistics:
        if name != "wc":
            raise NotFound(name)
        return self.make(self.clock.clock.now())

    def graph(self, name: str) -> dict[str, Any]:
        return {"components": {"b": {"kind": "bolt"}}, "edges": []}

    def act(self, name: str, verb: str, wait: float | None = None,
            workers: int | None = None) -> None:  # fmt: skip
        self.acts.append((verb, wait, workers))


def ask(app: RestApp, method: str, path: str, body: bytes = b"") -> tuple[int, Any]:
    got: dict[str, str] = {}
    path, _, query = path.partition("?")
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query,
               "HTTP_HOST": "127.0.0.1:8080", "HTTP_X_STORMISH_UI": "1",
               "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}  # fmt: skip
    data = b"".join(app(environ, lambda status, headers: got.setdefault("status", status)))
    # strict: a browser's JSON.parse refuses NaN and Infinity
    strict = json.loads(data, parse_constant=lambda c: pytest.fail(f"{c} in {data[:200]!r}"))
    return int(got["status"].split()[0]), strict


# -- 1. a worker restart -----------------------------------------------------------------


def test_a_task_whose_worker_restarted_counts_on_from_zero_never_below():
    """Found: counts in a window went negative after a worker restarted (the older
    sample subtracted as it was). Each task's counter that went down is a reset, as
    Prometheus's rate() takes one; the other task is untouched."""
    clock = Ticking()
    # task 1 restarts between the 100 s and 200 s samples; task 2 runs on
    script = {0: (5000, 5000), 100: (5500, 5500), 200: (300, 6000), 300: (800, 6500)}

    def stats(now: float) -> TopologyStatistics:
        n1, n2 = script[round(now - 1000.0)]
        return topo(3600.0 + now, bolt(1, n1), bolt(2, n2))

    app = RestApp(Fake(stats, clock), clock=clock)
    for step in (0, 100, 100, 100):
        clock.advance(step)
        code, body = ask(app, "GET", "/api/v1/topology/wc?window=600")
        assert code == 200
    (b,) = body["bolts"]
    # task 1: 500 before its restart, 300 to the next sample, 500 after; task 2: 1500
    assert b["executed"] == 500 + 300 + 500 + 1500, b
    w = body["topologyStats"][0]
    assert 299.9 < w["windowSeconds"] <= 300.1
    # capacity over the same executes: 2800 x 2 ms / 300 s
    assert b["capacity"] == f"{2800 * 0.002 / w['windowSeconds']:.3f}"


def test_the_history_keeps_a_restarted_tasks_earlier_counts_and_a_missing_tasks_last():
    h = History()
    h.add(0.0, topo(10, bolt(1, 100), bolt(2, 100)))
    h.add(1.0, topo(11, bolt(2, 150)))  # task 1's worker down: not in the statistics
    h.add(2.0, topo(12, bolt(1, 20), bolt(2, 200)))  # back, restarted
    last = h.add(3.0, topo(13, bolt(1, 70), bolt(2, 250)))
    w = window(last, h.since(3.0, 10.0))
    assert w["components"]["b"]["executed"] == (20 + 50) + 150
    assert window(last, None)["components"]["b"]["executed"] == 100 + 70 + 250


def test_the_plots_and_the_graph_count_a_restarted_task_from_zero_too():
    clock = Ticking()
    runs = iter([bolt(1, 5000), bolt(1, 200)])
    app = RestApp(Fake(lambda now: topo(100.0 + now, next(runs)), clock), clock=clock)
    ask(app, "GET", "/api/v1/topology/wc/series")
    clock.advance(2.0)
    _, graph = ask(app, "GET", "/api/v1/topology/wc/graph")
    (b,) = graph["components"]
    assert 99.0 < b["executedRate"] <= 100.0, b  # 200 executed since, in ~2 s
    _, series = ask(app, "GET", "/api/v1/topology/wc/series")
    assert 99.0 < series["components"]["b"][-1]["executed"] <= 100.0
    assert 0.19 < series["components"]["b"][-1]["capacity"] <= 0.2  # 200 x 2 ms / 2 s


# -- 2. the first request ------------------------------------------------------------------


def test_the_first_request_of_a_topology_older_than_the_window_is_not_empty():
    """Found: the view read the clock after the sample was stored, so the sample was its
    own baseline: a window of ~0.001 s with nothing in it, and rates of 0.0."""
    clock = Ticking()

    def stats(now: float) -> TopologyStatistics:
        up = 3600.0 + now - 1000.0  # an hour old, executing 100 tuples a second
        return topo(up, bolt(1, int(100 * up)))

    app = RestApp(Fake(stats, clock), clock=clock)
    _, body = ask(app, "GET", "/api/v1/topology/wc?window=600")
    w = body["topologyStats"][0]
    assert w["windowSeconds"] >= 3600.0 and body["bolts"][0]["executed"] >= 360_000, body
    _, graph = ask(app, "GET", "/api/v1/topology/wc/graph")  # the same sample (fresh)
    assert graph["rateSeconds"] == 0 and graph["components"][0]["executedRate"] is None
    clock.advance(2.0)
    _, body = ask(app, "GET", "/api/v1/topology/wc?window=600")
    w = body["topologyStats"][0]
    assert 2.0 <= w["windowSeconds"] < 2.1 and body["bolts"][0]["executed"] >= 200, body
    _, graph = ask(app, "GET", "/api/v1/topology/wc/graph")
    assert graph["rateSeconds"] >= 2.0
    assert 95.0 < graph["components"][0]["executedRate"] <= 100.5, graph


# -- 3. capacity and latencies of the window ----------------------------------------------


def test_capacity_and_latencies_are_the_windows_not_the_lifetimes():
    """Found: capacity used the lifetime execute latency, and the latencies shown were
    lifetime means. An hour fast (10k/s at 0.05 ms), then 10 minutes slow (100/s at
    10 ms, complete latency 200 ms): the last 10 minutes are busy all the time."""
    h = History()
    n0 = 36_000_000
    h.add(3600.0, topo(3600, bolt(1, n0, 0.05), spout(2, n0, 5.0)))
    n1 = n0 + 60_000
    lat = (n0 * 0.05 + 60_000 * 10.0) / n1  # the statistics' lifetime means
    complete = (n0 * 5.0 + 60_000 * 200.0) / n1
    last = h.add(4200.0, topo(4200, bolt(1, n1, lat), spout(2, n1, complete)))
    w = window(last, h.since(4200.0, 600.0))
    assert abs(w["components"]["b"]["capacity"] - 1.0) < 1e-6
    assert abs(w["components"]["b"]["execute_latency_ms"] - 10.0) < 1e-6
    assert abs(w["components"]["s"]["complete_latency_ms"] - 200.0) < 1e-6


def test_the_topology_tables_latencies_are_the_windows():
    clock = Ticking()

    def hist(n: int) -> tuple[int, ...]:  # a process histogram of n tuples
        return (0, 0, 0, n)

    phases = iter([
        topo(3600, bolt(1, 1000, 1.0, process_latency_ms=1.0, process_histogram=hist(1000)),
             spout(2, 1000, 5.0)),
        topo(3610, bolt(1, 2000, 2.0, process_latency_ms=3.0, process_histogram=hist(2000)),
             spout(2, 2000, 10.0)),
    ])  # fmt: skip
    app = RestApp(Fake(lambda now: next(phases), clock), clock=clock)
    ask(app, "GET", "/api/v1/topology/wc?window=600")
    clock.advance(10.0)
    _, body = ask(app, "GET", "/api/v1/topology/wc?window=600")
    (b,), (s,) = body["bolts"], body["spouts"]
    # the last 1000 tuples: 3 ms each (2 x 2000 - 1 x 1000 over 1000), process 5 ms,
    # trees 15 ms; busy 3 s of ~10 s
    assert b["executeLatency"] == "3.000" and b["processLatency"] == "5.000", b
    assert s["completeLatency"] == "15.000", s
    assert body["topologyStats"][0]["completeLatency"] == "15.000"
    assert b["capacity"] == "0.300"


# -- 4. the status `stormish list` shows ----------------------------------------------------


@pytest.mark.parametrize(
    ("row", "status", "active"),
    [
        ({"status": "running", "active": True}, "ACTIVE", True),
        ({"status": "running", "active": False}, "INACTIVE", False),
        ({"status": "running", "active": False, "killing": True}, "KILLED", False),
        ({"status": "running", "active": False, "rebalancing": True}, "REBALANCING", False),
        ({"status": "complete", "active": True}, "COMPLETE", False),
        ({"status": "killed", "active": True}, "KILLED", False),
    ],
)
def test_the_ui_shows_the_status_stormish_list_does(row, status, active):
    """Found: RUNNING after a deactivate, during a kill's wait and a rebalance; a
    complete topology `active: true`."""
    clock = Ticking()
    app = RestApp(Fake(lambda now: topo(5.0, bolt(1, 10)), clock, row), clock=clock)
    _, summary = ask(app, "GET", "/api/v1/topology/summary")
    (got,) = summary["topologies"]
    assert (got["status"], got["active"]) == (status, active)
    _, view = ask(app, "GET", "/api/v1/topology/wc")
    assert (view["status"], view["active"]) == (status, active)


# -- 6. rebalance as Storm's path ------------------------------------------------------------


def test_rebalance_takes_the_wait_in_the_path_and_the_workers_in_the_body():
    """Found: `/rebalance/{n}` read n as the workers; Storm's is the wait, with the
    workers in the body's rebalanceOptions.numWorkers."""
    clock = Ticking()
    backend = Fake(lambda now: topo(5.0, bolt(1, 10)), clock)
    app = RestApp(backend, clock=clock)
    body = json.dumps({"rebalanceOptions": {"numWorkers": 3}}).encode()
    code, answer = ask(app, "POST", "/api/v1/topology/wc/rebalance/7", body)
    assert code == 200 and answer["topologyOperation"] == "rebalance"
    assert ask(app, "POST", "/api/v1/topology/wc/rebalance", body)[0] == 200
    assert backend.acts == [("rebalance", 7.0, 3), ("rebalance", None, 3)]
    for bad in (b"not json", b"[3]", b'{"rebalanceOptions": 3}'):
        code, answer = ask(app, "POST", "/api/v1/topology/wc/rebalance/7", bad)
        assert code == 400 and "rebalanceOptions" in answer["error"], answer
        assert "numWorkers" in answer["error"]
    odd = b'{"rebalanceOptions": {"numWorkers": 2, "executors": {"b": 4}}}'
    code, answer = ask(app, "POST", "/api/v1/topology/wc/rebalance/7", odd)
    assert code == 400 and "executors" in answer["error"]
    assert len(backend.acts) == 2
    # no body, or none of Storm's numWorkers (its UI sends none): the workers it has
    for none in (b"", b"{}", b'{"rebalanceOptions": {}}'):
        assert ask(app, "POST", "/api/v1/topology/wc/rebalance/7", none)[0] == 200
    assert backend.acts[2:] == [("rebalance", 7.0, None)] * 3


class Client:
    """A NimbusClient's `call`, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def call(self, verb: str, payload: Any = None) -> Any:
        self.calls.append((verb, payload))
        return [{"name": "wc", "status": "running"}] if verb == "list" else None


def test_the_cluster_backend_sends_storms_kill_and_rebalance_waits_to_nimbus():
    client = Client()
    backend = ClusterBackend(client)  # type: ignore[arg-type]
    backend.act("wc", "rebalance", 7.0, 3)
    backend.act("wc", "rebalance", None, 2)
    backend.act("wc", "kill", None)  # no wait: nimbus waits the message timeout
    backend.act("wc", "kill", 0.0)
    sent = [p for v, p in client.calls if v != "list"]
    assert sent == [Rebalance("wc", 3, 7.0), Rebalance("wc", 2, None), Kill("wc", None),
                    Kill("wc", 0.0)]  # fmt: skip


# -- 7. a local run's kill waits -------------------------------------------------------------


class Running:
    """What LocalBackend uses of a RunningTopology."""

    class plan:  # noqa: N801 (stands in for the Plan attribute)
        workers = 1
        conf = {"topology.message.timeout.secs": 30}
        task_component = {1: "b"}

    name, status, error = "wc", "running", None

    def __init__(self) -> None:
        self.activity: list[bool] = []

    def set_active(self, active: bool) -> None:
        self.activity.append(active)


class Later:
    """`later` for LocalBackend: what is due, run when the test says."""

    def __init__(self) -> None:
        self.due: list[tuple[float, Callable[[], None]]] = []
        self.cancelled = False

    def __call__(self, seconds: float, fn: Callable[[], None]) -> Later:
        self.due.append((seconds, fn))
        return self

    def cancel(self) -> None:
        self.cancelled = True


def test_a_local_kill_deactivates_waits_then_kills_as_nimbus_does():
    """Found: a local run's kill/{wait} ignored the wait and stopped at once."""
    running, later, kills = Running(), Later(), []
    backend = LocalBackend(running, None, {}, lambda: kills.append(1), later=later)  # type: ignore[arg-type]
    app = RestApp(backend)
    assert ask(app, "POST", "/api/v1/topology/wc/kill/5")[0] == 200
    assert running.activity == [False] and kills == [] and [s for s, _ in later.due] == [5.0]
    (row,) = ask(app, "GET", "/api/v1/topology/summary")[1]["topologies"]
    assert row["status"] == "KILLED" and row["active"] is False
    later.due[0][1]()  # the wait is over
    assert kills == [1]
    (row,) = ask(app, "GET", "/api/v1/topology/summary")[1]["topologies"]
    assert row["status"] == "KILLED"


def test_a_local_kill_without_a_wait_waits_the_message_timeout_and_0_is_at_once():
    running, later, kills = Running(), Later(), []
    backend = LocalBackend(running, None, {}, lambda: kills.append(1), later=later)  # type: ignore[arg-type]
    backend.act("wc", "kill")
    assert [s for s, _ in later.due] == [30.0] and kills == []
    backend.act("wc", "kill", 40.0)  # a second kill never lengthens the wait ...
    assert len(later.due) == 1 and kills == []
    backend.act("wc", "kill", 0.0)  # ... and may shorten it, as nimbus's
    assert later.cancelled and kills == [1]
    backend.close()
    other = LocalBackend(Running(), None, {}, lambda: kills.append(2), later=Later())  # type: ignore[arg-type]
    other.act("wc", "kill", 0.0)
    assert kills == [1, 2]
    view = RestApp(other).route("GET", "/api/v1/topology/summary", {})
    assert view["topologies"][0]["status"] == "KILLED"


def test_the_topology_view_gives_the_kill_its_default_wait():
    backend = LocalBackend(Running(), None, {}, lambda: None, later=Later())  # type: ignore[arg-type]
    backend.stats = lambda name: topo(5.0, bolt(1, 10))  # type: ignore[method-assign]
    assert RestApp(backend).route("GET", "/api/v1/topology/wc", {})["msgTimeout"] == 30.0


# -- 9. NaN and infinity -------------------------------------------------------------------


def test_a_nan_or_infinite_gauge_is_null_and_the_answer_stays_json():
    """Found: a gauges() value of nan made the answer invalid JSON (the page's
    JSON.parse refused it all)."""
    clock = Ticking()
    gauges = {"lag:t/0": float("nan"), "big": float("inf"), "ok": 1.5}
    app = RestApp(Fake(lambda now: topo(5.0, spout(1, 3, gauges=gauges)), clock), clock=clock)
    code, body = ask(app, "GET", "/api/v1/topology/wc/component/s")
    assert code == 200
    assert body["gauges"] == {"big": None, "lag:t/0": None, "ok": 1.5}
    assert body["executorStats"][0]["gauges"]["lag:t/0"] is None
