"""Slow clients against stormish's HTTP server (issue 24, finding 8): does a normal request
wait behind them?

Starts the server `--metrics-port` uses (stormish/httpd.py) on 127.0.0.1 in a process of
its own (as in a daemon: the clients here do not share its GIL) and times GETs of
/metrics (connect, request, whole answer):
- alone: `--requests` of them;
- right after a burst: `--rounds` times, `--slow` connections opened at once (non-blocking
  connects, each then sending half a request line), and one GET at once behind them;
- beside slow clients: `--slow` connections that sent half a request line, half of them
  trickling a byte every 0.5 s, and `--requests` GETs while they are open.
The requirement: every normal request answered within 100 ms. The load average is
printed with the figures: on a busy machine the scheduler's delays show in every column.

Run: python bench/http_slowloris.py [--slow 200] [--requests 200] [--rounds 10]
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

BOUND_MS = 100.0
SERVER = """
import sys
from prometheus_client import CollectorRegistry, Counter
from stormish.httpd import metrics_server

reg = CollectorRegistry()
Counter("bench_requests", "a metric to serve", registry=reg).inc()
server = metrics_server("127.0.0.1", 0, reg)
print(server.port, flush=True)
sys.stdin.read()  # until the bench closes it
server.close()
"""


def timed_gets(port: int, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        out.append((time.perf_counter() - t0) * 1000)
        assert resp.status == 200 and b"bench_requests_total" in body, resp.status
    return out


def burst(port: int, n: int) -> tuple[list[socket.socket], float]:
    """`n` connections opened at once, each sending half a request; then one timed GET."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        socks.append(s)
    ms = timed_gets(port, 1)[0]
    for s in socks:
        try:
            s.send(b"GET /metr")
        except OSError:
            pass
    return socks, ms


def line(label: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return (
        f"{label:<28} n={len(ms):<4} median {statistics.median(ms):6.2f} ms  "
        f"p99 {p99:6.2f} ms  max {ms[-1]:6.2f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--slow", type=int, default=200)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None and server.stdin is not None
    port = int(server.stdout.readline())
    slow: list[socket.socket] = []
    stop = threading.Event()
    try:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"stormish HTTP server on 127.0.0.1:{port}, {a.slow} slow clients, load {load}")
        alone = timed_gets(port, a.requests)
        print(line("alone", alone))
        after = []
        for _ in range(a.rounds):
            socks, ms = burst(port, a.slow)
            after.append(ms)
            for s in socks:
                s.close()
        print(line(f"right after {a.slow} connects", after))
        for _ in range(a.slow):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /metr")
            slow.append(s)

        def trickle() -> None:  # half of them: a byte every 0.5 s
            while not stop.wait(0.5):
                for s in slow[: len(slow) // 2]:
                    try:
                        s.send(b"i")
                    except OSError:
                        pass

        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        beside = timed_gets(port, a.requests)
        print(line(f"beside {a.slow} slow clients", beside))
        worst = max(after + beside)
        verdict = "ok" if worst < BOUND_MS else "OVER"
        print(f"slowest normal request {worst:.2f} ms (bound {BOUND_MS:g} ms): {verdict}")
    finally:
        stop.set()
        for s in slow:
            s.close()
        server.stdin.close()
        server.wait(30)


if __name__ == "__main__":
    main()
