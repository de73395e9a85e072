# Shared by the CLI test scripts (sourced after BIN, SRC and T are set):
# a failure counter and the checks every script uses.
fails=0
fail() { echo "FAIL $*"; fails=$((fails+1)); }
check() {  # check NAME EXPECTED_RC CMD... : runs CMD, stdout in $T/out, stderr in $T/err
  local name=$1 want=$2; shift 2
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [[ $rc -ne $want ]]; then
    echo "FAIL $name: exit $rc, expected $want"; sed 's/^/  stdout: /' "$T/out" | head -15; sed 's/^/  stderr: /' "$T/err" | head -5
    fails=$((fails+1)); return 1
  fi
  echo "ok   $name"
}
expect() {  # expect NAME FILE PATTERN : grep -q PATTERN FILE
  grep -q -- "$3" "$2" || { echo "FAIL $1: no '$3' in $(basename "$2")"; sed 's/^/  /' "$2" | head -15; fails=$((fails+1)); }
}
expect_not() {  # expect_not NAME FILE PATTERN
  if grep -q -- "$3" "$2"; then echo "FAIL $1: unexpected '$3' in $(basename "$2")"; fails=$((fails+1)); fi
}
quiet() {  # quiet NAME : the last command printed nothing
  if [[ -s $T/out || -s $T/err ]]; then echo "FAIL $1: printed something"; head -3 "$T/out" "$T/err"; fails=$((fails+1)); fi
}
need() {  # need FILE... : the test data a script reads; a missing file fails the script at once
  local f
  for f in "$@"; do
    [[ -f $f ]] || { echo "FAIL test data missing: $f"; exit 1; }
  done
}
# Every script reads the real recordings in tests/data/real/.
[[ -n ${DATA:-} ]] && need "$DATA/small_bf16.pickle" "$DATA/small_bf16.truth.json"
