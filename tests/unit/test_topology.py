"""Topology checks at build and validate time; every error names its place."""

from __future__ import annotations

import threading

import pytest

from stormish import Bolt, ConfigError, Spout, Topology, TopologyError

from .idle import IdleBasicBolt, IdleBolt, IdleSpout


class Words(IdleSpout):
    outputs = ["word"]


class TwoStreams(IdleSpout):
    streams = {"default": ["word"], "numbers": ["n", "square"]}


class Silent(Spout):
    """Declares no output at all."""

    def next_tuple(self):
        pass


class Count(IdleBolt):
    outputs = ["word", "count"]


class Sink(IdleBasicBolt):
    pass


class Locked(Bolt):
    def __init__(self):
        self.lock = threading.Lock()
        self.fine = [1, 2, 3]

    def execute(self, tup):
        pass


def base() -> Topology:
    t = Topology("wc")
    t.set_spout("words", Words())
    return t


def test_a_valid_topology_validates_and_returns_the_resolved_config():
    t = Topology("wc", config={"topology.workers": 2})
    t.set_spout("words", TwoStreams(), parallelism=2)
    t.set_bolt("count", Count(), parallelism=3).fields_grouping("words", ["word"])
    t.set_bolt("sq", Sink()).shuffle_grouping("words", "numbers")
    conf = t.validate()
    assert conf["topology.workers"] == 2
    assert conf["topology.executor.receive.buffer.size"] == 4096
    assert [s.name for s in t.components.values()] == ["words", "count", "sq"]
    assert t.components["count"].parallelism == 3
    assert t.consumers("words", "numbers")[0][0] == "sq"


def test_declarer_methods_chain():
    t = base()
    d = t.set_bolt("count", Count())
    assert d.shuffle_grouping("words") is d
    assert d.add_configuration("topology.tick.tuple.freq.secs", 2) is d
    assert len(t.components["count"].subscriptions) == 1
    assert t.components["count"].config == {"topology.tick.tuple.freq.secs": 2}


# -- names, duplicates and parallelism
def test_duplicate_component_id_is_named():
    t = base()
    with pytest.raises(TopologyError, match=r"duplicate component id 'words' in topology 'wc'"):
        t.set_bolt("words", Count())


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_bad_parallelism_names_the_component(bad):
    t = base()
    with pytest.raises(TopologyError, match=r"component 'count': parallelism must be an integer"):
        t.set_bolt("count", Count(), parallelism=bad)
    assert "count" not in t.components


@pytest.mark.parametrize("name", ["__acker", "__mine", "has space", "", "slash/name"])
def test_bad_or_reserved_component_ids(name):
    t = base()
    with pytest.raises(TopologyError, match="component id") as exc:
        t.set_bolt(name, Count())
    assert repr(name) in str(exc.value)


def test_reserved_stream_name_is_named():
    class Sneaky(Spout):
        streams = {"__ack_ack": ["root"]}

    with pytest.raises(TopologyError, match=r"component 'sneaky': stream '__ack_ack' is reserved"):
        Topology("t").set_spout("sneaky", Sneaky())


def test_field_declared_twice_is_named():
    class Twice(Spout):
        outputs = ["a", "a"]

    with pytest.raises(TopologyError, match=r"component 'twice' stream 'default'.*twice"):
        Topology("t").set_spout("twice", Twice())


@pytest.mark.parametrize("name", ["", "with space", "a/b", None])
def test_bad_topology_name(name):
    with pytest.raises(TopologyError, match="topology name"):
        Topology(name)


def test_set_spout_needs_a_spout_and_set_bolt_a_bolt():
    t = Topology("t")
    with pytest.raises(TopologyError, match=r"component 'b': set_spout needs a Spout.*Count"):
        t.set_spout("b", Count())
    with pytest.raises(TopologyError, match=r"component 's': set_bolt needs a Bolt.*Words"):
        t.set_bolt("s", Words())


def test_a_spout_cannot_subscribe():
    t = base()
    d = t.set_spout("other", Words())
    with pytest.raises(TopologyError, match=r"spout 'other' cannot subscribe"):
        d.shuffle_grouping("words")


# -- subscriptions
def test_unknown_source_component_is_named_at_validate():
    t = base()
    t.set_bolt("count", Count()).shuffle_grouping("wrods")  # the source may come later...
    with pytest.raises(TopologyError) as exc:
        t.validate()  # ...but not never
    msg = str(exc.value)
    assert "component 'count' subscribes to unknown component 'wrods'" in msg
    assert "'words'" in msg  # the known ones are listed
    assert "'wrods' (did you mean 'words'?); known:" in msg  # the likely one named (first hour)
    assert "test_topology.py:" in msg  # the line that subscribed


def test_a_class_given_for_an_instance_says_so():
    t = base()
    with pytest.raises(TopologyError, match=r"got the class Count: pass Count\(\)"):
        t.set_bolt("c", Count)  # type: ignore[arg-type]


def test_source_declared_later_is_fine():
    t = Topology("t")
    t.set_bolt("count", Count()).fields_grouping("words", ["word"])
    t.set_spout("words", Words())
    t.validate()


def test_source_declared_later_is_still_checked_at_validate():
    t = Topology("t")
    t.set_bolt("count", Count()).fields_grouping("words", ["wrd"])
    t.set_spout("words", Words())
    with pytest.raises(TopologyError, match=r"unknown field\(s\) \['wrd'\]"):
        t.validate()


def test_undeclared_stream_is_named_when_subscribing():
    t = Topology("t")
    t.set_spout("src", TwoStreams())
    with pytest.raises(TopologyError) as exc:
        t.set_bolt("count", Count()).shuffle_grouping("src", "letters")
    msg = str(exc.value)
    assert "component 'count' subscribes to stream 'letters' of 'src'" in msg
    assert "['default', 'numbers']" in msg


def test_subscribing_to_a_spout_with_no_output_names_it():
    t = Topology("t")
    t.set_spout("silent", Silent())
    with pytest.raises(TopologyError) as exc:
        t.set_bolt("count", Count()).shuffle_grouping("silent")
    msg = str(exc.value)
    assert "stream 'default' of 'silent'" in msg
    assert "no streams" in msg


def test_unknown_field_in_fields_grouping_is_named():
    t = Topology("t")
    t.set_spout("src", TwoStreams())
    with pytest.raises(TopologyError) as exc:
        t.set_bolt("count", Count()).fields_grouping("src", ["n", "cube"], stream="numbers")
    msg = str(exc.value)
    assert "component 'count'" in msg
    assert "stream 'numbers'" in msg
    assert "['cube']" in msg
    assert "['n', 'square']" in msg


def test_fields_grouping_accepts_a_single_field_name_string():
    t = base()
    t.set_bolt("count", Count()).fields_grouping("words", "word")
    assert t.components["count"].subscriptions[0].fields == ("word",)


def test_unknown_field_in_partial_key_grouping_is_named():
    t = base()
    with pytest.raises(TopologyError, match=r"partial_key grouping on 'words'.*\['nope'\]"):
        t.set_bolt("count", Count()).partial_key_grouping("words", ["nope"])


def test_fields_grouping_needs_fields():
    t = base()
    with pytest.raises(TopologyError, match=r"fields_grouping of 'count' on 'words'"):
        t.set_bolt("count", Count()).fields_grouping("words", [])


def test_custom_grouping_needs_a_callable_or_choose_tasks():
    t = base()
    with pytest.raises(TopologyError, match=r"custom_grouping of 'count' on 'words'"):
        t.set_bolt("count", Count()).custom_grouping("words", 42)


def test_topology_without_a_spout_is_named():
    t = Topology("lonely")
    t.set_bolt("count", Count())
    with pytest.raises(TopologyError, match=r"topology 'lonely' has no spout"):
        t.validate()


def test_every_grouping_method_records_its_kind():
    t = Topology("t")
    t.set_spout("src", TwoStreams())
    d = t.set_bolt("b", Count())
    d.shuffle_grouping("src")
    d.local_or_shuffle_grouping("src", "numbers")
    d.fields_grouping("src", ["word"])
    d.partial_key_grouping("src", ["n"], "numbers")
    d.all_grouping("src")
    d.global_grouping("src")
    d.direct_grouping("src")
    d.none_grouping("src")
    d.custom_grouping("src", lambda values, n: 0)
    kinds = [(s.grouping, s.stream) for s in t.components["b"].subscriptions]
    assert kinds == [
        ("shuffle", "default"),
        ("local_or_shuffle", "numbers"),
        ("fields", "default"),
        ("partial_key", "numbers"),
        ("all", "default"),
        ("global", "default"),
        ("direct", "default"),
        ("none", "default"),
        ("custom", "default"),
    ]
    t.validate()


# -- picklability
def test_non_picklable_component_names_the_attribute():
    t = base()
    t.set_bolt("locked", Locked()).shuffle_grouping("words")
    with pytest.raises(TopologyError) as exc:
        t.validate()
    msg = str(exc.value)
    assert "component 'locked' cannot be pickled" in msg
    assert "attribute 'lock'" in msg
    assert "'fine'" not in msg


def test_a_locally_defined_component_class_is_picklable():
    class Local(Bolt):
        def execute(self, tup):
            pass

    t = base()
    t.set_bolt("local", Local()).shuffle_grouping("words")
    t.validate()


# -- config
def test_bad_config_key_in_topology_config_is_named():
    with pytest.raises(ConfigError, match=r"'topology\.wrkers' \(in topology 'wc'\)"):
        Topology("wc", config={"topology.wrkers": 2})


def test_bad_config_value_in_topology_config_is_named():
    with pytest.raises(ConfigError, match=r"config key 'topology\.workers' \(in topology 'wc'\)"):
        Topology("wc", config={"topology.workers": 0})


def test_bad_config_key_in_add_configuration_names_key_and_component():
    t = base()
    d = t.set_bolt("count", Count())
    with pytest.raises(
        ConfigError, match=r"'topology\.tick\.freq' \(in component 'count' of topology 'wc'\)"
    ):
        d.add_configuration("topology.tick.freq", 2)
    with pytest.raises(ConfigError, match=r"'topology\.tick\.tuple\.freq\.secs' \(in compo"):
        d.set_tick_frequency(-1)
    assert t.components["count"].config == {}


def test_bad_component_config_attribute_is_named():
    class Configured(Bolt):
        component_config = {"topology.max.spout.pending": 0}

        def execute(self, tup):
            pass

    with pytest.raises(
        ConfigError, match=r"'topology\.max\.spout\.pending' \(in component 'c' of topology 'wc'\)"
    ):
        base().set_bolt("c", Configured())


def test_validate_checks_cross_key_rules_with_extra_config():
    t = base()
    with pytest.raises(ConfigError, match=r"topology\.producer\.batch\.size"):
        t.validate(
            {"topology.executor.receive.buffer.size": 100, "topology.producer.batch.size": 60}
        )


def test_validate_checks_component_config_against_topology_config():
    t = Topology(
        "t",
        config={"topology.executor.receive.buffer.size": 100, "topology.producer.batch.size": 50},
    )
    t.set_spout("words", Words())
    t.set_bolt("count", Count()).add_configuration("topology.producer.batch.size", 80)
    with pytest.raises(ConfigError, match=r"'topology\.producer\.batch\.size' \(80\)"):
        t.validate()


def test_cross_key_error_from_a_component_override_names_the_component():
    t = Topology(
        "t",
        config={"topology.executor.receive.buffer.size": 100, "topology.producer.batch.size": 50},
    )
    t.set_spout("words", Words())
    t.set_bolt("count", Count()).add_configuration("topology.producer.batch.size", 80)
    with pytest.raises(ConfigError, match=r"component 'count'"):
        t.validate()


# -- application keys, scopes and per-component queues
class Configured(Bolt):
    component_config = {"app.class.key": [1, 2], "fake.config": "from the class"}

    def execute(self, tup):
        pass


def test_application_keys_are_kept_at_topology_and_component_level():
    t = Topology("wc", config={"fake.config": 123, "app.url": "http://x"})
    t.set_spout("words", Words())
    t.set_bolt("count", Count()).shuffle_grouping("words").add_configuration("app.only", 1)
    t.set_bolt("conf", Configured()).shuffle_grouping("words")
    conf = t.validate({"app.cli": True})
    assert conf["fake.config"] == 123 and conf["app.url"] == "http://x" and conf["app.cli"]
    assert t.components["count"].config == {"app.only": 1}
    assert t.components["conf"].config == {"app.class.key": [1, 2], "fake.config": "from the class"}


def test_an_undeclared_key_in_a_stormish_namespace_is_still_refused_with_a_hint():
    with pytest.raises(
        ConfigError, match=r"unknown config key 'topology\.foo' \(in topology 'wc'\)"
    ):
        Topology("wc", config={"topology.foo": 1})
    with pytest.raises(ConfigError, match=r"did you mean 'topology\.max\.spout\.pending'"):
        base().set_bolt("c", Count()).add_configuration("topology.max.spout.pendng", 1)


def test_an_application_value_that_cannot_be_pickled_is_named_at_validate():
    t = Topology("wc", config={"app.lock": threading.Lock()})
    t.set_spout("words", Words())
    with pytest.raises(ConfigError, match=r"'app\.lock' \(in topology 'wc'\) cannot be pickled"):
        t.validate()
    t = base()
    t.set_bolt("c", Count()).shuffle_grouping("words").add_configuration(
        "app.lock", threading.Lock()
    )
    with pytest.raises(ConfigError, match=r"'app\.lock' \(in component 'c' of topology 'wc'\)"):
        t.validate()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("topology.workers", 2),
        ("topology.message.timeout.secs", 5),
        ("topology.acker.executors", 0),
    ],
)
def test_a_worker_level_key_set_per_component_is_refused_naming_key_component_topology(key, value):
    d = base().set_bolt("count", Count())
    with pytest.raises(ConfigError) as exc:
        d.add_configuration(key, value)
    msg = str(exc.value)
    assert f"config key {key!r} (in component 'count' of topology 'wc')" in msg
    assert "cannot be set per component" in msg

    class Attr(Bolt):
        component_config = {key: value}

        def execute(self, tup):
            pass

    with pytest.raises(ConfigError, match=r"in component 'a' of topology 'wc'"):
        base().set_bolt("a", Attr())


def test_a_daemon_key_in_a_topology_is_refused():
    with pytest.raises(ConfigError, match=r"'nimbus\.task\.timeout\.secs' \(in topology 'wc'\)"):
        Topology("wc", config={"nimbus.task.timeout.secs": 5})
    with pytest.raises(ConfigError, match=r"configures the supervisor daemon"):
        base().validate({"supervisor.worker.timeout.secs": 5})


def test_storm_s_receive_buffer_of_64_is_accepted_with_an_unset_batch():
    t = Topology("wc", config={"topology.executor.receive.buffer.size": 64})
    t.set_spout("words", Words())
    t.set_bolt("count", Count()).shuffle_grouping("words")
    assert t.validate()["topology.executor.receive.buffer.size"] == 64
    t = base()
    small = t.set_bolt("count", Count()).shuffle_grouping("words")
    small.add_configuration("topology.executor.receive.buffer.size", 64)
    t.validate()


def test_an_explicit_topology_batch_over_half_a_component_s_queue_is_an_error():
    t = Topology("wc", config={"topology.producer.batch.size": 100})
    t.set_spout("words", Words())
    small = t.set_bolt("count", Count()).shuffle_grouping("words")
    small.add_configuration("topology.executor.receive.buffer.size", 64)
    with pytest.raises(ConfigError) as exc:
        t.validate()
    msg = str(exc.value)
    assert "'topology.producer.batch.size' (100)" in msg
    assert "'topology.executor.receive.buffer.size' (64)" in msg
    assert "component 'count' of topology 'wc'" in msg


def test_an_explicit_producer_batch_over_half_a_consumer_s_queue_is_an_error():
    t = Topology("wc")
    t.set_spout("words", Words()).add_configuration("topology.producer.batch.size", 100)
    t.set_bolt("count", Count()).shuffle_grouping("words").add_configuration(
        "topology.executor.receive.buffer.size", 64
    )
    with pytest.raises(ConfigError) as exc:
        t.validate()
    msg = str(exc.value)
    assert "'topology.producer.batch.size' (100) of component 'words'" in msg
    assert "'topology.executor.receive.buffer.size' (64) of component 'count'" in msg
    assert "topology 'wc'" in msg


def test_outputs_given_as_a_string_is_refused_naming_the_component():
    """outputs = "word" declared the fields w, o, r, d: emits of one value then failed
    their arity check far from the cause (found by a bug hunt)."""
    from stormish import BasicBolt

    class One(BasicBolt):
        outputs = "word"

        def execute(self, tup):
            pass

    class Streams(BasicBolt):
        streams = {"default": ["a"], "side": "b"}

        def execute(self, tup):
            pass

    t = Topology("t")
    with pytest.raises(
        TopologyError,
        match=r"component 'b': fields are a list of names, got "
        r"the string 'word': write \['word'\]",
    ):
        t.set_bolt("b", One())
    with pytest.raises(TopologyError, match="component 's': .* got the string 'b'"):
        t.set_bolt("s", Streams())
