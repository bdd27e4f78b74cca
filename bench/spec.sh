#!/usr/bin/env bash
# bench/spec.sh: what speculative decoding's verify batches cost and buy, apart
# from any drafter's luck. The drafts are a plain run's own tokens replayed
# (--draft-replay): accept (every draft accepted), reject (none) and rate P
# (each draft right with probability P: --draft-replay-rate) at --draft
# 1..4, interleaved with plain decoding in every round; the tables give median
# decode tok/s and each configuration's ratio to the same round's plain run.
# First resident (no cap, the file in the page cache), then streamed under
# ../shared/tools/memcap --drop-caches 8G (--moe-stream --cache-mb auto
# --overlap), where MiB read per token shows what widening the batch costs.
# Greedy, -t 2, 32 tokens after a 64-token prompt, on the full-size
# qwen3-30b-a3b and qwen3.5-35b-a3b shapes (bmoe-mkmodel, written on first use).
# Before them, real acceptance: --ngram drafts on the trained model of models/
# (its own text, so its own routing), a copy-heavy prompt (a passage, then its
# first lines again) and free prose, greedy and sampled (--temp 0.8 --seed 1),
# resident and streamed through a cache of a third of its experts; ngram-N is
# the default (drafting paused where it measures slower), always-N drafts at
# every match (--draft-always).
#
# Environment: BMOE_BUILD_DIR (default build), BMOE_BENCH_MODELS (the model
# files; "": the trained part only; default $BMOE_BUILD_DIR/models/qwen3-30b-a3b.gguf and
# $BMOE_BUILD_DIR/models/qwen3.5-35b-a3b.gguf; a missing file named after a
# bmoe-mkmodel shape is written), BMOE_BENCH_ROUNDS (default 2),
# BMOE_BENCH_DRAFTS (default "1 2 3 4"), BMOE_BENCH_RATES (default "0.6 0.8"; "": no
# rate rows), BMOE_BENCH_TOKENS (default 32),
# BMOE_BENCH_TRAINED (default 1; 0: no trained-model part), BMOE_BENCH_TRAINED_ROUNDS
# (default 5), BMOE_BENCH_CAP (default 8G; "none": no streamed part), BMOE_SHARED_DIR
# (default ../shared), BMOE_BENCH_ROUTE_TRACE (a route trace every run of the
# full-size part replays instead of the random router's choice, e.g. the real
# Qwen3-30B-A3B routing of ../shared/data/route-traces/qwen.route.csv: a verify
# batch's positions then share experts as real text's do; with
# BMOE_BENCH_ROUTE_USED experts a token, default 6, the trace's).
# Run as root (memcap). A benchmark, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BMOE_BUILD_DIR:-build}
models=${BMOE_BENCH_MODELS-"$build/models/qwen3-30b-a3b.gguf $build/models/qwen3.5-35b-a3b.gguf"}
rounds=${BMOE_BENCH_ROUNDS:-2}
drafts=${BMOE_BENCH_DRAFTS:-"1 2 3 4"}
rates=${BMOE_BENCH_RATES-"0.6 0.8"}
tokens=${BMOE_BENCH_TOKENS:-32}
cap=${BMOE_BENCH_CAP:-8G}
trained_part=${BMOE_BENCH_TRAINED:-1}
trained_rounds=${BMOE_BENCH_TRAINED_ROUNDS:-5}
trained=models/qwen3moe-shakespeare-q8_0.gguf
heldout=models/heldout.txt
shared=${BMOE_SHARED_DIR:-../shared}
cli=$build/bin/bmoe-cli
mkmodel=$build/bin/bmoe-mkmodel
memcap=$shared/tools/memcap
threads=2
io_threads=4
prompt_tokens=64
routing=()
if [ -n "${BMOE_BENCH_ROUTE_TRACE:-}" ]; then
  routing=(--n-expert-used "${BMOE_BENCH_ROUTE_USED:-6}" --route-replay "$BMOE_BENCH_ROUTE_TRACE")
fi

fail() { echo "bench/spec.sh: $*" >&2; exit 1; }
for tool in "$cli" "$mkmodel"; do
  [ -x "$tool" ] || fail "$tool is missing (cmake --build $build --target bmoe-cli bmoe-mkmodel)"
done
[ "$cap" = none ] || [ -x "$memcap" ] || fail "$memcap is missing"
[ -z "${BMOE_BENCH_ROUTE_TRACE:-}" ] || [ -f "$BMOE_BENCH_ROUTE_TRACE" ] || fail "$BMOE_BENCH_ROUTE_TRACE is missing"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the binary measured is a copy: a rebuild during the run changes nothing
cp "$cli" "$work/bmoe-cli"
cp -P "$build"/lib/libbmoe.so* "$work/" 2>/dev/null || true
export LD_LIBRARY_PATH=$work
cli=$work/bmoe-cli

# summary KEY FILE: the value of KEY in the CSV's "# summary" trailer.
summary() {
  awk -v key="$1" '/^# summary/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) v = kv[2] } }
    END { print v }' "$2"
}
# ratio A B: A / B to two decimals, "-" without both
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2f\n", a / b; else print "-" }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# fits_in_memory MODEL: whether the file and 2 GiB more fit in MemAvailable
fits_in_memory() {
  awk -v bytes="$(stat -c %s "$1")" '/^MemAvailable:/ { exit !(bytes + 2 * 2^30 <= $2 * 1024) }' /proc/meminfo
}

configs="plain"
for n in $drafts; do configs="$configs accept-$n"; done
for n in $drafts; do configs="$configs reject-$n"; done
for p in $rates; do for n in $drafts; do configs="$configs rate$p-$n"; done; done

# run_one MODEL PHASE CONFIG ROUND: one generation, its CSV and log in $work
run_one() {
  local model=$1 phase=$2 config=$3 round=$4 name
  name=$(basename "$model" .gguf)
  local csv="$work/$name.$phase.$config.$round.csv" log="$work/$name.$phase.$config.$round.log"
  local extra=() capped=()
  case "$config" in
    accept-*) extra=(--draft-replay "$work/$name.ids" --draft "${config#accept-}") ;;
    reject-*) extra=(--draft-replay "$work/$name.ids" --draft-replay-mode reject --draft "${config#reject-}") ;;
    rate*)
      local rate=${config#rate}
      extra=(--draft-replay "$work/$name.ids" --draft-replay-rate "${rate%-*}" --draft "${config##*-}") ;;
  esac
  if [ "$phase" = resident ]; then
    extra+=(--no-moe-stream)
  else
    extra+=(--moe-stream --cache-mb auto --overlap --io-threads "$io_threads")
    capped=("$memcap" --drop-caches "$cap")
  fi
  if "${capped[@]}" "$cli" -m "$model" --prompt-ids "$(cat "$work/$name.prompt")" -n "$tokens" --ignore-eos \
       -t "$threads" -c $((prompt_tokens + tokens + 16)) "${routing[@]}" "${extra[@]}" --csv "$csv" > "$log" 2>&1; then
    # the forced acceptance holds only while the run repeats the recorded one
    if grep -q 'left the list' "$log"; then
      echo "round $round $name $phase $config: the run left the recorded tokens; its acceptance is not the forced one"
    fi
    printf 'round %d %-18s %-9s %-9s decode %8s tok/s  accepted %s/%s  decodes %s  read %s MiB\n' "$round" "$name" \
      "$phase" "$config" "$(summary tok/s "$csv")" "$(summary mtp_accepted "$csv")" "$(summary mtp_drafted "$csv")" \
      "$(summary mtp_decodes "$csv")" "$(summary read_MiB "$csv")"
  else
    echo "round $round $name $phase $config: FAILED ($(tail -n 2 "$log" | tr '\n' ' '))"
    rm -f "$csv"
  fi
}

# table MODEL PHASE [CONFIGS [ROUNDS]]: the medians of one model and phase
table() {
  local name=$1 phase=$2 config files f round plain
  local table_configs=${3:-$configs} table_rounds=${4:-$rounds}
  echo
  echo "== $name, $phase: medians over $table_rounds rounds (-t $threads; vs plain: against the same round's plain run)"
  printf '| %-9s | %9s | %8s | %9s | %10s | %9s |\n' config "decode" "vs plain" accepted "tok/decode" "MiB/tok"
  printf '|%s|\n' "-----------|-----------|----------|-----------|------------|-----------"
  for config in $table_configs; do
    files=$(ls "$work/$name.$phase.$config".*.csv 2>/dev/null || true)
    [ -n "$files" ] || { printf '| %-9s | failed |\n' "$config"; continue; }
    local decode versus accepted per_decode per_token
    decode=$(for f in $files; do summary tok/s "$f"; done | median)
    versus=$(for f in $files; do
      round=${f%.csv}
      round=${round##*.}
      plain="$work/$name.$phase.plain.$round.csv"
      [ -f "$plain" ] && ratio "$(summary tok/s "$f")" "$(summary tok/s "$plain")"
    done | awk '$0 != "-"' | median)
    accepted=$(for f in $files; do
      awk -v a="$(summary mtp_accepted "$f")" -v d="$(summary mtp_drafted "$f")" \
        'BEGIN { if (d > 0) printf "%.1f\n", 100 * a / d }'
    done | median)
    [ "$accepted" = "-" ] || accepted="$accepted%"
    per_decode=$(for f in $files; do
      ratio "$(summary tokens "$f")" "$(summary mtp_decodes "$f")"
    done | awk '$0 != "-"' | median)
    [ "$config" = plain ] && per_decode=1.00
    per_token=$(for f in $files; do ratio "$(summary read_MiB "$f")" "$(summary tokens "$f")"; done | median)
    printf '| %-9s | %9s | %8s | %9s | %10s | %9s |\n' "$config" "$decode" "$versus" "$accepted" "$per_decode" \
      "$per_token"
  done
}

# trained_part: real --ngram acceptance on the trained model (see the header)
trained_part() {
  [ -f "$trained" ] && [ -f "$heldout" ] || fail "$trained or $heldout is missing"
  local expert_bytes cache_mb text sampling phase round config csv log flags
  expert_bytes=$("$cli" --info "$trained" | awk '/expert bytes/ { print $3; exit }')
  [ -n "$expert_bytes" ] || fail "cannot read the trained model's expert bytes"
  cache_mb=$(awk -v b="$expert_bytes" 'BEGIN { m = int(b / 3 / 1048576 + 0.5); print (m < 1 ? 1 : m) }')
  head -c 200 "$heldout" > "$work/trained-prose.txt"
  { head -c 700 "$heldout"; printf '\n\n'; head -c 150 "$heldout"; } > "$work/trained-copy.txt"
  local trained_configs="plain"
  for n in $drafts; do trained_configs="$trained_configs ngram-$n always-$n"; done
  echo "== trained model: $trained, 256 tokens, resident and streamed (--cache-mb $cache_mb, a third of its experts)"
  for text in copy prose; do
    for sampling in greedy sampled; do
      for round in $(seq 1 "$trained_rounds"); do
        for phase in resident stream; do
          for config in $trained_configs; do
            flags=(-t "$threads" -n 256 -c 1024 --ignore-eos)
            [ "$sampling" = sampled ] && flags+=(--temp 0.8 --seed 1) || flags+=(--temp 0)
            [ "$phase" = stream ] && flags+=(--moe-stream --cache-mb "$cache_mb" --overlap) || flags+=(--no-moe-stream)
            case "$config" in
              ngram-*) flags+=(--ngram --draft "${config#ngram-}") ;;
              always-*) flags+=(--ngram --draft "${config#always-}" --draft-always) ;;
            esac
            csv="$work/trained-$text-$sampling.$phase.$config.$round.csv"
            log="${csv%.csv}.log"
            "$cli" -m "$trained" -f "$work/trained-$text.txt" "${flags[@]}" --csv "$csv" --ids-out "${csv%.csv}.ids" > "$log" 2>&1 ||
              fail "trained $text $sampling $phase $config: $(tail -n 1 "$log")"
          done
        done
      done
      # speculation never changes the text: a run whose output differs is a bug, not a figure
      for f in "$work/trained-$text-$sampling".*.ids; do
        cmp -s "$f" "$work/trained-$text-$sampling.resident.plain.1.ids" ||
          fail "$f: the text differs from plain decoding's"
      done
      for phase in resident stream; do
        table "trained-$text-$sampling" "$phase" "$trained_configs" "$trained_rounds"
      done
    done
  done
}
[ "$trained_part" = 0 ] || trained_part

[ -z "$models" ] || [ ${#routing[@]} -eq 0 ] || echo "== the full-size runs' routing: ${routing[*]}"
for model in $models; do
  name=$(basename "$model" .gguf)
  if [ ! -f "$model" ]; then
    mkdir -p "$(dirname "$model")"
    echo "writing $model (a bmoe-mkmodel shape: tens of GB) ..."
    "$mkmodel" --shape "$name" --seed 1 -o "$model.partial" || fail "$name is not a bmoe-mkmodel shape"
    mv "$model.partial" "$model"
  fi
  # a prompt of fixed ids spread over the vocabulary
  n_vocab=$("$cli" --info "$model" | sed -n 's/.*tokenizer\.ggml\.tokens: ARRAY\[STRING x \([0-9]*\)\].*/\1/p')
  [ -n "$n_vocab" ] || fail "$model: no vocabulary size in --info"
  awk -v n="$prompt_tokens" -v v="$n_vocab" \
    'BEGIN { for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), (v > 2000 ? 1000 : 1) + (i * 7919) % (v > 2000 ? v - 2000 : v - 2) }' \
    > "$work/$name.prompt"
  phases=""
  if fits_in_memory "$model"; then
    phases="resident"
  else
    echo "$name: the resident part is skipped (the model does not fit in this machine's memory)"
  fi
  [ "$cap" = none ] || phases="$phases stream"
  [ -n "$phases" ] || continue
  # the tokens plain decoding produces, which the replayed drafts are (streamed
  # output is the resident output, byte for byte)
  first=${phases%% *}
  [ "$first" = resident ] && cat "$model" > /dev/null
  record=(--no-moe-stream)
  recap=()
  [ "$first" = stream ] && record=(--moe-stream --cache-mb auto --overlap) && recap=("$memcap" --drop-caches "$cap")
  "${recap[@]}" "$cli" -m "$model" --prompt-ids "$(cat "$work/$name.prompt")" -n "$tokens" --ignore-eos \
    -t "$threads" -c $((prompt_tokens + tokens + 16)) "${routing[@]}" "${record[@]}" --ids-out "$work/$name.ids" \
    > "$work/$name.record.log" 2>&1 || fail "$name: recording the plain run failed: $(tail -n 1 "$work/$name.record.log")"
  for phase in $phases; do
    for round in $(seq 1 "$rounds"); do
      [ "$phase" = resident ] && cat "$model" > /dev/null
      for config in $configs; do
        run_one "$model" "$phase" "$config" "$round"
      done
    done
  done
  for phase in $phases; do
    table "$name" "$phase"
  done
done
