# shellcheck shell=bash
# bench/lib.sh - the timing and summary helpers the bench scripts share
# (run.sh, real_trials.sh, sizing.sh, s3_bench.sh); sourced, not run:
#
#   BENCH_NAME=real_trials # the prefix of die's message (default "bench")
#   . "$ROOT/bench/lib.sh"
#
# run_once and summarise keep their files in $TMP and result/get their
# numbers in $RESULTS: the script sets both before calling them.
# SUMMARY_WIDTH is the width of the name in summarise's line (default 34).

# die MESSAGE...: say what failed on stderr and exit 1.
die() {
  echo "${BENCH_NAME:-bench}: $*" >&2
  exit 1
}

# result KEY VALUE: remember a number for the summary.
result() { echo "$1 $2" >>"$RESULTS"; }
# get KEY: the last number remembered as KEY.
get() { awk -v k="$1" '$1 == k { v = $2 } END { print v }' "$RESULTS"; }
# calc EXPR: floating-point arithmetic through awk (calc1: one decimal).
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }
calc1() { awk "BEGIN { printf \"%.1f\", $1 }"; }

# median: the median of the numbers on stdin, one a line.
median() {
  sort -g | awk '{ v[NR] = $1 }
    END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# run_once NAME CMD...: run CMD once under /usr/bin/time and append
# "wall user sys maxrss" to $TMP/times.NAME; the wall time is read from
# bash's microsecond clock (/usr/bin/time's %e has 10 ms steps, too
# coarse for 0.1 s runs).  CMD may exit 0 or 1 (1 = issues found).
run_once() {
  local name=$1
  shift
  local t0=${EPOCHREALTIME/[.,]/} # microseconds, whatever the locale
  /usr/bin/time -f '%U %S %M' -o "$TMP/time1" "$@" >"$TMP/cmd.out" \
    2>"$TMP/cmd.err"
  local rc=$? t1=${EPOCHREALTIME/[.,]/}
  if [ $rc -gt 1 ]; then
    sed 's/^/  | /' "$TMP/cmd.err" "$TMP/cmd.out" | head -20 >&2
    die "failed (exit $rc): $*"
  fi
  echo "$(awk "BEGIN { printf \"%.4f\", ($t1 - $t0) / 1e6 }")" \
    "$(tail -n 1 "$TMP/time1")" >>"$TMP/times.$name"
}

# summarise NAME: record the median wall seconds (NAME_wall), user+sys
# seconds (NAME_cpu) and the largest max RSS in KB (NAME_rss) of the runs.
summarise() {
  local name=$1 f=$TMP/times.$1 wall cpu rss
  wall=$(awk '{ print $1 }' "$f" | median)
  cpu=$(awk '{ print $2 + $3 }' "$f" | median)
  rss=$(awk '$4 > m { m = $4 } END { print m + 0 }' "$f")
  result "${name}_wall" "$wall"
  result "${name}_cpu" "$cpu"
  result "${name}_rss" "$rss"
  printf '  %-*s median of %d: wall %s s, cpu %s s, max RSS %s KB\n' \
    "${SUMMARY_WIDTH:-34}" "$name" "$(wc -l <"$f")" "$wall" "$cpu" "$rss"
}

# verdict VALUE OP LIMIT: PASS/MISS for "VALUE OP LIMIT" (OP is < <= >=).
verdict() {
  awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN {
    ok = (op == "<") ? v < l : (op == "<=") ? v <= l : v >= l
    print ok ? "PASS" : "MISS" }'
}
