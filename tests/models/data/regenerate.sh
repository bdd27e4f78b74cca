#!/bin/sh
# Rewrites the reference logits of test_simple_archs: each tiny model as
# bmoe-mkmodel writes it (deterministic: preset, type and the default seed),
# then llama.cpp's logits for the fixed prompt ids below (llama-logits: the
# prompt as one batch, then 16 greedy steps, one token each, KV cache f32).
# Usage: tests/models/data/regenerate.sh BUILD_DIR LLAMA_LOGITS [SHAPE...]
# (e.g. build ../shared/tools/llama-logits; the shapes default to all of
# them: qwen2moe mixtral olmoe bailingmoe2 glm4moe deepseek2 deepseek3
# deepseek2-lite deepseek4 deepseek4-hash deepseek4-long).
# deepseek4-long reads the 300-id prompt below instead: past its ratio-128
# layer's first two blocks and its indexer's top-k of the ratio-4 entries.
# The models are not kept.
set -eu
build=$1
logits=$2
shift 2
shapes=${*:-qwen2moe mixtral olmoe bailingmoe2 glm4moe deepseek2 deepseek3 deepseek2-lite deepseek4 deepseek4-hash
    deepseek4-long}
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# 40 ids below the special tokens of the tiny vocabularies (512 tokens)
ids=19,146,356,390,73,236,189,343,357,405,49,232,306,255,311,9,263,221,295,190,319,436,280,453,386,222,201,90,29,435,54,419,63,192,78,49,82,262,427,253
# 300 ids below the special tokens, for deepseek4-long
long_ids=83,411,97,233,18,436,116,414,311,290,154,172,335,210,331,92,404,346,494,235,293,399,97,165,24,296,19,113,424,425,199,25,282,46,431,259,396,6,186,382,58,294,164,246,174,39,349,462,157,249,283,394,398,424,495,259,430,31,37,58,177,284,463,463,487,417,369,148,430,492,83,216,193,33,137,459,303,45,269,79,494,363,279,217,488,302,34,47,40,287,182,228,209,480,394,231,45,323,134,448,28,482,161,80,411,153,431,291,252,116,437,270,12,234,491,479,426,427,207,97,416,495,393,443,450,66,496,438,303,398,338,47,321,189,22,115,35,184,259,377,300,256,425,276,352,479,348,265,142,62,317,49,336,40,328,327,39,282,289,184,351,307,222,421,375,334,377,202,192,41,274,206,144,496,303,178,249,67,151,116,196,168,479,329,472,134,125,89,245,373,412,445,181,203,408,286,418,47,56,380,259,107,436,69,38,366,131,342,474,34,305,440,56,360,96,493,290,388,411,48,416,328,12,346,136,85,166,366,54,478,35,479,55,286,191,33,465,128,230,93,106,400,258,210,39,207,133,227,192,201,23,389,439,296,434,434,24,467,320,168,33,421,292,128,465,111,295,5,259,207,493,246,365,151,303,408,8,415,438,199,443,104,293,448,210,191,315,441,364,415,361,126,163,143,383,489,471,327,72,465
for shape in $shapes; do
    prompt=$ids
    if [ "$shape" = deepseek4-long ]; then prompt=$long_ids; fi
    for type in f32 q4_k_m; do
        name=$shape-tiny-$type
        "$build/bin/bmoe-mkmodel" --shape "tiny-$shape" --type "$type" --quiet -o "$scratch/$name.gguf"
        "$logits" -m "$scratch/$name.gguf" -o "$here/$name" -n 16 -t 2 --kv-f32 --ids "$prompt" > "$scratch/$name.log" 2>&1 ||
            { cat "$scratch/$name.log" >&2; exit 1; }
    done
done
