"""Storm's UI REST API, in Storm's shapes where they fit, and the page's own view.

GET  /api/v1/cluster/summary                     supervisors, slots, topologies
GET  /api/v1/supervisor/summary                  each supervisor and its slots
GET  /api/v1/nimbus/summary                      the nimbus asked, Leader or not, and the
                                                 leader it names (Storm's leader check)
GET  /api/v1/topology/summary                    each topology
GET  /api/v1/topology/{id}[?window=:all-time]    topologyStats per window, spouts, bolts
                                                 (Storm's default window: all-time)
GET  /api/v1/topology/{id}/component/{c}         per-task (executor) stats, errors
GET  /api/v1/topology/{id}/graph                 the page's view: components (busy share,
                                                 backpressure, root), edges with rates and
                                                 queue fill, tasks with queue fill
GET  /api/v1/topology/{id}/series[?window=600]   the plots' points: the topology's and each
                                                 component's (series.py)
GET  /api/v1/topology/{id}/component/{c}/series  one component's points
GET  /api/v1/topology/{id}/events               edge health events, oldest first
                                                 (topology.edge.health.events)
POST /api/v1/topology/{id}/activate | deactivate | kill/{wait} | rebalance/{wait}
     (Storm's: a wait in seconds, the topology's message timeout without one; a
     rebalance's workers in its JSON body, {"rebalanceOptions": {"numWorkers": N}};
     no body, or no numWorkers: the workers it has, spread again, as Storm's UI)

Routes come from one table (`ROUTES`: method, path pattern, view). A path no route
matches, or a topology or component that does not exist (`NotFound`), is a 404; a path
served for other methods only is a 405 with `Allow`; any other exception in a view (a
`KeyError` too: a bug, not a missing page) is a 500 carrying its traceback (this server
answers loopback only). Every error's JSON has `error` and Storm's `errorMessage`.

Storm's field names and JSON types (UIHelpers.java): Integer fields (`uptimeSeconds`,
`msgTimeout`, counts) are whole numbers, latencies and `capacity` strings of three
decimals, `uptime`/`windowPretty` Storm's "10m 0s"; a component's `name` is its
topology's.

Windows (window.py): the engine's counters are cumulative, so a window is the difference
between the newest sample of the statistics this server took (one per request) and the
oldest one within the window before it; a task whose counts went down restarted, and
counts on from what it had. A window the server has not been up for is as long as its
samples reach, and `windowSeconds` says how long that is (with no earlier sample: the
whole life). Storm's `capacity` (busy time / window) and the latencies are the window's
too, from the change of executed x execute latency (and acked x complete latency)
between the two samples; the window is the one asked (all-time by default, Storm's), the
page's rates are over the last 10 s.

Loopback only, like a daemon without keys: the server (httpd.HttpServer, on 127.0.0.1)
refuses a request whose Host is not a loopback name on every path, this API, the page and
/metrics alike (a DNS-rebinding page cannot read them), and a POST must carry the header
`X-Stormish-UI: 1`, which a cross-site form cannot send (a browser would need a CORS
preflight this server never grants), so no other web page can kill a topology.

A token, made at each start and printed with the URL (`/?token=...`, as Jupyter does),
keeps other users of the machine out: loopback is theirs too, and without it any local
user could kill or rebalance a keyed cluster's topologies, or read their config, through
the UI. Opening the printed URL sets a cookie (HttpOnly, SameSite=Strict) and leaves the
token out of the address bar; every /api call needs it (the cookie, `Authorization:
Bearer TOKEN`, or `?token=TOKEN` for a script). The page itself has no data and loads
without it.

Numbers in a query, a path or a body (`window`, a wait, a rebalance's workers) are
checked here: one that is not a finite number in its range (`inf`, `1e400`, `nan`, `-1`)
is a 400 naming the parameter. An answer never holds NaN or an infinity (a gauge may be
one): those are null, so the answer stays JSON.
"""

from __future__ import annotations

import json
import math
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from typing import Any

from ..cluster.decide import MAX_WAIT_SECS
from ..errors import StormishError
from ..runtime.bp_root import backpressure_roots, congested
from ..runtime.health import merged
from ..runtime.stats import TopologyStatistics
from ..runtime.status import TopologyStatus, shown_status
from .backend import Backend, NotFound
from .series import KEEP as SERIES_KEEP
from .series import TOPOLOGY, Series, fill, task_shares
from .window import KEEP, History, Sample, baseline, window

__all__ = ["KEEP", "History", "RestApp", "component_view", "topology_view", "window"]

RECENT = 10.0  # seconds the page's rates are measured over
ALL_TIME = ":all-time"  # Storm's window of a topology's whole life, its default
SHOWN = ("600", ALL_TIME)  # topologyStats' windows besides the asked one
STATS_FRESH = 0.5  # seconds one topology's statistics serve every request of a refresh
HEADER = "HTTP_X_STORMISH_UI"
COOKIE = "stormish-ui"
# the page's files, all served from the package (no CDN: the UI works offline); a
# browser asks /favicon.ico of every page whatever the page links, so it is the icon too
STATIC = {"/": "index.html", "/index.html": "index.html", "/plot.js": "plot.js",
          "/favicon.svg": "favicon.svg", "/favicon.ico": "favicon.svg"}  # fmt: skip
CONTENT_TYPES = {"html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8",
                 "svg": "image/svg+xml"}  # fmt: skip


def _last_error(tasks: Iterable[Any]) -> str:
    errors = [e for t in tasks for e in t.last_errors]
    return errors[-1].splitlines()[-1] if errors else ""


def shown(row: dict[str, Any]) -> tuple[str, bool]:
    """What `stormish list` shows of a nimbus list row (inactive, killing, rebalancing,
    or its status), and whether its spouts run: not once it ended, nor while it is
    deactivated, being killed or rebalanced."""
    status = shown_status(row)
    live = status in (TopologyStatus.RUNNING, TopologyStatus.STARTING)
    return status, live and row.get("active", True) is not False


# Storm UI's status values (ACTIVE, INACTIVE, REBALANCING, KILLED) for what `stormish
# list` shows: a Storm dashboard alerting on `status != "ACTIVE"` fired for every running
# stormish topology. Storm has no word for a topology starting or ended by itself:
# STARTING, COMPLETE and FAILED stay stormish's. `stormishStatus` keeps the list's word.
_STORM_STATUS = {"running": "ACTIVE", "killing": "KILLED"}


def storm_status(status: str) -> str:
    return _STORM_STATUS.get(status, status.upper())


def topology_view(
    name: str,
    row: dict[str, Any],
    stats: TopologyStatistics,
    win: dict[str, Any],
    extra: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """/api/v1/topology/{id}: Storm's fields (camelCase), latencies in ms as strings of
    three decimals as Storm's UI sends them; counts, capacity and latencies are the
    window's (`win`, window.window), the status is what `stormish list` shows.
    `topologyStats` has the asked window first, then the others of `extra` (label:
    window), as Storm lists several."""
    extra = extra or {}
    by_comp: dict[str, list[Any]] = {}
    for t in stats.tasks.values():
        by_comp.setdefault(t.component, []).append(t)
    w = win["components"]
    spouts, bolts = [], []
    for cname, c in stats.components.items():
        if cname.startswith("__"):
            continue
        tasks = by_comp.get(cname, [])
        cw = w[cname]
        common = {
            "executors": c.tasks,
            "tasks": c.tasks,
            "emitted": cw["emitted"],
            "transferred": cw["transferred"],
            "acked": cw["acked"],
            "failed": cw["failed"],
            "errors": c.errors,
            "lastError": _last_error(tasks),
            "encodedId": _encoded(cname),
        }
        if c.kind == "spout":
            spouts.append(
                {"spoutId": cname, "encodedSpoutId": _encoded(cname),
                 "completeLatency": f"{cw['complete_latency_ms']:.3f}", **common}
            )  # fmt: skip
        else:
            bolts.append(
                {
                    "boltId": cname,
                    "encodedBoltId": _encoded(cname),
                    "executed": cw["executed"],
                    "executeLatency": f"{cw['execute_latency_ms']:.3f}",
                    "processLatency": f"{cw['process_latency_ms']:.3f}",
                    "capacity": f"{cw['capacity']:.3f}",
                    **common,
                }
            )
    user = [n for n in stats.components if not n.startswith("__")]
    spout_ids = [n for n in user if stats.components[n].kind == "spout"]
    status, active = shown(row or {"status": stats.status})
    timeout = row.get("message_timeout")
    label = ":all-time" if win.get("all_time") else win["label"]
    return {
        "id": name,
        "encodedId": _encoded(name),
        "name": name,
        "status": storm_status(status),
        "stormishStatus": str(status),
        "active": active,
        # Storm's: a kill's and a rebalance's default wait, whole seconds (an Integer)
        "msgTimeout": _whole(timeout),
        "window": label,
        "windowHint": _window_hint(label),
        "uptime": _pretty(stats.uptime_seconds),
        "uptimeSeconds": _whole(stats.uptime_seconds),  # Storm's Integer
        "workersTotal": stats.workers,
        "executorsTotal": sum(c.tasks for c in stats.components.values()),
        "tasksTotal": len(stats.tasks),
        "error": stats.error or row.get("error"),
        "topologyStats": [
            _topology_stats(label, win, user, spout_ids),
            *(_topology_stats(k, e, user, spout_ids) for k, e in extra.items() if k != label),
        ],
        "spouts": spouts,
        "bolts": bolts,
    }


def _topology_stats(
    label: str, win: dict[str, Any], user: list[str], spouts: list[str]
) -> dict[str, Any]:
    """One entry of Storm's `topologyStats`: the window's counts of the components
    `user` (the spouts' trees acked and failed) and its complete latency, weighted by
    the trees acked."""
    w = win["components"]
    spout_ws = [w[n] for n in spouts]
    acked = sum(x["acked"] for x in spout_ws)
    complete_ms = sum(x["complete_latency_ms"] * x["acked"] for x in spout_ws)
    complete = complete_ms / acked if acked else 0.0
    return {
        "window": label,
        "windowPretty": _window_hint(label),
        "windowSeconds": round(win["seconds"], 1),
        "emitted": sum(w[n]["emitted"] for n in user),
        "transferred": sum(w[n]["transferred"] for n in user),
        "acked": acked,
        "failed": sum(x["failed"] for x in spout_ws),
        "completeLatency": f"{complete:.3f}",
    }


def component_view(
    stats: TopologyStatistics, component: str, status: str | None = None
) -> dict[str, Any]:
    """/api/v1/topology/{id}/component/{c}: per task, and its errors with tracebacks.
    As Storm's: `id` is the component, `name` the topology's; the counts are each
    task's whole life (`window` ":all-time", Storm's default)."""
    c = stats.components.get(component)
    if c is None:
        raise NotFound(component)
    tasks = [t for t in stats.tasks.values() if t.component == component]
    return {
        "id": component,
        "encodedId": _encoded(component),
        "name": stats.name,
        "topologyId": stats.name,
        "encodedTopologyId": _encoded(stats.name),
        "topologyStatus": status,
        "window": ":all-time",
        "windowHint": _window_hint(":all-time"),
        "componentType": c.kind,
        "executors": c.tasks,
        "tasks": c.tasks,
        "executorStats": [
            {
                "id": f"[{t.task}-{t.task}]",
                "task": t.task,
                "worker": t.worker,
                "emitted": t.emitted,
                "transferred": t.transferred,
                "executed": t.executed,
                "acked": t.acked,
                "failed": t.failed,
                "executeLatency": f"{t.execute_latency_ms:.3f}",
                "completeLatency": f"{t.complete_latency_ms:.3f}",
                "receiveQueue": t.receive_population,
                "receiveCapacity": t.receive_capacity,
                "pendingEmits": t.pending_emits,
                "overflow": t.overflow,
                "backpressure": congested(t),
                "stuckSeconds": round(t.stuck_seconds, 1),  # topology.executor.stuck.secs
                "gauges": dict(sorted(t.gauges.items())),  # a component's gauges()
            }
            for t in tasks
        ],
        "componentErrors": [
            {"task": t.task, "worker": t.worker, "error": e} for t in tasks for e in t.last_errors
        ],
        "errorsTotal": c.errors,
        "gauges": dict(sorted(c.gauges.items())),
    }


def graph_view(
    stats: TopologyStatistics, graph: dict[str, Any], before: TopologyStatistics | None,
    seconds: float,
) -> dict[str, Any]:  # fmt: skip
    """The page's view: each component with its rate, tasks' queues and backpressure;
    each edge with the rate its source emits on its stream. A rate is None without an
    earlier sample; a task that restarted since counts what it did after."""
    bases = {
        tid: baseline(t, before.tasks.get(tid)) if before is not None else None
        for tid, t in stats.tasks.items()
    }

    def grown(comp: str, count: Callable[[Any], int]) -> float:
        return sum(
            count(t) - (count(b) if (b := bases[tid]) is not None else 0)
            for tid, t in stats.tasks.items()
            if t.component == comp
        )

    def rate(n: float) -> float | None:
        return None if before is None or seconds <= 0 else max(0.0, n / seconds)

    def stream_rate(comp: str, stream: str) -> float | None:
        return rate(grown(comp, lambda t: t.emitted_by_stream.get(stream, 0)))

    roots = {r.task.task for r in backpressure_roots(stats.tasks.values())}
    shares = task_shares(stats, before, seconds)
    comps = []
    for name, meta in graph["components"].items():
        c = stats.components.get(name)
        tasks = [t for t in stats.tasks.values() if t.component == name]
        comps.append(
            {
                "id": name,
                "kind": meta["kind"],
                "executedRate": rate(grown(name, lambda t: t.executed)) if c else None,
                "emittedRate": rate(grown(name, lambda t: t.emitted)) if c else None,
                "errors": c.errors if c else 0,
                # for the colours: the busiest task's share of the last seconds in user
                # code (Storm's capacity), the most parked one's share behind
                # backpressure, and whether one is the root `monitor` names
                "capacity": round(max((shares[t.task][0] for t in tasks), default=0.0), 3),
                "backpressure": round(max((shares[t.task][1] for t in tasks), default=0.0), 3),
                "backpressureSeconds": round(c.backpressure_seconds, 1) if c else 0.0,
                "queueFill": round(max((fill(t) for t in tasks), default=0.0), 3),
                "root": any(t.task in roots for t in tasks),
                "tasks": [
                    {
                        "task": t.task,
                        "worker": t.worker,
                        "queue": t.receive_population,
                        "capacity": t.receive_capacity,
                        "fill": round(t.receive_population / t.receive_capacity, 3)
                        if t.receive_capacity
                        else 0.0,
                        "parked": t.pending_emits > 0 or t.parked_seconds > 0,
                        "backpressure": congested(t),
                        "root": t.task in roots,
                    }
                    for t in tasks
                ],
            }
        )
    edges = [
        {
            "source": e["source"],
            "target": e["bolt"],
            "stream": e["stream"],
            "grouping": e["grouping"],
            "rate": stream_rate(e["source"], e["stream"]),
            "queueFill": round(
                max(
                    (fill(t) for t in stats.tasks.values() if t.component == e["bolt"]), default=0.0
                ),
                3,
            ),  # fmt: skip
        }
        for e in graph["edges"]
    ]
    return {"id": stats.name, "status": stats.status, "components": comps, "edges": edges,
            "rateSeconds": round(seconds, 2)}  # fmt: skip


def _pretty(seconds: float) -> str:
    """Storm's prettyUptimeSec: from the largest unit down to seconds, zeros kept
    ("10m 0s", "1d 0h 0m 0s"); "0s" for none (Storm's gives "")."""
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    parts = [(d, "d"), (h, "h"), (m, "m"), (s, "s")]
    while len(parts) > 1 and parts[0][0] == 0:
        parts.pop(0)
    return " ".join(f"{v}{u}" for v, u in parts)


def _window_hint(label: str) -> str:
    """Storm's windowHint and windowPretty: "All time", or the window's seconds pretty."""
    return "All time" if label == ":all-time" else _pretty(float(label))


def _whole(value: float | None) -> int | None:
    """Whole seconds, as Storm's Integer fields (`uptimeSeconds`, `msgTimeout`) are: a
    client that reads them as integers (Go's encoding/json, a typed dashboard) refuses
    4.1 or 30.0."""
    return None if value is None else int(value)


def _encoded(name: str) -> str:
    """Storm's encodedId: the id URL-encoded, for a path segment."""
    from urllib.parse import quote

    return quote(name, safe="")


class RestApp:
    """The WSGI application: the API under /api/v1, the page everywhere else."""

    def __init__(
        self,
        backend: Backend,
        clock: Callable[[], float] = time.monotonic,
        token: str | None = None,
    ):
        """`token`: what every /api call must carry (None: no check, for an app a test
        or an embedding program serves itself)."""
        self.backend = backend
        self.clock = clock
        self.token = token
        self.histories: dict[str, History] = {}
        self.series: dict[str, Series] = {}
        # the last sample per topology: one page refresh asks for the topology, its
        # graph and its series at once, and they share one nimbus call
        self._fresh: dict[str, Sample] = {}

    # -- WSGI -------------------------------------------------------------------------------
    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/")
        if not path.startswith("/api/"):
            given = _query(environ).get("token")
            if given is not None and self._token_ok(given):  # the printed URL: a cookie
                return _enter(start_response, environ, given)
            return self._static(path, start_response)
        if self.token is not None and not self._token_ok(_given_token(environ)):
            return _reply(
                start_response,
                401,
                {"error": "no valid UI token: open the web UI with the URL it printed at "
                 "start (/?token=...), or send Authorization: Bearer TOKEN"},
            )  # fmt: skip
        if method == "POST" and environ.get(HEADER) != "1":
            return _reply(
                start_response, 403, {"error": "a POST needs the X-Stormish-UI: 1 header"}
            )
        try:
            body = self.route(method, path.rstrip("/"), _query(environ), _body(environ))
        except NotFound as exc:
            return _reply(start_response, 404, {"error": f"not found: {exc.args[0]}"})
        except WrongMethod as exc:
            allow = [("Allow", ", ".join(exc.allowed))]
            return _reply(start_response, 405, {"error": str(exc)}, allow)
        except StormishError as exc:
            return _reply(start_response, 409, {"error": str(exc)})
        except ValueError as exc:
            return _reply(start_response, 400, {"error": str(exc)})
        except Exception as exc:  # a bug in a view: say so, with where
            return _reply(
                start_response,
                500,
                {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()},
            )
        return _reply(start_response, 200, body)

    def _token_ok(self, given: str | None) -> bool:
        if self.token is None:
            return True
        import hmac

        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def route(self, method: str, path: str, query: dict[str, str], body: bytes = b"") -> Any:
        """The view of `path`; a POST's view takes the request's body too."""
        parts = path.split("/")
        allowed = []
        if parts[:3] == ["", "api", "v1"]:
            for verb, pattern, view in ROUTES:
                args = _match(pattern, parts[3:])
                if args is not None and verb == method:
                    return view(self, query, *args) if verb == "GET" else view(self, body, *args)
                if args is not None:
                    allowed.append(verb)
        if allowed:
            raise WrongMethod(method, path, sorted(set(allowed)))
        raise NotFound(path)

    # -- views (ROUTES) ---------------------------------------------------------------------
    def _supervisor_summary(self, query: dict[str, str]) -> Any:
        """nimbus's rows (id, host, ports, running, heard_seconds_ago, failed_ports)
        with Storm's slot counts."""
        return {"supervisors": [_supervisor_row(s) for s in self.backend.supervisors()]}

    def _nimbus_summary(self, query: dict[str, str]) -> Any:
        """Storm's nimbus summary: each nimbus known here, "Leader" or "Not a Leader"
        (a leader check for monitoring), its version and uptime where known."""
        version = _version()
        out = []
        for n in self.backend.nimbuses():
            address = n.get("address") or ""
            hostport = address.split("://", 1)[-1]
            host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
            up = n.get("uptime_seconds")
            out.append({
                "host": host or "localhost", "port": int(port) if port.isdigit() else None,
                "status": "Leader" if n.get("leader") else "Not a Leader",
                "version": version,
                "nimbusUpTime": None if up is None else _pretty(up),
                "nimbusUpTimeSeconds": _whole(up),
            })  # fmt: skip
        return {"nimbuses": out}

    def _topology_summary(self, query: dict[str, str]) -> Any:
        rows = self.backend.topologies()
        self._forget_all_but({r["name"] for r in rows})
        return {"topologies": [self._summary_row(r) for r in rows]}

    def _act(self, body: bytes, name: str, verb: str, arg: str | None = None) -> Any:
        """Storm's paths: `kill/{wait}`, `rebalance/{wait}` with the workers in the JSON
        body (`{"rebalanceOptions": {"numWorkers": N}}`); no wait: the topology's
        message timeout."""
        wait = _path_number(verb, arg) if arg is not None else None
        workers = _rebalance_workers(body) if verb == "rebalance" else None
        self.backend.act(name, verb, wait, workers)
        self._fresh.pop(name, None)  # what the page shows next is after the act
        return {"topologyOperation": verb, "topologyId": name, "status": "success"}

    def _topology(self, query: dict[str, str], name: str) -> Any:
        """Storm's: `window` is ":all-time" unless asked (600 was this API's default:
        a Storm script that differences successive counts saw them go down). The
        spouts and bolts are the asked window's; `topologyStats` has it first, then
        Storm's 600 s and all-time windows."""
        sample = self._sample(name)
        row = next((r for r in self.backend.topologies() if r["name"] == name), {})
        w = query.get("window", ALL_TIME)
        if w != ALL_TIME:
            _number("window", w, f"seconds > 0 or {ALL_TIME}", above=0.0)
        wins = {label: self._window(name, sample, label) for label in dict.fromkeys([w, *SHOWN])}
        return topology_view(name, row, sample.stats, wins.pop(w), wins)

    def _window(self, name: str, sample: Sample, label: str) -> dict[str, Any]:
        """The window `label` (seconds, or ":all-time") to `sample`."""
        if label == ALL_TIME:
            return window(sample, None) | {"all_time": True}
        secs = float(label)
        # a topology younger than the window: its whole life is in it; an older one
        # without an earlier sample (the first request) too, as far as known
        young = sample.stats.uptime_seconds <= secs
        before = None if young else self.histories[name].since(sample.t, secs)
        return window(sample, before) | {"label": str(round(secs))}

    def _graph(self, query: dict[str, str], name: str) -> Any:
        sample = self._sample(name)
        before = self.histories[name].since(sample.t, RECENT)
        secs = sample.t - before.t if before else 0.0
        graph = self.backend.graph(name)
        return graph_view(sample.stats, graph, before.stats if before else None, secs)

    def _component(self, query: dict[str, str], name: str, component: str) -> Any:
        stats = self._sample(name).stats
        row = next((r for r in self.backend.topologies() if r["name"] == name), None)
        return component_view(stats, component, storm_status(shown(row)[0]) if row else None)

    def _series(self, query: dict[str, str], name: str) -> Any:
        sample = self._sample(name)
        stats, now = sample.stats, sample.t
        secs = _series_window(query)
        ring = self.series[name]
        comps = [c for c in stats.components if not c.startswith("__")]
        return {
            "topologyId": name,
            "windowSeconds": secs,
            "step": ring.step,
            "topology": ring.points(TOPOLOGY, now, secs),
            "components": {c: ring.points(c, now, secs) for c in comps},
        }

    def _events(self, query: dict[str, str], name: str) -> Any:
        stats = self._sample(name).stats
        return {"topologyId": name, "events": merged(stats.tasks.values())}

    def _component_series(self, query: dict[str, str], name: str, component: str) -> Any:
        sample = self._sample(name)
        stats, now = sample.stats, sample.t
        if component not in stats.components:
            raise NotFound(component)
        secs = _series_window(query)
        ring = self.series[name]
        return {
            "topologyId": name,
            "component": component,
            "windowSeconds": secs,
            "step": ring.step,
            "points": ring.points(component, now, secs),
        }

    def _sample(self, name: str) -> Sample:
        """The topology's statistics now (or from the last STATS_FRESH seconds) and
        the time they were taken: a view measures its window to that time, never to a
        later clock read (the sample would be its own baseline: an empty window)."""
        now = self.clock()
        fresh = self._fresh.get(name)
        if fresh is not None and now - fresh.t < STATS_FRESH:
            return fresh
        stats = self.backend.stats(name)
        sample = self.histories.setdefault(name, History()).add(now, stats)
        self._fresh[name] = sample
        self.series.setdefault(name, Series()).add(now, stats)
        return sample

    def _forget_all_but(self, names: set[str]) -> None:
        """A nimbus UI runs for months while topologies come and go: the rings of one
        that is no longer listed (killed, removed) go with it."""
        for kept in (self.histories, self.series, self._fresh):
            for gone in [n for n in kept if n not in names]:
                del kept[gone]

    def cluster_summary(self) -> dict[str, Any]:
        """Storm's /cluster/summary fields that stormish has (no memory or CPU
        resources: it schedules none)."""
        sups = self.backend.supervisors()
        tops = self.backend.topologies()
        total = sum(len(s.get("ports", ())) for s in sups)
        used = sum(len(s.get("running", ())) for s in sups)
        version = _version()
        return {
            "supervisors": len(sups),
            "slotsTotal": total,
            "slotsUsed": used,
            "slotsFree": max(0, total - used),
            "topologies": len(tops),
            "executorsTotal": sum(int(r.get("tasks") or 0) for r in tops),
            "tasksTotal": sum(int(r.get("tasks") or 0) for r in tops),
            "stormVersion": version,  # Storm's name; stormish's version
            "stormishVersion": version,
        }

    def _summary_row(self, r: dict[str, Any]) -> dict[str, Any]:
        status, active = shown(r)
        up = r.get("uptime_seconds")
        tasks = r.get("tasks")
        return {
            "id": r["name"],
            "encodedId": _encoded(r["name"]),
            "name": r["name"],
            "status": storm_status(status),
            "stormishStatus": str(status),
            "uptime": None if up is None else _pretty(up),
            "uptimeSeconds": _whole(up),  # Storm's Integer
            "workersTotal": r.get("workers"),
            "executorsTotal": tasks,  # an executor per task, as stormish runs them
            "tasksTotal": tasks,
            "active": active,
            "error": r.get("error"),
            "restarts": r.get("restarts", 0),
            "waiting": r.get("waiting"),
        }

    def _static(self, path: str, start_response: Callable) -> Iterable[bytes]:
        name = STATIC.get(path)
        if name is None:
            return _reply(start_response, 404, {"error": f"not found: {path}"})
        body = resources.files("stormish.ui").joinpath("static", name).read_bytes()
        start_response("200 OK", [("Content-Type", CONTENT_TYPES[name.rsplit(".", 1)[1]]),
                                  ("Content-Length", str(len(body))),
                                  ("Cache-Control", "no-store")])  # fmt: skip
        return [body]


def _supervisor_row(s: dict[str, Any]) -> dict[str, Any]:
    total, used = len(s.get("ports") or ()), len(s.get("running") or ())
    return {**s, "slotsTotal": total, "slotsUsed": used, "slotsFree": max(0, total - used)}


def _summary(app: RestApp, query: dict[str, str]) -> Any:
    return app.cluster_summary()


class WrongMethod(LookupError):
    """A path served for other methods only (a GET of a kill, a POST of a summary):
    a 405 naming them, not a 404 that says the path does not exist."""

    def __init__(self, method: str, path: str, allowed: list[str]):
        super().__init__(f"{method} {path}: not allowed (use {' or '.join(allowed)})")
        self.allowed = allowed


def _act_route(verb: str) -> Callable[..., Any]:
    def act(app: RestApp, body: bytes, name: str, arg: str | None = None) -> Any:
        return app._act(body, name, verb, arg)

    return act


# (method, path under /api/v1 with {placeholders}, view): the first that matches serves;
# a placeholder takes one path segment, passed to the view in order
ROUTES: list[tuple[str, str, Callable[..., Any]]] = [
    ("GET", "cluster/summary", _summary),
    ("GET", "supervisor/summary", RestApp._supervisor_summary),
    ("GET", "nimbus/summary", RestApp._nimbus_summary),
    ("GET", "topology/summary", RestApp._topology_summary),
    ("GET", "topology/{id}", RestApp._topology),
    ("GET", "topology/{id}/graph", RestApp._graph),
    ("GET", "topology/{id}/series", RestApp._series),
    ("GET", "topology/{id}/events", RestApp._events),
    ("GET", "topology/{id}/component/{c}", RestApp._component),
    ("GET", "topology/{id}/component/{c}/series", RestApp._component_series),
    *[
        ("POST", f"topology/{{id}}/{verb}{tail}", _act_route(verb))
        for verb in ("activate", "deactivate", "kill", "rebalance")
        for tail in (("", "/{arg}") if verb in ("kill", "rebalance") else ("",))
    ],
]


def _match(pattern: str, parts: list[str]) -> list[str] | None:
    """The placeholders' values when `parts` (the path's segments) match `pattern`."""
    want = pattern.split("/")
    if len(want) != len(parts):
        return None
    args = []
    for w, p in zip(want, parts, strict=True):
        if w.startswith("{"):
            args.append(p)
        elif w != p:
            return None
    return args


def _number(
    name: str, text: str, wanted: str, above: float = -1.0, most: float = math.inf
) -> float:
    """`text` as a finite number greater than `above` and at most `most`; otherwise a
    ValueError (a 400) naming the parameter: `float()` takes 'inf', 'nan' and '1e400'
    (inf), which would reach a `round()` or an `int()` and fail there as a 500."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= above or value > most:
        raise ValueError(f"{name} {text!r}: {wanted}")
    return value


def _series_window(query: dict[str, str]) -> float:
    """The plots' window: `window` seconds (> 0), at most what a ring keeps."""
    secs = _number("window", query.get("window", str(SERIES_KEEP)), "seconds > 0", above=0.0)
    return min(secs, SERIES_KEEP)


def _path_number(verb: str, text: str) -> float:
    """The number after a verb: a kill's or a rebalance's wait (seconds from 0 to
    Storm's largest, an i32)."""
    what = f"{verb} wait" if verb in ("kill", "rebalance") else f"{verb} argument"
    return _number(
        what, text, f"seconds from 0 to {MAX_WAIT_SECS}, a finite number", most=MAX_WAIT_SECS
    )


REBALANCE_BODY = '{"rebalanceOptions": {"numWorkers": N}}'


def _rebalance_workers(body: bytes) -> int | None:
    """Storm's rebalance body: the workers in `rebalanceOptions.numWorkers` (a whole
    number > 0). No body, or one without `numWorkers` (Storm's UI sends none): None,
    the topology's number of workers, spread again, as Storm rebalances then. What is
    there and is not that is a 400 saying what is needed, so that a script that puts
    the workers in the path (read as the wait) learns it at once."""
    need = (
        f"a rebalance's JSON body is {REBALANCE_BODY}, or none "
        "(Storm's; the number in the path is the wait in seconds)"
    )
    if not body.strip():
        return None
    try:
        options = json.loads(body)
    except ValueError:
        raise ValueError(f"{need}: the body is not JSON") from None
    if options is None:
        return None
    if not isinstance(options, dict):
        raise ValueError(need)
    options = options.get("rebalanceOptions")
    if options is None:
        return None
    if not isinstance(options, dict):
        raise ValueError(need)
    if set(options) - {"numWorkers"}:
        extra = ", ".join(sorted(set(options) - {"numWorkers"}))
        raise ValueError(f"rebalanceOptions {extra}: not supported (only numWorkers)")
    if "numWorkers" not in options:
        return None
    n = options["numWorkers"]
    whole = isinstance(n, int | float) and not isinstance(n, bool) and math.isfinite(n)
    if not whole or n != int(n) or n < 1:
        raise ValueError(f"rebalance numWorkers {n!r}: a whole number > 0")
    return int(n)


def _body(environ: dict) -> bytes:
    """A POST's body (httpd.py has read it whole: it announced its length)."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return b""
    stream = environ.get("wsgi.input")
    return stream.read(length) if stream is not None and length > 0 else b""


def _query(environ: dict) -> dict[str, str]:
    from urllib.parse import parse_qsl

    return dict(parse_qsl(environ.get("QUERY_STRING", "")))


def _given_token(environ: dict) -> str | None:
    """The token a request carries: `Authorization: Bearer`, `?token=`, or the cookie
    the printed URL set."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    if auth.startswith("Bearer "):
        return auth[7:].strip()
    query = _query(environ).get("token")
    if query is not None:
        return query
    mine = _cookie_name(environ)
    for part in environ.get("HTTP_COOKIE", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == mine:
            return value
    return None


def _cookie_name(environ: dict) -> str:
    """A cookie per port: a browser keeps cookies by host, not port, so one name for
    every UI on 127.0.0.1 had a second UI's token replace the first's (401 there), and
    sent it to any other server on loopback."""
    return f"{COOKIE}-{environ.get('SERVER_PORT', '')}"


def _enter(start_response: Callable, environ: dict, token: str) -> list[bytes]:
    """The printed URL, opened: the cookie set, and on to the page (always "/": the
    request's own path in a Location header was an open redirect, `/%5Cevil.example`)
    without the token in the address bar (nor in the browser's history)."""
    cookie = f"{_cookie_name(environ)}={token}; HttpOnly; SameSite=Strict; Path=/"
    start_response(
        "303 See Other",
        [("Location", "/"), ("Content-Length", "0"), ("Cache-Control", "no-store"),
         ("Set-Cookie", cookie)],
    )  # fmt: skip
    return [b""]


def _finite(value: Any) -> Any:
    """`value` with every NaN and infinity as None: JSON has no such number (a gauge
    of a component may be one) and a browser's JSON.parse refuses the whole answer."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _reply(
    start_response: Callable, code: int, body: Any, headers: Sequence[tuple[str, str]] = ()
) -> list[bytes]:
    """The answer as JSON. An error's carries Storm's `errorMessage` beside `error`
    (both the message: a Storm script reads the one, the page the other)."""
    if code >= 400 and isinstance(body, dict) and "error" in body:
        body = {**body, "errorMessage": body["error"]}
    data = json.dumps(_finite(body), default=str, allow_nan=False).encode()
    reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
              404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
              500: "Internal Server Error"}  # fmt: skip
    start_response(
        f"{code} {reason[code]}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(data))),
         ("Cache-Control", "no-store"), *headers],
    )  # fmt: skip
    return [data]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stormish")
    except PackageNotFoundError:
        return "unknown"
