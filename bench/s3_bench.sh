#!/usr/bin/env bash
# bench/s3_bench.sh BUILD - the scale benchmark (docs/s3.md):
#
#   1. a large local trial (default 5 GB) through the built-in rules: the
#      default rule set and a set of twelve rules, with 1 to N threads;
#   2. a trial in S3 (default 1 GB; the moto server on 127.0.0.1) through
#      the same rules: time, peak RSS, bytes and requests fetched, 1 to N
#      threads, and a second run over the same state (nothing new).
#
# Each run is timed with /usr/bin/time (wall, user+sys, max RSS); bytes and
# requests come from smrules' own count (SMRULES_S3_STATS=1).  Trials are
# written by bench/scale_gen (8 float32 tensors of 1 MiB per step plus the
# loss) into a temporary directory under $BENCH_DIR (default /tmp), which
# is deleted at the end, as is the moto server.
#
# Knobs: BENCH_DIR, S3B_LOCAL_GB (default 5; 0 skips part 1), S3B_S3_GB
# (default 1), S3B_LATENCY_MS (default 20: part 2 again behind a moto that
# answers each request that much later; 0 skips it),
# S3B_THREADS (default "1 2 ... nproc", at most 4 values).  Without the
# moto package (python3 -m moto.server) part 2 is skipped with a note.
# Exit status: 0 when everything ran, 1 when something failed to run.
set -u

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/$BUILD
SMRULES=$B/smrules
GEN=$B/bench/scale_gen
LOCAL_GB=${S3B_LOCAL_GB:-5}
S3_GB=${S3B_S3_GB:-1}
LATENCY_MS=${S3B_LATENCY_MS:-20}
STEP_BYTES=$((8 * 1048576 + 4)) # 8 tensors of 1 MiB and the loss

BENCH_NAME=s3_bench
. "$ROOT/bench/lib.sh" # die

for f in "$SMRULES" "$GEN"; do
  [ -x "$f" ] || die "missing $f (run 'make bench')"
done
[ -x /usr/bin/time ] || die "/usr/bin/time is needed (package 'time')"

ncpu=$(nproc 2>/dev/null || echo 2)
if [ -n "${S3B_THREADS:-}" ]; then
  THREADS=$S3B_THREADS
elif [ "$ncpu" -le 4 ]; then
  THREADS=$(seq -s ' ' 1 "$ncpu")
else
  THREADS="1 2 4 $ncpu"
fi
NMAX=${THREADS##* }

base=${BENCH_DIR:-/tmp}
need_kb=$(((LOCAL_GB + S3_GB) * 1000000 + 300000))
free_kb=$(df -Pk "$base" | awk 'NR == 2 { print $4 }')
[ "$free_kb" -ge "$need_kb" ] ||
  die "$base has ${free_kb} KB free, the benchmark needs ${need_kb} KB"
TMP=$(mktemp -d "$base/smrules-s3bench.XXXXXX") || die "cannot create a temp dir"
MOTO_PID=
MOTO2_PID=
cleanup() {
  [ -n "$MOTO_PID" ] && kill "$MOTO_PID" 2>/dev/null && wait "$MOTO_PID" 2>/dev/null
  [ -n "$MOTO2_PID" ] && kill "$MOTO2_PID" 2>/dev/null && wait "$MOTO2_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
SUMMARY=$TMP/summary
: >"$SUMMARY"

cp "$ROOT/examples/many-rules.yaml" "$TMP/many.yaml"

# measure LABEL CMD...: run once under /usr/bin/time; prints and records
# wall s, cpu s, max RSS MB, and (S3) bytes and requests fetched.
measure() {
  local label=$1
  shift
  /usr/bin/time -f '%e %U %S %M' -o "$TMP/time" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ $rc -gt 1 ]; then
    sed 's/^/    /' "$TMP/err" | tail -5
    die "failed (exit $rc): $*"
  fi
  # (a non-zero exit adds a first line "Command exited with ...")
  read -r wall user sys rss < <(tail -n 1 "$TMP/time")
  local bytes requests
  bytes=$(awk -F'bytes=' '/s3 stats/ { split($2, a, " "); s += a[1] } END { print s + 0 }' "$TMP/err")
  requests=$(awk -F'requests=' '/s3 stats/ { split($2, a, " "); s += a[1] } END { print s + 0 }' "$TMP/err")
  local cpu mb
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
  mb=$(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }')
  printf '  %-44s %8.2f s wall %8s s cpu %8s MB rss' "$label" "$wall" "$cpu" "$mb"
  if [ "$bytes" != 0 ]; then
    printf ' %10.1f MB fetched %7d requests' "$(awk -v b="$bytes" 'BEGIN { print b / 1e6 }')" "$requests"
  fi
  printf '\n'
  echo "$label|$wall|$cpu|$mb|$bytes|$requests" >>"$SUMMARY"
}

copy_bucket() { # FROM_ENDPOINT TO_ENDPOINT: bucket "bench" from one to the other
  python3 - "$1" "$2" <<'PYEOF'
import sys, time
from concurrent.futures import ThreadPoolExecutor
import boto3
def client(ep):
    return boto3.client("s3", endpoint_url=ep, region_name="us-east-1",
                        aws_access_key_id="bench", aws_secret_access_key="bench")
a, b = client(sys.argv[1]), client(sys.argv[2])
deadline = time.monotonic() + 30
while True:
    try:
        b.create_bucket(Bucket="bench")
        break
    except Exception:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
keys = [o["Key"] for p in a.get_paginator("list_objects_v2").paginate(Bucket="bench")
        for o in p.get("Contents", [])]
def copy(k):
    b.put_object(Bucket="bench", Key=k, Body=a.get_object(Bucket="bench", Key=k)["Body"].read())
with ThreadPoolExecutor(8) as ex:
    list(ex.map(copy, keys))
PYEOF
}

gen_trial() { # DIR GB
  local steps=$(($2 * 1000000000 / STEP_BYTES))
  "$GEN" "$1" "$steps" 4 262144 >/dev/null || die "scale_gen $1 failed"
  echo "  $1: $steps steps, $(du -sh "$1" | cut -f1)"
}

echo "== scale benchmark: $ncpu cores, threads: $THREADS"
echo "   load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# ------------------------------------------------------------ 1. local
echo "== 1. local trial, ${LOCAL_GB} GB"
LOCAL=$TMP/local
if [ "$LOCAL_GB" -gt 0 ]; then
gen_trial "$LOCAL" "$LOCAL_GB"
for j in $THREADS; do
  measure "local default rules, --jobs $j" \
    "$SMRULES" run --trial "$LOCAL" --fresh --json --output "$TMP/out-l" --jobs "$j"
done
for j in 1 "$NMAX"; do
  measure "local 12 rules, --jobs $j" \
    "$SMRULES" run --trial "$LOCAL" --fresh --json --output "$TMP/out-l" \
    --rules "$TMP/many.yaml" --jobs "$j"
done
rm -rf "$LOCAL"
else
  echo "  SKIP: S3B_LOCAL_GB=0"
fi

# --------------------------------------------------------------- 2. S3
echo "== 2. trial in S3 (moto on 127.0.0.1), ${S3_GB} GB"
if ! python3 -c 'import moto, boto3' 2>/dev/null; then
  echo "  SKIP: python3 cannot import moto and boto3"
else
  PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 -m moto.server -H 127.0.0.1 -p "$PORT" >"$TMP/moto.log" 2>&1 &
  MOTO_PID=$!
  EP=http://127.0.0.1:$PORT
  REMOTE=$TMP/remote
  gen_trial "$REMOTE" "$S3_GB"
  t0=$(date +%s.%N)
  python3 - "$EP" "$REMOTE" <<'EOF' || die "upload to moto failed"
import os, sys, time
from concurrent.futures import ThreadPoolExecutor
import boto3
from boto3.s3.transfer import TransferConfig
ep, base = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1",
                  aws_access_key_id="bench", aws_secret_access_key="bench")
deadline = time.monotonic() + 30
while True:
    try:
        s3.create_bucket(Bucket="bench")
        break
    except Exception:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
files = [(os.path.join(d, f), "trial/" + os.path.relpath(os.path.join(d, f), base))
         for d, _, fs in os.walk(base) for f in fs]
cfg = TransferConfig(multipart_threshold=1 << 30)
with ThreadPoolExecutor(8) as ex:
    list(ex.map(lambda p: s3.upload_file(p[0], "bench", p[1], Config=cfg), files))
EOF
  echo "  uploaded in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
  rm -rf "$REMOTE"
  export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench SMRULES_S3_STATS=1
  URL=s3://bench/trial
  # --schedule rules: each rule over all steps (the order of local runs);
  # steps (the default for S3): all rules in lock step, so each record
  # is fetched once and shared through the record cache.
  for sched in rules steps; do
    for j in $THREADS; do
      measure "s3 default rules, --jobs $j, $sched" \
        "$SMRULES" run --trial "$URL" --s3-endpoint "$EP" --fresh --json \
        --output "$TMP/out-s" --jobs "$j" --schedule "$sched"
    done
    for j in 1 "$NMAX"; do
      measure "s3 12 rules, --jobs $j, $sched" \
        "$SMRULES" run --trial "$URL" --s3-endpoint "$EP" --fresh --json \
        --output "$TMP/out-s" --rules "$TMP/many.yaml" --jobs "$j" \
        --schedule "$sched"
    done
  done
  # 2b. the same trial behind a per-request delay, as a stand-in for the
  # round trip to a real region: what parallel read-ahead saves.
  if [ "$LATENCY_MS" != 0 ]; then
    PORT2=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    python3 "$ROOT/bench/moto_latency.py" "$PORT2" "$LATENCY_MS" >"$TMP/moto2.log" 2>&1 &
    MOTO2_PID=$!
    EP2=http://127.0.0.1:$PORT2
    copy_bucket "$EP" "$EP2" || die "copy to the delayed moto failed"
    echo "  -- with ${LATENCY_MS} ms per request (bench/moto_latency.py)"
    SMRULES_S3_PREFETCH=0 measure "s3+${LATENCY_MS}ms default, --jobs 1, rules, no read-ahead" \
      "$SMRULES" run --trial "$URL" --s3-endpoint "$EP2" --fresh --json \
      --output "$TMP/out-s" --jobs 1 --schedule rules
    measure "s3+${LATENCY_MS}ms default, --jobs 1, steps" \
      "$SMRULES" run --trial "$URL" --s3-endpoint "$EP2" --fresh --json \
      --output "$TMP/out-s" --jobs 1
    measure "s3+${LATENCY_MS}ms 12 rules, --jobs $NMAX, steps" \
      "$SMRULES" run --trial "$URL" --s3-endpoint "$EP2" --fresh --json \
      --output "$TMP/out-s" --rules "$TMP/many.yaml" --jobs "$NMAX"
    kill "$MOTO2_PID" 2>/dev/null
    wait "$MOTO2_PID" 2>/dev/null
    MOTO2_PID=
  fi
  measure "s3 default rules, stored state: first run" \
    "$SMRULES" run --trial "$URL" --s3-endpoint "$EP" --state "$TMP/state.db" \
    --json --output "$TMP/out-s"
  measure "s3 default rules, stored state: nothing new" \
    "$SMRULES" run --trial "$URL" --s3-endpoint "$EP" --state "$TMP/state.db" \
    --json --output "$TMP/out-s"
fi

echo "== summary"
printf '  %-44s %9s %9s %9s %12s %9s\n' "run" "wall s" "cpu s" "rss MB" "fetched MB" "requests"
while IFS='|' read -r label wall cpu mb bytes req; do
  printf '  %-44s %9s %9s %9s %12s %9s\n' "$label" "$wall" "$cpu" "$mb" \
    "$(awk -v b="$bytes" 'BEGIN { if (b > 0) printf "%.1f", b / 1e6; else print "-" }')" \
    "$([ "$req" = 0 ] && echo - || echo "$req")"
done <"$SUMMARY"
echo "   load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
