"""Storm flux-core's TCKTest, scenario by scenario: its configs
(src/test/resources/configs/) are in tests/integration/flux_tck/configs/ with Python
classes (tck_classes.py) in place of the Java ones, and each test checks what Storm's
test checks: the topology builds with the structure Storm's FluxBuilder gives it, or a
bad config is refused with an error naming the file, the line and what is wrong.

Where stormish differs from Storm the port says so in the YAML: component config uses
`topology.debug` (stormish ignores Storm's `topology.tuple.compression.enable`), the
diamond's inner bolts pass tuples on (Storm's LogInfoBolt declares no stream, which
Storm's nimbus refuses at submit), and config-methods-test's dangling `time2` ref is
an error here (Storm passes null)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stormish.errors import TopologyFileError
from stormish.loader import load_topology_file

HERE = Path(__file__).resolve().parent / "flux_tck" / "configs"
ROOT = Path(__file__).resolve().parents[2]


def load(name: str, **options):
    topology = load_topology_file(HERE / name, **options)[0]
    topology.validate()
    return topology


def edges(topology) -> dict[str, list[tuple[str, str, str, tuple[str, ...]]]]:
    return {
        n: [(s.source, s.stream, s.grouping, s.fields) for s in spec.subscriptions]
        for n, spec in topology.components.items()
    }


def test_tck() -> None:
    """TCKTest.testTCK: tck.yaml, numTasks as the task count, FIELDS and a CUSTOM
    grouping made with its constructorArgs."""
    t = load("tck.yaml")
    assert t.name == "yaml-topology"
    assert t.config["topology.workers"] == 1
    assert {n: s.parallelism for n, s in t.components.items()} == {
        "spout-1": 5, "bolt-1": 100, "bolt-2": 1}  # fmt: skip
    assert edges(t) == {
        "spout-1": [],
        "bolt-1": [("spout-1", "default", "fields", ("word",))],
        "bolt-2": [("bolt-1", "default", "custom", ())],
    }
    grouping = t.components["bolt-2"].subscriptions[0].custom
    assert type(grouping).__name__ == "NGrouping" and grouping.n == 1


def _shell_structure(t) -> None:
    assert edges(t) == {
        "sentence-spout": [],
        "splitsentence": [("sentence-spout", "default", "shuffle", ())],
        "count": [("splitsentence", "default", "fields", ("word",))],
        "log": [("count", "default", "shuffle", ())],
    }
    assert t.components["splitsentence"].streams == {"default": ("word",)}


def test_shell_components() -> None:
    """TCKTest.testShellComponents: FluxShellSpout/FluxShellBolt with addComponentConfig
    (a list value too) as component config."""
    t = load("shell_test.yaml")
    _shell_structure(t)
    for ident in ("sentence-spout", "splitsentence"):
        conf = t.components[ident].config
        assert conf["rabbitmq.configfile"] == "etc/rabbit.yml"
        assert conf["publisher.data_paths"] == ["actions"]


def test_bad_shell_components() -> None:
    """TCKTest.testBadShellComponents: addComponentConfig with three arguments is refused
    ("Unable to find configuration method" in Storm), naming its line and parameters."""
    with pytest.raises(TopologyFileError) as exc:
        load("bad_shell_test.yaml")
    assert str(exc.value) == (
        f"{HERE / 'bad_shell_test.yaml'}:23: spout 'sentence-spout': config method "
        "addComponentConfig(key, value) cannot take the 3 argument(s) given"
    )


def test_diamond_topology() -> None:
    """TCKTest.testDiamondTopology: A feeds B and C, both feed D."""
    t = load("diamond-topology.yaml")
    assert edges(t) == {
        "spout-1": [],
        "A": [("spout-1", "default", "fields", ("word",))],
        "B": [("A", "default", "shuffle", ())],
        "C": [("A", "default", "shuffle", ())],
        "D": [("C", "default", "shuffle", ()), ("B", "default", "shuffle", ())],
    }


def test_diamond_of_bolts_that_declare_no_stream_is_refused(tmp_path: Path) -> None:
    """TCKTest.testDiamondTopology as Storm wrote it: its LogInfoBolt declares no stream,
    so B's subscription to A is refused (Storm's nimbus: "subscribes from non-existent
    stream"), naming B's stream in the file."""
    text = (HERE / "diamond-topology.yaml").read_text().replace("EchoLogBolt", "LogInfoBolt")
    (tmp_path / "d.yaml").write_text(text)
    sys.path.insert(0, str(HERE))
    try:
        with pytest.raises(
            TopologyFileError,
            match=r"d\.yaml:\d+: component 'B' subscribes "
            r"to stream 'default' of 'A', which declares only no streams",
        ):
            load_topology_file(tmp_path / "d.yaml")[0].validate()
    finally:
        sys.path.remove(str(HERE))


def test_component_config() -> None:
    """TCKTest.testComponentConfig: each component's own config value."""
    t = load("component-config-test.yaml")
    assert t.components["spout-1"].config == {"topology.debug": True}
    assert t.components["bolt-1"].config == {"topology.debug": False}


def test_component_config_overrides_topology_config() -> None:
    """TCKTest.testComponentConfigOverridesTopologyConfig: the topology's value stays,
    the bolt's own wins for it (a worker's effective config: topology's, then its own)."""
    t = load("component-config-override-test.yaml")
    assert t.config["topology.debug"] is True
    assert {**t.config, **t.components["bolt-1"].config}["topology.debug"] is False
    assert {**t.config, **t.components["spout-1"].config}["topology.debug"] is True


def test_component_config_with_invalid_value() -> None:
    """TCKTest.testComponentConfigWithInvalidValue: a non-boolean for a boolean key is
    refused, naming the line and the type ("must be of type Boolean" in Storm)."""
    with pytest.raises(TopologyFileError, match=(
        r"component-config-invalid-test\.yaml:20: config key 'topology.debug' \(in component "
        r"config\) must be true or false, got 'not-a-boolean'")):  # fmt: skip
        load("component-config-invalid-test.yaml")


def test_component_config_with_not_registered_key() -> None:
    """TCKTest.testComponentConfigWithNotRegisteredKey: an application's own key is kept
    in the component's config."""
    t = load("component-config-invalid-key-test.yaml")
    assert t.components["bolt-1"].config == {"MY.INAVLID.KEY": "none"}


def test_component_config_missing() -> None:
    """TCKTest.testComponentConfigMissing: no component config, none made up."""
    t = load("component-config-missing-test.yaml")
    assert t.components["spout-1"].config == {} and t.components["bolt-1"].config == {}


def test_includes() -> None:
    """TCKTest.testIncludes: include_test.yaml includes the resource
    `/configs/shell_test.yaml` (from the classpath root, above the including file) and
    keeps its own name (override: false)."""
    t = load("include_test.yaml")
    assert t.name == "include-topology"
    _shell_structure(t)


@pytest.mark.parametrize(
    "name",
    [
        "existing-topology.yaml",  # testTopologySource
        "existing-topology-reflection.yaml",  # testTopologySourceWithReflection, ...GetMethodName
        "existing-topology-reflection-config.yaml",  # testTopologySourceWithConfigParam
        "existing-topology-method-override.yaml",  # testTopologySourceWithMethodName
    ],
)
def test_topology_source(name: str) -> None:
    """TCKTest.testTopologySource, testTopologySourceWithReflection,
    testTopologySourceWithConfigParam, testTopologySourceWithMethodName and
    testTopologySourceWithGetMethodName: the source, made with its constructorArgs,
    builds the topology (by `methodName` when given), submitted under the file's name."""
    t = load(name)
    assert t.name == "existing-topology"
    assert edges(t) == {"words": [], "count": [("words", "default", "fields", ("word",))]}


def test_invalid_topology_source() -> None:
    """TCKTest.testInvalidTopologySource: a topologySource with spouts is refused."""
    with pytest.raises(TopologyFileError, match=(
        r"invalid-existing-topology\.yaml:6: a topologySource excludes spouts, bolts and "
        "streams")):  # fmt: skip
        load("invalid-existing-topology.yaml")


def test_topology_source_with_config_methods() -> None:
    """TCKTest.testTopologySourceWithConfigMethods: config-methods-test.yaml's
    constructorArgs (with a reflist), factory with and without factoryArgs, config
    methods with none, one, two and ref/reflist arguments, and a property by ref."""
    from stormish.flux import load_flux

    t = load_flux(HERE / "config-methods-test.yaml")
    bolt = t.components["bolt-1"].obj
    assert (bolt.foo, bolt.bar, bolt.foo_bar, bolt.none) == ("foo", "bar", "foobar", "hit")
    assert [c.field for c in bolt.classes] == ["foo", "bar", "baz"]
    assert bolt.args[:3] == ("FOO", 1.0, True)
    assert [c.field for c in bolt.args[3]] == ["foo", "bar"]
    assert bolt.time_len.seconds == 36000
    assert [d.seconds for d in bolt.durations] == [36000] * 5
    assert t.components["bolt-2"].obj.args == ()
    assert t.components["bolt-3"].obj.args == ("FOO",)
    assert t.components["bolt-4"].obj.args == (10,)


def test_a_reflist_naming_no_component_is_refused(tmp_path: Path) -> None:
    """TCKTest.testTopologySourceWithConfigMethods as Storm wrote it: `reflist: ["time1",
    "time2"]` names a component defined nowhere (Storm passes null): refused, named."""
    text = (HERE / "config-methods-test.yaml").read_text()
    text = text.replace('reflist: ["time1", "time1"]', 'reflist: ["time1", "time2"]')
    (tmp_path / "c.yaml").write_text(text)
    sys.path.insert(0, str(HERE))
    try:
        with pytest.raises(TopologyFileError, match=(
            r"c\.yaml:\d+: reflist 'time2' names no component defined before it; "
            r"components: \['bar', 'baz', 'foo', 'time1'\]")):  # fmt: skip
            load_topology_file(tmp_path / "c.yaml")
    finally:
        sys.path.remove(str(HERE))


def test_variable_substitution(monkeypatch) -> None:
    """TCKTest.testVariableSubstitution: `${topology.name}` from test.properties,
    `${ENV-PATH}` from the environment, a list property and its element."""
    monkeypatch.setenv("PATH", os.environ["PATH"])
    t = load("substitution-test.yaml", props=str(HERE / "test.properties"), env_filter=True)
    assert t.name == "substitution-topology"
    assert t.config["test.env.value"] == os.environ["PATH"]
    assert t.config["list.property.target"] == ["A string list"]
    assert t.config["list.element.property.target"] == "A string list"
    _shell_structure(t)


def test_topology_with_invalid_static_factory_argument() -> None:
    """TCKTest.testTopologyWithInvalidStaticFactoryArgument (STORM-3087): factoryArgs the
    factory cannot take are refused ("Couldn't find a suitable static method" in Storm).
    Python has no argument types to mismatch, so the port gives it one argument too many."""
    with pytest.raises(TopologyFileError) as exc:
        load("bad_static_factory_test.yaml")
    assert str(exc.value) == (
        f"{HERE / 'bad_static_factory_test.yaml'}:19: bolt 'bolt-1': factory "
        "tck_classes.TestBolt.newLongInstance(value) cannot take the 2 argument(s) given"
    )


STORM_ONLY = [
    # (TCKTest method, Storm's config as Storm wrote it, what stormish says)
    (
        "testKafkaSpoutConfig",
        "kafka_test.yaml",
        r"OnlyValueRecordTranslator' cannot be imported "
        r"\(a Java class",
    ),
    ("testHdfs", "hdfs_test.yaml", r"CountSyncPolicy' cannot be imported \(a Java class"),
    ("testBadHbase", "bad_hbase.yaml", r"tuple.Fields' cannot be imported \(a Java class"),
    (
        "testTridentTopologySource",
        "existing-topology-trident.yaml",
        r"TridentTopologySource' cannot be imported \(a Java class",
    ),
    ("testTopologyWithWorkerHook", "worker_hook.yaml", r"workerHooks are Storm worker hooks"),
]


@pytest.mark.parametrize("method,name,expected", STORM_ONLY, ids=[m for m, _, _ in STORM_ONLY])
def test_java_only_configs_are_refused_plainly(tmp_path: Path, method, name, expected) -> None:
    """TCKTest.testKafkaSpoutConfig, testLoadFromResource, testHdfs, testBadHbase,
    testTridentTopologySource, testTopologyWithWorkerHook: configs of Java connectors,
    Trident and worker hooks (no Python twin) are refused naming the line and the Java
    class, no traceback. (Kafka's Flux shape, with Python classes, is test_flux.py's.)"""
    text = (HERE / "java" / name).read_text()
    (tmp_path / name).write_text(text)
    with pytest.raises(TopologyFileError, match=rf"{name}:\d+: .*{expected}"):
        load_topology_file(tmp_path / name)


def test_cli_plan_of_a_ported_tck_config() -> None:
    """TCKTest.testTCK through `stormish plan`: the plan names the components and counts."""
    out = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "plan", str(HERE / "tck.yaml")],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    for ident in ("spout-1", "bolt-1", "bolt-2"):
        assert ident in out.stdout
