"""topologies/kafka_wordcount.py runs with one command against the real broker, as the
README shows: sentences in, each word's last count record out equals its true count."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .kafka_util import new_topic, read_topic

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ["the cow jumped over the moon", "an apple a day keeps the doctor away"]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("per_tree", ["1", "50"])  # KafkaSpout records_per_tree
def test_kafka_wordcount_counts_a_topic_into_a_topic(kafka: Any, per_tree: str) -> None:
    from confluent_kafka import Producer

    src, out = new_topic(kafka.address, 2, "sentences"), new_topic(kafka.address, 2, "counts")
    p = Producer({"bootstrap.servers": kafka.address, "linger.ms": 5})
    sentences = [CORPUS[i % 2] + f" n{i % 13}" for i in range(600)]
    for s in sentences:
        p.produce(src, s.encode())
    assert p.flush(15) == 0
    env = {**os.environ, "KAFKA_BOOTSTRAP": kafka.address, "KAFKA_IN": src, "KAFKA_OUT": out,
           "KAFKA_GROUP": f"g-{src}", "PYTHONPATH": str(ROOT),
           "KAFKA_RECORDS_PER_TREE": per_tree}  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(ROOT / "topologies/kafka_wordcount.py")],
        env=env, capture_output=True, text=True, timeout=80,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "topology 'kafka-wordcount': complete" in r.stdout
    truth = Counter(w for s in sentences for w in s.split())
    got = read_topic(kafka.address, out, sum(truth.values()))
    last: dict[str, int] = {}
    for _p, _o, k, v in sorted(got):  # a word's records are in one partition, in order
        last[k.decode()] = int(v)
    assert last == dict(truth)
