"""Reads nothing from stdin until the FIFO `argv[1]` is opened and closed by a writer,
then reads `argv[3]` JSON messages and writes them, in the order read, to the file
`argv[2]` (one JSON line each); then waits to be killed."""

import json
import os
import sys

fifo, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(fifo) as go:  # blocks until the test opens it to write
    go.read()
got, lines = [], []
while len(got) < n:
    line = sys.stdin.buffer.readline()
    if not line:
        break
    if line == b"end\n":
        got.append(json.loads(b"".join(lines)))
        lines = []
    else:
        lines.append(line)
with open(out + ".tmp", "w") as f:
    f.write("\n".join(json.dumps(m) for m in got))
os.rename(out + ".tmp", out)
sys.stdin.buffer.read()  # until killed
