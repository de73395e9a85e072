#!/usr/bin/env bash
# Measures the README's first command on a bare Debian 12 machine: a fresh
# `debootstrap --variant=minbase bookworm` root file system (Debian's own
# mirror), where only git and ca-certificates are installed before the clock
# starts; then `git clone` of this repository and `bash scripts/quickstart.sh`,
# every output line stamped with the seconds since the clone began.
#   sudo bash bench/bench_quickstart.sh [ROOTFS_TAR]
# ROOTFS_TAR: a tar of such a root file system (made once with
#   debootstrap --variant=minbase bookworm DIR http://deb.debian.org/debian
#   && tar -C DIR -cf ROOTFS_TAR .); without it, debootstrap runs first.
# Needs root, debootstrap and a reachable Debian mirror. Prints the stamped
# output, the time to the first report's first line, and the total.
# Figures and the machine: docs/performance.md ("From a clone to the first report").
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[[ $(id -u) -eq 0 ]] || { echo "bench_quickstart: needs root (chroot)" >&2; exit 2; }
work=$(mktemp -d)
root=$work/root
mkdir -p "$root"
cleanup() {
  for m in "$root/mnt/src" "$root/dev/pts" "$root/dev" "$root/proc" "$root/sys"; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m"
  done
  rm -rf "$work"
}
trap cleanup EXIT
if [[ -n ${1:-} ]]; then
  tar -C "$root" -xf "$1"
else
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1
fi
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"; mount --bind /dev/pts "$root/dev/pts"
mount -t sysfs sys "$root/sys"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/mnt/src"; mount --bind -o ro "$repo" "$root/mnt/src"
# The machine before the clock starts: git to clone with, nothing else.
chroot "$root" sh -c 'export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install -y -q --no-install-recommends git ca-certificates' >"$work/pre.log" 2>&1
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
# The clone is of this checkout's committed HEAD (a clone from a hosting site adds its download time).
chroot "$root" bash -c 'git config --global --add safe.directory "*"; cd /root && start=$(date +%s%N);
  { git clone -q /mnt/src snapdiff && cd snapdiff && bash scripts/quickstart.sh; echo "rc=$?"; } 2>&1 |
  while IFS= read -r line; do d=$(( ($(date +%s%N) - start) / 100000000 )); printf "%5d.%d  %s\n" $((d / 10)) $((d % 10)) "$line"; done' |
  tee "$work/stamped.log"
first=$(awk '/== report of/ { getline; print $1; exit }' "$work/stamped.log")
total=$(tail -n 1 "$work/stamped.log" | awk '{print $1}')
echo "clone -> first report line: ${first:-?} s; the whole quick start: ${total:-?} s"
