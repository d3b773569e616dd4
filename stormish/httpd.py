"""The small HTTP server behind `--metrics-port` and the web UI: WSGI routes on a thread.

Why not socketserver's ThreadingMixIn, which it was: a thread per connection for as long
as the client kept it, reads without a timeout and a listen backlog of 5, so clients
that open connections and send half a request (slowloris) each held a thread for ever
(200 of them: 200 threads), and a burst of connects overflowed the listen queue (issue
24). Nor a bounded pool of threads that read the requests themselves: N slow clients
would hold its N threads, and the next normal request would wait for their timeout.
Here a connection costs a buffer, not a thread, until its whole request is in:

- one thread (`Server.serve`) accepts and reads, non-blocking, with a selector, until a
  connection's whole request is there (the head and the body its Content-Length
  announces: `framed`). A request that is not complete `REQUEST_TIMEOUT` seconds after
  its connection was accepted is dropped (a client sending a byte at a time included:
  the deadline is from the accept, not from the last byte), as is one larger than
  `MAX_HEAD` + `MAX_BODY`; past `MAX_PENDING` connections still reading, the oldest is
  dropped; a full descriptor table pauses accepting for a moment instead of spinning;
- a complete request goes to a fixed pool of `THREADS` handler threads through a queue
  of at most `QUEUE` (beyond it: a 503 at once). A handler runs the WSGI app on the
  request it is given whole, writes the answer with `SEND_TIMEOUT` on the socket and
  closes the connection: HTTP/1.0, no keep-alive, so no idle connection holds anything;
- the listen backlog is `BACKLOG`.

So N slow clients cost N buffers and a look each in the selector, and no thread: a
normal request waits only for the complete requests queued before it. Measured on
loopback, 2 cores (bench/http_slowloris.py): a GET of /metrics beside 200 slow
connections, or right after 200 connects at once, median 1-2.5 ms, slowest 10-21 ms.
The backlog is that large because a burst of connects that overflows the listen queue
costs the next client a SYN retried after 1 s (a backlog of 5 did, ~1,020 ms).

A server listening on loopback answers only requests whose Host is a loopback name, on
every path (the UI, its REST API, /metrics alike): a page of another site that rebinds
its DNS name to 127.0.0.1 sends its own name as Host, so it cannot read or act on them.
"""

from __future__ import annotations

import collections
import errno
import io
import json
import logging
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import make_wsgi_app
from prometheus_client.registry import CollectorRegistry

from .errors import ConfigError
from .transport.security import is_loopback

App = Callable[[dict, Callable], Iterable[bytes]]

log = logging.getLogger("stormish.httpd")

BACKLOG = 1024  # the listen queue (socketserver's default: 5; the kernel caps it at somaxconn)
THREADS = 8  # handler threads: requests answered at once
QUEUE = 64  # complete requests waiting for a handler; beyond: 503
MAX_PENDING = 512  # connections still sending their request; beyond: the oldest dropped
REQUEST_TIMEOUT = 5.0  # seconds from accept to a whole request
SEND_TIMEOUT = 10.0  # seconds a handler waits on a client that does not read its answer
MAX_HEAD = 64 << 10  # request line and headers
MAX_BODY = 1 << 20
PAUSE = 0.1  # seconds accepting rests when the process is out of file descriptors
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def framed(buf: bytes) -> int | str | None:
    """How long the request at the start of `buf` is, once all of it is there; None while
    it is not; the status line to refuse it with when it never can be (too large, a
    Content-Length that is not a number, a chunked body). Pure, for tests."""
    end, sep = buf.find(b"\r\n\r\n"), 4
    lf = buf.find(b"\n\n")
    if lf != -1 and (end == -1 or lf < end):
        end, sep = lf, 2
    if end == -1:
        return "431 Request Header Fields Too Large" if len(buf) > MAX_HEAD else None
    if end > MAX_HEAD:
        return "431 Request Header Fields Too Large"
    length = 0
    for line in buf[:end].split(b"\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            if not value.strip().isdigit():
                return "400 Bad Request"
            length = int(value)
        elif name == b"transfer-encoding":
            return "411 Length Required"  # a body must say its length
    if length > MAX_BODY:
        return "413 Content Too Large"
    total = end + sep + length
    return total if len(buf) >= total else None


def loopback_host(header: str) -> bool:
    """Whether a Host header names this machine's loopback ('localhost:8080', '[::1]')."""
    host = header.strip().lower()
    if host.startswith("["):
        host = host[: host.find("]") + 1]
    else:
        host = host.rsplit(":", 1)[0]
    return host in LOOPBACK_HOSTS


class _Writer(io.BufferedIOBase):
    """A handler's answer, straight onto its socket (`sendall`, under SEND_TIMEOUT)."""

    def __init__(self, sock: socket.socket):
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sock.sendall(data)
        return len(data)


class _Handler(WSGIRequestHandler):
    """One whole request, already read by the accept loop, answered on its socket."""

    def __init__(self, request: Any, client_address: Any, server: Any, data: bytes = b""):
        self._data = data
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        self.connection = self.request
        self.rfile = io.BytesIO(self._data)
        self.wfile = _Writer(self.request)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # a scrape every few seconds is not news


class _Conn:
    __slots__ = ("sock", "address", "buf", "deadline")

    def __init__(self, sock: socket.socket, address: Any, deadline: float):
        self.sock, self.address, self.deadline = sock, address, deadline
        self.buf = b""


class Server(WSGIServer):
    """The standard library's WSGI server (its binding and WSGI environ), served by an
    accept loop and a fixed pool of handler threads instead of a thread per connection
    (the module's docstring says why)."""

    request_queue_size = BACKLOG
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], app: App):
        super().__init__(address, _Handler)
        self.set_app(app)
        self.socket.setblocking(False)
        self._pending: collections.OrderedDict[int, _Conn] = collections.OrderedDict()
        self._jobs: queue.SimpleQueue[tuple[_Conn, bytes] | None] = queue.SimpleQueue()
        self._stopping = False
        self._paused_until: float | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.socket, selectors.EVENT_READ)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._done = threading.Event()
        self._threads = [
            threading.Thread(target=self._work, name=f"http-handler-{i}", daemon=True)
            for i in range(THREADS)
        ]
        for t in self._threads:
            t.start()

    # -- the accept loop ------------------------------------------------------------------
    def serve(self) -> None:
        try:
            while not self._stopping:
                timeout = self._expire(time.monotonic())
                for key, _ in self._sel.select(timeout):
                    try:
                        if key.fileobj is self.socket:
                            self._accept()
                        elif key.fileobj is self._wake_r:
                            self._wake_r.recv(64)
                        else:
                            self._read(key.data)
                    except Exception:  # one connection's trouble must not stop the server
                        log.exception(f"http server on port {self.server_port}")
                        if key.data is not None:
                            self._drop(key.data)
        finally:
            for c in list(self._pending.values()):
                self._drop(c)
            self._done.set()

    def _expire(self, now: float) -> float:
        """Drop the connections past their deadline (they are in accept order, so in
        deadline order); how long the selector may wait for the next deadline."""
        if self._paused_until is not None and now >= self._paused_until:
            self._paused_until = None
            self._sel.register(self.socket, selectors.EVENT_READ)
        while self._pending:
            c = next(iter(self._pending.values()))
            if c.deadline > now:
                return min(c.deadline - now, 1.0)
            self._drop(c)
        return PAUSE if self._paused_until is not None else 1.0

    def _accept(self) -> None:
        for _ in range(256):  # a burst at a time: the ones reading get their turn too
            try:
                sock, address = self.socket.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    self._out_of_files()
                return
            sock.setblocking(False)
            c = _Conn(sock, address, time.monotonic() + REQUEST_TIMEOUT)
            self._pending[sock.fileno()] = c
            self._sel.register(sock, selectors.EVENT_READ, c)
            if len(self._pending) > MAX_PENDING:
                self._drop(next(iter(self._pending.values())))

    def _out_of_files(self) -> None:
        """No descriptor for a new connection: free the oldest still reading, or rest the
        listening socket a moment (it stays readable: accepting again would spin)."""
        if self._pending:
            self._drop(next(iter(self._pending.values())))
            return
        log.warning(f"http server on port {self.server_port}: out of file descriptors")
        self._sel.unregister(self.socket)
        self._paused_until = time.monotonic() + PAUSE

    def _read(self, c: _Conn) -> None:
        try:
            data = c.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(c)
            return
        c.buf += data
        size = framed(c.buf)
        if size is None:
            return
        if isinstance(size, str):
            self._refuse(c, size)
            return
        self._sel.unregister(c.sock)
        del self._pending[c.sock.fileno()]
        if self._jobs.qsize() >= QUEUE:
            self._refuse(c, "503 Service Unavailable")
            return
        self._jobs.put((c, c.buf[:size]))

    def _refuse(self, c: _Conn, status: str) -> None:
        """Answer `status` without waiting (the answer is small) and close."""
        body = f"{status}\n".encode()
        head = f"HTTP/1.0 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        try:
            c.sock.send(head.encode() + b"Connection: close\r\n\r\n" + body)
        except OSError:
            pass
        self._drop(c)

    def _drop(self, c: _Conn) -> None:
        fd = c.sock.fileno()
        if self._pending.pop(fd, None) is not None:
            self._sel.unregister(c.sock)
        c.sock.close()

    # -- the handler threads ------------------------------------------------------------
    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            c, data = job
            try:
                c.sock.settimeout(SEND_TIMEOUT)
                _Handler(c.sock, c.address, self, data)
            except OSError:
                pass  # the client went away or did not read its answer in time
            except Exception:
                log.exception(f"http server on port {self.server_port}: a request failed")
            finally:
                self.shutdown_request(c.sock)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, close what is still reading, let the handlers finish what they
        hold (each bounded by SEND_TIMEOUT and its app), close the listening socket."""
        if self._stopping:
            return
        self._stopping = True
        self._wake_w.send(b"x")
        self._done.wait(timeout)
        for _ in self._threads:
            self._jobs.put(None)
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()
        self.server_close()


class HttpServer:
    """Serves `routes` (path prefix -> WSGI app) on host:port until `close()`."""

    def __init__(self, host: str, port: int, routes: dict[str, App], what: str = "metrics"):
        self.routes = dict(routes)
        self.on_close: Callable[[], Any] | None = None  # what else to release at close
        self.loopback = is_loopback(host)  # then every path checks the Host header
        try:
            self._httpd = Server((host, port), self._app)
        except OSError as exc:
            raise ConfigError(
                f"--{what}-port {port}: cannot listen on {host}:{port}: {exc}"
            ) from None
        self.host, self.port = host, self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve, name=f"http-{what}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _app(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        host = environ.get("HTTP_HOST", "")
        if self.loopback and not loopback_host(host):
            body = json.dumps({"error": f"host {host!r}: loopback only"}).encode()
            start_response("403 Forbidden", [("Content-Type", "application/json"),
                                             ("Content-Length", str(len(body)))])  # fmt: skip
            return [body]
        path = environ.get("PATH_INFO", "/")
        for prefix in sorted(self.routes, key=len, reverse=True):
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return self.routes[prefix](environ, start_response)
        body = ("not found; try " + ", ".join(sorted(self.routes)) + "\n").encode()
        start_response("404 Not Found", [("Content-Type", "text/plain"),
                                         ("Content-Length", str(len(body)))])  # fmt: skip
        return [body]

    def close(self) -> None:
        self._httpd.stop()
        self._thread.join(5)
        if self.on_close is not None:
            self.on_close()


def metrics_server(host: str, port: int, registry: CollectorRegistry) -> HttpServer:
    return HttpServer(host, port, {"/metrics": make_wsgi_app(registry)})
