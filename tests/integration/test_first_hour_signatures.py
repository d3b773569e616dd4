"""A newcomer's methods, refused or warned about before a worker starts, at the user's
line: a signature stormish cannot call (Storm's `open(conf, context, collector)`), a
spout without `next_tuple` (`nextTuple`), a module-level global that cannot go to a
worker, a `return [word]` meant as an emit; and Storm's `emit(anchor, values)` said
as such when it runs. Each ran into errors at stormish's own lines (per_tuple.py,
spout_executor.py, component.py) or into nothing at all."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

from stormish import BasicBolt, Bolt, Spout, Topology, TopologyError
from stormish.windowing import Count, WindowedBolt

from .test_cli import ROOT, stormish
from .test_first_hour_mistakes import line_of, write

pytestmark = pytest.mark.timeout(120)

SPLIT = """
from stormish import Bolt

class Split({base}):
    outputs = ["word"]
{methods}
topology = Topology("sig")
topology.set_spout("sentences", Sentences())
topology.set_bolt("split", Split()).shuffle_grouping("sentences")
"""

SPOUT = """
class Words(Spout):
    outputs = ["word"]
{methods}
class Sink(BasicBolt):
    def execute(self, tup):
        pass

topology = Topology("sig")
topology.set_spout("words", Words())
topology.set_bolt("sink", Sink()).shuffle_grouping("words")
"""

REFUSED = {
    "execute without tup": (
        SPLIT.format(base="BasicBolt", methods="    def execute(self):\n        pass\n"),
        "def execute",
        "component 'split': Split.execute is defined as execute(self), but stormish calls "
        "it as execute(self, tup)",
    ),
    "Storm's prepare": (
        SPLIT.format(
            base="Bolt",
            methods="    def prepare(self, conf, context, collector):\n        pass\n"
            "    def execute(self, tup):\n        self.ack(tup)\n",
        ),
        "def prepare",
        "component 'split': Split.prepare is defined as prepare(self, conf, context, "
        "collector), but stormish calls it as prepare(self, conf, context) (missing a "
        "required argument: 'collector'): Storm's prepare(conf, context, collector) has no "
        "collector here",
    ),
    "Storm's open": (
        SPOUT.format(
            methods="    def open(self, conf, context, collector):\n        pass\n"
            "    def next_tuple(self):\n        self.finish()\n"
        ),
        "def open(self, conf, context, collector)",
        "component 'words': Words.open is defined as open(self, conf, context, collector), "
        "but stormish calls it as open(self, conf, context)",
    ),
    "next_tuple with an argument": (
        SPOUT.format(methods="    def next_tuple(self, x):\n        self.finish()\n"),
        "def next_tuple(self, x)",
        "component 'words': Words.next_tuple is defined as next_tuple(self, x), but "
        "stormish calls it as next_tuple(self)",
    ),
    "Storm's nextTuple": (
        SPOUT.format(methods="    def nextTuple(self):\n        self.finish()\n"),
        "def nextTuple",
        "component 'words': Words does not define next_tuple, which stormish calls as "
        "next_tuple(self); it defines nextTuple(), a misspelling? rename it",
    ),
    "next_tupel": (
        SPOUT.format(methods="    def next_tupel(self):\n        self.finish()\n"),
        "def next_tupel",
        "Words does not define next_tuple, which stormish calls as next_tuple(self); it "
        "defines next_tupel()",
    ),
    "no next_tuple": (
        SPOUT.format(methods="    def open(self, conf, context):\n        pass\n"),
        "class Words",
        "component 'words': Words does not define next_tuple, which stormish calls as "
        "next_tuple(self)",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_method_stormish_cannot_call_is_refused_at_the_users_def(tmp_path, case):
    body, def_line, said = REFUSED[case]
    topo = write(tmp_path, body)
    out = stormish("run", str(topo))
    assert out.returncode == 2, out.stderr
    assert said in out.stderr, out.stderr
    assert f"(at {topo}:{line_of(topo, def_line)})" in out.stderr, out.stderr
    assert "stormish/" not in out.stderr.replace(str(topo), "")  # no line of stormish's own


def timed(f):  # a functools.wraps'd decorator: the engine calls the wrapper
    @functools.wraps(f)
    def wrapper(self, *args, **kwargs):
        return f(self, *args, **kwargs)

    return wrapper


def with_extra(f):  # a wrapper whose own signature is not the wrapped one's
    @functools.wraps(f)
    def wrapper(self, tup):
        return f(self, tup, "extra")

    return wrapper


class Varargs(Spout):
    outputs = ["n"]

    def open(self, conf, context, *rest):
        pass

    @timed
    def next_tuple(self):
        self.finish()

    def fail(self, msg_id, failure):  # the Failure-taking form
        pass

    def ack(self, *ids):
        pass


class Defaults(BasicBolt):
    def prepare(self, conf=None, context=None, collector=None):
        pass

    @with_extra
    def execute(self, tup, extra):
        pass


class Static(Bolt):
    execute = staticmethod(lambda tup: None)


class Batches(Bolt):
    def execute_batch(self, batch):
        self.ack_batch(batch)


class Windows(WindowedBolt):
    def execute_window(self, window):
        pass


def test_legitimate_signatures_are_not_refused():
    t = Topology("fine")
    t.set_spout("src", Varargs())
    for name, bolt in {
        "defaults": Defaults(),
        "static": Static(),
        "batches": Batches(),
        "windows": Windows().with_tumbling_window(Count(2)),
    }.items():
        t.set_bolt(name, bolt).shuffle_grouping("src")
    t.validate()


def test_a_bolt_without_execute_is_refused_at_submit_with_its_misspelling():
    """At submit, not at set_bolt: a sketch of a graph may be built without methods."""

    class Split(BasicBolt):
        def excute(self, tup):
            pass

    t = Topology("t")
    t.set_spout("src", Varargs())
    t.set_bolt("split", Split()).shuffle_grouping("src")
    with pytest.raises(TopologyError, match=r"'split': Split does not define execute.*excute"):
        t.validate()


LOCKED = """
import threading
LOCK = threading.Lock()

class Split(BasicBolt):
    outputs = ["word"]
    def execute(self, tup):
        with LOCK:
            self.emit([tup["sentence"]])

topology = Topology("locked")
topology.set_spout("sentences", Sentences())
topology.set_bolt("split", Split()).shuffle_grouping("sentences")
"""


def test_an_unpicklable_module_global_is_named_with_its_type_and_advice(tmp_path):
    topo = write(tmp_path, LOCKED)
    out = stormish("run", str(topo))
    assert out.returncode == 2, out.stderr
    assert (
        f"component 'split' cannot be pickled: Split.execute (at {topo}:"
        f"{line_of(topo, 'def execute')}) uses the module-level global 'LOCK' (_thread.lock)"
    ) in out.stderr, out.stderr
    assert "create it in prepare() (self.lock = ...)" in out.stderr


def test_module_globals_that_pickle_or_are_imported_keep_working(tmp_path):
    """A global that pickles goes by value; a module-level lock of an importable module
    goes by reference (each worker imports its own)."""
    (tmp_path / "locks_of_mine.py").write_text("import threading\nLOCK = threading.Lock()\n")
    topo = write(
        tmp_path,
        """
import locks_of_mine
PREFIX = {"w": "word:"}

class Split(BasicBolt):
    outputs = ["word"]
    def execute(self, tup):
        with locks_of_mine.LOCK:
            self.emit([PREFIX["w"] + tup["sentence"]])

topology = Topology("globals")
topology.set_spout("sentences", Sentences())
topology.set_bolt("split", Split(), parallelism=2).shuffle_grouping("sentences")
""",
    )
    out = stormish("run", str(topo), "-w", "2", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["components"]["split"]["emitted"] == 6


def test_a_returned_value_is_warned_about_once_and_the_topology_runs(tmp_path):
    topo = write(
        tmp_path,
        """
class Split(BasicBolt):
    outputs = ["word"]
    def execute(self, tup):
        def nested():
            return 1  # not execute's
        if not tup["sentence"]:
            return None
        return [w for w in tup["sentence"].split()]

topology = Topology("returns")
topology.set_spout("sentences", Sentences())
topology.set_bolt("split", Split()).shuffle_grouping("sentences")
""",
    )
    out = stormish("run", str(topo), "--json")
    assert out.returncode == 0, out.stderr
    said = (
        f"component 'split': Split.execute returns a value at {topo}:"
        f"{line_of(topo, 'return [w for w')}, which stormish ignores"
    )
    assert out.stderr.count(said) == 1, out.stderr
    assert "emit with self.emit([...])" in out.stderr
    assert out.stderr.count("returns a value") == 1  # not the nested function's
    assert json.loads(out.stdout)["components"]["split"]["executed"] == 6


@pytest.mark.parametrize("base", ["Bolt", "BasicBolt"])
def test_storms_emit_argument_order_is_said_at_the_users_line(tmp_path, base):
    topo = write(
        tmp_path,
        f"""
from stormish import Bolt

class Split({base}):
    outputs = ["word"]
    def execute(self, tup):
        for w in tup["sentence"].split():
            self.emit(tup, [w])

topology = Topology("order")
topology.set_spout("sentences", Sentences())
topology.set_bolt("split", Split()).shuffle_grouping("sentences")
""",
    )
    out = stormish("run", str(topo))
    assert out.returncode == 1, out.stderr
    assert (
        "TypeError: component 'split': emit's first argument is the values (a list, one per "
        "field) and its second the stream name; it was given a Tuple, then a list (['the'])"
    ) in out.stderr, out.stderr
    assert "Storm's emit(anchor, values) is self.emit(values, anchors=[tup]) here" in out.stderr
    line = line_of(topo, "self.emit(tup, [w])")
    assert f"in Split.execute at {topo}:{line}" in out.stderr
    assert f'File "{topo}", line {line}, in execute' in out.stderr


def test_storms_spout_emit_with_a_message_id_is_said(tmp_path):
    topo = tmp_path / "topo.py"
    topo.write_text(
        SPOUT.format(methods="    def next_tuple(self):\n        self.emit(['w'], 7)\n").replace(
            "class Words", "from stormish import BasicBolt, Spout, Topology\n\nclass Words", 1
        )
    )
    out = stormish("run", str(topo))
    assert out.returncode == 1, out.stderr
    assert "it was given a list, then an int (7)" in out.stderr, out.stderr
    assert "Storm's emit(values, msgId) is self.emit(values, msg_id=...) here" in out.stderr
    assert f"in Words.next_tuple at {topo}:{line_of(topo, 'emit([')}" in out.stderr


def test_python_dash_m_stormish_is_the_command(tmp_path):
    """`python -m stormish run FILE`, where the script is not on PATH: it said "No module
    named stormish.__main__"."""
    topo = write(
        tmp_path,
        SPLIT.format(base="BasicBolt", methods="    def execute(self, tup):\n        pass\n"),
    )
    out = subprocess.run(
        [sys.executable, "-m", "stormish", "run", str(topo), "-w", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "topology 'sig': complete" in out.stdout
