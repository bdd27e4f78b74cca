#!/usr/bin/env bash
# The main job: sets up and builds, then generates from the trained qwen3moe
# in models/ (tools/train: 32 experts, top-4, trained here on Shakespeare and
# wikitext) with its experts streamed from disk through a 2 MiB cache, less
# than its experts take, so the run reads and evicts experts every token; the
# last lines are the run's own end-of-run report. Then, when ../shared is
# there, a story from the dense stories260K model it ships.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
model=models/qwen3moe-shakespeare-q4_k_m.gguf
build/bin/bmoe-cli --info "$model" | tail -n 12
build/bin/bmoe-cli -m "$model" -p "ROMEO:" -n 96 -c 512 --moe-stream --cache-mb 2
echo
shared=${BMOE_SHARED_DIR:-../shared}
stories=$shared/data/models/stories260K/stories260K.gguf
if [ -f "$stories" ]; then
  build/bin/bmoe-cli -m "$stories" -p "Once upon a time" -n 120 -c 256
fi
