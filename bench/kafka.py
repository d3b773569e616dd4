"""Kafka word count, topic to topic, against one Tansu broker on this machine.

    python bench/kafka.py [--records 1000000] [--rounds 3] [--bootstrap HOST:PORT]
                          [--bytewax-python PATH]

The input topic (4 partitions) holds `--records` one-word records (a vocabulary of 1,000
words, skewed); every engine reads it from the beginning to the end, splits, keeps a
running count per word and writes every count update (key = the word, value = the
count) to a fresh output topic, so each run writes as many records as it reads:

- `plain-consume`: a bare confluent-kafka consume loop that counts the words and writes
  nothing: the bound on reading.
- `plain-wordcount`: the same loop producing every update (the hand-written program).
- `bytewax`: Bytewax 0.21's KafkaSource (tail=False) and KafkaSink, one worker
  (bench/kafka_bytewax.py; `--bytewax-python` names an interpreter that has bytewax).
- `stormish`: `stormish run topologies/kafka_wordcount.py`, one worker, KafkaSpout
  at_least_once with acking on (stop_at_end) -> split -> count -> KafkaSink (acked on
  each delivery report). `stormish-noidem`: the same with the sink's idempotent producer
  off (KAFKA_IDEMPOTENCE=0), as Bytewax's sink and the plain loop run theirs.
  `stormish-tree`: `stormish` with 100 consecutive records of a partition as one tuple
  tree (KafkaSpout records_per_tree=100, max.spout.pending 50): still at_least_once
  with acking on and the same in-order commit; a failure replays the tree's records.

Each engine runs as its own command; rounds interleave the engines. Reported per
engine: the whole command (wall seconds from start to exit, Python start-up, group join
and flush included) and the steady rate (records / span of the output records'
timestamps, or of the consume loop), as median and spread (min-max) over the rounds,
and the command's CPU seconds (user + system of its whole process tree, start-up
included; on a machine shared with other work, where a run waits for a core, this moves
least) with records per CPU second.
Every run's output is checked: the last count of each word equals its true count.
`--compare-root DIR` (another checkout, e.g. `git archive HEAD~3 | tar -x -C DIR`) adds
`base:ENGINE` for each stormish engine: the same command on that checkout's code, in the
same rounds, so a change is measured against what it changes.
Starts its own broker (tests/brokers.py) unless `--bootstrap` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VOCAB = [f"w{i:03d}" for i in range(1000)]
ENGINES = ("plain-consume", "plain-wordcount", "bytewax", "stormish", "stormish-noidem",
           "stormish-tree")  # fmt: skip
PER_TREE = 100  # stormish-tree: KafkaSpout records_per_tree
FAST_GROUP = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 500}


def consumer_conf(bootstrap: str, prefix: str) -> dict:
    return {"bootstrap.servers": bootstrap, "group.id": f"{prefix}-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, **FAST_GROUP}  # fmt: skip


def fill(bootstrap: str, topic: str, n: int) -> Counter:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(15)
    rnd = random.Random(7)
    words = rnd.choices(VOCAB, weights=[1 / (i + 1) for i in range(len(VOCAB))], k=n)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20})
    for w in words:
        while True:
            try:
                p.produce(topic, w.encode())
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    return Counter(words)


def new_topic(bootstrap: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"bench-out-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 4, 1)])[name].result(15)
    return name


def read_output(bootstrap: str, topic: str, expect: int) -> tuple[dict[str, int], float, int]:
    """Each word's last count, the span (s) of the records' timestamps, how many."""
    from confluent_kafka import Consumer

    c = Consumer(consumer_conf(bootstrap, "r"))
    c.subscribe([topic])
    last: dict[str, tuple[int, int]] = {}
    lo, hi, n, quiet = 1 << 62, 0, 0, time.monotonic()
    while time.monotonic() - quiet < (1.0 if n >= expect else 20.0):
        for m in c.consume(10_000, 0.2):
            if m.error() is not None:
                continue
            n += 1
            ts = m.timestamp()[1]
            lo, hi = min(lo, ts), max(hi, ts)
            k, v = m.key().decode(), int(m.value())
            if v > last.get(k, (0, 0))[0]:
                last[k] = (v, ts)
            quiet = time.monotonic()
    c.close()
    return {k: v for k, (v, _) in last.items()}, (hi - lo) / 1000.0, n


def plain(bootstrap: str, src: str, out: str | None, n: int) -> float:
    """The hand-written loop (in a child process); returns its steady seconds."""
    from confluent_kafka import Consumer, Producer

    c = Consumer(consumer_conf(bootstrap, "p"))
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) if out else None
    c.subscribe([src])
    counts: dict[str, int] = {}
    seen, first = 0, 0.0
    while seen < n:
        batch = c.consume(1000, 0.5)
        if batch and not first:
            first = time.perf_counter()
        for m in batch:
            if m.error() is not None:
                continue
            seen += 1
            for w in m.value().decode().split():
                k = counts[w] = counts.get(w, 0) + 1
                if p is not None:
                    while True:
                        try:
                            p.produce(out, str(k), w)
                            break
                        except BufferError:
                            p.poll(0.01)
        if p is not None:
            p.poll(0)
    if p is not None:
        p.flush(60)
    span = time.perf_counter() - first
    c.close()
    return span


def run_engine(
    engine: str, bootstrap: str, src: str, n: int, bw_python: str, base: str | None = None
) -> dict:
    root = ROOT
    if engine.startswith("base:"):
        engine, root = engine[len("base:") :], Path(base or ROOT)
    out = None if engine == "plain-consume" else new_topic(bootstrap)
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "KAFKA_IN": src, "KAFKA_OUT": out or "",
           "KAFKA_GROUP": f"s-{uuid.uuid4().hex}", "PYTHONPATH": str(root)}  # fmt: skip
    if engine.startswith("plain"):
        cmd = [sys.executable, __file__, "--child", engine, "--bootstrap", bootstrap,
               "--src", src, "--out", out or "", "--records", str(n)]  # fmt: skip
    elif engine == "bytewax":
        cmd = [bw_python, "-m", "bytewax.run", "bench.kafka_bytewax:flow"]
    else:
        cmd = [sys.executable, "-m", "stormish.cli", "run", "topologies/kafka_wordcount.py"]
        env["KAFKA_IDEMPOTENCE"] = "0" if engine == "stormish-noidem" else "1"
        env["KAFKA_RECORDS_PER_TREE"] = str(PER_TREE if engine == "stormish-tree" else 1)
    t0, cpu0 = time.perf_counter(), _children_cpu()
    r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    whole, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if r.returncode != 0:
        raise SystemExit(f"{engine} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-3000:]}")
    if out is None:
        steady = float(r.stdout.strip().splitlines()[-1])
        return {"whole": whole, "steady": n / steady, "cpu": cpu, "written": 0, "counts": None}
    counts, span, written = read_output(bootstrap, out, n)
    return {"whole": whole, "steady": n / max(span, 1e-3), "cpu": cpu, "written": written,
            "counts": counts}  # fmt: skip


def _children_cpu() -> float:
    """User + system CPU seconds of the waited-for children so far (every thread of the
    engine's process tree: client threads, Bytewax's Rust workers)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def summary(name: str, runs: list[dict], n: int) -> str:
    w = [r["whole"] for r in runs]
    s = [r["steady"] for r in runs]
    c = [r["cpu"] for r in runs]
    return (
        f"{name:<22} whole {statistics.median(w):6.2f} s ({min(w):.2f}-{max(w):.2f})"
        f"  = {n / statistics.median(w):>9,.0f} rec/s   steady {statistics.median(s):>9,.0f}"
        f" rec/s ({min(s):,.0f}-{max(s):,.0f})   cpu {statistics.median(c):6.2f} s"
        f" ({min(c):.2f}-{max(c):.2f}) = {n / statistics.median(c):>9,.0f} rec/cpu-s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bootstrap")
    ap.add_argument("--bytewax-python", default=sys.executable)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--compare-root")
    ap.add_argument("--child")
    ap.add_argument("--src")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.child:
        print(plain(a.bootstrap, a.src, a.out or None, a.records))
        return
    engines = a.engines.split(",")
    if a.compare_root:
        engines += [f"base:{e}" for e in engines if e.startswith("stormish")]
    with ExitStack() as stack:
        bootstrap = a.bootstrap
        if bootstrap is None:
            sys.path.insert(0, str(ROOT / "tests"))
            from brokers import kafka_broker

            bootstrap = stack.enter_context(kafka_broker()).address
        src = f"bench-in-{uuid.uuid4().hex[:8]}"
        t0 = time.perf_counter()
        truth = fill(bootstrap, src, a.records)
        print(f"input: {a.records:,} records on 4 partitions of {src!r} at {bootstrap} "
              f"({time.perf_counter() - t0:.1f} s to write)", flush=True)  # fmt: skip
        runs: dict[str, list[dict]] = {e: [] for e in engines}
        for rnd in range(a.rounds):
            for e in engines:
                r = run_engine(e, bootstrap, src, a.records, a.bytewax_python, a.compare_root)
                ok = r["counts"] is None or (r["counts"] == truth and r["written"] >= a.records)
                runs[e].append(r)
                line = {"round": rnd, "engine": e, "whole_s": round(r["whole"], 2),
                        "steady_rec_s": round(r["steady"]), "cpu_s": round(r["cpu"], 2),
                        "written": r["written"], "counts_ok": ok}  # fmt: skip
                print(json.dumps(line), flush=True)
                if not ok:
                    raise SystemExit(f"{e}: wrong output (written {r['written']:,})")
        print(f"\n{a.records:,} records, {a.rounds} interleaved rounds, median (min-max):")
        for e in engines:
            print(summary(e, runs[e], a.records))


if __name__ == "__main__":
    main()
