#!/usr/bin/env bash
# Here (no GPU): builds and copies into device/ (ignored by git) what the GPU
# machine runs, so it needs no MLIR there. Then, through the device tool:
#   run: scripts/gpu-tests.sh   carry: ["device"]
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
build=${DAYBREAK_BUILD_DIR:-build}
rm -rf device && mkdir -p device
cp "$build/bin/daybreak-run" "$build/test/runtime/DaybreakRuntimeTests" device/
# A compiled sample and its expected logits for the runtime on that machine.
"$build/bin/daybreak-compile" test/fixtures/deepseek_v32_small -o device/small.daybreak \
  --max-seq-len=64 --max-batch=2 --max-tokens=64 --kv-cache-dtype=f32
cp test/fixtures/deepseek_v32_small/inputs.json device/inputs.json
cp test/fixtures/deepseek_v32_small/expected.safetensors device/expected.safetensors
du -sh device
