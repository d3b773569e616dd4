"""A SparkSink (pyarrow writer, commit thread) whose output file system fills up mid-run:
a 4 MiB tmpfs, filled by a file the test writes until ENOSPC. Every commit that fails
fails exactly its batch (its ids come back from the replaying spout), no staging file
is left behind, nothing deadlocks, and once the filler is removed the run completes
with every id written once. Needs root (mount); skipped otherwise."""

from __future__ import annotations

import os
import subprocess

import pytest

pa = pytest.importorskip("pyarrow")

from stormish import LocalCluster, Topology  # noqa: E402
from stormish.testing import poll_for  # noqa: E402

from .ledger import LedgerSpout, read_spout_acks  # noqa: E402
from .spark_sink_parts import HookedSink  # noqa: E402
from .test_spark_sink_kill import output_ids  # noqa: E402

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

IDS = 60_000


@pytest.fixture
def tiny_fs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {made.stderr.strip()}")
    yield str(mnt)
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as exc:
        assert exc.errno == 28, exc  # ENOSPC
    finally:
        os.close(fd)


@pytest.mark.parametrize("ahead", [2, 0], ids=["commit-thread", "inline"])
def test_a_full_disk_fails_exactly_the_batches_it_refused(tmp_path, tiny_fs, ahead):
    ledger, control = str(tmp_path / "ledger"), str(tmp_path / "control")
    out = os.path.join(tiny_fs, "out")
    os.makedirs(ledger)
    os.makedirs(control)
    t = Topology("disk-full", config={"topology.message.timeout.secs": 5})
    t.set_spout("src", LedgerSpout(ledger, IDS))
    s = HookedSink(out, fields=["id"], key="id", batch_rows=1000, batch_seconds=0.5,
                   control=control, commits_ahead=ahead)  # fmt: skip
    t.set_bolt("sink", s).shuffle_grouping("src")
    filler = os.path.join(tiny_fs, "filler")
    with LocalCluster(workers=2) as cluster:
        cluster.submit(t)
        poll_for(lambda: len(output_ids(out)) >= 5_000, 60, 0.05, "5,000 ids written")
        fill(filler)
        poll_for(
            lambda: cluster.statistics(t.name).components["sink"].errors >= 3,
            60, 0.1, "three commits refused",
        )  # fmt: skip
        assert os.listdir(os.path.join(out, "_staging")) == []
        os.unlink(filler)
        stats = cluster.wait_complete(t.name, timeout=240)
        (sink,) = cluster._get(t.name).results()["sink"]
    print(f"\n{ahead=}: src {stats.components['src']}; sink {sink}")
    assert stats.status == "complete"
    assert sink["failed_batches"] >= 3
    assert read_spout_acks(ledger) == set(range(IDS))
    assert output_ids(out) == list(range(IDS))
    assert os.listdir(os.path.join(out, "_staging")) == []
