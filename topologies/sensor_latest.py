"""A sensor stream where only the newest reading matters: per-edge channel policies.

Twenty sensors report 2,000 readings each, far faster than the "control" bolt can act
(it takes 2 ms a reading). On Storm's edge every reading would queue and the spout would
be held back; here the control edge is `overflow="latest"` with `deadline_ms=20`: the
bolt always acts on the newest reading per task, a reading that waited more than 20 ms
is still acted on but marked (`tup.deadline_missed`), and the readings it skipped are
counted as overwritten. The "archive" bolt reads the same stream with `drop_oldest`
(the newest 500 kept) and `lifespan_ms=250`: an archive of recent readings that never
holds anything older than a quarter of a second.

Run: stormish run topologies/sensor_latest.py
The closing table's edge section shows what each edge kept, let go and why.
"""

import time

from stormish import BasicBolt, Spout, Topology

SENSORS = 20
READINGS = 2_000


class Sensors(Spout):
    outputs = ["sensor", "seq", "value"]

    def open(self, conf, context):
        self.seq = 0

    def next_tuple(self):
        if self.seq >= READINGS:
            self.finish()
            return
        for s in range(SENSORS):
            self.emit((s, self.seq, (self.seq * 7 + s) % 100))
        self.seq += 1


class Control(BasicBolt):
    """Acts on the newest reading; slow (an actuator's round trip)."""

    def prepare(self, conf, context):
        self.acted = self.late = 0

    def execute(self, tup):
        time.sleep(0.002)
        self.acted += 1
        self.late += tup.deadline_missed

    def result(self):
        return {"acted": self.acted, "late": self.late}


class Archive(BasicBolt):
    def prepare(self, conf, context):
        self.kept = 0

    def execute(self, tup):
        self.kept += 1

    def result(self):
        return {"kept": self.kept}


topology = Topology("sensors", config={"topology.acker.executors": 0})
topology.set_spout("sensors", Sensors())
topology.set_bolt("control", Control(), parallelism=2).shuffle_grouping(
    "sensors", overflow="latest", deadline_ms=20
)
topology.set_bolt("archive", Archive()).shuffle_grouping(
    "sensors", overflow="drop_oldest", capacity=500, lifespan_ms=250
)
