#!/bin/sh
# The whole test suite, from a fresh machine: install dependencies, build,
# run each fuzz target for a bounded time, then every unit and end-to-end
# test in the normal build and again under ASan/UBSan.  The last line is
# the tally: "total: N passed, N failed".
set -e
cd "$(dirname "$0")/.."
sh .ci/deps.sh
JOBS=$(nproc 2>/dev/null || echo 2)
make -j"$JOBS" all
make fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-20}"
make -j"$JOBS" check
