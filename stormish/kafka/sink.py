"""KafkaSink: a bolt that produces each input tuple to Kafka and settles it on the
producer's delivery report.

The rule: a tuple is acked only when the broker has the record (the delivery report
without an error; with `transactional_id`, when its transaction commits), and failed
with the reason when it cannot be delivered, so an at-least-once spout upstream replays
exactly what did not reach Kafka. The producer batches by its own `linger.ms`; the sink
never waits on it inside a turn: delivery reports are served by `producer.poll(0)` at
the start of every turn of the bolt loop (`Bolt.on_turn`), and when the producer's
local queue is full (BufferError) the tuple is held, in order, and the bolt takes no
more input until the queue has room: its receive queue fills and the engine's
backpressure holds its upstream. `cleanup` flushes what is still queued.

How a batch settles without a Python call per record (no transaction): the sink takes
each received batch whole (`execute_batch`) and produces its records with one delivery
callback object for the whole batch (a `_Settle`). The producer runs with
`delivery.report.only.error`, so confluent-kafka calls it only for a record that failed
(it notes the record and the reason); for a delivered record it only drops the
reference its record held. When every record of the batch has its report, the `_Settle`
has no reference left and is freed at once (CPython's reference counting, on the thread
serving `poll`): its `__del__` queues what it noted, and the same turn acks the batch's
tuples with one `ack_batch`, or, where a record failed, fails that record's tuple with
the reason and acks the others. A tuple whose record could not be produced at all (it
does not serialize, or the producer refuses it) is failed at once, left out of the ack.

confluent-kafka is imported when a task prepares, never at import time, so a topology
file can name KafkaSink on a machine without the client (`pip install 'stormish[kafka]'`).
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from ..component import Bolt
from ..tuple import TICK_STREAM, TrackedTuple, Tuple, TupleBatch
from .producer import MEMORY, open_producer
from .txn import Transaction

# `enable.idempotence`: the producer's retries never reorder or duplicate a partition's
# records (the order of each key is kept); a user's producer_config may turn it off.
# `linger.ms` 1 (librdkafka's default is 5): a tuple is acked on its delivery report, so
# the linger is part of every tree's complete latency, and `topology.max.spout.pending`
# trees per latency is the most a reliable topology can run (1,000 trees at 5 ms of
# linger: ~13 ms a tree, ~70,000 records/s one tree a record; at 1 ms, ~100,000+/s with
# no more CPU). Storm's KafkaBolt ran the Java producer at its linger 0 of that time; the
# producer still batches what arrives while a request is out.
# `delivery.report.only.error` (without a transaction): a delivered record costs no
# Python call (module doc); a user may turn it off, the sink then ignores the reports
# without an error and settles the same way.
PRODUCER_DEFAULTS: dict[str, Any] = {"enable.idempotence": True, "linger.ms": 1}
ONLY_ERRORS: dict[str, Any] = {"delivery.report.only.error": True}


def confluent_kafka() -> Any:
    """The client module, or an ImportError saying which extra installs it."""
    try:
        import confluent_kafka as ck
    except ImportError as exc:
        raise ImportError(
            "stormish.kafka needs confluent-kafka: pip install 'stormish[kafka]'"
        ) from exc
    return ck


def to_bytes(value: Any) -> Any:
    """The default serializer: bytes and str go as they are (str as UTF-8), None stays
    None (a tombstone), numbers as their decimal text, anything else as compact JSON."""
    if value is None or isinstance(value, bytes | str):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


class KafkaSink(Bolt):
    """Produce each input tuple's `value_field` (serialized by `serializer`, default
    `to_bytes`) to `topic`, or to the topic named by the tuple's `topic_field`, keyed by
    `key_field` when given. `producer_config` is passed to confluent-kafka's Producer
    (`linger.ms`, `queue.buffering.max.messages`, ...). With `transactional_id` the
    records go out in transactions of at most `transaction_max_records` records or
    `transaction_max_ms` milliseconds; a transaction's tuples are acked when it commits
    and failed when it aborts. Declares no output stream."""

    outputs = None

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str | None = None,
        *,
        topic_field: str | None = None,
        key_field: str | None = None,
        value_field: str = "value",
        serializer: Callable[[Any], Any] | None = None,
        producer_config: Mapping[str, Any] | None = None,
        transactional_id: str | None = None,
        transaction_max_records: int = 10_000,
        transaction_max_ms: float = 100.0,
        flush_timeout_secs: float = 30.0,
    ):
        _check_args(
            bootstrap_servers, topic, topic_field, producer_config, serializer, transactional_id
        )
        _check_number("transaction_max_records", transaction_max_records, integer=True)
        _check_number("transaction_max_ms", transaction_max_ms)
        _check_number("flush_timeout_secs", flush_timeout_secs)
        self.bootstrap_servers = bootstrap_servers
        self.topic, self.topic_field = topic, topic_field
        self.key_field, self.value_field = key_field, value_field
        self.serializer = serializer
        self.producer_config = dict(producer_config or {})
        self.transactional_id = transactional_id
        self.transaction_max_records = transaction_max_records
        self.transaction_max_ms = float(transaction_max_ms)
        self.flush_timeout_secs = float(flush_timeout_secs)

    # -- lifecycle ----------------------------------------------------------------------------
    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        memory = self.bootstrap_servers.startswith(MEMORY)
        ck = None if memory else confluent_kafka()
        self._kafka_exception = _NeverRaised if ck is None else ck.KafkaException
        comp = context.get_this_component_id() if context is not None else "KafkaSink"
        task = context.get_this_task_id() if context is not None else 0
        self._name = f"KafkaSink {comp!r} task {task}"
        config = {**PRODUCER_DEFAULTS, **self.producer_config}
        if self.transactional_id is None:
            config = {**ONLY_ERRORS, **config}
        else:
            # one id per task: a restarted task fences its own zombie, never a sibling
            config["transactional.id"] = f"{self.transactional_id}-{task}"
        self._producer = open_producer(self.bootstrap_servers, config, ck)
        self._produce = self._producer.produce
        self._poll = self._producer.poll
        self._serialize = self.serializer or to_bytes
        # refused by a full queue, in input order: a Tuple (transactions) or, for a
        # received batch, [batch, index of its first row not yet produced]
        self._held: deque[Any] = deque()
        self._in_flight = 0  # produced, delivery report not yet served (transactions)
        self._open = 0  # batches produced (a _Settle each), not yet settled
        self._done: deque[tuple] = deque()  # settled by the producer: to ack or fail
        self.refused = 0  # how often the producer's full queue refused a record
        self._txn: Transaction | None = None
        if self.transactional_id is not None:
            self._txn = Transaction(
                self._producer, self._kafka_exception, self.transaction_max_records,
                self.transaction_max_ms / 1000.0, self.ack, self.fail, self._name,
                self.flush_timeout_secs,
            )  # fmt: skip
            self._txn.init(self.flush_timeout_secs)

    def cleanup(self) -> None:
        """Flush what is held and queued, up to `flush_timeout_secs` (a transaction
        still open is committed): nothing the sink took is dropped on a clean stop."""
        producer = getattr(self, "_producer", None)
        if producer is None:
            return
        deadline = time.monotonic() + self.flush_timeout_secs
        txn = self._txn
        while self._held and time.monotonic() < deadline:
            self._poll(0.05)
            self._settle()
            if txn is not None:
                # a full transaction commits before the held tuples join the next one
                # (without this turn, cleanup spun to the deadline and dropped them)
                try:
                    txn.turn()
                except RuntimeError:
                    break  # fatal (fenced): its tuples were failed; the rest below
            self._release_held()
        if txn is not None:
            txn.finish(max(0.0, deadline - time.monotonic()))
        producer.flush(max(0.0, deadline - time.monotonic()))
        self._settle()
        self._fail_held(f"{self._name}: stopped before it was produced")
        # the producer's callbacks hold this sink: let both go now (its threads and
        # sockets close with it), not at some later garbage collection
        self._producer = self._produce = self._poll = self._txn = None

    def _fail_held(self, reason: str) -> None:
        """What is still held at the end of cleanup is failed, never dropped unsettled."""
        held = self._held
        while held:
            item = held.popleft()
            if item.__class__ is list:
                batch, start = item
                for i in range(start, len(batch.values)):
                    self.fail(_row_tuple(batch, i), reason)
            else:
                self.fail(item, reason)

    # -- the input path ----------------------------------------------------------------------
    def execute(self, tup: Tuple) -> None:
        """One tuple (the runtime calls `execute_batch`): a batch of one, or into the
        transaction."""
        if self._txn is None:
            meta = tup.meta
            self.execute_batch(TupleBatch([tup.values], tup.source, [meta] if meta else None, None))
        elif self._held or not self._send(tup):
            self._held.append(tup)

    def execute_batch(self, batch: TupleBatch) -> None:
        """A received batch: produced, then settled, as one (module doc); with
        `transactional_id`, tuple by tuple into the transaction."""
        if self._txn is not None:
            for tup in batch.tracked():
                self.execute(tup)
        elif self._held:
            self._held.append([batch, 0])
        else:
            i = self._send_rows(batch, 0)
            if i < len(batch.values):
                self._held.append([batch, i])

    def on_turn(self) -> bool:
        """Serve delivery reports, settle the batches they completed, send what was held
        while the queue has room, move the transaction on; True (take no input) while
        anything is still held or a transaction is committing or aborting."""
        if self._open or self._in_flight:
            self._poll(0)
            if self._done:
                self._settle()
        if self._held:
            self._release_held()
        if self._txn is not None:
            return self._txn.turn() or bool(self._held)
        return bool(self._held)

    def _release_held(self) -> None:
        held = self._held
        while held:
            item = held[0]
            if item.__class__ is list:
                batch, start = item
                i = self._send_rows(batch, start)
                if i < len(batch.values):
                    item[1] = i
                    return
            elif not self._send(item):
                return
            held.popleft()

    def _send_rows(self, batch: TupleBatch, start: int) -> int:
        """Produce a batch's rows from `start` under one _Settle; the index of the first
        row the producer's full queue refused (the batch's length when all went)."""
        values = batch.values
        n = len(values)
        source = batch.source
        if source.stream == TICK_STREAM:  # a tick is not a record (Storm's KafkaBolt)
            return n
        index = source.index
        wanted = (self.topic_field, self.key_field, self.value_field)
        if any(f is not None and f not in index for f in wanted):
            for i in range(start, n):  # each fails with the reason its tuple gives
                tup = _row_tuple(batch, i)
                self.fail(tup, self._unserializable(tup))
            return n
        ti = None if self.topic_field is None else index[self.topic_field]
        ki = None if self.key_field is None else index[self.key_field]
        vi = index[self.value_field]
        topic = self.topic
        serialize = self._serialize
        plain = serialize is to_bytes
        produce, refused_exc = self._produce, (self._kafka_exception, TypeError, ValueError)
        settle = _Settle(self._done, batch, start)
        self._open += 1
        try:
            for i in range(start, n):
                v = values[i]
                try:
                    if ti is not None:
                        topic = v[ti]
                    key = None if ki is None else v[ki]
                    if key is not None and key.__class__ is not str and key.__class__ is not bytes:
                        key = to_bytes(key)
                    value = v[vi]
                    if not plain:
                        value = serialize(value)
                    elif value.__class__ is int:
                        value = str(value)
                    elif value.__class__ is not str and value.__class__ is not bytes:
                        value = serialize(value)
                except Exception:  # noqa: BLE001 - a bad tuple fails, the sink lives
                    settle.skip(i)
                    tup = _row_tuple(batch, i)
                    self.fail(tup, self._unserializable(tup))
                    continue
                try:
                    produce(topic, value, key, -1, settle)  # -1: the partitioner's choice
                except BufferError:
                    self.refused += 1
                    settle.end = i
                    return i
                except refused_exc as exc:
                    settle.skip(i)
                    why = f"{self._name}: produce to {topic!r} refused: {_reason(exc)}"
                    self.fail(_row_tuple(batch, i), why)
            settle.end = n
            return n
        finally:
            del settle  # from here the producer's references alone keep it

    def _unserializable(self, tup: Tuple) -> str:
        """Why a tuple's record cannot be made (the error path only)."""
        try:
            _ = self.topic if self.topic_field is None else tup[self.topic_field]
            _ = None if self.key_field is None else to_bytes(tup[self.key_field])
            self._serialize(tup[self.value_field])
        except Exception as exc:  # noqa: BLE001
            return f"{self._name}: cannot serialize: {type(exc).__name__}: {exc}"
        return f"{self._name}: cannot serialize"

    def _settle(self) -> None:
        """Ack or fail the batches whose records all have their delivery reports."""
        done = self._done
        while done:
            batch, start, end, skipped, errors = done.popleft()
            self._open -= 1
            if start == 0 and end == len(batch.values) and skipped is None and errors is None:
                self.ack_batch(batch)
                continue
            failed = self._match_errors(batch, start, end, skipped, errors) if errors else {}
            for i in range(start, end):
                if skipped is not None and i in skipped:
                    continue
                why = failed.get(i)
                if why is None:
                    self.ack(_row_tuple(batch, i))
                else:
                    self.fail(_row_tuple(batch, i), why)

    def _match_errors(
        self, batch: TupleBatch, start: int, end: int, skipped: Any, errors: list
    ) -> dict[int, str]:
        """Which rows the failed deliveries were: each to the first row not yet matched
        with its topic, key and value (rows alike in all three are one record to Kafka).
        One that matches no row fails every row of the batch: a replay too many, never a
        loss. The error path only."""
        rows: dict[tuple, list[int]] = {}
        for i in range(start, end):
            if skipped is not None and i in skipped:
                continue
            tup = _row_tuple(batch, i)
            try:
                topic = self.topic if self.topic_field is None else tup[self.topic_field]
                key = None if self.key_field is None else to_bytes(tup[self.key_field])
                value = self._serialize(tup[self.value_field])
            except Exception:  # noqa: BLE001 - produced, so it serialized then
                continue
            rows.setdefault((topic, _raw(key), _raw(value)), []).append(i)
        failed: dict[int, str] = {}
        for topic, key, value, err in errors:
            why = f"{self._name}: delivery to {topic!r} failed: {_reason(err)}"
            same = rows.get((topic, key, value))
            if same:
                failed[same.pop(0)] = why
            else:
                for i in range(start, end):
                    failed.setdefault(i, why)
        return failed

    def _send(self, tup: Tuple) -> bool:
        """Produce one tuple; False when the producer's queue is full (try again later).
        A tuple that cannot be produced at all is failed here, with the reason."""
        try:
            topic = self.topic if self.topic_field is None else tup[self.topic_field]
            key = None if self.key_field is None else to_bytes(tup[self.key_field])
            value = self._serialize(tup[self.value_field])
        except Exception as exc:  # noqa: BLE001 - a bad tuple fails, the sink lives
            if tup.is_tick:  # a tick tuple (topology.tick.tuple.freq.secs) is not a record
                return True
            self.fail(tup, f"{self._name}: cannot serialize: {type(exc).__name__}: {exc}")
            return True
        txn = self._txn
        if txn is not None and not txn.open_for(tup):
            return False
        try:
            self._produce(topic, value, key, on_delivery=partial(self._delivered, tup))
        except BufferError:
            self.refused += 1
            if txn is not None:
                txn.unadd()
            return False
        except (self._kafka_exception, TypeError, ValueError) as exc:
            if txn is not None:
                txn.unadd()
            self.fail(tup, f"{self._name}: produce to {topic!r} refused: {_reason(exc)}")
            return True
        self._in_flight += 1
        return True

    def _delivered(self, tup: Tuple, err: Any, msg: Any) -> None:
        """The delivery report (served by poll, on the task's thread)."""
        self._in_flight -= 1
        if self._txn is not None:  # settled when the transaction ends
            if err is not None:
                self._txn.broken(self._delivery_error(err, msg))
        elif err is None:
            self.ack(tup)
        else:
            self.fail(tup, self._delivery_error(err, msg))

    def _delivery_error(self, err: Any, msg: Any) -> str:
        return f"{self._name}: delivery to {msg.topic()!r} failed: {_reason(err)}"


class _Settle:
    """One produced batch's delivery callback (module doc). Called only for a record
    whose delivery failed (`delivery.report.only.error`); freed when the producer drops
    the reference of its last record, when `__del__` hands the batch, its rows [start,
    end), the rows left out and the failed deliveries to the sink's queue."""

    __slots__ = ("done", "batch", "start", "end", "skipped", "errors")

    def __init__(self, done: deque[tuple], batch: TupleBatch, start: int):
        self.done, self.batch, self.start, self.end = done, batch, start, start
        self.skipped: set[int] | None = None
        self.errors: list[tuple] | None = None

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:  # a delivered record's report (only-error turned off): nothing
            if self.errors is None:
                self.errors = []
            self.errors.append((msg.topic(), msg.key(), msg.value(), err))

    def skip(self, i: int) -> None:
        if self.skipped is None:
            self.skipped = set()
        self.skipped.add(i)

    def __del__(self) -> None:
        self.done.append((self.batch, self.start, self.end, self.skipped, self.errors))


def _row_tuple(batch: TupleBatch, i: int) -> Tuple:
    """Row i of a received batch as a tuple to ack or fail (with its tree's meta)."""
    metas = batch.metas
    m = metas[i] if metas is not None else None
    if m:
        return TrackedTuple(batch.values[i], batch.source, m)
    return Tuple(batch.values[i], batch.source)


def _raw(v: Any) -> Any:
    return v.encode() if isinstance(v, str) else v


class _NeverRaised(Exception):
    """The client's exception type where there is no client (an in-memory log)."""


def _reason(err: Any) -> str:
    """A KafkaError (or the exception carrying one) as 'text (CODE)'."""
    if err.__class__.__name__ == "KafkaException" and err.args:
        err = err.args[0]
    if hasattr(err, "str") and hasattr(err, "name"):
        return f"{err.str()} ({err.name()})"
    return f"{type(err).__name__}: {err}"


def _check_args(
    servers: Any,
    topic: Any,
    topic_field: Any,
    producer_config: Any,
    serializer: Any,
    transactional_id: Any,
) -> None:
    if not isinstance(servers, str) or not servers:
        raise ValueError(f"KafkaSink bootstrap_servers must be 'host:port[,...]', got {servers!r}")
    if servers.startswith(MEMORY) and transactional_id is not None:
        raise ValueError("KafkaSink transactional_id needs a broker, not an in-memory log")
    if (topic is None) == (topic_field is None):
        raise ValueError("KafkaSink needs exactly one of topic= or topic_field=")
    if topic is not None and (not isinstance(topic, str) or not topic):
        raise ValueError(f"KafkaSink topic must be a non-empty string, got {topic!r}")
    if producer_config is not None and not isinstance(producer_config, Mapping):
        raise ValueError(
            f"KafkaSink producer_config must be a mapping of librdkafka settings, "
            f"got {type(producer_config).__name__}"
        )
    if producer_config and "transactional.id" in producer_config:
        raise ValueError(
            "KafkaSink producer_config: set transactional_id= instead of 'transactional.id' "
            "(the sink makes one id per task from it)"
        )
    if serializer is not None and not callable(serializer):
        raise ValueError(f"KafkaSink serializer must be callable, got {serializer!r}")


def _check_number(name: str, value: Any, integer: bool = False) -> None:
    kinds = int if integer else int | float
    if isinstance(value, bool) or not isinstance(value, kinds) or value <= 0:
        raise ValueError(f"KafkaSink {name} must be a number > 0, got {value!r}")
