"""The closing table fits an 80-column terminal without cutting a number or a header
(rich squeezed it to `compon…`, `execu…` and `881,9…`); piped, it stays
complete and exact; a spout's row shows no `executed` count."""

from __future__ import annotations

import io
import re

from rich.console import Console

from stormish.runtime.stats import ComponentStats
from stormish.summary_table import COLUMNS, fit, plain, render_rich, short


def comp(name: str, kind: str = "bolt", **kw) -> ComponentStats:
    base = dict(
        component=name, kind=kind, tasks=4, emitted=881_912, transferred=0, executed=881_912,
        acked=881_912, failed=0, timed_out=0, execute_latency_ms=0.123,
        complete_latency_ms=0.0, receive_population=0, receive_capacity=0, overflow=0,
        pending_emits=0, backpressure_seconds=45.26, errors=0, dropped={},
    )  # fmt: skip
    base.update(kw)
    return ComponentStats(**base)


BIG = [
    comp("sentences", "spout", emitted=1_234_567, executed=1_234_567, acked=1_234_560,
         failed=7, complete_latency_ms=12.5),
    comp("split-into-words-and-more", emitted=12_345_678, executed=1_234_567,
         acked=1_234_567, errors=3, failed=3),
    comp("count", emitted=12_345_678, executed=12_345_678, acked=12_345_678),
    comp("__acker", "acker", emitted=0, executed=13_580_245, acked=0, tasks=1),
]  # fmt: skip


def rendered(components, width: int) -> str:
    out = io.StringIO()
    render_rich(components, Console(file=out, width=width, force_terminal=False))
    return out.getvalue()


def test_short_numbers():
    assert short(99_999) == "99,999"
    assert short(881_912) == "881.9k"
    assert short(12_345_678) == "12.3M"
    assert short(4_500_000_000) == "4.5G"


def test_the_table_fits_80_columns_and_cuts_nothing():
    text = rendered(BIG, 80)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    assert "…" not in text, text
    header = lines[0].split()
    assert {"component", "executed", "failed", "errors"} <= set(header), text
    for h in header:  # every header shown whole
        assert h in {name for col, _ in COLUMNS for name in col.split()}, text
    assert "12.3M" in text and "1.2M" in text
    table = "\n".join(lines[:5])
    for tok in re.findall(r"[\d.,]+[kMG]?", table):  # no number cut at its end
        assert not tok.endswith(","), text
    assert "left out to fit 80 columns:" in text


def test_a_wide_terminal_shows_every_column_exact():
    text = rendered(BIG, 200)
    assert "12,345,678" in text and "left out" not in text
    assert text.splitlines()[0].split()[:4] == ["component", "tasks", "emitted", "executed"]


def test_a_long_component_name_wraps_rather_than_cutting_numbers():
    long = [comp("a-component-with-a-very-long-name-indeed-more-than-forty-chars")]
    text = rendered(long, 60)
    assert all(len(line) <= 60 for line in text.splitlines()), text
    assert "…" not in text
    assert "881.9k" in text


def test_non_zero_failures_and_errors_are_kept_to_the_last():
    f = fit(BIG, 50)
    assert "failed" in f.headers and "errors" in f.headers and "executed" in f.headers


def test_piped_output_is_complete_and_exact():
    lines = plain(BIG)
    assert lines[0].split() == [
        "component", "tasks", "emitted", "executed", "acked", "failed", "exec", "ms",
        "compl", "ms", "bp", "s", "errors",
    ]  # fmt: skip
    assert "12,345,678" in lines[2] and "split-into-words-and-more" in lines[2]


def test_a_spout_row_shows_no_executed_count():
    f = fit(BIG, None)
    i = f.headers.index("executed")
    assert f.rows[0][i] == "-"
    assert f.rows[2][i] == "12,345,678"


def test_the_first_line_says_the_time_once_and_in_ms_below_a_second():
    from stormish.summary_table import headline

    assert headline("wc", "stopped by --time 2s", 2.071, 1) == (
        "topology 'wc': stopped by --time 2s (ran 2.07s, 1 worker)"
    )
    assert headline("wc", "failed", 0.0123, 2) == "topology 'wc': failed after 12 ms (2 workers)"
    assert headline("wc", "failed", 0.0004, 1) == "topology 'wc': failed after 0.4 ms (1 worker)"
