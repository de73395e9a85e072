#!/usr/bin/env bash
# Builds the image of the Dockerfile (snapdiff:latest) with Buildah where no
# image registry is reachable: the base images the Dockerfile names
# (debian:bookworm, debian:bookworm-slim) are made from Debian's own mirror
# with debootstrap and imported under those names, then `buildah bud` builds
# without pulling. Where a registry is reachable, `docker build -t
# snapdiff:latest .` (or podman build / buildah bud) is all it takes.
#   sudo bash scripts/build-image.sh [TAG]        (default snapdiff:latest)
# Needs root, debootstrap and buildah (Debian: apt-get install debootstrap buildah).
# MIRROR=URL picks the Debian mirror (default http://deb.debian.org/debian).
# Prints one line per stage; the logs go to build/image/, shown on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-snapdiff:latest}
mirror=${MIRROR:-http://deb.debian.org/debian}
[[ $(id -u) -eq 0 ]] || { echo "build-image: needs root (debootstrap, buildah)" >&2; exit 2; }
for t in debootstrap buildah; do
  command -v "$t" >/dev/null || { echo "build-image: $t is not installed (apt-get install debootstrap buildah)" >&2; exit 2; }
done
log=build/image
mkdir -p "$log"
# Inside a container overlayfs may be unavailable: vfs and chroot isolation
# work everywhere (slower, and only for this build).
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
export BUILDAH_ISOLATION=${BUILDAH_ISOLATION:-chroot}
failed() { echo "build-image: $1 failed ($2):" >&2; tail -n 40 "$2" >&2; exit 1; }

base() {  # $1: the name the Dockerfile uses
  if buildah images -q "docker.io/library/$1" 2>/dev/null | grep -q .; then
    echo "build-image: base $1 present"; return
  fi
  echo "build-image: making base $1 with debootstrap from $mirror…"
  local root
  root=$(mktemp -d)
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$log/debootstrap.log" 2>&1 ||
    { rm -rf "$root"; failed debootstrap "$log/debootstrap.log"; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  local c m
  c=$(buildah from scratch)
  m=$(buildah mount "$c")
  cp -a "$root"/. "$m"/
  buildah umount "$c" >/dev/null
  buildah config --cmd /bin/bash "$c"
  buildah commit -q "$c" "docker.io/library/$1" >/dev/null
  buildah rm "$c" >/dev/null
  rm -rf "$root"
}
base debian:bookworm
# minbase is what bookworm-slim is (apt, dpkg, the required packages), give or take documentation.
if ! buildah images -q docker.io/library/debian:bookworm-slim 2>/dev/null | grep -q .; then
  buildah tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
fi
echo "build-image: building $tag (buildah bud; log: $log/bud.log)…"
start=$SECONDS
buildah bud --pull=never --layers -t "$tag" . >"$log/bud.log" 2>&1 || failed "buildah bud" "$log/bud.log"
size=$(buildah images --format '{{.Size}}' "$tag" | head -n 1)
echo "build-image: $tag built in $((SECONDS - start)) s ($size)"
