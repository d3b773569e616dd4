"""Which modules `submit` ships with a topology file: those it
imports from its own directory (a module or a package there), not the topology module
itself, not what is installed (even in a virtualenv inside that directory), and not
past the size limit."""

from __future__ import annotations

import sys

import cloudpickle
import pytest
from cloudpickle.cloudpickle import _is_registered_pickle_by_value as by_value

from stormish.errors import TopologyFileError
from stormish.loader import load_topology_module, ship_local_modules

TOPOLOGY = """
import json  # the standard library: not shipped
import near_ship_t
from pkg_ship_t import sub
import venv_lib_ship_t  # installed (a site-packages inside the directory)
from stormish import Topology
from stormish.testing import ListSpout

topology = Topology("t")
topology.set_spout("s", ListSpout([[near_ship_t.X + sub.Y]], fields=["x"]))
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pkg_ship_t").mkdir()
    (tmp_path / "pkg_ship_t" / "__init__.py").write_text("")
    (tmp_path / "pkg_ship_t" / "sub.py").write_text("Y = 2\n")
    (tmp_path / "near_ship_t.py").write_text("X = 1\n" + "# padding\n" * 100)
    site = tmp_path / "venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    (site / "venv_lib_ship_t.py").write_text("Z = 3\n")
    monkeypatch.syspath_prepend(str(site))
    (tmp_path / "topo.py").write_text(TOPOLOGY)
    yield tmp_path
    for name in [n for n in sys.modules if "ship_t" in n]:
        mod = sys.modules.pop(name)
        if by_value(mod) and "." not in name:
            cloudpickle.unregister_pickle_by_value(mod)


def test_the_modules_of_its_own_directory_that_it_imports_are_found(project):
    _topo, _after, local = load_topology_module(project / "topo.py")
    assert [m.name for m in local] == ["near_ship_t", "pkg_ship_t"]
    near, pkg = local
    assert near.files == (str(project / "near_ship_t.py"),)
    assert near.size == (project / "near_ship_t.py").stat().st_size
    assert sorted(pkg.files) == sorted(
        [str(project / "pkg_ship_t" / "__init__.py"), str(project / "pkg_ship_t" / "sub.py")]
    )
    assert ship_local_modules(local) == near.size + pkg.size
    assert by_value(sys.modules["near_ship_t"])
    assert by_value(sys.modules["pkg_ship_t"])


def test_past_the_limit_submit_refuses_naming_the_largest(project):
    _topo, _after, local = load_topology_module(project / "topo.py")
    with pytest.raises(TopologyFileError, match=r"more than submit ships \(100 bytes\): "
                       r"near_ship_t \([\d,]+ bytes\).*--no-ship"):  # fmt: skip
        ship_local_modules(local, limit=100)
    assert not by_value(sys.modules["near_ship_t"])
