#!/bin/sh
# Rewrites the reference logits of test_simple_archs: each tiny model as
# bmoe-mkmodel writes it (deterministic: preset, type and the default seed),
# then llama.cpp's logits for the fixed prompt ids below (llama-logits: the
# prompt as one batch, then 16 greedy steps, one token each, KV cache f32).
# Usage: tests/models/data/regenerate.sh BUILD_DIR LLAMA_LOGITS [SHAPE...]
# (e.g. build ../shared/tools/llama-logits; the shapes default to all of
# them: qwen2moe mixtral olmoe bailingmoe2 glm4moe deepseek2 deepseek3
# deepseek2-lite deepseek4 deepseek4-hash).
# The models are not kept.
set -eu
build=$1
logits=$2
shift 2
shapes=${*:-qwen2moe mixtral olmoe bailingmoe2 glm4moe deepseek2 deepseek3 deepseek2-lite deepseek4 deepseek4-hash}
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# 40 ids below the special tokens of the tiny vocabularies (512 tokens)
ids=19,146,356,390,73,236,189,343,357,405,49,232,306,255,311,9,263,221,295,190,319,436,280,453,386,222,201,90,29,435,54,419,63,192,78,49,82,262,427,253
for shape in $shapes; do
    for type in f32 q4_k_m; do
        name=$shape-tiny-$type
        "$build/bin/bmoe-mkmodel" --shape "tiny-$shape" --type "$type" --quiet -o "$scratch/$name.gguf"
        "$logits" -m "$scratch/$name.gguf" -o "$here/$name" -n 16 -t 2 --kv-f32 --ids "$ids" > "$scratch/$name.log" 2>&1 ||
            { cat "$scratch/$name.log" >&2; exit 1; }
    done
done
