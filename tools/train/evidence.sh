#!/usr/bin/env bash
# The figures in README.md, from the files in models/: held-out perplexity
# of both files, a greedy Shakespeare continuation (streamed, small cache),
# and the routing statistics of a route trace over held-out text next to
# the real Qwen3-30B-A3B phone trace in shared/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cli=$root/build/bin/bmoe-cli
shared=${BMOE_SHARED_DIR:-$root/../shared}
work=${OUT:-/tmp/bmoe-train}/evidence
mkdir -p "$work"
for type in q8_0 q4_k_m; do
  m=$root/models/qwen3moe-shakespeare-$type.gguf
  echo "== $type: $(stat -c %s "$m") bytes"
  "$cli" -m "$m" --ppl "$root/models/heldout.txt" -c 512 -t 2 2>/dev/null | grep "Final estimate"
  "$cli" -m "$m" --ppl "$root/models/heldout.txt" -c 512 --chunks 16 -t 2 2>/dev/null | grep "Final estimate"
done
m=$root/models/qwen3moe-shakespeare-q8_0.gguf
echo "== greedy continuation"
"$cli" -m "$m" -p "ROMEO:
I will" -n 64 -c 512 --moe-stream --cache-mb 2 2>/dev/null
echo
# a held-out Shakespeare passage as the prompt, then 128 generated tokens
head -c 1500 "$root/models/heldout.txt" > "$work/prompt.txt"
"$cli" -m "$m" -f "$work/prompt.txt" -n 128 -c 512 --moe-stream --cache-mb 2 \
  --route-trace "$work/route.csv" >/dev/null 2>&1
echo "== routing over held-out text (prefill and decode)"
/usr/bin/python3 "$here/route_stats.py" "$work/route.csv" "$shared/data/route-traces/qwen.route.csv" \
  | grep -E "experts|mean|^ +[0-9]" | grep -v "^ *[0-9][0-9] " 
"$root/build/bin/bmoe-analyze" route "$work/route.csv" --phase all --budget-mib 1 2 4 | sed -n '1,20p'
