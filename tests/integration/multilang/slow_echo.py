"""A pystorm bolt as its users write it, that takes its time: each tuple is emitted
`argv[1]` seconds after it came (a model call, a lookup), then acked (auto_ack)."""

import sys
import time

from pystorm import Bolt


class SlowEcho(Bolt):
    outputs = ["v"]

    def process(self, tup):
        time.sleep(float(sys.argv[1]))
        self.emit([tup.values[0]])


if __name__ == "__main__":
    SlowEcho(serializer="json").run()
