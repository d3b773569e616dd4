"""The sentence spout of Storm's flux-examples multilang.yaml (randomsentence.js there),
as a reliable pystorm spout: `test.sentences` sentences, each with a tuple id, replayed
when failed."""

from collections import deque

from pystorm import Spout


class SentenceSpout(Spout):
    outputs = ["word"]  # multilang.yaml declares the sentence spout's field as "word"

    def initialize(self, storm_conf, context):
        n = int(storm_conf.get("test.sentences", 50))
        self.sentences = {i: "the cow jumped over the moon" for i in range(n)}
        self.todo = deque(self.sentences)

    def next_tuple(self):
        if self.todo:
            i = self.todo.popleft()
            self.emit([self.sentences[i]], tup_id=i)

    def fail(self, tup_id):
        self.todo.append(tup_id)


if __name__ == "__main__":
    SentenceSpout().run()
