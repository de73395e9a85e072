#!/usr/bin/env bash
# `snapdiff FILE [options]` is `snapdiff report FILE [options]`, and
# `snapdiff A B [options]` is `snapdiff diff A B [options]`, for every option
# of report and of diff that takes a value: each is given a valid value,
# before and after the inputs, and the bare command must exit 0 with the
# output of the named one. The options are read from `report --help` and
# `diff --help`: an option added without a case here fails this test.
# Usage: bare_cli_test.sh BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
REAL=$SRC/tests/data/real
SNAP=$SRC/sample_snapshots/small_bf16.pickle
RANKS_A=$REAL/ranks/pp_resnet50
RANKS_B=$REAL/ranks/fsdp_gpt2_uneven
KSNAP=$REAL/capture/fp8_mlp.pickle.gz
need "$SNAP" "$SRC/fuzz/seeds/rules_user.json" "$SRC/tests/data/profile/joint.snapshot.pickle" \
  "$SRC/tests/data/profile/joint.trace.json.gz" "$KSNAP" "$REAL/capture/fp8_mlp.kernels.snap" \
  "$REAL/small_profile.trace.json.gz" "$REAL/small_profile.memtl.raw.json.gz"

# same NAME COMMAND ARGS...: `snapdiff COMMAND ARGS` and `snapdiff ARGS`
# exit 0 with the same output (stdout, then the file -o wrote).
same() {
  local name=$1 cmd=$2 i
  shift 2
  for i in named bare; do
    rm -f "$T/o.txt"
    if [[ $i == named ]]; then
      check "$name ($cmd)" 0 "$BIN" "$cmd" "$@" || return
    else
      check "$name" 0 "$BIN" "$@" || return
    fi
    [[ -f $T/o.txt ]] && cat "$T/o.txt" >>"$T/out"
    mv "$T/out" "$T/$i"
  done
  cmp -s "$T/named" "$T/bare" || fail "$name: not the output of snapdiff $cmd"
}

# The options of a command that take a value (its --help: "--name arg" or
# "-x [ --name ] arg").
value_options() {
  "$BIN" "$1" --help | sed -nE 's/^  (-[a-zA-Z] \[ )?--([a-z0-9-]+)( \])? arg.*/\2/p'
}

# report: for each option, the input and a value it accepts.
declare -A input value
for o in format output top depth width rules explain at window max-input-bytes max-memory max-entries; do input[$o]=$SNAP; done
value[format]=json value[output]=$T/o.txt value[top]=3 value[depth]=2 value[width]=100 value[rules]=$SRC/fuzz/seeds/rules_user.json
value[explain]=_multi_tensor_adam value[at]=1000 value[window]=100..1000 value[max-input-bytes]=1GiB
value[max-memory]=none value[max-entries]=1000000
input[trace]=$SRC/tests/data/profile/joint.snapshot.pickle value[trace]=$SRC/tests/data/profile/joint.trace.json.gz
input[kernels]=$KSNAP value[kernels]=$REAL/capture/fp8_mlp.kernels.snap
input[memory-timeline]=$REAL/small_profile.trace.json.gz value[memory-timeline]=$REAL/small_profile.memtl.raw.json.gz
input[jobs]=$RANKS_A value[jobs]=2
input[rank]=$RANKS_A value[rank]=1
input[tensors]=$REAL/i36_input_opt_named.pickle.gz value[tensors]=$REAL/i36_input_opt_named.pickle.tensors.json.gz
n=0
for o in $(value_options report); do
  n=$((n+1))
  if [[ -z ${input[$o]:-} ]]; then fail "report --$o: no case in this test"; continue; fi
  same "FILE --$o V" report "${input[$o]}" "--$o" "${value[$o]}"
  same "--$o V FILE" report "--$o" "${value[$o]}" "${input[$o]}"
done
[[ $n -ge 15 ]] || fail "report --help lists only $n options with a value"

# diff: the inputs A B and a value each option accepts.
declare -A inputs dvalue
for o in format output top depth width rules max-input-bytes max-memory max-entries; do inputs[$o]="$SNAP $SNAP"; done
dvalue[format]=markdown dvalue[output]=$T/o.txt dvalue[top]=3 dvalue[depth]=2 dvalue[width]=100 dvalue[rules]=$SRC/fuzz/seeds/rules_user.json
dvalue[max-input-bytes]=1GiB dvalue[max-memory]=none dvalue[max-entries]=1000000
inputs[kernels-a]="$KSNAP $KSNAP" dvalue[kernels-a]=$REAL/capture/fp8_mlp.kernels.snap
inputs[kernels-b]="$KSNAP $KSNAP" dvalue[kernels-b]=$REAL/capture/fp8_mlp.kernels.snap
inputs[jobs]="$RANKS_A $RANKS_B" dvalue[jobs]=2
inputs[rank]="$RANKS_A $RANKS_B" dvalue[rank]=1
inputs[tensors-a]="$REAL/i36_input_opt_named.pickle.gz $SNAP" dvalue[tensors-a]=$REAL/i36_input_opt_named.pickle.tensors.json.gz
inputs[tensors-b]="$SNAP $REAL/i36_input_opt_named.pickle.gz" dvalue[tensors-b]=$REAL/i36_input_opt_named.pickle.tensors.json.gz
n=0
for o in $(value_options diff); do
  n=$((n+1))
  if [[ -z ${inputs[$o]:-} ]]; then fail "diff --$o: no case in this test"; continue; fi
  read -r a b <<<"${inputs[$o]}"
  same "A B --$o V" diff "$a" "$b" "--$o" "${dvalue[$o]}"
  same "A --$o V B" diff "$a" "--$o" "${dvalue[$o]}" "$b"
done
[[ $n -ge 10 ]] || fail "diff --help lists only $n options with a value"

# The other spellings Boost.Program_options takes: --name=V, -xV, an abbreviation.
same "FILE --format=json" report "$SNAP" --format=json
same "-fjson FILE" report -fjson "$SNAP"
same "--max-ent N FILE" report --max-ent 1000000 "$SNAP"
# A command line that does not parse is a report's usage error.
check "FILE --format (no value)" 2 "$BIN" "$SNAP" --format
expect "FILE --format (no value)" "$T/err" "format"

echo "$fails failures"
[[ $fails -eq 0 ]]
