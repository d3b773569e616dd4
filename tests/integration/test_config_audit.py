"""The config audit's defects that need a file loaded or a topology run: Storm files
(Flux, streamparse) with misspelt and Storm-only keys, message timeouts turned off, the
topology's name in the conf a component receives, and bad paths through the CLI."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from stormish import BasicBolt, Spout, Topology
from stormish.errors import TopologyFileError
from stormish.loader import load_topology_file
from stormish.testing import run_topology

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

FLUX = """\
name: audit
config:
  topology.workers: 1
{topology}
spouts:
  - id: s
    className: flux_words.TestWordSpout
    parallelism: 1
bolts:
  - id: b
    className: flux_words.TestWordCounter
    parallelism: 1
    config:
{component}
streams:
  - from: s
    to: b
    grouping:
      type: SHUFFLE
"""


def _flux(tmp_path: Path, topology: str = "", component: str = "      app.key: 1") -> Path:
    shutil.copy(HERE / "flux" / "flux_words.py", tmp_path / "flux_words.py")
    path = tmp_path / "audit.yaml"
    path.write_text(FLUX.format(topology=topology, component=component))
    return path


def _load(path: Path) -> Topology:
    sys.path.insert(0, str(path.parent))
    try:
        return load_topology_file(path)[0]
    finally:
        sys.path.remove(str(path.parent))
        sys.modules.pop("flux_words", None)


def test_flux_refuses_a_misspelt_component_key_naming_file_line_and_key(tmp_path: Path):
    path = _flux(tmp_path, component="      topology.tick.tuple.freq.sec: 1")
    with pytest.raises(TopologyFileError) as exc:
        _load(path)
    assert str(exc.value) == (
        f"{path}:14: unknown config key 'topology.tick.tuple.freq.sec' (in component "
        "config); did you mean 'topology.tick.tuple.freq.secs'?"
    )


@pytest.mark.parametrize(
    ("key", "close"),
    [("topology.workerz", "topology.workers"),
     ("topology.max.spout.pendng", "topology.max.spout.pending")],
)  # fmt: skip
def test_flux_refuses_a_misspelt_topology_key_as_the_python_api_does(
    tmp_path: Path, key: str, close: str
):
    path = _flux(tmp_path, topology=f"  {key}: 2")
    with pytest.raises(TopologyFileError) as exc:
        _load(path)
    assert str(exc.value) == (
        f"{path}:4: unknown config key '{key}' (in topology config); did you mean '{close}'?"
    )


def test_flux_sets_storms_own_keys_aside_with_a_warning(tmp_path: Path, caplog):
    path = _flux(
        tmp_path,
        topology="  topology.worker.childopts: -Xmx1g",
        component="      topology.bolts.window.length.count: 5\n      app.key: 1",
    )
    with caplog.at_level(logging.WARNING, "stormish.flux"):
        topology = _load(path)
    assert topology.storm_only_config == ["topology.worker.childopts"]  # type: ignore[attr-defined]
    assert topology.components["b"].config == {"app.key": 1}
    assert "ignored: topology.worker.childopts" in caplog.text
    assert "bolt 'b': Storm config keys stormish does not use, ignored: " in caplog.text


def test_the_keys_streamparse_writes_into_a_flux_file_are_set_aside(tmp_path: Path, caplog):
    """`sparse run` writes topology.python.path into every Flux file it makes ("for
    information purposes only", streamparse's cli/common.py): found by a hunt running
    that file as it is, refused as an unknown key."""
    path = _flux(
        tmp_path,
        topology="  topology.python.path: /venvs/wc/bin/python\n  topology.original_name: wc",
    )
    with caplog.at_level(logging.WARNING, "stormish.flux"):
        topology = _load(path)
    assert sorted(topology.storm_only_config) == [  # type: ignore[attr-defined]
        "topology.original_name",
        "topology.python.path",
    ]


def test_flux_config_that_is_not_a_mapping_names_the_line(tmp_path: Path):
    path = _flux(tmp_path)
    path.write_text(path.read_text().replace("    config:\n      app.key: 1", "    config: 3"))
    with pytest.raises(TopologyFileError, match=r"audit\.yaml:\d+: 'config' must be a mapping"):
        _load(path)


SP_TOPOLOGY = """\
from parts.components import Sentences, Split
from streamparse import Grouping, Topology


class Audit(Topology):
    config = {config}
    sentences = Sentences.spec()
    split = Split.spec(inputs={{sentences: Grouping.fields("sentence")}}, config={component})
"""


def _streamparse(tmp_path: Path, config: dict, component: dict) -> Path:
    pytest.importorskip("streamparse")
    shutil.copytree(HERE / "sp_project" / "src", tmp_path / "src")
    (tmp_path / "topologies").mkdir()
    path = tmp_path / "topologies" / "audit.py"
    path.write_text(SP_TOPOLOGY.format(config=config, component=component))
    return path


def _load_sp(path: Path) -> Topology:
    try:
        return load_topology_file(path)[0]
    finally:
        for name in [m for m in sys.modules if m == "parts" or m.startswith("parts.")]:
            del sys.modules[name]


def test_streamparse_refuses_a_misspelt_component_key(tmp_path: Path):
    path = _streamparse(tmp_path, {}, {"topology.tick.tuple.freq.sec": 1})
    with pytest.raises(TopologyFileError) as exc:
        _load_sp(path)
    assert str(exc.value) == (
        f"topology file {str(path)!r}: component 'split': unknown config key "
        "'topology.tick.tuple.freq.sec' (in component config); did you mean "
        "'topology.tick.tuple.freq.secs'?"
    )


def test_streamparse_refuses_a_misspelt_topology_key(tmp_path: Path):
    path = _streamparse(tmp_path, {"topology.workerz": 2}, {})
    with pytest.raises(TopologyFileError, match=r"did you mean 'topology\.workers'\?"):
        _load_sp(path)


def test_streamparse_sets_storms_component_keys_aside(tmp_path: Path, caplog):
    path = _streamparse(
        tmp_path, {"topology.worker.childopts": "x"}, {"topology.bolts.window.length.count": 5}
    )
    with caplog.at_level(logging.WARNING, "stormish.streamparse"):
        topology = _load_sp(path)
    assert topology.storm_only_config == ["topology.worker.childopts"]  # type: ignore[attr-defined]
    assert "topology.bolts.window.length.count" not in topology.components["split"].config
    assert "component 'split': Storm config keys stormish does not use" in caplog.text


# -- topology.enable.message.timeouts ---------------------------------------------------------
class OneTree(Spout):
    outputs = ["n"]

    def open(self, conf: Any, context: Any) -> None:
        self.sent, self.outcome = False, None

    def next_tuple(self) -> None:
        if not self.sent:
            self.sent = True
            self.emit([1], msg_id=1)

    def ack(self, msg_id: Any) -> None:
        self.outcome = "acked"
        self.finish()

    def fail(self, msg_id: Any) -> None:
        self.outcome = "failed"
        self.finish()

    def result(self) -> Any:
        return self.outcome


class Slow(BasicBolt):
    def execute(self, tup: Any) -> None:
        time.sleep(2.5)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("enabled", "outcome"), [(False, "acked"), (True, "failed")])
def test_a_tree_outlives_its_timeout_only_with_timeouts_off(enabled: bool, outcome: str):
    t = Topology(
        "timeouts",
        config={
            "topology.message.timeout.secs": 1,
            "topology.enable.message.timeouts": enabled,
            "topology.executor.stuck.secs": 0,
        },
    )
    t.set_spout("s", OneTree())
    t.set_bolt("b", Slow()).shuffle_grouping("s")
    out = run_topology(t, timeout=30)
    assert out.results["s"] == [outcome]
    assert out.stats.components["s"].timed_out == (0 if enabled is False else 1)


# -- topology.name in what prepare/open receive ---------------------------------------------
class NameSpout(Spout):
    outputs = ["n"]

    def open(self, conf: Any, context: Any) -> None:
        self.name = conf.get("topology.name")

    def next_tuple(self) -> None:
        self.finish()

    def result(self) -> Any:
        return self.name


class NameBolt(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.name = conf.get("topology.name")

    def execute(self, tup: Any) -> None:
        pass

    def result(self) -> Any:
        return self.name


@pytest.mark.timeout(60)
def test_open_and_prepare_receive_the_topology_name():
    t = Topology("named-one")
    t.set_spout("s", NameSpout())
    t.set_bolt("b", NameBolt()).shuffle_grouping("s").add_configuration("app.key", 1)
    out = run_topology(t, timeout=30)
    assert out.results["s"] == ["named-one"]
    assert out.results["b"] == ["named-one"]


# -- the CLI: a log directory that is a file -------------------------------------------------
@pytest.mark.timeout(90)
def test_a_log_dir_that_is_a_file_is_a_config_error_exit_2(tmp_path: Path):
    f = tmp_path / "file"
    f.write_text("x")
    r = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", "topologies/wordcount.py", "-w", "2",
         "-c", f'stormish.local.log.dir="{f}"'],
        cwd=ROOT, capture_output=True, text=True, timeout=80,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "config key 'stormish.local.log.dir'" in r.stderr
    assert "Traceback" not in r.stderr
