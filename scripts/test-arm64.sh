#!/usr/bin/env bash
# Cross-builds base, quant and kernels for aarch64 and runs their tests under
# qemu-aarch64 (-cpu max: NEON with dotprod), so the NEON kernels are checked
# against the scalar reference on an x86 machine. Exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${BMOE_JOBS:-$(nproc)}
build=${BMOE_ARM64_BUILD:-build-arm64}

for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  if ! command -v "$tool" >/dev/null; then
    echo "test-arm64: $tool not found (install gcc-aarch64-linux-gnu qemu-user)" >&2
    exit 1
  fi
done

cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=Release -DBMOE_KERNELS_ONLY=ON -DBMOE_WERROR=ON >/dev/null
cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" --output-on-failure -j"$jobs"
