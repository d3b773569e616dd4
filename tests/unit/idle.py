"""Components that do nothing, for the unit tests of wiring (plans, collectors, ackers,
lint, config): only what they declare matters, so a test subclasses one and names its
`outputs` or `streams`."""

from __future__ import annotations

from stormish import BasicBolt, Bolt, Spout


class IdleSpout(Spout):
    def next_tuple(self):
        pass


class IdleBolt(Bolt):
    def execute(self, tup):
        pass


class IdleBasicBolt(BasicBolt):
    def execute(self, tup):
        pass
