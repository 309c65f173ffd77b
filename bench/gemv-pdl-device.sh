#!/usr/bin/env bash
# There (the GPU machine, from the repository root, with the folder below
# carried): every CUDA kernel test (TensorCoreGemv, StoredWeightMatmul and
# ProgrammaticGemvInGraph among them), then the decode GEMV benchmark with
# the decode-step graphs (each GEMV after the norm that writes its x, with
# and without programmatic dependent launch). Writes $OUT/gemv-*.txt.
# Here, first:
#   ninja -C build DaybreakRuntimeTests DaybreakKernelBench
#   mkdir -p device/gemv-pdl && cp build/test/runtime/DaybreakRuntimeTests \
#     build/test/runtime/DaybreakKernelBench bench/gemv-pdl-device.sh \
#     device/gemv-pdl/
# then through the device tool:
#   DAYBREAK_DEVICE_DIR=device/gemv-pdl bash device/gemv-pdl/gemv-pdl-device.sh
# carrying ["device/gemv-pdl"].
set -uo pipefail
cd "${DAYBREAK_DEVICE_DIR:-device/gemv-pdl}" # from the repository root
out=${OUT:-.}
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem \
  --format=csv > "$out/gemv-machine.txt" 2>&1
cat "$out/gemv-machine.txt"
echo "== every CUDA kernel test"
timeout 150 ./DaybreakRuntimeTests --gtest_filter='CudaKernelsTest.*' \
  > "$out/gemv-tests.txt" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED) |FAILED|PDL|worst error (inf|[1-9][0-9.]*e-0[0-4])" \
  "$out/gemv-tests.txt" | head -40
echo "== decode GEMV benchmark"
timeout 200 ./DaybreakKernelBench 50 gemv > "$out/gemv-bench.txt" 2>&1 || status=1
grep -E "MISMATCH|DaybreakKernelBench:" "$out/gemv-bench.txt" | head
sed -n '/^Decode GEMVs at m=1 in a decode step/,$p' "$out/gemv-bench.txt"
echo "== exit status $status"
exit $status
