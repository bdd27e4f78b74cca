#!/usr/bin/env bash
# bench/lossy.sh: what each lossy lever buys and what it costs, in two tables.
# Levers: drop 0.5 / 0.75 / 1.0, substitute 0.1 / 0.15 / 0.3, route-ahead 1 / 2,
# top-k k-1 and k-2, each against the exact run.
#
# quality: the trained qwen3moe in models/, streamed through a cache of about
#   a third of its experts (--overlap): MiB per token, hit rate, perplexity of
#   models/heldout.txt through the decode path (--ppl-step) against the exact
#   run's, and multiple-choice accuracy (--ppl-choices) on items built from
#   the held-out text (a passage, its true continuation, three from elsewhere).
# speed: the full-size qwen3-30b-a3b shape under ../shared/tools/memcap
#   --drop-caches 8G, -t 2, 32 decode tokens after a 64-token prompt,
#   --cache-mb auto --overlap, the real phone routing replayed
#   (../shared/data/route-traces/qwen.route.csv at top-6), levers interleaved
#   in every round: decode tok/s and MiB per token against the exact run.
#   Substitution needs the router's own scores, so its "own" rows run the
#   file's own (random) routing against an exact run of that routing.
#
# Run (as root, for memcap): bench/lossy.sh
#   BMOE_BENCH_PARTS=quality BMOE_BENCH_CHUNKS=8 BMOE_BENCH_ITEMS=24 bench/lossy.sh
#   BMOE_BENCH_PARTS=speed BMOE_BENCH_ROUNDS=1 bench/lossy.sh
#
# Environment: BMOE_BUILD_DIR (default build), BMOE_BENCH_MODEL (default
# $BMOE_BUILD_DIR/models/qwen3-30b-a3b.gguf), BMOE_BENCH_ROUNDS (default 2),
# BMOE_BENCH_CAP (default 8G), BMOE_BENCH_PARTS (default "quality speed"),
# BMOE_BENCH_CHUNKS (held-out chunks of 512 tokens for --ppl-step, default
# 16), BMOE_BENCH_ITEMS (multiple-choice items, default 40),
# BMOE_SHARED_DIR (default ../shared).
# A benchmark, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BMOE_BUILD_DIR:-build}
model=${BMOE_BENCH_MODEL:-$build/models/qwen3-30b-a3b.gguf}
rounds=${BMOE_BENCH_ROUNDS:-2}
cap=${BMOE_BENCH_CAP:-8G}
parts=${BMOE_BENCH_PARTS-"quality speed"}
chunks=${BMOE_BENCH_CHUNKS:-16}
items=${BMOE_BENCH_ITEMS:-40}
shared=${BMOE_SHARED_DIR:-../shared}
cli=$build/bin/bmoe-cli
mkmodel=$build/bin/bmoe-mkmodel
memcap=$shared/tools/memcap
trace=$shared/data/route-traces/qwen.route.csv
trained=models/qwen3moe-shakespeare-q8_0.gguf
heldout=models/heldout.txt
threads=2

fail() { echo "bench/lossy.sh: $*" >&2; exit 1; }
[ -x "$cli" ] || fail "$cli is missing (cmake --build $build --target bmoe-cli bmoe-mkmodel)"
for file in "$trained" "$heldout"; do
  [ -f "$file" ] || fail "$file is missing"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the binaries measured are copies: a rebuild during the run changes nothing
cp "$cli" "$work/bmoe-cli"
cp -P "$build"/lib/libbmoe.so* "$work/" 2>/dev/null || true
export LD_LIBRARY_PATH=$work
cli=$work/bmoe-cli

# The levers, by name: the flags each adds to the exact run's.
levers=(exact drop-0.5 drop-0.75 drop-1.0 sub-0.1 sub-0.15 sub-0.3 ahead-1 ahead-2 topk-1 topk-2)
lever_flags() {
  local k=$2
  case "$1" in
    exact) echo "" ;;
    drop-*) echo "--drop-cold-experts ${1#drop-}" ;;
    sub-*) echo "--expert-substitute ${1#sub-}" ;;
    ahead-*) echo "--route-ahead ${1#ahead-}" ;;
    topk-*) echo "--n-expert-used $((k - ${1#topk-}))" ;;
  esac
}

# field LINE_PREFIX PATTERN FILE: the first number after PATTERN on the line starting with LINE_PREFIX.
field() {
  awk -v prefix="$1" -v pattern="$2" 'index($0, prefix) == 1 {
      rest = substr($0, index($0, pattern) + length(pattern)); sub(/^[ =]*/, "", rest)
      if (index($0, pattern) && match(rest, /^-?[0-9.]+/)) { print substr(rest, 1, RLENGTH); exit } }' "$3"
}

quality() {
  local expert_bytes cache_mb k
  expert_bytes=$("$cli" --info "$trained" | awk '/expert bytes/ { print $3; exit }')
  k=$("$cli" --info "$trained" | awk -F'= ' '/expert_used_count/ { print $2; exit }')
  if [ -z "$expert_bytes" ] || [ -z "$k" ]; then
    fail "cannot read the trained model's expert bytes and top-k"
  fi
  cache_mb=$(awk -v b="$expert_bytes" 'BEGIN { m = int(b / 3 / 1048576 + 0.5); print (m < 1 ? 1 : m) }')
  echo "== quality: $trained, --moe-stream --cache-mb $cache_mb --overlap (a third of its $((expert_bytes / 1048576)) MiB" \
    "of experts), --ppl-step over $chunks chunks of 512 held-out tokens, $items choice items"

  # the multiple-choice set: a passage (about 400 bytes, from a line start),
  # its next words as the true continuation, three other places' words as
  # the wrong ones; commas and line breaks out of the choices (they separate
  # --ppl-choices' list); the true one's place among the four drawn too
  python3 - "$heldout" "$items" "$work/items" <<'EOF'
import os, random, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
n, out = int(sys.argv[2]), sys.argv[3]
os.makedirs(out, exist_ok=True)
rng = random.Random(39)
starts = [i + 1 for i, c in enumerate(text) if c == "\n" and i + 600 < len(text)]
def words_at(pos):
    piece = text[pos:pos + 80].replace(",", " ").replace("\n", " ")
    return " ".join(piece.split()[:6])
made = 0
while made < n:
    start = rng.choice(starts)
    end = text.find(" ", start + 400)
    if end < 0:
        continue
    truth = words_at(end)
    others = [words_at(text.find(" ", rng.randrange(len(text) - 200))) for _ in range(3)]
    choices = [" " + c for c in [truth] + others]
    if len(set(choices)) < 4 or any(len(c.split()) < 3 for c in choices):
        continue
    order = list(range(4))
    rng.shuffle(order)
    with open(f"{out}/{made}.prompt", "w", encoding="utf-8") as f:
        f.write(text[start:end])
    with open(f"{out}/{made}.choices", "w", encoding="utf-8") as f:
        f.write(",".join(choices[i] for i in order))
    with open(f"{out}/{made}.answer", "w") as f:
        f.write(str(order.index(0)))
    made += 1
EOF

  local stream_flags="--moe-stream --cache-mb $cache_mb --overlap -t $threads"
  local exact_ppl=""
  printf '| lever | MiB/token | hit %% | ppl-step | vs exact | choices right |\n|---|---|---|---|---|---|\n' \
    > "$work/quality.md"
  for lever in "${levers[@]}"; do
    local flags log="$work/quality.$lever.log"
    flags=$(lever_flags "$lever" "$k")
    # shellcheck disable=SC2086
    "$cli" -m "$trained" --ppl "$heldout" --ppl-step -c 512 --chunks "$chunks" $stream_flags $flags \
      > "$log" 2> "$log.err" || fail "$lever: --ppl-step failed: $(tail -n 1 "$log.err")"
    local ppl mib hit right=0
    ppl=$(field "ppl:" "perplexity" "$log")
    mib=$(field "ppl-stream:" "MiB read," "$log")
    hit=$(field "ppl-stream:" "cache hit" "$log")
    [ -n "$exact_ppl" ] || exact_ppl=$ppl
    for ((i = 0; i < items; i++)); do
      local best
      # shellcheck disable=SC2086
      best=$("$cli" -m "$trained" -p "$(cat "$work/items/$i.prompt")" --ppl-choices "$(cat "$work/items/$i.choices")" \
        --ppl-step -c 512 $stream_flags $flags 2> /dev/null | awk '/^ppl-choices:/ { print $3; exit }')
      [ -n "$best" ] || fail "$lever: --ppl-choices gave no answer on item $i"
      [ "$best" = "$(cat "$work/items/$i.answer")" ] && right=$((right + 1))
    done
    local delta
    delta=$(awk -v p="$ppl" -v e="$exact_ppl" 'BEGIN { printf "%+.1f %%", 100 * (p - e) / e }')
    echo "$lever: ppl-step $ppl ($delta), $mib MiB/token, hit $hit %, choices $right/$items"
    printf '| %s | %s | %s | %s | %s | %d/%d |\n' "$lever" "$mib" "$hit" "$ppl" "$delta" "$right" "$items" \
      >> "$work/quality.md"
  done
  cat "$work/quality.md"
}

speed() {
  [ -x "$memcap" ] || fail "$memcap is missing"
  [ -f "$trace" ] || fail "$trace is missing"
  if [ ! -f "$model" ]; then
    mkdir -p "$(dirname "$model")"
    echo "writing $model (about 18.5 GB) ..."
    "$mkmodel" --shape qwen3-30b-a3b --seed 1 -o "$model.partial"
    mv "$model.partial" "$model"
  fi
  local base="--moe-stream --cache-mb auto --overlap --io-threads 4"
  local replay="--route-replay $trace"
  declare -A flags=(
    [exact]="$base --n-expert-used 6 $replay"
    [drop-0.5]="$base --n-expert-used 6 $replay --drop-cold-experts 0.5"
    [drop-0.75]="$base --n-expert-used 6 $replay --drop-cold-experts 0.75"
    [drop-1.0]="$base --n-expert-used 6 $replay --drop-cold-experts 1.0"
    [ahead-1]="$base --n-expert-used 6 $replay --route-ahead 1"
    [ahead-2]="$base --n-expert-used 6 $replay --route-ahead 2"
    [topk-5]="$base --n-expert-used 5 $replay"
    [topk-4]="$base --n-expert-used 4 $replay"
    [own-exact]="$base"
    [own-sub-0.1]="$base --expert-substitute 0.1"
    [own-sub-0.15]="$base --expert-substitute 0.15"
    [own-sub-0.3]="$base --expert-substitute 0.3"
  )
  local configs="exact drop-0.5 drop-0.75 drop-1.0 ahead-1 ahead-2 topk-5 topk-4 own-exact own-sub-0.1 own-sub-0.15 own-sub-0.3"
  local ids
  ids=$(awk 'BEGIN { for (i = 0; i < 64; i++) printf "%s%d", (i ? "," : ""), 1000 + (i * 7919) % 140000 }')
  echo "== speed: $model under memcap --drop-caches $cap, -t $threads, 64-token prompt, 32 decode tokens, $rounds rounds"
  for round in $(seq 1 "$rounds"); do
    for config in $configs; do
      local csv="$work/$config.$round.csv" log="$work/$config.$round.log"
      # shellcheck disable=SC2086
      "$memcap" --drop-caches "$cap" "$cli" -m "$model" --prompt-ids "$ids" -n 32 --ignore-eos -t "$threads" -c 112 \
        ${flags[$config]} --csv "$csv" > "$log" 2>&1 || fail "$config round $round failed: $(tail -n 1 "$log")"
      awk -v c="$config" -v r="$round" '/^# summary/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
          printf "round %d %-13s decode %7.3f tok/s  %8.1f MiB/token  hit %6s%%  dropped %s\n", r, c, v["tok/s"],
            v["read_MiB"] / v["tokens"], v["cache_hit_pct"], v["experts_dropped"] }' "$csv"
    done
  done
  # medians over the rounds, each lever against its exact run
  for config in $configs; do
    for round in $(seq 1 "$rounds"); do
      awk -v c="$config" '/^# summary/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
          print c, v["tok/s"], v["read_MiB"] / v["tokens"], v["cache_hit_pct"] }' "$work/$config.$round.csv"
    done
  done | awk '
    function median(list, n,   i, j, t, a) { split(list, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    { tps[$1] = tps[$1] " " $2; mib[$1] = mib[$1] " " $3; hit[$1] = hit[$1] " " $4; n[$1]++; if (!seen[$1]++) order[++m] = $1 }
    END {
      print "| lever | decode tok/s | vs exact | MiB/token | hit % |"
      print "|---|---|---|---|---|"
      for (i = 1; i <= m; i++) {
        c = order[i]; base = c ~ /^own-/ ? "own-exact" : "exact"
        t = median(tps[c], n[c]); b = median(tps[base], n[base])
        printf "| %s | %.3f | %+.1f %% | %.1f | %.1f |\n", c, t, 100 * (t - b) / b, median(mib[c], n[c]), median(hit[c], n[c])
      }
    }'
}

for part in $parts; do
  case "$part" in
    quality) quality ;;
    speed) speed ;;
    *) fail "unknown part '$part' (quality, speed)" ;;
  esac
done
