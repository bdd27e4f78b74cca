#!/usr/bin/env bash
# Cross-builds the engine and the CLI for aarch64 and runs, under qemu-aarch64
# (-cpu max: NEON with dotprod), the tests labelled arm64: base, quant, the
# kernels and the thread pool against the scalar reference, and the oracle
# models end to end, resident and streamed with overlap, through the library
# (test_oracle) and through bmoe-cli (test_cli_logits), against the same
# logits as on x86. The arm64 libpcre2, libcjson and zlib come from the
# sysroot scripts/setup.sh unpacks. Exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${BMOE_JOBS:-$(nproc)}
build=${BMOE_ARM64_BUILD:-build-arm64}
sysroot=${BMOE_ARM64_SYSROOT:-/opt/bmoe-arm64-sysroot}

for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  if ! command -v "$tool" >/dev/null; then
    echo "test-arm64: $tool not found (install gcc-aarch64-linux-gnu qemu-user)" >&2
    exit 1
  fi
done
if [ ! -f "$sysroot/.complete" ]; then
  echo "test-arm64: no arm64 sysroot at $sysroot (run scripts/setup.sh as root)" >&2
  exit 1
fi

start=$(date +%s)
BMOE_ARM64_SYSROOT=$sysroot cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=Release -DBMOE_KERNELS_ONLY=OFF -DBMOE_WERROR=ON >/dev/null
cmake --build "$build" -j"$jobs" --target bmoe_arm64_tests
ctest --test-dir "$build" --output-on-failure -j"$jobs" -L arm64
echo "test-arm64: $(( $(date +%s) - start )) s"
