"""`stormish kill -w` / `rebalance -w` (cli_cluster.py): a wait that is not a finite
number of seconds up to Storm's largest is refused by the command, before any nimbus
is asked (found by a bug hunt: -w inf left a topology killing for good, -w nan killed
it at once and said "in nans")."""

from __future__ import annotations

from unittest import mock

import pytest
from click.testing import CliRunner

from stormish import cli_cluster

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("wait", ["inf", "nan", "-inf", "-1", "1e400", "2147483648", "x"])
@pytest.mark.parametrize("command", ["kill", "rebalance"])
def test_a_wait_that_is_not_seconds_is_refused_naming_it(command: str, wait: str) -> None:
    extra = ["-n", "1"] if command == "rebalance" else []
    with mock.patch.object(cli_cluster, "call") as call:
        out = CliRunner().invoke(
            getattr(cli_cluster, command), ["t", *extra, "-w", wait], catch_exceptions=False
        )
    assert out.exit_code == 2, out.output
    assert "Invalid value for '-w' / '--wait'" in out.output
    assert "not a finite number of seconds from 0 to 2147483647" in out.output
    call.assert_not_called()


def test_a_wait_in_range_is_sent_as_seconds() -> None:
    with mock.patch.object(cli_cluster, "call", return_value=2.5) as call:
        out = CliRunner().invoke(cli_cluster.kill, ["t", "-w", "2.5"], catch_exceptions=False)
    assert out.exit_code == 0 and "workers stop in 2.5s" in out.output
    (_nimbus, _keys, verb, req), _ = call.call_args
    assert (verb, req.name, req.wait) == ("kill", "t", 2.5)
    with mock.patch.object(cli_cluster, "call", return_value=2147483647.0):
        out = CliRunner().invoke(cli_cluster.kill, ["t", "-w", "2147483647"])
    assert out.exit_code == 0, out.output
