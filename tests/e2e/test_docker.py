"""The compose deployment on a real Docker engine: nimbus and two supervisors in
containers (docker/compose.yaml, image built by docker/build.sh), CURVE keys made for the
run, topologies submitted from this host through nimbus's port on 127.0.0.1.

Skipped, with the reason printed, where no Docker engine answers. `docker/build.sh` runs
first: the base image is made when missing (a debootstrap of Debian bookworm, a few
minutes), `stormish:dev` every time, from this tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from contextlib import closing

import cloudpickle
import pytest
from faults import state_parts  # tests/ is on sys.path (pytest rootdir-relative packages)

from stormish import BasicBolt, Spout, Topology
from stormish.cluster.client import NimbusClient
from stormish.loader import load_topology
from stormish.testing import poll_for
from stormish.transport.keys import create
from stormish.transport.security import Curve

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1500)]  # a first build debootstraps

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPOSE = os.path.join(REPO, "docker", "compose.yaml")
# this module's classes travel to the containers by value (they cannot import tests.*)
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _docker_ready() -> str | None:
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    if subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode != 0:
        return "the Docker engine does not answer (docker info failed)"
    if _compose() is None:
        return "neither `docker compose` nor docker-compose is installed"
    return None


def _compose() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=60)
    return ["docker", "compose"] if probe.returncode == 0 else None


class Deployment:
    def __init__(self, tmp: str):
        self.keys = os.path.join(tmp, "keys")
        create(self.keys)
        socks = [__import__("socket").socket() for _ in range(5)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        self.port, self.metrics_port, self.redis_port, kafka_port, nats_port = (
            s.getsockname()[1] for s in socks
        )
        for s in socks:
            s.close()
        self.project = f"stormish-e2e-{os.getpid()}"
        self.env = dict(
            os.environ,
            STORMISH_KEYS_DIR=self.keys,
            STORMISH_NIMBUS_PORT=str(self.port),
            STORMISH_METRICS_PORT=str(self.metrics_port),
            STORMISH_REDIS_PORT=str(self.redis_port),
            STORMISH_KAFKA_PORT=str(kafka_port),
            STORMISH_NATS_PORT=str(nats_port),
            STORMISH_TASK_TIMEOUT="5",
        )
        self.compose = [*_compose(), "-p", self.project, "-f", COMPOSE]

    def run(self, *args: str, timeout: float = 180) -> str:
        out = subprocess.run(
            [*self.compose, *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        assert out.returncode == 0, f"compose {args} failed:\n{out.stdout}\n{out.stderr}"
        return out.stdout

    def container(self, service: str) -> str:
        return self.run("ps", "-q", service).strip()

    def client(self) -> NimbusClient:
        return NimbusClient(f"127.0.0.1:{self.port}", Curve(self.keys), timeout=20)

    def call(self, verb, payload=None):
        with closing(self.client()) as c:
            return c.call(verb, payload)

    def status(self, name: str) -> str:
        return next(r["status"] for r in self.call("list") if r["name"] == name)

    def logs(self) -> str:
        return self.run("logs", "--no-color", timeout=60)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    why = _docker_ready()
    if why is not None:
        print(f"\nSKIPPED docker tests: {why}")
        pytest.skip(why)
    # stormish:dev is rebuilt from this tree every run (a stale image would test old
    # code); the base image only when missing (a debootstrap takes a few minutes)
    env = dict(os.environ, PYTHON=sys.executable)
    build = subprocess.run([os.path.join(REPO, "docker", "build.sh")], env=env, timeout=1500)
    assert build.returncode == 0, "docker/build.sh failed"
    d = Deployment(str(tmp_path_factory.mktemp("compose")))
    try:
        d.run("up", "-d")

        def both_joined():
            try:
                return len(d.call("supervisors")) == 2
            except Exception:
                return False

        poll_for(both_joined, 120, 0.5, "two supervisors joined nimbus")
        yield d
        # shown with the report of a test that failed in this module (output is captured)
        print(d.logs()[-12000:])
    except BaseException:
        print(d.logs()[-6000:])
        raise
    finally:
        subprocess.run([*d.compose, "down", "-v", "--remove-orphans", "-t", "5"], env=d.env,
                       capture_output=True, timeout=180)  # fmt: skip


class Endless(Spout):
    """Runs until killed, as most Storm topologies do."""

    outputs = ["word"]

    def next_tuple(self):
        self.emit(["w"])


class Upper(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        self.emit([tup.values[0].upper()])


def endless(name: str) -> Topology:
    t = Topology(name, config={"topology.workers": 2})
    t.set_spout("s", Endless(), parallelism=2)
    t.set_bolt("upper", Upper(), parallelism=2).shuffle_grouping("s")
    return t


def test_wordcount_runs_exactly_on_the_compose_cluster(deployment):
    topology = load_topology(os.path.join(REPO, "topologies", "wordcount.py"))
    assert deployment.call("submit", (topology, {"topology.workers": 2})) == "wordcount"
    poll_for(lambda: deployment.status("wordcount") == "complete", 180, 0.5, "complete")
    stats = deployment.call("stats", "wordcount")
    spout = stats.components["sentences"]
    assert spout.acked == spout.emitted and spout.failed == 0
    assert stats.components["count"].executed == stats.components["split"].emitted > 0
    hosts = {w["host"] for w in deployment.call("supervisors")}
    assert hosts == {"supervisor-1", "supervisor-2"}
    # the web UI of the compose cluster: `stormish ui` on the host, with the cluster's
    # keys, talking to the published nimbus port (docs/cluster.md)
    ui = subprocess.Popen(
        [sys.executable, "-m", "stormish.cli", "ui", "--port", "0", "--nimbus",
         f"127.0.0.1:{deployment.port}", "--keys", deployment.keys],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        line = ui.stdout.readline()  # "web UI of ...: http://127.0.0.1:PORT/?token=T ..."
        printed = line.split(": ", 1)[1].split()[0]
        url, token = printed.split("/?token=")
        import json
        import urllib.request

        def summary():
            req = urllib.request.Request(
                f"{url}/api/v1/topology/summary", headers={"Authorization": f"Bearer {token}"}
            )
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())["topologies"]

        rows = poll_for(lambda: summary() or None, 60, 0.5, "the UI's topology summary")
        row = next(t for t in rows if t["name"] == "wordcount")
        assert row["status"] == "COMPLETE", row
        with urllib.request.urlopen(f"{url}/", timeout=30) as r:
            assert "stormish" in r.read().decode().lower()
    finally:
        ui.terminate()
        ui.wait(30)


# run in the nimbus container (the image has confluent-kafka): the compose network's
# `kafka` service is what the cluster's workers read from and write to
KAFKA_FEED = """
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": "kafka:9092"})
a.create_topics([NewTopic("e2e-sentences", 4, 1)])["e2e-sentences"].result(30)
p = Producer({"bootstrap.servers": "kafka:9092", "linger.ms": 5})
for i in range(3000):
    p.produce("e2e-sentences", f"the cow jumped n{i % 11}".encode())
assert p.flush(60) == 0
"""
KAFKA_READ = """
import json, uuid
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": "kafka:9092", "group.id": uuid.uuid4().hex,
              "auto.offset.reset": "earliest", "session.timeout.ms": 2000,
              "heartbeat.interval.ms": 500})
c.subscribe(["e2e-counts"])
last, idle = {}, 0
while idle < 10:
    batch = c.consume(1000, 1.0 if last else 10.0)
    idle = 0 if batch else idle + 1
    for m in batch:
        if m.error() is None:
            last[m.key().decode()] = max(int(m.value()), last.get(m.key().decode(), 0))
c.close()
print(json.dumps(last))
"""


def test_kafka_wordcount_reads_and_writes_the_compose_kafka(deployment, monkeypatch):
    """topologies/kafka_wordcount.py on the compose cluster against its `kafka` service:
    KafkaSpout and KafkaSink in the workers' containers, every count right."""
    import json

    py = ["exec", "-T", "nimbus", "/opt/stormish/bin/python", "-c"]
    deployment.run(*py, KAFKA_FEED, timeout=120)
    for k, v in {"KAFKA_BOOTSTRAP": "kafka:9092", "KAFKA_IN": "e2e-sentences",
                 "KAFKA_OUT": "e2e-counts", "KAFKA_GROUP": "e2e"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    topology = load_topology(os.path.join(REPO, "topologies", "kafka_wordcount.py"))
    assert deployment.call("submit", (topology, {"topology.workers": 2})) == "kafka-wordcount"
    poll_for(lambda: deployment.status("kafka-wordcount") == "complete", 180, 0.5, "complete")
    counts = json.loads(deployment.run(*py, KAFKA_READ, timeout=120).strip().splitlines()[-1])
    expect = {"the": 3000, "cow": 3000, "jumped": 3000}
    expect.update({f"n{j}": len(range(j, 3000, 11)) for j in range(11)})
    assert counts == expect


def test_a_lost_supervisor_container_has_its_workers_placed_on_the_other(deployment):
    deployment.call("submit", (endless("moving"), {}))
    poll_for(lambda: deployment.status("moving") == "running", 120, 0.5, "running")
    slots = next(r for r in deployment.call("list") if r["name"] == "moving")["slots"]
    assert {s.split(":")[0] for s in slots.values()} == {"supervisor-1", "supervisor-2"}
    subprocess.run(["docker", "kill", deployment.container("supervisor-2")], check=True,
                   capture_output=True, timeout=60)  # fmt: skip

    def moved():
        row = next(r for r in deployment.call("list") if r["name"] == "moving")
        on = {s.split(":")[0] for s in row["slots"].values()}
        return row["status"] == "running" and on == {"supervisor-1"} and len(row["slots"]) == 2

    poll_for(moved, 120, 0.5, "both workers on supervisor-1")

    def executing():
        before = deployment.call("stats", "moving").components["upper"].executed
        poll_for(
            lambda: deployment.call("stats", "moving").components["upper"].executed > before,
            30, 0.5, "upper executing",
        )  # fmt: skip
        return True

    poll_for(executing, 120, 1.0, "the moved topology processing")
    # nimbus's Prometheus metrics, published on the host's loopback
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    url = f"http://127.0.0.1:{deployment.metrics_port}/metrics"

    def upper_executed() -> list[float]:
        # a worker that just moved is not asked until its hello is heard: a scrape then
        # has the other's series only, the next ones both
        with urllib.request.urlopen(url, timeout=30) as r:
            text = r.read().decode()
        return [
            s.value
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
            if s.name == "stormish_executed_total"
            and s.labels.get("topology") == "moving"
            and s.labels.get("component") == "upper"
        ]

    executed = poll_for(lambda: len(got := upper_executed()) == 2 and got, 60, 0.5, "2 tasks")
    assert sum(executed) > 0, executed
    # the workers' logs, kept by the supervisors' containers, through nimbus (item 8)
    out = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "logs", "moving", "--nimbus",
         f"127.0.0.1:{deployment.port}", "--keys", deployment.keys],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "==> worker 0 on supervisor-1 <==" in out.stdout, out.stdout[-3000:]
    assert " worker moving/0 started: pid " in out.stdout
    deployment.call("kill", ("moving", 0))
    poll_for(lambda: deployment.status("moving") == "killed", 60, 0.5, "killed")
    deployment.run("start", "supervisor-2")
    poll_for(lambda: len(deployment.call("supervisors")) == 2, 120, 0.5, "supervisor-2 back")


def test_workers_run_on_while_the_nimbus_container_restarts(deployment):
    deployment.call("submit", (endless("steady"), {}))
    poll_for(lambda: deployment.status("steady") == "running", 120, 0.5, "running")
    # two nimbus on the compose zookeeper: the one that leads is restarted (its id is its
    # service's name); the other takes over and adopts the workers as they run
    leader = deployment.call("leader")["leader"]["id"]
    deployment.run("restart", "-t", "2", leader)
    poll_for(lambda: deployment.status("steady") == "running", 120, 1.0, "steady after restart")

    # the restored status reads "running" before every worker said hello: each worker's
    # next heartbeat (supervisor mode, every few seconds) is what adopts it
    def adopted() -> bool:
        logs = deployment.run("logs", "--no-color", "nimbus", "nimbus-2", timeout=60)
        assert "restored topology 'steady' (running)" in logs
        return "steady: worker 0 adopted" in logs and "steady: worker 1 adopted" in logs

    poll_for(adopted, 60, 1.0, "both workers adopted by the nimbus that took over")
    deployment.call("kill", ("steady", 0))
    poll_for(lambda: deployment.status("steady") == "killed", 60, 0.5, "killed")


# -- stateful bolts on the compose cluster, their state in its Redis ----
# the components of the kill -9 fault tests (tests/faults/state_parts.py), sent to the
# containers by value like this module's
STATE_WORDS = 100_000
cloudpickle.register_pickle_by_value(state_parts)


def _redis_counts(r, name: str) -> dict[str, int]:
    """What every counter task committed in Redis (stormish/state/redis.py's layout)."""
    import pickle

    out: dict[str, int] = {}
    for ns in r.keys(f"{name}:count-*"):
        if b"$" in ns:
            continue
        for k, v in r.hscan_iter(ns):
            w = pickle.loads(k)
            out[w] = out.get(w, 0) + pickle.loads(v)
    return out


def _committed_txids(r, name: str) -> list[int]:
    return [int(r.hget(k, "committed") or -1) for k in r.keys(f"{name}:count-*$txid")]


def test_a_stateful_count_in_redis_survives_a_killed_worker_exactly(deployment):
    """Stateful bolts' acceptance on the compose cluster: a stateful word count over 100,000
    words on 2 workers keeps its state in the compose Redis; the worker without the
    spout is killed -9 right after a checkpoint committed and restarted by its
    supervisor; the committed counts then equal the truth (nothing lost, nothing
    counted twice)."""
    redis = pytest.importorskip("redis", reason="redis-py (pip install 'stormish[redis]')")
    r = redis.Redis(host="127.0.0.1", port=deployment.redis_port)
    poll_for(lambda: r.ping(), 60, 0.5, "the compose Redis answering")
    name = "redis-count"
    t = Topology(name, config={
        "topology.workers": 2,
        "topology.state.provider": "redis",
        "topology.state.redis.url": "redis://redis:6379/0",
        "topology.state.checkpoint.interval.ms": 1500,
        "topology.message.timeout.secs": 10,
        "topology.max.spout.pending": 2000,
    })  # fmt: skip
    t.set_spout("words", state_parts.WordSpout(STATE_WORDS))
    t.set_bolt("split", state_parts.Split(), parallelism=2).shuffle_grouping("words")
    t.set_bolt("count", state_parts.Counter(), parallelism=4).fields_grouping("split", ["word"])
    deployment.call("submit", (t, {}))
    poll_for(lambda: deployment.status(name) == "running", 120, 0.5, "running")
    poll_for(lambda: (ids := _committed_txids(r, name)) and min(ids) >= 2, 120, 0.05,
             "two checkpoints committed by every counter")  # fmt: skip
    stats = deployment.call("stats", name)
    spout_worker = next(s.worker for s in stats.tasks.values() if s.component == "words")
    victim = 1 - spout_worker
    row = next(x for x in deployment.call("list") if x["name"] == name)
    host = row["slots"][victim].split(":")[0]
    last = max(_committed_txids(r, name))
    poll_for(lambda: max(_committed_txids(r, name)) > last, 30, 0.01, "the next commit")
    kill = subprocess.run(
        ["docker", "exec", deployment.container(host), "pkill", "-9", "-f",
         f"stormish.local.process.* --index {victim}( |$)"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert kill.returncode == 0, f"no worker {victim} to kill on {host}: {kill.stderr}"
    before = sum(_redis_counts(r, name).values())
    assert 0 < before < STATE_WORDS, "the kill must land mid-run"
    poll_for(lambda: deployment.status(name) == "complete", 240, 0.5, "complete")
    counts = _redis_counts(r, name)
    truth = state_parts.truth(STATE_WORDS)
    assert counts == truth, {w: (counts.get(w), n) for w, n in truth.items() if counts.get(w) != n}
    assert "restarting it on port" in deployment.logs()
