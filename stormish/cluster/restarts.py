"""When a supervisor starts a dead worker again, and how a death is told.

A worker that crashes on its input crashes again as soon as it is back: restarting it
at once, over and over, burns a core and fills the log without a chance of recovery
(a sick host, a poison message, a bolt whose `prepare` fails). So the first crash
after a good run restarts at once (a kill -9 or a lost OOM gamble comes back without
delay), and each further crash in a row waits twice as long, up to a ceiling:
tenacity's exponential wait, as in the nimbus client. A worker that stayed up longer
than the ceiling has recovered: its next crash counts as a first one again.

Pure: the supervisor gives the clock, so tests step through a crash loop without
waiting for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenacity import RetryCallState, wait_exponential

from ..errors import ConfigError


@dataclass(frozen=True)
class RestartPolicy:
    """`base` seconds before the second restart in a row, doubled after each, at most
    `ceiling`; `base` 0 restarts at once every time (Storm's supervisor)."""

    base: float = 1.0
    ceiling: float = 30.0

    def __post_init__(self) -> None:
        if self.base < 0 or self.ceiling < self.base:
            raise ConfigError(
                f"--restart-backoff {self.base:g} and --restart-backoff-max "
                f"{self.ceiling:g}: need 0 <= backoff <= max"
            )

    def delay(self, crashes: int) -> float:
        """Seconds to wait before restarting after the `crashes`-th crash in a row."""
        if crashes <= 1 or self.base == 0:
            return 0.0
        wait = wait_exponential(multiplier=self.base, max=self.ceiling)
        state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]
        state.attempt_number = crashes - 1
        return float(wait(state))

    def crashes_after(self, crashes: int, lived: float) -> int:
        """The count in a row once a worker that lived `lived` seconds died."""
        return 1 if lived > self.ceiling else crashes + 1


def last_line(path: str, limit: int = 240) -> str | None:
    """The last non-empty line of a worker's log: for a Python crash, the exception."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return None
