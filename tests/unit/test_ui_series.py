"""The web UI: the plots' rings (bounded, rates from cumulative counters) and
the REST endpoints that serve them, with a fake clock and fake statistics."""

from __future__ import annotations

import json

import pytest

from stormish.runtime.stats import TaskStats, TopologyStatistics, aggregate
from stormish.ui.backend import NotFound
from stormish.ui.rest import RestApp
from stormish.ui.series import TOPOLOGY, Series


def stats(n: int, uptime: float, parked_s: float = 0.0) -> TopologyStatistics:
    """A spout that emitted and had acked `n` trees (10 ms each) and a bolt that executed
    them at 2 ms each, with `parked_s` seconds of the spout's emits parked."""
    spout = TaskStats(task=1, component="s", worker=0, kind="spout", emitted=n, acked=n,
                      complete_latency_ms=10.0, backpressure_seconds=parked_s)  # fmt: skip
    bolt = TaskStats(task=2, component="b", worker=0, kind="bolt", executed=n,
                     execute_latency_ms=2.0, receive_population=50,
                     receive_capacity=100)  # fmt: skip
    return TopologyStatistics("wc", "running", uptime, 1, {1: spout, 2: bolt},
                              aggregate([spout, bolt]))  # fmt: skip


def test_a_point_is_the_rates_and_shares_between_two_samples():
    s = Series()
    assert s.add(0.0, stats(0, 1.0))  # the first sample: no point yet
    assert s.add(0.5, stats(50, 1.5)) is False  # younger than a step: not kept
    assert s.add(2.0, stats(200, 3.0, parked_s=1.0))
    (b,) = s.points("b", 2.0, 600)
    # 200 executed in 2 s at 2 ms: 100/s, busy 0.4 s of 2 s; half its queue full
    assert b["executed"] == 100.0 and b["capacity"] == 0.2 and b["queueFill"] == 0.5
    (sp,) = s.points("s", 2.0, 600)
    assert sp["emitted"] == 100.0 and sp["acked"] == 100.0 and sp["completeLatency"] == 10.0
    assert sp["backpressure"] == 0.5  # 1 s parked of 2
    (top,) = s.points(TOPOLOGY, 2.0, 600)
    assert top["acked"] == 100.0  # the spout's trees, not the bolt's acks too
    assert top["backpressure"] == 0.5 and top["ago"] == 0.0


def test_the_ring_is_bounded_by_its_points_and_by_its_window():
    s = Series(step=1.0, keep=600.0, max_points=601)
    for i in range(2000):  # 2,000 s of samples, one a second
        s.add(float(i), stats(i * 10, i + 1.0))
    ring = s.rings["b"]
    assert len(ring) <= 601 and ring.maxlen == 601
    assert 1999.0 - ring[0]["t"] <= 600.0
    assert len(s.points("b", 1999.0, 60)) == 61  # a shorter window: its own points
    tight = Series(step=1.0, keep=10_000.0, max_points=5)  # a long window, few points
    for i in range(50):
        tight.add(float(i), stats(i, i + 1.0))
    assert len(tight.rings["b"]) == 5


class _Backend:
    def __init__(self) -> None:
        self.n = 0

    def topologies(self):
        return [{"name": "wc", "status": "running"}]

    def supervisors(self):
        return []

    def stats(self, name):
        if name != "wc":
            raise NotFound(name)
        self.n += 100
        return stats(self.n, self.n / 100)

    def graph(self, name):
        return {"components": {"s": {"kind": "spout"}, "b": {"kind": "bolt"}},
                "edges": [{"source": "s", "bolt": "b", "stream": "default",
                           "grouping": "shuffle"}]}  # fmt: skip

    def act(self, name, verb, wait=None, workers=None):
        pass


def ask(app, path: str) -> tuple[str, dict]:
    got = {}
    path, _, query = path.partition("?")
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query,
               "HTTP_HOST": "127.0.0.1:8080"}  # fmt: skip
    body = b"".join(app(environ, lambda status, headers: got.setdefault("status", status)))
    return got["status"], json.loads(body)


def test_the_series_endpoints_serve_the_rings_and_the_graph_its_colours():
    clock = [0.0]
    app = RestApp(_Backend(), clock=lambda: clock[0])
    for _ in range(5):  # the page's refreshes, 2 s apart
        clock[0] += 2.0
        assert ask(app, "/api/v1/topology/wc")[0].startswith("200")
    status, body = ask(app, "/api/v1/topology/wc/series")
    assert status.startswith("200") and body["windowSeconds"] == 600.0
    assert set(body["components"]) == {"s", "b"}
    assert len(body["topology"]) == 4  # 5 samples: 4 points between them (the 6th: < 1 s)
    assert body["topology"][-1]["emitted"] == 50.0  # 100 a sample, 2 s apart
    status, one = ask(app, "/api/v1/topology/wc/component/b/series?window=3")
    assert status.startswith("200") and [p["ago"] for p in one["points"]] == [2.0, 0.0]
    assert one["points"][-1]["executed"] == 50.0
    assert ask(app, "/api/v1/topology/wc/component/ghost/series")[0].startswith("404")
    assert ask(app, "/api/v1/topology/wc/series?window=inf")[0].startswith("400")
    status, graph = ask(app, "/api/v1/topology/wc/graph")
    b = {c["id"]: c for c in graph["components"]}["b"]
    assert b["queueFill"] == 0.5 and 0 < b["capacity"] < 1 and b["root"] is False
    assert graph["edges"][0]["queueFill"] == 0.5


def test_the_page_files_and_the_favicon_are_served():
    app = RestApp(_Backend())
    got: dict = {}

    def fetch(path: str) -> bytes:
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "HTTP_HOST": "127.0.0.1"}
        return b"".join(app(environ, lambda s, h: got.update(status=s, headers=dict(h))))

    for path, kind in [("/favicon.ico", "image/svg+xml"), ("/plot.js", "text/javascript")]:
        body = fetch(path)
        assert got["status"].startswith("200") and got["headers"]["Content-Type"].startswith(kind)
        assert body
    fetch("/nothing.png")
    assert got["status"].startswith("404")


def test_latency_quantiles_come_from_the_intervals_histogram():
    from stormish.runtime.stats import COMPLETE_BUCKETS
    from stormish.ui.series import quantile_ms

    hist = [0] * (len(COMPLETE_BUCKETS) + 1)
    assert quantile_ms(hist, 0.5) is None
    hist[3] = 100  # 100 trees in (5 ms, 10 ms]
    assert quantile_ms(hist, 0.5) == pytest.approx(7.5)
    assert quantile_ms(hist, 0.99) == pytest.approx(9.95)
    hist[-1] = 10  # past the last bound: that bound
    assert quantile_ms(hist, 0.99) == COMPLETE_BUCKETS[-1] * 1000.0


def test_one_refresh_asks_the_backend_once_and_a_gone_topology_leaves_no_rings():
    """The page asks for the topology, its graph and its series together: one stats call
    (a nimbus round trip) serves them; later ones ask again. A topology no longer listed
    loses its rings (a nimbus UI runs for months)."""
    clock = [10.0]
    backend = _Backend()
    calls = []
    real = backend.stats
    backend.stats = lambda name: calls.append(name) or real(name)
    app = RestApp(backend, clock=lambda: clock[0])
    for path in ("/api/v1/topology/wc", "/api/v1/topology/wc/graph",
                 "/api/v1/topology/wc/series"):  # fmt: skip
        assert ask(app, path)[0].startswith("200")
    assert calls == ["wc"]
    clock[0] += 2.0
    ask(app, "/api/v1/topology/wc")
    assert calls == ["wc", "wc"]
    assert set(app.series) == set(app.histories) == {"wc"}
    backend.topologies = lambda: []  # killed and removed
    assert ask(app, "/api/v1/topology/summary")[1] == {"topologies": []}
    assert app.series == {} and app.histories == {}


def test_the_topologys_failed_rate_is_its_spouts_failed_trees_not_bolts_fails_too():
    """Found: the topology's `failed` summed the bolts' fails with the spouts' failed
    trees (a tree failed in one bolt counted twice); `acked` was the spouts' already."""

    def snap(n: int, up: float) -> TopologyStatistics:
        s = TaskStats(task=1, component="src", worker=0, kind="spout", emitted=n, failed=n)
        b = TaskStats(task=2, component="work", worker=0, kind="bolt", executed=n, failed=n)
        return TopologyStatistics("t", "running", up, 1, {1: s, 2: b}, aggregate([s, b]))

    ser = Series()
    ser.add(0.0, snap(0, 10.0))
    ser.add(10.0, snap(1000, 20.0))
    (top,) = ser.points(TOPOLOGY, 10.0, 600)
    assert top["failed"] == 100.0, top
    assert ser.points("work", 10.0, 600)[0]["failed"] == 100.0  # the bolt's own, kept
