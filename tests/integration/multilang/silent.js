// A multilang bolt that answers the handshake and acks tuples but never answers a
// heartbeat: Storm (and stormish) kill it once topology.subprocess.timeout.secs passes.
"use strict";
const fs = require("fs");
const path = require("path");
let buf = "";
let first = true;
process.stdin.on("data", (chunk) => {
  buf += chunk.toString("utf8");
  let end;
  while ((end = buf.indexOf("\nend\n")) >= 0) {
    const msg = JSON.parse(buf.slice(0, end));
    buf = buf.slice(end + 5);
    if (first) {
      first = false;
      fs.writeFileSync(path.join(msg.pidDir, String(process.pid)), "");
      process.stdout.write(JSON.stringify({ pid: process.pid }) + "\nend\n");
    } else if (msg.stream !== "__heartbeat") {
      process.stdout.write(JSON.stringify({ command: "ack", id: msg.id }) + "\nend\n");
    }
  }
});
