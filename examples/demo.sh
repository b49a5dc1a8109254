#!/bin/sh
# The smrules demo, from a fresh Debian machine: install what is needed,
# build, then start a stand-in training job (build/demo-trainer) that saves
# a trial step by step the way smdebug's hook does, and watch it with
# smrules.  When the loss stops decreasing, LossNotDecreasing fires and its
# StopTraining action sends SIGTERM to the trainer, which ends cleanly;
# smrules sees training end and prints the results.  Writes nothing into
# the repository.
set -e
cd "$(dirname "$0")/.."
sh .ci/deps.sh
make -j"$(nproc 2>/dev/null || echo 2)" all
work=$(mktemp -d)
trap 'kill "$trainer" 2>/dev/null || true; rm -rf "$work"' EXIT

echo "== starting the trainer: one step every 100 ms, loss flat from step 30"
build/demo-trainer "$work/trial" --steps 600 --interval-ms 100 \
  --plateau-at 30 >"$work/trainer.log" 2>&1 &
trainer=$!

echo "== smrules run --watch (trainer pid $trainer)"
set +e
build/smrules run --trial "$work/trial" --rules examples/demo/rules.yaml \
  --watch --timeout 50 --training-pid "$trainer" --output "$work/out"
rc=$?
set -e
wait "$trainer" 2>/dev/null || true  # 143: it ended on SIGTERM
echo
echo "== the trainer says: $(cat "$work/trainer.log")"
echo "== smrules exit status $rc (1 = issues found); reports written:"
ls "$work/out"
[ "$rc" -le 1 ]
