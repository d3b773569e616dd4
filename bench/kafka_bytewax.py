"""The Bytewax side of bench/kafka.py: the same word count as topologies/kafka_wordcount.py
with Bytewax 0.21's own Kafka connectors (KafkaSource with tail=False, KafkaSink), one
worker: `python -m bytewax.run bench.kafka_bytewax:flow` (KAFKA_BOOTSTRAP, KAFKA_IN,
KAFKA_OUT from the environment)."""

import os

import bytewax.operators as op
from bytewax.connectors.kafka import KafkaSink, KafkaSinkMessage, KafkaSource
from bytewax.dataflow import Dataflow

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")
IN = os.environ.get("KAFKA_IN", "sentences")
OUT = os.environ.get("KAFKA_OUT", "word-counts")


def count(state, _word):
    n = (state or 0) + 1
    return n, n


flow = Dataflow("kafka-wordcount")
lines = op.input("in", flow, KafkaSource([BOOTSTRAP], [IN], tail=False))
words = op.flat_map("split", lines, lambda m: m.value.decode("utf-8", "replace").split())
counts = op.stateful_map("count", op.key_on("key", words, lambda w: w), count)
out = op.map("msg", counts, lambda kv: KafkaSinkMessage(kv[0].encode(), str(kv[1]).encode()))
op.output("out", out, KafkaSink([BOOTSTRAP], OUT))
