#!/usr/bin/env bash
# bench/run.sh BUILD - the smrules benchmarks (see bench/README.md).
#
# Generates trials in a temporary directory (under $BENCH_DIR, default /tmp),
# measures, prints a summary table and deletes everything it wrote.  Every
# number is also compared with a baseline measured in the same run, so the
# ratios stay meaningful on another machine.
#
# Knobs (environment): BENCH_DIR, BENCH_STEPS (steps of the large trial,
# default 128 = 1.07 GB), BENCH_REPEAT (timed passes, default 5),
# REOPEN_STEPS (default 10000), RUN_STEPS (steps of the small-tensor trial
# that 'smrules run' is timed on, default 1000; a second one has twice as
# many), CLI_REPEAT (default 3), PAIR_REPEAT (pairs of runs of each
# section 1b row against cat, default 7), PROF_BIG_EVENTS (system events of the long
# profiler job, default 10000000 = 1.3 GB; 0 leaves it out).
#
# Exit status: 0 when every benchmark ran (missed targets are reported as
# MISS in the table, not as a failure), 1 when something failed to run.
set -u

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/$BUILD
SMRULES=$B/smrules
BENCH_STEPS=${BENCH_STEPS:-128}
BENCH_REPEAT=${BENCH_REPEAT:-5}
REOPEN_STEPS=${REOPEN_STEPS:-10000}
RUN_STEPS=${RUN_STEPS:-1000}
CLI_REPEAT=${CLI_REPEAT:-3}
PAIR_REPEAT=${PAIR_REPEAT:-7}
PROF_BIG_EVENTS=${PROF_BIG_EVENTS:-10000000}

# die, result, get, calc, calc1, median, run_once, summarise, verdict
. "$ROOT/bench/lib.sh"

for f in "$SMRULES" "$B/bench/bench_reader" "$B/bench/bench_reopen"; do
  [ -x "$f" ] || die "missing $f (run 'make bench')"
done
[ -x /usr/bin/time ] || die "/usr/bin/time is needed (package 'time')"

base=${BENCH_DIR:-/tmp}
mkdir -p "$base" || die "cannot create $base"
# The large trial is ~8.4 MB per step, the long profiler job ~130 bytes per
# event; keep 200 MB of slack.
need_kb=$((BENCH_STEPS * 8400 + 200000 + (REOPEN_STEPS + 3 * RUN_STEPS) * 16 +
  PROF_BIG_EVENTS / 7))
free_kb=$(df -Pk "$base" | awk 'NR == 2 { print $4 }')
[ "$free_kb" -ge "$need_kb" ] ||
  die "$base has ${free_kb} KB free, the benchmarks need ${need_kb} KB"
TMP=$(mktemp -d "$base/smrules-bench.XXXXXX") || die "cannot create a temp dir"
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM
RESULTS=$TMP/results
: >"$RESULTS"

# step CMD...: run a bench binary, show its output, keep its RESULT lines.
step() {
  "$@" >"$TMP/out" 2>&1
  local rc=$?
  grep -v '^RESULT ' "$TMP/out" | sed 's/^/  /'
  if [ $rc -ne 0 ]; then
    die "failed (exit $rc): $*"
  fi
  grep '^RESULT ' "$TMP/out" | cut -d' ' -f2- >>"$RESULTS"
}

# timed NAME N CMD...: N runs of CMD, summarised.
timed() {
  local name=$1 n=$2 i
  shift 2
  : >"$TMP/times.$name"
  for ((i = 0; i < n; i++)); do
    run_once "$name" "$@"
  done
  summarise "$name"
}

# timed_pair NAME_A NAME_B N "CMD A" "CMD B": A and B in turn (A B A B
# ...), N runs each, so that a change in the machine's speed during the
# measurement moves both; each summarised as by timed.  The commands are
# words split as the shell splits them.
timed_pair() {
  local a=$1 b=$2 n=$3 i
  : >"$TMP/times.$a"
  : >"$TMP/times.$b"
  for ((i = 0; i < n; i++)); do
    # shellcheck disable=SC2086 # the commands are word lists
    run_once "$a" $4
    # shellcheck disable=SC2086
    run_once "$b" $5
  done
  summarise "$a"
  summarise "$b"
}

echo "smrules benchmarks ($(nproc) cores, load average $(cut -d' ' -f1-3 \
  /proc/loadavg) at start; temp dir $TMP)"

# ---------------------------------------------------------------- 1. reader
BIG=$TMP/big
echo
echo "== 1. reader throughput (warm page cache)"
SECONDS=0
step "$B/bench/bench_reader" gen "$BIG" "$BENCH_STEPS"
step "$B/bench/bench_reader" raw "$BIG" "$BENCH_REPEAT"
step "$B/bench/bench_reader" read "$BIG" "$TMP/big.db" "$BENCH_REPEAT"

have_exploding=0
if [ -f "$B/plugins/exploding_tensor.so" ]; then
  have_exploding=1
  printf 'rules:\n  - rule: ExplodingTensor\n' >"$TMP/exploding.yaml"
  timed cli_exploding "$CLI_REPEAT" "$SMRULES" run --trial "$BIG" \
    --rules "$TMP/exploding.yaml" --fresh --output "$TMP/rule-output"
else
  echo "  skipped 'smrules run' with ExplodingTensor: no $B/plugins/exploding_tensor.so"
fi

# All built-in debugging rules at once, with their default collections and
# parameters, over the same >= 1 GB trial.
have_all=0
if [ "$have_exploding" = 1 ]; then
  have_all=1
  {
    echo "rules:"
    for r in VanishingGradient ExplodingTensor WeightUpdateRatio AllZero \
      UnchangedTensor LossNotDecreasing CheckInputImages DeadRelu Confusion \
      TreeDepth ClassImbalance Overfit TensorVariance Overtraining \
      PoorWeightInitialization SaturatedActivation NLPSequenceRatio \
      StalledTrainingRule FeatureImportanceOverweight; do
      echo "  - rule: $r"
    done
    echo "  - rule: SimilarAcrossRuns"
    echo "    parameters: {other_trials: \"$BIG\"}"
  } >"$TMP/all_rules.yaml"
  timed cli_all_rules 1 "$SMRULES" run --trial "$BIG" \
    --rules "$TMP/all_rules.yaml" --fresh --output "$TMP/rule-output-all"
fi

# ------------------------------------ 1b. rules at the speed of reading
# VanishingGradient alone and the twelve rules of examples/many-rules.yaml
# against `cat` of the same event files, warm cache, medians.
# The large trial is half gradients by bytes; GRAD is all gradients.
echo
echo "== 1b. rules against cat of the event files (warm page cache)"
have_vg=0
if [ -f "$B/plugins/vanishing_gradient.so" ] && [ -x "$B/bench/scale_gen" ]; then
  have_vg=1
  GRAD=$TMP/grad
  "$B/bench/scale_gen" "$GRAD" $(((BENCH_STEPS + 1) / 2)) 8 262144 1 0 \
    >"$TMP/grad_bytes" || die "scale_gen failed"
  printf 'rules:\n  - rule: VanishingGradient\n' >"$TMP/vg.yaml"
  # each command a one-line script, so that both sides of a pair start
  # the same way (cat needs a shell for its glob)
  for t in big grad; do
    [ $t = big ] && dir=$BIG || dir=$GRAD
    echo "cat '$dir'/events/*/*.tfevents >/dev/null" >"$TMP/cat_$t.sh"
    echo "exec '$SMRULES' run --trial '$dir' --rules '$TMP/vg.yaml'" \
      "--fresh --output '$TMP/rule-output-vg'" >"$TMP/vg_$t.sh"
    sh "$TMP/cat_$t.sh" # warm the page cache
    timed_pair "vg_$t" "cat_$t" "$PAIR_REPEAT" "sh $TMP/vg_$t.sh" \
      "sh $TMP/cat_$t.sh"
  done
  echo "exec '$SMRULES' run --trial '$BIG' --rules" \
    "'$ROOT/examples/many-rules.yaml' --fresh" \
    "--output '$TMP/rule-output-many'" >"$TMP/many.sh"
  timed_pair many_rules cat_many "$PAIR_REPEAT" "sh $TMP/many.sh" \
    "sh $TMP/cat_big.sh"
  rm -rf "$GRAD"
else
  echo "  skipped: no $B/plugins/vanishing_gradient.so or bench/scale_gen"
fi

# ---------------------------------------------------------------- 2. re-open
echo "  ($SECONDS s)"
SMALL=$TMP/small
echo
echo "== 2. re-opening an unchanged ${REOPEN_STEPS}-step trial"
step "$B/bench/bench_reopen" gen "$SMALL" "$REOPEN_STEPS"
step "$B/bench/bench_reopen" reopen "$SMALL" "$TMP/small.db" 10
# 'inspect' once without a stored catalog (a new state file each time), then
# with the catalog bench_reopen stored.
timed cli_inspect_first 1 "$SMRULES" inspect --trial "$SMALL" \
  --state "$TMP/first.db"
timed cli_inspect_reopen 5 "$SMRULES" inspect --trial "$SMALL" \
  --state "$TMP/small.db"
echo "  ($SECONDS s)"

# ---------------------------------------------------------------- 3. Lua vs C
MID=$TMP/mid
MID2=$TMP/mid2
echo
echo "== 3. Lua rule vs the same rule as a C plugin (GradientMeanAbs)"
step "$B/bench/bench_reopen" gen "$MID" "$RUN_STEPS"
step "$B/bench/bench_reopen" gen "$MID2" "$((2 * RUN_STEPS))"
# rules_yaml c|lua THRESHOLD: the GradientMeanAbs rule set, C or Lua.
rules_yaml() {
  echo "rules:"
  if [ "$1" = c ]; then
    echo "  - plugin: $TMP/gradient_mean_abs.so"
  else
    echo "  - lua: $LUA_RULE"
  fi
  echo "    name: GradientMeanAbs"
  echo "    parameters: {threshold: $2}"
}

have_lua=0
LUA_RULE=$ROOT/rules/gradient_mean_abs.lua
C_RULE=$ROOT/examples/plugin/gradient_mean_abs.c
if [ ! -f "$LUA_RULE" ]; then
  echo "  skipped: $LUA_RULE does not exist (Lua rule support not landed)"
elif [ ! -f "$C_RULE" ]; then
  echo "  skipped: $C_RULE does not exist"
else
  # built as a user builds a plugin: against the SDK headers and the rule
  # kit (docs/plugin-sdk.md)
  cc -std=c11 -O2 -shared -fPIC -I"$ROOT/core/include" \
    -o "$TMP/gradient_mean_abs.so" "$C_RULE" \
    "$B/plugins/libsmrules-rulekit.a" -lm ||
    die "cannot build $C_RULE"
  rules_yaml c 1.0 >"$TMP/c.yaml"
  rules_yaml lua 1.0 >"$TMP/lua.yaml"
  rules_yaml c 0.0 >"$TMP/c0.yaml"
  rules_yaml lua 0.0 >"$TMP/lua0.yaml"
  if ! "$SMRULES" validate "$TMP/lua.yaml" >"$TMP/validate.out" 2>&1; then
    sed 's/^/  | /' "$TMP/validate.out"
    echo "  skipped: this smrules does not accept the Lua rule"
  else
    have_lua=1
  fi
fi

# same_results TRIAL SUFFIX: the Lua and C rules (c$SUFFIX.yaml,
# lua$SUFFIX.yaml) must agree on what they evaluated and where they fired,
# otherwise the timing compares different work.  (Datapoints are not
# compared: the example C plugin does not count them.)
same_results() {
  local filter='.rules[0] | [.status, .evaluated_steps, (.triggered_steps |
    length), (.skipped_steps | length), .report.Violations]'
  local a b
  a=$("$SMRULES" run --trial "$1" --rules "$TMP/c$2.yaml" --fresh --json \
    --output "$TMP/rule-output" | jq -c "$filter")
  b=$("$SMRULES" run --trial "$1" --rules "$TMP/lua$2.yaml" --fresh --json \
    --output "$TMP/rule-output" | jq -c "$filter")
  if [ -z "$a" ] || [ "$a" != "$b" ]; then
    echo "  C and Lua disagree on $1 ($2): C '$a', Lua '$b'" >&2
    return 1
  fi
  echo "  C and Lua agree on $(basename "$1") ($(grep threshold \
    "$TMP/c$2.yaml" | tr -d ' ')): [status, evaluated, #triggered," \
    "#skipped, violations] = $a"
}

if [ $have_lua = 1 ]; then
  if command -v jq >/dev/null; then
    same_results "$BIG" "" || die "the Lua and C rules disagree"
    same_results "$BIG" 0 || die "the Lua and C rules disagree"
    same_results "$MID" "" || die "the Lua and C rules disagree"
  else
    echo "  (jq not found: results of the two rules not compared)"
  fi
  for kind in c lua; do
    timed "${kind}_big" "$CLI_REPEAT" "$SMRULES" run --trial "$BIG" \
      --rules "$TMP/$kind.yaml" --fresh --output "$TMP/rule-output"
  done
  for kind in c lua; do
    timed "${kind}_mid" "$CLI_REPEAT" "$SMRULES" run --trial "$MID" \
      --rules "$TMP/$kind.yaml" --fresh --output "$TMP/rule-output"
  done
fi
echo "  ($SECONDS s)"

# ---------------------------------------------------------------- 4. scaling
echo
echo "== 4. 'smrules run' cost per step: ${RUN_STEPS} vs $((2 * RUN_STEPS)) steps"
if [ $have_exploding = 1 ]; then
  timed scale1 1 "$SMRULES" run --trial "$MID" --rules "$TMP/exploding.yaml" \
    --fresh --output "$TMP/rule-output"
  timed scale2 1 "$SMRULES" run --trial "$MID2" --rules "$TMP/exploding.yaml" \
    --fresh --output "$TMP/rule-output"
else
  echo "  skipped: no ExplodingTensor plugin"
fi
echo "  ($SECONDS s)"

# ---------------------------------------------------------------- 5. live
# bench/live_latency.c (another benchmark's program) when it is built: the
# latency of 'smrules run --watch' and its idle CPU.  Its failure does not
# stop the other results from being reported.
have_live=0
if [ -x "$B/bench/live_latency" ]; then
  echo
  echo "== 5. live evaluation (--watch): bench/live_latency"
  mkdir -p "$TMP/live"
  if "$B/bench/live_latency" "$SMRULES" "$TMP/live" >"$TMP/out" 2>&1; then
    have_live=1
    grep -v '^RESULT ' "$TMP/out" | sed 's/^/  /'
    grep '^RESULT ' "$TMP/out" | cut -d' ' -f2- >>"$RESULTS"
  else
    sed 's/^/  | /' "$TMP/out" | tail -20
    echo "  live_latency failed; its rows are left out"
  fi
  rm -rf "$TMP/live"
  echo "  ($SECONDS s)"
fi

# ---------------------------------------------------------------- 5b. launcher
# StopTraining's latency (bench/launch_latency.c, when built): StopTraining's stop of a
# command smrules launched (run -- COMMAND), index file of the trigger
# step complete -> SIGTERM in the trainer, against --watch --training-pid
# in the same run.  LAUNCH_RUNS stops of each (default 30).
have_launch=0
if [ -x "$B/bench/launch_latency" ]; then
  echo
  echo "== 5b. launcher stop latency: bench/launch_latency"
  mkdir -p "$TMP/launch"
  if "$B/bench/launch_latency" "$SMRULES" "$TMP/launch" "${LAUNCH_RUNS:-30}" \
    >"$TMP/out" 2>&1; then
    have_launch=1
    grep -v '^RESULT ' "$TMP/out" | sed 's/^/  /'
    grep '^RESULT ' "$TMP/out" | cut -d' ' -f2- >>"$RESULTS"
  else
    sed 's/^/  | /' "$TMP/out" | tail -20
    echo "  launch_latency failed; its rows are left out"
  fi
  rm -rf "$TMP/launch"
  echo "  ($SECONDS s)"
fi

# ---------------------------------------------------------------- 6. profiler
# ProfilerReport at scale (bench/profiler_bench.c, when built): 1 million system-metric
# events (2 nodes x 8 GPUs, 500 ms sampling) through ProfilerReport (all
# eleven profiler rules and the HTML report), and through the eleven rules
# as separate plugins.  Its failure does not stop the other results.
have_prof=0
if [ -x "$B/bench/profiler_bench" ]; then
  echo
  echo "== 6. profiler rules and ProfilerReport: bench/profiler_bench"
  if "$B/bench/profiler_bench" gen "$TMP/prof" >"$TMP/out" 2>&1 &&
    "$B/bench/profiler_bench" run "$SMRULES" "$TMP/prof" "$TMP/prof-out" \
      "$CLI_REPEAT" >>"$TMP/out" 2>&1; then
    have_prof=1
    grep -v '^RESULT ' "$TMP/out" | sed 's/^/  /'
    grep '^RESULT ' "$TMP/out" | cut -d' ' -f2- >>"$RESULTS"
  else
    sed 's/^/  | /' "$TMP/out" | tail -20
    echo "  profiler_bench failed; its rows are left out"
  fi
  rm -rf "$TMP/prof" "$TMP/prof-out"
  echo "  ($SECONDS s)"
fi
# The same over a job ten times as long (13 hours at the default), run once:
# the rules' peak RSS must not grow with the job's length.  Its rows are
# kept with the prefix profbig_.
have_prof_big=0
if [ -x "$B/bench/profiler_bench" ] && [ "$PROF_BIG_EVENTS" -gt 0 ]; then
  echo
  echo "== 6b. profiler rules over $PROF_BIG_EVENTS events: bench/profiler_bench"
  if "$B/bench/profiler_bench" gen "$TMP/prof" "$PROF_BIG_EVENTS" \
    >"$TMP/out" 2>&1 &&
    "$B/bench/profiler_bench" run "$SMRULES" "$TMP/prof" "$TMP/prof-out" 1 \
      >>"$TMP/out" 2>&1; then
    have_prof_big=1
    grep -v '^RESULT ' "$TMP/out" | sed 's/^/  /'
    grep '^RESULT ' "$TMP/out" | cut -d' ' -f2- | sed 's/^prof_/profbig_/' \
      >>"$RESULTS"
  else
    sed 's/^/  | /' "$TMP/out" | tail -20
    echo "  profiler_bench failed; its rows are left out"
  fi
  rm -rf "$TMP/prof" "$TMP/prof-out"
  echo "  ($SECONDS s)"
fi

# ------------------------------------------------------- 6c. TensorBoard
# docs/tensorboard.md: 1 M scalars (10 tags x 100,000 steps, one
# add_scalar Event per record) from one event file, against a raw read of
# the same bytes; then a refresh of the unchanged folder and one after
# 1,000 appended records (only the new bytes are read).
have_tb=0
if [ -x "$B/bench/tb_bench" ]; then
  echo
  echo "== 6c. TensorBoard: 1 M scalars from one event file (bench/tb_bench)"
  mkdir -p "$TMP/tb"
  step "$B/bench/tb_bench" gen "$TMP/tb" 10 100000
  step "$B/bench/tb_bench" raw "$TMP/tb" "$BENCH_REPEAT"
  step "$B/bench/tb_bench" read "$TMP/tb" "$BENCH_REPEAT"
  have_tb=1
  rm -rf "$TMP/tb"
  echo "  ($SECONDS s)"
fi

# ---------------------------------------------------------------- summary
# row NAME MEASURED BASELINE RATIO TARGET VERDICT
row() { printf '%-38s %-14s %-18s %-9s %-10s %s\n' "$@"; }

raw=$(get raw_gbps)
rawc=$(get raw_cpu_gbps)
rd=$(get reader_gbps)
rdc=$(get reader_cpu_gbps)
bytes=$(get event_bytes)
r1=$(calc "$rd / $raw")
r1c=$(calc "$rdc / $rawc")
rss_mb=$(calc1 "$(get reader_maxrss_kb) / 1024")
raw_rss_mb=$(calc1 "$(get raw_maxrss_kb) / 1024")
echo
echo "== summary (ratios against baselines measured in this run; load average" \
  "$(cut -d' ' -f1-3 /proc/loadavg) at the end)"
# the ratios against cat depend on how fast this machine copies memory
[ "$have_vg" = 1 ] && echo "cat of the large trial's event files:" \
  "$(calc1 "$bytes / 1e9 / $(get cat_big_wall)") GB/s"
row BENCHMARK MEASURED BASELINE RATIO TARGET VERDICT
row "reader GB/s (wall)" "$rd" "raw read $raw" "$r1" ">= 0.50" \
  "$(verdict "$r1" ">=" 0.5)"
row "reader GB/s (cpu time)" "$rdc" "raw read $rawc" "$r1c" ">= 0.50" \
  "$(verdict "$r1c" ">=" 0.5)"
row "reader peak RSS MB" "$rss_mb" "raw read $raw_rss_mb" "-" "< 64" \
  "$(verdict "$rss_mb" "<" 64)"
if [ $have_exploding = 1 ]; then
  w=$(get cli_exploding_wall)
  c=$(get cli_exploding_cpu)
  g=$(calc "$bytes / 1e9 / $w")
  gc=$(calc "$bytes / 1e9 / $c")
  row "run ExplodingTensor GB/s (wall)" "$g" "raw read $raw" \
    "$(calc "$g / $raw")" "-" "info"
  row "run ExplodingTensor GB/s (cpu)" "$gc" "raw read $rawc" \
    "$(calc "$gc / $rawc")" "-" "info"
  row "run ExplodingTensor peak RSS MB" \
    "$(calc1 "$(get cli_exploding_rss) / 1024")" "-" "-" "< 64" \
    "$(verdict "$(calc "$(get cli_exploding_rss) / 1024")" "<" 64)"
fi
if [ "$have_all" = 1 ]; then
  aw=$(get cli_all_rules_wall)
  ac=$(get cli_all_rules_cpu)
  ag=$(calc "$bytes / 1e9 / $aw")
  row "all 20 debugging rules GB/s (wall)" "$ag" "raw read $raw" \
    "$(calc "$ag / $raw")" "-" "info"
  row "all 20 debugging rules, s (wall / cpu)" "$aw / $ac" "-" "-" "-" "info"
  row "all 20 debugging rules peak RSS MB" \
    "$(calc1 "$(get cli_all_rules_rss) / 1024")" "-" "-" "< 64" \
    "$(verdict "$(calc "$(get cli_all_rules_rss) / 1024")" "<" 64)"
fi
if [ "$have_vg" = 1 ]; then
  # ratio_row LABEL KEY CATKEY TARGET: wall time of KEY against `cat`.
  ratio_row() {
    local w cw r
    w=$(get "${2}_wall")
    cw=$(get "${3}_wall")
    r=$(calc "$w / $cw")
    row "$1 (wall s)" "$w" "cat $cw" "$r" "<= $4x" "$(verdict "$r" "<=" "$4")"
    row "$1 (cpu s)" "$(get "${2}_cpu")" "cat $(get "${3}_cpu")" "-" "-" "info"
  }
  ratio_row "VG alone, half gradients" vg_big cat_big 0.75
  ratio_row "VG alone, all gradients" vg_grad cat_grad 1.25
  ratio_row "many-rules.yaml, 12 rules" many_rules cat_many 3
  row "many-rules.yaml peak RSS MB" \
    "$(calc1 "$(get many_rules_rss) / 1024")" "-" "-" "< 64" \
    "$(verdict "$(calc "$(get many_rules_rss) / 1024")" "<" 64)"
fi
first=$(get first_open_ms)
reopen=$(get reopen_median_ms)
row "re-open ${REOPEN_STEPS} steps, ms (median)" "$reopen" "first open $first" \
  "$(calc "$reopen / $first")" "< 50 ms" "$(verdict "$reopen" "<" 50)"
refresh=$(get refresh_median_ms)
row "refresh, nothing new, ms (median)" "$refresh" "re-open $reopen" \
  "$(calc "$refresh / $reopen")" "-" "info"
iw=$(calc1 "$(get cli_inspect_reopen_wall) * 1000")
iw1=$(calc1 "$(get cli_inspect_first_wall) * 1000")
row "inspect re-open, ms (wall)" "$iw" "first $iw1" "$(calc "$iw / $iw1")" \
  "-" "info"
if [ $have_lua = 1 ]; then
  for size in big mid; do
    cw=$(get "c_${size}_wall")
    lw=$(get "lua_${size}_wall")
    cc_=$(get "c_${size}_cpu")
    lc=$(get "lua_${size}_cpu")
    [ "$size" = big ] && label="large trial" || label="${RUN_STEPS}-step trial"
    [ "$size" = big ] && tgt="<= 2x" || tgt="-"
    v=$([ "$size" = big ] && verdict "$(calc "$lw / $cw")" "<=" 2 || echo info)
    row "Lua/C rule, $label (wall s)" "$lw" "C plugin $cw" \
      "$(calc "$lw / $cw")" "$tgt" "$v"
    row "Lua/C rule, $label (cpu s)" "$lc" "C plugin $cc_" \
      "$(calc "$lc / $cc_")" "$tgt" "info"
  done
else
  row "Lua/C rule" "skipped" "-" "-" "<= 2x" "SKIP"
fi
if [ $have_exploding = 1 ]; then
  s1=$(get scale1_cpu)
  s2=$(get scale2_cpu)
  per1=$(calc "$s1 * 1000 / $RUN_STEPS")
  per2=$(calc "$s2 * 1000 / (2 * $RUN_STEPS)")
  rs=$(calc "$per2 / $per1")
  row "run ms/step at $((2 * RUN_STEPS)) steps (cpu)" "$per2" \
    "at $RUN_STEPS: $per1" "$rs" "~1 linear" "$(verdict "$rs" "<=" 1.5)"
fi
# ---------------------------------------------------------------- 5. live
# Targets (bench/live_latency.c): index file complete -> signal
# delivered, p99 < 100 ms, with an action at every step and at every 10th,
# and for a TensorBoard event file (record written -> signal, every 10th);
# idle CPU of a watch < 1 % of a core.
if [ $have_live = 1 ]; then
  for k in live live_sparse tb_sparse; do
    case $k in
    live) what="action every step" ;;
    live_sparse) what="action every 10th" ;;
    *) what="TensorBoard, every 10th" ;;
    esac
    row "live $what: p50/max ms" "$(get ${k}_p50_ms)" \
      "max $(get ${k}_max_ms)" "-" "-" "info"
    row "live $what: p99 ms" "$(get ${k}_p99_ms)" \
      "$(get live_interval_ms) ms/step" "-" "< 100 ms" \
      "$(verdict "$(get ${k}_p99_ms)" "<" 100)"
    row "live $what: signals" "$(get ${k}_received)" \
      "of $(get ${k}_triggers)" "-" "all" \
      "$(verdict "$(get ${k}_received)" ">=" "$(get ${k}_triggers)")"
  done
  row "live: idle CPU % of a core" "$(get live_idle_cpu_pct)" \
    "--poll $(get live_idle_poll_cpu_pct)" "-" "< 1 %" \
    "$(verdict "$(get live_idle_cpu_pct)" "<" 1)"
fi
# ---------------------------------------------------------------- 5b. launcher
# Target: launched command stopped, p99 < 100 ms.
if [ $have_launch = 1 ]; then
  lp50=$(get launch_stop_p50_ms)
  pp50=$(get pid_stop_p50_ms)
  row "launcher stop: p50 ms" "$lp50" "--training-pid $pp50" \
    "$(calc "$lp50 / ($pp50 + 0.001)")" "-" "info"
  row "launcher stop: p99 ms" "$(get launch_stop_p99_ms)" \
    "--training-pid $(get pid_stop_p99_ms)" "-" "< 100 ms" \
    "$(verdict "$(get launch_stop_p99_ms)" "<" 100)"
fi
# ---------------------------------------------------------------- 6. profiler
# Targets: ProfilerReport over 1M system events < 1 s, < 64 MB.
if [ $have_prof = 1 ]; then
  pw=$(get prof_report_wall)
  pc=$(get prof_report_cpu)
  pm=$(calc1 "$(get prof_report_rss) / 1024")
  row "ProfilerReport 1M events, s (wall)" "$pw" "cpu $pc" "-" "< 1 s" \
    "$(verdict "$pw" "<" 1)"
  row "ProfilerReport 1M events, s (cpu)" "$pc" "-" "-" "< 1 s" \
    "$(verdict "$pc" "<" 1)"
  row "ProfilerReport peak RSS MB" "$pm" "-" "-" "< 64" \
    "$(verdict "$pm" "<" 64)"
  row "11 profiler rules as plugins, s" "$(get prof_rules_wall)" \
    "cpu $(get prof_rules_cpu)" "-" "-" "info"
  row "11 profiler rules peak RSS MB" \
    "$(calc1 "$(get prof_rules_rss) / 1024")" "-" "-" "-" "info"
fi
# Targets: 1 M scalars < 0.3 s, peak RSS < 32 MB, incremental.
if [ $have_tb = 1 ]; then
  tr=$(get tb_read_s)
  tw=$(get tb_raw_s)
  row "TensorBoard 1M scalars, s (wall)" "$tr" "raw read $tw" \
    "$(calc "$tr / $tw")" "< 0.3 s" "$(verdict "$tr" "<" 0.3)"
  row "TensorBoard 1M scalars peak RSS MB" "$(get tb_read_rss_mb)" \
    "raw read $(get tb_raw_rss_mb)" "-" "< 32" \
    "$(verdict "$(get tb_read_rss_mb)" "<" 32)"
  row "TensorBoard RSS MB after 1+$BENCH_REPEAT opens" "$(get tb_read_rss_all_mb)" \
    "one open $(get tb_read_rss_mb)" "-" "-" "info"
  row "TensorBoard refresh, unchanged ms" "$(get tb_refresh_unchanged_ms)" \
    "values $(get tb_refresh_unchanged_added)" "-" "-" "info"
  row "TensorBoard refresh, +1000 ms" "$(get tb_refresh_1000_ms)" \
    "values $(get tb_refresh_1000_added)" "-" "-" "info"
fi
# Target of "profiling anywhere": peak RSS < 64 MB whatever the job's length
# (the 11 rules as plugins: each plugin still has its own 12 MiB cache of
# parsed files).
if [ $have_prof_big = 1 ]; then
  big=$(awk -v n="$(get profbig_events)" 'BEGIN { printf "%.0fM", n / 1e6 }')
  for k in report rules; do
    [ $k = report ] && what="ProfilerReport peak" || what="11 profiler rules"
    m=$(calc1 "$(get profbig_${k}_rss) / 1024")
    at1m=-
    [ $have_prof = 1 ] && at1m="1M: $(calc1 "$(get prof_${k}_rss) / 1024")"
    row "$what RSS MB, $big events" "$m" "$at1m" "-" "< 64" \
      "$(verdict "$m" "<" 64)"
  done
  row "ProfilerReport $big events, s (wall)" "$(get profbig_report_wall)" \
    "cpu $(get profbig_report_cpu)" "-" "-" "info"
fi
# ------------------------------------------- 8. the monitor's own cost
# bench/monitor_overhead.sh: `smrules monitor` at 500 and 200 ms, CPU % of
# a core and peak RSS (prints its own rows).
"$ROOT/bench/monitor_overhead.sh" "$BUILD" || die "bench/monitor_overhead.sh failed"
# ------------------------------------------- 9. the PyTorch hook's cost
# bench/torch_hook_bench.py: step time of a small CPU model with no hook,
# the hook at save_interval 100 and 1, and writing the same bytes raw
# (prints its own rows; says so and skips without python3-torch).  Twice:
# at batch 64 (the step the save_interval 100 target is judged on), then
# at batch 1, where the step is shorter than the writer's work and the
# rounds resolve a tenth of a millisecond (the save_interval 1 target is
# judged there; see bench/README.md, section 9).
PYTHONPATH="$B/python" /usr/bin/python3 "$ROOT/bench/torch_hook_bench.py" ||
  die "bench/torch_hook_bench.py failed"
HOOK_BATCH=1 PYTHONPATH="$B/python" /usr/bin/python3 "$ROOT/bench/torch_hook_bench.py" ||
  die "bench/torch_hook_bench.py (batch 1) failed"
# ------------------------------------------- 10. sizing
# bench/sizing.sh: CPU seconds per GB and peak RSS for one rule and twelve,
# and the CPU a metrics scrape costs: the table docs/kubernetes.md sizes
# its requests from (prints its own rows).
"$ROOT/bench/sizing.sh" "$BUILD" || die "bench/sizing.sh failed"
# ------------------------------------------------- 7. scale
# A 5 GB local trial and a 1 GB trial in S3 (moto on loopback) through the
# built-in rules, 1..N threads: bench/s3_bench.sh prints its own table
# (see docs/s3.md).  S3B_SKIP=1 leaves it out.
if [ "${S3B_SKIP:-0}" != 1 ]; then
  echo
  "$ROOT/bench/s3_bench.sh" "$BUILD" || die "bench/s3_bench.sh failed"
fi
# ------------------------------------------- 11. Python rules and the API
# bench/python_rules_bench.py: VanishingGradient's scan (2.1 GB of 1 MiB
# gradients) through the trial API (per value, reductions, the bulk read,
# with and without reading ahead: SMRULES_READ_AHEAD=0), a SageMaker custom rule as a
# python: rule, smdebug's per-value way of reading in Python, the C rule
# and cat of the same bytes, each a whole process paired with the C rule
# in its round (prints its own rows; PYB_STEPS, PYB_REPEAT, PYB_WAYS;
# PYB_SKIP=1 leaves it out).
if [ "${PYB_SKIP:-0}" != 1 ]; then
  BENCH_DIR="$base" /usr/bin/python3 "$ROOT/bench/python_rules_bench.py" "$B" ||
    die "bench/python_rules_bench.py failed"
fi
# ------------------------------------------- 12. real-shaped trials
# bench/real_trials.sh: the rules on an all-gradient FileWriter trial and
# on a CNN trial as smdebug's PyTorch hook saves it, against cat (prints
# its own rows).
"$ROOT/bench/real_trials.sh" "$BUILD" || die "bench/real_trials.sh failed"
# ------------------------------------------------- 13. hang latency
# bench/hang_latency.py: how long after its threshold TrainingHang fires on
# a hung launched trainer, and how long stacks, checkpoint and SIGTERM then
# take (docs/live.md, "When training hangs"; prints its own rows).
python3 "$ROOT/bench/hang_latency.py" "$BUILD" || die "bench/hang_latency.py failed"
# ------------------------------------------------- 14. kernels
# bench/kernel_bench.c: each per-element rule's own pass over float32
# tensors in memory (1 MiB, 12.6 MB, 128 MiB), GB/s on one core beside
# memcpy and a plain read of the same bytes (prints its own rows; target
# >= 8 GB/s; KERNEL_REPEAT, KERNEL_SIZES).
echo
echo "== 14. per-element kernels, one core ($(nproc) cores, load average" \
  "$(cut -d' ' -f1-3 /proc/loadavg) at start)"
"$B/bench/kernel_bench" >"$TMP/kernels.out" || die "bench/kernel_bench failed"
grep -v '^RESULT ' "$TMP/kernels.out"
exit 0
