"""Topologies: a named graph of spouts and bolts, checked when built and again at submit.

A topology is plain data (component objects, parallelism, subscriptions, config). It is
checked as it is built so an author sees a mistake on the line that made it, with the
component, stream or field named; `validate()` repeats the whole-graph checks (streams
that must exist, fields, picklability) once the graph is complete.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

from . import config as _config
from . import pickling
from .component import DEFAULT_STREAM, Bolt, Component, Spout
from .edges import EdgeOptions, EdgePolicy, make_policy, policies_from_config
from .errors import ConfigError, TopologyError
from .methods import check_defined, check_methods, def_at, warn_returned_values
from .names import check_name
from .sources import in_package
from .tuple import DEAD_LETTER_FIELDS, DEAD_LETTER_STREAM

NAME_KEY = "topology.name"  # Storm's: the topology's name, in every component's conf

GROUPINGS = (
    "shuffle",
    "fields",
    "all",
    "global",
    "direct",
    "local_or_shuffle",
    "none",
    "partial_key",
    "custom",
    "lanes",
)


@dataclass(frozen=True)
class Subscription:
    """A bolt reads `stream` of `source` through `grouping` (fields for fields-like ones)."""

    source: str
    stream: str
    grouping: str
    fields: tuple[str, ...] = ()
    custom: Any = None  # custom grouping: the callable or object with choose_tasks()
    policy: EdgePolicy | None = None  # None: Storm's edge (the task's queue, backpressure)
    lanes: LaneSpec | None = None  # ordered_lanes: how many lanes, how many in flight
    # the user's file:line that declared it, for errors found only at validate (an
    # unknown source may be declared later): "" when not known
    defined_at: str = field(default="", compare=False)


@dataclass(frozen=True)
class LaneSpec:
    """An `ordered_lanes` edge's shape: keys hash to `lanes` lanes; at each task fewer
    than `max_in_flight` of its tuples are taken and not yet settled."""

    lanes: int
    max_in_flight: int


@dataclass
class ComponentSpec:
    name: str
    obj: Component
    parallelism: int
    is_spout: bool
    subscriptions: list[Subscription] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def streams(self) -> dict[str, tuple[str, ...]]:
        return self.obj.declared_streams()


class Declarer:
    """Returned by set_spout/set_bolt; adds groupings and per-component config.

    Every grouping takes the edge's channel policy as keyword options: `overflow`
    ('block', 'drop_oldest', 'drop_newest', 'latest', 'fail'), `capacity`, `lifespan_ms`,
    `deadline_ms` (stormish.edges, docs/edges.md)."""

    def __init__(self, topology: Topology, spec: ComponentSpec):
        self._topology = topology
        self._spec = spec

    def _add(
        self,
        source: str,
        grouping: str,
        stream: str,
        fields: Sequence[str] = (),
        custom: Any = None,
        edge: EdgeOptions | None = None,
        lanes: LaneSpec | None = None,
    ) -> Declarer:
        if self._spec.is_spout:
            raise TopologyError(f"spout {self._spec.name!r} cannot subscribe to streams")
        if isinstance(fields, str):
            fields = [fields]
        where = (
            f"component {self._spec.name!r}: {grouping} grouping on {source!r} stream {stream!r}"
        )
        policy = make_policy(where, **(edge or {}))
        if policy is not None and policy.readers == "multi" and grouping != "all":
            raise TopologyError(
                f"{where}: readers='multi' is one edge read by every task of the bolt, each "
                "with its own cursor: subscribe with all_grouping"
            )
        sub = Subscription(
            source, stream, grouping, tuple(fields), custom, policy, lanes, _user_line()
        )
        self._topology._check_subscription(self._spec.name, sub)
        self._spec.subscriptions.append(sub)
        return self

    def shuffle_grouping(
        self, component: str, stream: str = DEFAULT_STREAM, **edge: Unpack[EdgeOptions]
    ) -> Declarer:
        """Spread tuples over the bolt's tasks, locality-aware and load-aware (Storm 2):
        the tasks in the emitter's worker while they keep up, every task when they are
        backpressured (docs/workers.md, "Shuffles and locality")."""
        return self._add(component, "shuffle", stream, edge=edge)

    def local_or_shuffle_grouping(
        self, component: str, stream: str = DEFAULT_STREAM, **edge: Unpack[EdgeOptions]
    ) -> Declarer:
        """Storm's: only the bolt's tasks in the emitter's worker if it has any (never
        spilling to other workers, however loaded), else all of them."""
        return self._add(component, "local_or_shuffle", stream, edge=edge)

    def fields_grouping(
        self,
        component: str,
        fields: Sequence[str],
        stream: str = DEFAULT_STREAM,
        **edge: Unpack[EdgeOptions],
    ) -> Declarer:
        if not fields:
            raise TopologyError(
                f"fields_grouping of {self._spec.name!r} on {component!r} needs at least one field"
            )
        return self._add(component, "fields", stream, fields, edge=edge)

    def ordered_lanes(
        self,
        component: str,
        key: Sequence[str],
        lanes: int = 64,
        max_in_flight: int = 1000,
        stream: str = DEFAULT_STREAM,
    ) -> Declarer:
        """Tuples with the same `key` are executed strictly in order, different keys in
        parallel: each key hashes to one of `lanes` lanes, the lanes are spread over this
        bolt's tasks. `max_in_flight`: at each task, tuples of this edge taken and not
        yet settled (acked, failed or dead-lettered) stay below it; past it the edge
        takes no more and its senders are held back (backpressure), not buffered. A bolt
        with `batch_size` gets each lane's tuples in batches of their own
        (docs/edges.md)."""
        where = f"component {self._spec.name!r}: ordered_lanes on {component!r} stream {stream!r}"
        if isinstance(key, str):
            key = [key]
        if not key:
            raise TopologyError(f"{where} needs at least one key field")
        for name, v in (("lanes", lanes), ("max_in_flight", max_in_flight)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise TopologyError(f"{where}: {name}={v!r} must be an integer >= 1")
        return self._add(component, "lanes", stream, key, lanes=LaneSpec(lanes, max_in_flight))

    def partial_key_grouping(
        self,
        component: str,
        fields: Sequence[str],
        stream: str = DEFAULT_STREAM,
        **edge: Unpack[EdgeOptions],
    ) -> Declarer:
        return self._add(component, "partial_key", stream, fields, edge=edge)

    def all_grouping(
        self, component: str, stream: str = DEFAULT_STREAM, **edge: Unpack[EdgeOptions]
    ) -> Declarer:
        return self._add(component, "all", stream, edge=edge)

    def global_grouping(
        self, component: str, stream: str = DEFAULT_STREAM, **edge: Unpack[EdgeOptions]
    ) -> Declarer:
        return self._add(component, "global", stream, edge=edge)

    def direct_grouping(
        self, component: str, stream: str = DEFAULT_STREAM, **edge: Unpack[EdgeOptions]
    ) -> Declarer:
        return self._add(component, "direct", stream, edge=edge)

    def none_grouping(
        self, component: str, stream: str = DEFAULT_STREAM, **edge: Unpack[EdgeOptions]
    ) -> Declarer:
        """No routing wanted: as `shuffle_grouping`."""
        return self._add(component, "none", stream, edge=edge)

    def dead_letter_grouping(
        self, component: str, fields: Sequence[str] | None = None, **edge: Unpack[EdgeOptions]
    ) -> Declarer:
        """Subscribe to spout `component`'s dead letters: its trees that failed
        `topology.max.replays` times, one tuple each with the fields msg_id, stream,
        values, component (that failed it), error and failures. Shuffled across this
        bolt's tasks, or grouped by `fields` of those."""
        if fields:
            return self._add(component, "fields", DEAD_LETTER_STREAM, fields, edge=edge)
        return self._add(component, "shuffle", DEAD_LETTER_STREAM, edge=edge)

    def custom_grouping(
        self,
        component: str,
        grouping: Callable[..., Any],
        stream: str = DEFAULT_STREAM,
        **edge: Unpack[EdgeOptions],
    ) -> Declarer:
        """`grouping` is a callable `(values, n_tasks) -> index or list of indices`, or an
        object with `prepare(target_tasks)` and `choose_tasks(values) -> list of tasks`."""
        if not (callable(grouping) or hasattr(grouping, "choose_tasks")):
            raise TopologyError(
                f"custom_grouping of {self._spec.name!r} on {component!r}: the grouping must "
                "be callable or have choose_tasks()"
            )
        return self._add(component, "custom", stream, (), grouping, edge=edge)

    def add_configuration(self, key: str, value: Any) -> Declarer:
        """A config key for this component only (wins over the topology's): a key of
        scope `component`, or the application's own key, passed to open()/prepare()."""
        _config.check_value(key, value, self._topology._where(self._spec.name), "component")
        self._spec.config[key] = value
        return self

    def set_tick_frequency(self, seconds: float) -> Declarer:
        return self.add_configuration("topology.tick.tuple.freq.secs", seconds)


_Declarer = Declarer  # the name it had before it was public


class Topology:
    """The graph and its config. `config` keys are validated as given (errors name them)."""

    def __init__(self, name: str, config: Mapping[str, Any] | None = None):
        self.name = check_name(name, "topology name")
        self.config: dict[str, Any] = {}
        for k, v in (config or {}).items():
            _config.check_value(k, v, f"topology {name!r}", "topology")
            self.config[k] = v
        self.components: dict[str, ComponentSpec] = {}

    def _where(self, component: str) -> str:
        return f"component {component!r} of topology {self.name!r}"

    # -- building -------------------------------------------------------------------
    def set_spout(self, name: str, spout: Spout, parallelism: int = 1) -> Declarer:
        if not isinstance(spout, Spout):
            raise TopologyError(_not_an_instance(name, "set_spout", Spout, spout))
        return self._set(name, spout, parallelism, True)

    def set_bolt(self, name: str, bolt: Bolt, parallelism: int = 1) -> Declarer:
        if not isinstance(bolt, Bolt):
            raise TopologyError(_not_an_instance(name, "set_bolt", Bolt, bolt))
        return self._set(name, bolt, parallelism, False)

    def _set(self, name: str, obj: Component, parallelism: int, is_spout: bool) -> Declarer:
        check_name(name, "component id")
        if name.startswith("__"):
            raise TopologyError(
                f"component id {name!r} may not start with '__' (reserved for system components)"
            )
        if name in self.components:
            raise TopologyError(f"duplicate component id {name!r} in topology {self.name!r}")
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise TopologyError(
                f"component {name!r}: parallelism must be an integer >= 1, got {parallelism!r}"
            )
        try:
            streams = obj.declared_streams()
        except TopologyError as exc:  # outputs = "word"
            raise TopologyError(f"component {name!r}: {exc}") from None
        for stream, fields in streams.items():
            if len(set(fields)) != len(fields):
                raise TopologyError(
                    f"component {name!r} stream {stream!r} declares a field twice: {fields}"
                )
            if stream.startswith("__"):
                raise TopologyError(
                    f"component {name!r}: stream {stream!r} is reserved (starts with '__')"
                )
        if not is_spout:
            _check_settle(name, obj)
            _check_holds_work(name, obj)
        check_methods(name, obj, is_spout)
        warn_returned_values(name, obj, is_spout)
        own = obj.component_config or {}
        if not isinstance(own, Mapping):
            raise ConfigError(
                f"{self._where(name)}: component_config must be a mapping of config keys "
                f"to values (a dict), got {type(own).__name__} {own!r:.80}"
            )
        comp_conf = dict(own)
        for k, v in comp_conf.items():
            _config.check_value(k, v, self._where(name), "component")
        spec = ComponentSpec(name, obj, parallelism, is_spout, config=comp_conf)
        self.components[name] = spec
        return Declarer(self, spec)

    def _check_subscription(self, bolt: str, sub: Subscription) -> None:
        """Checks that need only what is known now; the source may be declared later."""
        if sub.source in self.components:
            self._check_source_stream(bolt, sub)

    def _check_source_stream(self, bolt: str, sub: Subscription) -> None:
        src = self.components.get(sub.source)
        at = f" (at {sub.defined_at})" if sub.defined_at else ""
        if src is None:
            import difflib

            close = difflib.get_close_matches(sub.source, list(self.components), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TopologyError(
                f"component {bolt!r} subscribes to unknown component {sub.source!r}{hint}; "
                f"known: {sorted(self.components)}{at}"
            )
        streams = src.streams
        if sub.stream == DEAD_LETTER_STREAM:
            # a spout's: trees past topology.max.replays; a bolt's: DEAD_LETTER results
            streams = {DEAD_LETTER_STREAM: DEAD_LETTER_FIELDS}
        if sub.stream not in streams:
            raise TopologyError(
                f"component {bolt!r} subscribes to stream {sub.stream!r} of {sub.source!r}, "
                f"which declares only {sorted(streams) or 'no streams'}{at}"
            )
        missing = [f for f in sub.fields if f not in streams[sub.stream]]
        if missing:
            raise TopologyError(
                f"component {bolt!r}: {sub.grouping} grouping on {sub.source!r} stream "
                f"{sub.stream!r} names unknown field(s) {missing}; the stream's fields are "
                f"{list(streams[sub.stream])}{at}"
            )

    # -- whole-graph checks ---------------------------------------------------------------
    def validate(self, extra_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Check the complete graph and return the resolved config (errors name the place).
        The name again: a topology that came off the wire was not built by `__init__`."""
        check_name(self.name, "topology name")
        if not any(c.is_spout for c in self.components.values()):
            raise TopologyError(f"topology {self.name!r} has no spout")
        for spec in self.components.values():
            for sub in spec.subscriptions:
                self._check_source_stream(spec.name, sub)
        where = f"topology {self.name!r}"
        extra = dict(extra_config or {})
        if extra.get(NAME_KEY) == self.name:  # a resolved conf given again (nimbus's lint)
            del extra[NAME_KEY]
        conf = _config.resolve(self.config, extra, where=where, level="topology")
        # Storm's topology.name: in the conf every open()/prepare() receives (set here,
        # never by the user: check_value refuses it in any layer)
        conf[NAME_KEY] = self.name
        check_config_picklable(conf, where)
        owns = {
            name: _config.for_component(conf, spec.config, where=self._where(name))
            for name, spec in self.components.items()
        }
        _warn(_config.advice(conf), where)
        for name, spec in self.components.items():
            _warn(_config.advice(conf, spec.config), self._where(name))
        queues = {}
        for spec in self.components.values():
            own = owns[spec.name]
            queues[spec.name] = own[_config.QUEUE]
            check_config_picklable(spec.config, self._where(spec.name))
            _check_in_topology(spec, self._as_fed(spec.name, own, owns), self.components)
            check_picklable(spec.name, spec.obj)
        for spec in self.components.values():
            check_defined(spec.name, spec.obj, spec.is_spout)
        self._check_edge_batches(conf, queues)
        self.edge_policies(conf)
        return conf

    def _as_fed(
        self, name: str, own: dict[str, Any], owns: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Any]:
        """A bolt's config as its inputs bound it: `topology.max.spout.pending` is the
        spouts' (a spout's own setting, Storm's component config, is what limits it),
        the largest of those upstream of the bolt (None if one has no limit)."""
        key = "topology.max.spout.pending"
        spouts = self._upstream_spouts(name)
        if not spouts or not hasattr(self.components[name].obj, "check_in_topology"):
            return own
        limits = [owns[s].get(key) for s in spouts]
        most = None if None in limits else max(int(v) for v in limits if v is not None)
        return dict(own, **{key: most})

    def _upstream_spouts(self, name: str) -> set[str]:
        seen, todo, spouts = {name}, [name], set[str]()
        while todo:
            for sub in self.components[todo.pop()].subscriptions:
                src = self.components.get(sub.source)
                if src is None or sub.source in seen:
                    continue
                seen.add(sub.source)
                (spouts.add if src.is_spout else todo.append)(sub.source)
        return spouts

    def unfed_bolts(self, conf: Mapping[str, Any]) -> list[str]:
        """Bolts subscribed to no stream and given no tick tuples: valid (Storm runs
        them), but they never execute, which is a forgotten grouping far more often than
        a wish. `conf`: the resolved config (`validate`'s)."""
        tick = "topology.tick.tuple.freq.secs"
        return sorted(
            spec.name
            for spec in self.components.values()
            if not spec.is_spout
            and not spec.subscriptions
            and not (spec.config or {}).get(tick, conf.get(tick))
        )

    def edge_policies(self, conf: Mapping[str, Any]) -> dict[tuple[str, str, str], EdgePolicy]:
        """Every edge with a policy, {(bolt, source, stream): policy}: the groupings' own,
        overridden by `topology.edge.policies` (a topology file plus config); an entry
        naming an edge the topology does not have is an error naming it."""
        out = {
            (spec.name, sub.source, sub.stream): sub.policy
            for spec in self.components.values()
            for sub in spec.subscriptions
            if sub.policy is not None
        }
        key = "topology.edge.policies"
        given = conf.get(key)
        if not given:
            return out
        for (bolt, source, stream), options in policies_from_config(given, key).items():
            spec = self.components.get(bolt)
            if spec is None or not any(
                s.source == source and s.stream == stream for s in spec.subscriptions
            ):
                edges = sorted(
                    f"{c.name} <- {s.source}:{s.stream}"
                    for c in self.components.values()
                    for s in c.subscriptions
                )
                raise ConfigError(
                    f"config key {key!r}: topology {self.name!r} has no edge "
                    f"'{bolt} <- {source}:{stream}'; its edges: {edges}"
                )
            where = f"config key {key!r}, edge '{bolt} <- {source}:{stream}'"
            policy = make_policy(where, **options)
            grouping = next(
                s.grouping for s in spec.subscriptions if s.source == source and s.stream == stream
            )
            if policy is not None and policy.readers == "multi" and grouping != "all":
                raise ConfigError(
                    f"{where}: readers='multi' needs the edge's grouping to be all_grouping, "
                    f"not {grouping}"
                )
            if policy is None:
                out.pop((bolt, source, stream), None)
            else:
                out[(bolt, source, stream)] = policy
        return out

    def _check_edge_batches(self, conf: Mapping[str, Any], queues: Mapping[str, int]) -> None:
        """A producer batch set explicitly must fit twice in every receive queue it is
        published to, not only its own component's (an unset one follows them)."""
        for spec in self.components.values():
            for sub in spec.subscriptions:
                batch = self.components[sub.source].config.get(_config.BATCH, conf[_config.BATCH])
                cap = queues[spec.name]
                if batch is not None and batch > cap // 2:
                    raise ConfigError(
                        f"config key {_config.BATCH!r} ({batch}) of component {sub.source!r} "
                        f"must be at most half of {_config.QUEUE!r} ({cap}) of component "
                        f"{spec.name!r}, which it publishes to (topology {self.name!r})"
                    )

    def consumers(self, component: str, stream: str) -> list[tuple[str, Subscription]]:
        return consumers_of(self.components, component, stream)

    def __repr__(self) -> str:
        parts = ", ".join(f"{c.name}x{c.parallelism}" for c in self.components.values())
        return f"Topology({self.name!r}: {parts})"


def _warn(lines: list[str], where: str) -> None:
    """Log each of `lines` once per process: validate runs more than once per submit
    (the CLI's early check, then the run), and one warning is enough."""
    import logging

    for line in lines:
        text = f"{where}: {line}"
        if text not in _WARNED:
            _WARNED.add(text)
            logging.getLogger("stormish.config").warning("%s", text)


_WARNED: set[str] = set()


def consumers_of(
    components: Mapping[str, ComponentSpec], component: str, stream: str
) -> list[tuple[str, Subscription]]:
    """Who subscribes to `stream` of `component`, with which subscription."""
    return [
        (spec.name, sub)
        for spec in components.values()
        for sub in spec.subscriptions
        if sub.source == component and sub.stream == stream
    ]


def _check_in_topology(
    spec: ComponentSpec, conf: Mapping[str, Any], components: Mapping[str, ComponentSpec]
) -> None:
    """A component that needs the whole topology to check itself (a windowed bolt: its
    window against the message timeout, the input streams its watermark waits for, and
    the fields it reads of them) defines `check_in_topology(name, conf, inputs, fields)`;
    it runs at every submit. `fields`: each input (source, stream)'s declared fields."""
    hook = getattr(spec.obj, "check_in_topology", None)
    if hook is None:
        return
    inputs = [(s.source, s.stream) for s in spec.subscriptions]
    fields = {}
    for src, stream in inputs:
        if stream == DEAD_LETTER_STREAM:
            fields[(src, stream)] = tuple(DEAD_LETTER_FIELDS)
        elif src in components:
            fields[(src, stream)] = tuple(components[src].streams.get(stream, ()))
    hook(spec.name, conf, inputs, fields)


def check_config_picklable(conf: Mapping[str, Any], where: str) -> None:
    """Config travels to worker processes with the topology: an application's value
    that cannot be pickled is named here, not in a worker's log."""

    for k, v in conf.items():
        if k in _config.KEYS:
            continue
        try:
            pickling.dumps(v)
        except Exception as exc:  # noqa: BLE001 - any pickling failure is the user's to see
            raise ConfigError(
                f"config key {k!r} (in {where}) cannot be pickled to worker processes: "
                f"{type(v).__name__} fails with {type(exc).__name__}: {exc}"
            ) from exc


def check_picklable(name: str, obj: Any) -> None:
    """Components travel to workers with cloudpickle; name the attribute that cannot."""

    try:
        pickling.dumps(obj)
        return
    except Exception as exc:  # noqa: BLE001 - any pickling failure is the user's to see
        top_error = exc
    for attr, value in vars(obj).items():
        try:
            pickling.dumps(value)
        except Exception as exc:  # noqa: BLE001
            raise TopologyError(
                f"component {name!r} cannot be pickled: attribute {attr!r} "
                f"({type(value).__name__}) fails with {type(exc).__name__}: {exc}. Create it "
                "in open()/prepare() instead of __init__"
            ) from exc
    found = pickling.unpicklable_global(obj)
    if found is not None:
        raise TopologyError(_unpicklable_global(name, obj, found)) from found.error
    raise TopologyError(
        f"component {name!r} cannot be pickled: {type(top_error).__name__}: {top_error}"
    ) from top_error


def _unpicklable_global(name: str, obj: Any, found: pickling.Unpicklable) -> str:
    first, *through = found.path
    via = "".join(f", through {f.__qualname__}{def_at(f)}," for f in through)
    kind = type(found.value)
    made_in = "open()" if isinstance(obj, Spout) else "prepare()"
    return (
        f"component {name!r} cannot be pickled: {first.__qualname__}{def_at(first)}{via} "
        f"uses the module-level global {found.name!r} ({kind.__module__}.{kind.__qualname__}), "
        f"which fails with {type(found.error).__name__}: {found.error}. A component goes to "
        f"each worker pickled, with the globals its code uses: create it in {made_in} "
        f"(self.{found.name.lower()} = ...), where each task makes its own"
    )


def _check_holds_work(name: str, bolt: Any) -> None:
    """holds_work is asked after on_turn only: defined alone it would never be asked,
    and the run it was written to keep open would end without it."""
    cls = type(bolt)
    if (
        getattr(cls, "holds_work", Bolt.holds_work) is not Bolt.holds_work
        and getattr(cls, "on_turn", Bolt.on_turn) is Bolt.on_turn
    ):
        raise TopologyError(
            f"component {name!r} defines holds_work but not on_turn: the runtime asks "
            "holds_work after each on_turn, where the work it owes is emitted "
            "(Bolt.holds_work)"
        )


def _check_settle(name: str, bolt: Any) -> None:
    """A batch-settle bolt's settings, named at set_bolt (stormish.settle)."""
    size, wait = getattr(bolt, "batch_size", None), getattr(bolt, "batch_max_wait_ms", None)
    if size is None:
        if wait is not None:
            raise TopologyError(
                f"component {name!r}: batch_max_wait_ms={wait!r} without batch_size: set "
                "batch_size too (batch settle)"
            )
        return
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise TopologyError(f"component {name!r}: batch_size={size!r} must be an integer >= 1")
    if wait is not None and (
        isinstance(wait, bool) or not isinstance(wait, int | float) or wait <= 0
    ):
        raise TopologyError(
            f"component {name!r}: batch_max_wait_ms={wait!r} must be a number of milliseconds > 0"
        )
    if type(bolt).execute_batch is Bolt.execute_batch:
        raise TopologyError(
            f"component {name!r} sets batch_size={size} but does not define "
            "execute_batch(self, batch) -> list of results (stormish.settle)"
        )


def _user_line() -> str:
    """The file:line of the user's code that called into stormish here (the first frame
    outside the package), or "" when that is not user code (the standard library, an
    installed package: a topology stormish built from a Flux file, say)."""
    import sysconfig

    frame: Any = sys._getframe(1)
    while frame is not None and in_package(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return ""
    name = os.path.abspath(frame.f_code.co_filename)
    paths = sysconfig.get_paths()
    if name.startswith("<") or any(
        name.startswith(os.path.abspath(paths[k]) + os.sep) for k in ("stdlib", "purelib")
    ):
        return ""
    return f"{name}:{frame.f_lineno}"


def _not_an_instance(name: str, call: str, kind: type, given: Any) -> str:
    """A class where an instance is wanted (`set_bolt("p", P)`) said as such."""
    if isinstance(given, type):
        return (
            f"component {name!r}: {call} needs a {kind.__name__} instance, got the class "
            f"{given.__name__}: pass {given.__name__}() (with its arguments)"
        )
    got = type(given).__name__
    return f"component {name!r}: {call} needs a {kind.__name__} instance, got {got}"
