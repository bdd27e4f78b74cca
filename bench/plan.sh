#!/usr/bin/env bash
# bench/plan.sh: the planner against hand tuning. For each memory cap (8G,
# 12G, none), on the full-size Qwen3-30B-A3B-shaped file: the plan --auto
# chooses (printed with --plan-explain), its predicted and measured s/token,
# and its decode tok/s against the best of a set of hand-tuned
# configurations (bench/stream.sh's rows), all in one script, interleaved in
# every round. -t 2, 32 decode tokens after a 16-token prompt, each capped run
# under ../shared/tools/memcap --drop-caches. A benchmark, not a test.
#
# Environment: BMOE_BUILD_DIR (default build), BMOE_BENCH_MODEL (default
# $BMOE_BUILD_DIR/models/qwen3-30b-a3b.gguf), BMOE_BENCH_ROUNDS (default 1),
# BMOE_BENCH_CAPS (default "8G 12G none"), BMOE_SHARED_DIR (default ../shared).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BMOE_BUILD_DIR:-build}
model=${BMOE_BENCH_MODEL:-$build/models/qwen3-30b-a3b.gguf}
rounds=${BMOE_BENCH_ROUNDS:-1}
caps=${BMOE_BENCH_CAPS:-"8G 12G none"}
shared=${BMOE_SHARED_DIR:-../shared}
memcap=$shared/tools/memcap
threads=2

fail() { echo "bench/plan.sh: $*" >&2; exit 1; }
[ -x "$build/bin/bmoe-cli" ] || fail "$build/bin/bmoe-cli is missing (cmake --build $build --target bmoe-cli)"
[ -x "$memcap" ] || fail "$memcap is missing"
[ -f "$model" ] || fail "$model is missing (bench/stream.sh writes it)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the binaries measured are copies: a rebuild during the run changes nothing
cp "$build/bin/bmoe-cli" "$work/bmoe-cli"
cp -P "$build"/lib/libbmoe.so* "$work/" 2>/dev/null || true
export LD_LIBRARY_PATH=$work
cli=$work/bmoe-cli
# the probe results are kept per model and machine: a cache of this run's
# own for each cap, so that each cap's runs plan from the probe made under it
cache_for() { export XDG_CACHE_HOME=$work/cache.$1; }

declare -A flags=(
  [plan]="--auto"
  [resident]="--no-moe-stream"
  [overlap]="--moe-stream --cache-mb auto --overlap"
  [overlap-2]="--moe-stream --cache-mb auto --overlap --io-threads 2"
  [overlap-8]="--moe-stream --cache-mb auto --overlap --io-threads 8"
  [no-overlap]="--moe-stream --cache-mb auto"
  [prefetch]="--moe-stream --cache-mb auto --overlap --prefetch 1"
  [predict]="--moe-stream --cache-mb auto --overlap --predict-prefetch"
)
configs="plan resident overlap overlap-2 overlap-8 no-overlap prefetch predict"
ids=$(awk 'BEGIN { for (i = 0; i < 16; i++) printf "%s%d", (i ? "," : ""), 1000 + (i * 7919) % 140000 }')

# summary KEY FILE: the value of KEY in the CSV's "# summary" trailer.
summary() {
  awk -v key="$1" '/^# summary/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) v = kv[2] } }
    END { print v }' "$2"
}

# capped CAP: the command prefix that runs under CAP ("none": no cap, the
# model read once into the page cache first).
capped() {
  if [ "$1" = none ]; then
    cat "$model" > /dev/null
  else
    echo "$memcap --drop-caches $1"
  fi
}

for cap in $caps; do
  echo "== cap $cap: the plan"
  cache_for "$cap"
  # shellcheck disable=SC2046
  $(capped "$cap") "$cli" -m "$model" -t "$threads" -c 64 --plan --plan-explain --probe | tee "$work/plan.$cap.txt" ||
    fail "--plan under $cap failed"
done

for round in $(seq 1 "$rounds"); do
  for cap in $caps; do
    cache_for "$cap"
    # a run whose figures are dropped: the first run of a cap's block ran
    # up to a fifth slower than the same flags later in it, whatever they were
    # shellcheck disable=SC2046
    $(capped "$cap") "$cli" -m "$model" --prompt-ids "$ids" -n 8 --ignore-eos -t "$threads" -c 64 --auto > /dev/null 2>&1 ||
      true
    # each round starts the block one configuration further on: no
    # configuration always runs right after the warm-up
    shift_by=$(( (round - 1) % $(wc -w <<< "$configs") ))
    ordered=$(awk -v k="$shift_by" '{ for (i = 1; i <= NF; i++) printf "%s ", $(((i - 1 + k) % NF) + 1) }' <<< "$configs")
    for config in $ordered; do
      # mapped experts under a cap fault in at every token: the baseline of bench/stream.sh, not a candidate
      [ "$config" = resident ] && [ "$cap" != none ] && continue
      cache_for "$cap"
      csv=$work/$cap.$config.$round.csv
      log=$work/$cap.$config.$round.log
      # shellcheck disable=SC2046,SC2086
      if $(capped "$cap") "$cli" -m "$model" --prompt-ids "$ids" -n 32 --ignore-eos -t "$threads" -c 64 \
           ${flags[$config]} --csv "$csv" > "$log" 2>&1; then
        printf 'round %d cap %-4s %-11s decode %6s tok/s  hit %6s%%  read %9s MiB  %s\n' "$round" "$cap" "$config" \
          "$(summary tok/s "$csv")" "$(summary cache_hit_pct "$csv")" "$(summary read_MiB "$csv")" \
          "$(sed -n 's/^plan: //p' "$log")"
      else
        echo "round $round cap $cap $config: FAILED ($(tail -n 2 "$log" | tr '\n' ' '))"
        rm -f "$csv"
      fi
    done
  done
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "== medians over $rounds round(s): the plan against the best hand-tuned configuration"
for cap in $caps; do
  best=0 best_config=-
  for config in $configs; do
    rate=$(for f in "$work/$cap.$config".*.csv; do if [ -f "$f" ]; then summary tok/s "$f"; fi; done | median)
    [ "$config" = plan ] && plan_rate=$rate && continue
    if awk -v r="$rate" -v b="$best" 'BEGIN { exit !(r != "-" && r + 0 > b + 0) }'; then
      best=$rate best_config=$config
    fi
  done
  line=$(sed -n 's/^plan: //p' "$work/$cap.plan.1.log" 2>/dev/null | head -n 1)
  awk -v c="$cap" -v p="${plan_rate:--}" -v b="$best" -v n="$best_config" -v l="$line" 'BEGIN {
    printf "cap %-4s plan %s tok/s, best hand-tuned %s %s tok/s: the plan at %.1f%% of it; %s\n", c, p, n, b,
      (b > 0 && p != "-" ? 100 * p / b : 0), l }'
done
