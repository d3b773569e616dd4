"""A raw JSON multilang spout that emits 5 tuples with message ids and writes each ack or
fail it gets to a file (one JSON line each). argv: mode, file.
- `dup_ids`: two emits share each id (two tuple trees, as Storm allows);
- `list_ids`: each id is a JSON array;
- `unknown_command`: the first of its processes sends `{"command": "foo"}` in its
  first `next`.
"""

import json
import os
import sys

MODE, LOG = sys.argv[1], sys.argv[2]


def read():
    lines = []
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            sys.exit(0)
        if line == b"end\n":
            return json.loads(b"".join(lines))
        lines.append(line)


def send(m):
    sys.stdout.buffer.write(json.dumps(m).encode() + b"\nend\n")
    sys.stdout.buffer.flush()


hs = read()
open(os.path.join(hs["pidDir"], str(os.getpid())), "w").close()
send({"pid": os.getpid()})
n = 0
while True:
    m = read()
    cmd = m.get("command")
    if cmd in ("ack", "fail"):
        with open(LOG, "a") as f:
            f.write(json.dumps([cmd, m["id"]]) + "\n")
    elif cmd == "next" and n < 5:
        n += 1
        if MODE == "dup_ids":
            for v in (f"a{n}", f"b{n}"):
                send({"command": "emit", "tuple": [v], "id": f"m{n}", "need_task_ids": False})
        elif MODE == "list_ids":
            send({"command": "emit", "tuple": [f"a{n}"], "id": ["m", n], "need_task_ids": False})
        elif MODE == "unknown_command":
            if n == 1 and not os.path.exists(LOG + ".foo"):  # the first child only
                open(LOG + ".foo", "w").close()
                send({"command": "foo"})
            send({"command": "emit", "tuple": [f"a{n}"], "id": f"m{n}", "need_task_ids": False})
    send({"command": "sync"})
