#!/usr/bin/env bash
# Installs the Debian 12 packages snapdiff needs. Idempotent: does nothing when
# everything is already present. Needs root (or sudo) only when something is
# missing.
#   bash scripts/install-deps.sh          what building the snapdiff executable needs
#   bash scripts/install-deps.sh --test   also what the test suite, the CUDA-less
#                                         capture build and the Python package's
#                                         tests need (Chromium, Catch2, pytest, ...)
# Prints one line; apt's output goes to build/install-deps.log, shown (its end)
# only when something fails. Other distributions: docs/install.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(g++ make cmake pkg-config zlib1g-dev nlohmann-json3-dev libboost-program-options-dev
      libgraphviz-dev libsimdjson-dev libre2-dev libzstd-dev)
if [[ ${1:-} == --test ]]; then
  PKGS+=(catch2 xz-utils python3
         parallel                    # GNU parallel: the many-ranks map step run over ranks in tests
         python3-pytest python3-venv python3-build python3-wheel python3-setuptools  # the Python package
         ccache                      # the wheel's build (build-py/) reuses build/'s objects
         chromium fonts-liberation)  # the HTML report's rendering test; Arial-metric fonts for the charts
elif [[ -n ${1:-} ]]; then
  echo "usage: bash scripts/install-deps.sh [--test]" >&2; exit 2
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
mkdir -p build
log=build/install-deps.log
echo "setup: installing ${#missing[@]} Debian packages (${missing[*]:0:4}${missing[4]:+ …}; log: $log)"
SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  echo "setup: installing packages failed ($log):" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
