"""The config audit's defects, each pinned: keys a Storm file misspells, Storm's keys
stormish sets aside, profiles without their wrapper, paths and values that used to fail
far from the key (or not at all), and the hints an unknown key gets."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

from stormish import BasicBolt, Spout, Topology, config
from stormish.config import ConfigError, check_value, parse_override, resolve


class _Spout(Spout):
    outputs = ["n"]

    def next_tuple(self) -> None:
        self.finish()


class _Bolt(BasicBolt):
    def execute(self, tup):  # type: ignore[no-untyped-def]
        pass


def _topology(name: str = "audit", **conf) -> Topology:  # type: ignore[no-untyped-def]
    t = Topology(name, config=conf)
    t.set_spout("s", _Spout())
    t.set_bolt("b", _Bolt()).shuffle_grouping("s")
    return t


# -- D1/D2: Storm configs (Flux, streamparse) -------------------------------------------------
def test_a_storm_config_sets_aside_storms_keys_and_refuses_a_typo():
    kept, dropped = config.split_storm(
        {"topology.worker.childopts": "-Xmx1g", "topology.workers": 2, "app.key": 1}
    )
    assert kept == {"topology.workers": 2, "app.key": 1}
    assert dropped == ["topology.worker.childopts"]
    for typo, close in (
        ("topology.workerz", "topology.workers"),
        ("topology.max.spout.pendng", "topology.max.spout.pending"),
    ):
        with pytest.raises(
            ConfigError, match=rf"unknown config key '{typo}'.*did you mean '{close}'"
        ):
            config.split_storm({typo: 2}, "topology config")
    # neither stormish's nor Storm's, and close to nothing: refused all the same
    with pytest.raises(ConfigError, match=r"unknown config key 'topology\.zzz\.qqq'"):
        config.split_storm({"topology.zzz.qqq": 1})


def test_a_component_storm_config_refuses_a_near_miss_of_a_component_key():
    with pytest.raises(ConfigError, match=r"did you mean 'topology\.tick\.tuple\.freq\.secs'"):
        config.split_storm({"topology.tick.tuple.freq.sec": 1}, "component config", "component")
    kept, dropped = config.split_storm(
        {"topology.tick.tuple.freq.secs": 1, "topology.bolts.window.length.count": 5},
        "component config",
        "component",
    )
    assert kept == {"topology.tick.tuple.freq.secs": 1}
    assert dropped == ["topology.bolts.window.length.count"]


def test_storms_keys_are_not_stormish_keys():
    assert not (config.STORM_KEYS & set(config.KEYS) - {"topology.enable.message.timeouts"})
    assert all(k.split(".", 1)[0] in config.NAMESPACES for k in config.STORM_KEYS)
    assert config.is_storm_only("topology.worker.childopts")
    assert not config.is_storm_only("topology.workers")


def test_the_python_api_says_a_storm_key_is_storms():
    with pytest.raises(ConfigError, match=r"Storm's, and stormish does not use it") as exc:
        check_value("topology.worker.childopts", "-Xmx1g")
    assert "did you mean" not in str(exc.value)
    with pytest.raises(ConfigError, match=r"set by stormish from the topology's name"):
        check_value("topology.name", "x", level="topology")


# -- close-key hints ---------------------------------------------------------------------------
def test_a_hint_only_on_a_real_near_miss():
    with pytest.raises(ConfigError) as exc:
        check_value("topology.bolts.window.lenght.count", 10)  # nothing of ours is near
    assert "did you mean" not in str(exc.value)
    with pytest.raises(ConfigError, match=r"did you mean 'topology\.max\.spout\.pending'"):
        check_value("topology.spout.max.pending", 10)  # reordered: not the shellbolt key


# -- D3: topology.enable.message.timeouts --------------------------------------------------
def test_message_timeouts_can_be_turned_off_in_the_python_api():
    assert config.KEYS["topology.enable.message.timeouts"].default is True
    assert config.KEYS["topology.enable.message.timeouts"].scope == "topology"
    t = _topology(**{"topology.enable.message.timeouts": False})
    assert t.validate()["topology.enable.message.timeouts"] is False
    with pytest.raises(ConfigError, match=r"must be true or false"):
        check_value("topology.enable.message.timeouts", "no")
    with pytest.raises(ConfigError, match=r"set per component"):
        check_value("topology.enable.message.timeouts", False, level="component")


def test_the_acker_drops_nothing_by_age_with_timeouts_off():
    from stormish.runtime.acker import AckerBolt
    from stormish.tuple import TICK_STREAM

    for enabled, left in ((True, 0), (False, 1)):
        acker = AckerBolt()
        acker.prepare({"topology.enable.message.timeouts": enabled}, None)
        acker.ledger.cur[7] = [5, 0, False]
        for _ in range(3):
            acker.execute_raw(TICK_STREAM, [], lambda *a: None)
        assert len(acker.ledger) == left


def test_in_flight_stamps_stay_bounded_without_rotation():
    from stormish.runtime.inflight import InFlight

    f = InFlight(3)
    for i in range(100):
        f.stamp(i, float(i))
    f.put(1, "m")
    f.trim_stamps(100.0, 10.0)
    assert len(f.stamp_times) <= 11
    assert f.pop(1) == "m"  # the entry itself never expires


# -- D4: profiles ------------------------------------------------------------------------
def test_a_profile_with_a_key_nobody_reads_is_refused(tmp_path: Path):
    """A misspelt wrapper (`confg`) applied nothing without a word: its keys were taken
    for the application's own. A plain object of stormish's keys is a profile too."""
    from stormish.loader import load_config_file, load_profile

    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"description": "x", "confg": {"topology.debug": True}}))
    with pytest.raises(
        ConfigError,
        match=r"profile '.*p\.json' must be .*or an object of stormish's config keys; "
        r"'confg' is neither",
    ):
        load_profile(str(bad))
    bad.write_text(json.dumps({"topology.debug": True, "my.app.key": 1}))
    with pytest.raises(ConfigError, match=r"'my.app.key' is neither"):
        load_profile(str(bad))
    bad.write_text(json.dumps({"topology.debug": True, "description": "plain"}))
    assert load_profile(str(bad)) == {"topology.debug": True}
    bad.write_text(json.dumps({"config": {"topology.debug": True}, "descripton": "x"}))
    with pytest.raises(ConfigError, match=r"key 'descripton' beside 'config' is not read"):
        load_profile(str(bad))
    bad.write_text(json.dumps({"config": {"topology.debug": True}, "description": "x"}))
    assert load_profile(str(bad)) == {"topology.debug": True}
    # a daemon's config file: a plain object of keys still does
    plain = tmp_path / "d.json"
    plain.write_text(json.dumps({"nimbus.task.timeout.secs": 5}))
    assert load_config_file(plain, "nimbus") == {"nimbus.task.timeout.secs": 5}
    plain.write_text(json.dumps({"config": {"nimbus.task.timeout.secs": 5}, "x": 1}))
    with pytest.raises(ConfigError, match=r"key 'x' beside 'config'"):
        load_config_file(plain, "nimbus")


def test_the_shipped_profiles_still_load():
    from stormish.loader import load_profile

    for name in ("balanced", "low-cpu", "low-latency"):
        assert load_profile(name)


# -- D5/D6: directories ------------------------------------------------------------------
@pytest.mark.parametrize("key", ["topology.state.dir", "stormish.local.log.dir"])
def test_an_empty_directory_is_refused(key: str):
    with pytest.raises(ConfigError, match=rf"'{key}'.*not an empty string"):
        check_value(key, "")
    with pytest.raises(ConfigError, match=rf"'{key}'.*directory path"):
        check_value(key, 3)
    check_value(key, None)
    check_value(key, "/tmp/x")


def test_a_log_dir_that_is_a_file_names_the_key(tmp_path: Path):
    from stormish.local.workers import _log_place

    f = tmp_path / "file"
    f.write_text("x")
    conf = config.defaults() | {"stormish.local.log.dir": str(f)}
    with pytest.raises(ConfigError, match=r"'stormish\.local\.log\.dir'.*is not a directory"):
        _log_place(conf, "t")


def test_a_state_dir_that_is_a_file_names_the_key(tmp_path: Path):
    from stormish.state.factory import open_store

    f = tmp_path / "file"
    f.write_text("x")
    conf = {"topology.state.provider": "embedded", "topology.state.dir": str(f)}
    with pytest.raises(ConfigError, match=r"'topology\.state\.dir'.*of topology 't'"):
        open_store("b-1", conf, "t")
    store = open_store("b-1", {"topology.state.dir": str(tmp_path / "ok")}, "t")
    assert store is not None


# -- D7: nimbus.zookeeper.root -------------------------------------------------------------
@pytest.mark.parametrize("root", [None, "", "noslash", "/", "/a/", "/a//b", 3])
def test_a_bad_zookeeper_root_names_the_key(root):  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=r"'nimbus\.zookeeper\.root'.*absolute znode path"):
        check_value("nimbus.zookeeper.root", root, level="nimbus")
    from stormish.cluster.ha import check_root

    with pytest.raises(ConfigError, match=r"^--zk-root must be an absolute znode path"):
        check_root(root)


def test_a_zookeeper_root_override_names_the_key_not_the_flag():
    with pytest.raises(ConfigError, match=r"config key 'nimbus\.zookeeper\.root' \(in -c\)"):
        parse_override("nimbus.zookeeper.root=noslash", "nimbus")
    assert parse_override("nimbus.zookeeper.root=/c1/x", "nimbus")[1] == "/c1/x"


# -- D8: stormish.spark.master ----------------------------------------------------------
def test_a_bad_spark_master_is_refused_at_submit():
    with pytest.raises(ConfigError, match=r"'stormish\.spark\.master'.*'bogus' is not a Spark"):
        _topology(**{"stormish.spark.master": "bogus"}).validate()
    for good in ("local", "local[2]", "local[*]", "spark://h:7077", "sc://h:15002", None):
        check_value("stormish.spark.master", good)


# -- D9: connector options ---------------------------------------------------------------
BAD_NUMBERS = [math.nan, math.inf, True]


@pytest.mark.parametrize("bad", BAD_NUMBERS)
@pytest.mark.parametrize("option", ["commit_interval_secs", "revoke_timeout_secs"])
def test_kafka_spout_refuses_non_finite_and_bool_seconds(option: str, bad: object):
    from stormish.kafka import KafkaSpout

    with pytest.raises(ValueError, match=rf"KafkaSpout {option} must be a finite number"):
        KafkaSpout("127.0.0.1:9", topics="t", group_id="g", **{option: bad})


@pytest.mark.parametrize("bad", BAD_NUMBERS)
@pytest.mark.parametrize("option", ["ack_wait_secs", "nak_delay_secs"])
def test_jetstream_spout_refuses_non_finite_and_bool_seconds(option: str, bad: object):
    from stormish.nats import JetStreamSpout

    with pytest.raises(ValueError, match=rf"JetStreamSpout {option}= must be a finite number"):
        JetStreamSpout("nats://127.0.0.1:4222", "S", "s.>", "d", **{option: bad})


@pytest.mark.parametrize(
    "kw", [{"batch_seconds": math.nan}, {"batch_seconds": math.inf}, {"batch_seconds": True},
           {"batch_rows": True}, {"batch_rows": False}]
)  # fmt: skip
def test_spark_sink_refuses_non_finite_and_bool_batches(kw: dict, tmp_path: Path):
    from stormish.spark import SparkSink

    (option,) = kw
    with pytest.raises(ValueError, match=rf"SparkSink {option} must be"):
        SparkSink(path=str(tmp_path / "out"), **kw)


# -- D10: level 2 under the cooperative scheduler ----------------------------------------
def test_level2_says_it_does_nothing_under_the_cooperative_scheduler(caplog):
    for use in ("backpressure", "spout", "bolt"):
        assert "cooperative" in config.KEYS[f"topology.{use}.wait.progressive.level2.count"].doc
    assert "does nothing" in config.describe()
    key = "topology.bolt.wait.progressive.level2.count"
    with caplog.at_level(logging.WARNING, "stormish.config"):
        _topology("l2coop", **{key: 1000}).validate()
    assert f"'{key}' is 1000, which does nothing under the cooperative" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, "stormish.config"):
        _topology("l2thr", **{key: 1000, "topology.worker.scheduler": "threads"}).validate()
        _topology("l2zero", **{key: 0}).validate()
        t = _topology("l2own")
        t.components["b"].config.update({key: 5, "topology.executor.own.thread": True})
        t.validate()
    assert "does nothing" not in caplog.text
    t = _topology("l2comp")
    t.components["b"].config[key] = 5
    with caplog.at_level(logging.WARNING, "stormish.config"):
        t.validate()
    assert "component 'b' of topology 'l2comp'" in caplog.text


# -- D11: component_config that is not a mapping -----------------------------------------
def test_a_component_config_that_is_not_a_mapping_names_the_component():
    class Listy(_Bolt):
        component_config = ["topology.debug"]  # type: ignore[assignment]

    t = Topology("cc")
    t.set_spout("s", _Spout())
    with pytest.raises(ConfigError, match=r"component 'b' of topology 'cc': component_config"):
        t.set_bolt("b", Listy())


# -- D13: a huge integer -------------------------------------------------------------------
def test_a_huge_integer_for_a_number_key_is_a_config_error():
    with pytest.raises(ConfigError, match=r"'topology\.message\.timeout\.secs'.*401 digits"):
        check_value("topology.message.timeout.secs", 10**400)
    with pytest.raises(ConfigError, match=r"topology\.message\.timeout\.secs"):
        parse_override("topology.message.timeout.secs=" + "9" * 400)
    check_value("topology.message.timeout.secs", 10**20)  # large, but a float takes it


# -- D14: topology.name in the conf components receive ----------------------------------
def test_the_resolved_conf_carries_the_topology_name():
    t = _topology("named")
    conf = t.validate()
    assert conf["topology.name"] == "named"
    from stormish.lint import analyse

    analyse(t, conf)  # a resolved conf given again, as nimbus's lint does
    with pytest.raises(ConfigError, match=r"topology\.name"):
        t.validate({"topology.name": "other"})


# -- suspicion: locality bounds ----------------------------------------------------------
def test_a_locality_lower_bound_above_the_higher_one_is_refused():
    with pytest.raises(ConfigError, match=r"lower\.bound' \(0\.9\).*at most.*higher\.bound"):
        resolve({"topology.localityaware.lower.bound": 0.9}, level="topology")
    resolve({"topology.localityaware.lower.bound": 0.5, "topology.localityaware.higher.bound": 0.5})


# -- D12: the reference lists each key once ----------------------------------------------
def test_the_config_reference_lists_each_key_once():
    text = (Path(__file__).resolve().parents[2] / "docs" / "config.md").read_text()
    rows = [ln.split("|")[1].strip() for ln in text.splitlines() if ln.startswith("| `")]
    dupes = {r for r in rows if rows.count(r) > 1}
    assert not dupes, dupes
    row = next(ln for ln in text.splitlines() if ln.startswith("| `topology.edge.policies`"))
    assert "mode, readers" in row  # config.describe()'s text
