#!/usr/bin/env bash
# Build crondepot's container image with no registry: a Debian bookworm base made here by
# debootstrap (once; kept as localhost/crondepot-base:bookworm), the release wheel built by
# `python -m build` from a copy of this tree, then deploy/container/Containerfile.
#
#   deploy/container/build.sh [IMAGE]      # default IMAGE: localhost/crondepot:<version>
#
# Needs root (debootstrap, rootful podman), podman (Debian's 4.3), debootstrap, and a Python
# with `build` and setuptools (the test extra; PYTHON=..., default .venv/bin/python).
# The apt mirror is the machine's (MIRROR=... to change); pip reads the package index.
# Prints each step's time; the last line is the image name.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
BASE=${BASE:-localhost/crondepot-base:bookworm}
VERSION=$(PYTHONPATH=$ROOT/src "$PYTHON" -c 'from crondepot.base.version import __version__; print(__version__)')
IMAGE=${1:-localhost/crondepot:$VERSION}
step() { printf '%s: %s s\n' "$1" "$(( $(date +%s) - $2 ))" >&2; }

mirror() {
    # The first deb URI of the machine's apt sources (deb822 or one-line), else Debian's.
    local uri
    uri=$(grep -hoE '^(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)[a-z]+://[^[:space:]]+' \
          /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
          2>/dev/null | grep -v security | head -1 | grep -oE '[a-z]+://[^[:space:]]+' || true)
    echo "${uri:-http://deb.debian.org/debian}"
}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

began=$(date +%s)
if ! podman image exists "$BASE"; then
    MIRROR=${MIRROR:-$(mirror)}
    debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
        || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
    # The image's apt reads the same mirror (and its security suite); no lists or caches kept.
    printf 'deb %s bookworm main\ndeb %s bookworm-updates main\n' "$MIRROR" "$MIRROR" \
        > "$WORK/rootfs/etc/apt/sources.list"
    rm -rf "$WORK"/rootfs/var/lib/apt/lists/* "$WORK"/rootfs/var/cache/apt/*
    tar -C "$WORK/rootfs" --numeric-owner -c . \
        | podman import --quiet --change 'CMD ["/bin/bash"]' - "$BASE" >/dev/null
    rm -rf "$WORK/rootfs"
    step "base $BASE (debootstrap --variant=minbase bookworm from $MIRROR)" "$began"
fi

began=$(date +%s)
# As tests/support/release.py: from a copy, so no earlier build/ or egg-info leaks in.
mkdir -p "$WORK/source" "$WORK/context/dist"
tar -C "$ROOT" --exclude=.git --exclude=.venv --exclude=build --exclude=dist \
    --exclude='*.egg-info' --exclude=__pycache__ --exclude=.mypy_cache --exclude=.ruff_cache \
    --exclude=.pytest_cache --exclude=.hypothesis -c . | tar -C "$WORK/source" -x
"$PYTHON" -m build --no-isolation --outdir "$WORK/dist" "$WORK/source" >"$WORK/build.log" 2>&1 \
    || { tail -30 "$WORK/build.log" >&2; exit 1; }
cp "$WORK"/dist/crondepot-*.whl "$WORK/context/dist/"
# The wheel's runtime dependencies (Requires-Dist, no extras): the image's cached pip layer.
"$PYTHON" - "$WORK"/context/dist/crondepot-*.whl >"$WORK/context/requirements.txt" <<'PY'
import sys, zipfile
from email.parser import Parser
with zipfile.ZipFile(sys.argv[1]) as wheel:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    metadata = Parser().parsestr(wheel.read(name).decode())
for requirement in metadata.get_all("Requires-Dist") or []:
    if "extra ==" not in requirement:
        print(requirement)
PY
cp deploy/container/Containerfile "$WORK/context/"
step "wheel $(basename "$WORK"/context/dist/*.whl)" "$began"

began=$(date +%s)
# Docker format: OCI images have no HEALTHCHECK. RUN steps in a chroot (no OCI runtime, no
# cgroups: the same on hosts whose runtime cannot start a container), on the host's network.
# pip in the build trusts what the host trusts (HOST_CA=... to change; empty: pip's own).
HOST_CA=${HOST_CA-/etc/ssl/certs/ca-certificates.crt}
ca=()
[ -n "$HOST_CA" ] && ca=(--volume "$HOST_CA:/run/host-ca.crt:ro" --build-arg HOST_CA=/run/host-ca.crt)
podman build --format docker --isolation chroot --network host --pull=never "${ca[@]}" \
    --build-arg "BASE=$BASE" --tag "$IMAGE" --file "$WORK/context/Containerfile" \
    "$WORK/context" >"$WORK/podman-build.log" 2>&1 \
    || { tail -40 "$WORK/podman-build.log" >&2; exit 1; }
step "image $IMAGE ($(podman image inspect --format '{{.Size}}' "$IMAGE") bytes)" "$began"
echo "$IMAGE"
