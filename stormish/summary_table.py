"""The closing table of a run: one row per component.

On a terminal it fits the terminal's width without cutting a number or a header: counts
are first abbreviated (881.9k), then columns are left out in the order a reader misses
them least (all-zero columns, then tasks, latencies, backpressure...), saying which;
component names wrap last. Piped, it is plain text with every column and exact numbers,
so scripts and logs get it complete.

A spout executes no tuples: its `executed` counter counts the acks, fails and ticks it
handled (docs/statistics.md), which the table already shows as acked and failed, so a
spout's row shows `-` there instead of a number read as tuples executed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

GAP = 2  # spaces between columns
# (header, stats attribute): the order they are shown in
COLUMNS = (
    ("component", "component"),
    ("tasks", "tasks"),
    ("emitted", "emitted"),
    ("executed", "executed"),
    ("acked", "acked"),
    ("failed", "failed"),
    ("exec ms", "execute_latency_ms"),
    ("compl ms", "complete_latency_ms"),
    ("bp s", "backpressure_seconds"),
    ("errors", "errors"),
)
COUNTS = {"emitted", "executed", "acked", "failed", "errors"}
# Left out to fit, first to last, after the columns that are zero on every row. Never
# left out: component, executed, and failed or errors when any row has some.
DROP_ORDER = ("tasks", "compl ms", "exec ms", "bp s", "emitted", "acked", "errors", "failed")
KEEP = ("component", "executed")
MIN_NAME = 10  # the component column wraps down to this width


def short(n: int) -> str:
    """A count in at most 7 characters: exact below 100,000, else 881.9k, 12.3M, 4.5G."""
    if abs(n) < 100_000:
        return f"{n:,}"
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            v = n / div
            return f"{v:.1f}{unit}" if abs(v) < 1000 else f"{v:,.0f}{unit}"
    return f"{n:,}"  # pragma: no cover


def duration(seconds: float) -> str:
    """A run's length for the summary's first line: `2.07s`, or in milliseconds below a
    second (a run that failed at its first tuples said `failed after 0.00s`)."""
    if seconds >= 1:
        return f"{seconds:.2f}s"
    return f"{seconds * 1000:.{1 if seconds < 0.01 else 0}f} ms"


def headline(name: str, why: str, seconds: float, workers: int) -> str:
    """The summary's first line: `topology 'wc': complete after 2.07s (1 worker)`; a
    run `--time` stopped says so once: `stopped by --time 2s (ran 2.07s, 1 worker)`."""
    n = f"{workers} worker{'s' if workers > 1 else ''}"
    if "--time" in why:
        return f"topology {name!r}: {why} (ran {duration(seconds)}, {n})"
    return f"topology {name!r}: {why} after {duration(seconds)} ({n})"


def _cell(c: Any, header: str, attr: str, exact: bool) -> str:
    if header == "executed" and c.kind == "spout":
        return "-"
    v = getattr(c, attr)
    if header == "component":
        return str(v)
    if header in COUNTS:
        return f"{v:,}" if exact else short(v)
    if header == "tasks":
        return f"{v}"
    if header == "exec ms":
        return f"{v:.3f}"
    return f"{v:.2f}"


def _zero(cells: Sequence[str]) -> bool:
    return all(v in ("0", "0.00", "0.000", "-") for v in cells)


@dataclass
class Fitted:
    headers: list[str]
    rows: list[list[str]]
    left_out: list[str]  # headers of the columns left out to fit
    name_width: int | None  # the component column's width when its names must wrap


def _width(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]


def fit(components: Sequence[Any], width: int | None) -> Fitted:
    """The columns and cells for `width` characters (None: all of them, exact)."""
    exact = [[_cell(c, h, a, True) for h, a in COLUMNS] for c in components]
    headers = [h for h, _ in COLUMNS]
    if width is None:
        return Fitted(headers, exact, [], None)

    def total(hs: list[str], rs: list[list[str]]) -> int:
        return sum(_width(hs, rs)) + GAP * (len(hs) - 1)

    rows = exact
    if total(headers, rows) > width:
        rows = [[_cell(c, h, a, False) for h, a in COLUMNS] for c in components]
    left_out: list[str] = []

    def drop(h: str) -> None:
        i = headers.index(h)
        del headers[i]
        for r in rows:
            del r[i]
        left_out.append(h)

    zero_first = [h for h in DROP_ORDER if _zero([r[headers.index(h)] for r in rows])]
    for h in (*zero_first, *(h for h in DROP_ORDER if h not in zero_first)):
        if total(headers, rows) <= width:
            break
        if h in ("failed", "errors") and h not in zero_first:
            continue  # a non-zero failure count is never left out
        drop(h)
    name_width = None
    over = total(headers, rows) - width
    if over > 0:
        name_width = max(MIN_NAME, _width(headers, rows)[0] - over)
    return Fitted(headers, rows, left_out, name_width)


def render_rich(components: Sequence[Any], console: Any) -> None:
    """The table on a terminal (`console`: rich's), fitted to its width."""
    from rich.table import Table

    f = fit(components, console.width)
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, GAP // 2))
    for i, h in enumerate(f.headers):
        if i == 0:
            table.add_column(h, overflow="fold", width=f.name_width)
        else:
            table.add_column(h, justify="right", no_wrap=True)
    for r in f.rows:
        table.add_row(*r)
    console.print(table, crop=False)
    if f.left_out:
        console.print(
            f"(left out to fit {console.width} columns: {', '.join(f.left_out)}; "
            "piped or --json, the table has them all)",
            highlight=False,
        )


def plain(components: Sequence[Any]) -> list[str]:
    """The table as plain lines for pipes and scripts: every column, exact numbers."""
    f = fit(components, None)
    widths = _width(f.headers, f.rows)
    out = []
    for r in [f.headers, *f.rows]:
        cells = [
            f"{v:<{w}}" if i == 0 else f"{v:>{w}}"
            for i, (v, w) in enumerate(zip(r, widths, strict=True))
        ]
        out.append((" " * GAP).join(cells).rstrip())
    return out
