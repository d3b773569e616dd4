"""Serving the UI: on loopback, with /metrics beside it where there is one topology."""

from __future__ import annotations

from typing import Any

from ..httpd import HttpServer
from .backend import ClusterBackend, LocalBackend
from .rest import RestApp

HOST = "127.0.0.1"  # loopback only: see rest.py


def new_token() -> str:
    """A UI token (rest.py): made at each start, printed with the URL."""
    import secrets

    return secrets.token_urlsafe(24)


def entry_url(server: HttpServer) -> str:
    """The URL to open: the page, with the token that lets it in."""
    app = server.routes["/"]
    assert isinstance(app, RestApp)
    return f"{server.url}/?token={app.token}"


def ui_server(client: Any, port: int) -> HttpServer:
    """A nimbus's UI, through `client` (a NimbusClient holding the cluster's keys)."""
    app = RestApp(ClusterBackend(client), token=new_token())
    server = HttpServer(HOST, port, {"/": app}, what="ui")
    server.on_close = client.close
    return server


def local_ui_server(
    running: Any, topology: Any, conf: dict[str, Any], port: int, on_kill: Any
) -> HttpServer:
    """`stormish run --ui PORT`: the page, the REST API and /metrics of the run."""
    from prometheus_client import make_wsgi_app

    from ..metrics import TopologySample, registry

    def samples() -> list[TopologySample]:
        group = running.group
        restarts = {h.index: h.restarts for h in group.handles} if group is not None else {}
        return [TopologySample(running.statistics(), restarts)]

    backend = LocalBackend(running, topology, conf, on_kill)
    routes: dict[str, Any] = {
        "/": RestApp(backend, token=new_token()),
        "/metrics": make_wsgi_app(registry(samples)),
    }
    server = HttpServer(HOST, port, routes, what="ui")
    server.on_close = backend.close  # a kill's wait under way goes with the server
    return server
