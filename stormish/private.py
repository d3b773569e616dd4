"""Files and directories only their owner may use: private from the first byte, and
checked before what is in them is trusted.

A file written and then chmod-ed can be opened by anyone in between (an open file
descriptor keeps working after the chmod): a secret key was read that way 10 times in
10 tries. So a file is created with its mode (`os.open(..., O_CREAT | O_EXCL, 0o600)`)
under a temporary name in its own directory and renamed into place (whole or not at all),
and a directory is made with 0700. The umask can only take bits away, never add them,
so the chmod that follows (to the exact mode, whatever the umask) never widens it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import stat

from .errors import ConfigError

PRIVATE = 0o077  # the group's and others' bits: none of them on a private path


def make_dir(path: str) -> bool:
    """Create directory `path` with mode 0700, and its missing parents too; True when
    `path` was made now, False when it was there (left as it is: see `check`)."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        make_dir(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return False
    os.chmod(path, 0o700)  # exactly 0700 whatever the umask (it only ever took bits away)
    return True


def open_file(path: str, mode: int = 0o600) -> None:
    """Make sure file `path` exists with no wider mode than `mode`: created with it
    (not through a link), or an existing one narrowed to it. For a file another program
    then opens by name (a SQLite database: its journals take the database's mode)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & ~mode:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def write(path: str, data: bytes, mode: int = 0o600) -> None:
    """Replace `path` with `data`, never visible with a wider mode than `mode` nor half
    written: a new temporary file in the same directory (O_EXCL: not one someone else
    made; O_NOFOLLOW: not a link), synced, then renamed over `path`."""
    directory, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, f".{base}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)  # exact, whatever the umask
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_dir(directory)


def _sync_dir(directory: str) -> None:
    """Make a rename in `directory` durable (where the platform can)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def check(path: str, what: str, forbidden: int = PRIVATE, owner_only: bool = True) -> None:
    """Refuse `path` (a ConfigError naming it, its mode and the fix) when the group or
    others have any of the `forbidden` bits on it, or, with `owner_only`, when it belongs
    to another user than this process's: a careful operator's keys are theirs alone.
    Root may use what another account owns (a container's root reading the keys its
    host's operator made: that account holds the cluster's secret anyway)."""
    st = os.stat(path)
    mode = stat.S_IMODE(st.st_mode)
    if mode & forbidden:
        verbs = _verbs(mode & forbidden, stat.S_ISDIR(st.st_mode))
        raise ConfigError(
            f"refusing {what} {path!r}: mode {mode:04o} lets others {verbs} it; "
            f"chmod {mode & ~forbidden:o} {shlex.quote(path)}"
        )
    euid = os.geteuid()
    if owner_only and euid != 0 and st.st_uid != euid:
        raise ConfigError(
            f"refusing {what} {path!r}: it belongs to uid {st.st_uid}, not to this "
            f"process's uid {euid} (only root may use another user's keys): run as its "
            "owner, or make keys of your own"
        )


def _verbs(bits: int, directory: bool) -> str:
    named = ((0o044, "read"), (0o022, "write"), (0o011, "enter" if directory else "execute"))
    return " or ".join(v for b, v in named if bits & b)
