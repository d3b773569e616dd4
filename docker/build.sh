#!/usr/bin/env bash
# Build the stormish images without a registry:
#   stormish-base:bookworm  a Debian bookworm root made with debootstrap (python3, venv),
#                           imported with `docker import` (built once, reused after);
#   stormish:dev            the base plus stormish and its dependencies, installed in a
#                           venv from wheels built on this host.
# Usage: docker/build.sh [--rebuild-base]. Needs root, debootstrap and a Debian mirror
# (MIRROR, default deb.debian.org).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=docker/build
MIRROR=${MIRROR:-http://deb.debian.org/debian}
PY=${PYTHON:-python3}

if [ "${1:-}" = "--rebuild-base" ] || ! docker image inspect stormish-base:bookworm >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || { echo "debootstrap is missing (apt-get install debootstrap)" >&2; exit 2; }
  echo "== debootstrap bookworm (minbase + python3) into $BUILD/rootfs"
  rm -rf "$BUILD/rootfs"
  mkdir -p "$BUILD"
  debootstrap --variant=minbase --include=python3,python3-venv,procps \
    bookworm "$BUILD/rootfs" "$MIRROR" > "$BUILD/debootstrap.log" 2>&1 \
    || { tail -20 "$BUILD/debootstrap.log" >&2; exit 1; }
  rm -rf "$BUILD/rootfs/var/cache/apt/archives/"*.deb "$BUILD/rootfs/var/lib/apt/lists/"*
  echo "== docker import stormish-base:bookworm"
  tar -C "$BUILD/rootfs" -c . | docker import - stormish-base:bookworm >/dev/null
  rm -rf "$BUILD/rootfs"
fi

echo "== wheels (stormish and its dependencies) for the image"
rm -rf "$BUILD/wheels"
$PY -m pip wheel -q --wheel-dir "$BUILD/wheels" . 2>&1 | grep -v "Running pip as the 'root'" || true
ls "$BUILD/wheels" | grep -q '^stormish-' || { echo "no stormish wheel was built" >&2; exit 1; }

echo "== docker build stormish:dev"
cp docker/Dockerfile "$BUILD/Dockerfile"
docker build -q -t stormish:dev "$BUILD" >/dev/null
docker run --rm stormish:dev --version
