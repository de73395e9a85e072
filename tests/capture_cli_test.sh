#!/usr/bin/env bash
# `snapcapture run` and `snapcapture convert` end to end (CUDA builds only:
# registered when the snapcapture target exists; no GPU needed). A program
# that never touches CUDA gets an empty recording and its own exit status; a
# log made through LogWriter (snapcapture_log_maker) converts to a .snap that
# snapdiff reads; a bad log is one error line naming the file, exit 3.
# Usage: capture_cli_test.sh SNAPCAPTURE SNAPDIFF LOG_MAKER SOURCE_DIR
set -u
CAP=$1
BIN=$2
MAKER=$3
SRC=$4
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
one_line_error() {  # one_line_error NAME PATTERN: one stderr line matching
  local name=$1 pat=$2
  if [[ $(wc -l <"$T/err") -ne 1 ]] || ! grep -q -- "$pat" "$T/err"; then
    echo "FAIL $name: stderr is not one line matching '$pat':"; cat "$T/err"; fails=$((fails+1))
  fi
}
# The injection library next to snapcapture when it is built; otherwise
# (inject.cpp not in the tree yet) any readable file stands in for it: these
# commands never load CUDA.
INJECT=$(dirname "$CAP")/libsnapcapture_inject.so
[[ -f $INJECT ]] || { INJECT=$T/stand-in.so; : >"$INJECT"; }

check "run --help" 0 "$CAP" run --help
expect "run --help" "$T/out" "--interval-ms"

# A command that never used CUDA: its exit status, an empty recording, one line saying so.
check "run exit 7" 7 "$CAP" run --inject "$INJECT" -o "$T/empty.snap" -- /bin/sh -c 'exit 7'
one_line_error "run exit 7" "no CUDA activity was recorded"
[[ -s $T/empty.snap ]] || fail "run exit 7: no recording written"
check "report of the empty recording" 0 "$BIN" report --format json "$T/empty.snap" -o "$T/empty.json"
python3 - "$T/empty.snap" <<'PY' || fail "empty recording: not an empty .snap"
import gzip, json, sys
d = json.load(gzip.open(sys.argv[1]))
assert d["format"] == "snapdiff.snap" and d["version"] == 1, d.get("version")
assert "kernels" not in d and "driver_memory" not in d and d["devices"] == [], list(d)
assert d["metadata"]["capture.exit_status"] == "7", d["metadata"]
assert d["metadata"]["capture.command"] == "/bin/sh -c exit 7", d["metadata"]
PY
# The private log folder (under $TMPDIR) is gone afterwards.
mkdir -p "$T/scratch"
check "run in TMPDIR" 0 env TMPDIR="$T/scratch" "$CAP" run --inject "$INJECT" -o "$T/scratch.snap" -- /bin/sh -c 'echo "$SNAPCAPTURE_LOG_DIR"'
expect "run in TMPDIR" "$T/out" "^$T/scratch/snapcapture-"
[[ -z $(ls -A "$T/scratch") ]] || fail "run: left $(ls -A "$T/scratch") behind"

# Killed by a signal: 128 + the signal; SIGTERM to snapcapture reaches the command.
check "run killed" 137 "$CAP" run --inject "$INJECT" -o "$T/killed.snap" -- /bin/sh -c 'kill -9 $$'
# The command says when its trap is set (a fixed sleep raced a loaded machine:
# snapcapture loads the CUDA libraries before it starts the command).
ready() {
  for _ in $(seq 400); do
    [[ -e $1 ]] && return 0
    sleep 0.05
  done
  return 1
}
"$CAP" run --inject "$INJECT" -o "$T/term.snap" -- \
  /bin/sh -c "trap 'exit 42' TERM; : >'$T/term.ready'; while :; do sleep 0.1; done" >"$T/out" 2>"$T/err" &
pid=$!
ready "$T/term.ready" || fail "run forwards SIGTERM: the command did not start within 20 s"
kill -TERM $pid
wait $pid
rc=$?
[[ $rc -eq 42 ]] && echo "ok   run forwards SIGTERM" || fail "run forwards SIGTERM: exit $rc, expected 42"

# SIGHUP (as kill or a scheduler sends it) reaches the command; snapcapture
# writes the recording and removes its temporary folder.
mkdir -p "$T/hup"
check "run forwards SIGHUP" 42 env TMPDIR="$T/hup" "$CAP" run --inject "$INJECT" -o "$T/hup.snap" -- \
  /bin/sh -c 'trap "exit 42" HUP; kill -HUP $PPID; i=0; while [ $i -lt 1000 ]; do sleep 0.02; i=$((i+1)); done; exit 9'
[[ -s $T/hup.snap && -z $(ls -A "$T/hup") ]] || fail "run forwards SIGHUP: no recording, or the log folder left"
# SIGTSTP goes on to the command and stops snapcapture (the shell sees the
# job stopped); SIGCONT resumes it. The command catches TSTP and says so:
# the kernel discards a default-action stop signal sent to a process of an
# orphaned process group (a test runner's group can be one), so whether the
# command itself stops depends on where the test runs, not on snapcapture.
state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null; }
"$CAP" run --inject "$INJECT" -o "$T/stop.snap" -- /bin/sh -c \
  "trap ': >\"$T/stop.got\"' TSTP; : >'$T/stop.ready'; i=0; while [ \$i -lt 40 ]; do sleep 0.05; i=\$((i+1)); done; exit 3" \
  >"$T/out" 2>"$T/err" &
pid=$!
ready "$T/stop.ready" || fail "run: SIGTSTP: the command did not start within 20 s"
kill -TSTP $pid
ready "$T/stop.got" && echo "ok   run: SIGTSTP reaches the command" || fail "run: SIGTSTP did not reach the command"
for _ in $(seq 200); do
  [[ $(state $pid) == T ]] && break
  sleep 0.05
done
[[ $(state $pid) == T ]] && echo "ok   run: SIGTSTP stops snapcapture" ||
  fail "run: SIGTSTP: snapcapture is $(state $pid), expected stopped (T)"
kill -CONT $pid
wait $pid
rc=$?
[[ $rc -eq 3 ]] && echo "ok   run: SIGCONT resumes it" || fail "run after SIGTSTP and SIGCONT: exit $rc, expected 3"

# The environment the command sees, and --keep-logs.
check "run env" 0 "$CAP" run --inject "$INJECT" --interval-ms 50 --keep-logs "$T/logs" -o "$T/env.snap" -- \
  /bin/sh -c 'echo "$SNAPCAPTURE_LOG_DIR|$SNAPCAPTURE_INTERVAL_MS|$CUDA_INJECTION64_PATH"'
expect "run env" "$T/out" "^$T/logs|50|/"
[[ -d $T/logs ]] || fail "run --keep-logs: the folder is gone"

# Without --inject: $SNAPCAPTURE_INJECT, else the library next to snapcapture.
check "run SNAPCAPTURE_INJECT" 0 env SNAPCAPTURE_INJECT="$INJECT" "$CAP" run -o "$T/env2.snap" -- \
  /bin/sh -c 'echo "$CUDA_INJECTION64_PATH"'
expect "run SNAPCAPTURE_INJECT" "$T/out" "^$(realpath "$INJECT")\$"
if [[ -f $(dirname "$CAP")/libsnapcapture_inject.so ]]; then
  check "run default library" 0 env -u SNAPCAPTURE_INJECT "$CAP" run -o "$T/env3.snap" -- /bin/sh -c 'echo "$CUDA_INJECTION64_PATH"'
  expect "run default library" "$T/out" "^$(realpath "$(dirname "$CAP")")/libsnapcapture_inject.so\$"
else
  check "run default library missing" 2 env -u SNAPCAPTURE_INJECT "$CAP" run -o "$T/env3.snap" -- true
  one_line_error "run default library missing" "libsnapcapture_inject.so cannot be read"
fi

# Usage errors: exit 2, one line.
check "run without a command" 2 "$CAP" run -o "$T/x.snap" --
one_line_error "run without a command" "no command to run"
check "run bad interval" 2 "$CAP" run --interval-ms soon -- true
one_line_error "run bad interval" "interval-ms"
check "run missing library" 2 "$CAP" run --inject "$T/nothing.so" -- true
one_line_error "run missing library" "cannot be read"
check "convert without -o" 2 "$CAP" convert "$T/logs"
one_line_error "convert without -o" "-o OUT.snap is required"
check "convert bad --max-memory" 2 "$CAP" convert --max-memory lots "$T/logs" -o "$T/x.snap"
one_line_error "convert bad --max-memory" "--max-memory: expected a size"

# A log written through LogWriter: convert, then snapdiff reads the recording.
mkdir -p "$T/made"
check "make a log" 0 "$MAKER" "$T/made"
check "convert" 0 "$CAP" convert "$T/made" -o "$T/made.snap"
quiet "convert"
python3 - "$T/made.snap" <<'PY' || fail "convert: the recording is not what the log held"
import gzip, json, sys
d = json.load(gzip.open(sys.argv[1]))
assert d["version"] == 2, d["version"]
s = d["strings"]
k, m, dm = d["kernels"], d["driver_memory"], d["device_memory"]
assert k["count"] == 2 and [s[i] for i in k["name"]] == [
    "void at::native::elementwise_kernel<128, 2>(int, 128)", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"], k
assert m["count"] == 2 and m["caller"] == ["pytorch", "nccl"] and m["size"] == [6 << 20, 2 << 20], m
assert dm["count"] == 2 and dm["reserved_bytes"] == [0, 6 << 20], dm
assert any(k.endswith(".command") and v == "python train.py" for k, v in d["metadata"].items()), d["metadata"]
PY
check "snapdiff report of the recording" 0 "$BIN" report "$T/made.snap"
# The same through the file itself, and the kept logs of `run` (none) convert too.
log=$(ls "$T/made"/*.sclog)
check "convert a file" 0 "$CAP" convert "$log" -o "$T/file.snap"
cmp -s <(python3 -c 'import gzip,json,sys; d=json.load(gzip.open(sys.argv[1])); d.pop("source"); print(json.dumps(d, sort_keys=True))' "$T/made.snap") \
       <(python3 -c 'import gzip,json,sys; d=json.load(gzip.open(sys.argv[1])); d.pop("source"); print(json.dumps(d, sort_keys=True))' "$T/file.snap") \
  || fail "convert a file: not the same recording as its folder"

# A bad log: one line naming the file and the offset, exit 3.
mkdir -p "$T/bad"
check "make a bad log" 0 "$MAKER" "$T/bad" bad
check "convert a bad log" 3 "$CAP" convert "$T/bad" -o "$T/bad.snap"
one_line_error "convert a bad log" "^snapcapture: error: $T/bad/[0-9]*\.sclog: offset [0-9]*: unknown record type 42$"
[[ -e $T/bad.snap ]] && fail "convert a bad log: wrote a recording"
check "convert a folder with no log" 0 "$CAP" convert "$T/logs" -o "$T/none.snap"
one_line_error "convert a folder with no log" "holds no records"

echo "$fails failures"
[[ $fails -eq 0 ]]
