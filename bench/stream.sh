#!/usr/bin/env bash
# bench/stream.sh: expert streaming on a model larger than the memory it may
# use. The full-size qwen3-30b-a3b shape (bmoe-mkmodel, written on first use)
# runs under ../shared/tools/memcap --drop-caches 8G, -t 2, --io-threads 4,
# 32 decode tokens after a 64-token prompt, every configuration interleaved in
# each round so the machine's drift cancels; the table gives medians.
#
# Configurations (BMOE_BENCH_CONFIGS picks them; the flags are in the table
# below): resident (no cap, no reads: what the compute allows), mmap
# (--no-moe-stream under the cap), llama (llama-bench -lm mmap under the cap;
# "OOM" when the cap's OOM killer ends it, "no-load" when it refuses to load
# the model), stream-0, stream-0-overlap, auto, overlap, prefetch, lru,
# predict (the default gate: the read-ahead pauses where it measures slower), predict-1/-2/-4/-8 on request (every step reads
# ahead, --predict-always, as in the oracle rows; oracle-gated: without it), oracle (the
# run's own routing, recorded first, replayed one layer ahead: a predictor
# that is never wrong); replay-*: the same with the real Qwen3-30B-A3B routing
# of ../shared/data/route-traces/qwen.route.csv at top-6 (replay-2g,
# replay-lru-2g, replay-oracle-2g: a 2000 MiB cache; replay-guess-2g: the
# read-ahead gated as by default, its guesses right for a share of the
# experts, BMOE_BENCH_GUESS_RIGHT, default 0.75, what the stale gate and
# route-ahead foretold of the trained model's routing; replay-guess-always-2g:
# the same reading ahead at every step); trained-*: the routing of the trained
# model in models/, recorded first and widened to this shape by
# bench/widen-route-trace.awk. CONFIG@base: that configuration with the
# bmoe-cli of another build (BMOE_BENCH_BASELINE=its path), an A/B in the
# same rounds. RESIDENT+reads (resident+reads, replay-resident+reads,
# trained-resident+reads): that resident run while bench-iobench reads the
# disk at full rate beside it, from its start to its end. Then, without a cap,
# resident against a cache holding every expert (--preload-experts).
#
# Columns: decode and prefill tok/s, MiB read per token, hit rate, stall per
# token; the I/O bound (bench-iobench's rate for random O_DIRECT reads of one
# expert slice, measured before and after each run, over the MiB per token)
# and the run's share of it; the same against the run's own reads issued
# again (re-read); "of best", against the lower of the bound and the same
# round's resident run; and "of shared", against the bound where compute and
# reads slow each other as the same round's resident and resident+reads runs
# measured (both at their shared rates until one is done, then the other
# alone). docs/benchmarks.md says how to read them.
#
# Run (as root, for memcap): bench/stream.sh
#   BMOE_BENCH_CONFIGS="resident overlap replay-overlap" bench/stream.sh
#
# Environment: BMOE_BUILD_DIR (default build), BMOE_BENCH_MODEL (default
# $BMOE_BUILD_DIR/models/qwen3-30b-a3b.gguf), BMOE_BENCH_ROUNDS (default 2),
# BMOE_BENCH_CAP (default 8G), BMOE_BENCH_CONFIGS (default all; empty: none),
# BMOE_BENCH_WHOLE_ROUNDS (rounds of the resident / whole-cache pair, default
# BMOE_BENCH_ROUNDS, 0: none), BMOE_BENCH_BASELINE (for @base rows),
# BMOE_BENCH_READ_MBPS (a slower disk: reads from the model's disk limited to
# that many MB/s for the capped runs and the disk's rate, bench/common.sh),
# BMOE_SHARED_DIR (default ../shared).
# A benchmark, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BMOE_BUILD_DIR:-build}
model=${BMOE_BENCH_MODEL:-$build/models/qwen3-30b-a3b.gguf}
rounds=${BMOE_BENCH_ROUNDS:-2}
cap=${BMOE_BENCH_CAP:-8G}
shared=${BMOE_SHARED_DIR:-../shared}
cli=$build/bin/bmoe-cli
mkmodel=$build/bin/bmoe-mkmodel
iobench=$build/bin/bench-iobench
memcap=$shared/tools/memcap
llama=$shared/tools/llama-bench
trace=$shared/data/route-traces/qwen.route.csv
trained_model=models/qwen3moe-shakespeare-q8_0.gguf
heldout=models/heldout.txt
threads=2
io_threads=4
guess_right=${BMOE_BENCH_GUESS_RIGHT:-0.75}

fail() { echo "bench/stream.sh: $*" >&2; exit 1; }
for tool in "$cli" "$mkmodel" "$iobench"; do
  [ -x "$tool" ] || fail "$tool is missing (cmake --build $build --target bmoe-cli bmoe-mkmodel bench-iobench)"
done
[ -x "$memcap" ] || fail "$memcap is missing"
[ -f "$trace" ] || fail "$trace is missing"

# shellcheck source=bench/common.sh
. bench/common.sh
bench_write_model

work=$(mktemp -d)
trap bench_cleanup EXIT
bench_throttle_reads
own_trace=$work/own.route.csv
wide_trace=$work/trained-wide.route.csv

declare -A flags=(
  [resident]="--no-moe-stream"
  [replay-resident]="--no-moe-stream --n-expert-used 6 --route-replay $trace"
  [resident+reads]="--no-moe-stream"
  [replay-resident+reads]="--no-moe-stream --n-expert-used 6 --route-replay $trace"
  [trained-resident+reads]="--no-moe-stream --n-expert-used 8 --route-replay $wide_trace"
  [trained-resident]="--no-moe-stream --n-expert-used 8 --route-replay $wide_trace"
  [mmap]="--no-moe-stream"
  [stream-0]="--moe-stream --cache-mb 0"
  [stream-0-overlap]="--moe-stream --cache-mb 0 --overlap"
  [auto]="--moe-stream --cache-mb auto"
  [overlap]="--moe-stream --cache-mb auto --overlap"
  [prefetch]="--moe-stream --cache-mb auto --overlap --prefetch 1"
  [lru]="--moe-stream --cache-mb auto --overlap --cache-policy lru"
  [predict]="--moe-stream --cache-mb auto --overlap --predict-prefetch"
  [predict-2]="--moe-stream --cache-mb auto --overlap --predict-prefetch --predict-spec-max 2 --predict-always"
  [predict-1]="--moe-stream --cache-mb auto --overlap --predict-prefetch --predict-spec-max 1 --predict-always"
  [predict-4]="--moe-stream --cache-mb auto --overlap --predict-prefetch --predict-spec-max 4 --predict-always"
  [predict-8]="--moe-stream --cache-mb auto --overlap --predict-prefetch --predict-spec-max 8 --predict-always"
  [oracle]="--moe-stream --cache-mb auto --overlap --predict-prefetch --predict-spec-max 8 --predict-always --route-replay $own_trace"
  [oracle-gated]="--moe-stream --cache-mb auto --overlap --predict-prefetch --predict-spec-max 8 --route-replay $own_trace"
  [replay-stream-0]="--moe-stream --cache-mb 0 --n-expert-used 6 --route-replay $trace"
  [replay-auto]="--moe-stream --cache-mb auto --n-expert-used 6 --route-replay $trace"
  [replay-overlap]="--moe-stream --cache-mb auto --overlap --n-expert-used 6 --route-replay $trace"
  [replay-prefetch]="--moe-stream --cache-mb auto --overlap --prefetch 1 --n-expert-used 6 --route-replay $trace"
  [replay-lru]="--moe-stream --cache-mb auto --overlap --cache-policy lru --n-expert-used 6 --route-replay $trace"
  [replay-2g]="--moe-stream --cache-mb 2000 --overlap --n-expert-used 6 --route-replay $trace"
  [replay-lru-2g]="--moe-stream --cache-mb 2000 --overlap --cache-policy lru --n-expert-used 6 --route-replay $trace"
  [replay-oracle]="--moe-stream --cache-mb auto --overlap --predict-prefetch --predict-spec-max 8 --predict-always --n-expert-used 6 --route-replay $trace"
  [replay-oracle-2g]="--moe-stream --cache-mb 2000 --overlap --predict-prefetch --predict-spec-max 8 --predict-always --n-expert-used 6 --route-replay $trace"
  [replay-guess-2g]="--moe-stream --cache-mb 2000 --overlap --predict-prefetch --predict-spec-max 8 --n-expert-used 6 --route-replay $trace --route-replay-guess-right $guess_right"
  [replay-guess-always-2g]="--moe-stream --cache-mb 2000 --overlap --predict-prefetch --predict-spec-max 8 --predict-always --n-expert-used 6 --route-replay $trace --route-replay-guess-right $guess_right"
  [trained-overlap]="--moe-stream --cache-mb auto --overlap --n-expert-used 8 --route-replay $wide_trace"
  [trained-2g]="--moe-stream --cache-mb 2000 --overlap --n-expert-used 8 --route-replay $wide_trace"
  [trained-lru-2g]="--moe-stream --cache-mb 2000 --overlap --cache-policy lru --n-expert-used 8 --route-replay $wide_trace"
)
configs=${BMOE_BENCH_CONFIGS-"resident resident+reads replay-resident replay-resident+reads trained-resident trained-resident+reads mmap llama stream-0 stream-0-overlap auto overlap prefetch lru predict oracle replay-stream-0 replay-auto replay-overlap replay-prefetch replay-lru replay-2g replay-lru-2g replay-oracle replay-guess-2g trained-overlap trained-2g trained-lru-2g"}

ids=$(awk 'BEGIN { for (i = 0; i < 64; i++) printf "%s%d", (i ? "," : ""), 1000 + (i * 7919) % 140000 }')
bench_copy_cli "$configs"

echo "== disk: random O_DIRECT reads of one expert slice, queue depth $io_threads: $(disk_rate 4) MiB/s"
# reread_rate TRACE: MiB/s of that run's decode reads issued again at the lanes' queue depth, now.
reread_rate() {
  "${throttled[@]}" "$iobench" "$model" --replay "$1" --threads "$io_threads" | sed -n 's/^iobench: \([0-9.]*\) MiB\/s.*/\1/p'
}


case " $configs " in
  *" oracle "* | *" oracle-gated "*)
    echo "== recording the run's own routing for the oracle row"
    # shellcheck disable=SC2086
    "${throttled[@]}" "$memcap" --drop-caches "$cap" "$cli" -m "$model" --prompt-ids "$ids" -n 32 --ignore-eos -t "$threads" -c 112 \
      ${flags[overlap]} --io-threads "$io_threads" --route-trace "$own_trace" > "$work/own.route.log" 2>&1 ||
      fail "recording the own routing failed: $(tail -n 1 "$work/own.route.log")"
    ;;
esac

case " $configs " in
  *" trained-"*)
    echo "== recording the trained model's routing and widening it for the trained-* rows"
    for file in "$trained_model" "$heldout"; do
      [ -f "$file" ] || fail "$file is missing"
    done
    head -c 200 "$heldout" > "$work/trained.prompt"
    # sampled: this model's greedy text soon repeats itself, and so would its
    # routing. -c 512 is the context it was trained on, and it ends the
    # generation before -n does: routing past it would not be the model's.
    "$cli" -m "$trained_model" -f "$work/trained.prompt" -n 512 -c 512 --temp 0.8 --seed 1 -t "$threads" \
      --moe-stream --route-trace "$work/trained.route.csv" > "$work/trained.route.log" 2>&1 ||
      fail "recording the trained routing failed: $(tail -n 1 "$work/trained.route.log")"
    awk -v n_layer=48 -f bench/widen-route-trace.awk "$work/trained.route.csv" > "$wide_trace" ||
      fail "widening the trained routing failed"
    ;;
esac

# llama_decode: llama-bench's decode tok/s under the cap, "OOM" when the
# cap's OOM killer ended it, "no-load" when llama.cpp refused to load the
# model (e.g. an anonymous buffer for repacked weights larger than the cap),
# "-" when it failed otherwise or is missing.
llama_decode() {
  [ -x "$llama" ] || { echo "-"; return; }
  local out="$work/llama.out" status=0
  "${throttled[@]}" "$memcap" --drop-caches "$cap" "$llama" -m "$model" -lm mmap -ot '.*=CPU' -t "$threads" -p 0 -n 8 -r 1 -o csv \
    > "$out" 2>&1 || status=$?
  if [ "$status" -eq 137 ] || grep -q 'exit 137' "$out"; then
    echo OOM
    return
  fi
  if grep -q 'failed to load model' "$out"; then
    echo no-load
    return
  fi
  awk -F, '/"avg_ts"/ { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); col[$i] = i } next }
    col["avg_ts"] { gsub(/"/, ""); print $col["avg_ts"]; found = 1 } END { if (!found) print "-" }' "$out"
}

for round in $(seq 1 "$rounds"); do
  for config in $configs; do
    csv="$work/$config.$round.csv"
    log="$work/$config.$round.log"
    if [ "$config" = llama ]; then
      rate=$(llama_decode)
      echo "$rate" > "$work/llama.$round.tps"
      echo "round $round llama            decode $rate tok/s (llama-bench -lm mmap -ot '.*=CPU' -p 0 -n 8)"
      continue
    fi
    extra=${flags[${config%@base}]}
    binary=$cli
    [ "$config" = "${config%@base}" ] || binary=$baseline_cli
    before="-"
    case "$extra" in
      *--moe-stream*) extra="$extra --io-threads $io_threads --io-trace $work/$config.$round.io.csv"; before=$(disk_rate 4) ;;
    esac
    # the resident rows: no cap, the whole file in the page cache, where it fits
    capped=("${throttled[@]}" "$memcap" --drop-caches "$cap")
    reader=""
    case "$config" in
      *resident | *resident+reads)
        if ! fits_in_memory; then
          echo "round $round $config: skipped (the model does not fit in this machine's memory)"
          continue
        fi
        capped=()
        cat "$model" > /dev/null
        ;;
    esac
    # compute under reads: the disk read at full rate beside the run, from its
    # start to its end; the reads' rate then against the disk's alone right
    # before says what the run's compute took from the disk
    case "$config" in
      *+reads)
        disk_rate 4 > "$work/$config.$round.solo"
        rm -f "$work/reads.stop"
        "${throttled[@]}" "$iobench" "$model" --size 864 --threads "$io_threads" --seconds 600 \
          --until "$work/reads.stop" > "$work/$config.$round.reads" &
        reader=$!
        ;;
    esac
    # shellcheck disable=SC2086
    if "${capped[@]}" "$binary" -m "$model" --prompt-ids "$ids" -n 32 --ignore-eos -t "$threads" \
         -c 112 $extra --csv "$csv" > "$log" 2>&1; then
      # the disk's rate for this run: the mean of its rates right before and right after it
      disk="-" reread="-"
      if [ -n "$reader" ]; then
        touch "$work/reads.stop"
        wait "$reader"
        disk=$(sed -n 's/^iobench: \([0-9.]*\) MiB\/s.*/\1/p' "$work/$config.$round.reads")
        echo "$disk" > "$work/$config.$round.disk"
        echo - > "$work/$config.$round.reread"
        printf 'round %d %-16s decode %6s tok/s  prefill %6s tok/s  beside reads at %s MiB/s (the disk alone: %s)\n' \
          "$round" "$config" "$(summary tok/s "$csv")" "$(summary prefill_tps "$csv")" "${disk:--}" \
          "$(cat "$work/$config.$round.solo")"
        continue
      fi
      if [ "$before" != "-" ]; then
        reread=$(reread_rate "$work/$config.$round.io.csv")
        disk=$(awk -v a="$before" -v b="$(disk_rate 4)" 'BEGIN { printf "%.1f\n", (a + b) / 2 }')
        rm -f "$work/$config.$round.io.csv"
      fi
      echo "$disk" > "$work/$config.$round.disk"
      echo "${reread:--}" > "$work/$config.$round.reread"
      printf 'round %d %-16s decode %6s tok/s  prefill %6s tok/s  hit %6s%%  read %9s MiB  disk %s MiB/s  re-read %s MiB/s  %s\n' \
        "$round" "$config" "$(summary tok/s "$csv")" "$(summary prefill_tps "$csv")" "$(summary cache_hit_pct "$csv")" \
        "$(summary read_MiB "$csv")" "$disk" "${reread:--}" "$(sed -n 's/^moe-prefetch: /speculative: /p' "$log")"
    else
      echo "round $round $config: FAILED ($(tail -n 2 "$log" | tr '\n' ' '))"
      rm -f "$csv"
      if [ -n "$reader" ]; then
        touch "$work/reads.stop"
        wait "$reader" || true
      fi
    fi
  done
done

# run_bound CSV [KIND]: that run's I/O bound (tok/s), its disk rate (KIND disk:
# random reads; reread: its own reads again) over its MiB per token
run_bound() {
  awk -v d="$(cat "${1%.csv}.${2:-disk}")" -v r="$(summary read_MiB "$1")" -v n="$(summary tokens "$1")" \
    'BEGIN { if (d != "-" && d > 0 && r > 0 && n > 0) printf "%.3f\n", d / (r / n) }'
}
# run_share CSV [KIND]: that run's decode rate as a percentage of its bound
run_share() {
  awk -v t="$(summary tok/s "$1")" -v b="$(run_bound "$1" "${2:-disk}")" 'BEGIN { if (b > 0) printf "%.1f\n", 100 * t / b }'
}
# resident_of CSV: the resident run of the same round and routing (the replayed
# rows route 6 experts of the phone's trace, the trained rows 8 of the widened
# trace, the others 8 of their own)
resident_of() {
  local name round
  name=$(basename "$1" .csv)
  round=${name##*.}
  case "$name" in
    replay-*) echo "$work/replay-resident.$round.csv" ;;
    trained-*) echo "$work/trained-resident.$round.csv" ;;
    *) echo "$work/resident.$round.csv" ;;
  esac
}
# run_best_share CSV: that run's decode rate as a percentage of the lower of its
# I/O bound and the decode rate of the same round's resident run (no reads:
# what the compute alone allows), a bound no engine can pass on this machine
run_best_share() {
  local resident
  resident=$(resident_of "$1")
  [ -f "$resident" ] || return 0
  awk -v t="$(summary tok/s "$1")" -v b="$(run_bound "$1")" -v c="$(summary tok/s "$resident")" \
    'BEGIN { if (b > 0 && c > 0) printf "%.1f\n", 100 * t / (b < c ? b : c) }'
}

# run_shared_share CSV: that run's decode rate as a percentage of the bound
# where compute and reads slow each other as the same round's resident+reads
# run measured (a virtual disk's reads can take CPU time from the compute and
# the compute from the reads): both run at their shared rates until one is
# done, the other then alone. Compute alone: the resident run; reads alone:
# the run's MiB per token at its disk rate.
run_shared_share() {
  local resident contended
  resident=$(resident_of "$1")
  contended=$(dirname "$resident")/$(basename "$resident" | sed 's/\.\([0-9]*\)\.csv$/+reads.\1.csv/')
  [ -f "$resident" ] && [ -f "$contended" ] || return 0
  awk -v t="$(summary tok/s "$1")" -v c1="$(summary tok/s "$resident")" -v c2="$(summary tok/s "$contended")" \
    -v d="$(cat "${1%.csv}.disk")" -v r="$(summary read_MiB "$1")" -v n="$(summary tokens "$1")" \
    -v d2="$(cat "${contended%.csv}.disk")" -v d1="$(cat "${contended%.csv}.solo")" '
    BEGIN {
      if (!(t > 0 && c1 > 0 && c2 > 0 && d > 0 && d1 > 0 && d2 > 0 && r > 0 && n > 0)) exit
      C = 1 / c1; D = (r / n) / d; sc = c2 / c1; sd = d2 / d1
      if (sc > 1) sc = 1
      if (sd > 1) sd = 1
      a = C / sc; b = D / sd
      T = a <= b ? a + (D - sd * a) : b + (C - sc * b)
      printf "%.1f\n", 100 * t * T
    }'
}

echo
echo "== medians over $rounds rounds (cap $cap, -t $threads, --io-threads $io_threads; each run's bound from the disk right before and after it)"
printf '| %-16s | %8s | %9s | %9s | %7s | %9s | %9s | %8s | %8s | %9s | %7s | %9s |\n' config "decode" "prefill" "MiB/tok" \
  "hit %" "stall s" "I/O bound" "of bound" "re-read" "of re-read" "of best" "of shared"
printf '|%s|\n' "------------------|----------|-----------|-----------|---------|-----------|-----------|----------|----------|-----------|---------|-----------"
for config in $configs; do
  if [ "$config" = llama ]; then
    # a rate in every round: their median; else what the rounds said
    decode=$(cat "$work"/llama.*.tps 2>/dev/null | sort -u | tr '\n' ' ' | sed 's/ $//')
    grep -qv '^[0-9.]*$' "$work"/llama.*.tps 2>/dev/null || decode=$(cat "$work"/llama.*.tps | median)
    printf '| %-16s | %8s | %9s | %9s | %7s | %9s | %9s | %8s | %8s | %9s | %7s | %9s |\n' llama "$decode" - - - - - - - - - -
    continue
  fi
  files=$(ls "$work/$config".*.csv 2>/dev/null || true)
  [ -n "$files" ] || { printf '| %-16s | failed |\n' "$config"; continue; }
  decode=$(for f in $files; do summary tok/s "$f"; done | median)
  prefill=$(for f in $files; do summary prefill_tps "$f"; done | median)
  # read_MiB is decode's (the prompt's are prefill_read_mib)
  per_token=$(for f in $files; do awk -v r="$(summary read_MiB "$f")" -v n="$(summary tokens "$f")" \
    'BEGIN { printf "%.1f\n", (n > 0 ? r / n : 0) }'; done | median)
  hit=$(for f in $files; do summary cache_hit_pct "$f"; done | median)
  # the summary's -1: no expert cache in that run
  case $hit in -*) hit="-" ;; esac
  stall=$(for f in $files; do summary stall_s/tok "$f"; done | median)
  bound=$(for f in $files; do run_bound "$f"; done | median)
  share=$(for f in $files; do run_share "$f"; done | median)
  reread_bound=$(for f in $files; do run_bound "$f" reread; done | median)
  reread_share=$(for f in $files; do run_share "$f" reread; done | median)
  best_share=$(for f in $files; do run_best_share "$f"; done | median)
  shared_share=$(for f in $files; do run_shared_share "$f"; done | median)
  [ "$bound" = "-" ] || bound=$(printf '%.2f' "$bound")
  [ "$share" = "-" ] || share=$(printf '%.0f%%' "$share")
  [ "$reread_bound" = "-" ] || reread_bound=$(printf '%.2f' "$reread_bound")
  [ "$reread_share" = "-" ] || reread_share=$(printf '%.0f%%' "$reread_share")
  [ "$best_share" = "-" ] || best_share=$(printf '%.0f%%' "$best_share")
  [ "$shared_share" = "-" ] || shared_share=$(printf '%.0f%%' "$shared_share")
  printf '| %-16s | %8s | %9s | %9s | %7s | %9s | %9s | %8s | %8s | %9s | %7s | %9s |\n' "$config" "$decode" "$prefill" \
    "$per_token" "$hit" "$stall" "$bound" "$share" "$reread_bound" "$reread_share" "$best_share" "$shared_share"
done

whole_rounds=${BMOE_BENCH_WHOLE_ROUNDS:-$rounds}
[ "$whole_rounds" -gt 0 ] || exit 0
echo
echo "== without a cap: resident (page cache warm) vs a cache holding every expert (--preload-experts)"
for round in $(seq 1 "$whole_rounds"); do
  cat "$model" > /dev/null
  "$cli" -m "$model" --prompt-ids "$ids" -n 32 --ignore-eos -t "$threads" -c 112 --no-moe-stream \
    --csv "$work/resident.$round.csv" \
    > /dev/null 2>&1 || echo "resident round $round: FAILED"
  sync
  echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  "$cli" -m "$model" --prompt-ids "$ids" -n 32 --ignore-eos -t "$threads" -c 112 --moe-stream --cache-mb 20000 \
    --preload-experts --csv "$work/whole.$round.csv" > /dev/null 2>&1 || echo "whole-cache round $round: FAILED"
  printf 'round %d: resident %s tok/s, whole cache %s tok/s\n' "$round" "$(summary tok/s "$work/resident.$round.csv")" \
    "$(summary tok/s "$work/whole.$round.csv")"
done
resident=$(for f in "$work"/resident.*.csv; do summary tok/s "$f"; done | median)
whole=$(for f in "$work"/whole.*.csv; do summary tok/s "$f"; done | median)
awk -v r="$resident" -v w="$whole" 'BEGIN { printf "median: resident %s, whole cache %s tok/s (%.1f%% of resident)\n", r, w, (r > 0 ? 100 * w / r : 0) }'
