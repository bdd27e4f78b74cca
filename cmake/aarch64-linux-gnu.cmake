# Cross build for aarch64 Linux with the Debian cross gcc; tests run under
# qemu-user with every CPU feature it emulates (so NEON dotprod is present).
# libpcre2, libcjson and zlib come from the arm64 sysroot scripts/setup.sh
# unpacks (BMOE_ARM64_SYSROOT); the programs find them there through their
# build RPATH, the C library through qemu's -L.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
if(DEFINED ENV{BMOE_ARM64_SYSROOT})
  set(BMOE_ARM64_SYSROOT $ENV{BMOE_ARM64_SYSROOT})
else()
  set(BMOE_ARM64_SYSROOT /opt/bmoe-arm64-sysroot)
endif()
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu ${BMOE_ARM64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_SYSROOT_DIR} ${BMOE_ARM64_SYSROOT})
set(ENV{PKG_CONFIG_LIBDIR} ${BMOE_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig)
set(CMAKE_CROSSCOMPILING_EMULATOR "qemu-aarch64;-cpu;max;-L;/usr/aarch64-linux-gnu")
