#!/bin/sh
# The whole test suite, from a fresh machine: install dependencies, build,
# run every unit and end-to-end test in the normal build and again under
# ASan/UBSan, then run each fuzz target for a bounded time.
set -e
cd "$(dirname "$0")/.."
sh .ci/deps.sh
JOBS=$(nproc 2>/dev/null || echo 2)
make -j"$JOBS" check
make fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-20}"
