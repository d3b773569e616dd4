"""Shared memory between workers on one host: large buffers written once by the sender,
read in place by the receiver, reused only once the receiver released them.

The sender owns a pool of segments, files in /dev/shm named `stormish-shm-<pid>-<token>-<n>`
(the pid lets a supervisor or a local run remove a crashed worker's segments:
`remove_for`). A TUPLES message whose pickle has large out-of-band buffers (numpy arrays,
`bytes` of `frames.OOB_THRESHOLD` bytes or more) goes as an SHM_TUPLES message: the pickle
and a small frame of references (segment, offset, length), the buffers packed into
segments of `SEGMENT` bytes (a larger buffer has a segment of its own). The receiver maps
each segment once and hands the unpickler a view per buffer (a ctypes array over the
mapping: an object whose lifetime tracks every view made of it); a numpy array is then
backed by the segment. When every view of one segment's buffers in one message is gone
(the executor finished with the tuple and nothing the bolt kept refers to it), the
receiver sends the segment's number back (SHM_RELEASE) and the sender may reuse it. A
sender with no free segment and no room to make one under `topology.transport.shm.pool.mb`
puts that peer under backpressure until a release comes (`STALL` seconds at most: past
that, the message goes through ZeroMQ, so a bolt that keeps every array it gets slows its
sender down instead of stopping it).

Same host is proven, not assumed: the sender's HELLO names its prefix, and a receiver that
finds the sender's probe file (`<prefix>probe`) answers that it can map the segments (a
CONTROL message); only then does the sender (`auto`) use the pool for that peer. Names from a
peer are read only on an authenticated link, must match the pattern, and offsets are
checked against the mapping: a bad reference is a malformed message, never a crash.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import stat
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

SHM_DIR = "/dev/shm"
NAME = "stormish-shm-"
SEGMENT = 4 * 1024 * 1024
ALIGN = 64
STALL = 1.0
# mapped with its pages in place: no page fault a page on the first message through it
_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
_PREFIX = re.compile(r"stormish-shm-(\d+)-([0-9a-f]{8})-\Z")
_COUNT = struct.Struct("!I")
_REF = struct.Struct("!IQQ")  # segment, offset, length


class ShmError(ValueError):
    """A reference that cannot be mapped (a bad name, segment or range)."""


def usable() -> bool:
    """This host has a shared-memory directory we may write to."""
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)


def remove_for(pid: int | None) -> int:
    """Remove every segment of worker process `pid` (it exited or was killed); how many."""
    if pid is None:
        return 0
    start, n = f"{NAME}{pid}-", 0
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return 0
    for name in names:
        if name.startswith(start):
            try:
                os.unlink(os.path.join(SHM_DIR, name))
                n += 1
            except OSError:
                pass
    return n


def leftovers(pid: int | None = None) -> list[str]:
    """Segments in /dev/shm (of `pid`, or of any worker): what a test expects to be none."""
    start = NAME if pid is None else f"{NAME}{pid}-"
    try:
        return sorted(n for n in os.listdir(SHM_DIR) if n.startswith(start))
    except OSError:
        return []


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


class Pool:
    """The sender's segments. `place` runs on the thread that encodes (the transfer
    thread or the scheduler serving the link); `release` on the receiving one."""

    def __init__(self, limit_bytes: int):
        self.limit = limit_bytes
        self.token = os.urandom(4)  # secrets' own source (secrets costs hmac's import)
        self.prefix = f"{NAME}{os.getpid()}-{self.token.hex()}-"
        self._maps: list[mmap.mmap | None] = []
        self._sizes: list[int] = []
        self._free: dict[int, list[int]] = {}
        self._lent: dict[int, int] = {}  # segment -> the peer it is lent to
        self._lock = threading.Lock()
        self.used = 0
        self.returned = 0  # releases taken: the encoding side compares it to unblock
        self.bad_releases = 0
        self.failed = 0  # segments that could not be made (no space): ZeroMQ instead
        fd = os.open(self._path("probe"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)

    def _path(self, suffix: Any) -> str:
        return os.path.join(SHM_DIR, f"{self.prefix}{suffix}")

    def place(self, peer: int, buffers: Sequence[Any]) -> bytes | None:
        """Write `buffers` (PickleBuffers) into segments lent to `peer`; the references
        frame, or None when there is no room now (the caller waits for a release).
        Raises `ShmError` when these buffers can never go this way (too large, no space)."""
        refs: list[tuple[int, int, int]] = []
        taken: list[int] = []
        seg, size, off = -1, 0, 0
        for pb in buffers:
            raw = pb.raw()
            n = raw.nbytes
            if seg < 0 or off + n > size:
                seg = self._take(peer, max(SEGMENT, _pow2(n)), taken)
                if seg < 0:
                    self._give_back(taken)
                    return None
                size, off = self._sizes[seg], 0
            mm = self._maps[seg]
            assert mm is not None
            mm[off : off + n] = raw
            refs.append((seg, off, n))
            off = (off + n + ALIGN - 1) // ALIGN * ALIGN
        return _COUNT.pack(len(refs)) + b"".join(_REF.pack(*r) for r in refs)

    def _take(self, peer: int, size: int, taken: list[int]) -> int:
        if size > self.limit:
            self._give_back(taken)
            raise ShmError(f"a buffer of {size} bytes is more than the pool ({self.limit})")
        with self._lock:
            free = self._free.get(size)
            if free:
                seg = free.pop()
            else:
                if self.used + size > self.limit:
                    self._drop_free_locked()
                if self.used + size > self.limit:
                    return -1
                seg = self._make_locked(size)
            self._lent[seg] = peer
        taken.append(seg)
        return seg

    def _make_locked(self, size: int) -> int:
        seg = len(self._maps)
        path = self._path(seg)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)  # no space: an error now, not SIGBUS later
            mm = mmap.mmap(fd, size, flags=_FLAGS)
        except OSError as exc:
            os.unlink(path)
            self.failed += 1
            raise ShmError(f"cannot make a {size}-byte segment in {SHM_DIR}: {exc}") from None
        finally:
            os.close(fd)
        self._maps.append(mm)
        self._sizes.append(size)
        self.used += size
        return seg

    def _drop_free_locked(self) -> None:
        """Unlink free segments (of other sizes) to make room for a new size."""
        for segs in self._free.values():
            for seg in segs:
                self._retire_locked(seg)
            segs.clear()

    def _retire_locked(self, seg: int) -> None:
        """Unmap and unlink one segment for good (its number is never reused)."""
        mm = self._maps[seg]
        if mm is not None:
            mm.close()
            self._maps[seg] = None
            self.used -= self._sizes[seg]
            _unlink(self._path(seg))

    def _give_back(self, taken: list[int]) -> None:
        with self._lock:
            for seg in taken:
                del self._lent[seg]
                self._free.setdefault(self._sizes[seg], []).append(seg)
        taken.clear()

    def release(self, peer: int, segs: Sequence[int]) -> None:
        """`peer` is done with these segments (a release from any other peer, or for a
        segment not lent, or retired, is counted and ignored)."""
        with self._lock:
            for seg in segs:
                if self._lent.get(seg) != peer:
                    self.bad_releases += 1
                    continue
                del self._lent[seg]
                self._free.setdefault(self._sizes[seg], []).append(seg)
            self.returned += 1

    def forget(self, peer: int) -> None:
        """`peer` restarted or moved: what it held will never be released. Those
        segments are retired (unlinked), not reused: a message to its former incarnation
        still in flight may reach the new one, which must not read another message's
        bytes there (it cannot open a retired name: the message is dropped, counted)."""
        with self._lock:
            for seg in [s for s, p in self._lent.items() if p == peer]:
                del self._lent[seg]
                self._retire_locked(seg)
            self.returned += 1

    def lent(self) -> int:
        return len(self._lent)

    def close(self) -> None:
        with self._lock:
            for seg, mm in enumerate(self._maps):
                if mm is not None:
                    _unlink(self._path(seg))
                    try:
                        mm.close()
                    except BufferError:
                        pass
            self._maps = [None] * len(self._maps)
            _unlink(self._path("probe"))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def token_of(prefix: str) -> bytes | None:
    """The pool token a prefix names (releases carry it: a restarted peer has another)."""
    m = _PREFIX.match(prefix)
    return bytes.fromhex(m.group(2)) if m else None


def valid_prefix(prefix: Any) -> bool:
    return type(prefix) is str and _PREFIX.match(prefix) is not None


def can_map(prefix: Any) -> bool:
    """A peer's segments are readable here (its probe file exists: same host)."""
    return valid_prefix(prefix) and os.path.exists(os.path.join(SHM_DIR, f"{prefix}probe"))


class Lease:
    """One segment's buffers in one received message: released when the last is gone."""

    __slots__ = ("seg", "left", "done")

    def __init__(self, seg: int, done: Callable[[int], None]):
        self.seg, self.left, self.done = seg, 0, done

    def drop(self) -> None:
        self.left -= 1
        if self.left == 0:
            self.done(self.seg)


class Reader:
    """The receiver's mappings of its peers' segments, one per segment, kept while the
    peer's incarnation lives (a restart names a new prefix; the old mappings go when the
    last view of them does)."""

    def __init__(self) -> None:
        self._peers: dict[int, tuple[str, dict[int, mmap.mmap]]] = {}

    def know(self, peer: int, prefix: Any) -> bool:
        if not can_map(prefix):
            return False
        known = self._peers.get(peer)
        if known is None or known[0] != prefix:
            self._peers[peer] = (prefix, {})
        return True

    def forget(self, peer: int) -> None:
        self._peers.pop(peer, None)

    def mapped(self, peer: int) -> int:
        """Segments of `peer` mapped here (statistics, tests)."""
        known = self._peers.get(peer)
        return 0 if known is None else len(known[1])

    def prefix(self, peer: int) -> str | None:
        known = self._peers.get(peer)
        return known[0] if known is not None else None

    def views(self, peer: int, refs: Any, done: Callable[[int], None]) -> list[Any]:
        """A buffer per reference; `done(segment)` runs when every view of that
        segment's buffers is gone (any thread, or the garbage collector)."""
        import weakref

        known = self._peers.get(peer)
        if known is None:
            raise ShmError(f"worker {peer} sent shared memory but never named its segments")
        prefix, maps = known
        try:
            (count,) = _COUNT.unpack_from(refs)
            if len(refs) != _COUNT.size + count * _REF.size:
                raise ShmError(f"references frame: {len(refs)} bytes for {count} references")
            items = [_REF.unpack_from(refs, _COUNT.size + i * _REF.size) for i in range(count)]
        except struct.error as exc:
            raise ShmError(f"references frame: {exc}") from None
        out: list[Any] = []
        leases: dict[int, Lease] = {}
        for seg, off, n in items:
            mm = maps.get(seg)
            if mm is None:
                _prune(prefix, maps)
                mm = maps[seg] = _map(prefix, seg)
            if off + n > len(mm) or n == 0:
                raise ShmError(f"segment {seg}: {off}+{n} is past its {len(mm)} bytes")
            view = (ctypes.c_ubyte * n).from_buffer(mm, off)
            lease = leases.get(seg)
            if lease is None:
                lease = leases[seg] = Lease(seg, done)
            lease.left += 1
            weakref.finalize(view, lease.drop).atexit = False
            out.append(view)
        return out


def _prune(prefix: str, maps: dict[int, mmap.mmap]) -> None:
    """Before a sender's new segment is mapped: drop the mappings of those it retired
    (unlinked to make room for another size: it makes new segments only then, and never
    names a retired one again). Kept, every retired segment's tmpfs pages stayed pinned
    here for the sender's whole life. A view still out keeps its mapping until it goes."""
    for seg in [s for s in maps if not os.path.exists(os.path.join(SHM_DIR, f"{prefix}{s}"))]:
        del maps[seg]


def _map(prefix: str, seg: int) -> mmap.mmap:
    path = os.path.join(SHM_DIR, f"{prefix}{seg}")
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except OSError as exc:
        raise ShmError(f"cannot open segment {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            raise ShmError(f"segment {path} is not a non-empty file")
        return mmap.mmap(fd, info.st_size, flags=_FLAGS)
    finally:
        os.close(fd)
