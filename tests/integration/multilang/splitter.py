"""A pystorm bolt as its users write it: split sentences into words."""

import sys

from pystorm import Bolt


class SplitSentenceBolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        for word in tup.values[0].split():
            self.emit([word])


if __name__ == "__main__":
    SplitSentenceBolt(serializer=sys.argv[1] if len(sys.argv) > 1 else "json").run()
