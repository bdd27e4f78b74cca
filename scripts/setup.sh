#!/usr/bin/env bash
# Installs every Debian package the build and the tests need (idempotent), then builds.
# Run as root on Debian bookworm. Nothing else is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libpcre2-dev libcjson-dev zlib1g-dev
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
  hyperfine
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages (${missing[*]}); run as root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "${BMOE_SETUP_NO_BUILD:-0}" != 1 ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  cmake --build build -j"$(nproc)"
fi
