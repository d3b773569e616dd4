"""The small HTTP server behind `--metrics-port`: Prometheus's `/metrics`, on a thread.

The standard library's WSGI server, threaded (a slow scrape must not hold the next),
with a route table so the same port can serve more than metrics. Loopback unless told
otherwise: what it tells about a topology is for its operators.
"""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.registry import CollectorRegistry

from .errors import ConfigError

App = Callable[[dict, Callable], Iterable[bytes]]


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # a scrape every few seconds is not news


class HttpServer:
    """Serves `routes` (path prefix -> WSGI app) on host:port until `close()`."""

    def __init__(self, host: str, port: int, routes: dict[str, App], what: str = "metrics"):
        self.routes = dict(routes)
        self.on_close: Callable[[], Any] | None = None  # what else to release at close
        try:
            self._httpd = make_server(host, port, self._app, _Server, handler_class=_Quiet)
        except OSError as exc:
            raise ConfigError(
                f"--{what}-port {port}: cannot listen on {host}:{port}: {exc}"
            ) from None
        self.host, self.port = host, self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name=f"http-{what}", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _app(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        for prefix in sorted(self.routes, key=len, reverse=True):
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return self.routes[prefix](environ, start_response)
        body = ("not found; try " + ", ".join(sorted(self.routes)) + "\n").encode()
        start_response("404 Not Found", [("Content-Type", "text/plain"),
                                         ("Content-Length", str(len(body)))])  # fmt: skip
        return [body]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
        if self.on_close is not None:
            self.on_close()


def metrics_server(host: str, port: int, registry: CollectorRegistry) -> HttpServer:
    return HttpServer(host, port, {"/metrics": make_wsgi_app(registry)})
