"""Large buffers between workers on the ZeroMQ path, sealed with AES-256-GCM on a
socket of their own, beside the CURVE link that carries everything else.

Why: every worker link is CURVE-encrypted (docs/security.md), and libzmq's CURVE
(libsodium's XSalsa20-Poly1305, ~1.5 GB/s a core here) costs ~70 us of CPU a 64 KiB
array, sender and receiver together: half of what crossing costs (bench/payloads.py:
10-12k arrays/s keyed against 24-25k in the clear). AES-256-GCM with the CPU's AES
instructions seals the same 64 KiB in ~6 us. So a message's large out-of-band buffers
(`frames.encode_tuples`) go, sealed, on a plain PUSH socket to the peer's bulk PULL
socket, and the message itself (its pickle, and the counters of its buffers) still goes
on the CURVE link, in order with the sender's other messages: the link keeps the order,
the bulk socket only carries bytes a CURVE message names.

Keys: each worker process draws a random key when its link starts and announces it in
its HELLO, which travels on the CURVE link (confidential, and only between holders of
the cluster's keys), with the address of its bulk socket. A sender seals the buffers it
sends to worker R with its own key and nonces (R's worker index, a counter of its own
for R that never goes back for this key): no nonce is ever used twice under a key, and a
new process has a new key. What a receiver accepts is authenticated twice: the CURVE
message that names the counters (the peer is a cluster member), and the GCM tag of each
sealed buffer under that peer's key at that nonce. A frame forged on the bulk port fails
its tag and is dropped, counted; a replayed one is either stale (its counter is behind)
or the bytes the named counter carried anyway.

Who may connect: the bulk socket has no CURVE, and libzmq takes a message of endless
frames whole from any peer it let in (a message counts against the HWM only once its
last frame came; ZMQ_MAXMSGSIZE bounds a frame): a stranger streaming one grew a worker
by 257 MiB for 256 MiB sent. So the handshake judges the peer first: the receiver draws
a random token, announced in its HELLO beside its address, and its socket is a PLAIN
server whose password is that token, checked by the context's ZAP handler (zap.py)
before libzmq takes any message frame. PLAIN sends the token in the clear: it gates who
may make a worker hold buffers, it keeps nothing secret (the buffers are sealed as
above); a sniffer who replays it can fill memory as any peer could before.

Order and loss: the sender hands the sealed buffers to ZeroMQ before the message that
names them, so they are almost always already received when that message is read; the
receiver waits for them at most `BULK_WAIT` (a lost connection loses what it held; the
message's tuples are then dropped, counted `bulk_missing`, and their trees replay). With
the bulk socket full the sender waits for room (the peer is held, as for a shared-memory
segment) for at most `STALL`, then sends the buffers on the CURVE link as before; with
no connection to the peer's bulk socket (ZMQ_IMMEDIATE) it sends them there at once.
A message whose sealed buffers are more than a receiver keeps ahead of the sender's key
(`PRE_KEY_BYTES`: one tuple's buffers past 64 MiB) takes the CURVE link too: coming
before the key, it could not be told from a forged one (`fits`). Without keys (loopback
links in the clear) there is nothing to gain: no bulk socket.
"""

from __future__ import annotations

import os
import pickle
import secrets
import struct
import sys
import time
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import zmq

from . import frames as fr

if TYPE_CHECKING:
    from .security import Security

NONCE = struct.Struct("!IQ")  # the receiving worker's index, the buffer's counter
SENDER = struct.Struct("!I")  # associated data: the sending worker's index
KEY_BYTES = 32
TOKEN_BYTES = 32  # a receiver's token (its bulk socket's PLAIN password), random
PLAIN_USER = b"stormish-bulk"  # PLAIN's user name (not checked: the token is)
TAG = 16  # AES-GCM's tag, after the sealed bytes
BULK_WAIT = 1.0  # s a message waits for its sealed buffers (sent before it)
STALL = 1.0  # s a sender waits for room on a peer's bulk socket before using the link
HWM = 4  # bulk messages queued a way (each up to link.MESSAGE_BYTES of buffers): with
# the receiver reading them only as their messages come, this is what stops a sender
STASH = 64  # bulk messages kept per sender ahead of the messages that name them
SEALED_MESSAGE_BYTES = 16 * 1024 * 1024  # link.MESSAGE_BYTES: what one message holds
MAX_FRAME = 1 << 31  # a sealed buffer larger than this takes the link (bulk refuses it)
# what a receiver keeps of one sender ahead of its key (its HELLO on its way): a bulk
# message larger than this could not be told from a forged one then, so the sender
# sends such a message (one tuple's buffers past 64 MiB) inside the CURVE link instead
PRE_KEY_BYTES = HWM * SEALED_MESSAGE_BYTES
HEADER_ROOM = 64  # a bulk message's first frame (`frames.bulk_header`, 18 bytes)
# the largest frame the bulk socket takes (ZMQ_MAXMSGSIZE): `fits` lets no sealed
# buffer past PRE_KEY_BYTES - HEADER_ROOM through (it was MAX_FRAME: 2 GiB)
FRAME_BOUND = PRE_KEY_BYTES


class BulkError(Exception):
    """A message's sealed buffers are missing or do not open."""


def usable() -> bool:
    """AES-GCM is there (`cryptography`, a dependency; a build without it goes without).
    Found, not imported: a run that never moves a large buffer never pays its import
    (~9 ms), so the ciphers are made when first used."""
    import importlib.util

    return importlib.util.find_spec("cryptography") is not None


def _aead(key: bytes) -> Any:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


class Recycler:
    """Buffers for sealed and opened bytes, used again once nothing refers to them.

    A fresh 64 KiB buffer per array (what AES-GCM's `encrypt` and `decrypt` return)
    came from memory the allocator had just given back to the kernel: 16 page faults an
    array on each side, half of the path's CPU in the slow runs of bench/payloads.py.
    A buffer lent out (to ZeroMQ until sent, to the arrays unpickled over it until the
    bolt is done with them) is free again when this object holds its only reference;
    `collect` finds those with one reference count each. Sized exactly: arrays of one
    size (the common case) reuse each other's buffers. The free ones are bounded, and let
    go once none was taken for `IDLE` s: a receiver's arrays wait in its task's queue,
    thousands at a time, and come back in bursts when the bolt catches up, so a small
    bound dropped most of them (64 MiB: 20% reused); what is kept is at most what was
    in use at once, and is given back when the traffic stops."""

    IDLE = 5.0

    def __init__(self, keep_bytes: int = 1 << 30, track: int = 1 << 16):
        self._free: dict[int, list[bytearray]] = {}
        self._lent: deque[bytearray] = deque()
        self._free_bytes = 0
        self.keep_bytes, self.track = keep_bytes, track
        self.made = self.reused = 0
        self._taken_at = 0.0

    def take(self, n: int) -> bytearray:
        self._taken_at = time.monotonic()
        free = self._free.get(n)
        if free:
            buf = free.pop()
            self._free_bytes -= n
            self.reused += 1
        else:
            buf = bytearray(n)
            self.made += 1
        lent = self._lent
        if len(lent) >= self.track:  # so many kept elsewhere: stop following the oldest
            lent.popleft()
        lent.append(buf)
        return buf

    def idle(self, now: float) -> None:
        """Let the free buffers go when none was taken for `IDLE` s (the link's timer)."""
        if self._free and now - self._taken_at > self.IDLE:
            self._free.clear()
            self._free_bytes = 0

    def collect(self) -> None:
        lent, refs = self._lent, sys.getrefcount
        for _ in range(len(lent)):
            buf = lent.popleft()
            if refs(buf) > 2:  # this name and the call's argument: any more is a user
                lent.append(buf)
                continue
            n = len(buf)
            if self._free_bytes + n <= self.keep_bytes:
                self._free.setdefault(n, []).append(buf)
                self._free_bytes += n


def fits(sizes: Iterable[int]) -> bool:
    """A message's buffers (their sizes) may go sealed on the bulk socket: none is
    `MAX_FRAME` or more, and sealed they are no more than `PRE_KEY_BYTES`, what the
    receiver keeps when they come before the sender's key. A larger one was taken for
    forged there and its tuple lost until its tree replayed (found by a review); it
    takes the CURVE link, in order as everything else on it."""
    total = HEADER_ROOM
    for n in sizes:
        if n >= MAX_FRAME:
            return False
        total += n + TAG
    return total <= PRE_KEY_BYTES


def has_room(sock: zmq.Socket) -> bool:
    """A message could be queued on `sock` now (its HWM not reached, a connection up)."""
    return bool(int(sock.getsockopt(zmq.EVENTS)) & zmq.POLLOUT)


class Sender:
    """Seals and sends large buffers to peers' bulk sockets. The transfer thread owns it
    (its sockets); `want` may be called from the receive thread."""

    def __init__(self, ctx: zmq.Context, index: int, sndbuf: int):
        self.ctx = ctx
        self.index = index
        self.sndbuf = sndbuf
        self.key = os.urandom(KEY_BYTES)
        self._aead: Any = None  # made at the first seal
        self._ad = SENDER.pack(index)
        self._sock: dict[int, tuple[tuple[str, str], zmq.Socket]] = {}
        self._next: dict[int, int] = {}  # per peer: the next counter, never reused
        self._wanted: deque[tuple[int, str | None, str]] = deque()
        self._full_since: dict[int, float] = {}
        self.buffers = Recycler()
        self.messages = self.bytes = self.fallback = 0

    def announce(self) -> str:
        """The key, for our HELLO (which only travels CURVE-encrypted)."""
        return self.key.hex()

    def want(self, peer: int, address: str | None, token: str = "") -> None:
        """The peer's bulk socket is at `address` and lets in who gives `token` (None:
        forget it). Any thread."""
        self._wanted.append((peer, address, token))

    def apply(self) -> None:
        """Open and close what `want` asked for (transfer thread)."""
        while self._wanted:
            peer, address, token = self._wanted.popleft()
            old = self._sock.get(peer)
            if old is not None and old[0] == (address, token):
                continue
            if old is not None:
                old[1].close(linger=0)
                del self._sock[peer]
            if address is None:
                continue
            s = self.ctx.socket(zmq.PUSH)
            s.setsockopt(zmq.SNDHWM, HWM)
            s.setsockopt(zmq.SNDBUF, self.sndbuf)
            s.setsockopt(zmq.IMMEDIATE, 1)  # no connection: EAGAIN, and the link takes it
            s.plain_username = PLAIN_USER  # the receiver lets in who gives its token
            s.plain_password = token.encode()
            s.connect(address)
            self._sock[peer] = ((address, token), s)

    def seal(self, peer: int, frames: list, tuples: int) -> list | None:
        """A TUPLES message (`frames.encode_tuples`, with large buffers) as a BULK_TUPLES
        message whose buffers went sealed to the peer's bulk socket (`tuples`: its rows,
        counted if the buffers are lost); `frames` as they are
        when the peer has no bulk socket, or its socket had no room for `STALL`; None
        while it has no room (the caller holds the peer and asks again)."""
        entry = self._sock.get(peer)
        buffers = frames[2:]
        if entry is None or not fits(memoryview(b).nbytes for b in buffers):
            return frames
        s = entry[1]
        if not has_room(s):
            now = time.monotonic()
            since = self._full_since.setdefault(peer, now)
            if now - since < STALL:
                return None
            self.fallback += 1
            return frames
        self._full_since.pop(peer, None)
        first = self._next.get(peer, 0)
        self._next[peer] = first + len(buffers)  # burnt even if the send fails
        if self._aead is None:
            self._aead = _aead(self.key)
        seal, ad, nonce, take = self._aead.encrypt_into, self._ad, NONCE.pack, self.buffers.take
        self.buffers.collect()  # what ZeroMQ sent since the last message
        sealed: list = [fr.bulk_header(self.index, first)]
        size = 0
        for i, buf in enumerate(buffers):
            data = _flat(buf)
            out = take(data.nbytes + TAG)
            seal(nonce(peer, first + i), data, ad, out)
            sealed.append(out)
            size += len(out)
        try:
            s.send_multipart(sealed, flags=zmq.NOBLOCK, copy=False)
        except zmq.Again:  # the connection went between the check and the send
            self.fallback += 1
            return frames
        self.messages += 1
        self.bytes += size
        return fr.as_bulk(frames, first, len(buffers), tuples)

    def peers(self) -> int:
        """Peers whose bulk socket we know (their HELLO came): until then their large
        buffers go inside the CURVE link."""
        return len(self._sock)

    def waiting(self) -> list[zmq.Socket]:
        """The sockets of peers waiting for room (to poll for POLLOUT)."""
        return [self._sock[p][1] for p in self._full_since if p in self._sock]

    def close(self) -> None:
        for _, s in self._sock.values():
            s.close(linger=0)
        self._sock.clear()


class Receiver:
    """Our bulk socket, and each peer's key: opens the sealed buffers a BULK_TUPLES
    message names. The receive thread owns it.

    The socket has no CURVE, and libzmq takes a message of endless frames whole from a
    peer it let in (a message counts against the HWM only once its last frame came), so
    the handshake lets in only who gives our token, a random password announced in our
    HELLO on the CURVE link (`security.password_server`: ZeroMQ's PLAIN, checked by the
    ZAP handler): a stranger is hung up on before any message frame of its is taken.

    What arrives is opened at once when its sender's key is known (the cost is the same
    as later), so the per-sender stash holds authenticated buffers only and a forged
    frame can neither take a real one's place nor make a real one look lost; what comes
    before its sender's key (a HELLO still on its way) waits sealed, bounded, and is
    opened when the key comes."""

    def __init__(
        self,
        ctx: zmq.Context,
        host: str,
        index: int,
        security: Security,
        peers: Iterable[int] = (),
        sealed_bytes: int = 0,
    ):
        self.index = index
        self.token = secrets.token_hex(TOKEN_BYTES)
        # the workers of the assignment: the bulk socket is a plain PULL (no CURVE), so
        # what comes before a sender's key is kept only for one of them, and bounded in
        # bytes (a count let a process without keys park 512 MiB here, counted nowhere)
        self.peers = frozenset(peers) - {index}
        self.sealed_bytes = sealed_bytes or PRE_KEY_BYTES
        self.pull = ctx.socket(zmq.PULL)
        self.pull.setsockopt(zmq.LINGER, 0)
        self.pull.setsockopt(zmq.RCVHWM, HWM)
        # no sealed frame is larger (`fits`), and libzmq reads the handshake's first
        # frame whole before the ZAP handler judges the token: a stranger's is this bound
        self.pull.setsockopt(zmq.MAXMSGSIZE, FRAME_BOUND)
        security.password_server(self.pull, self.token.encode())
        port = self.pull.bind_to_random_port(f"tcp://{_bracketed(host)}")
        self.address = f"tcp://{_bracketed(host)}:{port}"
        self._keys: dict[int, list] = {}  # peer -> [key hex, key, AESGCM once used]
        self._stash: dict[int, deque[tuple[int, list]]] = {}  # peer -> (first, opened)
        self._highest: dict[int, int] = {}  # peer -> the last counter of its newest
        self._sealed: dict[int, deque[tuple[int, list]]] = {}  # before the peer's key
        self._sealed_size: dict[int, int] = {}  # their bytes, per peer
        self._lost_until: dict[int, float] = {}
        self.buffers = Recycler()
        self.received = self.missing = self.forged = self.overrun = 0

    def advertise(self, advertised_host: str | None) -> str:
        """Our address as peers reach it (the link's advertised host, same port)."""
        if not advertised_host:
            return self.address
        port = self.address.rsplit(":", 1)[1]
        return f"tcp://{_bracketed(advertised_host)}:{port}"

    def announce(self) -> str:
        """The token, for our HELLO (which only travels CURVE-encrypted)."""
        return self.token

    def keyed(self, peer: int, key: Any) -> bool:
        """A peer's HELLO named its key (hex): False when it is not one."""
        if type(key) is not str or len(key) != 2 * KEY_BYTES:
            return False
        known = self._keys.get(peer)
        if known is not None and known[0] == key:
            return True
        try:
            raw = bytes.fromhex(key)
        except ValueError:
            return False
        self.forget(peer)  # what was sealed under a former key opens no more
        self._keys[peer] = [key, raw, None]
        self._sealed_size.pop(peer, None)
        for first, sealed in self._sealed.pop(peer, ()):
            self._opened(peer, first, sealed)
        return True

    def forget(self, peer: int) -> None:
        self._keys.pop(peer, None)
        self._stash.pop(peer, None)
        self._highest.pop(peer, None)
        self._lost_until.pop(peer, None)

    def read(self) -> bool:
        """One message that arrived, without waiting, opened into its sender's stash;
        False when none had. Read only while a message's buffers are looked for: what
        is not read stays in ZeroMQ's queues, whose bound (HWM) is this path's
        backpressure. The messages naming the buffers are small, so reading ahead
        (a stash of everything arrived) let a sender run hundreds of 16 MiB messages
        ahead, and the stash overran."""
        try:
            parts = self.pull.recv_multipart(zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return False
        self._keep([p.buffer for p in parts])
        return True

    def _keep(self, parts: list) -> None:
        head = fr.bulk_head(parts)
        if head is None:
            self.forged += 1
            return
        sender, first = head
        if sender in self._keys:
            self._opened(sender, first, parts[1:])
            return
        if sender not in self.peers:  # no worker of this topology: nothing is kept
            self.forged += 1
            return
        size = sum(map(len, parts))
        held = self._sealed_size.get(sender, 0)
        waiting = self._sealed.get(sender)
        if waiting is None:
            waiting = self._sealed[sender] = deque()
        while waiting and (held + size > self.sealed_bytes or len(waiting) >= STASH):
            _, old = waiting.popleft()  # the oldest goes: its message came before its key
            held -= sum(map(len, old))
            self.overrun += 1
        if size > self.sealed_bytes:
            self.forged += 1  # larger than a real sender seals at all (`fits`)
        else:
            waiting.append((first, parts[1:]))
            held += size
        self._sealed_size[sender] = held

    def _opened(self, peer: int, first: int, sealed: list) -> None:
        keyed = self._keys[peer]
        if keyed[2] is None:
            keyed[2] = _aead(keyed[1])
        self.buffers.collect()  # arrays the bolts are done with: their buffers come back
        opened = _open(keyed[2], self.index, peer, first, sealed, self.buffers.take)
        if opened is None:
            self.forged += 1
            return
        stash = self._stash.get(peer)
        if stash is None:
            stash = self._stash[peer] = deque()
        if len(stash) >= STASH:
            stash.popleft()
            self.overrun += 1
        stash.append((first, opened))
        last = first + len(opened) - 1
        if last > self._highest.get(peer, -1):
            self._highest[peer] = last

    def open(self, peer: int, first: int, count: int, wait: float = BULK_WAIT) -> list:
        """The `count` buffers from counter `first` that `peer` sealed for us, opened.
        Raises BulkError when they are not there within `wait` s."""
        if peer not in self._keys:
            self.missing += 1
            raise BulkError(f"worker {peer} sent sealed buffers before its key")
        deadline = None
        while True:
            found = self._find(peer, first)
            if found is not None and len(found) == count:
                self.received += 1
                return found
            now = time.monotonic()
            # authenticated buffers sealed after these came: these are lost
            if found is not None or self._highest.get(peer, -1) >= first:
                break
            if now < self._lost_until.get(peer, 0.0):
                break
            if deadline is None:
                deadline = now + wait
            left = deadline - now
            if left <= 0:
                self._lost_until[peer] = now + wait  # the rest of a lost batch: no wait
                break
            if not self.read():
                self.pull.poll(max(1, int(left * 1000)), zmq.POLLIN)
        self.missing += 1
        raise BulkError(f"worker {peer}'s sealed buffers {first}..{first + count - 1} are missing")

    def _find(self, peer: int, first: int) -> list | None:
        stash = self._stash.get(peer)
        while stash:
            at, opened = stash[0]
            if at < first:  # named by no message to come (lost, or a replay)
                stash.popleft()
                continue
            if at > first:
                return None
            stash.popleft()
            return opened
        return None

    def idle(self, now: float) -> None:
        """The link's timer: buffers kept for reuse go when the traffic stopped."""
        self.buffers.idle(now)

    def close(self) -> None:
        self.pull.close(linger=0)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _flat(buf: Any) -> memoryview:
    """A buffer's bytes as AES-GCM takes them (one-dimensional, unsigned bytes): a
    pickle's out-of-band buffer may be an F-ordered array, which `raw` flattens."""
    if type(buf) is pickle.PickleBuffer:
        return buf.raw()
    return memoryview(buf).cast("B")


def _open(aead: Any, me: int, peer: int, first: int, sealed: list, take: Any) -> list | None:
    """The opened buffers (from `take`), or None when one does not open (the buffers
    taken go back to the recycler: nothing refers to them)."""
    from cryptography.exceptions import InvalidTag

    ad, nonce, unseal = SENDER.pack(peer), NONCE.pack, aead.decrypt_into
    out = []
    try:
        for i, s in enumerate(sealed):
            buf = take(max(0, len(s) - TAG))
            unseal(nonce(me, first + i), s, ad, buf)
            out.append(buf)
    except (InvalidTag, ValueError, TypeError):
        return None
    return out


def is_token(token: Any) -> bool:
    """A peer's HELLO named a receiver's token (`Receiver.token`)."""
    if type(token) is not str or len(token) != 2 * TOKEN_BYTES:
        return False
    try:
        bytes.fromhex(token)
    except ValueError:
        return False
    return True
