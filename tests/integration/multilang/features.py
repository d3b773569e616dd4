"""A pystorm bolt that uses the rest of the protocol: named streams, the task ids of
an emit (`need_task_ids`), a direct emit, manual acks, log levels, reported errors,
metrics, and ticks."""

import json
import sys

from pystorm import Bolt


class FeaturesBolt(Bolt):
    auto_ack = False

    def initialize(self, conf, context):
        tasks = context["task->component"]
        self.direct = sorted(int(t) for t, c in tasks.items() if c == "direct")[0]
        self.log("features bolt ready", level="warning")
        self.ticks = 0

    def process(self, tup):
        word = tup.values[0]
        ids = self.emit([word, json.dumps(ids_of(self, word))], stream="words", anchors=[tup])
        self.emit([word], stream="direct", direct_task=self.direct, anchors=[tup])
        if word == "w7":
            self.raise_exception(ValueError("w7 is reported"), tup)
            self.send_message({"command": "metrics", "name": "seen", "params": 7})
        self.ack(tup)
        assert ids is None

    def process_tick(self, tup):
        self.ticks += 1
        self.emit([f"tick{self.ticks} {tup.values[0]} {tup.component} {tup.task}"], stream="ticks")


def ids_of(bolt, word):
    # the task ids of an emit on "probe" with need_task_ids (Storm's default)
    return bolt.emit([word], stream="probe", need_task_ids=True)


if __name__ == "__main__":
    FeaturesBolt(serializer=sys.argv[1] if len(sys.argv) > 1 else "json").run()
