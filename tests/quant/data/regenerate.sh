#!/bin/sh
# Rewrites the reference logits of test_quant_iq_logits: for each grid
# i-quant and ternary format, the tiny qwen3moe with its experts in it as bmoe-mkmodel writes
# it (deterministic: preset, type and the default seed), then llama.cpp's
# logits for the fixed prompt ids below (llama-logits: the prompt as one
# batch, then 16 greedy steps, one token each, KV cache f32).
# Usage: tests/quant/data/regenerate.sh BUILD_DIR LLAMA_LOGITS
# (e.g. build ../shared/tools/llama-logits). The models are not kept.
set -eu
build=$1
logits=$2
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# 40 ids below the special tokens of the tiny vocabulary (512 tokens)
ids=19,146,356,390,73,236,189,343,357,405,49,232,306,255,311,9,263,221,295,190,319,436,280,453,386,222,201,90,29,435,54,419,63,192,78,49,82,262,427,253
for type in iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m tq1_0 tq2_0; do
    name=qwen3moe-tiny-$type
    "$build/bin/bmoe-mkmodel" --shape tiny-qwen3moe --type "$type" --quiet -o "$scratch/$name.gguf"
    "$logits" -m "$scratch/$name.gguf" -o "$here/$name" -n 16 -t 2 --kv-f32 --ids "$ids" > "$scratch/$name.log" 2>&1 ||
        { cat "$scratch/$name.log" >&2; exit 1; }
done
