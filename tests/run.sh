#!/usr/bin/env bash
# Runs the whole test suite for each build directory in $SMRULES_BUILDS
# (default "build"; e.g. SMRULES_BUILDS="build build-san"):
#   - every unit test binary <build>/tests/test_*
#   - every tests/cli/test_*.py with SMRULES=<build>/smrules
# Each program ends its output with a tally "N passed, N failed".  The sum is
# printed last as exactly one line "total: N passed, N failed".  Exits non-zero
# if any check failed, any program exited non-zero or crashed, printed no
# tally, ran longer than $SMRULES_TEST_PROGRAM_TIMEOUT seconds (default 600),
# or printed a sanitizer report.
set -u
export PYTHONDONTWRITEBYTECODE=1
cd "$(dirname "$0")/.." || exit 2

builds=${SMRULES_BUILDS:-build}
limit=${SMRULES_TEST_PROGRAM_TIMEOUT:-600} # seconds per test program
total_pass=0
total_fail=0
broken=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run_one LABEL CMD...: runs CMD, shows its output, adds its tally.
run_one() {
  local label=$1
  shift
  echo "== $label"
  timeout -k 10 "$limit" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  cat "$tmp/out"
  cat "$tmp/err" >&2
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "run.sh: $label timed out after ${limit}s"
    total_fail=$((total_fail + 1))
    broken=1
    return
  fi
  local tally
  tally=$(grep -Eo '[0-9]+ passed, [0-9]+ failed' "$tmp/out" | tail -n 1)
  if [ -z "$tally" ]; then
    echo "run.sh: $label printed no tally (exit $rc)"
    total_fail=$((total_fail + 1))
    broken=1
    return
  fi
  local p f
  p=${tally%% passed*}
  f=${tally#*, }
  f=${f%% failed*}
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
  if [ "$rc" -ne 0 ]; then
    if [ "$rc" -gt 128 ]; then
      echo "run.sh: $label killed by signal $((rc - 128))"
    elif [ "$f" -eq 0 ]; then
      echo "run.sh: $label exited with $rc although no check failed"
    fi
    broken=1
  fi
  if grep -qE 'AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:' "$tmp/err"; then
    echo "run.sh: $label: sanitizer report on stderr"
    total_fail=$((total_fail + 1))
    broken=1
  fi
}

for build in $builds; do
  case $build in
  *san*)
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    # the Python package built with the sanitizers too (make SAN=1
    # python): its tests and python: rules load it with their runtimes
    # preloaded (tests/san-python)
    if [ -f "$build/python/.built" ]; then
      export SMRULES_PYTHONPATH="$PWD/$build/python"
      export SMRULES_PYTHON="$PWD/tests/san-python"
    fi
    ;;
  *)
    unset ASAN_OPTIONS UBSAN_OPTIONS SMRULES_PYTHONPATH SMRULES_PYTHON
    ;;
  esac
  echo "==== $build"
  found_unit=0
  for t in "$build"/tests/test_*; do
    [ -f "$t" ] && [ -x "$t" ] || continue
    found_unit=1
    run_one "$t" "$t"
  done
  [ "$found_unit" -eq 1 ] || echo "run.sh: no unit test binaries in $build/tests"
  if [ ! -x "$build/smrules" ]; then
    echo "run.sh: $build/smrules does not exist; CLI tests not run"
    total_fail=$((total_fail + 1))
    broken=1
    continue
  fi
  for py in tests/cli/test_*.py; do
    [ -f "$py" ] || continue
    run_one "$py ($build)" env SMRULES="$build/smrules" python3 "$py"
  done
done

echo "total: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ] && [ "$broken" -eq 0 ]
