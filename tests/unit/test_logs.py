"""The log plumbing on its own: rolling files, reading pieces, tags, filtering."""

from __future__ import annotations

import io
import logging

from stormish import logs


def test_a_rotating_file_rolls_past_its_size_and_keeps_its_backups(tmp_path):
    path = str(tmp_path / "w.log")
    f = logs.RotatingFile(path, max_bytes=100, backups=2)
    for i in range(12):
        f.write(f"line {i:02d} {'x' * 20}\n".encode())  # 29 bytes a line
    f.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["w.log", "w.log.1", "w.log.2"]
    assert (tmp_path / "w.log").stat().st_size <= 100
    assert (tmp_path / "w.log").read_text().splitlines()[-1].startswith("line 11 ")
    assert (tmp_path / "w.log.2").read_text().startswith("line 03 ")  # older ones dropped


def test_log_files_are_0600_in_a_0700_directory_whatever_the_umask(tmp_path):
    """Worker logs were 0644 in 0755 directories."""
    import os
    import stat

    def mode(p) -> int:
        return stat.S_IMODE(os.stat(p).st_mode)

    old = os.umask(0)
    try:
        where = logs.private_dir(str(tmp_path / "a" / "logs"))
        f = logs.RotatingFile(os.path.join(where, "w.log"), max_bytes=50, backups=1)
        for _ in range(4):
            f.write(b"x" * 40 + b"\n")  # rolled: w.log.1 and a new w.log
        f.close()
        once = logs.RotatingFile(os.path.join(where, "o.log"), max_bytes=50, backups=0)
        once.write(b"y" * 60 + b"\n")
        once.write(b"y\n")  # rolled without a backup: the file afresh
        once.close()
        old_file = tmp_path / "older.log"  # written by an earlier version, 0644
        old_file.write_bytes(b"before\n")
        old_file.chmod(0o644)
        logs.RotatingFile(str(old_file)).close()
        shared = tmp_path / "shared"  # an operator's directory keeps its mode
        shared.mkdir(mode=0o755)
        logs.private_dir(str(shared))
    finally:
        os.umask(old)
    assert mode(where) == 0o700
    assert sorted(os.listdir(where)) == ["o.log", "w.log", "w.log.1"]
    assert {n: mode(os.path.join(where, n)) for n in os.listdir(where)} == {
        "o.log": 0o600, "w.log": 0o600, "w.log.1": 0o600
    }  # fmt: skip
    assert (tmp_path / "a" / "logs" / "o.log").read_bytes() == b"y\n"
    assert mode(old_file) == 0o600 and old_file.read_bytes() == b"before\n"
    assert mode(shared) == 0o755


def test_read_log_gives_whole_lines_a_tail_and_starts_over_after_a_roll(tmp_path):
    path = tmp_path / "w.log"
    path.write_text("".join(f"line {i}\n" for i in range(100)))
    tail = logs.read_log(str(path), None, 30)
    assert tail["data"].startswith("line 9") and tail["data"].endswith("line 99\n")
    assert tail["next"] == [path.stat().st_ino, path.stat().st_size]
    again = logs.read_log(str(path), tail["next"], 30)
    assert again["data"] == "" and again["next"] == tail["next"]
    head = logs.read_log(str(path), 0, 20)
    assert head["data"] == "line 0\nline 1\n" and head["next"][1] == 14
    path.write_text("new\n")  # rolled: the old offset is past the end
    assert logs.read_log(str(path), tail["next"], 30)["data"] == "new\n"
    assert logs.read_log(str(tmp_path / "none.log"), None, 30)["missing"] is True


def test_a_follower_loses_no_line_when_the_file_rolls_between_reads(tmp_path):
    """`stormish logs --follow`: what was written to the file after the last read and
    before it rolled (it is `w.log.1` now) comes first, then the new file's lines."""
    path = str(tmp_path / "w.log")
    f = logs.RotatingFile(path, max_bytes=200, backups=2)
    got: list[str] = []
    at = 0  # from the file's start: a bare offset, as a first ask may give
    written = 0
    for _burst in range(6):
        for _ in range(4):
            f.write(f"line {written:03d} {'x' * 12}\n".encode())  # 22 bytes a line
            written += 1
        while True:  # read until caught up, as the follower's polls do
            piece = logs.read_log(path, at, 64)
            at = piece["next"]
            if not piece["data"]:
                break
            got += piece["data"].splitlines()
    f.close()
    assert len(list(tmp_path.iterdir())) == 3  # it rolled, more than once
    assert got == [f"line {i:03d} {'x' * 12}" for i in range(written)]


def test_prints_and_records_carry_the_running_components_tag():
    raw = io.StringIO()
    out = logs.TaggedOutput(raw)
    logs.set_running("split:3")
    try:
        out.write("hello\nworld")
        out.write(" again\n")
        logs.set_running(None)
        out.write("untagged\n")
    finally:
        logs.set_running(None)
    assert raw.getvalue() == "[split:3] hello\n[split:3] world again\nuntagged\n"
    stream = io.StringIO()
    logs.configure("worker wc/1", "INFO", stream)
    try:
        logs.set_running("count:4")
        logging.getLogger("user").warning("counted %d", 7)
    finally:
        logs.set_running(None)
        logging.getLogger().handlers.clear()
    line = stream.getvalue()
    assert line.endswith(" WARNING worker wc/1 [count:4] user: counted 7\n"), line


def test_component_lines_keep_a_components_records_and_their_tracebacks():
    text = "\n".join(
        [
            "=== 2026-11-23 10:00:00 worker wc/0 started: pid 1 ===",
            "[split:3] hello",
            "2026-11-23 10:00:01.000 ERROR worker wc/0 [split:3] stormish.executor: boom",
            "Traceback (most recent call last):",
            '  File "t.py", line 1, in execute',
            "ValueError: boom",
            "[count:4] other",
            "2026-11-23 10:00:02.000 INFO  worker wc/0 stormish.worker: started",
        ]
    )
    assert logs.component_lines(text, "split") == [
        "[split:3] hello",
        "2026-11-23 10:00:01.000 ERROR worker wc/0 [split:3] stormish.executor: boom",
        "Traceback (most recent call last):",
        '  File "t.py", line 1, in execute',
        "ValueError: boom",
    ]
