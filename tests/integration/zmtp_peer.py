"""A stranger's ZeroMQ peer in the standard library only (ZMTP 3.0, NULL mechanism, a
DEALER), so a test can run it as another user with the system's python3 (which has no
pyzmq): it connects, sends the frames it is given, and says on stdout what came back.

    python3 zmtp_peer.py HOST PORT [--reply] HEX_FRAME[,HEX_FRAME...] [...]

Each argument after the port is one message (frames hex-encoded, comma-separated).
With --reply it prints every reply (frames as hex) up to the one to the last message.
It prints `refused <mechanism>` when the server wants another security mechanism (a
keyed daemon: CURVE), `closed` when the server hung up, `sent` after sending.
"""

from __future__ import annotations

import socket
import struct
import sys


def greeting() -> bytes:
    return b"\xff" + b"\0" * 8 + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\0") + b"\0" * 32


def command(name: bytes, props: dict[bytes, bytes]) -> bytes:
    body = bytes([len(name)]) + name
    for k, v in props.items():
        body += bytes([len(k)]) + k + struct.pack("!I", len(v)) + v
    return frame(body, more=False, cmd=True)


def frame(body: bytes, more: bool, cmd: bool = False) -> bytes:
    flags = (0x01 if more else 0) | (0x04 if cmd else 0)
    if len(body) > 255:
        return bytes([flags | 0x02]) + struct.pack("!Q", len(body)) + body
    return bytes([flags, len(body)]) + body


def read_exact(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def read_frame(s: socket.socket) -> tuple[int, bytes]:
    flags = read_exact(s, 1)[0]
    size = struct.unpack("!Q", read_exact(s, 8))[0] if flags & 0x02 else read_exact(s, 1)[0]
    return flags, read_exact(s, size)


def main(argv: list[str]) -> int:
    host, port, rest = argv[0], int(argv[1]), argv[2:]
    want_reply = "--reply" in rest
    messages = [m for m in rest if m != "--reply"]
    s = socket.create_connection((host, port), timeout=20)
    try:
        s.sendall(greeting())
        theirs = read_exact(s, 64)
        mechanism = theirs[12:32].rstrip(b"\0").decode()
        if mechanism != "NULL":
            print(f"refused {mechanism}", flush=True)
            return 0
        s.sendall(command(b"READY", {b"Socket-Type": b"DEALER"}))
        flags, _ = read_frame(s)  # their READY (or ERROR)
        for m in messages:
            parts = [bytes.fromhex(p) for p in m.split(",")]
            s.sendall(b"".join(frame(p, i < len(parts) - 1) for i, p in enumerate(parts)))
        print("sent", flush=True)
        last_id = bytes.fromhex(messages[-1].split(",")[1]) if messages else b""
        while want_reply:  # every reply, up to the one to the last message (its id)
            got = []
            while True:
                flags, body = read_frame(s)
                if flags & 0x04:
                    continue  # a command (PING, say)
                got.append(body)
                if not flags & 0x01:
                    break
            print("reply " + ",".join(g.hex() for g in got), flush=True)
            want_reply = len(got) < 2 or got[1] != last_id
    except (ConnectionError, OSError):
        print("closed", flush=True)
    finally:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
