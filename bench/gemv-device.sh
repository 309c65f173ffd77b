#!/usr/bin/env bash
# There (the GPU machine, from the repository root, with the folder below
# carried): the CUDA kernel tests of the stored-weight matmuls, the decode
# GEMV benchmark, the tensor-core GEMVs' SASS and an ncu profile of three
# of them, then every CUDA kernel test. Writes $OUT/gemv-*.txt.
# Here, first:
#   ninja -C build DaybreakRuntimeTests DaybreakKernelBench
#   mkdir -p device/gemv && cp build/test/runtime/DaybreakRuntimeTests \
#     build/test/runtime/DaybreakKernelBench \
#     build/runtime/devices/cuda/CudaKernels.cubin device/gemv/
# then through the device tool: bash bench/gemv-device.sh, carry
# ["device/gemv"].
set -uo pipefail
cd "${DAYBREAK_DEVICE_DIR:-device/gemv}" # from the repository root
out=${OUT:-.}
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem \
  --format=csv > "$out/gemv-machine.txt" 2>&1
echo "== stored-weight and tensor-core GEMV tests"
timeout 100 ./DaybreakRuntimeTests \
  --gtest_filter='CudaKernelsTest.TensorCoreGemv:CudaKernelsTest.StoredWeight*' \
  > "$out/gemv-tests.txt" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED) |FAILED|worst error (inf|[1-9][0-9.]*e-0[0-4])" \
  "$out/gemv-tests.txt" | head -40
echo "== decode GEMV benchmark"
timeout 180 ./DaybreakKernelBench 50 gemv > "$out/gemv-bench.txt" 2>&1 || status=1
sed -n '/^Decode GEMVs as/,$p' "$out/gemv-bench.txt"
echo "== SASS of the tensor-core GEMVs"
{
  for f in daybreak_gemv_tc_e4m3_m1_t1 daybreak_gemv_tc_e4m3_m8_t2 \
           daybreak_gemv_tc_bf16_m8_t2; do
    cuobjdump -sass -fun "$f" CudaKernels.cubin > "sass-$f.txt" 2>&1
    echo "$f: $(grep -c 'HMMA' "sass-$f.txt") HMMA, $(grep -c 'F2FP' \
      "sass-$f.txt") F2FP, $(grep -c 'HADD2.F32' "sass-$f.txt") HADD2.F32, \
$(grep -c 'LDG' "sass-$f.txt") LDG, $(grep -c 'LDS' "sass-$f.txt") LDS, \
$(grep -c 'LDL\|STL' "sass-$f.txt") local"
  done
  cat sass-daybreak_gemv_tc_e4m3_m8_t2.txt
} > "$out/gemv-sass.txt" 2>&1
head -3 "$out/gemv-sass.txt"
echo "== ncu (three GEMVs)"
timeout 90 ncu --clock-control none --kernel-name regex:daybreak_gemv_tc \
  --section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active' \
  ./DaybreakKernelBench 1 gemv-profile > "$out/gemv-ncu.txt" 2>&1
grep -E "daybreak_gemv_tc|DRAM Throughput|Duration|SM Active Cycles|Elapsed Cycles|Achieved Occupancy" \
  "$out/gemv-ncu.txt" | head -40
echo "== every CUDA kernel test"
timeout 120 ./DaybreakRuntimeTests --gtest_filter='CudaKernelsTest.*' \
  --gtest_brief=1 > "$out/gemv-tests-all.txt" 2>&1 || status=1
tail -5 "$out/gemv-tests-all.txt"
echo "== exit status $status"
exit $status
