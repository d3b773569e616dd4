"""stormish next to its peers: the same word count, the whole command timed (issue 12).

Word count as `bench/core.py` (b): N pre-generated sentences of 8 words from a 1,000-word
vocabulary (seeded), loaded from a pickle by the program itself, split -> group by word
-> count, acking off. Every configuration runs as a user runs it (a fresh `python`
process: start-up, load and run all timed), in interleaved rounds so that a slower
spell of the machine hits every configuration alike. Prints per configuration the
median, min and max of the rounds, the spread (max/min) and the ratios the issue's
targets name, and the median CPU time (user + system) of every process of the command
(the CLI, the fork server, the workers), which other work on the machine disturbs less
than the wall-clock time (on 2 cores a second worker may find no free core).

- bare:            one Python process: load + split + count in a loop (the floor)
- bytewax -w1:     Bytewax 0.21.1, one worker (`python -m bytewax.run flow -w 1`)
- bytewax -p2:     Bytewax, two processes of one worker (`python -m bytewax.testing -p 2`)
- stormish wN tuple:  `stormish run wc.py -w N`, per-tuple `execute` as users write it
- stormish wN batch:  the same with `execute_batch` and `emit_many` (the batch API)

Bytewax runs from a separate venv (its pinned dependencies stay out of ours):
    python -m venv .venv-bytewax && .venv-bytewax/bin/pip install bytewax==0.21.1
or point BYTEWAX_PYTHON at an interpreter that has it. Without it those rows are skipped
with a message.

Run: python bench/peers.py [--sentences N] [--rounds R] [--only stormish,bytewax,...]
     python bench/peers.py --startup       (10-sentence topology: start-up, whole command)
     python bench/peers.py --startup --base /tmp/base   (and another checkout, same rounds)
     python bench/peers.py --startup --trace  (and, after the rounds, one more run of each
                                           stormish row with STORMISH_START_TRACE: its
                                           processes' steps, ms from the command's start)
     python bench/peers.py --acking        (adds stormish with acking on: one acker per
                                           worker, Storm's default, as users leave it)
     python bench/peers.py --bound         (adds 2 workers with nothing crossing: a bound)
     python bench/peers.py --shuffle-first (adds 2 workers with shuffle_grouping first)
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOCAB = [f"w{i:03d}x" for i in range(1000)]

BARE = """
import os, pickle
with open(os.environ["PEERS_DATA"], "rb") as f:
    data = pickle.load(f)
counts = {}
get = counts.get
for s in data:
    for w in s.split():
        counts[w] = get(w, 0) + 1
print("words", sum(counts.values()))
"""

BYTEWAX = """
import os, pickle, sys
import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from bytewax.testing import TestingSource

with open(os.environ["PEERS_DATA"], "rb") as f:
    data = pickle.load(f)


class _Total(StatelessSinkPartition):
    def __init__(self):
        self.n = 0

    def write_batch(self, items):
        for _word, c in items:
            self.n += c

    def close(self):
        os.write(1, f"words {self.n}\\n".encode())  # one write: processes share the pipe


class Total(DynamicSink):
    def build(self, step_id, worker_index, worker_count):
        return _Total()


flow = Dataflow("wc")
lines = op.input("in", flow, TestingSource(data, batch_size=int(os.environ["PEERS_BW_BATCH"])))
words = op.flat_map("split", lines, str.split)
counts = op.count_final("count", words, lambda w: w)
op.output("out", counts, Total())
"""

STORMISH = """
import os, pickle
from stormish import BasicBolt, Spout, Topology

PAR = int(os.environ.get("PEERS_PAR", "1"))
BATCH = os.environ.get("PEERS_API") == "batch"
ACKING = os.environ.get("PEERS_ACKING") == "1"


class Sentences(Spout):
    outputs = ["sentence"]

    def open(self, conf, context):
        with open(os.environ["PEERS_DATA"], "rb") as f:
            self.data = pickle.load(f)
        self.step = 64 * len(context.component_tasks)
        self.i = 64 * context.task_index

    def next_tuple(self):
        i = self.i
        if i >= len(self.data):
            self.finish()
            return
        chunk = self.data[i : i + 64]
        self.i = i + self.step
        emit = self.emit
        if ACKING:
            for j, s in enumerate(chunk):
                emit((s,), msg_id=i + j)
        else:
            for s in chunk:
                emit((s,))


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        emit = self.emit
        for w in tup.values[0].split():
            emit((w,))


class Count(BasicBolt):
    def prepare(self, conf, context):
        self.counts = {}

    def execute(self, tup):
        w = tup.values[0]
        self.counts[w] = self.counts.get(w, 0) + 1


class SplitBatch(BasicBolt):
    outputs = ["word"]

    def execute_batch(self, batch):  # the batch API end to end: one emit_many a batch
        self.emit_many([(w,) for (s,) in batch.values for w in s.split()])


class CountBatch(BasicBolt):
    def prepare(self, conf, context):
        self.counts = {}

    def execute_batch(self, batch):
        counts = self.counts
        get = counts.get
        for (w,) in batch.values:
            counts[w] = get(w, 0) + 1


topology = Topology("wc")
topology.set_spout("sentences", Sentences(), parallelism=PAR)
split = topology.set_bolt("split", SplitBatch() if BATCH else Split(), parallelism=PAR)
if os.environ.get("PEERS_FIRST") == "shuffle":  # --shuffle-first: as most users write it
    split.shuffle_grouping("sentences")
else:
    split.local_or_shuffle_grouping("sentences")
count = topology.set_bolt("count", CountBatch() if BATCH else Count(), parallelism=PAR)
if os.environ.get("PEERS_GROUPING") == "local":
    # --bound: each word counted in the worker that split it, nothing crosses; the total
    # is right, the per-word counts are not: an upper bound for 2 workers, not a word count
    count.local_or_shuffle_grouping("split")
else:
    count.fields_grouping("split", ["word"])
if not ACKING:
    topology.config["topology.acker.executors"] = 0
# acking on: the acker count left unset, as users leave it: one per worker (Storm's
# default). It was 1 here: with 2 workers one of them did every tree's acking
"""


def make_data(n: int, path: Path) -> None:
    rnd = random.Random(42)
    data = [" ".join(rnd.choice(VOCAB) for _ in range(8)) for _ in range(n)]
    with open(path, "wb") as f:
        pickle.dump(data, f, protocol=pickle.HIGHEST_PROTOCOL)


def bytewax_python() -> str | None:
    cand = os.environ.get("BYTEWAX_PYTHON") or str(ROOT / ".venv-bytewax" / "bin" / "python")
    if not Path(cand).exists():
        return None
    ok = subprocess.run([cand, "-c", "import bytewax"], capture_output=True).returncode == 0
    return cand if ok else None


class Config:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], words_from: str):
        self.name, self.argv, self.env, self.words_from = name, argv, env, words_from
        self.times: list[float] = []
        self.cpus: list[float] = []  # user + system CPU s of the command and its workers


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_once(cfg: Config, workdir: Path, expect_words: int) -> tuple[float, float]:
    env = dict(os.environ, **cfg.env)
    # As a user's machine runs it: Python caches compiled modules (.pyc). This sandbox
    # sets PYTHONDONTWRITEBYTECODE, which made every run of an editable checkout compile
    # its ~70 modules again (~60 ms a process), while a pip-installed peer ships its .pyc.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # CPU: every process of the command once reaped (workers are reaped by the command or
    # its fork server, so RUSAGE_CHILDREN counts them): what the run cost the machine,
    # which other work on a 2-core machine disturbs less than the wall-clock time
    c0 = _children_cpu()
    t0 = time.perf_counter()
    p = subprocess.run(cfg.argv, cwd=workdir, env=env, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    cpu = _children_cpu() - c0
    if p.returncode != 0:
        raise SystemExit(f"{cfg.name} failed (exit {p.returncode}):\n{p.stdout}\n{p.stderr}")
    words = count_words(cfg, p.stdout, workdir)
    if words != expect_words:
        raise SystemExit(f"{cfg.name}: counted {words} words, expected {expect_words}")
    return secs, cpu


def trace_once(cfg: Config, workdir: Path, expect_words: int) -> None:
    """One more run with STORMISH_START_TRACE: each step of each process (the command,
    its fork server, its workers), in ms from the command's start."""
    trace = workdir / "trace.txt"
    trace.unlink(missing_ok=True)
    traced = Config(cfg.name, cfg.argv, dict(cfg.env, STORMISH_START_TRACE=str(trace)), "stats")
    t0 = time.time()
    secs, _ = run_once(traced, workdir, expect_words)
    print(f"\n{cfg.name}: {secs * 1000:.1f} ms whole command")
    for line in trace.read_text().splitlines():
        at, pid, event = line.split(" ", 2)
        print(f"  {(float(at) - t0) * 1000:7.1f}  {pid:>7}  {event}")


def count_words(cfg: Config, out: str, workdir: Path) -> int:
    if cfg.words_from == "stats":
        stats = json.loads((workdir / "stats.json").read_text())
        return int(stats["components"]["count"]["executed"])
    return sum(int(line.split()[1]) for line in out.splitlines() if line.startswith("words "))


def configs(args: argparse.Namespace, workdir: Path) -> list[Config]:
    py = sys.executable
    data = {"PEERS_DATA": str(workdir / "data.pkl")}
    out: list[Config] = []
    only = set(args.only.split(",")) if args.only else {"bare", "bytewax", "stormish"}
    if "bare" in only:
        out.append(Config("bare python loop", [py, "bare.py"], data, "stdout"))
    if "bytewax" in only:
        bw = bytewax_python()
        if bw is None:
            print(
                "SKIPPED bytewax: no interpreter with bytewax (python -m venv .venv-bytewax"
                " && .venv-bytewax/bin/pip install bytewax==0.21.1, or set BYTEWAX_PYTHON)"
            )
        else:
            bwenv = dict(data, PEERS_BW_BATCH=str(args.bytewax_batch))
            run = [bw, "-m", "bytewax.run", "bw_wc:flow", "-w", "1"]
            out.append(Config("bytewax -w1", run, bwenv, "stdout"))
            if not args.no_two:
                run2 = [bw, "-m", "bytewax.testing", "bw_wc:flow", "-w", "1", "-p", "2"]
                out.append(Config("bytewax -p2", run2, bwenv, "stdout"))
    if "stormish" in only:
        sm = [py, "-m", "stormish.cli", "run", "sm_wc.py", "--stats-json", "stats.json"]
        sm += [a for kv in args.config for a in ("-c", kv)]
        if args.profile:
            sm += ["--profile", args.profile]
        workers = (1,) if args.no_two else (1, 2, 4) if args.startup else (1, 2)
        apis = ("tuple",) if args.no_batch else ("tuple", "batch")
        # --base DIR: the same rows with DIR's stormish (PYTHONPATH), in the same rounds
        trees = [("stormish", {})] + [("base", {"PYTHONPATH": args.base})] * bool(args.base)
        for w in workers:
            for api in apis:
                # parallelism 2 at most: -w 4 runs the 6 tasks of -w 2 on 4 workers
                env = dict(data, PEERS_PAR=str(min(w, 2)), PEERS_API=api)
                for tree, extra in trees:
                    name = f"{tree} w{w} {api}"
                    out.append(Config(name, sm + ["-w", str(w)], dict(env, **extra), "stats"))
        if args.bound and not args.no_two:
            for api in apis:
                env = dict(data, PEERS_PAR="2", PEERS_API=api, PEERS_GROUPING="local")
                for tree, extra in trees:
                    name = f"{tree} w2 {api} uncrossed"
                    out.append(Config(name, sm + ["-w", "2"], dict(env, **extra), "stats"))
        if args.shuffle_first and not args.no_two:
            # the first edge a plain shuffle: locality-aware (the default), and round-robin
            # over both workers' tasks (load-aware messaging off: every other tuple crosses)
            off = ["-c", "topology.disable.loadaware.messaging=true"]
            for api in apis:
                env = dict(data, PEERS_PAR="2", PEERS_API=api, PEERS_FIRST="shuffle")
                out.append(Config(f"stormish w2 {api} shuffle", sm + ["-w", "2"], env, "stats"))
                name = f"stormish w2 {api} shuffle rr"
                out.append(Config(name, sm + ["-w", "2"] + off, env, "stats"))
        if args.acking:
            for w in workers:
                env = dict(data, PEERS_PAR=str(w), PEERS_API="tuple", PEERS_ACKING="1")
                for tree, extra in trees:
                    name = f"{tree} w{w} tuple acking"
                    out.append(Config(name, sm + ["-w", str(w)], dict(env, **extra), "stats"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default=None, help="comma list of: bare, bytewax, stormish")
    ap.add_argument("--acking", action="store_true", help="stormish with acking on too")
    ap.add_argument("--no-two", action="store_true", help="one worker/process only")
    ap.add_argument("--no-batch", action="store_true", help="stormish per-tuple API only")
    ap.add_argument(
        "--bound",
        action="store_true",
        help="adds stormish on 2 workers with nothing crossing between them (each word "
        "counted where it was split): what 2 workers could reach with free transfer",
    )
    ap.add_argument(
        "--startup",
        action="store_true",
        help="10 sentences: start-up cost (adds -w 4, the 6 tasks of -w 2 on 4 workers)",
    )
    ap.add_argument(
        "--base",
        default=None,
        help="a checkout of stormish to compare with: its rows (PYTHONPATH=BASE) run in "
        "the same interleaved rounds",
    )
    ap.add_argument(
        "--shuffle-first",
        action="store_true",
        help="adds 2 workers whose first edge is shuffle_grouping (locality-aware), and "
        "the same with topology.disable.loadaware.messaging (round-robin: it crosses)",
    )
    ap.add_argument(
        "--bytewax-batch",
        type=int,
        default=1000,
        help="items per batch of Bytewax's source (default 1000, KafkaSource's default; "
        "TestingSource's own default of 1 makes Bytewax 3-4x slower)",
    )
    ap.add_argument(
        "--trace",
        action="store_true",
        help="after the rounds, one more run of each stormish row, its start-up and "
        "shutdown steps printed (STORMISH_START_TRACE)",
    )
    ap.add_argument("--profile", default=None, help="stormish --profile")
    ap.add_argument("-c", "--config", action="append", default=[], help="stormish -c K=V")
    args = ap.parse_args()
    if args.startup:
        args.sentences = 10
        args.no_batch = True
    with tempfile.TemporaryDirectory(prefix="stormish-peers-") as tmp:
        workdir = Path(tmp)
        make_data(args.sentences, workdir / "data.pkl")
        (workdir / "bare.py").write_text(BARE)
        (workdir / "bw_wc.py").write_text(BYTEWAX)
        (workdir / "sm_wc.py").write_text(STORMISH)
        cfgs = configs(args, workdir)
        words = 8 * args.sentences
        print(
            f"word count, {args.sentences:,} sentences x 8 words = {words:,} words, acking off "
            f"unless named; whole command (python start-up, load, run, exit); "
            f"{args.rounds} interleaved rounds; {os.cpu_count()} cores; Bytewax source "
            f"batch {args.bytewax_batch}"
        )
        for cfg in cfgs:  # warm the page cache and .pyc files: not timed
            run_once(cfg, workdir, words)
        for _ in range(args.rounds):
            for cfg in cfgs:
                secs, cpu = run_once(cfg, workdir, words)
                cfg.times.append(secs)
                cfg.cpus.append(cpu)
        report(cfgs, words)
        if args.trace:
            for cfg in cfgs:
                if cfg.words_from == "stats":  # the stormish rows
                    trace_once(cfg, workdir, words)
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def report(cfgs: list[Config], words: int) -> None:
    med = {c.name: statistics.median(c.times) for c in cfgs}
    cpu = {c.name: statistics.median(c.cpus) for c in cfgs}  # whole command, all processes
    print(
        f"{'configuration':<28}{'median s':>9}{'min s':>8}{'max s':>8}{'spread':>8}"
        f"{'M words/s':>11}{'vs bytewax -w1':>16}{'CPU s':>8}{'CPU ns/word':>13}"
    )
    base = med.get("bytewax -w1")
    for c in cfgs:
        m = med[c.name]
        spread = max(c.times) / min(c.times)
        vs = f"{base / m:>15.2f}x" if base else f"{'-':>16}"
        print(
            f"{c.name:<28}{m:>9.3f}{min(c.times):>8.3f}{max(c.times):>8.3f}"
            f"{spread:>7.2f}x{words / m / 1e6:>11.2f}{vs}{cpu[c.name]:>8.3f}"
            f"{cpu[c.name] / words * 1e9:>13.0f}"
        )
    for tree in ("stormish", "base"):
        for api in ("tuple", "batch", "tuple acking"):
            one, two = med.get(f"{tree} w1 {api}"), med.get(f"{tree} w2 {api}")
            if one and two:
                c1, c2 = cpu[f"{tree} w1 {api}"], cpu[f"{tree} w2 {api}"]
                print(
                    f"{tree} {api}: 2 workers / 1 worker = {one / two:.2f}x (whole command); "
                    f"CPU of 2 workers / 1 worker = {c2 / c1:.2f}x (all processes)"
                )
    for w in (1, 2, 4):
        new, old = med.get(f"stormish w{w} tuple"), med.get(f"base w{w} tuple")
        if new and old:
            print(f"w{w}: stormish / base = {new / old:.2f} of the time (whole command)")
    for tree in ("stormish", "base"):
        for api in ("tuple", "batch"):
            one, two = med.get(f"{tree} w1 {api}"), med.get(f"{tree} w2 {api}")
            free = med.get(f"{tree} w2 {api} uncrossed")
            if one and free:
                print(
                    f"{tree} {api}: 2 workers with nothing crossing / 1 worker = "
                    f"{one / free:.2f}x (the bound of 2 workers on this machine)"
                    + (f"; 2 workers reach {free / two:.2f} of it" if two else "")
                )
    for api in ("tuple", "batch"):
        one = med.get(f"stormish w1 {api}")
        sh, rr = med.get(f"stormish w2 {api} shuffle"), med.get(f"stormish w2 {api} shuffle rr")
        if one and sh and rr:
            print(
                f"stormish {api}, first edge shuffle: 2 workers / 1 worker = {one / sh:.2f}x "
                f"locality-aware, {one / rr:.2f}x round-robin"
            )
    for tree in ("stormish", "base"):
        one, ack = med.get(f"{tree} w1 tuple"), med.get(f"{tree} w1 tuple acking")
        if one and ack:
            by_cpu = cpu[f"{tree} w1 tuple"] / cpu[f"{tree} w1 tuple acking"]
            print(
                f"{tree} w1 acking on / off = {one / ack:.2f} (whole command; "
                f"by CPU time {by_cpu:.2f})"
            )


if __name__ == "__main__":
    main()
