"""Storm's UI REST API, in Storm's shapes where they fit, and the page's own view.

GET  /api/v1/cluster/summary                     supervisors, slots, topologies
GET  /api/v1/supervisor/summary                  each supervisor and its slots
GET  /api/v1/topology/summary                    each topology
GET  /api/v1/topology/{id}[?window=600]          topologyStats per window, spouts, bolts
GET  /api/v1/topology/{id}/component/{c}         per-task (executor) stats, errors
GET  /api/v1/topology/{id}/graph                 the page's view: components (busy share,
                                                 backpressure, root), edges with rates and
                                                 queue fill, tasks with queue fill
GET  /api/v1/topology/{id}/series[?window=600]   the plots' points: the topology's and each
                                                 component's (series.py)
GET  /api/v1/topology/{id}/component/{c}/series  one component's points
GET  /api/v1/topology/{id}/events               edge health events, oldest first
                                                 (topology.edge.health.events)
POST /api/v1/topology/{id}/activate | deactivate | kill/{wait} | rebalance/{workers}

Routes come from one table (`ROUTES`: method, path pattern, view). A path no route
matches, or a topology or component that does not exist (`NotFound`), is a 404; any other
exception in a view (a `KeyError` too: a bug, not a missing page) is a 500 carrying its
traceback (this server answers loopback only).

Windows: the engine's counters are cumulative, so a window is the difference between now
and the oldest sample of the statistics this server took within the window (one per
request; a window the server has not been up for is as long as its samples reach, and
`windowSeconds` says how long that is). Storm's `capacity` (executed x execute latency /
window) is over the window asked (600 s by default, Storm's), the page's rates over the
last 10 s.

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

Numbers in a query or a path (`window`, a kill's wait, a rebalance's workers) are checked
here: one that is not a finite number in its range (`inf`, `1e400`, `nan`, `-1`) is a 400
naming the parameter.
"""

from __future__ import annotations

import json
import math
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from typing import Any

from ..errors import StormishError
from ..runtime.bp_root import backpressure_roots, congested
from ..runtime.health import merged
from ..runtime.stats import TopologyStatistics
from .backend import Backend, NotFound
from .series import KEEP as SERIES_KEEP
from .series import TOPOLOGY, Series, fill, task_shares

RECENT = 10.0  # seconds the page's rates are measured over
STATS_FRESH = 0.5  # seconds one topology's statistics serve every request of a refresh
KEEP = 600.0  # the longest window kept (Storm's 10 minutes)
HEADER = "HTTP_X_STORMISH_UI"
COOKIE = "stormish-ui"
# the page's files, all served from the package (no CDN: the UI works offline); a
# browser asks /favicon.ico of every page whatever the page links, so it is the icon too
STATIC = {"/": "index.html", "/index.html": "index.html", "/plot.js": "plot.js",
          "/favicon.svg": "favicon.svg", "/favicon.ico": "favicon.svg"}  # fmt: skip
CONTENT_TYPES = {"html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8",
                 "svg": "image/svg+xml"}  # fmt: skip


class History:
    """Samples of one topology's statistics, newest last, up to `KEEP` seconds old."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, TopologyStatistics]] = deque()
        self.lock = threading.Lock()

    def add(self, now: float, stats: TopologyStatistics) -> None:
        with self.lock:
            self.samples.append((now, stats))
            while self.samples and now - self.samples[0][0] > KEEP + RECENT:
                self.samples.popleft()

    def since(self, now: float, seconds: float) -> tuple[float, TopologyStatistics] | None:
        """The oldest sample within `seconds` before `now`, other than `now`'s own."""
        with self.lock:
            for t, s in self.samples:
                if now - t <= seconds and t < now:
                    return t, s
        return None


def window(stats: TopologyStatistics, before: tuple[float, TopologyStatistics] | None,
           now: float) -> dict[str, Any]:  # fmt: skip
    """Per component the counts within the window and its length (all time: no sample)."""
    if before is None:
        secs = stats.uptime_seconds
        base: Mapping[str, Any] = {}
    else:
        secs = now - before[0]
        base = before[1].components
    out: dict[str, Any] = {"seconds": secs, "components": {}}
    for name, c in stats.components.items():
        b = base.get(name)
        d = {
            k: getattr(c, k) - (getattr(b, k) if b is not None else 0)
            for k in ("emitted", "transferred", "executed", "acked", "failed", "timed_out")
        }
        d["capacity"] = d["executed"] * c.execute_latency_ms / 1000.0 / secs if secs > 0 else 0.0
        out["components"][name] = d
    return out


def _last_error(tasks: Iterable[Any]) -> str:
    errors = [e for t in tasks for e in t.last_errors]
    return errors[-1].splitlines()[-1] if errors else ""


def topology_view(
    name: str, status: dict[str, Any], stats: TopologyStatistics, win: dict[str, Any]
) -> dict[str, Any]:
    """/api/v1/topology/{id}: Storm's fields (camelCase), latencies in ms as strings of
    three decimals as Storm's UI sends them."""
    by_comp: dict[str, list[Any]] = {}
    for t in stats.tasks.values():
        by_comp.setdefault(t.component, []).append(t)
    w = win["components"]
    spouts, bolts = [], []
    for cname, c in stats.components.items():
        if cname.startswith("__"):
            continue
        tasks = by_comp.get(cname, [])
        common = {
            "executors": c.tasks,
            "tasks": c.tasks,
            "emitted": w[cname]["emitted"],
            "transferred": w[cname]["transferred"],
            "acked": w[cname]["acked"],
            "failed": w[cname]["failed"],
            "errors": c.errors,
            "lastError": _last_error(tasks),
            "encodedId": cname,
        }
        if c.kind == "spout":
            spouts.append(
                {"spoutId": cname, "completeLatency": f"{c.complete_latency_ms:.3f}", **common}
            )
        else:
            bolts.append(
                {
                    "boltId": cname,
                    "executed": w[cname]["executed"],
                    "executeLatency": f"{c.execute_latency_ms:.3f}",
                    "processLatency": f"{c.process_latency_ms:.3f}",
                    "capacity": f"{w[cname]['capacity']:.3f}",
                    **common,
                }
            )
    user = [c for n, c in stats.components.items() if not n.startswith("__")]
    spout_cs = [c for c in user if c.kind == "spout"]
    acked = sum(c.acked for c in spout_cs)
    complete = sum(c.complete_latency_ms * c.acked for c in spout_cs) / acked if acked else 0.0
    totals = {
        k: sum(w[c.component][k] for c in user) for k in ("emitted", "transferred")
    }  # fmt: skip
    return {
        "id": name,
        "name": name,
        "status": status.get("status", stats.status).upper(),
        "uptime": _pretty(stats.uptime_seconds),
        "uptimeSeconds": round(stats.uptime_seconds, 1),
        "workersTotal": stats.workers,
        "executorsTotal": sum(c.tasks for c in stats.components.values()),
        "tasksTotal": len(stats.tasks),
        "error": stats.error or status.get("error"),
        "topologyStats": [
            {
                "window": ":all-time" if win.get("all_time") else win["label"],
                "windowPretty": "All time" if win.get("all_time") else _pretty(float(win["label"])),
                "windowSeconds": round(win["seconds"], 1),
                "emitted": totals["emitted"],
                "transferred": totals["transferred"],
                "acked": sum(w[c.component]["acked"] for c in spout_cs),
                "failed": sum(w[c.component]["failed"] for c in spout_cs),
                "completeLatency": f"{complete:.3f}",
            }
        ],
        "spouts": spouts,
        "bolts": bolts,
    }


def component_view(stats: TopologyStatistics, component: str) -> dict[str, Any]:
    """/api/v1/topology/{id}/component/{c}: per task, and its errors with tracebacks."""
    c = stats.components.get(component)
    if c is None:
        raise NotFound(component)
    tasks = [t for t in stats.tasks.values() if t.component == component]
    return {
        "id": component,
        "name": component,
        "topologyId": stats.name,
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
    each edge with the rate its source emits on its stream."""

    def stream_count(s: TopologyStatistics | None, comp: str, stream: str) -> int:
        if s is None:
            return 0
        return sum(
            t.emitted_by_stream.get(stream, 0) for t in s.tasks.values() if t.component == comp
        )

    def rate(now_n: float, then_n: float) -> float | None:
        return None if before is None or seconds <= 0 else max(0.0, (now_n - then_n) / seconds)

    roots = {r.task.task for r in backpressure_roots(stats.tasks.values())}
    shares = task_shares(stats, before, seconds)
    comps = []
    for name, meta in graph["components"].items():
        c = stats.components.get(name)
        b = before.components.get(name) if before is not None else None
        tasks = [t for t in stats.tasks.values() if t.component == name]
        comps.append(
            {
                "id": name,
                "kind": meta["kind"],
                "executedRate": rate(c.executed, b.executed if b else 0) if c else None,
                "emittedRate": rate(c.emitted, b.emitted if b else 0) if c else None,
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
            "rate": rate(
                stream_count(stats, e["source"], e["stream"]),
                stream_count(before, e["source"], e["stream"]),
            ),
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
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return " ".join(f"{v}{u}" for v, u in ((d, "d"), (h, "h"), (m, "m"), (s, "s")) if v) or "0s"


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
        # the last statistics per topology and when: one page refresh asks for the
        # topology, its graph and its series at once, and they share one nimbus call
        self._fresh: dict[str, tuple[float, TopologyStatistics]] = {}

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
            body = self.route(method, path.rstrip("/"), _query(environ))
        except NotFound as exc:
            return _reply(start_response, 404, {"error": f"not found: {exc.args[0]}"})
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

    def route(self, method: str, path: str, query: dict[str, str]) -> Any:
        parts = path.split("/")
        if parts[:3] == ["", "api", "v1"]:
            for verb, pattern, view in ROUTES:
                args = _match(pattern, parts[3:]) if verb == method else None
                if args is not None:
                    return view(self, query, *args)
        raise NotFound(path)

    # -- views (ROUTES) ---------------------------------------------------------------------
    def _supervisor_summary(self, query: dict[str, str]) -> Any:
        return {"supervisors": self.backend.supervisors()}

    def _topology_summary(self, query: dict[str, str]) -> Any:
        rows = self.backend.topologies()
        self._forget_all_but({r["name"] for r in rows})
        return {"topologies": [self._summary_row(r) for r in rows]}

    def _act(self, query: dict[str, str], name: str, verb: str, arg: str | None = None) -> Any:
        number = _path_number(verb, arg) if arg is not None else None
        self.backend.act(name, verb, number)
        self._fresh.pop(name, None)  # what the page shows next is after the act
        return {"topologyOperation": verb, "topologyId": name, "status": "success"}

    def _topology(self, query: dict[str, str], name: str) -> Any:
        stats, now = self._stats(name), self.clock()
        status = next((r for r in self.backend.topologies() if r["name"] == name), {})
        w = query.get("window", "600")
        if w == ":all-time":
            win = window(stats, None, now) | {"all_time": True}
        else:
            secs = _number("window", w, "seconds > 0 or :all-time", above=0.0)
            # a topology younger than the window: its whole life is in it
            young = stats.uptime_seconds <= secs
            win = window(stats, None if young else self.histories[name].since(now, secs), now)
            win["label"] = str(round(secs))
        return topology_view(name, status, stats, win)

    def _graph(self, query: dict[str, str], name: str) -> Any:
        stats, now = self._stats(name), self.clock()
        before = self.histories[name].since(now, RECENT)
        secs = now - before[0] if before else 0.0
        return graph_view(stats, self.backend.graph(name), before[1] if before else None, secs)

    def _component(self, query: dict[str, str], name: str, component: str) -> Any:
        return component_view(self._stats(name), component)

    def _series(self, query: dict[str, str], name: str) -> Any:
        stats, now = self._stats(name), self.clock()
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
        stats = self._stats(name)
        return {"topologyId": name, "events": merged(stats.tasks.values())}

    def _component_series(self, query: dict[str, str], name: str, component: str) -> Any:
        stats, now = self._stats(name), self.clock()
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

    def _stats(self, name: str) -> TopologyStatistics:
        now = self.clock()
        fresh = self._fresh.get(name)
        if fresh is not None and now - fresh[0] < STATS_FRESH:
            return fresh[1]
        stats = self.backend.stats(name)
        self._fresh[name] = (now, stats)
        self.histories.setdefault(name, History()).add(now, stats)
        self.series.setdefault(name, Series()).add(now, stats)
        return stats

    def _forget_all_but(self, names: set[str]) -> None:
        """A nimbus UI runs for months while topologies come and go: the rings of one
        that is no longer listed (killed, removed) go with it."""
        for kept in (self.histories, self.series, self._fresh):
            for gone in [n for n in kept if n not in names]:
                del kept[gone]

    def cluster_summary(self) -> dict[str, Any]:
        sups = self.backend.supervisors()
        tops = self.backend.topologies()
        total = sum(len(s.get("ports", ())) for s in sups)
        used = sum(len(s.get("running", ())) for s in sups)
        return {
            "supervisors": len(sups),
            "slotsTotal": total,
            "slotsUsed": used,
            "slotsFree": max(0, total - used),
            "topologies": len(tops),
            "stormishVersion": _version(),
        }

    def _summary_row(self, r: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": r["name"],
            "name": r["name"],
            "status": str(r["status"]).upper(),
            "workersTotal": r.get("workers"),
            "uptimeSeconds": r.get("uptime_seconds"),
            "active": r.get("active", True),
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


def _summary(app: RestApp, query: dict[str, str]) -> Any:
    return app.cluster_summary()


def _act_route(verb: str) -> Callable[..., Any]:
    def act(app: RestApp, query: dict[str, str], name: str, arg: str | None = None) -> Any:
        return app._act(query, name, verb, arg)

    return act


# (method, path under /api/v1 with {placeholders}, view): the first that matches serves;
# a placeholder takes one path segment, passed to the view in order
ROUTES: list[tuple[str, str, Callable[..., Any]]] = [
    ("GET", "cluster/summary", _summary),
    ("GET", "supervisor/summary", RestApp._supervisor_summary),
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
        for tail in ("", "/{arg}")
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


def _number(name: str, text: str, wanted: str, above: float = -1.0) -> float:
    """`text` as a finite number greater than `above`; otherwise a ValueError (a 400)
    naming the parameter: `float()` takes 'inf', 'nan' and '1e400' (inf), which would
    reach a `round()` or an `int()` and fail there as a 500."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= above:
        raise ValueError(f"{name} {text!r}: {wanted}")
    return value


def _series_window(query: dict[str, str]) -> float:
    """The plots' window: `window` seconds (> 0), at most what a ring keeps."""
    secs = _number("window", query.get("window", str(SERIES_KEEP)), "seconds > 0", above=0.0)
    return min(secs, SERIES_KEEP)


def _path_number(verb: str, text: str) -> float:
    """The number after a verb: a kill's wait (seconds >= 0), a rebalance's workers."""
    if verb == "rebalance":
        n = _number("rebalance workers", text, "a whole number > 0", above=0.0)
        if n != int(n):
            raise ValueError(f"rebalance workers {text!r}: a whole number > 0")
        return n
    what = "kill wait" if verb == "kill" else f"{verb} argument"
    return _number(what, text, "seconds >= 0, a finite number")


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


def _reply(start_response: Callable, code: int, body: Any) -> list[bytes]:
    data = json.dumps(body, default=str).encode()
    reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
              404: "Not Found", 409: "Conflict", 500: "Internal Server Error"}  # fmt: skip
    start_response(
        f"{code} {reason[code]}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(data))),
         ("Cache-Control", "no-store")],
    )  # fmt: skip
    return [data]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stormish")
    except PackageNotFoundError:
        return "unknown"
