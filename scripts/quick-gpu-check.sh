#!/usr/bin/env bash
# On the GPU machine, from the repository root, in one device call: what
# scripts/stage-quick-check.sh staged in device/quick. Writes into $OUT:
#   test.txt      DaybreakRuntimeTests --gtest_filter=$FILTER (if FILTER);
#   fixtures.txt  both gpt-oss fixtures through daybreak-run on the online,
#                 direct and offline routes (f32 caches) against transformers'
#                 logits at 1e-4, prefill and decode; with FIXTURE_ENV (e.g.
#                 DAYBREAK_CUDA_MXFP4_PAIR_BLOCKS=1) once more under it
#                 (FIXTURES=0 skips them);
#   bench-new.txt DaybreakKernelBench's runs in BENCH (comma-separated
#                 argument lists, e.g. "20 attention,20 mxfp4"), and
#                 bench-old.txt the same from the staged OldKernelBench, if any;
#   mv.txt        bench/mxfp4_variants.cu built here and run (if PROBE=1;
#                 it builds beside the tests).
# TEST_TIMEOUT (default 200) bounds the tests, in seconds. The exit status
# is non-zero if the tests or a fixture comparison failed.
set -uo pipefail
root=$PWD
q=/tmp/quick-check
out=${OUT:-$root/quick-check-out}
mkdir -p "$q" "$out"
status=0
for f in device/quick/*.xz; do xz -dc "$f" > "$q/$(basename "$f" .xz)"; done
chmod +x "$q"/Daybreak* "$q"/daybreak-run "$q"/OldKernelBench 2> /dev/null
export LD_LIBRARY_PATH=$q${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
echo "staged at $(cat device/quick/STAGED-AT 2> /dev/null)" | tee -a "$out/gpu.txt"
if [ "${PROBE:-0}" = 1 ]; then
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -o "$q/mv" \
    bench/mxfp4_variants.cu > "$out/mv-build.txt" 2>&1 &
fi
if [ -n "${FILTER:-}" ]; then
  timeout "${TEST_TIMEOUT:-200}" "$q/DaybreakRuntimeTests" --gtest_filter="$FILTER" \
    > "$out/test.txt" 2>&1 || status=1
  tail -3 "$out/test.txt"
fi
(cd "$q" && tar xJf "$root/device/quick/artifacts.tar.xz")
for setting in "" ${FIXTURE_ENV:-}; do
  [ "${FIXTURES:-1}" = 0 ] && break
  for name in gpt_oss_mxfp4 gpt_oss_small; do
    for artifact in cuda_f32 cuda_f32_direct cuda_f32_offline; do
      echo "== $name $artifact${setting:+ ($setting)}"
      env $setting timeout 60 "$q/daybreak-run" logits "$q/$name/$artifact.daybreak" --device=cuda \
        --inputs "device/quick/$name/inputs.json" --output "$q/$name/$artifact.safetensors" &&
        timeout 30 "$q/daybreak-run" compare "$q/$name/$artifact.safetensors" \
          --expected "device/quick/$name/expected.safetensors" --atol 1e-4 ||
        echo "FAIL $name $artifact${setting:+ ($setting)}"
    done
  done
done > "$out/fixtures.txt" 2>&1
if [ "${FIXTURES:-1}" != 0 ]; then
  grep -q "^FAIL" "$out/fixtures.txt" && status=1
  echo "fixtures: $(grep -c '^==' "$out/fixtures.txt") runs, $(grep -c '^FAIL' "$out/fixtures.txt") failed"
fi
IFS=, read -ra runs <<< "${BENCH:-}"
for run in "${runs[@]}"; do
  timeout 120 "$q/DaybreakKernelBench" $run >> "$out/bench-new.txt" 2>&1
  [ -x "$q/OldKernelBench" ] && timeout 120 "$q/OldKernelBench" $run >> "$out/bench-old.txt" 2>&1
done
if [ "${PROBE:-0}" = 1 ]; then
  wait
  timeout 150 "$q/mv" > "$out/mv.txt" 2>&1 || echo "probe exit $?" >> "$out/mv.txt"
  grep -E "FAIL|exit" "$out/mv.txt"
fi
echo "quick-gpu-check: status $status" | tee -a "$out/gpu.txt"
exit $status
