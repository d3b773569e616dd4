"""Which `sync` of a bolt's child answers a heartbeat (ShellBolt's side, no process)."""

from __future__ import annotations

import pytest

from stormish.multilang import ShellBolt

pytestmark = pytest.mark.timeout(30)


class AnsweredChild:
    """A child whose every sync would answer a heartbeat: 7 offered messages before it."""

    def synced(self):
        return 7


def test_the_sync_pystorm_sends_after_an_error_answers_no_heartbeat():
    """pystorm's raise_exception writes `error`, then a sync of its own: taken for a
    heartbeat's answer, it let a run with acking off end before the child's emits."""
    reported = []
    bolt = ShellBolt(["child"], ["v"])
    bolt.inputs, bolt._synced, bolt._after_error = {}, 0, False  # as prepare leaves them
    bolt.report_error = reported.append
    bolt.child = AnsweredChild()  # type: ignore[assignment]
    assert bolt._command("error", {"command": "error", "msg": "boom"})
    assert bolt._command("sync", {"command": "sync"}) and bolt._synced == 0
    assert bolt._command("sync", {"command": "sync"}) and bolt._synced == 7
    assert [str(e) for e in reported] == ["Shell Process Exception: boom"]
