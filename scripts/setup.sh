#!/usr/bin/env bash
# Installs every Debian package the build and the tests need, and the npm
# packages of bmoe-server's client tests (idempotent), then builds. Run as root
# on Debian bookworm. Nothing else is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libpcre2-dev libcjson-dev zlib1g-dev libmicrohttpd-dev
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
  hyperfine python3 python3-jsonschema
  chromium
)
# Node.js and npm for bmoe-server's client tests (tests/server/js): Debian's
# where there is no node; a machine that has one keeps it (NodeSource's
# nodejs bundles npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi
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

# The client tests' npm packages (tests/server/js/package-lock.json, from the
# npm registry), installed without running their scripts. Done once per lock:
# an installed tree stamped with the same lock is kept (offline runs need
# nothing more); npm ci replaces a stale one whole.
js=tests/server/js
if ! cmp -s "$js/package-lock.json" "$js/node_modules/.bmoe-installed-lock"; then
  (cd "$js" && npm ci --ignore-scripts --no-audit --no-fund --no-update-notifier --loglevel=error)
  cp "$js/package-lock.json" "$js/node_modules/.bmoe-installed-lock"
fi

# The arm64 builds of the libraries the engine links, for the cross build of
# scripts/test-arm64.sh: the Debian arm64 packages unpacked into a sysroot of
# their own (BMOE_ARM64_SYSROOT), not installed through multiarch. Installing
# libpcre2-dev:arm64 and the rest pulls in libc6:arm64, a second aarch64 glibc
# in /lib/aarch64-linux-gnu that the cross glibc's loader (qemu-aarch64 -L
# /usr/aarch64-linux-gnu) then loads, and that mix hangs at the first
# pthread_create; it also upgrades amd64 packages to keep their versions equal.
# Done once: an existing sysroot is kept (offline runs need nothing more).
arm64_sysroot=${BMOE_ARM64_SYSROOT:-/opt/bmoe-arm64-sysroot}
arm64_packages=(libpcre2-8-0 libpcre2-dev libcjson1 libcjson-dev zlib1g zlib1g-dev)
if [ ! -f "$arm64_sysroot/.complete" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: the arm64 sysroot $arm64_sysroot is missing; run as root" >&2
    exit 1
  fi
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    apt-get update -qq
  fi
  downloads=$(mktemp -d)
  chown _apt "$downloads" 2>/dev/null || true # apt downloads as _apt where it may
  (cd "$downloads" && apt-get download -qq "${arm64_packages[@]/%/:arm64}")
  rm -rf "$arm64_sysroot.partial"
  for deb in "$downloads"/*.deb; do
    dpkg-deb -x "$deb" "$arm64_sysroot.partial"
  done
  # a link to an absolute path (libz.so) points into the sysroot instead
  find "$arm64_sysroot.partial" -type l -lname '/*' | while read -r link; do
    ln -sfnr "$arm64_sysroot.partial$(readlink "$link")" "$link"
  done
  rm -rf "$downloads" "$arm64_sysroot"
  touch "$arm64_sysroot.partial/.complete"
  mv "$arm64_sysroot.partial" "$arm64_sysroot"
fi

if [ "${BMOE_SETUP_NO_BUILD:-0}" != 1 ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  cmake --build build -j"$(nproc)"
fi
