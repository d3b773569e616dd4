"""The cluster commands of `stormish`: nimbus, supervisor, keys, and the client commands
that talk to a nimbus (list, kill, activate, deactivate, rebalance, monitor). `cli.py`
adds them to the `stormish` group; `submit` there uses the client helpers here."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from .cluster.api import Kill, LogsRequest, Rebalance
from .errors import StormishError
from .runtime.status import TopologyStatus, shown_status

if TYPE_CHECKING:
    from .cluster.client import NimbusClient


def _set_connect_timeout(ctx: click.Context, _param: Any, value: float | None) -> None:
    if value is not None:
        ctx.meta["stormish.connect_timeout"] = value


INSECURE_HELP = (
    "run without CURVE keys: loopback addresses only, and any local user can talk to it "
    "(submit code that runs as this user): for a laptop, never a shared host"
)


PORT = click.IntRange(min=0, max=65535)  # 0: any free port (the address is printed)
LOG_LEVEL = click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False)


def nimbus_options(f: Any) -> Any:
    f = click.option(
        "--connect-timeout",
        type=click.FloatRange(min=0.1),
        envvar="STORMISH_CONNECT_TIMEOUT",
        default=None,
        expose_value=False,
        callback=_set_connect_timeout,
        help="seconds to wait for the nimbus to answer at all (default 2)",
    )(f)
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
        help="nimbus address host[:port], or several a,b,c (HA: the first that answers; "
        "or STORMISH_NIMBUS)",
    )(f)
    return f


def connect(nimbus: str | None, keys: str | None) -> NimbusClient:
    from .cluster.client import CONNECT_TIMEOUT, NimbusClient
    from .transport.security import security_for

    if not nimbus:
        click.echo("error: no nimbus given (--nimbus or STORMISH_NIMBUS)", err=True)
        sys.exit(2)
    ctx = click.get_current_context(silent=True)
    within = (
        CONNECT_TIMEOUT
        if ctx is None
        else ctx.meta.get("stormish.connect_timeout", CONNECT_TIMEOUT)
    )
    # several nimbus (HA, `--nimbus a,b,c`): the first that answers; a follower forwards
    # to the leader, so any live one will do
    # (a read that the chosen one stops answering is asked of the next ones; a write only
    # if it never left: NimbusClient's `others`)
    specs = [s.strip() for s in nimbus.split(",") if s.strip()]
    for n, spec in enumerate(specs):
        client = guard(
            lambda spec=spec, n=n: NimbusClient(
                spec, security_for(keys), others=specs[n + 1 :], connect_timeout=within,
                tell=lambda note: click.echo(note, err=True),
            )
        )  # fmt: skip
        try:
            if n < len(specs) - 1:
                try:
                    client.probe(within)
                except StormishError as exc:
                    click.echo(f"nimbus {spec}: {exc}; trying {specs[n + 1]}", err=True)
                    client.close()
                    continue
            else:
                guard(lambda client=client: client.probe(within))
        except SystemExit:
            client.close()
            raise
        return client
    raise AssertionError("unreachable: the last nimbus either answered or exited")


def call(nimbus: str | None, keys: str | None, verb: str, payload: Any = None) -> Any:
    client = connect(nimbus, keys)
    try:
        return guard(lambda: client.call(verb, payload))
    finally:
        client.close()


def wait_remote(client: NimbusClient, name: str, timeout: float | None) -> int:
    deadline = None if timeout is None else time.monotonic() + timeout
    told = None
    while True:
        row = next(r for r in guard(lambda: client.call("list")) if r["name"] == name)
        if row.get("waiting") and row["waiting"] != told:
            told = row["waiting"]
            click.echo(f"topology {name!r}: {told}", err=True)
        if row["status"] in (TopologyStatus.COMPLETE, TopologyStatus.KILLED):
            return 0
        if row["status"] == TopologyStatus.FAILED:
            click.echo(f"error: topology {name!r} failed: {row['error']}", err=True)
            return 1
        if deadline is not None and time.monotonic() > deadline:
            click.echo(f"error: topology {name!r} still {row['status']} after {timeout}s", err=True)
            return 1
        time.sleep(0.2)


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="the same as one JSON object, for scripts")
@nimbus_options
def list_cmd(as_json: bool, nimbus: str | None, keys: str | None) -> None:
    """The topologies a nimbus knows, with their status, worker slots and errors (per
    component: how many, and the last), and the supervisors it hears from."""
    from .monitor import worker_line

    rows = call(nimbus, keys, "list")
    errors = _errors(nimbus, keys, rows)
    if as_json:
        for r in rows:
            r["shown_status"] = shown_status(r)
            r["errors"] = list(errors.get(r["name"], ()))
        sups = call(nimbus, keys, "supervisors")
        click.echo(json.dumps({"supervisors": sups, "topologies": rows}, indent=2, default=str))
        return
    for sup in call(nimbus, keys, "supervisors"):
        click.echo(
            f"supervisor {sup['id']} ({sup['host']}, ports {sup['ports']}): "
            f"{len(sup['running'])} workers, heard {sup['heard_seconds_ago']}s ago"
        )
        for port, why in (sup.get("failed_ports") or {}).items():
            click.echo(f"  slot port {port} failed: {why}")
    if not rows:
        click.echo("no topologies")
    if any(r.get("from_zookeeper") for r in rows):
        click.echo(
            "the leader does not answer (it may have died: a new one is elected within "
            "nimbus.leader.failover.secs): topologies as it last wrote them to ZooKeeper; "
            "statistics and errors are unavailable while it is unreachable"
        )
    for r in rows:
        slots = ", ".join(f"{i}@{s}" for i, s in r["slots"].items()) or "-"
        line = f"{r['name']:<20}{shown_status(r):<12}{r['workers']:>3} workers  {slots}"
        click.echo(line + (f"  ({r['error']})" if r["error"] else ""))
        if r.get("waiting"):
            click.echo(f"  {r['waiting']}")
        for w in r.get("worker_status", ()):
            if w.get("restarts") or w.get("state") not in ("running", "finished", "placed"):
                click.echo(f"  {worker_line(w)}")
        for e in errors.get(r["name"], ()):
            click.echo(f"  {e}")


def _errors(nimbus: str | None, keys: str | None, rows: list[dict[str, Any]]) -> dict:
    """Per topology, a line per component with errors: how many, and the last with its
    method, file and line (from the statistics nimbus gathers from the workers)."""
    from .runtime.error_report import summary

    out: dict[str, Any] = {}
    if not rows or any(r.get("from_zookeeper") for r in rows):
        return out  # the leader does not answer: no statistics (list_cmd says so)
    client = connect(nimbus, keys)
    try:
        for r in rows:
            try:
                stats = client.call("stats", r["name"])
            except StormishError:  # starting, or its workers are gone
                continue
            out[r["name"]] = summary(stats.tasks.values(), 0)
    finally:
        client.close()
    return out


class WaitSeconds(click.ParamType):
    """A kill's or a rebalance's `--wait`: a finite number of seconds from 0 to Storm's
    largest (its -w is an i32). `click.FloatRange(min=0)` took `inf` (the topology was
    left killing for good) and `nan` (killed at once, "in nans")."""

    name = "seconds"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        import math

        from .cluster.decide import MAX_WAIT_SECS

        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number) or not 0 <= number <= MAX_WAIT_SECS:
            self.fail(
                f"{value!r} is not a finite number of seconds from 0 to {MAX_WAIT_SECS}",
                param,
                ctx,
            )
        return number


def _wait_option(what: str, verb: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--wait SECONDS` of kill and rebalance: Storm's -w, whose default is the topology's
    message timeout, as -w or --wait."""
    return click.option(
        "-w",
        "--wait",
        "wait_secs",
        type=WaitSeconds(),
        default=None,
        metavar="SECONDS",
        help=f"seconds {what} (Storm's {verb} -w); default: the topology's "
        "topology.message.timeout.secs, as Storm waits, so trees in flight complete",
    )


def _ended_word(status: str) -> str:
    return "completed" if status == TopologyStatus.COMPLETE else status


@click.command()
@click.argument("name")
@_wait_option("between deactivating the spouts and stopping the workers", "kill")
@nimbus_options
def kill(name: str, wait_secs: float | None, nimbus: str | None, keys: str | None) -> None:
    """Deactivate NAME's spouts, wait, then stop its workers; a topology that ended
    (failed, complete, killed) is removed from nimbus's list."""
    answer = call(nimbus, keys, "kill", Kill(name, wait_secs))
    if isinstance(answer, str):
        click.echo(f"removed topology {name!r} (it had {_ended_word(answer)})")
        return
    wait = float(answer) if answer is not None else float(wait_secs or 0)
    when = f"in {wait:g}s" if wait else "now"
    told = " (its message timeout; --wait 0 stops them now)" if wait_secs is None and wait else ""
    click.echo(f"killing topology {name!r}: spouts deactivated, workers stop {when}{told}")


@click.command()
@click.argument("name")
@nimbus_options
def activate(name: str, nimbus: str | None, keys: str | None) -> None:
    """Let NAME's spouts emit again."""
    status = call(nimbus, keys, "activate", name)
    if status == TopologyStatus.STARTING:
        click.echo(f"activated topology {name!r}: its spouts emit once its workers run")
    else:
        click.echo(f"activated topology {name!r}: its spouts emit")


@click.command()
@click.argument("name")
@nimbus_options
def deactivate(name: str, nimbus: str | None, keys: str | None) -> None:
    """Stop NAME's spouts from emitting (in-flight tuples still complete)."""
    status = call(nimbus, keys, "deactivate", name)
    if status == TopologyStatus.STARTING:
        click.echo(
            f"deactivated topology {name!r}: its workers start with their spouts inactive "
            f"(stormish activate {name} opens them)"
        )
        return
    click.echo(
        f"deactivated topology {name!r}: its spouts stop emitting; what is in flight "
        f"completes (stormish activate {name} resumes)"
    )


@click.command()
@click.argument("name")
@click.option("-n", "--workers", type=click.IntRange(min=1), required=True)
@_wait_option("the spouts stay deactivated before the workers restart", "rebalance")
@nimbus_options
def rebalance(
    name: str, workers: int, wait_secs: float | None, nimbus: str | None, keys: str | None
) -> None:
    """Run NAME on a new number of workers: its spouts are deactivated, the trees in
    flight complete, then its workers restart on the new plan (as in Storm) and its
    spouts are as they were."""
    rows: list[dict[str, Any]] = call(nimbus, keys, "list")
    running = any(r["name"] == name and r["status"] == TopologyStatus.RUNNING for r in rows)
    when = "after the rebalance's wait" if running and wait_secs != 0 else "now"
    short = slots_short(name, workers, rows, call(nimbus, keys, "supervisors"), when)
    if short:  # before its workers stop: it waits, as in Storm, but not by surprise
        click.echo(short, err=True)
    answer = call(nimbus, keys, "rebalance", Rebalance(name, workers, wait_secs))
    wait = float(answer or 0)
    if wait:
        told = " (its message timeout; --wait 0 restarts them now)" if wait_secs is None else ""
        click.echo(
            f"rebalancing topology {name!r} onto {workers} workers: spouts deactivated, "
            f"workers restart in {wait:g}s{told}"
        )
        return
    click.echo(f"rebalancing topology {name!r} onto {workers} workers")
    rows = call(nimbus, keys, "list")
    row = next((r for r in rows if r["name"] == name), {})
    if row.get("waiting"):
        click.echo(f"topology {name!r}: {row['waiting']}", err=True)


def slots_short(
    name: str,
    workers: int,
    rows: list[dict[str, Any]],
    supervisors: list[dict[str, Any]],
    when: str = "now",
) -> str | None:
    """What to say before a rebalance of `name` onto `workers` that cannot be placed
    now: the slots offered, less those other live topologies hold (its own are freed by
    the rebalance). None when they are enough."""
    from .runtime.status import ENDED

    if not any(r["name"] == name and r["status"] not in ENDED for r in rows):
        return None  # nimbus names what is wrong with it
    offered = sum(len(s["ports"]) for s in supervisors)
    held = sum(len(r["slots"]) for r in rows if r["name"] != name and r["status"] not in ENDED)
    can = max(0, offered - held)
    if workers <= can:
        return None
    n = len(supervisors)
    return (
        f"topology {name!r}: {workers} workers wanted, but at most {can} worker "
        f"slot{'s' if can != 1 else ''} can be free for it ({offered} offered by {n} "
        f"supervisor{'s' if n != 1 else ''}, {held} held by other topologies): its workers "
        f"stop {when} and it waits, starting, for {workers - can} more"
    )


@click.command()
@click.argument("name")
@click.option("--every", type=float, default=1.0, help="seconds between lines")
@click.option("--json", "as_json", is_flag=True, help="a JSON object per line, for scripts")
@nimbus_options
def monitor(name: str, every: float, as_json: bool, nimbus: str | None, keys: str | None) -> None:
    """Live rates, latencies, queue fill, backpressure (BP), errors (E, and each
    component's new errors with the last one's method and line) and stuck tasks (STUCK:
    user code that has not returned past topology.executor.stuck.secs) of NAME, until it
    ends; a warning when a spout's trees time out faster than they complete, and the
    root of backpressure (ROOT): the full task that is not itself parked, where the
    parked ones wait."""
    from .monitor import MonitorView

    client = connect(nimbus, keys)
    view = MonitorView()
    try:
        while True:
            row = next((r for r in guard(lambda: client.call("list")) if r["name"] == name), None)
            if row is None:
                guard(lambda: client.call("stats", name))  # names the unknown topology
            if row is not None and row["status"] == TopologyStatus.STARTING:
                waiting = row.get("waiting") or "starting its workers"
                if as_json:
                    click.echo(
                        json.dumps(
                            {"name": name, "status": TopologyStatus.STARTING, "waiting": waiting}
                        )
                    )
                else:
                    click.echo(f"{name} [starting] {waiting}")
                time.sleep(every)
                continue
            s = guard(lambda: client.call("stats", name))
            tick = view.tick(s, row, time.monotonic())
            if as_json:
                click.echo(json.dumps(tick.json(time.time()), default=str))
            else:
                for line in tick.text():
                    click.echo(line)
            if not TopologyStatus(s.status).live:
                return
            time.sleep(every)
    except KeyboardInterrupt:
        pass
    finally:
        client.close()


@click.command()
@click.argument("name")
@click.option("--worker", "-W", "index", type=int, default=None, help="only this worker's log")
@click.option("--component", "-C", default=None, help="only the lines of this component's code")
@click.option("--follow", "-f", is_flag=True, help="keep printing what the workers write")
@click.option(
    "--bytes", "most", type=click.IntRange(min=1), default=65536, show_default=True,
    help="how much of each log's end to print first",
)  # fmt: skip
@click.option("--every", type=float, default=1.0, show_default=True, help="--follow's poll")
@nimbus_options
def logs(
    name: str,
    index: int | None,
    component: str | None,
    follow: bool,
    most: int,
    every: float,
    nimbus: str | None,
    keys: str | None,
) -> None:
    """Print NAME's worker logs, fetched from the supervisors through nimbus (Storm's
    logviewer, `sparse tail`): each worker's log end, every supervisor it ran on."""
    from .logs import component_lines

    client = connect(nimbus, keys)
    offsets: dict[str, int] = {}
    first = True
    try:
        if component:  # a misspelt one printed the workers' headers and nothing else
            known = sorted(guard(lambda: client.call("graph", name))["components"])
            if component not in known:
                click.echo(
                    f"error: topology {name!r} has no component {component!r} (its "
                    f"components: {', '.join(known)})",
                    err=True,
                )
                sys.exit(2)
        while True:
            rid = guard(lambda: client.call("logs", LogsRequest(name, index, dict(offsets), most)))
            while True:
                got = guard(lambda rid=rid: client.call("logs_result", rid))
                if got["done"]:
                    break
                time.sleep(0.05)
            for piece in sorted(got["pieces"], key=lambda p: (p["index"], p["supervisor"])):
                key = f"{piece['index']}@{piece['supervisor']}"
                if piece.get("error") or piece.get("missing"):
                    if first:
                        why = piece.get("error") or "no log file there"
                        click.echo(f"==> worker {key}: {why} <==", err=True)
                    continue
                offsets[key] = piece["next"]
                text = piece["data"]
                lines = component_lines(text, component) if component else text.splitlines()
                if first and (lines or not follow):
                    click.echo(f"==> worker {piece['index']} on {piece['supervisor']} <==")
                for line in lines:
                    click.echo(line if not follow or first else f"[{key}] {line}")
            if first:
                for key in got["missing"]:
                    click.echo(f"==> worker {key}: its supervisor did not answer <==", err=True)
            first = False
            if not follow:
                return
            time.sleep(every)
    except KeyboardInterrupt:
        pass
    finally:
        client.close()


@click.command()
@click.option("--port", type=PORT, default=8080, show_default=True)
@nimbus_options
def ui(port: int, nimbus: str | None, keys: str | None) -> None:
    """Serve the web UI and Storm's REST API of a nimbus on 127.0.0.1:PORT, talking to
    it with the cluster's keys (Storm's `storm ui`): run it where the keys are."""
    from .ui.serve import entry_url, ui_server

    client = connect(nimbus, keys)
    server = guard(lambda: ui_server(client, port))
    click.echo(f"web UI of {client.address}: {entry_url(server)} (Ctrl-C stops it)")
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


def daemon_options(f: Any) -> Any:
    """`-c KEY=VALUE` and `--config-file FILE` for a daemon: they set the defaults of its
    flags from its config keys (`stormish config` lists them, scope nimbus/supervisor)."""
    f = click.option(
        "--config-file",
        type=click.Path(dir_okay=False),
        default=None,
        help="a JSON object of this daemon's config keys (flags win over it)",
    )(f)
    f = click.option(
        "-c",
        "--config",
        "pairs",
        multiple=True,
        metavar="KEY=VALUE",
        help="set one of this daemon's config keys (wins over --config-file; flags win)",
    )(f)
    f = click.option(
        "--log-level",
        type=LOG_LEVEL,
        default="INFO",
        show_default=True,
        help="the daemon's (and its workers') log level",
    )(f)
    f = click.option("-v", "--verbose", is_flag=True, help="--log-level DEBUG")(f)
    return f


def _logging(log_level: str, verbose: bool) -> str:
    """Configure the daemon's logging before it says anything; the level its workers get."""
    from .logs import configure_daemon

    level = "DEBUG" if verbose else log_level.upper()
    configure_daemon(level)
    return level


def daemon_conf(role: str, pairs: tuple[str, ...], config_file: str | None) -> dict[str, Any]:
    """The config of daemon `role` ('nimbus' or 'supervisor'): defaults, then the file,
    then each -c; a key the daemon does not read is an error naming it."""
    from . import config as _config
    from .loader import load_config_file

    layers = [load_config_file(config_file, role)] if config_file else []
    layers.append(dict(_config.parse_override(p, role) for p in pairs))
    return _config.resolve(*layers, where=f"stormish {role}", level=role)


@click.command()
@click.option("--host", default="127.0.0.1", help="interface to listen on")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=6627, help="API port (clients, supervisors)"
)
@click.option(
    "--control-port", type=click.IntRange(1, 65535), default=6628, help="worker control port"
)
@click.option("--advertise", default=None, help="host name workers reach nimbus by")
@click.option("--data", "data_dir", default="stormish-nimbus", help="data directory")
@click.option(
    "--keys",
    envvar="STORMISH_KEYS",
    default=None,
    help="CURVE keys directory (default: DATA/keys, made on the first start)",
)
@click.option("--insecure", is_flag=True, help=INSECURE_HELP)
@click.option(
    "--task-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="a supervisor silent this long has its workers placed elsewhere "
    "(default: nimbus.task.timeout.secs, 30)",
)
@click.option(
    "--worker-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=3.0,
    help="seconds of silence before a worker counts as gone",
)
@click.option(
    "--metrics-port",
    type=PORT,
    default=None,
    help="serve Prometheus metrics of every running topology at http://HOST:PORT/metrics",
)
@click.option(
    "--ui-port",
    type=PORT,
    default=None,
    help="serve the web UI and Storm's REST API (/api/v1) on 127.0.0.1:PORT",
)
@click.option(
    "--zookeeper",
    default=None,
    help="host:port[,host:port] of a ZooKeeper ensemble: several nimbus, one leader, the "
    "state in ZooKeeper (default: nimbus.zookeeper.servers; none: a single nimbus)",
)
@click.option(
    "--zk-root", default=None, help="this cluster's znode (default: nimbus.zookeeper.root)"
)
@click.option(
    "--id", "nimbus_id", default=None, help="this nimbus's id with --zookeeper (default: host-port)"
)
@daemon_options
def nimbus(
    host: str,
    port: int,
    control_port: int,
    advertise: str | None,
    data_dir: str,
    keys: str | None,
    insecure: bool,
    task_timeout: float | None,
    worker_timeout: float,
    metrics_port: int | None,
    ui_port: int | None,
    zookeeper: str | None,
    zk_root: str | None,
    nimbus_id: str | None,
    pairs: tuple[str, ...],
    config_file: str | None,
    log_level: str,
    verbose: bool,
) -> None:
    """Run nimbus: accepts topologies and assigns their workers to supervisors; with
    --zookeeper, one of several (one leads, the others stand by and forward)."""
    from .cluster.nimbus import Nimbus

    _logging(log_level, verbose)
    conf = guard(lambda: daemon_conf("nimbus", pairs, config_file))
    guard(lambda: private_data_dir(data_dir))
    security = guard(lambda: daemon_security("nimbus", keys, insecure, data_dir))
    if task_timeout is None:
        task_timeout = conf["nimbus.task.timeout.secs"]

    def make() -> Any:
        return Nimbus(
            f"tcp://{host}:{port}",
            f"tcp://{host}:{control_port}",
            data_dir,
            security,
            advertise_host=advertise,
            supervisor_timeout=task_timeout,
            worker_timeout=worker_timeout,
            metrics_port=metrics_port,
            ui_port=ui_port,
            ha=ha,
        )

    zookeeper = zookeeper or conf["nimbus.zookeeper.servers"]
    ha = None
    if zookeeper:
        ha = guard(lambda: ha_config(conf, zookeeper, zk_root, nimbus_id, port, security))
    _serve(
        guard(lambda: _listening(make, "nimbus")),
        f"nimbus listening on tcp://{host}:{port} (data in {data_dir})",
    )


def ha_config(
    conf: dict[str, Any], servers: str, root: str | None, nimbus_id: str | None, port: int,
    security: Any,
) -> Any:  # fmt: skip
    """What --zookeeper turns on; a keyed cluster's digest credential from its keys."""
    import socket

    from .cluster.ha import HaConfig, check_root, digest_credential

    secret = getattr(security, "secret", None)
    return HaConfig(
        hosts=servers,
        root=check_root(root or conf["nimbus.zookeeper.root"]),
        failover=float(conf["nimbus.leader.failover.secs"]),
        min_replicas=conf["topology.min.replication.count"],
        replication_wait=float(conf["topology.max.replication.wait.time.sec"]),
        nimbus_id=nimbus_id or f"{socket.gethostname()}-{port}",
        credential=digest_credential(secret if isinstance(secret, bytes) else str(secret).encode())
        if secret
        else None,
    )


@click.command()
@click.option(
    "--nimbus",
    "nimbus_spec",
    envvar="STORMISH_NIMBUS",
    required=True,
    help="nimbus host[:port], or several a,b,c (HA: a follower names the leader)",
)
@click.option(
    "--ports",
    default="6700,6701",
    help="worker slot ports, comma-separated: free on this host (checked at start), and "
    "each supervisor on one host its own",
)
@click.option("--host", default="127.0.0.1", help="host name peers reach this host's workers by")
@click.option("--id", "supervisor_id", default=None, help="supervisor id (default: host-pid)")
@click.option(
    "--keys",
    envvar="STORMISH_KEYS",
    default=None,
    help="the cluster's CURVE keys directory (a copy of nimbus's DATA/keys)",
)
@click.option("--insecure", is_flag=True, help=INSECURE_HELP)
@click.option(
    "--log-dir",
    default=None,
    help="keep a log file per topology and worker here, for `stormish logs` (default: the "
    "workers print where the supervisor does)",
)
@click.option(
    "--worker-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="a worker silent this long is killed and restarted "
    "(default: supervisor.worker.timeout.secs, 30)",
)
@click.option(
    "--restart-backoff",
    type=click.FloatRange(min=0),
    default=None,
    help="seconds before restarting a worker that crashed twice in a row, doubled per "
    "further crash; the first restart is at once "
    "(default: supervisor.worker.restart.backoff.secs, 1)",
)
@click.option(
    "--restart-backoff-max",
    type=click.FloatRange(min=0),
    default=None,
    help="the longest wait between restarts; a worker up longer has recovered "
    "(default: supervisor.worker.restart.backoff.max.secs, 30)",
)
@click.option(
    "--metrics-port",
    type=PORT,
    default=None,
    help="serve Prometheus metrics of this host's workers at /metrics on this port",
)
@click.option(
    "--log-max-bytes",
    type=click.IntRange(min=0),
    default=100 << 20,
    show_default=True,
    help="roll a worker's log file past this size (0: never)",
)
@click.option(
    "--log-backups", type=click.IntRange(min=0), default=9, show_default=True,
    help="rolled log files kept per worker",
)  # fmt: skip
@daemon_options
def supervisor(
    nimbus_spec: str,
    ports: str,
    host: str,
    supervisor_id: str | None,
    keys: str | None,
    insecure: bool,
    log_dir: str | None,
    worker_timeout: float | None,
    restart_backoff: float | None,
    restart_backoff_max: float | None,
    metrics_port: int | None,
    log_max_bytes: int,
    log_backups: int,
    pairs: tuple[str, ...],
    config_file: str | None,
    log_level: str,
    verbose: bool,
) -> None:
    """Run a supervisor: offers worker slots and runs the workers nimbus assigns here."""
    level = _logging(log_level, verbose)
    from .cluster.client import nimbus_address
    from .cluster.restarts import RestartPolicy
    from .cluster.supervisor import Supervisor

    conf = guard(lambda: daemon_conf("supervisor", pairs, config_file))
    security = guard(lambda: daemon_security("supervisor", keys, insecure))
    if worker_timeout is None:
        worker_timeout = conf["supervisor.worker.timeout.secs"]
    if restart_backoff is None:
        restart_backoff = conf["supervisor.worker.restart.backoff.secs"]
    if restart_backoff_max is None:
        restart_backoff_max = conf["supervisor.worker.restart.backoff.max.secs"]

    def make() -> Any:
        slot_ports = slot_port_list(ports)
        return Supervisor(
            [nimbus_address(n.strip()) for n in nimbus_spec.split(",") if n.strip()],
            slot_ports,
            host,
            security,
            keys_dir=keys,
            supervisor_id=supervisor_id,
            log_dir=log_dir,
            worker_timeout=worker_timeout,
            restart_policy=RestartPolicy(restart_backoff, restart_backoff_max),
            metrics_port=metrics_port,
            log_level=level,
            log_max_bytes=log_max_bytes,
            log_backups=log_backups,
            worker_start=conf["supervisor.worker.start"],
        )

    sup = guard(lambda: _listening(make, "supervisor"))
    # refused by nimbus (its id is a live supervisor's): exit 2 with why, as Storm does
    guard(lambda: _serve(sup, f"supervisor {sup.id} offering ports {sup.ports} to {nimbus_spec}"))


def daemon_security(
    role: str, keys: str | None, insecure: bool, data_dir: str | None = None
) -> Any:
    """A daemon is keyed unless told `--insecure` (docs/security.md): nimbus makes the
    cluster's keys in DATA/keys on its first start; a supervisor must be given them."""
    import os

    from .transport.keys import ensure, paths
    from .transport.security import LOOPBACK, Curve

    if insecure:
        if keys:
            raise StormishError(f"{role}: --insecure and --keys {keys!r}: choose one")
        click.echo(
            f"warning: {role} runs --insecure: no keys, loopback only, and any local user "
            "can talk to it, submit a topology and run code as this user",
            err=True,
        )
        return LOOPBACK
    if keys:
        return Curve(keys)
    if data_dir is None:
        raise StormishError(
            f"{role}: no CURVE keys: a cluster is keyed unless started --insecure; give "
            "--keys DIR (or STORMISH_KEYS) with a copy of nimbus's DATA/keys directory"
        )
    keys_dir = os.path.join(data_dir, "keys")
    fresh = not os.path.exists(paths(keys_dir)[1])
    ensure(keys_dir)
    if fresh:
        click.echo(f"{role}: made the cluster's CURVE keys in {keys_dir}", err=True)
    click.echo(
        f"{role}: keyed; give supervisors and clients --keys {keys_dir} "
        "(or STORMISH_KEYS; copy the directory, private, to other hosts)",
        err=True,
    )
    return Curve(keys_dir)


def private_data_dir(data_dir: str) -> None:
    """Nimbus unpickles the topologies in its data directory when it restarts: a
    directory others can write would let them plant code. Made 0700 (whatever the
    umask); an existing one, or its `topologies/` directory, that its group or others
    can write, or that another user owns, is refused, naming its path."""
    import os

    if not os.path.isdir(data_dir):
        os.makedirs(data_dir, mode=0o700, exist_ok=True)
        os.chmod(data_dir, 0o700)  # makedirs' mode is masked by the umask
    _private(data_dir, "nimbus data directory")
    topologies = os.path.join(data_dir, "topologies")
    if os.path.lexists(topologies):
        _private(topologies, "nimbus topologies directory")


def _private(path: str, what: str) -> None:
    """Refuse `path` if its group or others can write it, or another user owns it."""
    import os
    import stat

    st = os.stat(path)
    mode = stat.S_IMODE(st.st_mode)
    me = os.geteuid()
    fix = f"(chmod 700 {path}" + (")" if st.st_uid == me else f"; chown it to uid {me})")
    if mode & 0o022:
        raise StormishError(
            f"{what} {path!r} is mode {mode:04o}: others can write it, "
            f"and nimbus loads topologies' code from it {fix}"
        )
    if st.st_uid != os.geteuid():
        raise StormishError(
            f"{what} {path!r} is owned by uid {st.st_uid}, not this user ({me}): "
            f"nimbus loads topologies' code from it {fix}"
        )


def _serve(daemon: Any, banner: str) -> None:
    signal.signal(signal.SIGTERM, daemon.stop)
    signal.signal(signal.SIGINT, daemon.stop)
    click.echo(banner)
    try:
        daemon.serve()
    finally:
        daemon.close()


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="replace existing keys")
@click.option(
    "--authorize",
    "key_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="let a client's public key (a ZeroMQ certificate, e.g. its client.key) into the "
    "cluster whose keys are in DIRECTORY",
)
@click.option(
    "--client-of",
    "cluster_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="make a client's keys in DIRECTORY (a pair of its own and the cluster's public "
    "key) and authorise them in this cluster keys directory",
)
def keys(directory: str, force: bool, key_file: str | None, cluster_dir: str | None) -> None:
    """Create the cluster's CURVE key pair in DIRECTORY (give it to every daemon), or
    authorise a client's key there (--authorize), or make a client's keys (--client-of).

    DIRECTORY is made 0700 and every file in it 0600; an existing DIRECTORY that its
    group or others can use is refused. Only the cluster's key and the keys authorised
    in DIRECTORY/authorized_keys are let in (nimbus reads them when it starts)."""
    import os

    from .transport import keys as k

    if key_file and cluster_dir:
        raise click.UsageError("give --authorize or --client-of, not both")
    if key_file:
        key = guard(lambda: k.authorize(directory, key_file))
        path = os.path.join(directory, k.AUTHORIZED)
        click.echo(f"authorised {key.decode()} in {path} (restart nimbus to let it in)")
        return
    if cluster_dir:
        public, secret = guard(lambda: k.create_client(directory, cluster_dir))
        click.echo(
            f"wrote {secret}, {public} and the cluster's public key in {directory}, and "
            f"authorised {public} in {os.path.join(cluster_dir, k.AUTHORIZED)}: give "
            f"{directory} to the client (--keys {directory}); restart nimbus to let it in"
        )
    else:
        public, secret = guard(lambda: k.create(directory, force))
        click.echo(f"wrote {public} and {secret} (keep the secret file private)")
    if _tracked_by_git(secret):
        click.echo(
            f"warning: {secret} is inside a git checkout and not ignored: add "
            f"{directory.rstrip('/')}/ to its .gitignore before the secret is committed",
            err=True,
        )


def _tracked_by_git(path: str) -> bool:
    """Whether `path` is in a git work tree and not ignored there (no git: False)."""
    import os
    import subprocess

    where = os.path.dirname(os.path.abspath(path))
    try:
        inside = subprocess.run(
            ["git", "-C", where, "rev-parse", "--is-inside-work-tree"],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return False
        ignored = subprocess.run(
            ["git", "-C", where, "check-ignore", "-q", os.path.abspath(path)],
            capture_output=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return ignored.returncode == 1  # 0: ignored, 1: not ignored


def slot_port_list(ports: str) -> list[int]:
    """--ports: one or more ports 1-65535, each once (two slots on one port, or port 0,
    would have a worker announce an address no one listens on)."""
    try:
        out = [int(p) for p in ports.split(",") if p.strip()]
    except ValueError:
        raise StormishError(f"--ports {ports!r}: comma-separated port numbers") from None
    if not out:
        raise StormishError(f"--ports {ports!r}: at least one port")
    bad = [p for p in out if not 1 <= p <= 65535]
    if bad:
        raise StormishError(f"--ports {ports!r}: {bad[0]} is not a port (1-65535)")
    twice = sorted({p for p in out if out.count(p) > 1})
    if twice:
        raise StormishError(f"--ports {ports!r}: port {twice[0]} given twice")
    return out


def _listening(make: Any, who: str) -> Any:
    """`make()`, a socket that cannot bind (a port taken) said as a StormishError: it
    was a ZMQError traceback."""
    import zmq

    try:
        return make()
    except zmq.ZMQError as exc:
        raise StormishError(f"{who} cannot listen: {exc}") from None


def guard(fn: Any) -> Any:
    """Run `fn`; a StormishError (a bad option, missing keys) becomes a clear exit 2."""
    try:
        return fn()
    except StormishError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
