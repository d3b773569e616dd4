"""Names that cannot escape their root: the rule where a topology is
built, again in nimbus's store and the embedded state, and paths checked to stay inside."""

from __future__ import annotations

import os
import stat

import pytest

from stormish import Bolt, StormishError, Topology, TopologyError
from stormish.cluster.store import Store
from stormish.names import MAX_LENGTH, inside
from stormish.state.sqlite import SqliteStore, db_path

from .idle import IdleSpout

BAD = [
    (".", "names a directory itself or its parent"),
    ("..", "names a directory itself or its parent"),
    ("a/b", "holds a character other than"),
    ("a\\b", "holds a character other than"),
    ("a\0b", "holds a character other than"),
    ("", "is empty"),
    ("x" * 10_000, "is 10000 characters long, more than 128"),
]


class _S(IdleSpout):
    pass


class _B(Bolt):
    def execute(self, t) -> None:
        pass


@pytest.mark.parametrize(("name", "problem"), BAD)
def test_a_bad_topology_name_is_refused_at_build_naming_it_and_the_rule(name, problem):
    with pytest.raises(TopologyError) as err:
        Topology(name)
    message = str(err.value)
    assert message.startswith("topology name ") and problem in message
    assert "not '.' or '..'" in message and "no '/', '\\'" in message
    assert len(message) < 400  # a 10,000-character name is not printed whole


@pytest.mark.parametrize(("name", "problem"), BAD)
def test_a_bad_component_id_is_refused(name, problem):
    with pytest.raises(TopologyError, match=f"component id .*{problem}"):
        Topology("t").set_spout(name, _S())


def test_good_names_pass_up_to_the_length_limit():
    t = Topology("word-count_2.1")
    t.set_spout("s" * MAX_LENGTH, _S())
    t.set_bolt("b.1", _B())
    Topology("n" * MAX_LENGTH)
    with pytest.raises(TopologyError, match="129 characters"):
        Topology("n" * (MAX_LENGTH + 1))


def test_a_topology_renamed_on_the_wire_is_refused_by_validate():
    """What nimbus receives on submit was not built by `__init__` (a pickle can carry any
    name): `validate`, which nimbus runs on every submit, checks the name again."""
    t = Topology("ok")
    t.set_spout("s", _S())
    t.name = ".."
    with pytest.raises(TopologyError, match=r"topology name '\.\.' names a directory"):
        t.validate()


@pytest.mark.parametrize(("name", "_problem"), BAD)
def test_the_store_refuses_bad_names_and_removes_nothing_outside(tmp_path, name, _problem):
    sentinel = tmp_path / "sentinel"
    sentinel.write_text("keep")
    data = tmp_path / "data"
    s = Store(str(data))
    s.save_topology("kept", {"a": 1}, {})
    s.save_state("kept", {"status": "running"})
    for act in (
        lambda: s.forget(name),
        lambda: s.save_topology(name, {}, {}),
        lambda: s.save_state(name, {}),
        lambda: s.save_final(name, {}),
    ):
        with pytest.raises(TopologyError, match="topology name"):
            act()
    assert sentinel.read_text() == "keep"
    assert [n for n, *_ in s.load_all()] == ["kept"]
    assert sorted(os.listdir(tmp_path)) == ["data", "sentinel"]


def test_the_store_does_not_follow_a_link_out_of_its_root(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    s = Store(str(tmp_path / "data"))
    os.symlink(outside, os.path.join(s.root, "link"))
    with pytest.raises(StormishError, match="not inside"):
        s.forget("link")
    assert (outside / "precious").read_text() == "keep"


def test_inside_keeps_paths_strictly_under_their_root(tmp_path):
    assert inside(str(tmp_path), "a", "b.db") == os.path.join(str(tmp_path), "a", "b.db")
    for parts in (("..",), (".",), ("a", "..", ".."), ("/etc",)):
        with pytest.raises(StormishError, match=f"not inside '{tmp_path}'"):
            inside(str(tmp_path), *parts)


def test_the_state_path_stays_in_the_state_directory(tmp_path):
    root = str(tmp_path / "state")
    assert db_path(root, "t", "count-1") == os.path.join(root, "t", "count-1.db")
    assert db_path(root, "t", "../../x-1") == os.path.join(root, "t", ".._.._x-1.db")
    for name in ("..", ".", "a/b", "x" * 10_000):
        with pytest.raises(TopologyError, match="topology name"):
            db_path(root, name, "count-1")


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_state_files_are_0600_in_0700_directories_whatever_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        path = db_path(str(tmp_path / "data" / "state"), "t", "count-1")
        store = SqliteStore(path)
        store.prepare(1, {"k": 1})
        store.commit(1)
        files = [f for f in os.listdir(os.path.dirname(path))]
        modes = {f: _mode(os.path.join(os.path.dirname(path), f)) for f in files}
        store.close()
    finally:
        os.umask(old)
    assert "count-1.db-wal" in modes and set(modes.values()) == {0o600}, modes
    for d in ("data", "data/state", "data/state/t"):
        assert _mode(tmp_path / d) == 0o700, d


def test_an_older_state_file_is_narrowed_when_opened(tmp_path):
    path = db_path(str(tmp_path), "t", "n-1")
    os.makedirs(os.path.dirname(path))
    open(path, "w").close()
    os.chmod(path, 0o644)
    SqliteStore(path).close()
    assert _mode(path) == 0o600
