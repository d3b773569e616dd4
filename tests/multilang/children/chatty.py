"""A raw JSON bolt child that never answers a heartbeat but keeps talking: a `log`
every 0.2 s from a thread of its own, each counted in a file. argv: count file.
Every tuple is emitted and acked."""

import json
import os
import sys
import threading
import time

COUNT = sys.argv[1]
lock = threading.Lock()


def read():
    lines = []
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            os._exit(0)
        if line == b"end\n":
            return json.loads(b"".join(lines))
        lines.append(line)


def send(m):
    with lock:
        sys.stdout.buffer.write(json.dumps(m).encode() + b"\nend\n")
        sys.stdout.buffer.flush()


def chatter():
    n = 0
    while True:
        time.sleep(0.2)  # its own pace: a progress report
        n += 1
        send({"command": "log", "msg": f"working {n}", "level": 1})
        with open(COUNT, "w") as f:
            f.write(str(n))


hs = read()
open(os.path.join(hs["pidDir"], str(os.getpid())), "w").close()
send({"pid": os.getpid()})
threading.Thread(target=chatter, daemon=True).start()
while True:
    m = read()
    if isinstance(m, list) or m.get("stream") == "__heartbeat":
        continue  # no sync, ever
    send({"command": "emit", "tuple": m["tuple"], "anchors": [m["id"]], "need_task_ids": False})
    send({"command": "ack", "id": m["id"]})
