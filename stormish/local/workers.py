"""Worker processes seen from the local cluster: launch, talk over the control channel,
notice death, restart.

`WorkerGroup` binds the control ROUTER on loopback, starts one `python -m
stormish.local.process` per worker (its output goes to a log file whose last lines
explain a death), hands each the cloudpickled topology, tells all where the others
listen, and starts them. Every socket of the run (the control channel and the workers'
links) is secured with CURVE: with the cluster keys of STORMISH_KEYS when set, otherwise
with a key pair made for this run (`local_security`), so no other local process can
connect to a worker, inject tuples or statuses, or reach an unpickler. `WorkerHandle`
gives `RunningTopology` the same questions an in-process `Worker` answers (quiescence,
statistics, results, stop), each one a control request, and `failure()` says which
worker died and why.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import Any

from .. import pickling, statusline
from ..errors import WorkerError, WorkerTimeout
from ..logs import RotatingFile, private_dir, start_line, worker_log_name
from ..plugins import DATA_ENV, RESTART_ENV
from ..runtime.plan import Plan
from ..topology import Topology
from ..transport import shm
from ..transport.control_server import ControlServer
from ..transport.security import Curve
from .answers import NOT_QUIET, WorkerAnswers
from .forkserver import Forked, ForkServer, describe_exit, mark
from .forkserver import supported as forkserver_supported

START_TIMEOUT = 60.0
OUTPUT_LOCK = threading.Lock()
REQUEST_TIMEOUT = 30.0
STALL_LOOK = 0.2  # a silent worker that used no CPU time over this long is hung (s)


def _child_env() -> dict[str, str]:
    """Workers import what this process imports: the same sys.path (a test module, a
    topology file's directory)."""
    env = dict(os.environ)
    paths = [p for p in sys.path if p]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def local_security() -> tuple[Curve, bytes | None]:
    """The policy of one local run, and what each of its workers reads on its stdin.

    STORMISH_KEYS set: the cluster keys (the workers inherit the variable; nothing on
    stdin). Otherwise a key pair made for this run: the workers get `--keys -` and read
    the pair on their stdin, a pipe only the parent and that child hold. Not on the
    command line or in the environment (/proc/PID/cmdline is world-readable, environ is
    inherited by whatever the worker starts), and not in a file (nothing to leave behind
    when the parent dies, no window in which it exists). The secret lives in the parent
    and its children's memory, for the run's life."""
    keys_dir = os.environ.get("STORMISH_KEYS") or None
    if keys_dir is not None:
        return Curve(keys_dir), None
    curve = Curve.ephemeral()
    return curve, curve.export()


class WorkerHandle:
    """One worker process, as `RunningTopology` sees it."""

    def __init__(self, group: WorkerGroup, index: int):
        self.group = group
        self.index = index
        self.restarts = 0  # times this worker was started again (metrics)
        self.proc: subprocess.Popen | Forked | None = None
        self.ident = b""
        self.address: str | None = None
        self.assigned = False  # its last hello said it has its topology
        self.incarnation = 0
        self.answers = WorkerAnswers(index)  # its final record and reported failure
        self.stopped = False
        # it did not answer a request in time and made no progress meanwhile (stalled):
        # asked nothing more, killed at the stop
        self.unresponsive: str | None = None
        self._pumps: list[threading.Thread] = []
        self._log_lock = threading.Lock()
        self._log: RotatingFile | None = None  # across its restarts, until the group closes

    # -- process -------------------------------------------------------------------------
    @property
    def log_path(self) -> str:
        return os.path.join(self.group.logdir, worker_log_name(self.group.plan.name, self.index))

    def launch(self) -> None:
        self.spawn()
        self.await_hello()

    def spawn(self) -> None:
        """Start the process; `await_hello` waits for it. Apart so that a group's workers
        start side by side: a spawned one spends most of its start-up importing."""
        self.begin()
        if self.group.forkserver is not None:
            stdout, stderr = self._fork(self.group.forkserver)
        else:
            stdout, stderr = self._exec()
        self.output(stdout, stderr)

    def begin(self) -> None:
        """A new incarnation is about to start (`spawn`, or `fork_all` for a group)."""
        self.incarnation += 1
        self.answers.reset()
        self.stopped = False
        self.unresponsive = None

    def output(self, stdout: Any, stderr: Any) -> None:
        """Its log's start line and the pumps of its output (the process exists)."""
        if self._log is None:
            self._log = RotatingFile(self.log_path, *self.group.log_limits)
        assert self.proc is not None
        details = f"restart {self.incarnation - 1}, local run (pid {os.getpid()})"
        with self._log_lock:  # before the pumps copy anything of this incarnation
            self._log.write(start_line(self.group.plan.name, self.index, self.proc.pid, details))
        for pipe, out in ((stdout, sys.stdout), (stderr, sys.stderr)):
            t = threading.Thread(
                target=self._pump, args=(pipe, out, self._log), name=f"worker-{self.index}-output",
                daemon=True,
            )  # fmt: skip
            t.start()
            self._pumps.append(t)

    def _fork(self, server: ForkServer) -> tuple[Any, Any]:
        """A fork of the run's fork server; what `_exec` puts on the command line and
        stdin goes in the fork request (the key pair with it: never argv or environ)."""
        return fork_all(server, [self])[0]

    def fork_spec(self) -> dict[str, Any]:
        """Its fork request (`ForkServer.fork`), for the incarnation `begin` started."""
        # what a spawned worker's environment adds: its subprocesses see the same
        env = {k: self.group.env[k] for k in ("PYTHONPATH", "PYTHONUNBUFFERED", DATA_ENV)}
        if self.incarnation > 1:  # a restart restores what it kept (latched edges)
            env[RESTART_ENV] = "1"
        spec = {
            "control": self.group.control.address,
            "index": self.index,
            "topology": self.group.plan.name,
            "bind": self.address,  # a restart listens where its peers reconnect
            "keys": self.group.keys_line,
            # what a spawned worker's environment adds: its subprocesses see the same
            "env": env,
            "log_level": os.environ.get("STORMISH_LOG_LEVEL", "INFO"),
            "assign": self.group.blob,  # carried out before its hello (one round trip less)
        }
        return spec

    def _exec(self) -> tuple[Any, Any]:
        """A fresh interpreter (`topology.worker.start` spawn)."""
        cmd = [
            sys.executable,
            "-m",
            "stormish.local.process",
            "--control",
            self.group.control.address,
            "--index",
            str(self.index),
            "--parent",
            str(os.getpid()),
            "--topology",
            self.group.plan.name,
        ]
        if self.address is not None:  # a restart listens where its peers reconnect
            cmd += ["--bind", self.address]
        keys = self.group.keys_line
        if keys is not None:
            cmd += ["--keys", "-"]  # the key pair follows on stdin
        nudge = self.group.nudge_fd
        if nudge is not None:
            cmd += ["--nudge-fd", str(nudge)]
        self.proc = proc = subprocess.Popen(
            cmd,
            pass_fds=() if nudge is None else (nudge,),
            stdin=subprocess.DEVNULL if keys is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # a restart restores what it kept in its data directory (latched edges)
            env=self.group.env if self.incarnation == 1 else {**self.group.env, RESTART_ENV: "1"},
            # a process group of its own: Ctrl-C at a terminal signals the foreground
            # group, and a worker must leave it to its parent, which stops it cleanly
            # and prints the summary (a worker whose parent dies exits: --parent)
            process_group=0,
        )
        if keys is not None and proc.stdin is not None:
            try:  # one line, far below a pipe's buffer: never blocks
                proc.stdin.write(keys)
                proc.stdin.close()
            except OSError:  # it died at once: wait_hello says so, with its log
                pass
        return proc.stdout, proc.stderr

    def await_hello(self) -> None:
        """Its identity; and whether it assigned itself (a fork: `process.serve`'s
        preassign), with its link's address."""
        assert self.proc is not None
        name = self.group.plan.name
        self.ident = self.group.control.wait_hello(
            name, self.index, self.proc.pid, self.alive, START_TIMEOUT
        )
        hello = self.group.control.hellos.get((name, self.index))
        info = hello.info if hello is not None else {}
        self.assigned = info.get("state") == "assigned" and bool(info.get("address"))
        if self.assigned:
            self.address = info["address"]

    def _pump(self, pipe: Any, out: Any, log: RotatingFile) -> None:
        """A worker's output goes where this process's goes (as with one worker), and to
        its log file, whose end explains a death."""
        with pipe:
            for line in pipe:
                with self._log_lock:
                    try:
                        log.write(line)
                    except (OSError, ValueError):  # closed: the group ended
                        pass
                try:
                    with OUTPUT_LOCK:  # whole lines: workers' pumps share our streams
                        statusline.write_above(out, line.decode("utf-8", "replace"))
                except (ValueError, OSError):  # our own stream closed: keep the log
                    pass

    def join_output(self, timeout: float = 5.0) -> None:
        for t in self._pumps:
            t.join(timeout)
        self._pumps = [t for t in self._pumps if t.is_alive()]

    def close_log(self) -> None:
        with self._log_lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def ask(self, verb: str, payload: Any = None, timeout: float = REQUEST_TIMEOUT) -> Any:
        if self.unresponsive is not None:
            raise WorkerError(self.unresponsive)
        try:
            return self.group.control.request(
                self.ident,
                verb,
                payload,
                self.alive,
                timeout,
                f"worker {self.index} (pid {self.pid})",
            )
        except WorkerTimeout as exc:
            self.judge_silence(str(exc))
            raise
        except WorkerError:
            why = self.failure()
            if why is not None:  # it died: say how, not which request noticed
                raise WorkerError(why) from None
            raise

    def judge_silence(self, why: str) -> None:
        """It did not answer a request in time: hung (stopped, or no CPU time used over
        a moment: a deadlock) or only starved (a bolt in a C call that holds the GIL, a
        loaded host: it still runs). A hung one is asked nothing more and killed at the
        stop; a starved one is asked as before, its stop included (its cleanup runs)."""
        if self.proc is None or not self.alive():
            return
        import psutil  # here: not on every run's start-up path

        try:
            p = psutil.Process(self.proc.pid)
            if p.status() == psutil.STATUS_STOPPED:
                self.unresponsive = why
                return
            before = sum(p.cpu_times()[:2])
            time.sleep(STALL_LOOK)  # two samples of its CPU time, a moment apart
            if sum(p.cpu_times()[:2]) == before:
                self.unresponsive = why
        except psutil.Error:  # gone meanwhile: its death says the rest
            pass

    def kill(self) -> None:
        """SIGKILL, for tests of crash handling."""
        if self.proc is not None and self.alive():
            self.proc.kill()
            self.proc.wait(10)
        self.clean_shm()

    def clean_shm(self) -> None:
        """Remove the shared-memory segments of the process, once it has exited (a
        worker removes its own when it stops; one killed -9 cannot)."""
        if self.proc is not None and self.proc.poll() is not None:
            shm.remove_for(self.proc.pid)

    def _log_tail(self, lines: int = 12) -> str:
        """Its log's last lines (from the file rolled last too, when it was just rolled)."""
        text = ""
        for path in (f"{self.log_path}.1", self.log_path):
            try:
                with open(path, "rb") as f:
                    f.seek(0, os.SEEK_END)
                    f.seek(max(0, f.tell() - 8192))
                    text += f.read().decode("utf-8", "replace")
            except OSError:
                continue
        tail = text.splitlines()[-lines:]
        return "\n".join(tail)

    # -- the WorkerView protocol (local/running.py) ----------------------------------------
    def failure(self) -> str | None:
        """What the worker reported, or how its process ended (with its log's end)."""
        if self.answers.failure is not None:
            return self.answers.failure
        if self.stopped or self.proc is None:
            return None
        code = self.proc.poll()
        if code is not None:
            self.join_output(2.0)  # the last lines it wrote reach the log first
            tail = self._log_tail()
            lost = self.proc.lost() if isinstance(self.proc, Forked) else None
            how = f"is lost: {lost}" if lost is not None else describe_exit(code)
            self.answers.failure = f"worker process {self.index} (pid {self.proc.pid}) {how}" + (
                f"; its log ends:\n{tail}" if tail else ""
            )
        return self.answers.failure

    def quiescence(self) -> dict[str, Any]:
        if not self.answers.ended and not self.alive():
            return dict(NOT_QUIET)  # failure() tells why; never complete meanwhile
        return self.answers.quiescence(self.ask)

    def stats_snapshot(self) -> tuple[list, dict]:
        if not self.answers.ended and self.failure() is not None:
            return [], {}
        if self.stopped and not self.answers.ended and not self.alive():
            # stopped, but its answer to `stop` (the final statistics) never came: what
            # went wrong was recorded by the stop (stuck); asking now would only say it
            # is gone
            return [], {}
        try:
            return self.answers.stats(self.ask)
        except WorkerError:
            if self.failure() is not None or (self.stopped and not self.alive()):
                return [], {}  # died meanwhile: its statistics died with it
            raise

    def askable(self) -> bool:
        """Running, not stopped yet, and not found hung: a request may go to it."""
        return self.alive() and not self.answers.ended and self.unresponsive is None

    def set_active(self, active: bool) -> None:
        if self.askable():
            self.ask("active", active)

    def end_of_input(self) -> int:
        if self.askable():
            return int(self.ask("end_input"))
        return 0

    def stop(self, timeout: float = 10.0) -> list[str]:
        """Stop the executors (close/cleanup run), keep final statistics and results, and
        wait for the process to exit; a process that does not exit is killed."""
        self.stopped = True
        if self.unresponsive is not None and self.alive() and self.proc is not None:
            # hung or stopped (SIGSTOP): asking it to stop would wait out another timeout
            self.proc.kill()
            self.proc.wait(10)
            self.clean_shm()
            return [f"{self.unresponsive}; killed (SIGKILL)"]
        stuck = self.answers.stop(self.ask, timeout) if self.alive() else []
        if self.proc is not None:
            try:
                self.proc.wait(timeout + 5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.clean_shm()
        return stuck

    def results(self) -> dict[str, list[tuple[int, Any]]]:
        return self.answers.results()

    def errors(self) -> list[dict[str, Any]]:
        return self.answers.errors()


def fork_all(server: ForkServer, handles: list[WorkerHandle]) -> list[tuple[Any, Any]]:
    """Fork a worker for each handle, the requests sent together (the server forks them
    one after the other while this process waits once, not once a worker); each handle's
    `proc` is set, and its stdout and stderr pipes returned. A fork that failed raises
    (the workers forked before it have their `proc`: the caller's close ends them)."""
    pipes = []
    try:
        for _ in handles:
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            pipes.append((out_r, out_w, err_r, err_w))
        got = server.fork_many(
            [(h.fork_spec(), p[1], p[3], *_nudge(h)) for h, p in zip(handles, pipes, strict=True)]
        )
    except BaseException:
        for fd in (fd for p in pipes for fd in p):
            os.close(fd)
        raise
    out: list[tuple[Any, Any]] = []
    failed: OSError | None = None
    for h, (out_r, out_w, err_r, err_w), proc in zip(handles, pipes, got, strict=True):
        os.close(out_w)
        os.close(err_w)
        if isinstance(proc, OSError):
            os.close(out_r)
            os.close(err_r)
            failed = failed or proc
            continue
        h.proc = proc
        out.append((open(out_r, "rb"), open(err_r, "rb")))  # noqa: SIM115 - pumps close them
    if failed is not None:
        for stdout, stderr in out:
            stdout.close()
            stderr.close()
        raise failed
    return out


def _nudge(h: WorkerHandle) -> tuple[int, ...]:
    """The run's nudge pipe, as a fork request's extra descriptor (none: nothing)."""
    fd = h.group.nudge_fd
    return () if fd is None else (fd,)


def _check_local_host(host: str, topology: str) -> None:
    """The worker processes bind their links on `stormish.local.host`. A run's own key
    pair secures it on this machine, but listening beyond loopback is for configured
    keys (STORMISH_KEYS), as for a daemon (docs/security.md): say so here, naming the
    key, rather than in each worker's log."""
    from ..errors import ConfigError
    from ..transport.security import security_for

    try:
        security_for(None).check_bind(f"tcp://{host}")
    except ConfigError as exc:
        raise ConfigError(
            f"config key 'stormish.local.host' ({host!r}) of topology {topology!r}: {exc}"
        ) from None


def _log_place(conf: Mapping[str, Any], name: str) -> tuple[str, bool, tuple[int, int]]:
    """Where the workers' log files go, whether that directory is the group's own (a
    temporary one, removed at the end), and their (max bytes, backups). A temporary log
    keeps one rolled file: it is there to explain a death, and must not fill the disk on
    a long run; `stormish.local.log.dir` keeps them as a supervisor's --log-dir does."""
    max_bytes = conf["stormish.local.log.max.bytes"]  # validated conf: defaults in config.py
    backups = conf["stormish.local.log.backups"]
    where = conf["stormish.local.log.dir"]
    if where:
        from ..errors import ConfigError

        try:
            private_dir(where)  # 0700 when made here (its files are 0600)
        except OSError as exc:  # a file there, no permission: the key, not a traceback
            why = (
                "it is there and is not a directory"
                if isinstance(exc, FileExistsError | NotADirectoryError)
                else str(exc.strerror or exc)
            )
            raise ConfigError(
                f"config key 'stormish.local.log.dir' ({where!r}) of topology {name!r}: "
                f"cannot keep the workers' logs there: {why}"
                + (f" ({exc.filename})" if exc.filename and exc.filename != where else "")
            ) from None
        return os.path.abspath(where), False, (max_bytes, backups)
    return tempfile.mkdtemp(prefix=f"stormish-{name}-"), True, (max_bytes, min(backups, 1))


class WorkerGroup:
    """The worker processes of one topology on this machine."""

    def __init__(self, topology: Topology, plan: Plan, conf: Mapping[str, Any]):
        self.topology = topology
        self.plan = plan
        self.nudge_fd: int | None = None  # the run's pipe (runtime/nudge.py), for each worker
        _check_local_host(conf.get("stormish.local.host", "127.0.0.1"), plan.name)
        # the run's id: its workers' HELLOs name it, so a worker of another run of this
        # topology (a leftover of an earlier one) places no tuple in this run's tasks
        self.run_id = secrets.token_hex(8)
        self.blob = pickling.dumps((topology, dict(conf), dict(plan.assignment), self.run_id))
        self.logdir, self.own_logdir, self.log_limits = _log_place(conf, plan.name)
        self.env = _child_env()
        # before any thread or ZeroMQ context: forked from this process if it has none
        self.forkserver: ForkServer | None = None
        if conf["topology.worker.start"] == "fork" and forkserver_supported():
            self.forkserver = ForkServer(preload=self.blob, env=self.env)
        # the workers' data directory (stateful bolts' embedded state): kept across the
        # run's worker restarts, removed with the group
        self.datadir = tempfile.mkdtemp(prefix=f"stormish-{plan.name}-data-")
        self.env[DATA_ENV] = self.datadir
        try:
            self.security, self.keys_line = local_security()
            self.control = ControlServer(security=self.security)
        except BaseException:
            if self.forkserver is not None:
                self.forkserver.close()
            shutil.rmtree(self.datadir, ignore_errors=True)
            raise
        self.handles = [WorkerHandle(self, i) for i in range(plan.workers)]
        self.restarts = 0
        self.active = True

    def start(self, active: bool = True) -> list[WorkerHandle]:
        """`active=False`: the workers start with their spouts inactive (not opened)."""
        self.active = active
        try:
            if self.forkserver is not None:
                for h in self.handles:
                    h.begin()
                forked = fork_all(self.forkserver, self.handles)
                for h, pipes in zip(self.handles, forked, strict=True):
                    h.output(*pipes)
            else:
                for h in self.handles:
                    h.spawn()
            mark("workers spawned")
            for h in self.handles:
                h.await_hello()
            mark("hellos in")
            hs = self.handles
            need = [h for h in hs if not h.assigned]
            if need:
                for h, address in zip(need, self.ask_all(need, "assign", self.blob), strict=True):
                    h.address = address
            self.ask_all(hs, "peers", self.book())
            mark("peers told")
            if not active:
                self.ask_all(hs, "active", False)
            self.ask_all(hs, "start", None)
            mark("workers started")
        except BaseException:
            self.close()
            raise
        return self.handles

    def ask_all(
        self, handles: list[WorkerHandle], verb: str, payload: Any, timeout: float = START_TIMEOUT
    ) -> list[Any]:
        """The same request to several workers at once; a worker that died is named."""
        asks = [
            (h.ident, verb, payload, h.alive, f"worker {h.index} (pid {h.pid})") for h in handles
        ]
        try:
            return self.control.request_all(asks, timeout)
        except WorkerTimeout as exc:
            for h in handles:
                if h.ident in exc.idents:
                    h.judge_silence(f"worker {h.index} (pid {h.pid}) did not answer {verb}")
            raise
        except WorkerError:
            for h in handles:
                why = h.failure()
                if why is not None:
                    raise WorkerError(why) from None
            raise

    def stop_all(self, timeout: float) -> list[str]:
        """Stop every worker at once (each runs close/cleanup and exits); the executors
        that did not stop in time, by name."""
        live = [h for h in self.handles if h.askable()]
        for h in self.handles:
            h.stopped = True
        stuck: list[str] = []
        mark("stopping")
        if live:
            try:
                finals = self.ask_all(live, "stop", timeout, timeout=timeout + 10)
            except WorkerTimeout as exc:  # the answers that came are kept
                finals = exc.got
                stuck.append(str(exc))
            except WorkerError as exc:  # one at a time then: the others still stop
                finals = []
                stuck.append(str(exc))
            for h, final in zip(live, finals, strict=False):
                if final is not None:
                    stuck += h.answers.stopped_with(final)
        mark("stop answered")
        for h in self.handles:
            stuck += h.stop(timeout)  # what is left: the process's exit
        mark("workers exited")
        return stuck

    def deactivate_all(self, timeout: float) -> None:
        """Deactivate every worker that answers, side by side, for a kill: one that
        does not answer within `timeout` is asked nothing more (its stop kills it)."""
        self.active = False
        live = [h for h in self.handles if h.askable()]
        if live:
            self.ask_all(live, "active", False, timeout=timeout)

    def book(self) -> dict[int, str]:
        """Where each worker's link listens; asked only once every worker was assigned."""
        book = {h.index: h.address for h in self.handles if h.address is not None}
        if len(book) != len(self.handles):
            raise WorkerError(f"topology {self.plan.name!r}: a worker has no link address yet")
        return book

    def restart(self, index: int) -> None:
        """Start worker `index` again (after it died or was killed) where it listened
        before: its peers' push sockets reconnect to it by themselves, and the HELLO
        exchange tells every side the others' backpressure status (STORM-3763)."""
        h = self.handles[index]
        h.kill()
        h.restarts += 1
        h.launch()
        if not h.assigned:
            h.ask("assign", self.blob, timeout=START_TIMEOUT)
        h.ask("peers", self.book())
        if not self.active:
            h.ask("active", False)
        h.ask("start")
        self.restarts += 1

    def close(self) -> None:
        for h in self.handles:
            if h.proc is not None and h.proc.poll() is None:
                h.proc.kill()
                h.proc.wait(10)
            h.clean_shm()
            h.join_output()
            h.close_log()
        self.control.close()
        if self.forkserver is not None:
            self.forkserver.close()
        mark("fork server closed")
        shutil.rmtree(self.datadir, ignore_errors=True)
        if self.own_logdir:
            shutil.rmtree(self.logdir, ignore_errors=True)
