"""Flux YAML (stormish.flux): Storm's flux-examples and flux-core test files with Python
classes in place of Java ones (tests/integration/flux/), substitution, includes, a
topologySource, and errors that name the file, the line and the key."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stormish.errors import TopologyFileError
from stormish.loader import load_topology_file
from stormish.testing import run_topology

HERE = Path(__file__).resolve().parent / "flux"
ROOT = Path(__file__).resolve().parents[2]
WORDS = ["nathan", "mike", "jackson", "golda", "bertels"]


def load(name: str, **options):
    return load_topology_file(HERE / name, **options)[0]


@pytest.mark.timeout(60)
def test_simple_wordcount_runs_and_counts_exactly() -> None:
    topology = load("simple_wordcount.yaml")
    assert topology.name == "yaml-topology"
    assert [s.grouping for s in topology.components["bolt-1"].subscriptions] == ["fields"]
    out = run_topology(topology, timeout=30)
    assert out.results["bolt-1"] == [dict.fromkeys(WORDS, 20)]
    assert out.results["bolt-2"] == [dict.fromkeys(WORDS, 20)]  # the last count it logged
    assert out.stats.components["spout-1"].acked == 100


def test_substitution_from_properties_and_environment(monkeypatch) -> None:
    monkeypatch.setenv("FLUX_TEST_VALUE", "from-env")
    topology = load("substitution.yaml", props=str(HERE / "test.properties"), env_filter=True)
    assert topology.name == "substitution-topology"
    conf = topology.config
    assert conf["test.env.value"] == "from-env"
    assert conf["list.property.target"] == ["A string list"]
    assert conf["list.element.property.target"] == "A string list"
    assert conf["untouched"] == "${no.such.property}"  # no value: left as it is, as Storm
    assert topology.components["count"].config["app.per.component"] == 7
    spout = topology.components["spout"].obj
    assert (spout.rounds, spout.prefix) == (3, "x-")  # ref + configMethods, a property
    out = run_topology(topology, timeout=30)
    assert sorted(out.results["count"][0] | out.results["count"][1]) == sorted(
        "x-" + w for w in WORDS
    )


def test_env_needs_env_filter(monkeypatch) -> None:
    monkeypatch.setenv("FLUX_TEST_VALUE", "from-env")
    topology = load("substitution.yaml", props=str(HERE / "test.properties"))
    assert topology.config["test.env.value"] == "${ENV-FLUX_TEST_VALUE}"


def test_include_a_resource_without_override() -> None:
    topology = load("include_test.yaml")
    assert topology.name == "include-topology"  # override: false keeps the includer's name
    assert sorted(topology.components) == ["bolt-1", "bolt-2", "spout-1"]


def test_include_with_override_replaces_by_id() -> None:
    topology = load("include_override.yaml")
    assert topology.name == "yaml-topology"
    assert type(topology.components["bolt-1"].obj).__name__ == "TestWordCounter"
    assert topology.config["app.mine"] == 1


def test_include_config_into_an_empty_config(tmp_path: Path) -> None:
    """`config:` written with nothing under it, and an included file with a config: its
    config is taken (it was a TypeError traceback: None is not iterable)."""
    (tmp_path / "top.yaml").write_text(
        f"name: top\nconfig:\nincludes:\n  - file: {HERE / 'simple_wordcount.yaml'}\n"
    )
    topology = load_topology_file(
        tmp_path / "top.yaml",
    )[0]
    assert topology.name == "top" and topology.config["topology.workers"] == 1
    assert sorted(topology.components) == ["bolt-1", "bolt-2", "spout-1"]


def test_an_included_files_classes_are_imported_from_its_own_directory(tmp_path: Path) -> None:
    """An included file in another directory names classes of a module beside it: they
    were looked up from the including file's directory only (`No module named
    'flux_words'`), where Storm finds every class on one classpath."""
    top = tmp_path / "app"
    top.mkdir()
    (top / "top.yaml").write_text(
        f"name: top\nincludes:\n  - file: {HERE / 'simple_wordcount.yaml'}\n"
    )
    topology = load_topology_file(top / "top.yaml")[0]
    assert type(topology.components["spout-1"].obj).__module__ == "flux_words"
    assert sorted(topology.components) == ["bolt-1", "bolt-2", "spout-1"]


def test_worker_hooks_in_an_included_file_are_refused(tmp_path: Path) -> None:
    """An included file's workerHooks (Storm merges them) are refused as the including
    file's are, at their line in the included file, not dropped without a word."""
    shutil.copy(HERE / "flux_words.py", tmp_path)
    inc = tmp_path / "inc.yaml"
    inc.write_text((HERE / "simple_wordcount.yaml").read_text() + "workerHooks:\n  - id: h\n")
    (tmp_path / "top.yaml").write_text("name: top\nincludes:\n  - file: inc.yaml\n")
    with pytest.raises(TopologyFileError, match=r"inc\.yaml:\d+: workerHooks are Storm worker"):
        load_topology_file(tmp_path / "top.yaml")


@pytest.mark.timeout(60)
def test_topology_source_gets_the_config() -> None:
    topology = load("source.yaml")
    assert topology.config["rounds"] == 4
    out = run_topology(topology, timeout=30)
    merged = out.results["count"][0] | out.results["count"][1]
    assert merged == dict.fromkeys(WORDS, 4)


@pytest.mark.timeout(60)
def test_streamparse_classes_named_in_flux_run_in_process() -> None:
    from stormish.streamparse.adapter import PystormBolt, PystormSpout

    topology = load("streamparse_classes.yaml")
    assert isinstance(topology.components["words"].obj, PystormSpout)
    assert isinstance(topology.components["count"].obj, PystormBolt)
    out = run_topology(topology, timeout=30)
    last = {}
    for word, count in out.captured["sink"]:
        last[word] = max(count, last.get(word, 0))
    assert last == {"a": 3, "b": 2, "c": 1}


@pytest.mark.timeout(60)
def test_a_custom_groupings_class_may_ref_a_component() -> None:
    """Storm builds customClass as any object (buildObject), refs to components
    included; it was built with no components ('ref names no component')."""
    topology = load("custom_ref.yaml")
    out = run_topology(topology, timeout=30)
    counts = out.results["count"]
    assert counts[0] == {} and counts[1] == dict.fromkeys(WORDS, 2)  # all to the picked task


@pytest.mark.timeout(60)
def test_properties_and_config_methods_of_a_streamparse_class_are_applied() -> None:
    """Each instance the runtime makes gets the file's properties and configMethods
    before its initialize (they were ignored without a word)."""
    out = run_topology(load("streamparse_setup.yaml"), timeout=30)
    assert sorted(w for (w,) in out.captured["sink"]) == sorted(
        ["configured-x", "configured-y"] * 2
    )


def test_a_topology_source_is_named_by_the_flux_file() -> None:
    """Storm's Flux submits a topologySource's topology under the file's name."""
    assert load("source.yaml").name == "from-source"


def test_constructor_args_of_a_streamparse_class_are_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "name: t\nspouts:\n  - id: w\n    className: sp_words.Words\n"
        "    constructorArgs: [1]\nbolts:\n  - id: s\n    className: "
        "stormish.testing.CaptureBolt\nstreams:\n  - {from: w, to: s, grouping: {type: SHUFFLE}}\n",
    )
    sys.path.insert(0, str(HERE))
    try:
        with pytest.raises(TopologyFileError, match=r"t\.yaml:5: spout 'w': a streamparse"):
            load_topology_file(path)
    finally:
        sys.path.remove(str(HERE))


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "t.yaml"
    p.write_text(text)
    return p


BASE = """name: t
spouts:
  - id: s
    className: flux_words.TestWordSpout
bolts:
  - id: b
    className: flux_words.TestWordCounter
streams:
  - from: s
    to: b
    grouping:
      type: SHUFFLE
"""


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("    className: flux_words.TestWordCounter", "    className: flux_words.TestWordCounter\n"
          "    parallelizm: 2"), r"t.yaml:8: unknown key 'parallelizm' in bolt 'b'"),
        (("flux_words.TestWordCounter", "flux_words.NoSuchBolt"),
         r"t.yaml:7: className 'flux_words.NoSuchBolt' cannot be imported"),
        (("flux_words.TestWordCounter", "org.apache.storm.testing.TestWordCounter"),
         r"t.yaml:7: .*cannot be imported \(a Java class"),
        (("type: SHUFFLE", "type: SHUFFLED"), r"t.yaml:12: unknown grouping type 'SHUFFLED'"),
        (("to: b", "to: c"), r"t.yaml:10: stream to 'c': no spout or bolt has that id"),
        (("type: SHUFFLE", "type: FIELDS\n      args: [wrd]"),
         r"t.yaml:12: .*unknown field\(s\) \['wrd'\]"),
        (("      type: SHUFFLE", "      type: SHUFFLE\n      stream: x"),
         r"t.yaml:13: unknown key 'stream' in grouping"),
        (("name: t", "name: t\nworkers: 2"), r"t.yaml:2: unknown key 'workers' in topology"),
        (("name: t", "name: t\nconfig:\n  app.x: 1\n  topology.workers: two"),
         r"t.yaml:4: .*topology.workers.* must be an integer"),
        (("    className: flux_words.TestWordCounter", "    className: flux_words.TestWordCounter"
          "\n    config:\n      topolgy.debug: true"), r"t.yaml:9: .*'topolgy.debug'"),
        (("name: t", "name: t\nworkerHooks:\n  - className: a.B"),
         r"t.yaml:2: workerHooks are Storm worker hooks"),
        (("className: flux_words.TestWordSpout", "className: flux_words.TestWordCounter"),
         r"t.yaml:4: spout 's': .*makes a TestWordCounter, not a stormish Spout"),
        # an empty name is an error, as a topologySource's is (it fell back to the file's)
        (("name: t", 'name: ""'), r"t.yaml:1: topology name '' is empty"),
        (("name: t", "name: a b"), r"t.yaml:1: topology name 'a b'"),
    ],
)  # fmt: skip
def test_errors_name_file_line_and_key(tmp_path: Path, change, expected) -> None:
    old, new = change
    assert old in BASE
    path = _write(tmp_path, BASE.replace(old, new, 1))
    sys.path.insert(0, str(HERE))
    try:
        with pytest.raises(TopologyFileError, match=expected):
            load_topology_file(path)
    finally:
        sys.path.remove(str(HERE))


def test_not_yaml_and_unsafe_tags_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TopologyFileError, match="not valid YAML"):
        load_topology_file(_write(tmp_path, "name: [unclosed"))
    with pytest.raises(TopologyFileError, match="not valid YAML"):
        load_topology_file(_write(tmp_path, "name: !!python/object/apply:os.system [ls]"))


@pytest.mark.timeout(60)
def test_cli_plan_and_run_a_flux_file() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    plan = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "plan", "simple_wordcount.yaml"],
        cwd=HERE, env=env, capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert "spout-1" in plan.stdout and "bolt-2" in plan.stdout
    run = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(HERE / "substitution.yaml"),
         "--filter", str(HERE / "test.properties")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "substitution-topology" in run.stdout and "complete" in run.stdout


@pytest.mark.timeout(90)
def test_multilang_yaml_shell_components() -> None:
    """flux-examples' multilang.yaml: FluxShellSpout and FluxShellBolt are stormish's
    multilang components, run in the Flux file's directory."""
    from stormish.multilang import ShellBolt, ShellSpout

    topology = load("multilang.yaml")
    comps = topology.components
    assert isinstance(comps["sentence-spout"].obj, ShellSpout)
    assert isinstance(comps["splitsentence"].obj, ShellBolt)
    assert comps["splitsentence"].config["app.split.mode"] == "spaces"  # addComponentConfig
    _counts_50_sentences(topology)


def _counts_50_sentences(topology) -> None:
    """multilang.yaml's topology counts the words of its 50 sentences exactly."""
    from stormish.testing import LocalCluster, poll_for

    with LocalCluster() as cluster:
        cluster.submit(topology)
        stats = lambda: cluster.statistics(topology.name).components  # noqa: E731
        poll_for(lambda: stats()["sentence-spout"].acked == 50, 60, 0.05, "50 sentences acked")
        cluster.kill(topology.name)
        results = cluster._get(topology.name).results()
    words = ["the", "cow", "jumped", "over", "the", "moon"]
    assert results["count"] == [{w: 50 * words.count(w) for w in words}]


@pytest.mark.timeout(90)
def test_shell_scripts_in_a_resources_directory_run_there_as_in_a_topology_jar(tmp_path) -> None:
    """Storm runs a shell component in the topology jar's resources, where flux-examples
    keep their scripts (the YAML at the jar's root): found by a hunt running them as
    they are, the child ran beside the YAML and could not open its script."""

    shutil.copy(HERE / "multilang.yaml", tmp_path)
    shutil.copy(HERE / "flux_words.py", tmp_path)  # a className: beside the YAML, as in a jar
    (tmp_path / "resources").mkdir()
    for script in ("randomsentence.py", "splitsentence.py"):
        shutil.copy(HERE / script, tmp_path / "resources")
    _counts_50_sentences(load_topology_file(tmp_path / "multilang.yaml")[0])


@pytest.mark.timeout(90)
def test_kafka_spout_yaml_reads_a_real_broker_and_counts_exactly(kafka, tmp_path) -> None:
    """flux-examples' kafka_spout.yaml (KafkaSpoutConfig$Builder with properties and
    setProp, a record translator, FluxShellBolt, a word counter) against the test
    session's broker: every sentence read once, every word counted exactly."""
    from confluent_kafka import Producer

    from .kafka_util import new_topic

    topic = new_topic(kafka.address, partitions=2, prefix="flux")
    sentences = ["the cow jumped over the moon", "an apple a day", "four score and seven"]
    p = Producer({"bootstrap.servers": kafka.address})
    for i in range(60):
        p.produce(topic, sentences[i % 3].encode())
    assert p.flush(15) == 0
    props = tmp_path / "kafka.properties"
    props.write_text(
        f"kafka.bootstrap={kafka.address}\nkafka.topic={topic}\nkafka.group=g-{topic}\n"
    )
    topology = load("kafka_spout.yaml", props=str(props))
    out = run_topology(topology, timeout=60)
    expected: dict[str, int] = {}
    for i in range(60):
        for w in sentences[i % 3].split(" "):
            expected[w] = expected.get(w, 0) + 1
    assert out.results["count"] == [expected]
    assert out.stats.components["kafka-spout"].acked == 60
