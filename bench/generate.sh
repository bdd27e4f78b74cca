#!/usr/bin/env bash
# bench/generate.sh: prefill and decode speed of bmoe-cli on a full-size
# Qwen3-30B-A3B-shaped file (the public Q4_K_M layout, random weights, from
# `bmoe-mkmodel --shape qwen3-30b-a3b`). A benchmark, not a test.
#
# Generates the model once (about 18.5 GB; reused when it exists), reads it
# into the page cache, then runs bmoe-cli RUNS times with a 64-token prompt
# (fixed token ids) and 32 generated tokens (--ignore-eos, greedy) and prints
# the median prefill and decode tok/s.
#
# Run: bench/generate.sh
#   BMOE_BENCH_RUNS=5 BMOE_BENCH_TOKENS=64 bench/generate.sh
#
# Environment: BMOE_BUILD_DIR (default build), BMOE_BENCH_MODEL (default
# $BMOE_BUILD_DIR/models/qwen3-30b-a3b.gguf), BMOE_BENCH_THREADS (default 2),
# BMOE_BENCH_RUNS (default 3), BMOE_BENCH_PROMPT (default 64),
# BMOE_BENCH_TOKENS (default 32), BMOE_BENCH_SHAPE (the bmoe-mkmodel shape
# written when the model is missing, default qwen3-30b-a3b), BMOE_BENCH_ID_RANGE
# (prompt ids stay below 1000 plus this, default 140000; 60000 for lfm2's
# 65536-token vocabulary).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BMOE_BUILD_DIR:-build}
model=${BMOE_BENCH_MODEL:-$build/models/qwen3-30b-a3b.gguf}
threads=${BMOE_BENCH_THREADS:-2}
runs=${BMOE_BENCH_RUNS:-3}
n_prompt=${BMOE_BENCH_PROMPT:-64}
n_generate=${BMOE_BENCH_TOKENS:-32}
shape=${BMOE_BENCH_SHAPE:-qwen3-30b-a3b}
id_range=${BMOE_BENCH_ID_RANGE:-140000}
cli=$build/bin/bmoe-cli
mkmodel=$build/bin/bmoe-mkmodel

fail() { echo "bench/generate.sh: $*" >&2; exit 1; }

for tool in "$cli" "$mkmodel"; do
  [ -x "$tool" ] || fail "$tool is missing (cmake --build $build --target bmoe-cli bmoe-mkmodel)"
done

if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  free_kib=$(df -Pk "$(dirname "$model")" | awk 'NR == 2 { print $4 }')
  [ "$free_kib" -gt $((20 * 1024 * 1024)) ] || fail "need about 19 GB free next to $model"
  echo "writing $model ..."
  start=$(date +%s)
  "$mkmodel" --shape "$shape" --seed 1 -o "$model.partial"
  mv "$model.partial" "$model"
  echo "written in $(( $(date +%s) - start )) s"
fi

# Warm the page cache: a benchmark of the engine, not of the disk.
model_kib=$(( $(stat -c %s "$model") / 1024 ))
avail_kib=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
if [ "$model_kib" -gt "$avail_kib" ]; then
  echo "warning: the model ($((model_kib / 1024)) MiB) is larger than available memory" \
       "($((avail_kib / 1024)) MiB); results include disk reads" >&2
fi
echo "warming $model into the page cache ..."
cat "$model" > /dev/null

# Fixed, spread-out token ids inside the vocabulary (the same
# prompt every run; --ignore-eos keeps the generated count fixed).
ids=$(awk -v n="$n_prompt" -v r="$id_range" 'BEGIN { for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), 1000 + (i * 7919) % r }')
context=$(( n_prompt + n_generate + 8 ))

log=$(mktemp)
trap 'rm -f "$log"' EXIT
prefill_rates=()
decode_rates=()
for run in $(seq 1 "$runs"); do
  if ! "$cli" -m "$model" --prompt-ids "$ids" -n "$n_generate" --ignore-eos -t "$threads" -c "$context" --no-moe-stream \
       > /dev/null 2> "$log"; then
    cat "$log" >&2
    fail "run $run failed"
  fi
  prefill=$(sed -n 's/^bmoe-cli: prefill: .*, \([0-9.]*\) tok\/s$/\1/p' "$log")
  decode=$(sed -n 's/^bmoe-cli: decode: .*, \([0-9.]*\) tok\/s$/\1/p' "$log")
  generated=$(sed -n 's/^bmoe-cli: decode: \([0-9]*\) tokens generated.*/\1/p' "$log")
  [ -n "$prefill" ] && [ -n "$decode" ] || { cat "$log" >&2; fail "cannot parse the summary of run $run"; }
  [ "$generated" = "$n_generate" ] || fail "run $run generated $generated tokens, not $n_generate"
  prefill_rates+=("$prefill")
  decode_rates+=("$decode")
  rss=$(sed -n 's/^bmoe-cli: peak RSS: \(.*\)$/\1/p' "$log")
  load=$(sed -n 's/^bmoe-cli: load: \(.*\)$/\1/p' "$log")
  echo "run $run: prefill $prefill tok/s, decode $decode tok/s, load $load, peak RSS $rss"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo
echo "bmoe-cli on $(basename "$model"): $threads threads, median of $runs runs"
printf '| %-8s | %-6s | %-14s | %-28s |\n' phase tokens "tok/s (median)" "all runs"
printf '|----------|--------|----------------|------------------------------|\n'
printf '| %-8s | %-6s | %-14s | %-28s |\n' prefill "$n_prompt" "$(median "${prefill_rates[@]}")" "${prefill_rates[*]}"
printf '| %-8s | %-6s | %-14s | %-28s |\n' decode "$n_generate" "$(median "${decode_rates[@]}")" "${decode_rates[*]}"

# What decode reads per token: the dense weights but the embedding table (one
# row of it), and n_used / n_expert of the experts. Times the median decode
# rate, the weight bandwidth decode achieved: compare it with the machine's
# streaming read (build/bin/bench-kernels prints it) rather than tok/s alone,
# which moves with this machine's memory from run to run.
"$cli" --info "$model" 2>/dev/null | awk -v rate="$(median "${decode_rates[@]}")" '
  $2 == "token_embd.weight" { embd = $NF }
  $1 == "expert" && $2 == "bytes" { experts = $3 }
  $1 == "dense" && $2 == "bytes" { dense = $3 }
  $1 == "experts:" { n_expert = $2; n_used = $3; gsub(/[^0-9]/, "", n_used) }
  END {
    if (!n_expert || !dense) exit
    per_token = dense - embd + experts * n_used / n_expert
    printf "decode reads %.2f GB of weights per token: %.1f GB/s at the median rate\n", per_token / 1e9, per_token * rate / 1e9
  }'
