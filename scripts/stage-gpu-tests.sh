#!/usr/bin/env bash
# Here (no GPU): builds and copies into device/ (ignored by git) what the GPU
# machine runs, so it needs no MLIR there: daybreak-run, the runtime-only
# tests, and for each DeepSeek-V3.2, gpt-oss and Kimi Linear fixture a CUDA artifact (f32
# and fp8 caches), a CPU artifact (fp8 cache; f32 too for the bf16 test's
# fixtures) and the fixture's inputs and expected logits; for gpt-oss also a CUDA artifact (f32 cache) per MXFP4
# route besides the default (online, converting in no step on CUDA), and the online route converting in
# prefill, for Kimi Linear one prefilling in
# steps of 7 tokens. Then, through the device tool: run scripts/gpu-tests.sh, carry
# ["device"] (or, where the artifacts are split, the two calls it prints).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
build=${DAYBREAK_BUILD_DIR:-build}
# DAYBREAK_DEVICE_DIR: where to stage (default device/, replaced whole).
dir=${DAYBREAK_DEVICE_DIR:-device}
rm -rf "$dir" && mkdir -p "$dir"
cp "$build/bin/daybreak-run" "$build/test/runtime/DaybreakRuntimeTests" \
  "$build/test/runtime/DaybreakStepTests" "$build/test/runtime/DaybreakSessionTests" \
  "$build/test/runtime/DaybreakKernelBench" "$dir/"
# The session tests' artifact: 2 slots sharing 2 cache pages of 64 tokens.
mkdir -p "$dir/session"
"$build/bin/daybreak-compile" test/fixtures/deepseek_v32_small -o "$dir/session/cuda.daybreak" --target=cuda \
  --max-seq-len=128 --max-batch=2 --max-tokens=64 --kv-cache-tokens=128 > /dev/null 2>&1
# The same whose prefill computes 2 rows of logits (lm.gather_rows).
"$build/bin/daybreak-compile" test/fixtures/deepseek_v32_small -o "$dir/session/cuda_rows.daybreak" --target=cuda \
  --max-seq-len=128 --max-batch=2 --max-tokens=64 --kv-cache-tokens=128 --max-logit-rows=2 > /dev/null 2>&1
# A model larger than any GPU (caches of about 280 GB): refused at load.
"$build/bin/daybreak-compile" test/fixtures/deepseek_v32_small -o "$dir/session/huge.daybreak" --target=cuda \
  --max-seq-len=2560 --max-batch=400000 --max-tokens=64 > /dev/null 2>&1
# One fixture's artifacts; two fixtures at a time (each compile is one
# thread).
stage_fixture() {
  local fixture=$1 name src limits
  name=$(basename "$fixture")
  src=test/fixtures/$fixture
  # gpt_oss_small batches three sequences.
  limits="--max-seq-len=64 --max-batch=2 --max-tokens=64"
  [ "$name" = gpt_oss_small ] && limits="--max-seq-len=64 --max-batch=3 --max-tokens=96"
  # kimi_linear_long: three sequences, prompts up to 150 tokens.
  [ "$name" = kimi_linear_long ] && limits="--max-seq-len=160 --max-batch=3 --max-tokens=256"
  # glm5_next_pools: prompts of 150 and 77 tokens.
  [ "$name" = glm5_next_pools ] && limits="--max-seq-len=160 --max-batch=2 --max-tokens=256"
  mkdir -p "$dir/$name"
  cp "$src/inputs.json" "$src/expected.safetensors" "$dir/$name/"
  "$build/bin/daybreak-compile" "$src" -o "$dir/$name/cuda_f32.daybreak" --target=cuda $limits --kv-cache-dtype=f32 > /dev/null 2>&1
  "$build/bin/daybreak-compile" "$src" -o "$dir/$name/cuda_fp8.daybreak" --target=cuda $limits --kv-cache-dtype=fp8 > /dev/null 2>&1
  "$build/bin/daybreak-compile" "$src" -o "$dir/$name/cpu_fp8.daybreak" --target=cpu $limits --kv-cache-dtype=fp8 > /dev/null 2>&1
  case $name in *_separated*)
    # The bf16 test's fixtures: the CPU samples the tolerance there.
    "$build/bin/daybreak-compile" "$src" -o "$dir/$name/cpu_f32.daybreak" --target=cpu $limits \
      --kv-cache-dtype=f32 > /dev/null 2>&1 ;;
  esac
  case $name in gpt_oss*)
    for route in direct offline; do
      "$build/bin/daybreak-compile" "$src" -o "$dir/$name/cuda_f32_$route.daybreak" --target=cuda $limits \
        --kv-cache-dtype=f32 --mxfp4-route=$route > /dev/null 2>&1
    done
    # The online route converting in prefill (CUDA's default converts in
    # no step).
    "$build/bin/daybreak-compile" "$src" -o "$dir/$name/cuda_f32_online-convert.daybreak" --target=cuda \
      $limits --kv-cache-dtype=f32 --mxfp4-route=online --mxfp4-convert-in-prefill > /dev/null 2>&1 ;;
  kimi_linear* | glm5_next*)
    # Prefill in steps of 7 tokens: the KDA state (and GLM's incomplete
    # pools) carried between steps.
    "$build/bin/daybreak-compile" "$src" -o "$dir/$name/cuda_f32_chunk7.daybreak" --target=cuda \
      ${limits% --max-tokens=*} --max-tokens=7 --kv-cache-dtype=f32 > /dev/null 2>&1 ;;
  esac
}
pids=()
for fixture in shared/deepseek_v32 shared/deepseek_v32_fp8 deepseek_v32_small deepseek_v32_small_fp8 \
    deepseek_v32_separated deepseek_v32_separated_fp8 deepseek_v32_stacked_fp8 \
    shared/gpt_oss_mxfp4 gpt_oss_small shared/kimi_linear kimi_linear_long \
    shared/glm5_next shared/glm5_next_fp8 glm5_next_pools glm5_next_small_pool glm5_next_separated; do
  while [ "$(jobs -rp | wc -l)" -ge "${DAYBREAK_STAGE_JOBS:-2}" ]; do sleep 1; done
  stage_fixture "$fixture" &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid"
done
# The device tool carries at most 64 MiB with the working tree: binaries
# stripped and xz-compressed, the artifacts in one xz'd tar (they share
# their kernel code, which the one stream stores once; gpu-tests.sh unpacks
# both).
strip "$dir"/daybreak-run "$dir"/Daybreak*
xz -T2 -6 "$dir"/daybreak-run "$dir"/Daybreak*
(cd "$dir" && find . -name '*.daybreak' | sort | tar cf - -T - | xz -T2 -9 > artifacts.tar.xz &&
  find . -name '*.daybreak' -delete)
# libprotobuf, which the GPU machine lacks (gpu-tests.sh unpacks it and puts
# $dir on the loader path).
protobuf=$(ldd "$build/bin/daybreak-compile" | awk '/libprotobuf/ {print $3}')
[ -n "$protobuf" ] && xz -T2 -9 -c "$protobuf" > "$dir/$(basename "$protobuf").xz"
# What $dir and the tracked tree leave of a call's 64 MiB (less 1.5 MB for
# the tree to grow) holds the artifacts' tail, artifacts.part-2; their head,
# if any, goes to $dir-art1/part-1, which an earlier call copies to the
# machine (device/STAGED-AT says how).
rm -rf "$dir-art1"
tree=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
rest=$(du -sb --exclude=artifacts.tar.xz "$dir" | cut -f1)
room=$((64 * 1024 * 1024 - 1500000 - tree - rest))
total=$(stat -c %s "$dir/artifacts.tar.xz")
if [ "$total" -gt "$room" ]; then
  mkdir -p "$dir-art1"
  head -c $((total - room)) "$dir/artifacts.tar.xz" > "$dir-art1/part-1"
  tail -c "$room" "$dir/artifacts.tar.xz" > "$dir/artifacts.part-2"
  cat "$dir-art1/part-1" "$dir/artifacts.part-2" | cmp - "$dir/artifacts.tar.xz"
  rm "$dir/artifacts.tar.xz"
  echo "artifacts in two parts: carry $dir-art1 and copy its part-1 to the machine (e.g. /tmp/keep)," \
    "then carry $dir and run DAYBREAK_ARTIFACTS_PART1=/tmp/keep DAYBREAK_DEVICE_DIR=$dir bash scripts/gpu-tests.sh"
fi
du -sh "$dir" ${dir}-art1 2> /dev/null
