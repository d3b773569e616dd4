// A storm.js-style multilang bolt in plain Node (no npm): counts words, emits
// [word, count] anchored to the input, asks for the task ids of every emit (Storm's
// default), acks. Writes the handshake it got to $HANDSHAKE_OUT when set.
"use strict";
const fs = require("fs");
const path = require("path");

let buf = "";
let lines = [];
let handshaken = false;
const counts = new Map();
const waiting = []; // emits whose task ids are due, in order
const queued = []; // tuples read while waiting for task ids

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + "\nend\n");
}

function onMessage(msg) {
  if (!handshaken) {
    handshaken = true;
    fs.writeFileSync(path.join(msg.pidDir, String(process.pid)), "");
    if (process.env.HANDSHAKE_OUT) {
      fs.writeFileSync(process.env.HANDSHAKE_OUT, JSON.stringify(msg));
    }
    send({ pid: process.pid });
    send({ command: "log", msg: "counter.js ready", level: 2 });
    return;
  }
  if (Array.isArray(msg)) { // task ids of our oldest emit
    const tup = waiting.shift();
    if (!Array.isArray(msg) || msg.length !== 1) {
      send({ command: "error", msg: "expected one task id, got " + JSON.stringify(msg) });
    }
    send({ command: "ack", id: tup.id });
    return;
  }
  if (msg.stream === "__heartbeat") {
    send({ command: "sync" });
    return;
  }
  if (msg.stream === "__tick") {
    send({ command: "ack", id: msg.id });
    return;
  }
  const word = msg.tuple[0];
  const n = (counts.get(word) || 0) + 1;
  counts.set(word, n);
  waiting.push(msg);
  send({ command: "emit", anchors: [msg.id], tuple: [word, n] });
}

process.stdin.on("data", (chunk) => {
  buf += chunk.toString("utf8");
  let nl;
  while ((nl = buf.indexOf("\n")) >= 0) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    if (line === "end") {
      const text = lines.join("\n");
      lines = [];
      onMessage(JSON.parse(text));
    } else {
      lines.push(line);
    }
  }
});
process.stdin.on("end", () => process.exit(0));
