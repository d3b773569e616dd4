"""A pystorm bolt that takes its time and never acks (auto_ack off, as users of
pystorm's Bolt may leave it with acking off): each tuple is emitted `argv[1]` seconds
after it came."""

import sys
import time

from pystorm import Bolt


class NeverAcks(Bolt):
    outputs = ["v"]
    auto_ack = False

    def process(self, tup):
        time.sleep(float(sys.argv[1]))
        self.emit([tup.values[0]])


if __name__ == "__main__":
    NeverAcks(serializer="json").run()
