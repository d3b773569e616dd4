"""What the CURVE keys of a local run cost: bench/workers.py's line (b), const spout
(worker 0) -> null bolt (worker 1), every tuple across the link, with the run's own key
pair (the default since issue 11) and without keys (the former default, loopback only,
put back here by replacing `local_security` for the bench alone). Runs alternate
between the two; the median of --repeat runs each is printed.

Run: python bench/keys.py [--tuples N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from stormish.local import workers as wg  # noqa: E402
from stormish.transport.security import LOOPBACK  # noqa: E402
from workers import const_across  # noqa: E402

KEYED = wg.local_security


def unkeyed() -> tuple:
    return LOOPBACK, None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tuples", type=int, default=3_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    os.environ.pop("STORMISH_KEYS", None)
    rates: dict[str, list[float]] = {"without keys": [], "with keys": []}
    for _ in range(args.repeat):
        for label, policy in (("without keys", unkeyed), ("with keys", KEYED)):
            wg.local_security = policy
            rates[label].append(const_across(args.tuples))
    wg.local_security = KEYED
    for label, got in rates.items():
        each = " ".join(f"{r / 1e6:.2f}" for r in got)
        print(
            f"(b) const -> null across 2 workers, {label:12}: "
            f"{statistics.median(got) / 1e6:6.2f} M tuples/s (median; runs {each})"
        )
    cost = 1 - statistics.median(rates["with keys"]) / statistics.median(rates["without keys"])
    print(f"    cost of the keys: {cost:+.1%} of the throughput")


if __name__ == "__main__":
    main()
