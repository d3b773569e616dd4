"""A pystorm bolt that emits each tuple's values again (auto-acked). argv: serializer."""

import sys

from pystorm import Bolt


class Echo(Bolt):
    def process(self, tup):
        self.emit(tup.values)


if __name__ == "__main__":
    Echo(serializer=sys.argv[1] if len(sys.argv) > 1 else "json").run()
