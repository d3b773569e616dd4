"""The REST layer's windows over samples of cumulative statistics (a fake clock)."""

from __future__ import annotations

from stormish.runtime.stats import TaskStats, TopologyStatistics, aggregate
from stormish.ui.backend import NotFound
from stormish.ui.rest import KEEP, History, window


def stats(executed: int, uptime: float, latency_ms: float = 2.0) -> TopologyStatistics:
    t = TaskStats(task=1, component="b", worker=0, kind="bolt", executed=executed,
                  execute_latency_ms=latency_ms)  # fmt: skip
    return TopologyStatistics("t", "running", uptime, 1, {1: t}, aggregate([t]))


def test_a_window_counts_from_the_oldest_sample_within_it_and_capacity_is_storms():
    h = History()
    for now, n in [(0.0, 0), (100.0, 1000), (400.0, 4000)]:
        h.add(now, stats(n, now + 1))
    last = h.add(700.0, stats(7000, 701))
    before = h.since(last.t, 600.0)
    assert before is not None and before.t == 100.0  # 0.0 is older than the window
    w = window(last, before)
    assert w["seconds"] == 600.0 and w["components"]["b"]["executed"] == 6000
    # capacity: 6000 executed x 2 ms / 600 s = 0.02 of the time busy
    assert abs(w["components"]["b"]["capacity"] - 0.02) < 1e-12
    assert h.since(700.0, 0.5) is None  # nothing but now's own sample


def test_without_a_sample_the_window_is_the_whole_life_and_old_samples_are_dropped():
    w = window(History().add(10.0, stats(50, 10.0)), None)
    assert w["seconds"] == 10.0 and w["components"]["b"]["executed"] == 50
    h = History()
    h.add(0.0, stats(0, 1))
    h.add(KEEP + 100.0, stats(1, KEEP + 101))
    assert len(h.samples) == 1


class _Backend:
    """One topology, 'wc', and what was asked of it."""

    def __init__(self) -> None:
        self.acts: list[tuple[str, float | None, int | None]] = []

    def topologies(self):
        return [{"name": "wc", "status": "running"}]

    def supervisors(self):
        return []

    def stats(self, name):
        if name != "wc":
            raise NotFound(name)
        return stats(10, 5.0)

    def graph(self, name):
        return {"components": {}, "edges": []}

    def act(self, name, verb, wait=None, workers=None):
        self.acts.append((verb, wait, workers))


def ask(app, method: str, path: str, body: bytes = b"") -> tuple[str, dict]:
    import io
    import json

    got = {}
    path, _, query = path.partition("?")
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query,
               "HTTP_HOST": "127.0.0.1:8080", "HTTP_X_STORMISH_UI": "1",
               "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}  # fmt: skip
    body = b"".join(app(environ, lambda status, headers: got.setdefault("status", status)))
    return got["status"], json.loads(body)


def test_numbers_that_are_not_finite_or_out_of_range_are_a_400_naming_the_parameter():
    """Window=inf / 1e400 reached round() and gave a 500."""
    from stormish.ui.rest import RestApp

    backend = _Backend()
    app = RestApp(backend)
    for w in ("inf", "1e400", "-inf", "nan", "-1", "0", "abc"):
        status, body = ask(app, "GET", f"/api/v1/topology/wc?window={w}")
        assert status.startswith("400") and body["error"].startswith(f"window {w!r}:"), body
    assert ask(app, "GET", "/api/v1/topology/wc?window=30")[0].startswith("200")
    assert ask(app, "GET", "/api/v1/topology/wc?window=:all-time")[0].startswith("200")
    bad = [("kill/inf", "kill wait"), ("kill/nan", "kill wait"), ("kill/-1", "kill wait")]
    bad += [(f"rebalance/{n}", "rebalance wait") for n in ("1e400", "-1", "inf")]
    two = b'{"rebalanceOptions": {"numWorkers": 2}}'
    for path, name in bad:
        status, body = ask(app, "POST", f"/api/v1/topology/wc/{path}", two)
        assert status.startswith("400") and body["error"].startswith(name), (path, body)
    for n in ("1e400", "0", "2.5", '"3"', "true", "-2"):
        wanted = b'{"rebalanceOptions": {"numWorkers": %s}}' % n.encode()
        status, body = ask(app, "POST", "/api/v1/topology/wc/rebalance/5", wanted)
        assert status.startswith("400") and "numWorkers" in body["error"], (n, body)
    assert backend.acts == []
    assert ask(app, "POST", "/api/v1/topology/wc/kill/0")[0].startswith("200")
    assert ask(app, "POST", "/api/v1/topology/wc/rebalance/3", two)[0].startswith("200")
    assert backend.acts == [("kill", 0.0, None), ("rebalance", 3.0, 2)]


def test_a_key_error_inside_a_view_is_a_500_with_its_traceback_not_a_404():
    """Issue 27: routes come from a table; only a missing path, topology or component
    (NotFound) is a 404, a KeyError in a view is a bug and says where."""
    from stormish.ui.rest import RestApp

    class Broken(_Backend):
        def graph(self, name):
            return {}  # no "components": graph_view's lookup raises KeyError

    app = RestApp(Broken())
    status, body = ask(app, "GET", "/api/v1/topology/wc/graph")
    assert status.startswith("500"), (status, body)
    assert body["error"] == "KeyError: 'components'"
    assert "Traceback" in body["traceback"] and "graph_view" in body["traceback"]
    for path in ("/api/v1/topology/ghost", "/api/v1/topology/wc/nothing", "/api/v2/x"):
        status, body = ask(app, "GET", path)
        assert status.startswith("404") and body["error"].startswith("not found"), path
    assert ask(app, "GET", "/api/v1/topology/wc/component/ghost")[0].startswith("404")
    assert ask(app, "POST", "/api/v1/topology/wc/explode")[0].startswith("404")
    # a POST route: a 405 naming it, as Storm's (Jersey) answers
    status, body = ask(app, "GET", "/api/v1/topology/wc/kill")
    assert status.startswith("405") and "use POST" in body["error"], (status, body)
