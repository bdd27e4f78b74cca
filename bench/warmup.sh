#!/usr/bin/env bash
# bench/warmup.sh: the first token and the first tokens of a streamed run.
# The full-size qwen3-30b-a3b shape (bmoe-mkmodel, written on first use) under
# ../shared/tools/memcap --drop-caches 8G (page cache dropped: every run starts
# cold), -t 2, --io-threads 4, --overlap, the cache sized by --cache-mb auto,
# 64 tokens generated after prompts of 64, 512 and 2048 tokens. Per prompt
# length, interleaved in each round:
#   resident        no cap, no reads (the file in the page cache): what the
#                   compute allows; the prefill rate the streamed rows are held to
#   replay-resident the same routing 6 experts a token, as the replay rows do:
#                   theirs
#   random-cold     the model's own (random) routing, empty cache
#   random-profile  the same, the cache warmed from a profile (--expert-profile)
#                   an earlier run of a different 512-token prompt wrote
#   replay-cold     the real Qwen3-30B-A3B phone routing of
#                   ../shared/data/route-traces/qwen.route.csv (top 6) replayed:
#                   decode its first decode steps, the prompt the trace's own
#                   prompt and before it the trace's later decode steps
#   replay-profile  the same, warmed from a profile of that trace's later decode
#                   steps (positions the measured decode never replays), written
#                   by bmoe-analyze route --profile
#   wide            (BMOE_BENCH_WIDE=1, prompts longer than 512 only) random-cold
#                   with the whole prompt as one micro-batch (--ubatch = prompt)
#   CONFIG@base     a streamed configuration run with the bmoe-cli of another
#                   build (BMOE_BENCH_BASELINE=its path), interleaved: an A/B
#
# Columns: TTFT (load excluded: prefill and the first token), prefill tok/s,
# MiB the prefill read, the prefill's I/O bound (those bytes over the disk's
# rate for random O_DIRECT reads of one expert slice, measured right before
# and after the run) as tok/s, "of best" (the prefill rate over the lower of
# that bound and the resident prefill rate of the same round), the mean decode
# tok/s of tokens 1-16 and of tokens 17-64, and "first/steady" (the first
# over the second), with the MiB read per token in each span.
#
# Run (as root, for memcap): bench/warmup.sh
#   BMOE_BENCH_PROMPTS="64 512" BMOE_BENCH_CONFIGS="random-cold replay-profile" bench/warmup.sh
# Environment: BMOE_BUILD_DIR (default build), BMOE_BENCH_MODEL (default
# $BMOE_BUILD_DIR/models/qwen3-30b-a3b.gguf), BMOE_BENCH_ROUNDS (default 1),
# BMOE_BENCH_CAP (default 8G), BMOE_BENCH_PROMPTS (default "64 512 2048"),
# BMOE_BENCH_CONFIGS (default all five above), BMOE_BENCH_WIDE (default 0),
# BMOE_BENCH_READ_MBPS (reads from the model's disk limited to that many MB/s,
# as in bench/stream.sh), BMOE_SHARED_DIR (default ../shared). A benchmark,
# not a test.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BMOE_BUILD_DIR:-build}
model=${BMOE_BENCH_MODEL:-$build/models/qwen3-30b-a3b.gguf}
rounds=${BMOE_BENCH_ROUNDS:-1}
cap=${BMOE_BENCH_CAP:-8G}
prompts=${BMOE_BENCH_PROMPTS:-"64 512 2048"}
configs=${BMOE_BENCH_CONFIGS:-"resident random-cold random-profile replay-resident replay-cold replay-profile"}
shared=${BMOE_SHARED_DIR:-../shared}
cli=$build/bin/bmoe-cli
analyze=$build/bin/bmoe-analyze
mkmodel=$build/bin/bmoe-mkmodel
iobench=$build/bin/bench-iobench
memcap=$shared/tools/memcap
trace=$shared/data/route-traces/qwen.route.csv
threads=2
io_threads=4
generated=64

fail() { echo "bench/warmup.sh: $*" >&2; exit 1; }
for tool in "$cli" "$analyze" "$mkmodel" "$iobench"; do
  [ -x "$tool" ] || fail "$tool is missing (cmake --build $build --target bmoe-cli bmoe-analyze bmoe-mkmodel bench-iobench)"
done
[ -x "$memcap" ] || fail "$memcap is missing"
[ -f "$trace" ] || fail "$trace is missing"

# shellcheck source=bench/common.sh
. bench/common.sh
bench_write_model

work=$(mktemp -d)
trap bench_cleanup EXIT
bench_throttle_reads
bench_copy_cli "$configs"

# prompt_ids N SEED: N token ids, a different sequence per seed
prompt_ids() {
  awk -v n="$1" -v seed="$2" 'BEGIN { for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), 1000 + (i * 7919 + seed * 104729) % 140000 }'
}
# span_rate FILE FIRST LAST: tok/s over the per-token rows FIRST..LAST (steps, 1-based)
span_rate() {
  awk -F, -v a="$2" -v b="$3" '/^#/ || $1 == "step" { next } $1 >= a && $1 <= b { ms += $3; n++ }
    END { if (n > 0 && ms > 0) printf "%.2f\n", 1000 * n / ms; else print "-" }' "$1"
}
# span_read FILE FIRST LAST: the mean MiB read per token over those rows (the
# CSV's hit rate is cumulative since the run began, so it cannot say a span's)
span_read() {
  awk -F, -v a="$2" -v b="$3" '/^#/ || $1 == "step" { next } $1 >= a && $1 <= b { r += $6; n++ }
    END { if (n > 0) printf "%.1f\n", r / n / 1048576; else print "-" }' "$1"
}

stream="--moe-stream --cache-mb auto --overlap --io-threads $io_threads"
replay="--n-expert-used 6 --route-replay $trace"

random_profile=$work/random.profile
replay_profile=$work/replay.profile
write_profiles() {
  echo "== profiles"
  # random: a run of another prompt writes what its cache learnt
  "${throttled[@]}" "$memcap" --drop-caches "$cap" "$cli" -m "$model" --prompt-ids "$(prompt_ids 512 99)" -n "$generated" --ignore-eos \
    -t "$threads" -c 640 $stream --expert-profile "$random_profile" > "$work/random-profile.log" 2>&1 ||
    fail "writing the random-routing profile failed: $(tail -n 1 "$work/random-profile.log")"
  # replay: the trace's decode steps past the ones a measured run replays
  first_replayed=$(awk -F, '!/^#/ && $2 == 1 { if (min == "" || $3 < min) min = $3 } END { print min }' "$trace")
  awk -F, -v from=$((first_replayed + generated)) '/^#/ || $1 == "turn" || ($2 == 1 && $3 >= from)' "$trace" \
    > "$work/later.route.csv"
  "$analyze" route "$work/later.route.csv" --phase decode --profile "$replay_profile" -m "$model" \
    > "$work/replay-profile.log" 2>&1 || fail "writing the replay profile failed: $(tail -n 1 "$work/replay-profile.log")"
  echo "random routing: from a run of a 512-token prompt and $generated tokens;" \
    "replay: decode positions from $((first_replayed + generated)) of the trace"
}
case " $configs " in
  *-profile*) write_profiles ;;
esac

# run ROUND PROMPT CONFIG: one run; its CSV is $work/CONFIG.PROMPT.ROUND.csv
run() {
  local round=$1 n=$2 config=$3 extra="" capped=("${throttled[@]}" "$memcap" --drop-caches "$cap") before="-" binary=$cli
  local base="$work/$config.$n.$round"
  case "$config" in
    *@base) binary=$baseline_cli ;;
  esac
  case "${config%@base}" in
    resident) extra="--no-moe-stream"; capped=() ;;
    replay-resident) extra="--no-moe-stream $replay"; capped=() ;;
    random-cold) extra="$stream" ;;
    random-profile) cp "$random_profile" "$base.profile"; extra="$stream --expert-profile $base.profile" ;;
    replay-cold) extra="$stream $replay" ;;
    replay-profile) cp "$replay_profile" "$base.profile"; extra="$stream $replay --expert-profile $base.profile" ;;
    wide) extra="$stream --ubatch $n" ;;
    *) fail "unknown configuration $config" ;;
  esac
  if [ "${config%-resident}" != "$config" ] || [ "$config" = resident ]; then
    fits_in_memory || { echo "round $round $n $config: skipped (the model does not fit in memory)"; return; }
    cat "$model" > /dev/null
  else
    before=$(disk_rate 3)
  fi
  # shellcheck disable=SC2086
  if "${capped[@]}" "$binary" -m "$model" --prompt-ids "$(prompt_ids "$n" 1)" -n "$generated" --ignore-eos -t "$threads" \
       -c $((n + generated + 16)) $extra --csv "$base.csv" > "$base.log" 2>&1; then
    local disk="-"
    [ "$before" = "-" ] || disk=$(awk -v a="$before" -v b="$(disk_rate 3)" 'BEGIN { printf "%.1f\n", (a + b) / 2 }')
    echo "$disk" > "$base.disk"
    printf 'round %d %5d %-15s ttft %7s s  prefill %7s tok/s  read %8s MiB  disk %s MiB/s  decode 1-16 %6s  17-64 %6s tok/s\n' \
      "$round" "$n" "$config" "$(summary ttft_s "$base.csv")" "$(summary prefill_tps "$base.csv")" \
      "$(summary prefill_read_mib "$base.csv")" "$disk" "$(span_rate "$base.csv" 1 16)" \
      "$(span_rate "$base.csv" 17 "$generated")"
  else
    echo "round $round $n $config: FAILED ($(tail -n 2 "$base.log" | tr '\n' ' '))"
    rm -f "$base.csv"
  fi
}

for round in $(seq 1 "$rounds"); do
  for n in $prompts; do
    row_configs=$configs
    [ "${BMOE_BENCH_WIDE:-0}" = 1 ] && [ "$n" -gt 512 ] && row_configs="$row_configs wide"
    for config in $row_configs; do
      run "$round" "$n" "$config"
    done
  done
done

# prefill_bound CSV: the prefill's I/O bound in tok/s (its reads over the disk's rate)
prefill_bound() {
  awk -v d="$(cat "${1%.csv}.disk")" -v r="$(summary prefill_read_mib "$1")" -v n="$(summary n_prompt "$1")" \
    'BEGIN { if (d != "-" && d > 0 && r > 0) printf "%.2f\n", n / (r / d) }'
}
# prefill_best CSV: its prefill rate as a % of the lower of its bound and the
# same round's resident prefill rate
prefill_best() {
  local name resident
  name=$(basename "$1" .csv)
  resident="$work/resident.${name#*.}.csv"
  # the replayed rows route 6 experts a token: their own resident run
  case "$name" in
    replay-*) [ -f "$work/replay-resident.${name#*.}.csv" ] && resident="$work/replay-resident.${name#*.}.csv" ;;
  esac
  [ -f "$resident" ] || return 0
  awk -v t="$(summary prefill_tps "$1")" -v b="$(prefill_bound "$1")" -v c="$(summary prefill_tps "$resident")" \
    'BEGIN { lim = (b != "" && b < c) ? b : c; if (lim > 0) printf "%.1f\n", 100 * t / lim }'
}

echo
echo "== medians over $rounds round(s) (cap $cap, -t $threads, --io-threads $io_threads, $generated tokens generated)"
printf '| %6s | %-14s | %7s | %8s | %9s | %9s | %7s | %8s | %8s | %9s | %10s | %10s |\n' prompt config "TTFT s" "prefill" \
  "read MiB" "I/O bound" "of best" "dec 1-16" "dec 17-64" "first/steady" "MiB/t 1-16" "MiB/t 17-64"
printf '|%s|\n' "--------|----------------|---------|----------|-----------|-----------|---------|----------|----------|-----------|------------|------------"
for n in $prompts; do
  for config in $configs wide; do
    files=$(ls "$work/$config.$n".*.csv 2>/dev/null || true)
    [ -n "$files" ] || continue
    ttft=$(for f in $files; do summary ttft_s "$f"; done | median)
    prefill=$(for f in $files; do summary prefill_tps "$f"; done | median)
    read_mib=$(for f in $files; do summary prefill_read_mib "$f"; done | median)
    bound=$(for f in $files; do prefill_bound "$f"; done | median)
    best=$(for f in $files; do prefill_best "$f"; done | median)
    first=$(for f in $files; do span_rate "$f" 1 16; done | median)
    steady=$(for f in $files; do span_rate "$f" 17 "$generated"; done | median)
    read_first=$(for f in $files; do span_read "$f" 1 16; done | median)
    read_steady=$(for f in $files; do span_read "$f" 17 "$generated"; done | median)
    ratio=$(awk -v a="$first" -v b="$steady" 'BEGIN { if (b > 0) printf "%.0f%%\n", 100 * a / b; else print "-" }')
    [ "$best" = "-" ] || best=$(printf '%.0f%%' "$best")
    case "$config" in *resident) read_mib="-"; bound="-"; best="-"; read_first="-"; read_steady="-" ;; esac
    printf '| %6s | %-14s | %7s | %8s | %9s | %9s | %7s | %8s | %8s | %9s | %10s | %10s |\n' "$n" "$config" "$ttft" \
      "$prefill" "$read_mib" "$bound" "$best" "$first" "$steady" "$ratio" "$read_first" "$read_steady"
  done
done
