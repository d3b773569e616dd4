"""Key files private from the first byte, refused when they are not."""

from __future__ import annotations

import os
import stat
import threading

import pytest
import zmq
import zmq.auth
from click.testing import CliRunner

from stormish import ConfigError
from stormish import cli_cluster as commands
from stormish.transport import keys


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_000():
    old = os.umask(0)
    yield
    os.umask(old)


def test_with_umask_000_the_directory_and_every_file_are_private(tmp_path, umask_000):
    d = tmp_path / "a" / "keys"
    public, secret = keys.create(str(d))
    assert mode(d) == 0o700 and mode(tmp_path / "a") == 0o700
    assert mode(secret) == 0o600 and mode(public) == 0o600
    assert sorted(os.listdir(d)) == ["cluster.key", "cluster.key_secret"]  # no temporary left
    # ZeroMQ's own reader still reads what we wrote
    pub, sec = zmq.auth.load_certificate(secret)
    assert zmq.curve_public(sec) == pub
    assert zmq.auth.load_certificate(public) == (pub, None)
    assert keys.load(str(d)) == (pub, sec)


def test_a_watcher_never_sees_a_secret_with_a_wider_mode(tmp_path, umask_000):
    """A thread stats every file while 50 key directories are made: every secret it sees
    (its temporary file too) is 0600 from its first byte, every directory 0700; never
    0666-then-0600 as a file written then chmod-ed."""
    seen: dict[str, set[int]] = {}
    stop = threading.Event()

    def look(path: str, kind: str) -> None:
        try:
            seen.setdefault(kind, set()).add(mode(path))
        except FileNotFoundError:
            pass  # renamed away meanwhile

    def watch() -> None:
        while not stop.is_set():
            for sub in os.scandir(tmp_path):
                look(sub.path, "directory")
                for entry in os.scandir(sub.path) if sub.is_dir() else ():
                    look(entry.path, "secret" if "key_secret" in entry.name else "public")

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        for i in range(50):
            keys.create(str(tmp_path / f"k{i}"))
    finally:
        stop.set()
        t.join(10)
    assert seen.get("secret") == {0o600}, seen
    assert seen.get("directory") == {0o700}, seen


@pytest.mark.parametrize("dir_mode", [0o755, 0o750, 0o711, 0o707])
def test_keys_are_not_made_in_a_directory_others_can_use(tmp_path, dir_mode):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(dir_mode)
    with pytest.raises(ConfigError, match=rf"refusing keys in '{d}': mode 0{dir_mode:o} lets"):
        keys.create(str(d))
    assert os.listdir(d) == []


def test_loading_refuses_a_directory_others_can_read_or_write_naming_it(tmp_path):
    d = tmp_path / "keys"
    keys.create(str(d))
    d.chmod(0o755)
    expected = f"refusing keys in '{d}': mode 0755 lets others read or enter it; chmod 700 {d}"
    with pytest.raises(ConfigError) as err:
        keys.load(str(d))
    assert str(err.value) == expected
    d.chmod(0o770)
    with pytest.raises(ConfigError, match="mode 0770 lets others read or write or enter it"):
        keys.load(str(d))


def test_loading_refuses_a_secret_others_can_read(tmp_path):
    d = tmp_path / "keys"
    _, secret = keys.create(str(d))
    os.chmod(secret, 0o640)
    with pytest.raises(ConfigError, match=rf"refusing the secret key '{secret}': mode 0640"):
        keys.load(str(d))
    os.chmod(secret, 0o602)
    with pytest.raises(ConfigError, match="mode 0602 lets others write it; chmod 600"):
        keys.load(str(d))


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_root_may_use_keys_another_user_owns(tmp_path):
    """A container's root reading the keys its host's operator made (docker/compose.yaml)."""
    d = tmp_path / "keys"
    keys.create(str(d))
    for p in (d, *d.iterdir()):
        os.chown(p, 65534, 65534)
    assert len(keys.load(str(d))[1]) == 40


def test_a_mismatched_or_broken_pair_is_refused(tmp_path):
    d = tmp_path / "keys"
    _, secret = keys.create(str(d))
    other, _ = zmq.curve_keypair()
    pub = zmq.auth.load_certificate(secret)[0].decode()
    with open(secret, "r+") as fh:
        text = fh.read().replace(pub, other.decode())
        fh.seek(0)
        fh.write(text)
    with pytest.raises(ConfigError, match="its public key is not the secret key's"):
        keys.load(str(d))


def test_only_authorized_keys_are_read_and_they_must_be_well_formed(tmp_path):
    d = tmp_path / "keys"
    keys.create(str(d))
    zmq.auth.create_certificates(str(d), "stray")  # dropped in the directory: not trusted
    assert keys.authorized(str(d)) == frozenset()
    client = tmp_path / "laptop.key"
    zmq.auth.create_certificates(str(tmp_path), "laptop")
    key = keys.authorize(str(d), str(client))
    assert keys.authorize(str(d), str(client)) == key  # once
    path = d / keys.AUTHORIZED
    assert mode(path) == 0o600
    assert path.read_text() == f"{key.decode()} laptop.key\n"
    assert keys.authorized(str(d)) == frozenset({key})
    path.write_text(f"# laptops\n\n{key.decode()} laptop\nnot-a-key\n")
    with pytest.raises(ConfigError, match=rf"{path}:4: b'not-a-key' is not a z85 CURVE"):
        keys.authorized(str(d))
    path.write_text(f"{key.decode()}\n")
    path.chmod(0o666)
    with pytest.raises(ConfigError, match="refusing authorized keys .* mode 0666 lets others"):
        keys.authorized(str(d))


def test_ensure_makes_the_keys_once_then_loads_them(tmp_path):
    d = str(tmp_path / "data" / "keys")
    first = keys.ensure(d)
    assert keys.ensure(d) == first == keys.load(d)


def test_the_keys_command_authorises_clients_and_makes_client_keys(tmp_path):
    run = CliRunner().invoke
    cluster, laptop = str(tmp_path / "keys"), str(tmp_path / "laptop")
    assert run(commands.keys, [cluster]).exit_code == 0
    out = run(commands.keys, [laptop, "--client-of", cluster])
    assert out.exit_code == 0, out.output
    assert sorted(os.listdir(laptop)) == ["client.key", "client.key_secret", "cluster.key"]
    assert mode(laptop) == 0o700 and all(mode(p) == 0o600 for p in _files(laptop))
    public = zmq.auth.load_certificate(os.path.join(laptop, "client.key"))[0]
    assert keys.authorized(cluster) == frozenset({public})
    assert (tmp_path / "keys" / keys.AUTHORIZED).read_text().endswith(" laptop\n")
    zmq.auth.create_certificates(str(tmp_path), "other")
    out = run(commands.keys, [cluster, "--authorize", str(tmp_path / "other.key")])
    assert out.exit_code == 0 and "authorised" in out.output
    assert len(keys.authorized(cluster)) == 2
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    out = run(commands.keys, [str(shared)])
    assert out.exit_code == 2 and "mode 0777 lets others read or write or enter it" in out.output


def _files(d: str) -> list[str]:
    return [os.path.join(d, n) for n in os.listdir(d)]


def test_keys_another_user_owns_are_refused_unless_the_process_is_root(tmp_path, monkeypatch):
    """Whoever owns a keys directory can swap its keys or authorise one of their own: a
    process uses only keys of its own user. Root may use another account's (above)."""
    d = tmp_path / "keys"
    keys.create(str(d))
    owner = os.stat(d).st_uid
    monkeypatch.setattr("stormish.private.os.geteuid", lambda: owner + 1)
    with pytest.raises(ConfigError) as err:
        keys.load(str(d))
    assert str(err.value).startswith(
        f"refusing keys in '{d}': it belongs to uid {owner}, not to this process's uid {owner + 1}"
    )
