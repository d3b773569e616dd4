"""Storm UI's REST API (Storm's STORM-UI-REST-API.md, storm-webapp's UIHelpers.java) as a
Storm user's scripts and dashboards read it, against a real `stormish run --ui` (2
worker processes) and a real nimbus (`--ui-port`), with plain HTTP from this process.

What is checked is what such a script relies on: the field names, their JSON types
(Storm's Integer fields are integers, its latencies and capacity strings of a double),
Storm's default window (`:all-time`), the error JSON (`errorMessage`) and status codes,
and that nothing changes without the token and the POST header. What stormish does not
serve (resources, logviewer links, history/summary, ...) is listed in docs/ui.md."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request

import pytest

from stormish.testing import poll_for

from .test_cluster import Cluster
from .test_rest_api import TOKENS, entered, get, post, start
from .test_ui_cluster import idle

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def local(tmp_path):
    """`stormish run --ui 0` of test_rest_api's topology: its process and base URL."""
    proc, url = start(tmp_path)
    yield proc, url
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=30)


def _settled(api: str) -> dict:
    def done():
        code, t = get(api + "/topology/restful")
        sink = code == 200 and {b["boltId"]: b for b in t["bolts"]}.get("sink", {})
        return sink and sink["executed"] == 1996 and t

    return poll_for(done, 60, 0.1, "every tuple through")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _double_str(v) -> bool:
    """Storm's "String (double value returned in String format)"."""
    return isinstance(v, str) and float(v) >= 0.0


def test_a_topology_has_storms_fields_types_and_default_window(local):
    """Found: `uptimeSeconds` (4.1) and `msgTimeout` (30.0) were floats where Storm's
    are Integers (Go's encoding/json refuses 4.1 for an int); without `window` the
    counts were the last 600 s where Storm's default is `:all-time` (a script that
    differences successive counts saw them go down), and `topologyStats` held that
    window alone; no `window`/`windowHint`, no `encodedSpoutId`/`encodedBoltId`."""
    proc, url = local
    api = url + "/api/v1"
    t = _settled(api)  # no window: Storm's default
    assert t["window"] == ":all-time" and t["windowHint"] == "All time", t
    for key in ("uptimeSeconds", "msgTimeout", "workersTotal", "executorsTotal", "tasksTotal"):
        assert _is_int(t[key]), (key, t[key])
    assert t["msgTimeout"] == 30 and t["tasksTotal"] == 6 and isinstance(t["uptime"], str)
    stats = {s["window"]: s for s in t["topologyStats"]}
    assert t["topologyStats"][0]["window"] == ":all-time" and set(stats) == {":all-time", "600"}
    assert stats[":all-time"]["windowPretty"] == "All time"
    assert stats["600"]["windowPretty"] == "10m 0s"  # Storm's prettyUptimeSec
    for s in stats.values():
        assert all(_is_int(s[k]) for k in ("emitted", "transferred", "acked", "failed")), s
        assert _double_str(s["completeLatency"]), s
    assert stats[":all-time"]["acked"] == 1996 and stats[":all-time"]["failed"] == 4
    (spout,) = t["spouts"]
    assert spout["spoutId"] == spout["encodedSpoutId"] == "numbers"
    assert _double_str(spout["completeLatency"]) and _is_int(spout["executors"])
    assert spout["emitted"] == 2000 and spout["lastError"] == ""
    bolts = {b["boltId"]: b for b in t["bolts"]}
    picky = bolts["picky"]
    assert picky["encodedBoltId"] == "picky" and picky["executed"] == 2000
    for key in ("capacity", "executeLatency", "processLatency"):
        assert _double_str(picky[key]), (key, picky)
    assert all(_is_int(picky[k]) for k in ("executors", "tasks", "emitted", "acked", "failed"))
    assert picky["lastError"].startswith("ValueError: no multiples of 500")
    # the other windows Storm takes, each named as asked, first
    for w, hint in (("600", "10m 0s"), ("10800", "3h 0m 0s"), ("86400", "1d 0h 0m 0s")):
        code, t = get(api + f"/topology/restful?window={w}&sys=false")
        assert code == 200 and (t["window"], t["windowHint"]) == (w, hint), t
        assert t["topologyStats"][0]["window"] == w
        # a run younger than the window: the window is its whole life, as Storm's
        assert {b["boltId"]: b for b in t["bolts"]}["picky"]["executed"] == 2000
    code, t = get(api + "/topology/restful?window=:all-time&sys=true")
    assert code == 200 and t["window"] == ":all-time"
    assert proc.poll() is None


def test_the_summaries_and_a_component_have_storms_fields(local):
    """Found: the summary's `uptimeSeconds` was a float and it had no `uptime`,
    `tasksTotal` or `executorsTotal`; the cluster summary no `stormVersion`,
    `executorsTotal`, `tasksTotal`; a component's `name` was the component (Storm's is
    the topology's; the component is `id`)."""
    proc, url = local
    api = url + "/api/v1"
    _settled(api)
    _, cluster = get(api + "/cluster/summary")
    assert isinstance(cluster["stormVersion"], str), cluster
    assert (cluster["executorsTotal"], cluster["tasksTotal"]) == (6, 6), cluster
    for key in ("supervisors", "topologies", "slotsTotal", "slotsUsed", "slotsFree"):
        assert _is_int(cluster[key]), (key, cluster)
    (row,) = get(api + "/topology/summary")[1]["topologies"]
    assert (row["id"], row["name"], row["encodedId"]) == ("restful", "restful", "restful")
    assert _is_int(row["uptimeSeconds"]) and isinstance(row["uptime"], str), row
    assert (row["tasksTotal"], row["executorsTotal"], row["workersTotal"]) == (6, 6, 2), row
    code, comp = get(api + "/topology/restful/component/picky")
    assert code == 200
    assert (comp["id"], comp["name"], comp["topologyId"]) == ("picky", "restful", "restful")
    assert comp["componentType"] == "bolt" and comp["encodedId"] == "picky"
    assert (comp["window"], comp["topologyStatus"]) == (":all-time", "ACTIVE"), comp
    assert _is_int(comp["executors"]) and _is_int(comp["tasks"])
    for e in comp["executorStats"]:
        assert e["id"] == f"[{e['task']}-{e['task']}]" and _double_str(e["executeLatency"])
    assert sum(e["executed"] for e in comp["executorStats"]) == 2000
    assert [e["error"].splitlines()[0] for e in comp["componentErrors"]] == [
        f"ValueError: no multiples of 500: {n}" for n in (500, 1000, 1500, 2000)
    ]
    _, spout = get(api + "/topology/restful/component/numbers")
    assert spout["componentType"] == "spout" and spout["name"] == "restful"
    assert proc.poll() is None


def _raw(url: str, method: str, header: bool = True) -> tuple[int, dict, dict]:
    token = TOKENS[urllib.parse.urlsplit(url).netloc]
    headers = {"Authorization": f"Bearer {token}"}
    if header:
        headers["X-Stormish-UI"] = "1"
    req = urllib.request.Request(url, method=method, headers=headers, data=None)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def test_a_local_run_is_its_own_leading_nimbus(local):
    """/nimbus/summary (Storm's leader check, which a monitoring probe asks first) was
    a 404: a local run answers with itself, leading."""
    _, url = local
    api = url + "/api/v1"
    code, body = get(api + "/nimbus/summary")
    assert code == 200, body
    (n,) = body["nimbuses"]
    assert n["status"] == "Leader" and _is_int(n["nimbusUpTimeSeconds"]), n


def test_errors_are_storms_json_with_the_right_status(local):
    """Found: an error had `error` alone (Storm's scripts read `errorMessage`); a GET
    of a kill, a POST of a summary, a PUT or DELETE were a 404 saying the path does not
    exist (a 405 naming the method to use); `activate/5` was taken as an activate."""
    proc, url = local
    api = url + "/api/v1"
    _settled(api)
    for path, code in (
        ("/topology/ghost", 404),
        ("/topology/restful/component/ghost", 404),
        ("/topology/restful?window=abc", 400),
        ("/topology/restful?window=-600", 400),
        ("/topology/restful?window=inf", 400),
        ("/history/summary", 404),
    ):
        got, body = get(api + path)
        assert got == code and body["errorMessage"] == body["error"] and body["error"], body
    # the wrong method: a 405 with Allow, and nothing done
    status, headers, body = _raw(api + "/topology/restful/kill/0", "GET")
    assert status == 405 and headers["Allow"] == "POST", (status, body)
    assert "use POST" in body["errorMessage"]
    status, headers, body = _raw(api + "/topology/summary", "POST")
    assert status == 405 and headers["Allow"] == "GET", (status, body)
    for method in ("PUT", "DELETE"):
        status, headers, body = _raw(api + "/topology/restful/kill/0", method)
        assert status == 405 and headers["Allow"] == "POST", (method, status, body)
    code, body = post(api + "/topology/restful/activate/5")  # Storm has no such path
    assert code == 404 and "errorMessage" in body, body
    # waits that are not seconds: a 400 naming the wait, the topology untouched
    for verb in ("kill", "rebalance"):
        for wait in ("-1", "abc", "1e400", "nan"):
            code, body = post(api + f"/topology/restful/{verb}/{wait}")
            assert code == 400 and body["errorMessage"].startswith(f"{verb} wait {wait!r}")
    code, body = post(
        api + "/topology/restful/rebalance/0",
        body={"rebalanceOptions": {"numWorkers": 2, "executors": {"picky": 3}}, "callback": "f"},
    )
    assert code == 400 and "executors" in body["errorMessage"], body
    # no token, no header: refused, and the topology still active
    code, body = post(api + "/topology/restful/deactivate", token=False)
    assert code == 401 and body["errorMessage"] == body["error"], body
    code, body = post(api + "/topology/restful/kill/0", header=False)
    assert code == 403 and "X-Stormish-UI" in body["errorMessage"], body
    (row,) = get(api + "/topology/summary")[1]["topologies"]
    assert (row["status"], row["active"]) == ("ACTIVE", True), row
    assert row["stormishStatus"] == "running"  # Storm's ACTIVE; the list's word kept
    assert proc.poll() is None


def test_a_nimbus_serves_storms_supervisor_slots_and_the_message_timeout(ui_cluster):
    """Found on a nimbus: `supervisors[]` had no `slotsTotal`/`slotsUsed`/`slotsFree`
    (Storm's, what a capacity dashboard reads), `msgTimeout` was null (nimbus did not
    list it), and the summaries had no `tasksTotal`/`executorsTotal`."""
    c: Cluster = ui_cluster
    where = os.path.join(c.data, "ui-url")
    poll_for(lambda: os.path.exists(where), 30, 0.1, "nimbus's UI address")
    with open(where) as fh:
        api = entered(fh.read()) + "/api/v1"
    poll_for(lambda: get(api + "/cluster/summary")[1]["supervisors"] == 2, 30, 0.1, "2 sups")
    c.call("submit", (idle("ported"), {}))
    c.wait_status("ported", "running")

    def sups() -> list[dict]:
        return get(api + "/supervisor/summary")[1]["supervisors"]

    poll_for(lambda: sum(s["slotsUsed"] for s in sups()) == 2, 60, 0.2, "2 slots used")
    for s in sups():
        assert s["slotsTotal"] == 2 and s["slotsFree"] == 2 - s["slotsUsed"], s
        assert isinstance(s["id"], str) and isinstance(s["host"], str)
    _, cluster = get(api + "/cluster/summary")
    # spout, bolt and 2 ackers (one a worker), as Storm counts its system executors
    assert (cluster["slotsUsed"], cluster["tasksTotal"], cluster["executorsTotal"]) == (2, 4, 4)
    (row,) = get(api + "/topology/summary")[1]["topologies"]
    assert _is_int(row["uptimeSeconds"]) and row["tasksTotal"] == 4, row
    code, t = get(api + "/topology/ported")
    assert code == 200 and t["msgTimeout"] == 3 and _is_int(t["msgTimeout"]), t
    assert t["window"] == ":all-time" and _is_int(t["uptimeSeconds"])
    # Storm's leader check: the one nimbus leads, with its version and whole seconds up
    (n,) = get(api + "/nimbus/summary")[1]["nimbuses"]
    assert (n["host"], n["port"], n["status"]) == ("127.0.0.1", c.api, "Leader"), n
    assert _is_int(n["nimbusUpTimeSeconds"]) and n["version"] == cluster["stormVersion"]
    assert post(api + "/topology/ported/kill/0")[0] == 200
    c.wait_status("ported", "killed")
