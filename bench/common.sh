# bench/common.sh: what the streaming benchmarks (bench/stream.sh,
# bench/warmup.sh) share. Sourced, never run; the script sets fail(),
# $work (a scratch directory it removes), $build and $model first.

# bench_write_model: the full-size qwen3-30b-a3b shape at $model, written on
# first use.
bench_write_model() {
  [ -f "$model" ] && return
  mkdir -p "$(dirname "$model")"
  echo "writing $model (about 18.5 GB) ..."
  "$build/bin/bmoe-mkmodel" --shape qwen3-30b-a3b --seed 1 -o "$model.partial"
  mv "$model.partial" "$model"
}

# bench_copy_cli CONFIGS: sets $cli to a copy of the build's bmoe-cli (a
# rebuild during the run changes nothing) and $baseline_cli to a copy of
# BMOE_BENCH_BASELINE (another build's bmoe-cli, for the CONFIG@base rows of
# an A/B in the same rounds), refusing @base rows without it.
bench_copy_cli() {
  cp "$build/bin/bmoe-cli" "$work/bmoe-cli"
  cp -P "$build"/lib/libbmoe.so* "$work/" 2>/dev/null || true
  cli=$work/bmoe-cli
  baseline_cli=""
  if [ -n "${BMOE_BENCH_BASELINE:-}" ]; then
    [ -x "$BMOE_BENCH_BASELINE" ] || fail "BMOE_BENCH_BASELINE: $BMOE_BENCH_BASELINE is not an executable"
    # the baseline runs with its own libbmoe (LD_LIBRARY_PATH, set below for
    # this build's copy, would otherwise override the baseline's RUNPATH and
    # measure this build's library behind the baseline's front end)
    local base=$work/base library
    mkdir -p "$base"
    cp "$BMOE_BENCH_BASELINE" "$base/bmoe-cli.bin"
    library=$(ldd "$BMOE_BENCH_BASELINE" | awk '$1 ~ /^libbmoe/ { print $3 }')
    [ -z "$library" ] || cp -L "$library" "$base/$(basename "$library")"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$base" "$base/bmoe-cli.bin" > "$base/bmoe-cli"
    chmod +x "$base/bmoe-cli"
    baseline_cli=$base/bmoe-cli
  fi
  export LD_LIBRARY_PATH=$work
  case " $1 " in
    *@base*) [ -n "$baseline_cli" ] || fail "a CONFIG@base row needs BMOE_BENCH_BASELINE" ;;
  esac
}

# summary KEY FILE: the value of KEY in the CSV's "# summary" trailer.
summary() {
  awk -v key="$1" '/^# summary/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) v = kv[2] } }
    END { print v }' "$2"
}

# median: of the numbers on stdin, "-" for none.
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# disk_rate SECONDS: MiB/s of random O_DIRECT reads of one expert projection
# of this shape (864 KiB: Q4_K 2048 x 768) at the lanes' queue depth
# ($io_threads), now.
disk_rate() {
  "${throttled[@]}" "$build/bin/bench-iobench" "$model" --size 864 --threads "$io_threads" --seconds "$1" |
    sed -n 's/^iobench: \([0-9.]*\) MiB\/s.*/\1/p'
}

# fits_in_memory: whether the model file and 2 GiB more fit in MemAvailable
# (which counts the page cache the kernel can reclaim).
fits_in_memory() {
  awk -v bytes="$(stat -c %s "$model")" '/^MemAvailable:/ { exit !(bytes + 2 * 2^30 <= $2 * 1024) }' /proc/meminfo
}

# bench_throttle_reads: with BMOE_BENCH_READ_MBPS set, the reads every
# command started through "${throttled[@]}" makes from the disk holding $model
# are limited to that many MB/s (10^6 bytes), a slower disk on the same
# machine: a cgroup v1 blkio group (blkio.throttle.read_bps_device) made here
# and removed by bench_cleanup. memcap's memory group is another hierarchy,
# so a capped run stays throttled. Without the variable, "${throttled[@]}" is
# nothing.
throttled=()
throttle_group=""
bench_throttle_reads() {
  local rate=${BMOE_BENCH_READ_MBPS:-} device
  [ -n "$rate" ] || return 0
  case $rate in '' | *[!0-9]*) fail "BMOE_BENCH_READ_MBPS: '$rate' is not a whole number of MB/s" ;; esac
  [ -d /sys/fs/cgroup/blkio ] ||
    fail "BMOE_BENCH_READ_MBPS needs a cgroup v1 blkio hierarchy (/sys/fs/cgroup/blkio), which this machine lacks"
  device=$(stat -c '%Hd:%Ld' "$model")
  # a partition's reads are throttled at its disk
  [ -e "/sys/dev/block/$device/partition" ] && device=$(cat "/sys/dev/block/$device/../dev")
  throttle_group=/sys/fs/cgroup/blkio/bmoe-bench-$$
  mkdir "$throttle_group" || fail "cannot make the blkio group $throttle_group (run as root)"
  echo "$device $((rate * 1000000))" > "$throttle_group/blkio.throttle.read_bps_device" ||
    fail "cannot throttle reads of device $device"
  # shellcheck disable=SC2016
  throttled=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$throttle_group")
  echo "== reads from device $device limited to $rate MB/s (blkio group $throttle_group)"
}

# bench_cleanup: the scratch directory and the blkio group, at exit.
bench_cleanup() {
  rm -rf "$work"
  [ -z "$throttle_group" ] || rmdir "$throttle_group" 2>/dev/null || true
}
