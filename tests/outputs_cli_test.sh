#!/usr/bin/env bash
# Outputs at the command line (docs/cli.md "Output files", "Standard
# output"; docs/reliability.md "Outputs"): what the hostile probes cannot
# arrange from their runner — SIGPIPE ignored by the parent, a non-blocking
# stdout, `-o /dev/stdout` appending to a redirect, modes under a umask —
# plus the stdout, device and count cases as a shell user meets them.
# Usage: outputs_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
T=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
S=$DATA/small_bf16.pickle
BIG=$DATA/med_bf16_cpp.pickle  # `report -n 100000 --format json`: 0.5 MB, more than a pipe holds
need "$BIG"
one_line() {  # one_line NAME TEXT : stderr is exactly "snapdiff: error: TEXT"
  local want="snapdiff: error: $2"
  [[ $(cat "$T/err") == "$want" && $(wc -l <"$T/err") -eq 1 ]] || { fail "$1: stderr is not '$want':"; cat "$T/err"; }
}
no_temp() {  # no_temp NAME DIR : no temporary file left in DIR
  local left; left=$(find "$2" -type f \( -name '.snapdiff-*' -o -name '*.tmp' \) | head -3)
  [[ -z $left ]] || fail "$1: left behind: $left"
}

# --- stdout that cannot be written ---------------------------------------------
for cmd in "report $S" "check --max-peak 100GiB $S" "check --write-budget - $S" "diff $S $S" "--help" \
           "report --help" "check --help" "--version"; do
  # shellcheck disable=SC2086
  "$BIN" $cmd >/dev/full 2>"$T/err"; rc=$?
  [[ $rc -eq 2 ]] && echo "ok   $cmd > /dev/full: exit 2" || fail "$cmd > /dev/full: exit $rc, expected 2"
  one_line "$cmd > /dev/full" "cannot write to standard output: No space left on device"
done
"$BIN" report "$S" >&- 2>"$T/err"; rc=$?
[[ $rc -eq 2 ]] && echo "ok   report >&-: exit 2" || fail "report >&-: exit $rc, expected 2"
one_line "report >&-" "cannot write to standard output: Bad file descriptor"
# Nothing for stdout, stdout closed: fine, and the file is not opened as descriptor 1.
"$BIN" check --write-budget "$T/closed.json" "$S" >&- 2>"$T/err"; rc=$?
[[ $rc -eq 2 ]] || fail "check --write-budget FILE >&-: exit $rc (its 'wrote' line cannot be printed: 2)"
grep -q '"format"' "$T/closed.json" 2>/dev/null || fail "check --write-budget FILE >&-: the budget is not in the file"
"$BIN" report "$S" -o "$T/closed.txt" >&- 2>"$T/err"; rc=$?
[[ $rc -eq 0 && -s $T/closed.txt && ! -s $T/err ]] && echo "ok   report -o FILE >&-" || fail "report -o FILE >&-: exit $rc"
# A threshold that fails, its verdict unprintable: the output error (2), not a silent 1.
"$BIN" check --max-peak 1KiB "$S" >/dev/full 2>"$T/err"; rc=$?
[[ $rc -eq 2 ]] && echo "ok   failing check > /dev/full: exit 2" || fail "failing check > /dev/full: exit $rc"

# --- broken pipes: quiet, status 141 ----------------------------------------------
"$BIN" report -n 100000 --format json "$BIG" 2>"$T/err" | head -c 10 >/dev/null
rc=${PIPESTATUS[0]}
[[ $rc -eq 141 ]] && echo "ok   report | head: 141 (SIGPIPE)" || fail "report | head: exit $rc, expected 141"
[[ -s $T/err ]] && { fail "report | head: printed on stderr:"; cat "$T/err"; }
# SIGPIPE ignored by the parent (as Python and some CI runners leave it): EPIPE, then SIGPIPE raised, silently.
(trap '' PIPE; "$BIN" report -n 100000 --format json "$BIG" 2>"$T/err" | head -c 10 >/dev/null; exit "${PIPESTATUS[0]}")
rc=$?
[[ $rc -eq 141 ]] && echo "ok   SIGPIPE ignored: report | head: 141" || fail "SIGPIPE ignored: report | head: exit $rc, expected 141"
[[ -s $T/err ]] && { fail "SIGPIPE ignored: printed on stderr:"; cat "$T/err"; }
(trap '' PIPE; "$BIN" --help 2>"$T/err" | true; exit "${PIPESTATUS[0]}")
rc=$?
[[ $rc -eq 0 || $rc -eq 141 ]] || fail "SIGPIPE ignored: --help | true: exit $rc"
[[ -s $T/err ]] && { fail "SIGPIPE ignored: --help | true: printed on stderr:"; cat "$T/err"; }

# --- a non-blocking stdout (EAGAIN waited out, nothing lost) ------------------------
python3 - "$BIN" "$BIG" <<'PY' && echo "ok   non-blocking stdout" || fail "non-blocking stdout"
import fcntl, os, subprocess, sys, time
binary, big = sys.argv[1:]
want = subprocess.run([binary, "report", "-n", "100000", "--format", "json", big], stdout=subprocess.PIPE, check=True).stdout
r, w = os.pipe()
fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
p = subprocess.Popen([binary, "report", "-n", "100000", "--format", "json", big], stdout=w, stderr=subprocess.PIPE)
os.close(w)
time.sleep(0.5)  # the pipe fills: the writer sees EAGAIN
got = b""
while True:
    b = os.read(r, 65536)
    if not b:
        break
    got += b
err = p.stderr.read()
rc = p.wait()
if rc != 0 or got != want or err:
    sys.exit("exit %d, %d of %d bytes, stderr %r" % (rc, len(got), len(want), err[:200]))
PY

# --- -o /dev/stdout is stdout: appended to a redirect, the file not replaced --------
echo "first line" >"$T/log.txt"
ino=$(stat -c %i "$T/log.txt")
"$BIN" report "$S" -o /dev/stdout >>"$T/log.txt" 2>"$T/err"; rc=$?
[[ $rc -eq 0 && $(head -1 "$T/log.txt") == "first line" && $(stat -c %i "$T/log.txt") == "$ino" ]] \
  && grep -q '^snapdiff report' "$T/log.txt" && echo "ok   -o /dev/stdout >> FILE appends" \
  || fail "-o /dev/stdout >> FILE: exit $rc, the file replaced or not appended"
echo "first line" >"$T/errlog.txt"
ino=$(stat -c %i "$T/errlog.txt")
"$BIN" report "$S" -o /dev/stderr 2>>"$T/errlog.txt" >"$T/out"; rc=$?
[[ $rc -eq 0 && $(head -1 "$T/errlog.txt") == "first line" && $(stat -c %i "$T/errlog.txt") == "$ino" && ! -s $T/out ]] \
  && grep -q '^snapdiff report' "$T/errlog.txt" && echo "ok   -o /dev/stderr 2>> FILE appends" \
  || fail "-o /dev/stderr 2>> FILE: exit $rc, the file replaced or not appended"
# (Before, both replaced the /dev/stdout and /dev/stderr links themselves by regular files.)
for l in /dev/stdout /dev/stderr; do
  [[ -L $l ]] || fail "$l is no longer a symlink (restore: rm -f $l; ln -s /proc/self/fd/$([[ $l == /dev/stdout ]] && echo 1 || echo 2) $l)"
done
"$BIN" report "$S" -o /dev/stdout >/dev/full 2>"$T/err"; rc=$?
[[ $rc -eq 2 ]] || fail "-o /dev/stdout > /dev/full: exit $rc"
one_line "-o /dev/stdout > /dev/full" "cannot write to standard output: No space left on device"

# --- devices and FIFOs are written in place -----------------------------------------
check "report -o /dev/null" 0 "$BIN" report "$S" -o /dev/null && quiet "report -o /dev/null"
[[ -c /dev/null ]] || fail "report -o /dev/null replaced /dev/null"
check "report -o /dev/full is an error" 2 "$BIN" report "$S" -o /dev/full
one_line "report -o /dev/full" "cannot write /dev/full: No space left on device"
mkfifo "$T/out.fifo"
cat "$T/out.fifo" >"$T/fifo.txt" &
reader=$!
for _ in $(seq 100); do [[ -e /proc/$reader ]] && break; sleep 0.01; done
sleep 0.2  # cat has the FIFO open
check "report -o FIFO with a reader" 0 timeout 20 "$BIN" report "$S" -o "$T/out.fifo"
wait $reader
[[ -p $T/out.fifo ]] && grep -q '^snapdiff report' "$T/fifo.txt" && echo "ok   the FIFO got the report, and stays" \
  || fail "report -o FIFO: the FIFO replaced or the report not read"
check "report -o FIFO without a reader" 2 timeout 20 "$BIN" report "$S" -o "$T/out.fifo"
one_line "report -o FIFO without a reader" "cannot write $T/out.fifo: no process is reading the named pipe"

# --- modes: as a plain open gives them --------------------------------------------
(umask 022; "$BIN" report "$S" -o "$T/m644.txt")
(umask 077; "$BIN" report "$S" -o "$T/m600.txt")
[[ $(stat -c %a "$T/m644.txt") == 644 && $(stat -c %a "$T/m600.txt") == 600 ]] && echo "ok   new files: 0666 & ~umask" \
  || fail "new files' modes: $(stat -c %a "$T/m644.txt") under umask 022, $(stat -c %a "$T/m600.txt") under 077"
chmod 640 "$T/m644.txt"
(umask 000; "$BIN" report "$S" -o "$T/m644.txt")
[[ $(stat -c %a "$T/m644.txt") == 640 ]] && echo "ok   an existing file keeps its mode" \
  || fail "an existing file's mode became $(stat -c %a "$T/m644.txt")"

# --- symlinks: planted ones never followed, a target link followed as > would -------
mkdir "$T/links" && echo precious >"$T/links/victim"
for n in out.txt.tmp .out.txt.tmp .snapdiff.tmp; do ln -s victim "$T/links/$n"; done
check "report -o out.txt beside planted links" 0 "$BIN" report "$S" -o "$T/links/out.txt"
[[ $(cat "$T/links/victim") == precious && -L $T/links/out.txt.tmp && -f $T/links/out.txt && ! -L $T/links/out.txt ]] \
  || fail "planted links: the victim was written or a link replaced"
[[ $(find "$T/links" -name '.snapdiff-*' | wc -l) -eq 0 ]] || fail "planted links: a temporary file left"
ln -s victim "$T/links/to-victim.txt"
check "report -o LINK" 0 "$BIN" report "$S" -o "$T/links/to-victim.txt"
[[ -L $T/links/to-victim.txt ]] && grep -q '^snapdiff report' "$T/links/victim" && echo "ok   -o LINK: the file it names replaced, the link kept" \
  || fail "-o LINK: the link replaced or its file not written"

# --- directories in the way, full disks: nothing left, old files whole ---------------
mkdir "$T/dir.snap"
check "convert -o DIR" 2 "$BIN" convert "$S" -o "$T/dir.snap"
one_line "convert -o DIR" "cannot write $T/dir.snap: Is a directory"
[[ -z $(ls -A "$T/dir.snap") ]] || fail "convert -o DIR: wrote into the directory"
mkdir "$T/full" && printf 'old good budget\n' >"$T/full/b.json" && cp "$T/full/b.json" "$T/full/b.json.orig"
# (ulimit -f 0: every write to a file fails; stdout and stderr go through a pipe.)
{ (ulimit -f 0; trap '' XFSZ; exec "$BIN" check --write-budget "$T/full/b.json" "$S" 2>&1); echo "exit $?"; } | cat >"$T/err"
[[ $(tail -1 "$T/err") == "exit 2" ]] && cmp -s "$T/full/b.json" "$T/full/b.json.orig" \
  && echo "ok   --write-budget on a full disk: exit 2, the old budget whole" \
  || fail "--write-budget on a full disk: $(tail -1 "$T/err"), or the old budget changed"
sed -i '$d' "$T/err"
one_line "--write-budget on a full disk" "cannot write $T/full/b.json: File too large"
# SIGXFSZ at its default (a plain `ulimit -f`): snapdiff ignores it, so the write fails and is cleaned up.
(ulimit -f 1; "$BIN" convert "$BIG" -o "$T/full/x.pickle.gz" >"$T/out" 2>"$T/err"; echo $? >"$T/rc")
[[ $(cat "$T/rc") -eq 2 && ! -e $T/full/x.pickle.gz ]] && echo "ok   convert under ulimit -f: exit 2, nothing written" \
  || fail "convert under ulimit -f: exit $(cat "$T/rc")"
no_temp "full disk" "$T/full"
no_temp "all" "$T"

# --- counts and bounds ----------------------------------------------------------------
for args in "report -n -1 $S" "report --top=-5 $S" "diff -n -1 $S $S" "report -n 1e3 $S" "report -n 99999999999 $S" \
            "chart $S --kind lifetime -n -1 -o $T/c.svg" "chart $S --kind flame --device -2 -o $T/c.svg" \
            "report --max-input-bytes 0 $S" "report --max-input-bytes -1 $S" "check --max-peak 1GiB --max-input-bytes 0 $S" \
            "convert --max-input-bytes 0 $S -o $T/x.snap"; do
  # shellcheck disable=SC2086
  check "$args" 2 "$BIN" $args || continue
  [[ $(wc -l <"$T/err") -eq 1 ]] || fail "$args: not one line"
done
[[ -e $T/c.svg || -e $T/x.snap ]] && fail "a usage error wrote a file"
check "report --max-input-bytes 0" 2 "$BIN" report --max-input-bytes 0 "$S"
one_line "report --max-input-bytes 0" "--max-input-bytes must be at least 1 (a size such as 16GiB) (see snapdiff --help)"
check "report -n 0" 0 "$BIN" report -n 0 "$S"
check "report --max-input-bytes 1GiB" 0 "$BIN" report --max-input-bytes 1GiB "$S"

# --- messages: one line, control bytes and invalid UTF-8 visible ----------------------
check "an input named with ESC and a newline" 3 "$BIN" report $'x\e[2J\n::error::y.pickle'
one_line "ESC and newline in a name" 'x\x1b[2J\n::error::y.pickle: cannot open: No such file or directory'
check "an input named with 0xff" 3 "$BIN" report $'bad\xff\xc2\x9b.pickle'
one_line "0xff and a C1 CSI in a name" 'bad\xff\u009b.pickle: cannot open: No such file or directory'
check "an unknown option with a newline" 2 "$BIN" report $'--x\ny'
[[ $(wc -l <"$T/err") -eq 1 ]] && expect "unknown option escaped" "$T/err" '\\ny' || fail "unknown option: not one line"

[[ $fails -eq 0 ]] && echo "outputs_cli: all passed" || { echo "outputs_cli: $fails failed"; exit 1; }
