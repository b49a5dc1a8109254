#!/bin/sh
# Build smrules and run it on a bundled example trial: a real PyTorch run
# (smdebug 1.0.34) whose loss explodes.  Installs what it needs (Debian,
# as root).  Writes nothing into the repository.
set -e
cd "$(dirname "$0")/.."
sh .ci/deps.sh
make -j"$(nproc 2>/dev/null || echo 2)" all
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r tests/fixtures/trials/exploding_mse_high_lr "$work/trial"
rm -f "$work/trial/EXPECT.json"
echo "== smrules inspect"
build/smrules inspect --trial "$work/trial"
echo
echo "== smrules run (examples/rules.yaml)"
set +e
build/smrules run --trial "$work/trial" --rules examples/rules.yaml
rc=$?
set -e
echo
echo "exit status $rc (1 = issues found); reports in $work/trial/rule-output/:"
ls "$work/trial/rule-output"
[ "$rc" -le 1 ]
