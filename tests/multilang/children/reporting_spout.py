"""A pystorm spout that reports an error with pystorm's raise_exception (without
raising, as streamparse users report a bad record and go on) on its 3rd next_tuple, and
emits v1..v19 otherwise. raise_exception writes `error` and `sync`, then Spout._run
writes the `sync` of the `next`: two syncs for one command."""

from pystorm import Spout


class Reporting(Spout):
    outputs = ["v"]

    def initialize(self, conf, ctx):
        self.n = 0

    def next_tuple(self):
        self.n += 1
        if self.n == 3:
            self.raise_exception(ValueError("bad record 3, skipped"))
        elif self.n < 20:
            self.emit([f"v{self.n}"], tup_id=f"m{self.n}")


if __name__ == "__main__":
    Reporting().run()
