#!/usr/bin/env bash
# bench/real_trials.sh BUILD - rules on trials shaped like real training
# runs, against `cat` of the same event files (bench/README.md, section 12).
#
#   fw:  the trial smdebug's FileWriter writes for 20 float32 gradients of
#        1 MiB a step (scale_gen, REAL_FW_STEPS steps, default 50 = 1.05 GB)
#   cnn: a CNN as smdebug's PyTorch hook saves it (cnn_gen: weights,
#        biases, gradients, three ReLU outputs of 6-13 MB, the loss, an EVAL
#        pass every 10 TRAIN steps; REAL_CNN_STEPS TRAIN steps, default 20 =
#        1.2 GB)
#
# REAL_REPEAT rounds (default 12), warm page cache: a round runs a row's
# smrules and its `cat` back to back, in turn first, and the row's ratio is
# taken round by round; bench/real_report.py prints the table, with a
# verdict only when 3 rounds in 4 agree (else UNSURE).  REAL_BASE=DIR runs
# DIR/smrules (another build) in the same rounds for a paired before/after;
# REAL_DUMP=FILE keeps the rounds, `bench/real_trials.sh --report FILE`
# prints their table again.  Can run alone:
#   make all build/bench/scale_gen build/bench/cnn_gen &&
#   bench/real_trials.sh build
# Exit status 1 when a step failed to run; a missed target is a MISS row.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = --report ]; then
  [ $# -eq 2 ] || { echo "usage: bench/real_trials.sh --report ROUNDS" >&2; exit 2; }
  exec python3 "$ROOT/bench/real_report.py" "$2"
fi
BUILD=${1:-build}
B=$ROOT/$BUILD
SMRULES=$B/smrules
REAL_FW_STEPS=${REAL_FW_STEPS:-50}
REAL_CNN_STEPS=${REAL_CNN_STEPS:-20}
REAL_REPEAT=${REAL_REPEAT:-12}
REAL_BASE=${REAL_BASE:-}
BASE_SMRULES=
if [ -n "$REAL_BASE" ]; then
  case $REAL_BASE in /*) ;; *) REAL_BASE=$PWD/$REAL_BASE ;; esac
  BASE_SMRULES=$REAL_BASE/smrules
fi

BENCH_NAME=real_trials
SUMMARY_WIDTH=22
# die, result, get, run_once, summarise
. "$ROOT/bench/lib.sh"
for f in "$SMRULES" "$B/bench/scale_gen" "$B/bench/cnn_gen" /usr/bin/time; do
  [ -x "$f" ] || die "missing $f (run 'make bench')"
done
[ -z "$BASE_SMRULES" ] || [ -x "$BASE_SMRULES" ] ||
  die "REAL_BASE: missing $BASE_SMRULES (run 'make all' in that build's tree)"
base=${BENCH_DIR:-/tmp}
# the cnn trial and its copy (SimilarAcrossRuns' reference run)
need_kb=$(((REAL_FW_STEPS * 21000 > REAL_CNN_STEPS * 124000 ?
  REAL_FW_STEPS * 21000 : REAL_CNN_STEPS * 124000) + 100000))
free_kb=$(df -Pk "$base" | awk 'NR == 2 { print $4 }')
[ "$free_kb" -ge "$need_kb" ] ||
  die "$base has ${free_kb} KB free, the benchmark needs ${need_kb} KB"
TMP=$(mktemp -d "$base/smrules-real.XXXXXX") || die "cannot create a temp dir"
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM
RESULTS=$TMP/results
: >"$RESULTS"
ROUNDS=$TMP/rounds # what bench/real_report.py reads
echo "load start $(cut -d' ' -f1-3 /proc/loadavg)" >"$ROUNDS"

# pair NAME TRIAL RULES_YAML: REAL_REPEAT rounds of the rules, `cat` of
# TRIAL's event files (and REAL_BASE's rules), back to back, the first of
# them in turn; the cat rows are NAME_cat, REAL_BASE's NAME_base.
pair() {
  local name=$1 dir=$2 rules=$3 i j c configs=(this cat)
  [ -z "$BASE_SMRULES" ] || configs+=(base)
  # each a one-line script, so that all start the same way (cat needs a
  # shell for its glob)
  echo "cat '$dir'/events/*/*.tfevents >/dev/null" >"$TMP/cat.sh"
  echo "exec '$SMRULES' run --trial '$dir' --rules '$rules' --fresh" \
    "--output '$TMP/out-$name'" >"$TMP/this.sh"
  echo "exec '$BASE_SMRULES' run --trial '$dir' --rules '$rules' --fresh" \
    "--output '$TMP/out-$name-base'" >"$TMP/base.sh"
  sh "$TMP/cat.sh" # warm the page cache
  for c in "${configs[@]}"; do : >"$TMP/times.$c"; done
  for ((i = 0; i < REAL_REPEAT; i++)); do
    for ((j = 0; j < ${#configs[@]}; j++)); do
      c=${configs[(i + j) % ${#configs[@]}]}
      run_once "$c" sh "$TMP/$c.sh"
      echo "run $name $c $i $(tail -n 1 "$TMP/times.$c")" >>"$ROUNDS"
    done
  done
  cp "$TMP/times.this" "$TMP/times.$name"
  summarise "$name"
  for c in "${configs[@]:1}"; do
    cp "$TMP/times.$c" "$TMP/times.${name}_$c"
    summarise "${name}_$c"
  done
}

rules_yaml() { # rules_yaml FILE RULE...: each rule with its defaults
  local f=$1
  shift
  {
    echo "rules:"
    for r in "$@"; do echo "  - rule: $r"; done
  } >"$f"
}
ALL20="VanishingGradient ExplodingTensor WeightUpdateRatio AllZero
  UnchangedTensor LossNotDecreasing CheckInputImages DeadRelu Confusion
  TreeDepth ClassImbalance Overfit TensorVariance Overtraining
  PoorWeightInitialization SaturatedActivation NLPSequenceRatio
  StalledTrainingRule FeatureImportanceOverweight"
# shellcheck disable=SC2086 # a word list
rules_yaml "$TMP/all20.yaml" $ALL20 # + SimilarAcrossRuns, below
rules_yaml "$TMP/vg.yaml" VanishingGradient
rules_yaml "$TMP/deadrelu.yaml" DeadRelu
TWELVE=$ROOT/examples/many-rules.yaml

echo
echo "== 12. rules on real-shaped trials against cat ($(nproc) cores," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg) at start)"

FW=$TMP/fw
"$B/bench/scale_gen" "$FW" "$REAL_FW_STEPS" 20 262144 1 0 >/dev/null ||
  die "scale_gen failed"
result fw_bytes "$(cat "$FW"/events/*/*.tfevents | wc -c)"
echo "bytes fw $(get fw_bytes)" >>"$ROUNDS"
pair fw_vg "$FW" "$TMP/vg.yaml"
pair fw_twelve "$FW" "$TWELVE"
rm -rf "$FW"

CNN=$TMP/cnn
"$B/bench/cnn_gen" "$CNN" "$REAL_CNN_STEPS" >/dev/null || die "cnn_gen failed"
result cnn_bytes "$(cat "$CNN"/events/*/*.tfevents | wc -c)"
echo "bytes cnn $(get cnn_bytes)" >>"$ROUNDS"
# The twentieth rule compares the trial with another run's, as a user
# would: a copy in another folder (the same bytes, so every tensor is
# compared in full: the worst case), whose reads are the rule's own.
cp -R "$CNN" "$TMP/cnn-other" || die "cannot copy the cnn trial"
cat "$TMP/cnn-other"/events/*/*.tfevents >/dev/null # warm, as the trial
{
  echo "  - rule: SimilarAcrossRuns"
  echo "    parameters: {other_trials: \"$TMP/cnn-other\"}"
} >>"$TMP/all20.yaml"
pair cnn_twelve "$CNN" "$TWELVE"
pair cnn_all20 "$CNN" "$TMP/all20.yaml"
pair cnn_deadrelu "$CNN" "$TMP/deadrelu.yaml"
rm -rf "$CNN" "$TMP/cnn-other"

# ------------------------------------------------------------- summary
echo "load end $(cut -d' ' -f1-3 /proc/loadavg)" >>"$ROUNDS"
[ -z "${REAL_DUMP:-}" ] || cp "$ROUNDS" "$REAL_DUMP" ||
  die "cannot write REAL_DUMP=$REAL_DUMP"
python3 "$ROOT/bench/real_report.py" "$ROUNDS" || die "bench/real_report.py failed"
exit 0
