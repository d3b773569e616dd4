"""Storm's flux-wrappers splitsentence.py, written with pystorm (Storm's own uses its
storm.py module): split sentences into words."""

from pystorm import Bolt


class SplitSentenceBolt(Bolt):
    def process(self, tup):
        for word in tup.values[0].split(" "):
            self.emit([word])


if __name__ == "__main__":
    SplitSentenceBolt().run()
