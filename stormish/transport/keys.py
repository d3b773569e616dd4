"""The cluster's CURVE key pair on disk (`stormish keys DIR`).

The secret file is written owner-only. Loading names the file that is missing or broken:
a daemon started with a wrong `--keys` must say which path it read.
"""

from __future__ import annotations

import os

from ..errors import ConfigError

NAME = "cluster"


def paths(directory: str) -> tuple[str, str]:
    return os.path.join(directory, f"{NAME}.key"), os.path.join(directory, f"{NAME}.key_secret")


def create(directory: str, force: bool = False) -> tuple[str, str]:
    """Write a new key pair; refuses to replace one unless `force` (every daemon and
    worker of the cluster would need the new one)."""
    import zmq.auth

    public, secret = paths(directory)
    if not force and (os.path.exists(public) or os.path.exists(secret)):
        raise ConfigError(f"keys already exist in {directory!r} (use --force to replace them)")
    os.makedirs(directory, exist_ok=True)
    zmq.auth.create_certificates(directory, NAME)
    os.chmod(secret, 0o600)
    return public, secret


def load(directory: str) -> tuple[bytes, bytes]:
    """(public, secret) of the cluster key pair in `directory`."""
    import zmq.auth

    _, secret = paths(directory)
    if not os.path.isfile(secret):
        raise ConfigError(
            f"no cluster key in {directory!r}: {secret!r} is missing (create the keys with "
            "`stormish keys DIR` and give every daemon and worker the same directory)"
        )
    try:
        public, sec = zmq.auth.load_certificate(secret)
    except Exception as exc:
        raise ConfigError(f"cannot read the cluster key {secret!r}: {exc}") from exc
    if not sec:
        raise ConfigError(f"{secret!r} holds no secret key")
    return public, sec


def ensure(directory: str) -> bool:
    """Load-or-make: the cluster's keys in `directory`, made now if there are none there
    (nimbus's first start). True when they were made."""
    public, secret = paths(directory)
    if os.path.exists(public) or os.path.exists(secret):
        load(directory)  # fails, naming the file, if they are broken
        return False
    create(directory)
    return True
