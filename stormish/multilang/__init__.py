"""Storm's multilang protocol: components written in any language, run as subprocesses.

`ShellBolt(command, outputs, streams, serializer)` and `ShellSpout(...)` speak to their
child exactly as Storm's ShellBolt and ShellSpout do (docs/multilang.md), so a pystorm or
storm.js component runs unchanged. This package imports nothing from the runtime.
"""

from .bolt import ShellBolt
from .shell import ShellError, SubprocessError
from .spout import ShellSpout

__all__ = ["ShellBolt", "ShellError", "ShellSpout", "SubprocessError"]
