#!/usr/bin/env bash
# The main job: sets up and builds, writes a small random-weight qwen3moe
# model with bmoe-mkmodel, prints its --info and generates from it (random
# weights: gibberish text, real math); then, when ../shared is there, tells a
# story with the real trained stories260K model it ships.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
mkdir -p build/models
model=build/models/demo-qwen3moe-q4_k_m.gguf
build/bin/bmoe-mkmodel --shape tiny-qwen3moe --type q4_k_m --seed 1 -o "$model"
build/bin/bmoe-cli --info "$model" | tail -n 12
build/bin/bmoe-cli -m "$model" -p "Hello, bmoe" -n 32 --ignore-eos
echo
shared=${BMOE_SHARED_DIR:-../shared}
stories=$shared/data/models/stories260K/stories260K.gguf
if [ -f "$stories" ]; then
  build/bin/bmoe-cli -m "$stories" -p "Once upon a time" -n 120 -c 256
fi
