# A storm.rb-style multilang bolt in plain Ruby: split sentences into words.
require "json"

STDOUT.sync = true

def read_msg
  lines = []
  while (line = STDIN.gets)
    line = line.chomp
    return JSON.parse(lines.join("\n")) if line == "end"
    lines << line
  end
  exit 0
end

def send_msg(msg)
  STDOUT.write(JSON.generate(msg) + "\nend\n")
end

handshake = read_msg
File.write(File.join(handshake["pidDir"], Process.pid.to_s), "")
send_msg({ "pid" => Process.pid })
loop do
  msg = read_msg
  next if msg.is_a?(Array)
  if msg["stream"] == "__heartbeat"
    send_msg({ "command" => "sync" })
    next
  end
  msg["tuple"][0].split.each do |word|
    send_msg({ "command" => "emit", "anchors" => [msg["id"]], "tuple" => [word],
               "need_task_ids" => false })
  end
  send_msg({ "command" => "ack", "id" => msg["id"] })
end
