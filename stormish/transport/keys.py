"""The cluster's CURVE keys on disk (`stormish keys DIR`): private from the first byte,
checked before they are trusted, and only the keys an operator named are let in.

A cluster's keys directory (mode 0700) holds:
- `cluster.key_secret`: the cluster's key pair, and `cluster.key`: its public half, in
  ZeroMQ's certificate format (`zmq.auth.load_certificate` reads them). Every daemon and
  worker of the cluster is given this directory.
- `authorized_keys` (when a client was authorised): the public keys of clients an
  operator let in on purpose (`stormish keys DIR --authorize FILE`, `--client-of`), one
  z85 key a line, then an optional comment; `#` starts a comment line.
Nothing else is trusted: a `*.key` dropped in the directory lets no one in.

A client's directory (`stormish keys CLIENTDIR --client-of DIR`) holds a key pair of its
own (`client.key_secret`, `client.key`) and the cluster's public `cluster.key`: enough
to talk to the cluster (as a client: it cannot serve), not to be it, and the operator
can take it back by deleting its line from `authorized_keys` (then restart nimbus).

Every file is written 0600 (`private.write`: created with the mode, renamed into place)
and the directory made 0700, whatever the umask. Loading refuses a directory, secret
or `authorized_keys` the group or others can use (public files: write), and one another
user owns unless the process is root (`private.check`). A loading error names the path
it read: a daemon started with a wrong `--keys` must say which path it looked at.
"""

from __future__ import annotations

import datetime
import os

from .. import private
from ..errors import ConfigError

NAME = "cluster"
CLIENT = "client"
AUTHORIZED = "authorized_keys"
_PUBLIC_FILE = 0o022  # a public key may be read by anyone, changed by its owner only


def paths(directory: str) -> tuple[str, str]:
    """(public, secret) certificate files of the cluster's key pair in `directory`."""
    return _pair_paths(directory, NAME)


def _pair_paths(directory: str, name: str) -> tuple[str, str]:
    return os.path.join(directory, f"{name}.key"), os.path.join(directory, f"{name}.key_secret")


def create(directory: str, force: bool = False) -> tuple[str, str]:
    """Write a new cluster key pair, in a directory made 0700 now or already private;
    refuses to replace a pair unless `force` (every daemon and worker of the cluster
    would need the new one). Returns (public, secret) file paths."""
    import zmq

    _private_dir(directory)
    public, secret = paths(directory)
    if not force and (os.path.exists(public) or os.path.exists(secret)):
        raise ConfigError(f"keys already exist in {directory!r} (use --force to replace them)")
    pub, sec = zmq.curve_keypair()
    _write_pair(directory, NAME, pub, sec)
    return public, secret


def ensure(directory: str) -> tuple[bytes, bytes]:
    """(public, secret) of the cluster key pair in `directory`, made there first when
    there is none (nimbus's first start). Refuses what `load` refuses."""
    if not os.path.exists(paths(directory)[1]):
        create(directory)
    return load(directory)


def load(directory: str) -> tuple[bytes, bytes]:
    """(public, secret) z85 of the cluster key pair in `directory`, once the directory
    and the secret file are found private."""
    _, secret = paths(directory)
    if not os.path.isfile(secret):
        raise ConfigError(
            f"no cluster key in {directory!r}: {secret!r} is missing (create the keys with "
            "`stormish keys DIR` and give every daemon and worker the same directory)"
        )
    return _load_pair(directory, secret)


def load_any(directory: str) -> tuple[bytes, bytes, bytes]:
    """(public, secret, server public) of the keys in `directory`: the cluster's pair
    (the server key is its own public key), else a client's pair and the cluster's
    public key beside it."""
    _, secret = paths(directory)
    client_public, client_secret = _pair_paths(directory, CLIENT)
    if os.path.isfile(secret) or not os.path.isfile(client_secret):
        public, sec = load(directory)
        return public, sec, public
    public, sec = _load_pair(directory, client_secret)
    server = os.path.join(directory, f"{NAME}.key")
    if not os.path.isfile(server):
        raise ConfigError(
            f"client keys in {directory!r} without the cluster's public key: {server!r} is "
            "missing (copy it from the cluster's keys directory)"
        )
    return public, sec, _read_public(server)


def authorized(directory: str) -> frozenset[bytes]:
    """The client public keys (z85) an operator let in: `authorized_keys`, or none."""
    path = os.path.join(directory, AUTHORIZED)
    if not os.path.exists(path):
        return frozenset()
    private.check(path, "authorized keys", _PUBLIC_FILE)
    return frozenset(_parse_authorized(path))


def authorize(directory: str, key_file: str, comment: str | None = None) -> bytes:
    """Let the public key in `key_file` (a ZeroMQ certificate, e.g. a client's
    `client.key`) into the cluster whose keys are in `directory`: recorded in its
    `authorized_keys` with `comment` (default: the file's name), the file replaced whole
    (0600). Returns the key (z85)."""
    own, _ = load(directory)
    key = _read_public(key_file, check=False)
    if key == own:
        raise ConfigError(f"{key_file!r} holds the cluster's own key: nothing to authorise")
    path = os.path.join(directory, AUTHORIZED)
    if key in authorized(directory):
        return key
    old = _read_bytes(path) if os.path.exists(path) else b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    note = " ".join((comment or os.path.basename(os.path.abspath(key_file))).split())
    private.write(path, old + f"{key.decode()} {note}\n".encode())
    return key


def create_client(directory: str, cluster_dir: str) -> tuple[str, str]:
    """A client's keys in a new `directory`: a key pair of its own and the cluster's
    public key, the pair authorised in `cluster_dir` (the cluster's keys). Returns the
    client's (public, secret) file paths."""
    import zmq

    cluster_public, _ = load(cluster_dir)
    _private_dir(directory)
    public, secret = _pair_paths(directory, CLIENT)
    if os.path.exists(secret) or os.path.exists(paths(directory)[1]):
        raise ConfigError(f"keys already exist in {directory!r}: give a new directory")
    pub, sec = zmq.curve_keypair()
    _write_pair(directory, CLIENT, pub, sec)
    private.write(paths(directory)[0], _certificate(cluster_public))
    authorize(cluster_dir, public, os.path.basename(os.path.abspath(directory)))
    return public, secret


# -- files ------------------------------------------------------------------------------
def _private_dir(directory: str) -> None:
    """`directory` made 0700 now, or one already there that is private and ours."""
    if not private.make_dir(directory):
        if not os.path.isdir(directory):
            raise ConfigError(f"cannot keep keys in {directory!r}: it is not a directory")
        private.check(directory, "keys in")


def _write_pair(directory: str, name: str, public: bytes, secret: bytes) -> None:
    """The secret first: a reader between the two renames finds a whole pair in it."""
    pub_path, sec_path = _pair_paths(directory, name)
    private.write(sec_path, _certificate(public, secret))
    private.write(pub_path, _certificate(public))


def _certificate(public: bytes, secret: bytes | None = None) -> bytes:
    """ZeroMQ's certificate text (as `zmq.auth.create_certificates` writes it)."""
    what = "**Secret** Certificate" if secret else "Public Certificate"
    lines = [
        f"#   ****  Generated on {datetime.datetime.now()} by stormish  ****",
        f"#   ZeroMQ CURVE {what}",
        "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions."
        if secret
        else "#   Exchange securely: a client's public key lets it into a cluster.",
        "",
        "metadata",
        "curve",
        f'    public-key = "{public.decode()}"',
    ]
    if secret:
        lines.append(f'    secret-key = "{secret.decode()}"')
    return ("\n".join(lines) + "\n").encode()


def _load_pair(directory: str, secret: str) -> tuple[bytes, bytes]:
    import zmq
    import zmq.auth

    private.check(directory, "keys in")
    private.check(secret, "the secret key")
    try:
        public, sec = zmq.auth.load_certificate(secret)
    except Exception as exc:
        raise ConfigError(f"cannot read the key {secret!r}: {exc}") from exc
    if not sec:
        raise ConfigError(f"{secret!r} holds no secret key")
    try:
        matches = zmq.curve_public(sec) == public
    except (zmq.ZMQError, ValueError) as exc:
        raise ConfigError(f"{secret!r}: the secret key is malformed: {exc}") from None
    if not matches:
        raise ConfigError(f"{secret!r}: its public key is not the secret key's")
    return public, sec


def _read_public(path: str, check: bool = True) -> bytes:
    import zmq.auth

    if check:
        private.check(path, "the public key", _PUBLIC_FILE)
    try:
        public, _ = zmq.auth.load_certificate(path)
    except Exception as exc:
        raise ConfigError(f"cannot read a public key from {path!r}: {exc}") from exc
    problem = _key_problem(public)
    if problem:
        raise ConfigError(f"{path!r}: {problem}")
    return public


def _parse_authorized(path: str) -> list[bytes]:
    keys = []
    for n, raw in enumerate(_read_bytes(path).splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        key = line.split()[0]
        problem = _key_problem(key)
        if problem:
            raise ConfigError(f"{path}:{n}: {problem}")
        keys.append(key)
    return keys


def _key_problem(key: bytes) -> str | None:
    """Why `key` is not a z85 CURVE public key (40 characters for 32 bytes), or None."""
    from zmq.utils import z85

    try:
        if len(key) == 40 and len(z85.decode(key)) == 32:
            return None
    except (KeyError, ValueError, TypeError):
        pass
    return f"{key[:50]!r} is not a z85 CURVE public key (40 characters)"


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()
