#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs the main job on the
# bundled sample: verify and print the lm IR of a one-layer DeepSeek-V3.2-style
# model, then evaluate it with the reference evaluator (weights from a seed).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
bin=${DAYBREAK_BUILD_DIR:-build}/bin
sample=samples/dsa_block.mlir
echo "== $sample verifies and round-trips through daybreak-opt"
"$bin/daybreak-opt" "$sample" | "$bin/daybreak-opt" > /dev/null
echo "== reference evaluation of @prefill (6 tokens, top_k 4, seed 1)"
time "$bin/daybreak-eval" "$sample" --function=prefill \
  --input=6xi32=3,1,4,1,5,9 \
  --input=6xi32=iota \
  --input=6xi32=1,2,3,4,5,6 \
  --input=6xi32=iota \
  --input=16x24xf32=0 \
  --random-seed=1
