// A storm.js-style bolt in plain Node: each message parsed with JSON.parse, as
// storm.js parses it; each tuple's values emitted again, anchored, then acked.
"use strict";
const fs = require("fs");
const path = require("path");

let buf = "";
let handshaken = false;

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + "\nend\n");
}

process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buf += chunk;
  let i;
  while ((i = buf.indexOf("\nend\n")) >= 0) {
    const msg = JSON.parse(buf.slice(0, i));
    buf = buf.slice(i + 5);
    if (!handshaken) {
      handshaken = true;
      fs.writeFileSync(path.join(msg.pidDir, String(process.pid)), "");
      send({ pid: process.pid });
    } else if (Array.isArray(msg)) {
      // task ids: not asked for
    } else if (msg.stream === "__heartbeat") {
      send({ command: "sync" });
    } else {
      send({ command: "emit", anchors: [msg.id], tuple: msg.tuple, need_task_ids: false });
      send({ command: "ack", id: msg.id });
    }
  }
});
