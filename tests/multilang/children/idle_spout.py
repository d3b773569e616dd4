"""A pystorm spout with nothing to emit (a source polled while empty), as its users
write it: no sleep of its own, Storm's spout wait strategy paces it. argv: out, n.
It writes the seconds its `next_tuple` calls 100 to 100 + n took, then goes on."""

import sys
import time

from pystorm import Spout


class IdleSpout(Spout):
    outputs = ["v"]

    def initialize(self, storm_conf, context):
        self.out, self.n = sys.argv[1], int(sys.argv[2])
        self.calls = 0

    def next_tuple(self):
        self.calls += 1
        if self.calls == 100:
            self.start = time.monotonic()
        elif self.calls == 100 + self.n:
            with open(self.out, "w") as f:
                f.write(repr(time.monotonic() - self.start))


if __name__ == "__main__":
    IdleSpout().run()
