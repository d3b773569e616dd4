"""Components for the SparkSink commit-thread fault tests (worker processes import them).

`HookedSink` is a SparkSink (pyarrow writer, commit thread) whose commit thread can be
stopped at one point of one commit, as a test asks through files in a control directory:

- `hold-<where>-<n>` names the moment (`before`: the batch is staged, not linked;
  `after`: linked, its tuples not acked yet) and the commit (the nth publish of this
  incarnation); the commit thread creates `held` there and waits for good (the
  test kills the worker), unless `held` already exists (a restarted incarnation);
- `slow` (a number of seconds): each commit sleeps that long first, on the commit thread
  only (a file system that stalls); `stall`: the one commit that takes the file (renames
  it to `stall.taken`) sleeps that long.

`result()` adds `most_committing`: the most commits that waited for the commit thread
at a cut. Every committed row is read back from the Parquet files themselves, so what
is checked is the output a reader sees.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from stormish.spark import commit as commit_module
from stormish.spark.sink import SparkSink


class HookedSink(SparkSink):
    def __init__(self, *args: Any, control: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.control = control

    def prepare(self, conf, context):
        super().prepare(conf, context)
        ctl = self.control
        hold = next((f for f in os.listdir(ctl) if f.startswith("hold-")), None)
        if hold is None or os.path.exists(os.path.join(ctl, "held")):
            return
        _, where, nth = hold.split("-", 2)
        nth = int(nth)
        real = commit_module.publish
        calls = [0]

        def publish(tmp: str, final: str, durable: bool) -> bool:
            calls[0] += 1
            if calls[0] != nth:
                return real(tmp, final, durable)
            if where == "before":
                _held(ctl, final)
            done = real(tmp, final, durable)
            _held(ctl, final)
            return done

        commit_module.publish = publish

    def _write(self, rows: list) -> None:
        stall = os.path.join(self.control, "stall")
        try:
            os.rename(stall, stall + ".taken")  # one commit takes it
        except FileNotFoundError:
            pass
        else:
            with open(stall + ".taken") as f:
                time.sleep(float(f.read()))
        slow = os.path.join(self.control, "slow")
        if os.path.exists(slow):
            with open(slow) as f:
                time.sleep(float(f.read() or 0))
        super()._write(rows)

    def flush(self) -> None:
        super().flush()
        self.most_committing = max(getattr(self, "most_committing", 0), self._committing)

    def result(self):
        most = getattr(self, "most_committing", 0)
        return {**self.statistics(), "pid": os.getpid(), "most_committing": most}


def _held(ctl: str, final: str) -> None:
    tmp = os.path.join(ctl, "held.tmp")
    with open(tmp, "w") as f:
        f.write(os.path.basename(final))
    os.rename(tmp, os.path.join(ctl, "held"))
    threading.Event().wait(600)  # killed while waiting
