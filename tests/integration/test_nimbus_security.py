"""Against a real `stormish nimbus` process on loopback.

The attacks of finding 1: a pickle sent to nimbus's `list`, to a verb it does not have,
and as a `hello` on its worker control port, each as another local user (uid nobody,
with the system's python3 and a ZeroMQ peer written in the standard library:
`zmtp_peer.py`) and as nimbus's own user. The pickle, if ever loaded, creates a marker
file as nimbus's user: nothing may create it. A keyed nimbus (the default) refuses the
stranger during the handshake; an --insecure one reads every request in the safe format
and refuses code on any verb but `submit`.

Finding 5: every client call has a deadline, whatever the peer does, and a client
without keys is told that the nimbus is keyed and where keys are looked for.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import closing

import pytest

from stormish.cluster.client import NimbusClient
from stormish.local.workers import _child_env
from stormish.testing import poll_for
from stormish.transport import control as ct
from stormish.transport.security import LOOPBACK, Curve

from .test_cluster import free_ports, wordcount

REFUSED = ("refused CURVE", "closed")  # never "sent": no frame got through the handshake
PEER = os.path.join(os.path.dirname(__file__), "zmtp_peer.py")
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


class _Marker:
    """Unpickled, it creates `path` (what an attacker's code would do)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


class NimbusProcess:
    def __init__(self, tmp: str, *args: str):
        self.tmp = tmp
        self.api, self.control = free_ports(2)
        self.data = os.path.join(tmp, "data")
        self.log_path = os.path.join(tmp, "nimbus.log")
        env = _child_env()
        env.pop("STORMISH_KEYS", None)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "stormish.cli", "nimbus", "--port", str(self.api),
                 "--control-port", str(self.control), "--data", self.data, *args],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.keys = None if "--insecure" in args else os.path.join(self.data, "keys")
        poll_for(self._up, 30, 0.1, "nimbus answers")

    def log(self) -> str:
        with open(self.log_path, errors="replace") as fh:
            return fh.read()

    def client(self) -> NimbusClient:
        security = Curve(self.keys) if self.keys else LOOPBACK
        return NimbusClient(f"127.0.0.1:{self.api}", security, timeout=5)

    def _up(self) -> bool:
        assert self.proc.poll() is None, self.log()
        if self.keys and not os.path.exists(os.path.join(self.keys, "cluster.key_secret")):
            return False
        with closing(self.client()) as c:
            c.timeout = 0.5
            try:
                c.call("list")
                return True
            except Exception:
                return False

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(params=["keyed", "insecure"])
def nimbus(request, tmp_path):
    n = NimbusProcess(str(tmp_path), *(("--insecure",) if request.param == "insecure" else ()))
    yield n
    n.close()


def as_whom() -> list[str]:
    return ["nobody", "same"] if os.geteuid() == 0 else ["same"]


def peer(port: int, *messages: list[bytes], user: str = "same", reply: bool = False) -> str:
    """Run the stranger's peer; what it printed."""
    with open(PEER) as fh:
        args = [SYSTEM_PYTHON, "-c", fh.read(), "127.0.0.1", str(port)]
    args += ["--reply"] if reply else []
    args += [",".join(f.hex() for f in m) for m in messages]
    kw = {"user": "nobody", "group": "nogroup"} if user == "nobody" else {}
    out = subprocess.run(args, capture_output=True, text=True, timeout=30, cwd="/", **kw)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_runner_can_be_another_user():
    if os.geteuid() != 0:
        print("SKIPPED as another user: these tests do not run as root here")
        pytest.skip("not root: cannot run the stranger as uid nobody")
    out = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import os; print(os.getuid())"], user="nobody",
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.stdout.strip() == "65534"


@pytest.mark.parametrize("user", as_whom())
def test_a_strangers_pickle_never_runs_in_nimbus(nimbus, tmp_path, user):
    marker = str(tmp_path / "ran")
    evil = pickle.dumps(_Marker(marker))
    rid = ct.ID.pack(1)
    api = [
        [b"list", rid, evil],  # a pickle where a safe payload goes
        [b"list", rid, b"null", evil],  # and in a code frame
        [b"reboot", rid, evil],  # a verb nimbus does not have
        [b"heartbeat", rid, b'{"id": "evil", "host": "x", "ports": [1]}'],
    ]
    out = peer(nimbus.api, *api, [b"list", ct.ID.pack(2), b"null"], user=user, reply=True)
    hello = [b"hello", ct.ID.pack(0), evil]
    out_control = peer(nimbus.control, hello, user=user)
    with closing(nimbus.client()) as c:
        supervisors = [s["id"] for s in c.call("supervisors")]
    if nimbus.keys:  # keyed: the handshake refuses the stranger before any frame
        # (libzmq hangs up on a NULL greeting, or shows its CURVE one first)
        assert out.strip() in REFUSED and out_control.strip() in REFUSED
        assert supervisors == []  # an unauthenticated heartbeat registers nothing
    else:  # insecure: every frame read, in the safe format; the answer to list came
        # the list with a pickle for its payload answered with an error, the one with a
        # code frame and the unknown verb dropped, the heartbeat and the last list
        # answered: every request was read
        replies = [line.split()[1].split(",") for line in out.splitlines() if "reply" in line]
        assert [r[0] for r in replies] == ["6572726f72", "6f6b", "6f6b"], out
        poll_for(lambda: "dropped a hello" in nimbus.log(), 20, 0.05, "the hello dropped")
        assert "unknown control verb 'reboot'" in nimbus.log()
    assert not os.path.exists(marker), "the stranger's pickle ran in nimbus"
    assert nimbus.proc.poll() is None


def test_submit_from_a_client_without_keys_is_refused_by_a_keyed_nimbus(tmp_path):
    n = NimbusProcess(str(tmp_path))
    try:
        marker = str(tmp_path / "ran")
        evil = ct.request("submit", 1, _Marker(marker), ct.CODE | {"submit"})
        assert peer(n.api, evil).strip() in REFUSED
        plain = NimbusClient(f"127.0.0.1:{n.api}", LOOPBACK, timeout=2)
        with closing(plain), pytest.raises(Exception, match="completed no handshake"):
            plain.call("submit", (wordcount("stranger"), {}))
        assert not os.path.exists(marker)
        assert "insecure" not in n.log()
    finally:
        n.close()


def test_nimbus_makes_private_keys_on_its_first_start_and_says_where(tmp_path):
    n = NimbusProcess(str(tmp_path))
    try:
        poll_for(lambda: "give supervisors and clients --keys" in n.log(), 20, 0.05, "said")
        assert f"--keys {n.keys}" in n.log()
        assert os.stat(n.data).st_mode & 0o077 == 0
        assert os.stat(os.path.join(n.keys, "cluster.key_secret")).st_mode & 0o077 == 0
    finally:
        n.close()
    again = NimbusProcess(str(tmp_path))  # the second start uses the keys it made
    try:
        assert "made the cluster's CURVE keys" not in again.log().split("nimbus:", 2)[-1]
    finally:
        again.close()


def test_insecure_warns_at_start_up(tmp_path):
    n = NimbusProcess(str(tmp_path), "--insecure")
    try:
        poll_for(lambda: "warning: nimbus runs --insecure" in n.log(), 20, 0.05, "warned")
    finally:
        n.close()


def test_a_supervisor_without_keys_or_insecure_is_refused(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "supervisor", "--nimbus", "127.0.0.1:1"],
        capture_output=True, text=True, timeout=60, env=dict(_child_env(), STORMISH_KEYS=""),
    )  # fmt: skip
    assert out.returncode == 2
    assert "no CURVE keys" in out.stderr and "--keys DIR" in out.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_data_directory_others_can_write_is_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, 0o777)
    api_port, control_port = (_free_port(), _free_port())
    out = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "nimbus", "--insecure", "--data", str(data),
         "--port", str(api_port), "--control-port", str(control_port)],
        capture_output=True, text=True, timeout=60, env=_child_env(),
    )  # fmt: skip
    assert out.returncode == 2
    assert f"{str(data)!r} is mode 0777" in out.stderr


class _Silent:
    """A TCP server that accepts and then says nothing (or garbage) for ever."""

    def __init__(self, garbage: bytes = b""):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.garbage = garbage
        self.conns: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.garbage:
                c.sendall(self.garbage)
            self.conns.append(c)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.mark.parametrize("peer_kind", ["keyed nimbus", "silent", "garbage"])
def test_every_client_command_has_a_deadline(tmp_path, peer_kind):
    """`stormish list --connect-timeout 1` ends, exit 2, whatever is at the address,
    and a client without keys is told where keys are looked for."""
    silent = None
    n = None
    if peer_kind == "keyed nimbus":
        n = NimbusProcess(str(tmp_path))
        port = n.api
    else:
        garbage = b"\xff" + b"\0" * 8 + b"\x7fGARBAGE" * 20
        silent = _Silent(garbage if peer_kind == "garbage" else b"")
        port = silent.port
    try:
        start = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-m", "stormish.cli", "list", "--nimbus", f"127.0.0.1:{port}",
             "--connect-timeout", "1"],
            capture_output=True, text=True, timeout=60, env=dict(_child_env(), STORMISH_KEYS=""),
        )  # fmt: skip
        took = time.monotonic() - start
    finally:
        if n is not None:
            n.close()
        if silent is not None:
            silent.close()
    assert out.returncode == 2, out.stderr
    assert "within 1s" in out.stderr and "--keys DIR or STORMISH_KEYS" in out.stderr
    assert took < 30, f"the command took {took:.1f}s with --connect-timeout 1"


def test_a_submit_whose_code_does_not_unpickle_on_nimbus_is_answered_with_why(
    tmp_path, monkeypatch
):
    """A topology importing a module nimbus's host lacks was dropped
    unanswered (the client waited 30 s and blamed the keys); nimbus answers at once,
    naming the module."""
    from stormish import StormishError, Topology

    n = NimbusProcess(str(tmp_path))  # started before the helper is on our path
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "helper_mod_31.py").write_text(
        "from stormish.testing import ListSpout\n\nclass Lines(ListSpout):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    import helper_mod_31

    t = Topology("needs-helper")
    t.set_spout("s", helper_mod_31.Lines([["a"]], fields=["line"]))
    try:
        with closing(n.client()) as c:
            start = time.monotonic()
            with pytest.raises(StormishError, match="No module named 'helper_mod_31'"):
                c.call("submit", (t, {}))
            assert time.monotonic() - start < 5  # answered, not timed out (timeout=5)
    finally:
        n.close()
