#!/usr/bin/env bash
# Here (no GPU): stages a short GPU check for one device call, smaller than
# scripts/stage-gpu-tests.sh's bundle (about 15 MB against 48): the kernel
# tests, the kernel bench and daybreak-run (stripped, xz), libprotobuf, and
# the gpt-oss fixtures' f32-cache CUDA artifacts on the three MXFP4 routes
# with their inputs and expected logits. With DAYBREAK_OLD_BENCH (another
# build's DaybreakKernelBench, e.g. main's) the check times both benches in
# the same call. Then, through the device tool, carry ["device/quick"] and
# run, e.g.:
#   FILTER='CudaKernelsTest.DenseAttention' BENCH='20 attention' \
#     PROBE=1 bash scripts/quick-gpu-check.sh
# (scripts/quick-gpu-check.sh says what each variable does).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
build=${DAYBREAK_BUILD_DIR:-build}
dir=device/quick
rm -rf "$dir" && mkdir -p "$dir"
cp "$build/bin/daybreak-run" "$build/test/runtime/DaybreakRuntimeTests" \
  "$build/test/runtime/DaybreakKernelBench" "$dir/"
if [ -n "${DAYBREAK_OLD_BENCH:-}" ]; then
  cp "$DAYBREAK_OLD_BENCH" "$dir/OldKernelBench"
fi
for name in gpt_oss_mxfp4 gpt_oss_small; do
  src=test/fixtures/$name
  [ -d "$src" ] || src=test/fixtures/shared/$name
  limits="--max-seq-len=64 --max-batch=2 --max-tokens=64"
  [ "$name" = gpt_oss_small ] && limits="--max-seq-len=64 --max-batch=3 --max-tokens=96"
  mkdir -p "$dir/$name"
  cp "$src/inputs.json" "$src/expected.safetensors" "$dir/$name/"
  for route in online direct offline; do
    suffix=$([ $route = online ] && echo "" || echo "_$route")
    "$build/bin/daybreak-compile" "$src" -o "$dir/$name/cuda_f32$suffix.daybreak" --target=cuda \
      $limits --kv-cache-dtype=f32 --mxfp4-route=$route > /dev/null
  done
done
strip "$dir"/daybreak-run "$dir"/Daybreak* "$dir"/OldKernelBench 2> /dev/null || true
xz -T2 -6 "$dir"/daybreak-run "$dir"/Daybreak* $(ls "$dir"/OldKernelBench 2> /dev/null)
(cd "$dir" && find . -name '*.daybreak' | sort | tar cf - -T - | xz -T2 -9 > artifacts.tar.xz &&
  find . -name '*.daybreak' -delete)
protobuf=$(ldd "$build/bin/daybreak-compile" | awk '/libprotobuf/ {print $3}')
[ -n "$protobuf" ] && xz -T2 -9 -c "$protobuf" > "$dir/$(basename "$protobuf").xz"
git rev-parse HEAD > "$dir/STAGED-AT"
du -sh "$dir"
