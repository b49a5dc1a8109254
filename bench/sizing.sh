#!/usr/bin/env bash
# bench/sizing.sh BUILD - the figures docs/kubernetes.md sizes its CPU and
# memory requests from: what one rule and the twelve rules of
# examples/many-rules.yaml cost per GB of trial (CPU seconds, peak RSS),
# what each rule adds, and what a metrics scrape costs the sidecar.
#
# The trial is written by bench/scale_gen (SIZING_STEPS TRAIN steps of 8
# weights and 8 gradients of 1 MiB, default 32 steps = 0.54 GB).  The
# baseline, measured in the same run, is `cat` of the same event files
# (warm page cache) and, for memory, an idle smrules (`--version`).  Each
# figure is the median of SIZING_REPEAT runs (default 3).  Scrape cost:
# SCRAPES (default 2000) GETs of /metrics from a watching run with three
# rules, its CPU time from /proc before and after.  Exit 1 when a run fails.
set -u
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/$BUILD
SMRULES=$B/smrules
STEPS=${SIZING_STEPS:-32}
REPEAT=${SIZING_REPEAT:-3}
SCRAPES=${SCRAPES:-2000}
BENCH_NAME=sizing
. "$ROOT/bench/lib.sh" # die, calc, calc1
for f in "$SMRULES" "$B/bench/scale_gen" /usr/bin/time; do
  [ -x "$f" ] || die "missing $f"
done
TMP=$(mktemp -d "${BENCH_DIR:-/tmp}/smrules-sizing.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

"$B/bench/scale_gen" "$TMP/trial" "$STEPS" 8 262144 1 1 >"$TMP/bytes" ||
  die "scale_gen failed"
GB=$(du -sb "$TMP/trial/events" | awk '{ printf "%.3f", $1 / 1e9 }')
printf 'rules:\n  - rule: VanishingGradient\n' >"$TMP/one.yaml"

# measure NAME CMD...: REPEAT runs; NAME's median "cpu rss_kb" into $TMP/NAME
measure() {
  local name=$1 i
  shift
  : >"$TMP/$name.runs"
  for i in $(seq "$REPEAT"); do
    /usr/bin/time -f '%U %S %M' -o "$TMP/t" "$@" >/dev/null 2>"$TMP/err"
    local rc=$?
    [ $rc -le 1 ] || { echo "sizing: $* failed ($rc)" >&2; cat "$TMP/err" >&2; exit 1; }
    awk '{ printf "%.3f %d\n", $1 + $2, $3 }' "$TMP/t" >>"$TMP/$name.runs"
  done
  sort -n "$TMP/$name.runs" | awk -v n="$REPEAT" 'NR == int((n + 1) / 2)' >"$TMP/$name"
}
cat "$TMP"/trial/events/*/*.tfevents >/dev/null # warm the page cache
measure cat sh -c "cat '$TMP'/trial/events/*/*.tfevents"
measure idle "$SMRULES" --version
measure one "$SMRULES" run --trial "$TMP/trial" --rules "$TMP/one.yaml" --fresh \
  --state "$TMP/s1.db" --output "$TMP/out1"
measure many "$SMRULES" run --trial "$TMP/trial" --rules "$ROOT/examples/many-rules.yaml" \
  --fresh --state "$TMP/s12.db" --output "$TMP/out12"
read -r cat_cpu _ <"$TMP/cat"
read -r _ idle_kb <"$TMP/idle"
read -r one_cpu one_kb <"$TMP/one"
read -r many_cpu many_kb <"$TMP/many"

# The scrape cost: a run waiting for steps in an empty folder, scraped.
mkdir "$TMP/empty"
printf 'rules:\n  - rule: ExplodingTensor\n  - rule: LossNotDecreasing\n  - rule: VanishingGradient\n' \
  >"$TMP/three.yaml"
scrape=$(python3 - "$SMRULES" "$TMP" "$SCRAPES" <<'PY'
import os, re, signal, subprocess, sys, urllib.request
smrules, tmp, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = subprocess.Popen([smrules, "run", "--watch", "--trial", tmp + "/empty", "--rules",
                      tmp + "/three.yaml", "--state", tmp + "/s3.db",
                      "--metrics-listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
url = None
for line in p.stderr:  # "smrules: metrics on http://ADDR/metrics"
    m = re.search(r"metrics on (http://\S+/metrics)", line)
    if m:
        url = m.group(1)
        break
if not url:
    sys.exit("sizing: the run never said where its metrics are")
def cpu():
    f = open("/proc/%d/stat" % p.pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
size = 0
urllib.request.urlopen(url).read()
c0 = cpu()
for _ in range(n):
    size = len(urllib.request.urlopen(url).read())
c1 = cpu()
hwm = [l.split()[1] for l in open("/proc/%d/status" % p.pid) if l.startswith("VmHWM")][0]
p.send_signal(signal.SIGINT)
p.wait()
print("%.1f %s %d" % ((c1 - c0) / n * 1e6, hwm, size))
PY
) || die "the scrape benchmark failed"
read -r us_per_scrape scrape_kb scrape_bytes <<<"$scrape"

mb() { calc1 "$1 / 1024"; }
per() { calc "$1 / $2"; }
echo
echo "== 10. sizing for docs/kubernetes.md ($GB GB trial, $(nproc) cores," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-50s %-12s %s\n' FIGURE VALUE BASELINE
printf '%-50s %-12s %s\n' "1 rule (VanishingGradient): CPU s per GB" \
  "$(per "$one_cpu" "$GB")" "cat $(per "$cat_cpu" "$GB")"
printf '%-50s %-12s %s\n' "12 rules (many-rules.yaml): CPU s per GB" \
  "$(per "$many_cpu" "$GB")" "cat $(per "$cat_cpu" "$GB")"
printf '%-50s %-12s %s\n' "each rule beyond the first: CPU s per GB" \
  "$(awk -v a="$many_cpu" -v b="$one_cpu" -v g="$GB" 'BEGIN { printf "%.3f", (a - b) / 11 / g }')" "-"
printf '%-50s %-12s %s\n' "1 rule: peak RSS MB" "$(mb "$one_kb")" "idle $(mb "$idle_kb")"
printf '%-50s %-12s %s\n' "12 rules: peak RSS MB" "$(mb "$many_kb")" "idle $(mb "$idle_kb")"
printf '%-50s %-12s %s\n' "metrics scrape: CPU µs per scrape" "$us_per_scrape" \
  "$SCRAPES scrapes, ${scrape_bytes} B each"
printf '%-50s %-12s %s\n' "watching run with 3 rules, scraped: peak RSS MB" \
  "$(mb "$scrape_kb")" "idle $(mb "$idle_kb")"
exit 0
