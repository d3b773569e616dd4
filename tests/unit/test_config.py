"""The config registry: defaults, checks that name the key, resolve and parse_override."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from stormish import config
from stormish.config import KEYS, check_value, parse_override, resolve
from stormish.errors import ConfigError, StormishError

# Storm's names and defaults (docs/config.md); a change here is a change of contract.
STORM_DEFAULTS = {
    "topology.transfer.buffer.size": 1000,
    "topology.disable.loadaware.messaging": False,
    "topology.localityaware.higher.bound": 0.8,
    "topology.localityaware.lower.bound": 0.2,
    "topology.backpressure.wait.strategy": "progressive",
    "topology.backpressure.wait.progressive.level1.count": 1,
    "topology.backpressure.wait.progressive.level3.sleep.millis": 1,
    "topology.spout.wait.progressive.level1.count": 0,
    "topology.spout.wait.progressive.level2.count": 0,
    "topology.spout.wait.progressive.level3.sleep.millis": 1,
    "topology.bolt.wait.progressive.level1.count": 1,
    "topology.bolt.wait.progressive.level3.sleep.millis": 1,
    "topology.backpressure.check.millis": 50,
    "topology.executor.overflow.limit": 0,
    "topology.message.timeout.secs": 30,
    "topology.workers": 1,
    "supervisor.worker.timeout.secs": 30,
    "nimbus.task.timeout.secs": 30,
}


@pytest.mark.parametrize("name", sorted(KEYS))
def test_every_default_passes_its_own_check(name):
    key = KEYS[name]
    assert key.name == name
    assert key.check(key.default) is None
    check_value(name, key.default)


@pytest.mark.parametrize("name", sorted(KEYS))
def test_every_key_is_documented(name):
    assert KEYS[name].doc.strip()
    assert f"{name} = {KEYS[name].default!r} [{KEYS[name].scope}]: " in config.describe()


@pytest.mark.parametrize(("name", "value"), sorted(STORM_DEFAULTS.items()))
def test_storm_defaults(name, value):
    assert config.defaults()[name] == value


@pytest.mark.parametrize("use", ["backpressure", "bolt"])
def test_level_2_yields_are_off_by_default_unlike_storm(use):
    """Storm yields 1,000 times; measured in Python that costs a third of a core per worker
    and doubles p99 latency (docs/design.md, Defaults: the default is the measured best)."""
    assert config.defaults()[f"topology.{use}.wait.progressive.level2.count"] == 0


def test_the_receive_queue_is_smaller_than_storm_s_by_measurement():
    """Storm's 32,768: measured here, a worker's in-flight rows cost per-tuple time in
    every step (bench/README.md, bench/peers.py -c topology.executor.receive.buffer.size=N)."""
    assert config.defaults()["topology.executor.receive.buffer.size"] == 4096


def test_max_spout_pending_has_a_default_bound_unlike_storm():
    """Storm leaves it unset; unset here, a slow bolt behind a fast reliable spout held a
    whole queue (and a second one taken) of trees, far past the message timeout, and
    timed out 60% of them. 1,000 trees of a 1 ms bolt are 1 s of work, and
    cost a fast reliable topology nothing measurable (docs/config.md). None still means
    no limit, when set."""
    assert config.defaults()["topology.max.spout.pending"] == 1000
    assert resolve({"topology.max.spout.pending": None})["topology.max.spout.pending"] is None


def test_resolve_with_no_layers_is_the_defaults():
    assert resolve() == config.defaults()
    assert resolve(None, {}) == config.defaults()


def test_resolve_later_layers_win():
    conf = resolve({"topology.workers": 2}, None, {"topology.workers": 3, "topology.debug": True})
    assert conf["topology.workers"] == 3
    assert conf["topology.debug"] is True


def test_resolve_does_not_mutate_the_defaults():
    resolve({"topology.workers": 5})
    assert config.defaults()["topology.workers"] == 1


def test_config_error_is_a_stormish_error():
    assert issubclass(ConfigError, StormishError)


# -- unknown keys
def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match=r"unknown config key 'topology\.no\.such\.thing'"):
        check_value("topology.no.such.thing", 1)


@pytest.mark.parametrize("namespace", config.NAMESPACES)
def test_an_undeclared_key_in_a_stormish_namespace_is_an_error(namespace):
    with pytest.raises(ConfigError, match=rf"unknown config key '{namespace}\.foo'"):
        check_value(f"{namespace}.foo", 1)
    with pytest.raises(ConfigError, match=rf"'{namespace}\.foo' \(in topology 't'\)"):
        resolve({f"{namespace}.foo": 1}, where="topology 't'", level="topology")


@pytest.mark.parametrize(
    "value", [123, "text", None, [1, 2], {"nested": {"a": (1, 2)}}, 2.5, object()]
)
def test_an_application_key_passes_through_unchanged(value):
    """Storm's TestConfBolt: "fake.config": 123 in the topology's conf reaches prepare()."""
    check_value("fake.config", value)
    conf = resolve({"fake.config": value}, {"my_app": value}, level="topology")
    assert conf["fake.config"] is value and conf["my_app"] is value
    comp = config.for_component(conf, {"fake.config": "component wins", "other": value})
    assert comp["fake.config"] == "component wins" and comp["other"] is value


def test_an_application_key_that_is_a_near_miss_of_a_declared_one_is_refused():
    for typo in ("topolgy.workers", "Topology.workers", "topology_workers"):
        with pytest.raises(ConfigError, match=r"did you mean 'topology\.workers'"):
            check_value(typo, 2)


def test_unknown_key_suggests_a_close_one():
    with pytest.raises(ConfigError, match=r"did you mean 'topology\.workers'"):
        check_value("topolgy.workers", 2)


def test_unknown_key_says_where():
    with pytest.raises(ConfigError, match=r"'topolgy\.workers' \(in topology 'wc'\)"):
        resolve({"topolgy.workers": 2}, where="topology 'wc'")


def test_unknown_key_without_a_close_one_gives_no_hint():
    with pytest.raises(ConfigError) as exc:
        check_value("stormish.zzz.qqq", 2)
    assert "did you mean" not in str(exc.value)


def test_config_key_names_must_be_strings():
    with pytest.raises(ConfigError, match=r"non-empty strings, got 3 \(in topology 't'\)"):
        resolve({3: 1}, where="topology 't'")
    with pytest.raises(ConfigError, match="non-empty strings"):
        check_value("", 1)


# -- bad values
BAD_VALUES = [
    ("topology.executor.receive.buffer.size", 0),
    ("topology.executor.receive.buffer.size", -5),
    ("topology.executor.receive.buffer.size", 2.5),
    ("topology.executor.receive.buffer.size", "big"),
    ("topology.executor.receive.buffer.size", True),
    ("topology.transfer.buffer.size", 0),
    ("topology.producer.batch.size", 0),
    ("topology.workers", 0),
    ("topology.workers", None),
    ("topology.bolt.wait.strategy", "sleepy"),
    ("topology.spout.wait.strategy", "Progressive"),
    ("topology.backpressure.wait.strategy", None),
    ("topology.bolt.wait.progressive.level1.count", -1),
    ("topology.spout.wait.progressive.level3.sleep.millis", -0.5),
    ("topology.bolt.wait.park.microsec", 1.5),
    ("topology.backpressure.check.millis", 0),
    # NaN passed every comparison: the check timer never ran and the scheduler spun
    ("topology.backpressure.check.millis", float("nan")),
    ("topology.backpressure.check.millis", float("inf")),
    ("topology.message.timeout.secs", float("nan")),
    ("topology.message.timeout.secs", 0),
    ("topology.message.timeout.secs", "30"),
    ("topology.max.spout.pending", 0),
    ("topology.acker.executors", -1),
    ("topology.tick.tuple.freq.secs", 0),
    ("topology.executor.overflow.limit", -1),
    ("topology.debug", "yes"),
    ("topology.debug", 1),
    ("stormish.local.host", 127),
    # no scheme: redis-py's own error came from the worker and named no key
    ("topology.state.redis.url", "localhost:6379"),
    ("topology.state.redis.url", "http://127.0.0.1:6379"),
]


@pytest.mark.parametrize(("name", "value"), BAD_VALUES)
def test_bad_value_raises_naming_the_key(name, value):
    escaped = name.replace(".", r"\.")
    with pytest.raises(ConfigError, match=rf"config key '{escaped}'"):
        check_value(name, value)
    with pytest.raises(ConfigError, match=rf"config key '{escaped}' \(in here\)"):
        resolve({name: value}, where="here")


GOOD_VALUES = [
    ("topology.max.spout.pending", None),
    ("topology.max.spout.pending", 1),
    ("topology.acker.executors", 0),
    ("topology.acker.executors", None),
    ("topology.tick.tuple.freq.secs", 0.5),
    ("topology.tick.tuple.freq.secs", None),
    ("topology.bolt.wait.strategy", "park"),
    ("topology.bolt.wait.park.microsec", 0),
    ("topology.spout.wait.progressive.level3.sleep.millis", 0),
    ("topology.message.timeout.secs", 0.25),
    ("stormish.local.host", "0.0.0.0"),
    ("topology.debug", False),
]


@pytest.mark.parametrize(("name", "value"), GOOD_VALUES)
def test_good_values_pass(name, value):
    check_value(name, value)
    assert resolve({name: value})[name] == value


def test_batch_size_above_half_the_queue_is_an_error_naming_both_keys():
    with pytest.raises(ConfigError) as exc:
        resolve({"topology.executor.receive.buffer.size": 100, "topology.producer.batch.size": 51})
    msg = str(exc.value)
    assert "'topology.producer.batch.size' (51)" in msg
    assert "'topology.executor.receive.buffer.size' (100)" in msg


def test_batch_size_exactly_half_the_queue_is_fine():
    conf = resolve(
        {"topology.executor.receive.buffer.size": 100, "topology.producer.batch.size": 50}
    )
    assert conf["topology.producer.batch.size"] == 50


def test_small_queue_with_an_unset_batch_is_fine_and_the_batch_follows_it():
    """Storm's normal receive buffer of 64 was refused while the default batch (512)
    exceeded half of it: a batch nobody set now follows the queue."""
    conf = resolve({"topology.executor.receive.buffer.size": 64})
    assert conf["topology.producer.batch.size"] is None  # still unset at topology level
    assert config.batch_size(conf) == 32
    assert config.for_component(conf, {})["topology.producer.batch.size"] == 32
    assert config.batch_size(resolve()) == 512  # half of 4096 is more: the cap holds
    assert config.batch_size(resolve({"topology.executor.receive.buffer.size": 1})) == 1


def test_an_unset_batch_follows_a_component_s_own_queue():
    topo = resolve({"topology.executor.receive.buffer.size": 64})
    assert (
        config.for_component(topo, {"topology.executor.receive.buffer.size": 4096})[
            "topology.producer.batch.size"
        ]
        == 512
    )
    small = config.for_component(resolve(), {"topology.executor.receive.buffer.size": 100})
    assert small["topology.producer.batch.size"] == 50


def test_an_explicit_batch_over_half_a_component_s_queue_names_both_keys_and_the_place():
    topo = resolve({"topology.producer.batch.size": 100})
    with pytest.raises(ConfigError) as exc:
        config.for_component(
            topo, {"topology.executor.receive.buffer.size": 64}, "component 'c' of topology 't'"
        )
    msg = str(exc.value)
    assert "'topology.producer.batch.size' (100)" in msg
    assert "'topology.executor.receive.buffer.size' (64)" in msg
    assert "component 'c' of topology 't'" in msg


def test_cross_key_rule_sees_the_merged_layers():
    conf = resolve(
        {"topology.executor.receive.buffer.size": 10}, {"topology.producer.batch.size": 5}
    )
    assert conf["topology.producer.batch.size"] == 5
    with pytest.raises(ConfigError):
        resolve({"topology.producer.batch.size": 5}, {"topology.executor.receive.buffer.size": 9})


# -- parse_override
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("topology.workers=3", ("topology.workers", 3)),
        ("topology.debug=true", ("topology.debug", True)),
        ("topology.max.spout.pending=null", ("topology.max.spout.pending", None)),
        ("topology.message.timeout.secs=2.5", ("topology.message.timeout.secs", 2.5)),
        ("topology.bolt.wait.strategy=park", ("topology.bolt.wait.strategy", "park")),
        ('topology.bolt.wait.strategy="park"', ("topology.bolt.wait.strategy", "park")),
        ("stormish.local.host=10.0.0.1", ("stormish.local.host", "10.0.0.1")),
        ("stormish.local.host=a=b", ("stormish.local.host", "a=b")),
        (" topology.workers = 4", ("topology.workers", 4)),
    ],
)
def test_parse_override(text, expected):
    assert parse_override(text) == expected


def test_parse_override_types_are_json_types():
    name, value = parse_override("topology.workers=3")
    assert type(value) is int
    name, value = parse_override("topology.tick.tuple.freq.secs=1.0")
    assert type(value) is float


def test_parse_override_without_equals():
    with pytest.raises(ConfigError, match=r"'topology\.workers' must look like key=value"):
        parse_override("topology.workers")


def test_parse_override_unknown_key_is_named_with_its_origin():
    with pytest.raises(ConfigError, match=r"unknown config key 'topology\.wrkers' \(in -c\)"):
        parse_override("topology.wrkers=2")


def test_parse_override_bad_value_names_the_key():
    with pytest.raises(ConfigError, match=r"config key 'topology\.workers' \(in -c\)"):
        parse_override("topology.workers=two")
    with pytest.raises(ConfigError, match=r"config key 'topology\.debug'"):
        parse_override("topology.debug=1")


def test_unknown_key_with_a_typo_in_the_last_segment_suggests_the_key():
    with pytest.raises(ConfigError, match=r"did you mean 'topology\.max\.spout\.pending'"):
        check_value("topology.max.spout.pendng", 10)


def test_spark_keys_are_declared_or_in_a_checked_family():
    from stormish import ConfigError
    from stormish.config import resolve

    conf = resolve(
        {"stormish.spark.master": "local[2]", "stormish.spark.conf.spark.sql.shuffle.partitions": 8}
    )
    assert conf["stormish.spark.master"] == "local[2]"
    with pytest.raises(ConfigError, match="stormish.spark.conf.x.*string, number or boolean"):
        resolve({"stormish.spark.conf.x": [1]})
    with pytest.raises(ConfigError, match="unknown config key 'stormish.spark.conf.'"):
        resolve({"stormish.spark.conf.": "x"})
    with pytest.raises(ConfigError, match="stormish.spark.master.*string"):
        resolve({"stormish.spark.master": 3})


# -- scopes: where a key may be set
WORKER_LEVEL = [
    "topology.workers",
    "topology.acker.executors",
    "topology.message.timeout.secs",
    "topology.transfer.buffer.size",
    "topology.backpressure.check.millis",
    "topology.backpressure.resend.step",
    "topology.executor.overflow.limit",
    "topology.worker.gc.threshold",
    "topology.stats.interval.secs",
    "stormish.local.host",
]
PER_COMPONENT = [
    "topology.executor.receive.buffer.size",
    "topology.producer.batch.size",
    "topology.max.spout.pending",
    "topology.tick.tuple.freq.secs",
    "topology.bolt.wait.strategy",
    "topology.debug",
]


@pytest.mark.parametrize("name", sorted(KEYS))
def test_every_key_has_a_scope(name):
    assert KEYS[name].scope in config.SCOPES


@pytest.mark.parametrize("name", WORKER_LEVEL)
def test_a_worker_level_key_is_refused_per_component_naming_key_and_component(name):
    assert KEYS[name].scope == "topology"
    value = KEYS[name].default if KEYS[name].default is not None else 1
    where = "component 'count' of topology 'wc'"
    with pytest.raises(ConfigError) as exc:
        check_value(name, value, where, "component")
    assert f"config key {name!r} (in {where})" in str(exc.value)
    assert "cannot be set per component" in str(exc.value)
    check_value(name, value, "topology 'wc'", "topology")  # fine for the whole topology


@pytest.mark.parametrize("name", PER_COMPONENT)
def test_storm_s_per_component_keys_may_be_set_per_component(name):
    assert KEYS[name].scope == "component"
    check_value(name, KEYS[name].default, "component 'c'", "component")


@pytest.mark.parametrize(
    ("name", "daemon"),
    [("nimbus.task.timeout.secs", "nimbus"), ("supervisor.worker.timeout.secs", "supervisor")],
)
def test_daemon_keys_belong_to_their_daemon_only(name, daemon):
    assert KEYS[name].scope == daemon
    with pytest.raises(ConfigError, match=rf"configures the {daemon} daemon.*stormish {daemon}"):
        check_value(name, 5, "topology 'wc'", "topology")
    with pytest.raises(ConfigError, match=r"configures the"):
        check_value(name, 5, "component 'c'", "component")
    assert parse_override(f"{name}=5", daemon) == (name, 5)
    with pytest.raises(ConfigError, match=rf"\(in -c\) configures the {daemon} daemon"):
        parse_override(f"{name}=5")  # `stormish run -c` configures a topology
    other = "supervisor" if daemon == "nimbus" else "nimbus"
    with pytest.raises(ConfigError, match=rf"cannot be given to `stormish {other}`"):
        parse_override(f"{name}=5", other)
    with pytest.raises(ConfigError, match=rf"cannot be given to `stormish {daemon}`"):
        parse_override("topology.workers=2", daemon)
    with pytest.raises(ConfigError, match=rf"unknown config key 'fake'.*stormish {daemon}"):
        parse_override("fake=1", daemon)


# -- every key is read, and documented
SOURCES = {
    p: p.read_text()
    for p in sorted(Path(config.__file__).parent.rglob("*.py"))
    if p.name != "config.py"
}
WAIT_KEY = re.compile(r"topology\.(backpressure|spout|bolt)\.wait(\..+)$")
CONSTANTS = dict(
    (key, name)
    for name, key in re.findall(
        r'^([A-Z_]+) = "([a-z.]+)"', Path(config.__file__).read_text(), re.M
    )
)


def _read_somewhere(name: str) -> bool:
    """A key's literal appears in code outside config.py, or its constant in config.py
    (`QUEUE`) is used there; the wait-strategy families are read by
    `wait.from_config(conf, use)` through `f"{p}<suffix>"`."""
    if any(f'"{name}"' in src for src in SOURCES.values()):
        return True
    const = CONSTANTS.get(name)
    if const and any(f"config.{const}" in src for src in SOURCES.values()):
        return True
    m = WAIT_KEY.match(name)
    if m is None:
        return False
    wait_src = next(s for p, s in SOURCES.items() if p.name == "wait.py")
    uses = "".join(SOURCES.values())
    return f'f"{{p}}{m.group(2)}"' in wait_src and f'"{m.group(1)}")' in uses


@pytest.mark.parametrize("name", sorted(KEYS))
def test_every_declared_key_is_read_outside_config_py(name):
    """A declared key nobody reads is a setting that silently does nothing (five did)."""
    assert _read_somewhere(name), f"config key {name!r} is declared but never read"


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


DOCS = Path(__file__).resolve().parents[2] / "docs"
README = DOCS.parent / "README.md"


@pytest.mark.parametrize("name", sorted(KEYS))
def test_the_config_reference_lists_every_key_with_default_and_scope(name):
    text = (DOCS / "config.md").read_text()
    row = next((ln for ln in text.splitlines() if ln.startswith(f"| `{name}` |")), None)
    assert row is not None, f"docs/config.md has no row for {name!r}"
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == f"`{KEYS[name].default!r}`", row
    assert cells[2] == KEYS[name].scope, row


def test_docs_name_no_key_that_does_not_exist():
    namespaces = "|".join(config.NAMESPACES)
    pattern = re.compile(rf"`((?:{namespaces})\.[a-z0-9._]+)")
    for doc in [README, *sorted(DOCS.glob("*.md"))]:
        for name in pattern.findall(doc.read_text()):
            if name.endswith(".py") or any(name.startswith(p) for p in config.PREFIXES):
                continue
            if _is_module(name) or (name.endswith(".") and _is_module(name[:-1])):
                continue  # `stormish.testing`, `stormish.testing.MemoryLog`
            assert name in KEYS, f"{doc.name} names config key {name!r}, which is not declared"
