"""Nimbus's data directory: what it must remember across a restart.

`topologies/NAME/topology.pkl` holds the submitted topology and its validated config
(cloudpickled, written once); `state.json` its status and worker slots, replaced
atomically on every change; `final.json` the final statistics once it ended. A nimbus
that restarts reloads every topology and adopts the workers that still run.

Names come from the wire (a submit), so every method checks the name (`names.check_name`)
and that the directory it makes of it stays inside `topologies/` (`names.inside`) before
it writes or removes anything: a topology named `..` must not take the data directory
with it. Each topology's directory is 0700 and its files 0600 (they hold its code and
config).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from typing import Any

import cloudpickle

from .. import pickling
from ..errors import StormishError
from ..names import check_name, inside

log = logging.getLogger("stormish.nimbus")


class Store:
    def __init__(self, data_dir: str):
        self.root = os.path.join(os.path.abspath(data_dir), "topologies")
        # 0700 whatever the umask: a pickle another local user could plant here would
        # be unpickled (run) by nimbus at its next start (`cli_cluster` refuses a
        # root that others can write or that another user owns)
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        os.chmod(self.root, 0o700)

    def _dir(self, name: str) -> str:
        """The directory of topology `name`, a checked name strictly inside the root."""
        return inside(self.root, check_name(name, "topology name"))

    def save_topology(self, name: str, topology: Any, conf: dict[str, Any]) -> None:
        d = self._dir(name)
        os.makedirs(d, mode=0o700, exist_ok=True)
        os.chmod(d, 0o700)  # whatever the umask
        try:
            self._write(name, "topology.pkl", pickling.dumps((topology, conf)))
        except BaseException:  # a full disk: no half-stored topology for the next start
            self.forget(name)
            raise

    def save_state(self, name: str, state: dict[str, Any]) -> None:
        self._write(name, "state.json", json.dumps(state, sort_keys=True).encode())

    def save_final(self, name: str, final: dict[str, Any]) -> None:
        self._write(name, "final.json", json.dumps(final).encode())

    def load_final(self, name: str) -> dict[str, Any] | None:
        """The final statistics saved of topology `name` (None: none were)."""
        try:
            with open(os.path.join(self._dir(name), "final.json")) as fh:
                final = json.load(fh)
        except FileNotFoundError:
            return None
        return final if isinstance(final, dict) else None

    def forget(self, name: str) -> None:
        """Remove topology `name`'s directory (nothing else: the name is checked first)."""
        shutil.rmtree(self._dir(name), ignore_errors=True)

    # a single nimbus keeps what it hears from supervisors in memory (ZkStore writes it)
    def save_supervisor(self, sid: str, info: dict[str, Any]) -> None:
        pass

    def forget_supervisor(self, sid: str) -> None:
        pass

    def supervisors(self) -> dict[str, dict[str, Any]]:
        return {}

    def load_all(self) -> list[tuple[str, Any, dict[str, Any], dict[str, Any]]]:
        """(name, topology, conf, state) of every stored topology. One whose code no
        longer loads (a module it imports was removed by an upgrade, a damaged file)
        comes with topology None, conf {} and its state's `unloadable` saying why: it
        must not keep nimbus, and every other topology, from starting."""
        out: list[tuple[str, Any, dict[str, Any], dict[str, Any]]] = []
        for name in sorted(os.listdir(self.root)):
            try:
                d = self._dir(name)
                with open(os.path.join(d, "state.json")) as fh:
                    state = json.load(fh)
                if not isinstance(state, dict):
                    raise ValueError(f"state.json holds {type(state).__name__}, not a mapping")
            except (OSError, ValueError, StormishError) as exc:
                log.warning(f"nimbus: skipping stored topology {name!r}: {exc}")
                continue
            try:
                with open(os.path.join(d, "topology.pkl"), "rb") as fh:
                    topology, conf = cloudpickle.load(fh)
                if not isinstance(conf, dict):
                    raise TypeError(f"its config is a {type(conf).__name__}, not a mapping")
            except Exception as exc:  # noqa: BLE001 - unpickling runs any code
                why = f"its stored code no longer loads: {type(exc).__name__}: {exc}"
                out.append((name, None, {}, dict(state, unloadable=why)))
                continue
            out.append((name, topology, conf, state))
        return out

    def _write(self, name: str, filename: str, data: bytes) -> None:
        write_atomic(self._dir(name), filename, data, durable=True)


def write_atomic(directory: str, filename: str, data: bytes, durable: bool = False) -> None:
    """`data` as `directory/filename`, whole or not at all (a temp file renamed into
    place; `durable`: fsynced first). A full disk leaves no half-written temp file."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{filename}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, os.path.join(directory, filename))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
