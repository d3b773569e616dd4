"""pystorm's own ReliableSpout, as its users write one: it replays a failed tuple (up to
`max_fails` times) from inside `fail`."""

import sys

from pystorm.spout import ReliableSpout


class ReliableSentenceSpout(ReliableSpout):
    outputs = ["sentence"]

    def initialize(self, storm_conf, context):
        self.count = int(storm_conf.get("test.sentences", 100))
        self.next_id = 0

    def next_tuple(self):
        if self.next_id < self.count:
            i = self.next_id
            self.next_id += 1
            self.emit([f"s{i} the cow jumped over the moon"], tup_id=i)


if __name__ == "__main__":
    ReliableSentenceSpout(serializer=sys.argv[1] if len(sys.argv) > 1 else "json").run()
