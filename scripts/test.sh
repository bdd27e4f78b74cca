#!/usr/bin/env bash
# The whole test suite (what .ci/run runs): installs what is missing, then
#  1. gcc Release build with -Werror and every ctest test;
#  2. clang build with AddressSanitizer + UBSan (-Werror) and the unit tests;
#  3. the engine and the CLI cross-built for aarch64, under qemu-aarch64: the
#     kernels' tests and the oracle models end to end (scripts/test-arm64.sh);
#  4. the GGUF reader fuzz target over a generated malformed-file corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
ctest_log=$(mktemp)
trap 'rm -f "$ctest_log"' EXIT
# Runs ctest with the given arguments, keeping its summary for the final count.
run_ctest() {
  ctest "$@" 2>&1 | tee -a "$ctest_log"
  return "${PIPESTATUS[0]}"
}

BMOE_SETUP_NO_BUILD=1 scripts/setup.sh

echo "== gcc release build and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBMOE_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
run_ctest --test-dir build --output-on-failure -j"$jobs"

echo "== clang ASan+UBSan build and unit tests"
CC=clang cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBMOE_SANITIZE=ON -DBMOE_WERROR=ON >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit

for extra in scripts/test-arm64.sh scripts/test-fuzz.sh; do
  if [ -x "$extra" ]; then
    echo "== $extra"
    "$extra"
  fi
done

# One closing line over every ctest stage run here (the arm64 stage prints its own).
total=$(awk '/tests passed, [0-9]+ tests failed out of/ { n += $NF } END { print n + 0 }' "$ctest_log")
echo "== all test stages passed"
echo "bmoe: ${total} passed, 0 failed"
