"""A raw multilang bolt child (JSON or msgpack) that misbehaves once, on its first tuple,
the first of its processes to get there (a marker file keeps the later ones well).

argv: mode, marker, serializer. It emits each tuple's values anchored and acks it, and
answers every heartbeat, except as its mode says:
- `deep_json`: writes a message nested too deep to decode (Python's RecursionError);
- `helper_then_exit`: starts a helper process (which inherits its stdout) and exits 3;
- `log_list_level`: logs with `"level": [3]`, then goes on;
- `latin1_log`: logs a message written in Latin-1 (not UTF-8), then goes on;
- `log_levels`: logs "level <L>" at each level L of 0..4, 7, "3", 3.0, 3.7 and true;
- `unknown_command`: sends `{"command": "foo"}`, then goes on;
- `ack_list_id`: acks `[id]` (a JSON array) instead of the id;
- `spurious_sync`: works 1.5 s on it (a heartbeat is written meanwhile), sends a `sync`
  that answers no heartbeat, emits it (never acks: as storm.py's Bolt); every later
  tuple takes 0.4 s;
- `crlf`: ends every line of every message it writes with `\\r\\n`.
"""

import json
import os
import subprocess
import sys
import time

MODE, MARK = sys.argv[1], sys.argv[2]
SER = sys.argv[3] if len(sys.argv) > 3 else "json"
out = sys.stdout.buffer

if SER == "msgpack":
    import msgpack

    unpacker = msgpack.Unpacker(raw=False)

    def read():
        while True:
            for m in unpacker:
                return m
            data = os.read(0, 65536)
            if not data:
                sys.exit(0)
            unpacker.feed(data)

    def encode(m):
        return msgpack.packb(m)
else:

    def read():
        lines = []
        while True:
            line = sys.stdin.buffer.readline()
            if not line:
                sys.exit(0)
            if line == b"end\n":
                return json.loads(b"".join(lines))
            lines.append(line)

    def encode(m):
        eol = b"\r\n" if MODE == "crlf" else b"\n"
        return json.dumps(m).encode() + eol + b"end" + eol


def send(m):
    out.write(encode(m))
    out.flush()


if MODE == "helper_then_exit":  # a helper that outlives it, holding its stdout
    here = os.path.dirname(os.path.abspath(__file__))  # in its argv: the leak guard sees it
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", here])
hs = read()
open(os.path.join(hs["pidDir"], str(os.getpid())), "w").close()
send({"pid": os.getpid()})
first = not os.path.exists(MARK)
open(MARK, "a").close()
while True:
    m = read()
    if isinstance(m, list):
        continue  # task ids
    if m.get("stream") == "__heartbeat":
        send({"command": "sync"})
        continue
    if MODE == "spurious_sync":
        time.sleep(1.5 if first else 0.4)  # work
        if first:
            send({"command": "sync"})
        first = False
        send({"command": "emit", "tuple": m["tuple"], "need_task_ids": False})
        continue
    if first:
        first = False
        if MODE == "helper_then_exit":
            sys.stderr.write("raw child: exits now\n")
            sys.stderr.flush()
            os._exit(3)
        if MODE == "deep_json":
            out.write(b"[" * 100_000 + b"]" * 100_000 + b"\nend\n")
            out.flush()
            continue
        if MODE == "log_list_level":
            send({"command": "log", "msg": "hello", "level": [3]})
        if MODE == "log_levels":
            for level in (0, 1, 2, 3, 4, 7, "3", 3.0, 3.7, True):
                send({"command": "log", "msg": f"level {level!r}", "level": level})
        if MODE == "unknown_command":
            send({"command": "foo"})
        if MODE == "latin1_log":
            out.write('{"command": "log", "msg": "caf\xe9"}\nend\n'.encode("latin-1"))
        if MODE == "ack_list_id":
            send({"command": "ack", "id": [m["id"]]})
            continue
    send({"command": "emit", "tuple": m["tuple"], "anchors": [m["id"]], "need_task_ids": False})
    send({"command": "ack", "id": m["id"]})
