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
import math
import re
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
    """Storm's framing. Storm reads lines (`BufferedReader.readLine`), so a line may end
    in `\r\n` as well as `\n`: a message ends at a line `end` ended either way.

    Linear in what is read however it is cut up (a 32 MiB message comes in 512 reads):
    the unfinished message is kept in a bytearray that each read extends, and the
    search for the `end` line starts where the previous one stopped (less the few
    bytes a terminator cut in two may have left). The buffer always starts with the
    `\n` that ended the previous message (one is put there to start), so an `end`
    line is always `\nend` after its message and an empty message is found too.
    `scanned` counts the bytes searched (a statistic a test keeps linear)."""

    name = "json"

    def __init__(self) -> None:
        self._buf = bytearray(b"\n")
        self._from = 0  # no `end` line starts before this offset of the buffer
        self.scanned = 0

    @staticmethod
    def encode(msg: Any) -> bytes:
        try:
            text = _dumps(msg)
        except ValueError:  # NaN or an infinity: Storm's JSON writes null (or a cycle)
            text = _dumps(_finite(msg, set()))
        return text.encode() + b"\nend\n"

    def feed(self, data: bytes) -> list[Any]:
        """Complete messages in `data` (with what earlier feeds left over). A message's
        text may span lines (JSON reads newlines as blanks)."""
        buf = self._buf
        buf += data
        self.scanned += len(buf) - self._from
        cut = _last_end(buf, self._from)
        out: list[Any] = []
        if cut >= 0:
            done = bytes(buf[:cut])
            del buf[: cut - 1]  # keep the `\n` that ends it
            parts = _SPLIT.split(done) if b"\r" in done else done.split(b"\nend\n")
            if parts.pop():  # `\nend\nend\n`: split leaves the second `end` line over
                _loads(parts, out)
                raise ProtocolError("an empty message (two `end` lines in a row)", out)
            _loads(parts, out)
        self._from = max(0, len(buf) - 5)  # a `\nend\r\n` cut short may start there
        if len(buf) > MAX_MESSAGE:
            quote = bytes(buf[1:_QUOTE])
            raise ProtocolError(f"over {MAX_MESSAGE} bytes with no `end` line: {quote!r}", out)
        return out


_SPLIT = re.compile(rb"\nend\r?\n")
# Storm writes JSON (json-simple's JSONValue), NaN and the infinities as null. Python's
# json wrote the tokens NaN and Infinity, which are not JSON: storm.js's JSON.parse and
# pystorm's simplejson threw on them, the child died, and every retry killed it again.
# Built once: json.dumps with separators builds an encoder per call.
_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def _finite(value: Any, path: set[int]) -> Any:
    """`value` with every NaN or infinite float in it null, as json-simple writes them
    (a key: its text, "NaN" or "Infinity", as Java's String.valueOf and Python's json)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple, dict)):
        if id(value) in path:
            raise ValueError("Circular reference detected")
        path.add(id(value))
        if isinstance(value, dict):
            out: Any = {_finite_key(k): _finite(v, path) for k, v in value.items()}
        else:
            out = [_finite(v, path) for v in value]
        path.discard(id(value))
        return out
    return value


def _finite_key(key: Any) -> Any:
    if isinstance(key, float) and not math.isfinite(key):
        return "NaN" if key != key else "Infinity" if key > 0 else "-Infinity"
    return key


def _last_end(buf: bytearray, start: int) -> int:
    """The offset just after the last complete `end` line at or after `start`, or -1."""
    i = buf.rfind(b"\nend", start)
    while i >= 0:
        after = buf[i + 4 : i + 6]
        if after[:1] == b"\n":
            return i + 5
        if after == b"\r\n":
            return i + 6
        i = buf.rfind(b"\nend", start, i)  # a line that starts `end...`, or cut short
    return -1


def _loads(parts: list[bytes], out: list[Any]) -> None:
    """Each message's text is UTF-8, as Storm reads it (an InputStreamReader): a byte
    that is not UTF-8 is U+FFFD, not garbage (a child writing Latin-1 was killed)."""
    loads = json.loads
    for text in parts:
        try:
            out.append(loads(text.decode("utf-8", "replace")))
        except Exception as exc:  # noqa: BLE001 - ValueError, and RecursionError when deep
            if not text.strip():
                raise ProtocolError("an empty message (two `end` lines in a row)", out) from None
            msg = f"not a JSON message ({_why(exc)}): {text[:_QUOTE]!r}"
            raise ProtocolError(msg, out) from None


class MsgpackFraming:
    name = "msgpack"

    def __init__(self) -> None:
        import msgpack

        self._packb = msgpack.packb
        # a message that long is refused, as JSON's is (BufferFull)
        self._unpacker = msgpack.Unpacker(
            raw=False, strict_map_key=False, max_buffer_size=MAX_MESSAGE
        )

    def encode(self, msg: Any) -> bytes:
        return self._packb(msg)

    def feed(self, data: bytes) -> list[Any]:
        out: list[Any] = []
        try:
            self._unpacker.feed(data)  # BufferFull past 100 MiB unread
            for msg in self._unpacker:
                out.append(msg)
        except Exception as exc:  # noqa: BLE001 - msgpack raises several types
            if type(exc).__name__ == "BufferFull":  # not one message in MAX_MESSAGE bytes
                msg = f"over {MAX_MESSAGE} bytes with no message end: {data[:_QUOTE]!r}"
            else:
                msg = f"not a msgpack message ({_why(exc)}): {data[:_QUOTE]!r}"
            raise ProtocolError(msg, out) from None
        return out


def _why(exc: Exception) -> str:
    return str(exc) or type(exc).__name__  # msgpack's BufferFull says nothing


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
