"""Windows over streams (Storm's windowed bolts and JoinBolt), public API.

    from stormish.windowing import WindowedBolt, Count, Duration, JoinBolt

`WindowedBolt.execute_window(window)` gets sliding, tumbling or session windows of
tuples, in processing time or event time (watermarks, lag, late tuples); `JoinBolt`
joins streams on a key over a window. The logic is pure (manager.py, session.py,
watermark.py) and tested on plain numbers; bolt.py and join.py are the shells.
docs/windows.md describes both.
"""

from .bolt import LATE_FIELDS, WindowedBolt
from .join import JoinBolt
from .spec import Count, Duration, Window

__all__ = ["LATE_FIELDS", "Count", "Duration", "JoinBolt", "Window", "WindowedBolt"]
