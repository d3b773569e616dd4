"""A multilang spout that answers as storm.js does: its nextTuple finishes later (from a
timer, here a thread), while an ack or fail gets its sync at once. Each tuple says how
many `next`s were running when its own began (Storm's ShellSpout sends one command at
a time, so never more than one). Bare protocol, no library: argv[1] tuples, then none.
"""

import json
import os
import sys
import threading
import time

out_lock = threading.Lock()


def send(msg):
    with out_lock:
        sys.stdout.write(json.dumps(msg) + "\nend\n")
        sys.stdout.flush()


def read():
    lines = []
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        if line.rstrip("\n") == "end":
            return json.loads("".join(lines))
        lines.append(line)


def main():
    total = int(sys.argv[1])
    setup = read()
    pid = os.getpid()
    open(os.path.join(setup["pidDir"], str(pid)), "w").close()
    send({"pid": pid})
    state = {"emitted": 0, "running": 0}
    lock = threading.Lock()

    def next_tuple():
        with lock:
            state["running"] += 1
            overlapped = state["running"] - 1
        time.sleep(0.005)  # storm.js: nextTuple(done) answered from a timer
        with lock:
            if state["emitted"] < total:
                n = state["emitted"]
                state["emitted"] += 1
                send({"command": "emit", "tuple": [n, overlapped], "id": n, "need_task_ids": False})
            state["running"] -= 1
        send({"command": "sync"})

    while True:
        msg = read()
        if isinstance(msg, list):  # task ids of an emit (none asked for)
            continue
        cmd = msg.get("command")
        if cmd == "next":
            threading.Thread(target=next_tuple, daemon=True).start()
        else:  # ack, fail, activate, deactivate: answered at once
            send({"command": "sync"})


if __name__ == "__main__":
    main()
