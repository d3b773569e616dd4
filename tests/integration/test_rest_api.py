"""Storm's UI REST API over a real `stormish run --ui` (2 worker
processes) and a real nimbus (`--ui-port`), with plain HTTP from this process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest

from stormish.local import poll_for
from stormish.local.workers import _child_env

TOPOLOGY = """
import os
import time
from stormish import BasicBolt, Spout, Topology

RELEASE = {release!r}


class Numbers(Spout):
    outputs = ["n"]

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        if self.n < 2000:
            self.n += 1
            self.emit([self.n], msg_id=self.n)
        elif os.path.exists(RELEASE):
            self.finish()


class Picky(BasicBolt):
    outputs = ["n"]

    def execute(self, tup):
        time.sleep(0.0005)  # simulated work: a capacity well above 0
        if tup.values[0] % 500 == 0:
            raise ValueError(f"no multiples of 500: {{tup.values[0]}}")
        self.emit(tup.values)


class Sink(BasicBolt):
    def execute(self, tup):
        pass


t = Topology("restful", config={{"topology.workers": 2, "topology.fail.fast": False}})
t.set_spout("numbers", Numbers())
t.set_bolt("picky", Picky(), parallelism=2).shuffle_grouping("numbers")
t.set_bolt("sink", Sink()).shuffle_grouping("picky")
topology = t
"""


TOKENS: dict[str, str] = {}  # "host:port" -> the token its UI printed (ui/rest.py)


def entered(url: str) -> str:
    """A printed UI URL (.../?token=T): its base; the token kept for `get` and `post`."""
    parts = urllib.parse.urlsplit(url.strip())
    token = urllib.parse.parse_qs(parts.query).get("token")
    if token:
        TOKENS[parts.netloc] = token[0]
    return f"{parts.scheme}://{parts.netloc}"


def _auth(url: str, token: bool = True) -> dict[str, str]:
    known = TOKENS.get(urllib.parse.urlsplit(url).netloc)
    return {"Authorization": f"Bearer {known}"} if token and known else {}


def get(url: str, host: str | None = None, token: bool = True) -> tuple[int, dict]:
    headers = _auth(url, token)
    if host:
        headers["Host"] = host
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def post(url: str, header: bool = True, token: bool = True, body: Any = None) -> tuple[int, dict]:
    """A POST; `body`, when given, as JSON (a rebalance's options)."""
    headers = _auth(url, token)
    if header:
        headers["X-Stormish-UI"] = "1"
    data = b"" if body is None else json.dumps(body).encode()
    if body is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, method="POST", data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def start(tmp_path, *extra: str) -> tuple[subprocess.Popen, str]:
    path = tmp_path / "restful.py"
    path.write_text(textwrap.dedent(TOPOLOGY.format(release=str(tmp_path / "release"))))
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "run", str(path), "--ui", "0", *extra],
        env=_child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen = []
    for line in proc.stderr:  # the workers' error reports may come first
        seen.append(line)
        if line.startswith("web UI: http://127.0.0.1:"):
            return proc, entered(line.split()[2])
    proc.kill()  # no run to hand over: nothing may be left running
    proc.communicate(timeout=30)
    raise AssertionError(f"no web UI line: {''.join(seen)[-2000:]}")


@pytest.fixture
def run_with_ui(tmp_path):
    proc, url = start(tmp_path)
    yield proc, url, tmp_path / "release"
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=30)


def test_storms_rest_shapes_from_a_local_run(run_with_ui):
    proc, url, _release = run_with_ui
    api = url + "/api/v1"

    def settled():
        code, t = get(api + "/topology/restful?window=600")  # Storm's default: :all-time
        done = code == 200 and {b["boltId"]: b for b in t["bolts"]}.get("sink", {})
        return done and done["executed"] == 1996 and t

    t = poll_for(settled, 60, 0.1, "every tuple through")
    assert t["status"] == "ACTIVE" and t["workersTotal"] == 2 and t["tasksTotal"] == 6
    (spout,) = t["spouts"]
    assert spout["spoutId"] == "numbers" and spout["emitted"] == 2000 and spout["tasks"] == 1
    bolts = {b["boltId"]: b for b in t["bolts"]}
    assert set(bolts) == {"picky", "sink"}  # the acker is the engine's, not shown
    assert bolts["picky"]["executed"] == 2000 and bolts["picky"]["failed"] == 4
    assert bolts["picky"]["errors"] == 4
    assert bolts["picky"]["lastError"].startswith("ValueError: no multiples of 500")
    stats = t["topologyStats"][0]
    # Storm's capacity: executed in the window x execute latency / the window's length
    # (each shown rounded: the window's seconds to 0.1 s, the latency to 1 us, the
    # capacity to 0.001, so it must lie between the bounds those roundings allow)
    picky = bolts["picky"]
    ms, capacity = float(picky["executeLatency"]), float(picky["capacity"])
    secs = stats["windowSeconds"]
    assert ms >= 0.5
    low = picky["executed"] * (ms - 0.0005) / 1000.0 / (secs + 0.05) - 0.0005
    high = picky["executed"] * (ms + 0.0005) / 1000.0 / max(secs - 0.05, 0.01) + 0.0005
    assert low <= capacity <= high, (picky, stats)
    assert capacity > 0.05
    assert stats["window"] == "600" and stats["acked"] == 1996 and stats["failed"] == 4
    _, summary = get(api + "/topology/summary")
    assert [r["id"] for r in summary["topologies"]] == ["restful"]
    _, cluster = get(api + "/cluster/summary")
    assert cluster["topologies"] == 1 and cluster["supervisors"] == 0
    _, comp = get(api + "/topology/restful/component/picky")
    assert comp["componentType"] == "bolt" and len(comp["executorStats"]) == 2
    assert sum(e["executed"] for e in comp["executorStats"]) == 2000
    assert len(comp["componentErrors"]) == 4 and comp["errorsTotal"] == 4
    assert all("Traceback" in e["error"] for e in comp["componentErrors"])
    assert "in Picky.execute at" in comp["componentErrors"][0]["error"]
    _, graph = get(api + "/topology/restful/graph")
    assert {(e["source"], e["target"]) for e in graph["edges"]} == {
        ("numbers", "picky"), ("picky", "sink")
    }  # fmt: skip
    assert {c["id"]: len(c["tasks"]) for c in graph["components"]} == {
        "numbers": 1, "picky": 2, "sink": 1
    }  # fmt: skip
    # errors are named: an unknown topology or component, a bad window
    assert get(api + "/topology/ghost")[0] == 404
    assert get(api + "/topology/restful/component/ghost")[0] == 404
    assert get(api + "/topology/restful?window=-1")[0] == 400
    for w in ("inf", "1e400", "nan"):  # these were a 500
        code, body = get(api + f"/topology/restful?window={w}")
        assert code == 400 and body["error"].startswith(f"window '{w}'"), body
    assert proc.poll() is None


def test_the_api_is_loopback_only_and_a_post_needs_the_ui_header(run_with_ui):
    proc, url, _release = run_with_ui
    api = url + "/api/v1"
    code, body = get(api + "/topology/summary", host="attacker.example:80")
    assert code == 403 and "loopback only" in body["error"]
    # /metrics on the UI port too (it skipped the check)
    code, body = get(url + "/metrics", host="attacker.example:80")
    assert code == 403 and "loopback only" in body["error"]
    req = urllib.request.Request(url + "/metrics")
    with urllib.request.urlopen(req, timeout=20) as r:
        assert r.status == 200 and b"stormish_" in r.read()
    code, body = post(api + "/topology/restful/kill/0", header=False)  # a cross-site form
    assert code == 403 and "X-Stormish-UI" in body["error"]
    assert proc.poll() is None
    # Storm's path: the wait in the path, the workers in the body (without them: the
    # number it has, as Storm's UI); a body that is not Storm's is a 400
    code, body = post(api + "/topology/restful/rebalance/3", body=[1])
    assert code == 400 and "rebalanceOptions" in body["error"], body
    code, body = post(api + "/topology/restful/rebalance/3")
    assert code == 409 and "needs a cluster" in body["error"], body
    code, body = post(
        api + "/topology/restful/rebalance/3", body={"rebalanceOptions": {"numWorkers": 1}}
    )
    assert code == 409 and "needs a cluster" in body["error"]
    code, body = post(api + "/topology/restful/kill/0")
    assert code == 200 and body == {
        "topologyOperation": "kill", "topologyId": "restful", "status": "success"
    }  # fmt: skip
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "topology 'restful': killed from the web UI after" in out


def test_the_api_needs_the_token_the_ui_printed(run_with_ui):
    """Loopback is every local user's: without the printed token no /api call is
    served, a read or a kill (found by a bug hunt: any local user could kill a keyed
    cluster's topologies through it). The printed URL sets a cookie the page's calls
    carry, and leaves the token out of the address bar."""
    proc, url, _release = run_with_ui
    api = url + "/api/v1"
    for code, body in (
        get(api + "/topology/summary", token=False),
        post(api + "/topology/restful/kill/0", token=False),
        get(api + "/topology/summary?token=wrong", token=False),
    ):
        assert code == 401 and "open the web UI with the URL it printed" in body["error"]
    token = TOKENS[urllib.parse.urlsplit(url).netloc]
    assert get(api + f"/topology/summary?token={token}", token=False)[0] == 200
    no_redirect = urllib.request.build_opener(_NoRedirect)
    try:
        no_redirect.open(f"{url}/?token={token}", timeout=20)
        raise AssertionError("the token URL did not redirect")
    except urllib.error.HTTPError as e:
        assert e.code == 303 and e.headers["Location"] == "/"
        cookie = e.headers["Set-Cookie"]
    port = urllib.parse.urlsplit(url).port
    # one cookie per port: two UIs in one browser kept replacing each other's
    assert cookie.startswith(f"stormish-ui-{port}={token};") and "HttpOnly" in cookie, cookie
    assert "SameSite=Strict" in cookie
    req = urllib.request.Request(
        api + "/topology/summary", headers={"Cookie": f"stormish-ui-{port}={token}"}
    )
    with urllib.request.urlopen(req, timeout=20) as r:
        assert r.status == 200
    try:  # the token URL of any path goes to "/" (never the request's own path)
        no_redirect.open(f"{url}/%5Cevil.example/?token={token}", timeout=20)
    except urllib.error.HTTPError as e:
        assert e.code == 303 and e.headers["Location"] == "/"
    with urllib.request.urlopen(url + "/", timeout=20) as r:  # the page: no data in it
        assert r.status == 200 and b"<html" in r.read().lower()
    assert proc.poll() is None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None


def test_the_summary_says_whether_the_topology_is_active(run_with_ui):
    """A local run's summary said `"active": true` after a deactivate."""
    proc, url, _release = run_with_ui
    api = url + "/api/v1"

    def active() -> bool:
        (row,) = get(api + "/topology/summary")[1]["topologies"]
        return row["active"]

    assert active() is True
    assert post(api + "/topology/restful/deactivate")[0] == 200
    assert active() is False
    assert post(api + "/topology/restful/activate")[0] == 200
    assert active() is True
    assert post(api + "/topology/restful/kill/0")[0] == 200
    proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_a_kill_with_a_wait_deactivates_first_and_stops_the_run_after_it(run_with_ui):
    """Found: a local run's kill/{wait} stopped at once whatever the wait. As a nimbus
    does: the spouts deactivated, the topology KILLING for the wait, then stopped (a
    second kill with a shorter wait ends it sooner)."""
    proc, url, _release = run_with_ui
    api = url + "/api/v1"
    assert post(api + "/topology/restful/kill/600")[0] == 200
    (row,) = get(api + "/topology/summary")[1]["topologies"]
    assert (row["status"], row["active"]) == ("KILLED", False), row
    code, t = get(api + "/topology/restful")
    assert code == 200 and t["status"] == "KILLED" and t["msgTimeout"] == 30
    assert proc.poll() is None  # the wait: the run goes on, its spouts deactivated
    assert post(api + "/topology/restful/kill/0")[0] == 200
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "topology 'restful': killed from the web UI after" in out
