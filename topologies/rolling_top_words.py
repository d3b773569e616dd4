"""Rolling top words: Storm's storm-starter RollingTopWords, on a windowed bolt.

words (event time) -> counts (a sliding 5-minute window every minute, fields grouping
on word, 2 tasks, each keeps its words' counts from `window.new` and `window.expired`
and sends its top N) -> rankings (global: merges the partial rankings of each window and
prints the top N once every counts task reported it).

The spout replays 30 minutes of word events (stamped 06:00 to 06:30 on a fixed day,
words trending in turn) in about two seconds of real time, so the windows follow the
words' own timestamps, not the clock: `stormish run topologies/rolling_top_words.py`
prints one ranking per minute of event time and completes in a few seconds.

It runs without acking (`topology.acker.executors: 0`, an unreliable spout as
storm-starter's). A windowed bolt acks a tuple only when it leaves its window, and the
words of the last windows leave only at the end of input (no later word moves the
watermark past them): a reliable spout says its input ended with `finish_input()` once
it emitted everything, not `finish()` after its last ack, which would never come.
docs/windows.md, "Finite runs: the end of input", says more.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

from stormish import Bolt, Spout, Topology
from stormish.windowing import Duration, WindowedBolt

START = datetime(2026, 1, 1, 6, 0, tzinfo=UTC).timestamp()
MINUTES, RATE, TOP = 30, 10, 3  # 30 minutes of event time, 10 words a second, top 3
VOCABULARY = ["storm", "spout", "bolt", "tuple", "stream",
              "window", "tick", "acker", "worker", "nimbus"]  # fmt: skip
REPLAY_SECONDS = 2.0  # real time to replay them


def words(seed: int = 7) -> list[tuple[str, float]]:
    """The word events: (word, timestamp). Every 5 minutes another word trends."""
    rng = random.Random(seed)
    out = []
    for i in range(MINUTES * 60 * RATE):
        ts = START + i / RATE
        trending = VOCABULARY[(i // (RATE * 300)) % len(VOCABULARY)]
        weights = [3.0 if w == trending else 1.0 / (k + 1) for k, w in enumerate(VOCABULARY)]
        out.append((rng.choices(VOCABULARY, weights)[0], ts))
    return out


def top(counts: dict[str, int], n: int = TOP) -> list[tuple[str, int]]:
    """The n most frequent, ties by word: the same rule for a task's and the total."""
    return sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[:n]


def label(end: float) -> str:
    def hhmm(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).strftime("%H:%M")

    return f"{hhmm(end - 300)}-{hhmm(end)}"


class Words(Spout):
    """Replays `words()` paced over REPLAY_SECONDS and finishes: at the end of input the
    watermark goes to the end of time, so the last windows are ranked too."""

    outputs = ["word", "ts"]

    def open(self, conf, context):
        self.todo, self.clock = words(), context.clock
        self.i, self.t0 = 0, self.clock.now()

    def next_tuple(self):
        now, n = self.clock.now(), len(self.todo)
        if self.i >= n:
            self.finish()
            return
        due = min(n, int((now - self.t0) / REPLAY_SECONDS * n) + 1, self.i + 500)
        while self.i < due:
            self.emit(list(self.todo[self.i]))
            self.i += 1


class RollingCounts(WindowedBolt):
    """Counts its words over the window, kept from what entered and left it."""

    outputs = ["end", "ranking"]

    def prepare(self, conf, context):
        self.counts: dict[str, int] = {}

    def execute_window(self, window):
        for t in window.new:
            self.counts[t["word"]] = self.counts.get(t["word"], 0) + 1
        for t in window.expired:
            left = self.counts[t["word"]] = self.counts[t["word"]] - 1
            if not left:
                del self.counts[t["word"]]
        self.emit([window.end, top(self.counts)])


class Rankings(Bolt):
    """Merges each window's partial rankings; prints when every counts task sent one."""

    def prepare(self, conf, context):
        self.parts = len(context.get_component_tasks("counts"))
        self.pending: dict[float, list[tuple[str, int]]] = {}
        self.reported: dict[float, int] = {}

    def execute(self, tup):
        end = tup["end"]
        self.pending.setdefault(end, []).extend(tup["ranking"])
        self.reported[end] = self.reported.get(end, 0) + 1
        if self.reported[end] == self.parts:
            ranking = top(dict(self.pending.pop(end)))
            print(f"{label(end)} top {TOP}: " + ", ".join(f"{w} {c}" for w, c in ranking))
        self.ack(tup)


counts = (
    RollingCounts()
    .with_window(length=Duration(minutes=5), slide=Duration(minutes=1))
    .with_timestamp_field("ts")
    .with_lag(seconds=5)
    .with_watermark_interval(seconds=0.1)
)
topology = Topology("rolling-top-words", config={"topology.acker.executors": 0})
topology.set_spout("words", Words())
topology.set_bolt("counts", counts, parallelism=2).fields_grouping("words", ["word"])
topology.set_bolt("rankings", Rankings()).global_grouping("counts")
