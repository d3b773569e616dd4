"""A reliable pystorm spout that misbehaves once, at its `after`th emit (the first of
its processes to get there; a marker file keeps the later ones well): `exit` (code 4)
or `hang` (stops answering). A restarted one starts again from the first sentence."""

import os
import sys
import time
from collections import deque

from pystorm import Spout


class CrashySpout(Spout):
    def initialize(self, conf, ctx):
        self.mode, self.marker, self.after = sys.argv[1], sys.argv[2], int(sys.argv[3])
        self.todo = deque(range(int(conf["test.sentences"])))
        self.pending = {}
        self.emitted = 0

    def next_tuple(self):
        if not self.todo:
            return
        if self.emitted + 1 == self.after and _first(self.marker):
            sys.stderr.write(f"crashy spout: {self.mode} now\n")
            sys.stderr.flush()
            if self.mode == "exit":
                os._exit(4)
            time.sleep(3600)
        i = self.todo.popleft()
        self.pending[i] = True
        self.emitted += 1
        self.emit([f"sentence {i}"], tup_id=i)

    def ack(self, tup_id):
        del self.pending[tup_id]  # an id it never emitted would be a KeyError: a crash

    def fail(self, tup_id):
        del self.pending[tup_id]
        self.todo.append(tup_id)


def _first(marker):
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


if __name__ == "__main__":
    CrashySpout().run()
