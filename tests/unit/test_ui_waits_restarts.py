"""The UI's kill and rebalance (ui/rest.py, ui/backend.py) and its restart detection
(ui/window.py): a wait past Storm's largest is a 400 and a local run's backend refuses a
wait that is not seconds; a rebalance without a body (Storm's UI sends none) keeps the
number of workers the topology has; a worker incarnation, carried in the statistics,
tells a restart its counts alone do not show."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest

from stormish.cluster.api import Rebalance
from stormish.errors import StormishError
from stormish.runtime.stats import TaskStats, TopologyStatistics, aggregate
from stormish.ui.backend import ClusterBackend, LocalBackend
from stormish.ui.rest import RestApp
from stormish.ui.window import History, baseline, window

from .test_ui_windows import Running

pytestmark = pytest.mark.timeout(60)


class Backend:
    """One topology, 'wc', on 3 workers; what was asked of it."""

    def __init__(self) -> None:
        self.acts: list[tuple[str, float | None, int | None]] = []

    def topologies(self) -> list[dict[str, Any]]:
        return [{"name": "wc", "status": "running", "workers": 3}]

    def supervisors(self) -> list[dict[str, Any]]:
        return []

    def stats(self, name: str) -> Any:
        raise AssertionError("not asked")

    def graph(self, name: str) -> dict[str, Any]:
        return {"components": {}, "edges": []}

    def act(self, name: str, verb: str, wait: Any = None, workers: Any = None) -> None:
        self.acts.append((verb, wait, workers))


def post(app: RestApp, path: str, body: bytes = b"") -> tuple[str, dict]:
    got: dict[str, str] = {}
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": path, "QUERY_STRING": "",
               "HTTP_HOST": "127.0.0.1:8080", "HTTP_X_STORMISH_UI": "1",
               "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}  # fmt: skip
    out = b"".join(app(environ, lambda status, headers: got.setdefault("status", status)))
    return got["status"], json.loads(out)


def test_a_wait_past_storms_largest_is_a_400_and_the_largest_is_taken() -> None:
    backend = Backend()
    app = RestApp(backend)
    for verb in ("kill", "rebalance"):
        for wait in ("2147483648", "1e12", "1e300"):
            status, body = post(app, f"/api/v1/topology/wc/{verb}/{wait}")
            assert status.startswith("400"), (verb, wait, body)
            assert body["error"].startswith(f"{verb} wait {wait!r}: seconds from 0 to 2147483647")
    assert backend.acts == []
    assert post(app, "/api/v1/topology/wc/kill/2147483647")[0].startswith("200")
    assert backend.acts == [("kill", 2147483647.0, None)]


def test_a_rebalance_without_workers_in_its_body_keeps_the_topologys_number() -> None:
    """Storm's UI posts rebalance/{wait} with no body: a rebalance onto the number of
    workers it has (spread again). It was a 400 here."""
    backend = Backend()
    app = RestApp(backend)
    for none in (b"", b"  ", b"null", b"{}", b'{"rebalanceOptions": {}}',
                 b'{"rebalanceOptions": null}'):  # fmt: skip
        status, body = post(app, "/api/v1/topology/wc/rebalance/7", none)
        assert status.startswith("200"), (none, body)
    assert backend.acts == [("rebalance", 7.0, None)] * 6
    two = b'{"rebalanceOptions": {"numWorkers": 2}}'
    assert post(app, "/api/v1/topology/wc/rebalance/7", two)[0].startswith("200")
    assert backend.acts[-1] == ("rebalance", 7.0, 2)
    del backend.acts[:]
    bad = [b"not json", b"[1]", b"3", b'{"rebalanceOptions": 3}',
           b'{"rebalanceOptions": {"numWorkers": 0}}',
           b'{"rebalanceOptions": {"numWorkers": "2"}}',
           b'{"rebalanceOptions": {"executors": {"b": 4}}}']  # fmt: skip
    for body_ in bad:
        status, body = post(app, "/api/v1/topology/wc/rebalance/7", body_)
        assert status.startswith("400"), (body_, body)
        assert "rebalanceOptions" in body["error"] or "numWorkers" in body["error"], body
    assert backend.acts == []


class Client:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def call(self, verb: str, payload: Any = None) -> Any:
        self.calls.append((verb, payload))
        if verb == "list":
            return [{"name": "other", "workers": 1}, {"name": "wc", "workers": 4}]
        return None


def test_the_cluster_backend_rebalances_onto_the_number_listed_without_one() -> None:
    client = Client()
    backend = ClusterBackend(client)  # type: ignore[arg-type]
    backend.act("wc", "rebalance", 7.0, None)
    backend.act("wc", "rebalance", None, 2)
    sent = [p for v, p in client.calls if v != "list"]
    assert sent == [Rebalance("wc", 4, 7.0), Rebalance("wc", 2, None)]


@pytest.mark.parametrize("wait", [math.inf, math.nan, -1.0, 2.0**31, True])
def test_a_local_kill_refuses_a_wait_that_is_not_seconds(wait: Any) -> None:
    """The REST layer checks its paths; the backend checks what any caller gives it,
    as nimbus does (inf: killing for good; nan: killed at once)."""
    running, later, kills = Running(), [], []  # type: ignore[var-annotated]
    backend = LocalBackend(
        running,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        {},
        lambda: kills.append(1),
        later=lambda s, fn: later.append((s, fn)),
    )
    with pytest.raises(StormishError, match=r"kill 'wc': the wait must be a finite number"):
        backend.act("wc", "kill", wait)
    assert (running.activity, later, kills, backend.pending_kill) == ([], [], [], None)
    backend.act("wc", "kill", 5)
    assert running.activity == [False] and later[0][0] == 5.0


def task(executed: int, started: float) -> TaskStats:
    return TaskStats(task=1, component="b", worker=0, kind="bolt", executed=executed,
                     execute_latency_ms=1.0, worker_started=started)  # fmt: skip


def stats(t: TaskStats, uptime: float) -> TopologyStatistics:
    return TopologyStatistics("t", "running", uptime, 1, {1: t}, aggregate([t]))


def test_a_restart_whose_counts_passed_the_old_ones_is_told_by_the_incarnation() -> None:
    """Found by a review: the worker restarted and counted past its old 100 by the next
    sample (150): by counts alone the window saw 50 executed, not the 150 it did since."""
    h = History()
    before = h.add(0.0, stats(task(100, started=1.0), 10.0))
    now = h.add(10.0, stats(task(150, started=2.0), 20.0))
    assert window(now, before)["components"]["b"]["executed"] == 150
    assert baseline(task(150, 2.0), task(100, 1.0)) is None
    # the same incarnation: a plain difference; no incarnation: counts decide as before
    assert baseline(task(150, 1.0), task(100, 1.0)) is not None
    h2 = History()
    first = h2.add(0.0, stats(task(100, started=1.0), 10.0))
    last = h2.add(10.0, stats(task(150, started=1.0), 20.0))
    assert window(last, first)["components"]["b"]["executed"] == 50
