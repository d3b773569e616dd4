"""How a failed Kafka record is retried: storm-kafka-client's exponential backoff
(`KafkaSpoutRetryExponentialBackoff`), as a small value the spout pickles with it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Retry:
    """A record's first failure waits `initial_delay_secs`, its n-th after that
    `delay_period_secs * 2**(n-1)` seconds, at most `max_delay_secs`, before its replay
    (storm-kafka-client's `nextTime`, so settings ported from Storm wait as they did).
    Past `max_retries` failures (None: retry for ever, Storm's default) the record is
    given up: emitted on the spout's `__dead_letter` stream with the reason, and
    committed past."""

    initial_delay_secs: float = 0.0
    delay_period_secs: float = 0.002
    max_retries: int | None = None
    max_delay_secs: float = 10.0

    def __post_init__(self) -> None:
        for name in ("initial_delay_secs", "delay_period_secs", "max_delay_secs"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or v < 0:
                raise ValueError(f"Retry {name} must be a number >= 0, got {v!r}")
        m = self.max_retries
        if m is not None and (not isinstance(m, int) or isinstance(m, bool) or m < 0):
            raise ValueError(f"Retry max_retries must be an integer >= 0 or None, got {m!r}")

    def may_retry(self, failures: int) -> bool:
        """Whether a record that failed `failures` times is replayed again."""
        return self.max_retries is None or failures <= self.max_retries

    def delay(self, failures: int) -> float:
        if failures <= 1:
            return min(self.max_delay_secs, self.initial_delay_secs)
        exp = min(failures - 1, 60)  # 2**60 periods is past any max_delay already
        return min(self.max_delay_secs, self.delay_period_secs * 2**exp)
