"""The `stormish` command line (click).

`run` always runs on the embedded local cluster; `submit` sends to a nimbus when one is
configured (--nimbus, STORMISH_NIMBUS) and otherwise runs locally and says so.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import Any

import click

from . import config as _config
from .errors import StormishError, WorkerError

STATUS_EVERY = 1.0


def _overrides(pairs: tuple[str, ...], profile: str | None, workers: int | None) -> dict:
    from .loader import load_profile

    conf: dict[str, Any] = {}
    if profile:
        conf.update(load_profile(profile))
    for p in pairs:
        k, v = _config.parse_override(p)
        conf[k] = v
    if workers is not None:
        conf["topology.workers"] = workers
    return conf


def _run_options(f: Any) -> Any:
    f = click.option(
        "-c",
        "--config",
        "pairs",
        multiple=True,
        metavar="KEY=VALUE",
        help="override a config key (value read as JSON when it parses)",
    )(f)
    f = click.option(
        "--profile",
        default=None,
        help="wait-strategy profile: low-latency, balanced, low-cpu or a file",
    )(f)
    f = click.option(
        "--time", "seconds", type=float, default=None, help="stop after this many seconds"
    )(f)
    f = click.option(
        "--stats-json",
        type=click.Path(dir_okay=False),
        default=None,
        help="write final statistics (per component and task) as JSON",
    )(f)
    f = click.option(
        "--workers",
        "-w",
        type=click.IntRange(min=1),
        default=None,
        help="worker processes (topology.workers)",
    )(f)
    return f


@click.group()
@click.version_option(package_name="stormish")
def main() -> None:
    """stormish: Storm-style stream topologies in Python."""


@main.command()
@click.argument("topology_file", type=click.Path())
@_run_options
def run(
    topology_file: str,
    pairs: tuple[str, ...],
    profile: str | None,
    seconds: float | None,
    stats_json: str | None,
    workers: int | None,
) -> None:
    """Run TOPOLOGY_FILE on the embedded local cluster."""
    sys.exit(_run_local(topology_file, pairs, profile, seconds, stats_json, workers))


def _nimbus_options(f: Any) -> Any:
    f = click.option(
        "--keys",
        envvar="STORMISH_KEYS",
        default=None,
        help="CURVE keys directory of the cluster (or STORMISH_KEYS)",
    )(f)
    f = click.option(
        "--nimbus",
        envvar="STORMISH_NIMBUS",
        default=None,
        help="nimbus address host[:port] (or STORMISH_NIMBUS)",
    )(f)
    return f


def _client(nimbus: str | None, keys: str | None) -> Any:
    from .cluster.client import NimbusClient
    from .transport.security import security_for

    if not nimbus:
        click.echo("error: no nimbus given (--nimbus or STORMISH_NIMBUS)", err=True)
        sys.exit(2)
    return _guard(lambda: NimbusClient(nimbus, security_for(keys)))


def _call(nimbus: str | None, keys: str | None, verb: str, payload: Any = None) -> Any:
    client = _client(nimbus, keys)
    try:
        return _guard(lambda: client.call(verb, payload))
    finally:
        client.close()


@main.command()
@click.argument("topology_file", type=click.Path())
@_nimbus_options
@click.option("--wait", is_flag=True, help="wait until the topology ends and print its summary")
@click.option("--timeout", type=float, default=None, help="with --wait: give up after seconds")
@_run_options
def submit(
    topology_file: str,
    nimbus: str | None,
    keys: str | None,
    wait: bool,
    timeout: float | None,
    pairs: tuple[str, ...],
    profile: str | None,
    seconds: float | None,
    stats_json: str | None,
    workers: int | None,
) -> None:
    """Submit TOPOLOGY_FILE to a nimbus, or run it locally when none is configured."""
    if not nimbus:
        click.echo(
            "no nimbus configured (--nimbus or STORMISH_NIMBUS): running on the embedded "
            "local cluster",
            err=True,
        )
        sys.exit(_run_local(topology_file, pairs, profile, seconds, stats_json, workers))
    from .loader import load_topology_file

    conf = _guard(lambda: _overrides(pairs, profile, workers))
    topology, _after = _guard(lambda: load_topology_file(topology_file))
    client = _client(nimbus, keys)
    try:
        name = _guard(lambda: client.call("submit", (topology, conf)))
        click.echo(f"submitted topology {name!r} to nimbus {client.address}")
        if not wait:
            return
        code = _wait_remote(client, name, timeout)
        stats = _guard(lambda: client.call("stats", name))
        _summary(stats, stats.status)
        if stats_json:
            with open(stats_json, "w") as fh:
                fh.write(stats.to_json(indent=2))
        sys.exit(code)
    finally:
        client.close()


def _wait_remote(client: Any, name: str, timeout: float | None) -> int:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        row = next(r for r in _guard(lambda: client.call("list")) if r["name"] == name)
        if row["status"] in ("complete", "killed"):
            return 0
        if row["status"] == "failed":
            click.echo(f"error: topology {name!r} failed: {row['error']}", err=True)
            return 1
        if deadline is not None and time.monotonic() > deadline:
            click.echo(f"error: topology {name!r} still {row['status']} after {timeout}s", err=True)
            return 1
        time.sleep(0.2)


@main.command("list")
@_nimbus_options
def list_cmd(nimbus: str | None, keys: str | None) -> None:
    """The topologies a nimbus knows, with their status and worker slots, and the
    supervisors it hears from."""
    rows = _call(nimbus, keys, "list")
    for sup in _call(nimbus, keys, "supervisors"):
        click.echo(
            f"supervisor {sup['id']} ({sup['host']}, ports {sup['ports']}): "
            f"{len(sup['running'])} workers, heard {sup['heard_seconds_ago']}s ago"
        )
    if not rows:
        click.echo("no topologies")
    for r in rows:
        slots = ", ".join(f"{i}@{s}" for i, s in r["slots"].items()) or "-"
        line = f"{r['name']:<20}{r['status']:<12}{r['workers']:>3} workers  {slots}"
        click.echo(line + (f"  ({r['error']})" if r["error"] else ""))


@main.command()
@click.argument("name")
@click.option("-w", "--wait", "wait_secs", type=float, default=0.0, help="seconds to drain")
@_nimbus_options
def kill(name: str, wait_secs: float, nimbus: str | None, keys: str | None) -> None:
    """Deactivate NAME's spouts, wait, then stop its workers."""
    _call(nimbus, keys, "kill", (name, wait_secs))
    click.echo(f"killing topology {name!r} (after {wait_secs:g}s)")


@main.command()
@click.argument("name")
@_nimbus_options
def activate(name: str, nimbus: str | None, keys: str | None) -> None:
    """Let NAME's spouts emit again."""
    _call(nimbus, keys, "activate", name)


@main.command()
@click.argument("name")
@_nimbus_options
def deactivate(name: str, nimbus: str | None, keys: str | None) -> None:
    """Stop NAME's spouts from emitting (in-flight tuples still complete)."""
    _call(nimbus, keys, "deactivate", name)


@main.command()
@click.argument("name")
@click.option("-n", "--workers", type=click.IntRange(min=1), required=True)
@_nimbus_options
def rebalance(name: str, workers: int, nimbus: str | None, keys: str | None) -> None:
    """Run NAME on a new number of workers (its workers restart, as in Storm)."""
    _call(nimbus, keys, "rebalance", (name, workers))
    click.echo(f"rebalancing topology {name!r} onto {workers} workers")


@main.command()
@click.argument("name")
@click.option("--every", type=float, default=1.0, help="seconds between lines")
@_nimbus_options
def monitor(name: str, every: float, nimbus: str | None, keys: str | None) -> None:
    """Live rates, latencies, queue fill and backpressure of NAME, until it ends."""
    client = _client(nimbus, keys)
    last: dict[str, int] = {}
    last_t = time.monotonic()
    try:
        while True:
            s = _guard(lambda: client.call("stats", name))
            now = time.monotonic()
            parts = []
            for c in s.components.values():
                rate = (c.executed - last.get(c.component, c.executed)) / max(now - last_t, 1e-9)
                last[c.component] = c.executed
                fill = c.receive_population / max(c.receive_capacity, 1)
                bp = " BP" if c.pending_emits else ""
                parts.append(
                    f"{c.component} {rate:,.0f}/s q{fill:.0%} c{c.complete_latency_ms:.1f}ms{bp}"
                )
            last_t = now
            click.echo(f"{s.name} [{s.status}] " + " | ".join(parts))
            if s.status not in ("running", "starting"):
                return
            time.sleep(every)
    except KeyboardInterrupt:
        pass
    finally:
        client.close()


@main.command()
@click.option("--host", default="127.0.0.1", help="interface to listen on")
@click.option("--port", type=int, default=6627, help="API port (clients, supervisors)")
@click.option("--control-port", type=int, default=6628, help="worker control port")
@click.option("--advertise", default=None, help="host name workers reach nimbus by")
@click.option("--data", "data_dir", default="stormish-nimbus", help="data directory")
@click.option("--keys", envvar="STORMISH_KEYS", default=None, help="CURVE keys directory")
@click.option(
    "--task-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    help="nimbus.task.timeout.secs: a supervisor silent this long has its workers placed elsewhere",
)
@click.option(
    "--worker-timeout",
    type=float,
    default=3.0,
    help="seconds of silence before a worker counts as gone",
)
def nimbus(
    host: str,
    port: int,
    control_port: int,
    advertise: str | None,
    data_dir: str,
    keys: str | None,
    task_timeout: float,
    worker_timeout: float,
) -> None:
    """Run nimbus: accepts topologies and assigns their workers to supervisors."""
    from .cluster.nimbus import Nimbus
    from .transport.security import security_for

    def make() -> Any:
        return Nimbus(
            f"tcp://{host}:{port}",
            f"tcp://{host}:{control_port}",
            data_dir,
            security_for(keys),
            advertise_host=advertise,
            supervisor_timeout=task_timeout,
            worker_timeout=worker_timeout,
        )

    _serve(_guard(make), f"nimbus listening on tcp://{host}:{port} (data in {data_dir})")


@main.command()
@click.option("--nimbus", "nimbus_spec", envvar="STORMISH_NIMBUS", required=True)
@click.option("--ports", default="6700,6701", help="worker slot ports, comma-separated")
@click.option("--host", default="127.0.0.1", help="host name peers reach this host's workers by")
@click.option("--id", "supervisor_id", default=None, help="supervisor id (default: host-pid)")
@click.option("--keys", envvar="STORMISH_KEYS", default=None, help="CURVE keys directory")
@click.option("--log-dir", default=None, help="where worker logs go (default: inherit)")
@click.option(
    "--worker-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    help="supervisor.worker.timeout.secs: a worker silent this long is killed and restarted",
)
def supervisor(
    nimbus_spec: str,
    ports: str,
    host: str,
    supervisor_id: str | None,
    keys: str | None,
    log_dir: str | None,
    worker_timeout: float,
) -> None:
    """Run a supervisor: offers worker slots and runs the workers nimbus assigns here."""
    from .cluster.client import nimbus_address
    from .cluster.supervisor import Supervisor
    from .transport.security import security_for

    def make() -> Any:
        try:
            slot_ports = [int(p) for p in ports.split(",") if p.strip()]
        except ValueError:
            raise StormishError(f"--ports {ports!r}: comma-separated port numbers") from None
        return Supervisor(
            nimbus_address(nimbus_spec),
            slot_ports,
            host,
            security_for(keys),
            keys_dir=keys,
            supervisor_id=supervisor_id,
            log_dir=log_dir,
            worker_timeout=worker_timeout,
        )

    sup = _guard(make)
    _serve(sup, f"supervisor {sup.id} offering ports {sup.ports} to {nimbus_spec}")


def _serve(daemon: Any, banner: str) -> None:
    signal.signal(signal.SIGTERM, daemon.stop)
    signal.signal(signal.SIGINT, daemon.stop)
    click.echo(banner)
    try:
        daemon.serve()
    finally:
        daemon.close()


@main.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="replace existing keys")
def keys(directory: str, force: bool) -> None:
    """Create the cluster's CURVE key pair in DIRECTORY (give it to every daemon)."""
    from .cluster.keys import create

    public, secret = _guard(lambda: create(directory, force))
    click.echo(f"wrote {public} and {secret} (keep the secret file private)")


@main.command("config")
def show_config() -> None:
    """List every config key with its default and meaning."""
    click.echo(_config.describe())


@main.command("worker")
@click.option("--control", required=True, help="the controller's control address (tcp://...)")
@click.option("--index", type=int, required=True, help="this worker's index in the topology")
@click.option("--bind", default=None, help="where the link listens (default: a free port)")
@click.option("--parent", type=int, default=None, help="exit when this process is gone")
@click.option("--topology", default=None, help="the topology this worker serves")
@click.option("--advertise", default=None, help="the link address peers connect to")
@click.option("--keys", envvar="STORMISH_KEYS", default=None, help="CURVE keys directory")
@click.option("--heartbeat", type=float, default=0.0, help="say hello again every N seconds")
def worker_cmd(
    control: str,
    index: int,
    bind: str | None,
    parent: int | None,
    topology: str | None,
    advertise: str | None,
    keys: str | None,
    heartbeat: float,
) -> None:
    """Run one worker process (started by `run --workers N` or a supervisor): it connects
    to its controller, receives its topology and serves until told to stop."""
    from .runtime.process import serve
    from .transport.security import security_for

    sys.exit(
        serve(
            control,
            index,
            bind,
            parent,
            0.0,
            topology=topology,
            advertise=advertise,
            security=_guard(lambda: security_for(keys)),
            heartbeat=heartbeat,
        )
    )


def _guard(fn: Any) -> Any:
    """Run `fn`; a StormishError (a bad option, missing keys) becomes a clear exit 2."""
    try:
        return fn()
    except StormishError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


def _run_local(
    path: str,
    pairs: tuple[str, ...],
    profile: str | None,
    seconds: float | None,
    stats_json: str | None,
    workers: int | None,
) -> int:
    from .loader import load_topology_file
    from .local import LocalCluster

    stop = threading.Event()
    reason = {"why": "complete"}

    def on_signal(signum: int, frame: Any) -> None:
        reason["why"] = "interrupted"
        stop.set()

    # installed before anything starts, so Ctrl-C at any point stops cleanly
    old = signal.signal(signal.SIGINT, on_signal)
    try:
        conf = _overrides(pairs, profile, workers)
        topology, after_run = load_topology_file(path)
        cluster = LocalCluster(config=conf)
        cluster.submit(topology)
    except StormishError as exc:
        signal.signal(signal.SIGINT, old)
        click.echo(f"error: {exc}", err=True)
        return 2
    running = cluster._get(topology.name)
    code = 0
    try:
        code = _watch(running, stop, seconds, reason)
    finally:
        signal.signal(signal.SIGINT, old)
        stats = running.kill(0.0) if not running.ended else running.statistics()
        cluster.shutdown()
    _summary(stats, reason["why"])
    if stats_json:
        with open(stats_json, "w") as fh:
            fh.write(stats.to_json(indent=2))
    if after_run is not None and code == 0 and stats.status == "complete":
        try:
            after_run(stats)
        except Exception as exc:
            click.echo(f"error: after_run: {type(exc).__name__}: {exc}", err=True)
            return 1
    return code


def _watch(running: Any, stop: threading.Event, seconds: float | None, reason: dict) -> int:
    tty = sys.stderr.isatty()
    start = time.monotonic()
    last_t, last_exec = start, 0
    next_status = start + STATUS_EVERY
    while not stop.is_set():
        try:
            running.wait_complete(0.05)
            reason["why"] = "complete"
            break
        except TimeoutError:
            pass
        except WorkerError as exc:
            click.echo(f"\nerror: {exc}", err=True)
            reason["why"] = "failed"
            return 1
        now = time.monotonic()
        if seconds is not None and now - start >= seconds:
            reason["why"] = f"stopped after --time {seconds:g}s"
            break
        if tty and now >= next_status:
            s = running.statistics()
            executed = sum(c.executed for c in s.components.values())
            rate = (executed - last_exec) / (now - last_t)
            last_t, last_exec = now, executed
            inflight = sum(c.pending_emits + c.receive_population for c in s.components.values())
            bp = [c.component for c in s.components.values() if c.pending_emits]
            progress = "".join(
                f", {c.component} {c.progress_done:,}"
                + (f"/{c.progress_total:,}" if c.progress_total is not None else "")
                for c in s.components.values()
                if c.progress_done is not None
            )
            sys.stderr.write(
                f"\r{running.name}: {rate:,.0f} tuples/s, {inflight:,} queued, "
                f"backpressure: {', '.join(bp) or 'none'}{progress}\033[K"
            )
            sys.stderr.flush()
            next_status = now + STATUS_EVERY
    if tty:
        sys.stderr.write("\n")
    return 0


def _summary(stats: Any, why: str) -> None:
    click.echo(
        f"topology {stats.name!r}: {why} after {stats.uptime_seconds:.2f}s "
        f"({stats.workers} worker{'s' if stats.workers > 1 else ''})"
    )
    head = (
        f"{'component':<16}{'tasks':>6}{'emitted':>12}{'executed':>12}{'acked':>10}"
        f"{'failed':>8}{'exec ms':>9}{'compl ms':>9}{'bp s':>7}{'errors':>7}"
    )
    click.echo(head)
    for c in stats.components.values():
        click.echo(
            f"{c.component:<16}{c.tasks:>6}{c.emitted:>12,}{c.executed:>12,}"
            f"{c.acked:>10,}{c.failed:>8,}{c.execute_latency_ms:>9.3f}"
            f"{c.complete_latency_ms:>9.2f}{c.backpressure_seconds:>7.2f}"
            f"{c.errors:>7}"
        )
    if stats.error:
        click.echo(f"note: {stats.error}")


if __name__ == "__main__":
    main()
