"""A reliable pystorm spout as its users write it: each sentence has a tuple id, an ack
forgets it, a fail replays it."""

import sys
from collections import deque

from pystorm import Spout


class SentenceSpout(Spout):
    outputs = ["sentence"]

    def initialize(self, storm_conf, context):
        count = int(storm_conf.get("test.sentences", 100))
        self.sentences = {i: f"s{i} the cow jumped over the moon" for i in range(count)}
        self.todo = deque(self.sentences)
        self.pending = {}

    def next_tuple(self):
        if self.todo:
            i = self.todo.popleft()
            self.pending[i] = self.sentences[i]
            self.emit([self.sentences[i]], tup_id=i)

    def ack(self, tup_id):
        del self.pending[tup_id]

    def fail(self, tup_id):
        self.todo.append(tup_id)
        self.logger.info("replaying %s", tup_id)


if __name__ == "__main__":
    SentenceSpout(serializer=sys.argv[1] if len(sys.argv) > 1 else "json").run()
