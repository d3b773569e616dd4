"""streamparse topologies run unchanged (stormish.streamparse): the project `sparse
quickstart wordcount` generates, shipped as examples/streamparse_wordcount, in-process.

The quickstart's spout never ends, so the exact check stops it the way Storm would
(deactivate), waits until everything it emitted was counted, and reads what the count
bolt emitted through a capture bolt the test adds beside it: nothing in the user's code
is swapped. The counts must be exactly what the spout's cycle of words makes."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stormish.loader import load_topology_file
from stormish.testing import CaptureBolt, LocalCluster, poll_for

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "examples" / "streamparse_wordcount"
TOPOLOGY = PROJECT / "topologies" / "wordcount.py"
WORDS = ["dog", "cat", "zebra", "elephant"]  # the quickstart spout's cycle
STEP = {"dog": 10}  # the quickstart bolt counts a dog as 10


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), LEIN_ROOT="1")


@pytest.mark.timeout(60)
def test_the_example_is_the_quickstart_unchanged(tmp_path: Path) -> None:
    subprocess.run(
        ["sparse", "quickstart", "wordcount"], cwd=tmp_path, env=_env(), check=True,
        capture_output=True,
    )  # fmt: skip
    made = tmp_path / "wordcount"
    for f in sorted(p.relative_to(made) for p in made.rglob("*") if p.is_file()):
        assert filecmp.cmp(made / f, PROJECT / f, shallow=False), f"{f} differs"


def run_exact(
    multilang: bool = False, min_words: int = 2000, path: Path = TOPOLOGY
) -> tuple[int, list, object]:
    """The quickstart with a capture bolt on count_bolt's output: run until it counted
    `min_words`, deactivate, drain, stop; (words emitted, captured rows, statistics)."""
    topology, _ = load_topology_file(path, multilang=multilang)
    topology.set_bolt("sink", CaptureBolt(), 1).fields_grouping("count_bolt", ["word"])
    name = topology.name
    with LocalCluster() as cluster:
        cluster.submit(topology)
        comps = lambda: cluster.statistics(name).components  # noqa: E731
        poll_for(lambda: comps()["sink"].executed >= min_words, 60, 0.05, "words counted")
        cluster.deactivate(name)

        def drained() -> bool:
            c = comps()
            return c["word_spout"].emitted == c["count_bolt"].executed == c["sink"].executed

        poll_for(drained, 30, 0.05, "every emitted word counted and captured")
        stats = cluster.kill(name)
        rows = cluster._get(name).results()["sink"][0]
    return stats.components["word_spout"].emitted, rows, stats


def children_running(word: str) -> list[int]:
    """This process's children whose command line has `word` (from /proc)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat, cmd = (d / "stat").read_text(), (d / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and word.encode() in cmd:
            found.append(int(d.name))
    return found


def check_exact(emitted: int, rows: list) -> None:
    seen: dict[str, list[int]] = {w: [] for w in WORDS}
    for word, count in rows:
        seen[word].append(count)
    for i, word in enumerate(WORDS):
        n = (emitted - i + 3) // 4  # how often the cycle gave `word` in `emitted` words
        step = STEP.get(word, 1)
        assert seen[word] == [step * k for k in range(1, n + 1)], word
    assert len(rows) == emitted


@pytest.mark.timeout(90)
def test_quickstart_in_process_counts_exactly() -> None:
    emitted, rows, stats = run_exact()
    assert emitted >= 2000
    check_exact(emitted, rows)
    count = stats.components["count_bolt"]
    assert count.tasks == 2 and count.failed == 0  # par=2 as the spec says; auto_ack


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["in-process", "--multilang"])
def test_stormish_run_on_the_project(tmp_path: Path, how: str) -> None:
    """From the project's directory, as a streamparse user types it; bounded by --time."""
    import json

    # a subprocess child starts in a second or more on a loaded machine
    seconds = "1.5" if how == "in-process" else "4"
    args = ["topologies/wordcount.py", "--time", seconds, "--log-level", "INFO"]
    args += ["--stats-json", str(tmp_path / "s.json")] + ([how] if how != "in-process" else [])
    out = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", *args],
        cwd=PROJECT, env=_env(), capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "stopped by --time" in out.stdout
    if how == "in-process":
        assert "pystorm.component.count_bolt: counted [" in out.stderr  # the bolt's log
    else:  # the child's pystorm says so as it starts, through the multilang log command
        assert "stormish.multilang.count_bolt: pystorm StormHandler logging" in out.stderr
    stats = json.loads((tmp_path / "s.json").read_text())
    assert stats["components"]["count_bolt"]["executed"] > 0


@pytest.mark.timeout(120)
def test_quickstart_as_multilang_subprocesses_counts_exactly() -> None:
    """--multilang: each component is `streamparse_run module.Class` in a subprocess."""
    emitted, rows, stats = run_exact(multilang=True, min_words=300)
    check_exact(emitted, rows)
    assert children_running("streamparse_run") == []  # every child ended with the run


@pytest.mark.timeout(120)
def test_quickstart_flux_form_runs(tmp_path: Path) -> None:
    """The Flux file streamparse makes of the quickstart (`Topology.to_flux_dict`), laid
    out as Storm's topology jar is (the project's src/ as resources/): FluxShellSpout and
    FluxShellBolt running `streamparse_run module.Class`."""
    import shutil

    flux = subprocess.run(
        [sys.executable, "-c", "import sys, yaml; from streamparse.util import "
         "get_topology_from_file as g; print(yaml.safe_dump(g(sys.argv[1])"
         ".to_flux_dict('wordcount')))", str(TOPOLOGY)],
        env=_env(), capture_output=True, text=True, check=True, timeout=50,
    ).stdout  # fmt: skip
    assert "org.apache.storm.flux.wrappers.bolts.FluxShellBolt" in flux
    (tmp_path / "wordcount.yaml").write_text(flux)
    shutil.copytree(PROJECT / "src", tmp_path / "resources")
    emitted, rows, stats = run_exact(min_words=300, path=tmp_path / "wordcount.yaml")
    check_exact(emitted, rows)
    assert children_running("streamparse_run") == []
    assert stats.components["count_bolt"].tasks == 2


FEATURES = Path(__file__).resolve().parent / "sp_project" / "topologies" / "features.py"


@pytest.mark.timeout(60)
def test_reliable_spout_batching_bolts_task_ids_and_errors(caplog) -> None:
    from collections import Counter

    topology, _ = load_topology_file(FEATURES)
    assert topology.storm_only_config == ["topology.worker.childopts"]
    for bolt in ("batch_count", "tickless_count"):
        topology.set_bolt(f"{bolt}_sink", CaptureBolt(), 1).shuffle_grouping(bolt)
    with LocalCluster() as cluster, caplog.at_level("WARNING", "pystorm.component.split"):
        cluster.submit(topology)
        stats = cluster.wait_complete(topology.name, timeout=40)
        results = cluster._get(topology.name).results()
    from parts.components import SENTENCES  # on the path: the project's src/

    words = Counter(w for s in SENTENCES for w in s.split())
    for bolt in ("batch_count", "tickless_count"):
        got: Counter[str] = Counter()
        for word, n in results[f"{bolt}_sink"][0]:
            got[word] += n
        assert got == words, bolt  # every word once: the failed sentence replayed, once
    c = stats.components
    assert c["sentences"].acked == len(SENTENCES) and c["sentences"].failed == 1
    assert c["split"].errors >= 1  # raise_exception: reported, the task went on
    assert "failing it once" in caplog.text
    assert c["direct_sink"].executed == c["router"].executed > 0  # each to the task picked
    assert c["direct_sink"].errors == c["router"].errors == c["batch_count"].errors == 0


def _project(tmp_path: Path, topology: str) -> Path:
    """A streamparse project with the quickstart's src/ and `topology` as its file."""
    import shutil

    shutil.copytree(PROJECT / "src", tmp_path / "src")
    (tmp_path / "topologies").mkdir()
    path = tmp_path / "topologies" / "bad.py"
    path.write_text(topology)
    return path


HEAD = """from streamparse import Grouping, JavaBolt, Topology
from bolts.wordcount import WordCountBolt
from spouts.words import WordSpout


class Bad(Topology):
    word_spout = WordSpout.spec()
"""


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('    count = WordCountBolt.spec(inputs={word_spout: Grouping.fields("wrod")})\n',
         r"bad.py' failed to import at line 6, component 'count': ValueError: Field 'wrod' "
         r".*'word_spout'"),
        ("    from streamparse.thrift import GlobalStreamId\n"
         "    count = WordCountBolt.spec(inputs=[GlobalStreamId('nope', 'default')])\n",
         r"bad.py' failed to import at line 6, component 'count': KeyError: 'nope'"),
        ('    count = WordCountBolt.spec(inputs={word_spout: Grouping.fields("word")}, '
         'par={"prod": 2})\n', r"bad.py': component 'count': par per environment"),
        ('    java = JavaBolt.spec(full_class_name="org.X", args_list=[], '
         'inputs=[word_spout])\n', r"bad.py': component 'java': a Java component"),
        ('    count = WordCountBolt.spec(inputs={word_spout: '
         'Grouping.custom_object("org.X", [])})\n',
         r"bad.py': component 'count': the custom_object grouping .* names a Java class"),
    ],
)  # fmt: skip
def test_errors_name_the_file_and_the_component(tmp_path: Path, body: str, expected) -> None:
    from stormish.errors import TopologyFileError

    with pytest.raises(TopologyFileError, match=expected):
        load_topology_file(_project(tmp_path, HEAD + body))


def test_a_shell_components_script_is_one_argument_as_storm_passes_it(tmp_path: Path) -> None:
    """Storm runs ShellComponent(command, script) as [command, script]; the script was
    split on spaces, so a script whose path has a space ran as two arguments."""
    body = (
        "    from streamparse import ShellBolt\n"
        "    shell = ShellBolt.spec(command='node', script='my scripts/split.js', "
        "inputs=[word_spout], outputs=['word'])\n"
    )
    topology, _ = load_topology_file(_project(tmp_path, HEAD + body))
    assert topology.components["shell"].obj.command == ["node", "my scripts/split.js"]


HAND_FAIL = """from streamparse import Bolt


class HandFail(Bolt):
    def process(self, tup):
        self.fail(tup)
"""


def test_a_pystorm_bolt_that_fails_by_hand_with_auto_ack_on_is_told_in_pystorms_words(
    tmp_path: Path,
) -> None:
    """pystorm's auto_ack acks after process(); a fail by hand then is a second settle
    (Storm's ShellBolt: "Acked a non-existent or already acked/failed id"). In process,
    the refusal spoke of stormish's BasicBolt and FailedException (found by a hunt)."""
    from stormish import WorkerError

    body = "    from handfail_bolt import HandFail\n    hand = HandFail.spec(inputs=[word_spout])\n"
    path = _project(tmp_path, HEAD + body)
    # a module of its own name: `bolts` may be another project's, imported by a test before
    (tmp_path / "src" / "handfail_bolt.py").write_text(HAND_FAIL)
    topology, _ = load_topology_file(path)
    with LocalCluster() as cluster:
        cluster.submit(topology)
        with pytest.raises(WorkerError) as caught:
            cluster.wait_complete(topology.name, timeout=30)
    text = str(caught.value)
    assert "BasicBolt 'hand' called fail(): pystorm's auto_ack acks the tuple" in text
    assert "set auto_ack = False" in text and "handfail_bolt.py" in text
