"""The config registry: defaults, checks that name the key, resolve and parse_override."""

from __future__ import annotations

import pytest

from stormish import config
from stormish.config import KEYS, check_value, parse_override, resolve
from stormish.errors import ConfigError, StormishError

# Storm's names and defaults (DESIGN.md section 9); a change here is a change of contract.
STORM_DEFAULTS = {
    "topology.executor.receive.buffer.size": 32768,
    "topology.transfer.buffer.size": 1000,
    "topology.backpressure.wait.strategy": "progressive",
    "topology.backpressure.wait.progressive.level1.count": 1,
    "topology.backpressure.wait.progressive.level2.count": 1000,
    "topology.backpressure.wait.progressive.level3.sleep.millis": 1,
    "topology.spout.wait.progressive.level1.count": 0,
    "topology.spout.wait.progressive.level2.count": 0,
    "topology.spout.wait.progressive.level3.sleep.millis": 1,
    "topology.bolt.wait.progressive.level1.count": 1,
    "topology.bolt.wait.progressive.level2.count": 1000,
    "topology.bolt.wait.progressive.level3.sleep.millis": 1,
    "topology.backpressure.check.millis": 50,
    "topology.executor.overflow.limit": 0,
    "topology.max.spout.pending": None,
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
    assert f"{name} = {KEYS[name].default!r}: " in config.describe()


@pytest.mark.parametrize(("name", "value"), sorted(STORM_DEFAULTS.items()))
def test_storm_defaults(name, value):
    assert config.defaults()[name] == value


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
    with pytest.raises(ConfigError, match=r"unknown config key 'no\.such\.thing'"):
        check_value("no.such.thing", 1)


def test_unknown_key_suggests_a_close_one():
    with pytest.raises(ConfigError, match=r"did you mean 'topology\.workers'"):
        check_value("topolgy.workers", 2)


def test_unknown_key_says_where():
    with pytest.raises(ConfigError, match=r"'topolgy\.workers' \(in topology 'wc'\)"):
        resolve({"topolgy.workers": 2}, where="topology 'wc'")


def test_unknown_key_without_a_close_one_gives_no_hint():
    with pytest.raises(ConfigError) as exc:
        check_value("zzz.qqq", 2)
    assert "did you mean" not in str(exc.value)


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
    ("topology.message.timeout.secs", 0),
    ("topology.message.timeout.secs", "30"),
    ("topology.max.spout.pending", 0),
    ("topology.acker.executors", -1),
    ("topology.tick.tuple.freq.secs", 0),
    ("topology.executor.overflow.limit", -1),
    ("topology.debug", "yes"),
    ("topology.debug", 1),
    ("stormish.local.host", 127),
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


def test_small_queue_with_default_batch_is_an_error():
    """The cross-key rule applies to defaults too: shrinking the queue alone can break it."""
    with pytest.raises(ConfigError, match=r"topology\.producer\.batch\.size"):
        resolve({"topology.executor.receive.buffer.size": 512})


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
