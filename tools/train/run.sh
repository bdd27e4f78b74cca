#!/usr/bin/env bash
# The whole training run, as it was run for models/qwen3moe-shakespeare-*.gguf:
# tokenizer, exactness check, training (seed 37), quantization. OUT holds the
# work files (checkpoint, loss curve, F32 model); rerunning with the same OUT
# resumes the training from its last checkpoint.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-/tmp/bmoe-train}
"$here/setup.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j2 --target bmoe-cli bmoe-mkmodel bmoe_shared >/dev/null
py=/usr/bin/python3
# OpenMP threads that spin while waiting steal the CPU from each other on a shared machine
export OMP_WAIT_POLICY=PASSIVE
[ -f "$out/vocab.json" ] || $py "$here/prepare.py" --out "$out" --vocab 4096
$py "$here/check_exact.py" --out "$out"
$py "$here/train.py" --out "$out" --seed 37 --steps 320
mkdir -p "$root/models"
for type in q8_0 q4_k_m; do
  "$root/build/bin/bmoe-mkmodel" --quantize "$out/model-f32.gguf" --type $type \
    -o "$root/models/qwen3moe-shakespeare-$type.gguf"
done
cp "$out/heldout.txt" "$root/models/heldout.txt"
cp "$out/loss.csv" "$here/loss.csv"
