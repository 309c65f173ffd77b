#!/usr/bin/env bash
# There (the GPU machine, from the repository root with device/ carried):
# runs the runtime-only GPU tests and the staged artifact, writing a summary
# to $OUT/gpu-tests.txt when $OUT is set.
set -uo pipefail
cd "$(dirname "$0")/../device"
out=${OUT:-.}/gpu-tests.txt
{
  echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "== daybreak-run devices"; ./daybreak-run devices
  echo "== DaybreakRuntimeTests"; ./DaybreakRuntimeTests
  echo "== CPU artifact on this machine"
  ./daybreak-run logits small.daybreak --inputs inputs.json --output logits.safetensors --threads 8 \
    && ./daybreak-run compare logits.safetensors --expected expected.safetensors --atol 1e-4
} 2>&1 | tee "$out"
