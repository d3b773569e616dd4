"""The `stormish` command line (click).

`run` always runs on the embedded local cluster; `submit` sends to a nimbus when one is
configured (--nimbus, STORMISH_NIMBUS) and otherwise runs locally and says so.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from . import cli_cluster as cc
from . import config as _config
from .cli_cluster import guard
from .cluster.api import Submit
from .errors import StormishError, WorkerError
from .runtime.bp_root import backpressure_roots
from .runtime.error_report import SHOWN
from .runtime.error_report import summary as error_summary
from .runtime.stats import TopologyStatistics, edge_table, stuck_tasks, timeout_warning, timing_out
from .runtime.status import TopologyStatus

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .cluster.client import NimbusClient
    from .httpd import HttpServer
    from .local.running import RunningTopology
    from .topology import Topology

FAIL_FAST = "topology.fail.fast"
# without a terminal (a pipe, a log), the run's warnings (trees timing out, stuck tasks)
# are lines, each kind said again after WARN_AGAIN seconds at the soonest
WARN_AGAIN = 60.0
EXIT_SIGINT = 130  # 128 + the signal's number, as Python and shells exit on it
EXIT_SIGTERM = 143


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


def _writable_file(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A file to write at the end (--stats-json): its directory must exist and take
    files now, not after the whole run (a traceback after the summary, exit 1)."""
    if value is None:
        return None
    parent = os.path.dirname(os.path.abspath(value))
    if not os.path.isdir(parent):
        raise click.BadParameter(f"{value!r}: directory {parent!r} does not exist")
    if not os.access(parent, os.W_OK) or (os.path.exists(value) and not os.access(value, os.W_OK)):
        raise click.BadParameter(f"{value!r}: cannot be written (permissions)")
    return value


def _write_stats(path: str, stats: Any) -> None:
    try:
        with open(path, "w") as fh:
            fh.write(stats.to_json(indent=2))
    except OSError as exc:  # it went away during the run: said, not a traceback
        click.echo(f"error: --stats-json {path!r}: {exc.strerror or exc}", err=True)


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
        "--time",
        "seconds",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="stop after this many seconds",
    )(f)
    f = click.option(
        "--stats-json",
        type=click.Path(dir_okay=False),
        default=None,
        callback=_writable_file,
        help="write final statistics (per component and task) as JSON",
    )(f)
    f = click.option(
        "--workers",
        "-w",
        type=click.IntRange(min=1),
        default=None,
        help="worker processes (topology.workers)",
    )(f)
    f = _source_options(f)
    f = click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="print the final statistics as JSON (docs/statistics.md) instead of the table",
    )(f)
    return f


def _source_options(f: Any) -> Any:
    """How a streamparse topology or a Flux file is read (stormish.streamparse,
    stormish.flux); a plain topology file ignores them."""
    f = click.option(
        "--multilang",
        is_flag=True,
        help="streamparse topology: run each Python component as a multilang subprocess "
        "(streamparse_run), as Storm does, instead of in-process",
    )(f)
    f = click.option(
        "--filter",
        "props",
        type=click.Path(dir_okay=False),
        default=None,
        help="Flux file: a properties file whose keys replace ${key} in it",
    )(f)
    f = click.option(
        "--env-filter", is_flag=True, help="Flux file: replace ${ENV-NAME} by environment variables"
    )(f)
    return f


def _warn_unfed(topology: Topology, conf: Mapping[str, Any]) -> None:
    """A bolt nothing feeds, said before the run: its row of zeros in the summary does
    not say why (`stormish lint` says it too)."""
    from .lint import unfed

    for name in topology.unfed_bolts(conf):
        click.echo(f"warning: {unfed(topology, name)}", err=True)


def _load_options(multilang: bool, props: str | None, env_filter: bool) -> dict[str, Any]:
    return {"multilang": multilang, "props": props, "env_filter": env_filter}


@click.group(context_settings={"show_default": True})
@click.version_option(package_name="stormish")
def main() -> None:
    """stormish: Storm-style stream topologies in Python."""


@main.command()
@click.argument("topology_file", type=click.Path())
@_run_options
@click.option(
    "--metrics-port",
    type=cc.PORT,
    default=None,
    help="serve Prometheus metrics at http://HOST:PORT/metrics while it runs (0: any port)",
)
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True, help="where --metrics-port listens"
)
@click.option(
    "--log-level",
    type=cc.LOG_LEVEL,
    default=None,
    help="log records (with time, level, worker, component:task) at this level and up, "
    "in this process and the workers [default: warnings and errors, plainly]",
)
@click.option("-v", "--verbose", is_flag=True, help="--log-level DEBUG")
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="with --workers 2 or more: keep each worker's output in DIR/TOPOLOGY-worker-N.log, "
    "a line per start, rolled past stormish.local.log.max.bytes (as a supervisor's "
    "--log-dir) [default: a temporary directory, removed at exit]",
)
@click.option(
    "--ui",
    "ui_port",
    type=cc.PORT,
    default=None,
    help="serve the web UI, Storm's REST API (/api/v1) and /metrics on 127.0.0.1:PORT",
)
def run(
    topology_file: str,
    pairs: tuple[str, ...],
    profile: str | None,
    seconds: float | None,
    stats_json: str | None,
    workers: int | None,
    as_json: bool,
    metrics_port: int | None,
    metrics_host: str,
    log_level: str | None,
    verbose: bool,
    log_dir: str | None,
    ui_port: int | None,
    multilang: bool,
    props: str | None,
    env_filter: bool,
) -> None:
    """Run TOPOLOGY_FILE (a Python topology file, a streamparse topology or a Flux
    YAML file) on the embedded local cluster.

    \b
    Exit status: 0 complete or stopped by --time; 1 failed; 2 bad input;
    130 interrupted (Ctrl-C, SIGINT); 143 terminated (SIGTERM). Both signals stop
    the run cleanly (close/cleanup run, the summary printed) first."""
    if log_dir:  # a config key, so that LocalCluster users have it too
        pairs += (f"stormish.local.log.dir={json.dumps(os.path.abspath(log_dir))}",)
    if verbose or log_level:
        from . import logs

        level = "DEBUG" if verbose else str(log_level).upper()
        os.environ["STORMISH_LOG_LEVEL"] = level  # the worker processes read it
        logs.configure("run", level)
    metrics = None if metrics_port is None else (metrics_host, metrics_port)
    from .logs import tagged_streams

    with tagged_streams():  # a component's prints in this process (-w 1) carry its tag
        code = _run_local(
            topology_file, pairs, profile, seconds, stats_json, workers, metrics, ui_port, as_json,
            load=_load_options(multilang, props, env_filter),
        )  # fmt: skip
    _leave(code)


def _leave(code: int) -> None:
    """Exit with `code`, the run over. From the `stormish` command itself (not a caller
    that invoked `main`, such as a test's CliRunner), with no thread left that a normal
    exit would join (a user's non-daemon thread), it skips the interpreter's teardown,
    which frees every module and object one by one for nothing: 70-500 ms of the
    10-sentence word count on 2 busy cores (`STORMISH_START_TRACE`, bench/README.md).
    Exit handlers run and every open file is flushed first, as the teardown would have."""
    entry = getattr(sys.modules.get("__main__"), "main", None)
    me = threading.current_thread()
    if entry is not main or any(t is not me and not t.daemon for t in threading.enumerate()):
        sys.exit(code)
    import atexit
    import gc
    import io
    import itertools

    from .local.forkserver import mark

    atexit._run_exitfuncs()
    buffered = (io.BufferedWriter, io.BufferedRandom, io.TextIOWrapper)
    objects = gc.get_objects()  # what a bolt left open in this process (-w 1)
    # picked in C (types, then the objects of the buffered ones): a loop in Python took
    # 5-7 ms of every command, ~50 ms where the topology holds 300k containers
    kinds = {k for k in set(map(type, objects)) if issubclass(k, buffered)}
    for obj in itertools.compress(objects, map(kinds.__contains__, map(type, objects))):
        try:
            if not obj.closed:
                obj.flush()
        except (OSError, ValueError):
            pass
    mark("cli: leaves")
    os._exit(code)


@main.command()
@click.argument("topology_file", type=click.Path())
@cc.nimbus_options
@click.option("--wait", is_flag=True, help="wait until the topology ends and print its summary")
@click.option("--timeout", type=float, default=None, help="with --wait: give up after seconds")
@click.option(
    "--inactive", is_flag=True, help="submit with spouts inactive (not opened) until activate"
)
@click.option(
    "--no-ship",
    is_flag=True,
    help="do not ship the modules the topology file imports from its own directory "
    "(they must then be installed where nimbus and the workers run)",
)
@_run_options
def submit(
    topology_file: str,
    nimbus: str | None,
    keys: str | None,
    wait: bool,
    timeout: float | None,
    inactive: bool,
    no_ship: bool,
    pairs: tuple[str, ...],
    profile: str | None,
    seconds: float | None,
    stats_json: str | None,
    workers: int | None,
    as_json: bool,
    multilang: bool,
    props: str | None,
    env_filter: bool,
) -> None:
    """Submit TOPOLOGY_FILE to a nimbus, or run it locally when none is configured.

    The modules TOPOLOGY_FILE imports from its own directory (a helper module next to
    it, a package there) travel with the topology, as Storm ships the topology jar, up
    to 4 MiB of source; --no-ship sends the file's own code alone."""
    if not nimbus and inactive:
        raise click.UsageError(
            "--inactive needs a nimbus (--nimbus or STORMISH_NIMBUS): a topology submitted "
            "inactive to the embedded local cluster could never be activated"
        )
    if not nimbus:
        click.echo(
            "no nimbus configured (--nimbus or STORMISH_NIMBUS): running on the embedded "
            "local cluster",
            err=True,
        )
        load = _load_options(multilang, props, env_filter)
        from .logs import tagged_streams

        with tagged_streams():  # as `run`: a component's prints carry its tag (README)
            code = _run_local(
                topology_file, pairs, profile, seconds, stats_json, workers, as_json=as_json,
                load=load,
            )  # fmt: skip
        sys.exit(code)
    from .loader import load_topology_module, ship_local_modules

    conf = guard(lambda: _overrides(pairs, profile, workers))
    load = _load_options(multilang, props, env_filter)
    topology, _after, local = guard(lambda: load_topology_module(topology_file, **load))
    if local and not no_ship:  # before validate: it pickles the components
        size = guard(lambda: ship_local_modules(local))
        names = ", ".join(m.name for m in local)
        click.echo(
            f"shipping with the topology the modules it imports from "
            f"{os.path.dirname(os.path.abspath(topology_file))}: {names} ({size:,} bytes; "
            "--no-ship: do not)",
            err=True,
        )
    # the checks a local run makes (picklable components, config, the graph), here before
    # anything is sent: the same message and exit 2 on every path (as `run` does)
    _warn_unfed(topology, guard(lambda: topology.validate(conf)))
    client = cc.connect(nimbus, keys)
    try:
        name = guard(
            lambda: _submit_call(client, Submit(topology, conf, not inactive), no_ship, local)
        )
        state = " inactive (stormish activate NAME starts its spouts)" if inactive else ""
        # with --json, stdout is for one JSON document alone: what a person reads goes
        # to stderr
        click.echo(f"submitted topology {name!r} to nimbus {client.address}{state}", err=as_json)
        rows: list[dict[str, Any]] = guard(lambda: client.call("list"))
        row = next((r for r in rows if r["name"] == name), {})
        if row.get("waiting"):  # not enough free slots: say so now, not never
            click.echo(f"topology {name!r}: {row['waiting']}", err=True)
        if not wait:
            if as_json:
                click.echo(json.dumps(_submitted(name, client.address, row), indent=2))
            return
        code = cc.wait_remote(client, name, timeout)
        stats = guard(lambda: client.call("stats", name))
        _summary(stats, stats.status, as_json=as_json)
        if stats_json:
            _write_stats(stats_json, stats)
        sys.exit(code)
    finally:
        client.close()


def _submit_call(client: NimbusClient, payload: Submit, no_ship: bool, local: list) -> str:
    """The submit; when nimbus could not unpickle what --no-ship left out, its error
    says which modules were not shipped."""
    try:
        return str(client.call("submit", payload))
    except StormishError as exc:
        if no_ship and local and "No module named" in str(exc):
            names = ", ".join(m.name for m in local)
            raise StormishError(
                f"{exc}; submitted --no-ship, so {names} from the topology file's directory "
                "did not travel with it (submit without --no-ship ships them)"
            ) from exc
        raise


def _submitted(name: str, address: str, row: dict[str, Any]) -> dict[str, Any]:
    """What `submit --json` without --wait prints: what was submitted, where, and the
    state nimbus gave it (`starting`, and why it waits when slots are short)."""
    return {
        "submitted": name,
        "nimbus": address,
        "status": row.get("status"),
        "active": row.get("active"),
        "workers": row.get("workers"),
        "waiting": row.get("waiting"),
    }


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
@click.option(
    "--log-level",
    type=cc.LOG_LEVEL,
    default="INFO",
    show_default=True,
)
def worker_cmd(
    control: str,
    index: int,
    bind: str | None,
    parent: int | None,
    topology: str | None,
    advertise: str | None,
    keys: str | None,
    heartbeat: float,
    log_level: str,
) -> None:
    """Run one worker process (started by `run --workers N` or a supervisor): it connects
    to its controller, receives its topology and serves until told to stop."""
    from .local.process import serve, setup_logging
    from .transport.security import security_for

    setup_logging(topology, index, log_level)

    sys.exit(
        serve(
            control,
            index,
            bind,
            parent,
            0.0,
            topology=topology,
            advertise=advertise,
            security=guard(lambda: security_for(keys)),
            heartbeat=heartbeat,
        )
    )


def _run_local(
    path: str,
    pairs: tuple[str, ...],
    profile: str | None,
    seconds: float | None,
    stats_json: str | None,
    workers: int | None,
    metrics: tuple[str, int] | None = None,
    ui_port: int | None = None,
    as_json: bool = False,
    load: dict[str, Any] | None = None,
) -> int:
    real_stdout = sys.stdout
    if as_json:  # stdout is for the JSON alone: what the topology prints goes to stderr
        sys.stdout = sys.stderr
    stop = _Stop()
    reason = {"why": "complete"}

    def on_term(signum: int, frame: FrameType | None) -> None:
        reason["why"] = "terminated"
        stop.set()

    # SIGTERM stops the run as Ctrl-C does (workers stopped, temporary directories
    # removed), then exits 143 (docs/design.md, Exit codes); the default handler left both behind.
    # Ctrl-C exits 130: a script must tell an interrupted run from a complete one
    old_term = signal.signal(signal.SIGTERM, on_term)
    try:
        code = _run_local_inner(
            path, pairs, profile, seconds, stats_json, workers, metrics, ui_port, real_stdout,
            stop, reason, load or {},
        )  # fmt: skip
        signalled = {"terminated": EXIT_SIGTERM, "interrupted": EXIT_SIGINT}
        return signalled.get(reason["why"], code)
    finally:
        signal.signal(signal.SIGTERM, old_term)
        sys.stdout = real_stdout


class _Stop(threading.Event):
    """The run's stop, set by a signal handler: it also cuts short a request to a worker
    under way (`RunningTopology.interrupt`), so a worker that does not answer (hung,
    stopped) no longer holds Ctrl-C for a request's timeout, and the run is killed."""

    running: Any = None
    path_added: str | None = None  # the topology file's directory, on sys.path for the run

    def set(self) -> None:
        super().set()
        if self.running is not None:
            self.running.interrupt()


def _run_local_inner(
    path: str,
    pairs: tuple[str, ...],
    profile: str | None,
    seconds: float | None,
    stats_json: str | None,
    workers: int | None,
    metrics: tuple[str, int] | None,
    ui_port: int | None,
    json_to: Any,
    stop: _Stop,
    reason: dict[str, str],
    load: dict[str, Any],
) -> int:
    """`_run_local`'s run; `json_to`: where the summary goes as JSON (None: a table);
    `stop` ends it (a signal), `reason` says why it ended."""
    from .loader import load_topology_file
    from .local import LocalCluster
    from .local.forkserver import mark

    as_json = json_to is not sys.stdout
    mark("cli: run")

    def on_signal(signum: int, frame: FrameType | None) -> None:
        reason["why"] = "interrupted"
        stop.set()

    # installed before anything starts, so Ctrl-C at any point stops cleanly
    old = signal.signal(signal.SIGINT, on_signal)
    try:
        conf = _overrides(pairs, profile, workers)
        topology, after_run = load_topology_file(path, **load)
        # the file's directory stays on the path for the run: a worker spawned (not
        # forked: the default off Linux) imports its helper modules from there, as the
        # file did (`from helpers import shout` failed in every spawned worker)
        here = os.path.dirname(os.path.abspath(path))
        if path.endswith(".py") and here not in sys.path:
            sys.path.append(here)
            stop.path_added = here  # taken off again once the run is over
        if FAIL_FAST not in conf and FAIL_FAST not in topology.config:
            conf[FAIL_FAST] = True  # a run from the terminal stops at its first error
        cluster = LocalCluster(config=conf)
        cluster.submit(topology)
    except StormishError as exc:
        signal.signal(signal.SIGINT, old)
        _unpath(stop)
        click.echo(f"error: {exc}", err=True)
        return 2
    _warn_unfed(topology, cluster._get(topology.name).plan.conf)
    running = cluster._get(topology.name)
    stop.running = running
    if stop.is_set():  # a signal came while it started
        running.interrupt()
    code = 0
    servers = []

    def killed_from_ui() -> None:
        reason["why"] = "killed from the web UI"
        stop.set()

    try:
        if metrics is not None:
            servers.append(_serve_metrics(running, *metrics))
        if ui_port is not None:
            from .ui.serve import local_ui_server

            servers.append(local_ui_server(running, topology, conf, ui_port, killed_from_ui))
            from .ui.serve import entry_url

            click.echo(
                f"web UI: {entry_url(servers[-1])} (REST: /api/v1, metrics: /metrics)", err=True
            )
        mark("cli: started")
        code = _watch(running, stop, seconds, reason)
    except StormishError as exc:
        if not stop.is_set():  # else a signal stopped it first: interrupted, not failed
            reason["why"], reason["error"], code = "failed", str(exc), 2
    finally:
        signal.signal(signal.SIGINT, old)
        for server in servers:
            server.close()
        stats = running.kill(0.0) if not running.ended else running.statistics()
        cluster.shutdown()
        _unpath(stop)
    if as_json:
        sys.stdout = json_to
    _summary(stats, reason["why"], shown=SHOWN, as_json=as_json)
    if "error" in reason:
        click.echo(f"error: {reason['error']}", err=True)
    if stats_json:
        _write_stats(stats_json, stats)
    if after_run is not None and code == 0 and stats.status == TopologyStatus.COMPLETE:
        try:
            after_run(stats)
        except Exception as exc:
            import traceback

            from .loader import _user_traceback

            where = _user_traceback(traceback.extract_tb(exc.__traceback__))
            click.echo(f"error: after_run: {type(exc).__name__}: {exc}{where}", err=True)
            return 1
    return code


def _unpath(stop: _Stop) -> None:
    """The topology file's directory leaves sys.path with the run (a caller in this
    process, such as a test's CliRunner, runs other files after it)."""
    here = stop.path_added
    if here is not None and here in sys.path:
        sys.path.remove(here)


def _serve_metrics(running: RunningTopology, host: str, port: int) -> HttpServer:
    """/metrics of the running topology, gathered from every worker at each scrape."""
    from .httpd import metrics_server
    from .metrics import TopologySample, registry

    def samples() -> list[TopologySample]:
        group = running.group
        restarts = {h.index: h.restarts for h in group.handles} if group is not None else {}
        return [TopologySample(running.statistics(), restarts)]

    server = metrics_server(host, port, registry(samples))
    click.echo(f"metrics: {server.url}/metrics", err=True)
    return server


def _watch(
    running: RunningTopology, stop: threading.Event, seconds: float | None, reason: dict
) -> int:
    """The run until it ends, with a status line on a terminal (rich's Live display,
    with a progress bar per spout that reports progress; prints go above it)."""
    from . import statusline

    if not sys.stderr.isatty():
        return _watch_lines(running, stop, seconds, reason, None)
    with statusline.shown(statusline.StatusLine(sys.stderr)) as status:
        return _watch_lines(running, stop, seconds, reason, status)


def _watch_lines(
    running: RunningTopology,
    stop: threading.Event,
    seconds: float | None,
    reason: dict,
    status: Any,
) -> int:
    tty = status is not None
    told: dict[str, float] = {}  # without a terminal: each kind of warning, when said
    start = time.monotonic()
    last_t, last_exec = start, 0
    last_stats = None
    every = running.plan.conf["topology.stats.interval.secs"]  # each gathering asks every worker
    next_status = start + every
    while not stop.is_set():
        try:
            if running.poll_complete(0.05):
                reason["why"] = "complete"
                if tty:  # the bars as they end (what the last status line saw may be older)
                    status.show(None, _progress_bars(running.statistics()))
                break
        except WorkerError as exc:
            if stop.is_set():  # a signal stopped the run first: it is killed, not failed
                return 0
            reason["why"] = "failed"
            reason["error"] = str(exc)  # shown after the summary
            return 1
        now = time.monotonic()
        if seconds is not None and now - start >= seconds:
            reason["why"] = f"stopped by --time {seconds:g}s"
            break
        if tty and now >= next_status:
            try:
                s = running.statistics()
            except WorkerError:
                if stop.is_set():  # a signal cut the gathering short: the run is killed
                    return 0
                raise
            executed = sum(c.executed for c in s.components.values())
            rate = (executed - last_exec) / (now - last_t)
            last_t, last_exec = now, executed
            inflight = sum(c.pending_emits + c.receive_population for c in s.components.values())
            bp = [c.component for c in s.components.values() if c.pending_emits]
            roots = backpressure_roots(s.tasks.values())
            if roots:  # the task it comes from, as `monitor` names it
                bp.append("root " + ", ".join(f"{r.task.component}[{r.task.task}]" for r in roots))
            warnings = [
                w for w in (timeout_warning(timing_out(last_stats, s)), stuck_tasks(s)) if w
            ]
            last_stats = s
            status.show(
                f"{running.name}: {rate:,.0f} tuples/s, {inflight:,} queued, "
                f"backpressure: {', '.join(bp) or 'none'}" + "".join(f"; {w}" for w in warnings),
                _progress_bars(s),
            )
            next_status = now + every
        elif not tty and now >= next_status:  # no status line: the warnings as lines
            try:
                s = running.statistics()
            except WorkerError:
                if stop.is_set():
                    return 0
                raise
            warnings = [
                w for w in (timeout_warning(timing_out(last_stats, s)), stuck_tasks(s)) if w
            ]
            last_stats = s
            for w in warnings:
                kind = w.split(":", 1)[0]
                if now >= told.get(kind, 0.0):  # each kind again after WARN_AGAIN
                    told[kind] = now + WARN_AGAIN
                    said = w.removeprefix("WARNING ")
                    click.echo(f"warning: topology {running.name!r}: {said}", err=True)
            next_status = now + every
    return 0


def _progress_bars(s: TopologyStatistics) -> list[tuple[str, int, int | None]]:
    """The spouts that report progress: a bar each under the status line."""
    return [
        (c.component, c.progress_done, c.progress_total)
        for c in s.components.values()
        if c.progress_done is not None
    ]


def _analyse(
    path: str, pairs: tuple[str, ...], workers: int | None, load: dict[str, Any] | None = None
) -> Any:
    from .lint import analyse
    from .loader import load_topology_file

    topology, _ = load_topology_file(path, **(load or {}))
    return analyse(topology, _overrides(pairs, None, workers))


@main.command()
@click.argument("topology_file", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="the plan as JSON")
@click.option("-c", "--config", "pairs", multiple=True, metavar="KEY=VALUE")
@click.option("--workers", "-w", type=click.IntRange(min=1), default=None)
@_source_options
def plan(
    topology_file: str,
    as_json: bool,
    pairs: tuple[str, ...],
    workers: int | None,
    multilang: bool,
    props: str | None,
    env_filter: bool,
) -> None:
    """Explain TOPOLOGY_FILE without running it: every edge with its grouping, policy,
    cycle, the tasks and workers it connects, and its risks."""
    import json

    from .lint import format_plan

    try:
        report = _analyse(
            topology_file, pairs, workers, _load_options(multilang, props, env_filter)
        )
    except StormishError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        for line in format_plan(report):
            click.echo(line)


@main.command()
@click.argument("topology_file", type=click.Path())
@click.option("--strict", is_flag=True, help="warnings fail too (exit 1)")
@click.option("-c", "--config", "pairs", multiple=True, metavar="KEY=VALUE")
@click.option("--workers", "-w", type=click.IntRange(min=1), default=None)
def lint(topology_file: str, strict: bool, pairs: tuple[str, ...], workers: int | None) -> None:
    """Check TOPOLOGY_FILE without running it: errors (exit 2) are what a submit would
    refuse; warnings are valid but risky choices (exit 0, or 1 with --strict)."""
    try:
        report = _analyse(topology_file, pairs, workers)
    except StormishError as exc:
        click.echo(f"{topology_file}: error: {exc}", err=True)
        sys.exit(2)
    for f in report.findings:
        click.echo(f"{topology_file}: {f.level}: {f.where}: {f.message}")
    n = len(report.findings)
    click.echo(f"{topology_file}: {n} warning{'s' if n != 1 else ''}, no errors")
    sys.exit(1 if strict and n else 0)


def _summary(stats: TopologyStatistics, why: str, shown: int = 0, as_json: bool = False) -> None:
    """The closing table (rich's on a terminal); then, per component with errors, how
    many were not `shown` in full as they happened (per component and worker) and the
    last of them. `as_json`: the statistics as JSON on stdout, nothing else."""
    from . import summary_table

    if as_json:
        click.echo(json.dumps(dict(stats.to_dict(), ended=why), indent=2))
        return
    click.echo(summary_table.headline(stats.name, why, stats.uptime_seconds, stats.workers))
    components = list(stats.components.values())
    if sys.stdout.isatty():
        from rich.console import Console

        summary_table.render_rich(components, Console())
    else:  # plain columns for pipes and scripts: all of them, exact numbers
        for line in summary_table.plain(components):
            click.echo(line)
    for line in edge_table(stats):
        click.echo(line)
    for line in error_summary(stats.tasks.values(), shown):
        click.echo(line)
    timeouts = _timeouts_note(components)
    if timeouts:
        click.echo(timeouts)
    for line in _drops_note(components):
        click.echo(line)
    if stats.error and stats.status != TopologyStatus.FAILED:
        click.echo(f"note: {stats.error}")


def _drops_note(components: list[Any]) -> list[str]:
    """Tuples a component lost in transfer, said at the end: past the overflow limit the
    run completes with tuples gone, and the table had no column for it (86% of a run
    dropped, exit 0, nothing printed)."""
    from .transport.link import DROP_WHY

    out = []
    for c in components:
        for reason, n in sorted(c.dropped.items()):
            if n:
                out.append(
                    f"note: {c.component!r} lost {n:,} tuples from other workers "
                    f"({reason}{DROP_WHY.get(reason, '')})"
                )
    return out


def _timeouts_note(components: list[Any]) -> str:
    """Trees that timed out, said at the end with the bolts that took tuples and never
    settled them (a Bolt that forgets to ack): the summary said `failed` only, and the
    warning had scrolled by with the status line."""
    timed_out = sum(c.timed_out for c in components if c.kind == "spout")
    if not timed_out:
        return ""
    holders = [  # tick tuples need no ack: not counted
        f"{c.component!r} (executed {c.executed - c.ticks:,}, acked {c.acked:,}, "
        f"failed {c.failed:,})"
        for c in components
        if c.kind == "bolt" and c.executed - c.ticks - c.acked - c.failed >= timed_out
    ]
    said = f"note: {timed_out:,} tuple trees timed out (topology.message.timeout.secs)"
    if holders:
        said += (
            f"; settled fewer tuples than they took: {', '.join(holders)}: a Bolt must ack "
            "or fail each tuple it takes (BasicBolt acks for you)"
        )
    return said


for _command in (
    cc.list_cmd, cc.kill, cc.activate, cc.deactivate, cc.rebalance, cc.monitor,
    cc.nimbus, cc.supervisor, cc.keys, cc.ui, cc.logs,
):  # fmt: skip
    main.add_command(_command)


if __name__ == "__main__":
    main()
