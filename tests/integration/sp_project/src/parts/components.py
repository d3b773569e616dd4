"""streamparse components that use what the quickstart does not: ReliableSpout replays,
manual ack/fail, need_task_ids, namedtuple values, log, raise_exception, BatchingBolt on
ticks, TicklessBatchingBolt. Plain streamparse code: nothing stormish but `finish()`."""

from streamparse import BatchingBolt, Bolt, ReliableSpout, Stream, TicklessBatchingBolt

SENTENCES = ["the cow jumped", "over the moon", "fail me once", "the end"]


class Sentences(ReliableSpout):
    outputs = ["sentence"]
    max_fails = 3

    def initialize(self, conf, ctx):
        self.todo = list(enumerate(SENTENCES))
        self.replayed = []

    def next_tuple(self):
        if not self.todo:
            self.finish()  # stormish's: a finite run
            return
        i, s = self.todo.pop(0)
        self.emit([s], tup_id=f"s{i}")

    def fail(self, tup_id):
        self.replayed.append(tup_id)
        super().fail(tup_id)


class Split(Bolt):
    outputs = ["word"]
    auto_ack = False

    def initialize(self, conf, ctx):
        self.failed_once = False
        self.bad_tasks = []
        self.count_tasks = {int(t) for t, c in ctx["task->component"].items() if c == "batch_count"}

    def process(self, tup):
        sentence = tup.values.sentence  # pystorm's namedtuple of the stream's fields
        if sentence == "fail me once" and not self.failed_once:
            self.failed_once = True
            self.log("failing it once", level="warn")
            self.raise_exception(ValueError("reported, not raised"), tup)
            self.fail(tup)
            return
        for word in sentence.split():
            tasks = self.emit([word], need_task_ids=True)
            # the count bolts (fields grouping: one task each) and nothing else
            if len(tasks) != 2 or not (set(tasks) & self.count_tasks):
                self.bad_tasks.append(tasks)
                raise RuntimeError(f"task ids {tasks} for {word!r}")
        self.ack(tup)


class BatchCount(BatchingBolt):
    outputs = ["word", "n"]

    def group_key(self, tup):
        return tup.values.word

    def process_tick(self, tup):
        if (tup.component, tup.stream, tup.task, tuple(tup.values)) != (
            "__system", "__tick", -1, (0.1,)
        ):  # fmt: skip
            raise RuntimeError(f"not Storm's tick tuple: {tup}")
        super().process_tick(tup)

    def process_batch(self, key, tups):
        self.emit([key, len(tups)])


class TicklessCount(TicklessBatchingBolt):
    outputs = ["word", "n"]
    secs_between_batches = 0.1

    def group_key(self, tup):
        return tup.values[0]

    def process_batch(self, key, tups):
        self.emit([key, len(tups)])


class Router(Bolt):
    """Emits each word to the direct_sink task its length picks (emit direct_task)."""

    outputs = [Stream(fields=["word"], name="direct", direct=True)]

    def initialize(self, conf, ctx):
        tasks = ctx["task->component"].items()
        self.targets = sorted(int(t) for t, c in tasks if c == "direct_sink")

    def process(self, tup):
        target = self.targets[len(tup.values.word) % len(self.targets)]
        ids = self.emit([tup.values.word], stream="direct", direct_task=target, need_task_ids=True)
        if ids != [target]:
            raise RuntimeError(f"direct emit to {target} answered {ids}")


class DirectSink(Bolt):
    """Raises when a word reaches a task other than the one Router picked for it."""

    def initialize(self, conf, ctx):
        tasks = ctx["task->component"].items()
        self.targets = sorted(int(t) for t, c in tasks if c == "direct_sink")

    def process(self, tup):
        word = tup.values.word
        if self.targets[len(word) % len(self.targets)] != self.task_id or tup.stream != "direct":
            raise RuntimeError(f"{word!r} reached task {self.task_id} on {tup.stream!r}")
