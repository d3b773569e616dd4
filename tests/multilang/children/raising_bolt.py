"""A pystorm bolt that goes on after an exception (exit_on_exception = False): it works
1.5 s on row0 and raises (pystorm's raise_exception writes `error`, then a `sync` that
answers no heartbeat); every other row takes 0.4 s and is emitted."""

import time

from pystorm import Bolt


class Raising(Bolt):
    outputs = ["v"]
    exit_on_exception = False

    def process(self, tup):
        v = tup.values[0]
        time.sleep(1.5 if v == "row0" else 0.4)  # work; a heartbeat is written meanwhile
        if v == "row0":
            raise ValueError("bad row0")
        self.emit([v])


if __name__ == "__main__":
    Raising().run()
