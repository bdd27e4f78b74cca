#!/usr/bin/env bash
# The main job on a model the project generates itself: sets up and builds,
# writes a small random-weight qwen3moe model with bmoe-mkmodel, prints its
# --info, then generates text from it (random weights: gibberish, real math).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
mkdir -p build/models
model=build/models/demo-qwen3moe-q4_k_m.gguf
build/bin/bmoe-mkmodel --shape tiny-qwen3moe --type q4_k_m --seed 1 -o "$model"
build/bin/bmoe-cli --info "$model" | tail -n 12
build/bin/bmoe-cli -m "$model" -p "Hello, bmoe" -n 32
