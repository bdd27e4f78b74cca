#!/usr/bin/env bash
# GGUF reader fuzz stage (called by scripts/test.sh): builds the libFuzzer
# target fuzz/fuzz_gguf.c with ASan+UBSan in build-fuzz, generates the
# malformed-file corpus with test_gguf_corpus --write-corpus (truncations at
# every structural boundary, seeded flips, hostile fields), runs the target
# once over every corpus file, then fuzzes for a bounded time. Exits non-zero
# on any crash, leak, timeout or sanitizer report.
# Environment: BMOE_FUZZ_SECONDS (default 45) bounds the fuzzing run.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
seconds=${BMOE_FUZZ_SECONDS:-45}
build=build-fuzz

# The libraries get coverage instrumentation too (fuzzer-no-link), so the
# fuzzer is guided by the reader's own branches, and ASan sees its reads.
CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBMOE_FUZZ=ON -DBMOE_WERROR=ON \
  -DBMOE_SANITIZE=ON -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" >/dev/null
cmake --build "$build" --target fuzz_gguf test_gguf_corpus -j"$jobs"

corpus="$build/gguf-corpus"
work="$build/gguf-corpus-work"
artifacts="$build/gguf-fuzz-artifacts"
rm -rf "$corpus" "$work" "$artifacts"
mkdir -p "$work" "$artifacts"
"$build/bin/test_gguf_corpus" --write-corpus "$corpus"
count=$(find "$corpus" -type f | wc -l)
echo "fuzz: corpus of $count files"
if [ "$count" -lt 1000 ]; then
  echo "fuzz: corpus too small ($count < 1000)" >&2
  exit 1
fi

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

echo "fuzz: every corpus file once"
"$build/bin/fuzz_gguf" -runs=0 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$artifacts/" "$corpus" 2>&1 | tail -n 5

echo "fuzz: ${seconds}s of fuzzing"
"$build/bin/fuzz_gguf" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" "$corpus" 2>&1 | tail -n 12

if [ -n "$(ls -A "$artifacts")" ]; then
  echo "fuzz: failures left in $artifacts" >&2
  exit 1
fi
echo "fuzz: passed"
