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
# Each row and its `cat` run in turn (A B A B, REAL_REPEAT pairs, default 5;
# medians), warm page cache.  Prints its own table; can run alone:
#   make all bench && bench/real_trials.sh build
# Exit status 1 when a step failed to run; a missed target is a MISS row.
set -u

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/$BUILD
SMRULES=$B/smrules
REAL_FW_STEPS=${REAL_FW_STEPS:-50}
REAL_CNN_STEPS=${REAL_CNN_STEPS:-20}
REAL_REPEAT=${REAL_REPEAT:-5}

BENCH_NAME=real_trials
SUMMARY_WIDTH=22
# die, result, get, calc, calc1, median, run_once, summarise, verdict
. "$ROOT/bench/lib.sh"
for f in "$SMRULES" "$B/bench/scale_gen" "$B/bench/cnn_gen" /usr/bin/time; do
  [ -x "$f" ] || die "missing $f (run 'make bench')"
done
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

# pair NAME TRIAL RULES_YAML: the rules and `cat` of TRIAL's event files in
# turn; the cat rows are NAME_cat.
pair() {
  local name=$1 dir=$2 rules=$3 i
  # each side a one-line script, so that both start the same way (cat needs
  # a shell for its glob)
  echo "cat '$dir'/events/*/*.tfevents >/dev/null" >"$TMP/cat.sh"
  echo "exec '$SMRULES' run --trial '$dir' --rules '$rules' --fresh" \
    "--output '$TMP/out-$name'" >"$TMP/$name.sh"
  sh "$TMP/cat.sh" # warm the page cache
  : >"$TMP/times.$name"
  : >"$TMP/times.${name}_cat"
  for ((i = 0; i < REAL_REPEAT; i++)); do
    run_once "$name" sh "$TMP/$name.sh"
    run_once "${name}_cat" sh "$TMP/cat.sh"
  done
  summarise "$name"
  summarise "${name}_cat"
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
pair fw_vg "$FW" "$TMP/vg.yaml"
pair fw_twelve "$FW" "$TWELVE"
rm -rf "$FW"

CNN=$TMP/cnn
"$B/bench/cnn_gen" "$CNN" "$REAL_CNN_STEPS" >/dev/null || die "cnn_gen failed"
result cnn_bytes "$(cat "$CNN"/events/*/*.tfevents | wc -c)"
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
row() { printf '%-42s %-10s %-12s %-8s %-8s %s\n' "$@"; }
gbps() { calc1 "$(get "${1}_bytes") / 1e9 / $(get "${2}_cat_wall")"; }
echo
echo "== summary 12 (load average $(cut -d' ' -f1-3 /proc/loadavg) at the" \
  "end; cat of the event files: fw $(gbps fw fw_vg) GB/s, cnn" \
  "$(gbps cnn cnn_twelve) GB/s)"
row BENCHMARK MEASURED BASELINE RATIO TARGET VERDICT
# ratio_row LABEL NAME TRIAL TARGET: wall time against the same-run cat,
# then CPU seconds per GB of event files and peak RSS.
ratio_row() {
  local w cw r gb
  w=$(get "${2}_wall")
  cw=$(get "${2}_cat_wall")
  r=$(calc "$w / $cw")
  gb=$(calc "$(get "${3}_bytes") / 1e9")
  if [ "$4" = - ]; then
    row "$1 (wall s)" "$w" "cat $cw" "$r" "-" "info"
  else
    row "$1 (wall s)" "$w" "cat $cw" "$r" "<= $4x" "$(verdict "$r" "<=" "$4")"
  fi
  row "$1 (cpu s per GB)" "$(calc "$(get "${2}_cpu") / $gb")" \
    "cat $(calc "$(get "${2}_cat_cpu") / $gb")" \
    "$(calc "$(get "${2}_cpu") / $(get "${2}_cat_cpu")")" "-" "info"
  local m
  m=$(calc1 "$(get "${2}_rss") / 1024")
  row "$1 peak RSS MB" "$m" "-" "-" "< 64" "$(verdict "$m" "<" 64)"
}
ratio_row "fw 20 grads: VG alone" fw_vg fw 1.25
ratio_row "fw 20 grads: twelve rules" fw_twelve fw 3
ratio_row "cnn: twelve rules" cnn_twelve cnn 3
ratio_row "cnn: all twenty rules" cnn_all20 cnn 4
ratio_row "cnn: DeadRelu alone" cnn_deadrelu cnn -
exit 0
