#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs the main job on the
# bundled sample: compile the DeepSeek-V3.2 (DSA) checkpoint in samples/ (hub
# format, FP8 block-scaled weights) into an artifact, printing the memory
# plan, then generate tokens with the runtime, printing the timing.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
bin=${DAYBREAK_BUILD_DIR:-build}/bin
out=${DAYBREAK_BUILD_DIR:-build}/sample.daybreak
echo "== daybreak-compile samples/deepseek_v32_fp8 -> $out"
"$bin/daybreak-compile" samples/deepseek_v32_fp8 -o "$out" \
  --target=cpu --max-seq-len=256 --max-batch=4 --max-tokens=256
echo "== daybreak-run inspect"
"$bin/daybreak-run" inspect "$out"
echo "== daybreak-run generate (greedy, 32 new tokens)"
"$bin/daybreak-run" generate "$out" --prompt-ids 1,17,42,7,99,3,250,12,5,64 \
  --max-new-tokens 32
