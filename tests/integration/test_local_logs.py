"""Worker logs of the local cluster: `stormish run -w 2 --log-dir DIR`
keeps a file per topology and worker, with a line per start, rolled as a supervisor
rolls its workers' logs; without --log-dir the temporary logs are rolled too (one old
file kept), so a long run cannot fill the disk, and removed at exit."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stormish import BasicBolt, LocalCluster, Topology
from stormish.testing import ListSpout, poll_for

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
LINES = 300  # printed, ~100 bytes each: ~15 KB per worker
MAX_BYTES = 4000

TOPOLOGY = textwrap.dedent(
    f"""
    from stormish import BasicBolt, Topology
    from stormish.testing import ListSpout

    class Talk(BasicBolt):
        def execute(self, tup):
            print(f"talk line {{tup.values[0]:04d}} " + "x" * 80)

    # round-robin: both workers' talk tasks print (a locality-aware shuffle keeps the
    # spout's tuples in its worker)
    topology = Topology(
        "chatter",
        config={{"topology.workers": 2, "topology.disable.loadaware.messaging": True}},
    )
    topology.set_spout("s", ListSpout([[i] for i in range({LINES})], fields=["n"]))
    topology.set_bolt("talk", Talk(), parallelism=2).shuffle_grouping("s")
    """
)


def files_of(logs: Path, worker: int) -> list[Path]:
    """The log files of one worker, oldest first (name.log.N ... name.log.1, name.log)."""
    base = logs / f"chatter-worker-{worker}.log"
    rolled = sorted(logs.glob(f"{base.name}.*"), key=lambda p: -int(p.suffix[1:]))
    return [*rolled, base] if base.exists() else rolled


def run(topo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(topo), "-w", "2", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_run_log_dir_keeps_rolled_worker_logs_with_a_line_per_start(tmp_path):
    topo = tmp_path / "chatter.py"
    topo.write_text(TOPOLOGY)
    logs = tmp_path / "logs"
    limit = f"stormish.local.log.max.bytes={MAX_BYTES}"
    for _ in range(2):  # a second run appends, after a start line of its own
        out = run(topo, "--log-dir", str(logs), "-c", limit)
        assert out.returncode == 0, out.stderr
        assert "topology 'chatter': complete" in out.stdout
    said = []
    for worker in (0, 1):
        files = files_of(logs, worker)
        assert len(files) >= 3, files  # rolled: ~30 KB in 4 KB files
        text = "".join(f.read_text() for f in files)
        starts = re.findall(
            rf"^=== \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d worker chatter/{worker} started: "
            r"pid (\d+), restart 0, local run \(pid \d+\) ===$",
            text,
            re.M,
        )
        assert len(starts) == 2 and starts[0] != starts[1], starts
        for f in files:
            assert f.stat().st_size <= MAX_BYTES, (f, f.stat().st_size)
        said += re.findall(r"^\[talk:\d+\] talk line (\d{4}) x+$", text, re.M)
    # every line each run printed is in a log, once per run
    assert sorted(said) == sorted(f"{i:04d}" for i in range(LINES) for _ in range(2))
    assert not [p for p in logs.iterdir() if not p.name.startswith("chatter-worker-")]


def test_run_log_files_are_0600_in_a_0700_directory_under_umask_0(tmp_path):
    """They were 0644 in 0755 (the umask's)."""
    import os
    import stat

    topo = tmp_path / "chatter.py"
    topo.write_text(TOPOLOGY)
    logs = tmp_path / "nested" / "logs"
    out = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", str(topo), "-w", "2", "--log-dir",
         str(logs), "-c", f"stormish.local.log.max.bytes={MAX_BYTES}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, umask=0,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in logs.iterdir()}
    assert len(modes) >= 4 and set(modes.values()) == {0o600}, modes  # rolled ones too
    assert stat.S_IMODE(os.stat(logs).st_mode) == 0o700


class Talk(BasicBolt):
    def execute(self, tup):
        print(f"talk line {tup.values[0]:04d} " + "x" * 80)


def test_temporary_worker_logs_are_rolled_with_one_old_file_and_removed_at_exit():
    # round-robin: both workers' talk tasks print (see above)
    t = Topology(
        "chatter", config={"topology.workers": 2, "topology.disable.loadaware.messaging": True}
    )
    t.set_spout("s", ListSpout([[i] for i in range(LINES)], fields=["n"]))
    t.set_bolt("talk", Talk(), parallelism=2).shuffle_grouping("s")
    with LocalCluster(config={"stormish.local.log.max.bytes": MAX_BYTES}) as c:
        c.submit(t)
        running = c._get("chatter")
        logs = Path(running.group.logdir)

        expected = [
            "chatter-worker-0.log", "chatter-worker-0.log.1",
            "chatter-worker-1.log", "chatter-worker-1.log.1",
        ]  # fmt: skip

        def rolled_and_bounded() -> bool:
            """Every line executed, each worker's log rolled once and no more kept, each
            file within the limit, and fewer lines kept than printed (the oldest went).
            Looked at while the output is still copied (a roll may be under way)."""
            if running.statistics().components["talk"].executed != LINES:
                return False
            try:
                files = sorted(logs.iterdir())
                kept = sum(len(re.findall(r"talk line \d{4}", p.read_text())) for p in files)
                sizes = [p.stat().st_size for p in files]
            except OSError:  # a file rolled away between the listing and the read
                return False
            return (
                [p.name for p in files] == expected and max(sizes) <= MAX_BYTES and 0 < kept < LINES
            )

        poll_for(rolled_and_bounded, 60, 0.05, "every line printed, each log rolled once")
        c.wait_complete("chatter", timeout=60)
    assert not logs.exists()
