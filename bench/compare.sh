#!/usr/bin/env bash
# bench/compare.sh: bmoe against llama.cpp's best resident configuration
# (../shared/tools/llama-bench -lm none: weights read into memory, repacked
# for its kernels), interleaved in every round so the machine's drift
# cancels, on the full-size qwen3-30b-a3b and gpt-oss-20b presets
# (bmoe-mkmodel): prefill of 64 and 512 tokens, decode of 32 tokens at depth
# 0 and 2048, -t 2. Prints each side's median over the rounds and the ratio
# bmoe / llama.cpp. A benchmark, not a test.
#
# Run: bench/compare.sh
#   BMOE_BENCH_MODELS=qwen3-30b-a3b BMOE_BENCH_ROUNDS=2 bench/compare.sh
#
# Environment: BMOE_BUILD_DIR (default build), BMOE_BENCH_ROUNDS (default 3),
# BMOE_BENCH_MODELS (default "qwen3-30b-a3b gpt-oss-20b"), BMOE_SHARED_DIR
# (default ../shared).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BMOE_BUILD_DIR:-build}
rounds=${BMOE_BENCH_ROUNDS:-3}
models=${BMOE_BENCH_MODELS:-"qwen3-30b-a3b gpt-oss-20b"}
shared=${BMOE_SHARED_DIR:-../shared}
llama=$shared/tools/llama-bench
threads=2
fail() { echo "bench/compare.sh: $*" >&2; exit 1; }
for tool in "$build/bin/bmoe-cli" "$build/bin/bmoe-mkmodel" "$llama"; do
  [ -x "$tool" ] || fail "$tool is missing"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the binaries measured are copies: a rebuild during the run changes nothing
cp "$build/bin/bmoe-cli" "$work/"
cp -P "$build"/lib/libbmoe.so* "$work/" 2>/dev/null || true
export LD_LIBRARY_PATH=$work
cli=$work/bmoe-cli

# ids N: N prompt ids spread over the model's vocabulary (vocab_size, set per model)
ids() { awk -v n="$1" -v v="$vocab_size" 'BEGIN { for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), 1000 + (i * 7919) % (v - 2000) }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# bmoe_rate MODEL PROMPT_TOKENS GENERATED WHICH: prefill or decode tok/s of one run.
bmoe_rate() {
  local log="$work/bmoe.log"
  "$cli" -m "$1" --prompt-ids "$(ids "$2")" -n "$3" --ignore-eos -t "$threads" -c $(($2 + $3 + 8)) --no-moe-stream \
    > /dev/null 2> "$log" ||
    { echo "-"; return; }
  if [ "$4" = prefill ]; then
    sed -n 's/^bmoe-cli: prefill: .*, \([0-9.]*\) tok\/s$/\1/p' "$log"
  else
    sed -n 's/^bmoe-cli: decode: .*, \([0-9.]*\) tok\/s$/\1/p' "$log"
  fi
}

# llama_rates MODEL ARGS...: "test rate" lines (pp64, pp512, tg32@0, tg32@2048) from llama-bench's CSV.
llama_rates() {
  local model=$1
  shift
  "$llama" -m "$model" -lm none -t "$threads" -r 1 -o csv "$@" 2> /dev/null | awk -F, '
    NR == 1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); col[$i] = i } next }
    { gsub(/"/, ""); p = $col["n_prompt"]; g = $col["n_gen"]; d = $col["n_depth"]; t = $col["avg_ts"]
      if (g == 0) print "pp" p, t; else print "tg" g "@" d, t }'
}

for name in $models; do
  model=$build/models/$name.gguf
  if [ ! -f "$model" ]; then
    mkdir -p "$build/models"
    echo "writing $model ..."
    "$build/bin/bmoe-mkmodel" --shape "$name" --seed 1 --quiet -o "$model.partial"
    mv "$model.partial" "$model"
  fi
  vocab_size=$("$cli" --info "$model" | sed -n 's/^ *tokenizer\.ggml\.tokens: ARRAY\[STRING x \([0-9]*\)\].*/\1/p')
  [ -n "$vocab_size" ] || fail "$model: no tokenizer.ggml.tokens"
  for round in $(seq 1 "$rounds"); do
    # a benchmark of the engines, not of the disk: llama.cpp's copy of the
    # weights pushes the file out of the page cache bmoe maps it from
    cat "$model" > /dev/null
    # and an untimed run first, as llama-bench warms up before it measures:
    # on a virtual machine the first run after the file is read afresh is
    # slower than the next ones
    bmoe_rate "$model" 64 1 prefill > /dev/null
    {
      echo "bmoe pp64 $(bmoe_rate "$model" 64 1 prefill)"
      echo "bmoe pp512 $(bmoe_rate "$model" 512 1 prefill)"
      echo "bmoe tg32@0 $(bmoe_rate "$model" 1 33 decode)"
      echo "bmoe tg32@2048 $(bmoe_rate "$model" 2048 33 decode)"
      llama_rates "$model" -p 64,512 -n 32 -d 0 | sed 's/^/llama /'
      llama_rates "$model" -p 0 -n 32 -d 2048 | sed 's/^/llama /'
    } | tee -a "$work/$name.results" | sed "s/^/$name round $round: /"
  done
  echo
  echo "== $name: medians over $rounds rounds (-t $threads)"
  printf '| %-10s | %12s | %12s | %8s |\n' test bmoe llama.cpp ratio
  printf '|%s|\n' "------------|--------------|--------------|----------"
  for test in pp64 pp512 tg32@0 tg32@2048; do
    b=$(awk -v t="$test" '$1 == "bmoe" && $2 == t { print $3 }' "$work/$name.results" | median)
    l=$(awk -v t="$test" '$1 == "llama" && $2 == t { print $3 }' "$work/$name.results" | median)
    ratio=$(awk -v b="$b" -v l="$l" 'BEGIN { if (b + 0 > 0 && l + 0 > 0) printf "%.2fx", b / l; else print "-" }')
    printf '| %-10s | %12s | %12s | %8s |\n' "$test" "$b" "$l" "$ratio"
  done
done
