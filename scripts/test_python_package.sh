#!/usr/bin/env bash
# The Python package as a user installs it, offline (scripts/test.sh runs it
# after the Release tests):
#   1. python3 -m build --no-isolation --wheel   -> build/dist/snapdiff-*.whl
#   2. a fresh virtual environment, pip install --no-index of that wheel
#   3. its bin/snapdiff report on a bundled sample: exit 0 and a report
#   4. tests/python run by its Python, the plugin and the API finding the
#      executable themselves (no SNAPDIFF_BIN, no --snapdiff-bin)
#   5. another fresh environment, pip install --no-build-isolation . from the
#      repository root, and the API's and the installation's tests there
#   6. the sdist: CMake configures from it (python3 -m build without --wheel
#      builds the wheel from the sdist)
#   7. a plain venv (no wheel package): the install fails with one clear line
# The executable is compiled in build-py/ (setup.py), once: later runs and the
# second install reuse it (and ccache, when installed, the objects of build/).
# One line per step; each step's output goes to build/python-package/STEP.log,
# shown when it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$repo/build/python-package
rm -rf "$out"
mkdir -p "$out"
start=$SECONDS

fail() {  # $1: step, $2: log
  echo "python package: $1 failed ($2):" >&2
  tail -n 80 "$2" >&2
  exit 1
}
step() {  # step NAME LOG COMMAND...: one line, the output to LOG
  local name=$1 log=$out/$2.log
  shift 2
  echo "python package: $name"
  "$@" >"$log" 2>&1 || fail "$name" "$log"
}

# An interpreter with what the build and the tests need (Debian's python3 with
# scripts/install-deps.sh's packages; PYTHON overrides).
py=""
for candidate in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null &&
     "$candidate" -c 'import build, venv, ensurepip, setuptools, wheel, pytest' 2>/dev/null; then
    py=$(command -v "$candidate")
    break
  fi
done
if [ -z "$py" ]; then
  echo "python package: no python3 with build, venv, setuptools, wheel and pytest" \
       "(bash scripts/install-deps.sh installs them)" >&2
  exit 1
fi

rm -f build/dist/snapdiff-*.whl
step "wheel (python3 -m build --no-isolation --wheel; compiles build-py/ the first time)" wheel \
  "$py" -m build --no-isolation --wheel --outdir build/dist
wheels=(build/dist/snapdiff-*.whl)
[ -f "${wheels[0]}" ] || fail "wheel" "$out/wheel.log"
case ${wheels[0]} in
  *-py3-none-any.whl) echo "python package: ${wheels[0]} is tagged pure Python: it carries an executable" >&2; exit 1;;
esac

# --system-site-packages: pytest comes from the system (python3-pytest).
step "fresh venv, pip install --no-index $(basename "${wheels[0]}")" install-wheel \
  bash -c "'$py' -m venv --system-site-packages '$out/venv-wheel' &&
           '$out/venv-wheel/bin/pip' install --no-index --no-deps '${wheels[0]}'"

venv=$out/venv-wheel
sample=sample_snapshots/gpt2_run.pickle.gz
step "venv's snapdiff report $sample" report bash -c "
  cd '$out' && env -u SNAPDIFF_BIN PATH='$venv/bin:/usr/bin:/bin' snapdiff report '$repo/$sample' >report.txt"
grep -q '^snapdiff report: ' "$out/report.txt" && grep -q '^PEAK ' "$out/report.txt" ||
  { echo "python package: the venv's snapdiff report printed no report:" >&2; head -n 20 "$out/report.txt" >&2; exit 1; }

# Outside the repository, so that nothing imports python/ by accident.
step "tests/python with the venv's python (the installed plugin and API, no SNAPDIFF_BIN)" pytest-wheel \
  bash -c "cd '$out' && env -u SNAPDIFF_BIN -u PYTEST_ADDOPTS SNAPDIFF_TEST_INSTALLED=1 PYTHONDONTWRITEBYTECODE=1 \
           '$venv/bin/python' -m pytest -q -p no:cacheprovider '$repo/tests/python'"

step "fresh venv, pip install --no-index --no-build-isolation ." install-source \
  bash -c "'$py' -m venv --system-site-packages '$out/venv-source' &&
           '$out/venv-source/bin/pip' install --no-index --no-build-isolation '$repo'"
step "the API and the installation in that venv" pytest-source \
  bash -c "cd '$out' && env -u SNAPDIFF_BIN -u PYTEST_ADDOPTS SNAPDIFF_TEST_INSTALLED=1 PYTHONDONTWRITEBYTECODE=1 \
           '$out/venv-source/bin/python' -m pytest -q -p no:cacheprovider \
           '$repo/tests/python/test_installed.py' '$repo/tests/python/test_api.py'"
# python3 -m build without --wheel builds the wheel from the sdist: it must
# carry every file CMake's configure needs (MANIFEST.in).
step "sdist (python3 -m build --sdist) carries what CMake needs: configure of the unpacked sdist" sdist \
  bash -c "rm -f build/dist/snapdiff-*.tar.gz && '$py' -m build --no-isolation --sdist --outdir build/dist &&
           mkdir '$out/sdist' && tar -xzf build/dist/snapdiff-*.tar.gz -C '$out/sdist' &&
           cmake -S '$out'/sdist/snapdiff-* -B '$out/sdist/build' -DCMAKE_BUILD_TYPE=Release \
             -DSNAPDIFF_BUILD_TESTS=OFF -DSNAPDIFF_BUILD_CAPTURE=OFF"

# Offline in a plain venv, pip cannot get the wheel package: one clear line.
step "plain venv without the wheel package: pip install --no-build-isolation . says what is missing" no-wheel \
  bash -c "'$py' -m venv '$out/venv-plain' &&
           ! '$out/venv-plain/bin/pip' install --no-index --no-build-isolation '$repo' >'$out/no-wheel.txt' 2>&1 &&
           grep -q \"snapdiff: the Python package 'wheel' is missing here\" '$out/no-wheel.txt'"
echo "python package: done in $((SECONDS - start)) s"
