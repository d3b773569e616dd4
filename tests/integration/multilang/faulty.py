"""A pystorm bolt that misbehaves once (the first of its processes to reach the `after`th
tuple; a marker file keeps the later ones well): `exit` (code 3, after a line on
stderr), `garbage` (writes what is not a message), `hang` (stops answering)."""

import os
import sys
import time

from pystorm import Bolt


class FaultyBolt(Bolt):
    outputs = ["word"]

    def initialize(self, conf, ctx):
        self.mode, self.marker, self.after = sys.argv[1], sys.argv[2], int(sys.argv[3])
        self.seen = 0

    def process(self, tup):
        self.seen += 1
        if self.seen == self.after and _first(self.marker):
            sys.stderr.write(f"faulty bolt: {self.mode} now\n")
            sys.stderr.flush()
            if self.mode == "exit":
                os._exit(3)
            if self.mode == "garbage":
                sys.__stdout__.write("this is not json\nend\n")
                sys.__stdout__.flush()
            if self.mode == "hang":
                time.sleep(3600)
        for word in tup.values[0].split():
            self.emit([word])


def _first(marker):
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


if __name__ == "__main__":
    FaultyBolt().run()
