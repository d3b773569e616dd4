"""The multilang wire formats, sans I/O: bytes in, messages out, and back.

JSON is Storm's own framing (`JsonSerializer.java`): a message, a newline, a line `end`.
msgpack is pystorm's `MsgpackSerializer`: back to back msgpack objects, no delimiter
(msgpack knows where an object ends). A decoder is fed whatever `os.read` returned and
hands back every complete message; what cannot be decoded is a `ProtocolError` quoting
the bytes, because a child that writes to stdout outside the protocol (a stray
`print`) is the commonest multilang bug and the quote is what finds it.
"""

from __future__ import annotations

import json
from typing import Any

SERIALIZERS = ("json", "msgpack")
_QUOTE = 200  # bytes of bad input quoted in an error
MAX_MESSAGE = 64 << 20  # a message this long without its `end` line is not a message


class ProtocolError(Exception):
    """The child wrote something that is not a message of the protocol. `messages`: the
    good ones the same read held before it, in order (they count: an ack among them
    must not be lost)."""

    def __init__(self, text: str, messages: list[Any] | None = None):
        super().__init__(text)
        self.messages = messages or []


class JsonFraming:
    name = "json"

    def __init__(self) -> None:
        self._buf = b""

    @staticmethod
    def encode(msg: Any) -> bytes:
        return json.dumps(msg, separators=(",", ":")).encode() + b"\nend\n"

    def feed(self, data: bytes) -> list[Any]:
        """Complete messages in `data` (with what earlier feeds left over). A message's
        text may span lines (JSON reads newlines as blanks), so the stream is split at
        each line `end`: one split and one `json.loads` a message."""
        buf = self._buf + data if self._buf else data
        if buf.startswith(b"end\n"):  # an `end` line right after the previous one
            raise ProtocolError("an empty message (two `end` lines in a row)")
        parts = buf.split(b"\nend\n")
        self._buf = rest = parts.pop()
        out: list[Any] = []
        loads = json.loads
        for text in parts:
            try:
                out.append(loads(text))
            except ValueError as exc:
                msg = f"not a JSON message ({exc}): {text[:_QUOTE]!r}"
                raise ProtocolError(msg, out) from None
        if len(rest) > MAX_MESSAGE:
            raise ProtocolError(f"over {MAX_MESSAGE} bytes with no `end` line: {rest[:_QUOTE]!r}")
        return out


class MsgpackFraming:
    name = "msgpack"

    def __init__(self) -> None:
        import msgpack

        self._packb = msgpack.packb
        self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)

    def encode(self, msg: Any) -> bytes:
        return self._packb(msg)

    def feed(self, data: bytes) -> list[Any]:
        self._unpacker.feed(data)
        out: list[Any] = []
        try:
            for msg in self._unpacker:
                out.append(msg)
        except Exception as exc:  # noqa: BLE001 - msgpack raises several types
            msg = f"not a msgpack message ({exc}): {data[:_QUOTE]!r}"
            raise ProtocolError(msg, out) from None
        return out


def framing(name: str) -> JsonFraming | MsgpackFraming:
    if name == "json":
        return JsonFraming()
    if name == "msgpack":
        try:
            return MsgpackFraming()
        except ImportError:
            raise ImportError(
                "serializer='msgpack' needs the msgpack package: pip install 'stormish[multilang]'"
            ) from None
    raise ValueError(f"unknown multilang serializer {name!r}; one of {SERIALIZERS}")
