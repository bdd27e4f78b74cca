#!/bin/sh
# The shared library exports the public API and nothing else: every defined
# dynamic symbol starts with bmoe_, and the API is there.
set -eu
library="$1"
symbols=$(nm -D --defined-only "$library" | awk '{print $3}')
foreign=$(printf '%s\n' "$symbols" | grep -v '^bmoe_' || true)
if [ -n "$foreign" ]; then
  echo "exports outside bmoe_*:" $foreign
  exit 1
fi
for needed in bmoe_model_load bmoe_generation_start bmoe_generation_step bmoe_eval bmoe_status_name; do
  printf '%s\n' "$symbols" | grep -qx "$needed" || { echo "missing export $needed"; exit 1; }
done
echo "$(printf '%s\n' "$symbols" | wc -l) exports, all bmoe_*"
