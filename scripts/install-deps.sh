#!/usr/bin/env bash
# Installs the Debian 12 packages snapdiff builds and tests with. Idempotent:
# does nothing when everything is already present. Needs root (or sudo) only
# when something is missing.
set -euo pipefail
PKGS=(build-essential cmake pkg-config zlib1g-dev nlohmann-json3-dev
      libboost-program-options-dev catch2 libgraphviz-dev libsimdjson-dev libre2-dev libzstd-dev xz-utils python3
      parallel  # GNU parallel: the many-ranks map step run over ranks in tests
      python3-pytest  # the pytest plugin's tests (tests/python/)
      python3-setuptools python3-wheel python3-venv  # pip install . offline in a venv (setup.py)
      python3-build  # python3 -m build --wheel (scripts/test_python_package.sh)
      chromium fonts-liberation)  # the HTML report's rendering test; Arial-metric fonts for the charts
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
