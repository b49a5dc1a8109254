#!/bin/sh
# The smrules demo, from a fresh Debian machine: install what building
# needs (not the test tool chain), build, then start a stand-in training
# job (build/demo-trainer, which saves a trial step by step the way
# smdebug's hook does) under smrules:
#
#   smrules run --trial DIR --rules examples/demo/rules.yaml -- build/demo-trainer DIR ...
#
# When the loss stops decreasing, LossNotDecreasing fires and its
# StopTraining action sends SIGTERM to the trainer, which ends cleanly;
# smrules sees it exit, evaluates what it wrote last and prints the
# results.  Everything goes to $DEMO_DIR (default $TMPDIR/smrules-demo,
# emptied first), which is kept: the reports it lists stay there.
set -e
cd "$(dirname "$0")/.."
sh .ci/deps.sh build
make -j"$(nproc 2>/dev/null || echo 2)" all
dir=${DEMO_DIR:-${TMPDIR:-/tmp}/smrules-demo}
rm -rf "$dir"
mkdir -p "$dir"

echo "== smrules run -- build/demo-trainer (a step every 100 ms, loss flat from step 30)"
set +e
build/smrules run --trial "$dir/trial" --rules examples/demo/rules.yaml \
  --timeout 50 --output "$dir/rule-output" \
  -- build/demo-trainer "$dir/trial" --steps 600 --interval-ms 100 --plateau-at 30
rc=$?
set -e
echo
echo "== smrules exit status $rc (1 = a rule found issues and training was stopped)"
echo "== reports, kept in $dir/rule-output:"
ls "$dir/rule-output"
[ "$rc" -le 1 ]
