#!/usr/bin/env bash
# Builds the fuzz targets (test/fuzz, README.md there) with clang-22 and
# libFuzzer under ASan and UBSan into build-fuzz, and runs one target, or
# every target in turn, for a time:
#
#   scripts/fuzz.sh [target|all] [seconds]      (default: all, 600 s each)
#
# Targets: safetensors safetensors-index hf-config artifact inputs-json
# run-options compile-options. A run mutates a scratch corpus,
# build-fuzz/corpus/<target> (kept, so a later run starts from what earlier
# ones found), seeded from the committed test/fuzz/corpus/<target> and
# test/fuzz/regressions/<target>, which stay as they are. A crash, hang,
# leak or sanitizer report goes to build-fuzz/crashes/<target>/ and makes
# the script fail; each run's log, ending with libFuzzer's final stats, is
# build-fuzz/logs/<target>.log. DAYBREAK_FUZZ_PARALLEL=2 runs two targets
# at a time (all).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DAYBREAK_FUZZ_BUILD_DIR:-build-fuzz}
target=${1:-all}
seconds=${2:-600}

# target -> binary, -max_len (the seeds' size with room to grow), dictionary.
declare -A binary=(
  [safetensors]=SafetensorsFuzzer [safetensors-index]=SafetensorsIndexFuzzer
  [hf-config]=HfConfigFuzzer [artifact]=ArtifactFuzzer
  [inputs-json]=InputsJsonFuzzer [run-options]=RunOptionsFuzzer
  [compile-options]=CompileOptionsFuzzer)
declare -A maxlen=(
  [safetensors]=4096 [safetensors-index]=2048 [hf-config]=8192
  [artifact]=131072 [inputs-json]=8192 [run-options]=512
  [compile-options]=256)
declare -A dict=(
  [safetensors]=test/fuzz/safetensors.dict
  [safetensors-index]=test/fuzz/safetensors-index.dict
  [hf-config]=test/fuzz/hf-config.dict
  [inputs-json]=test/fuzz/inputs-json.dict
  [run-options]=test/fuzz/run-options.dict)
targets=(safetensors safetensors-index hf-config artifact inputs-json
  run-options compile-options)
if [ "$target" != all ] && [ -z "${binary[$target]:-}" ]; then
  echo "fuzz.sh: unknown target '$target' (targets: ${targets[*]} or all)" >&2
  exit 2
fi

# Debian's LLVM 22: clang, and its runtime libraries (libFuzzer, sanitizers).
scripts/install-deps.sh clang-22 libclang-rt-22-dev

if [ ! -f "$build/build.ninja" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC=clang-22 CXX=clang++-22 cmake -G Ninja -S . -B "$build" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLLVM_USE_LINKER=lld \
    -DDAYBREAK_FUZZ=ON "${launcher[@]}"
fi
if [ "$target" = all ]; then
  ninja -C "$build" -j"${DAYBREAK_JOBS:-2}" daybreak-fuzzers
else
  ninja -C "$build" -j"${DAYBREAK_JOBS:-2}" "${binary[$target]}"
fi

# Runs target $1 for $seconds; fails if libFuzzer found something.
run() {
  local t=$1 corpus="$build/corpus/$1" crashes="$build/crashes/$1"
  local log="$build/logs/$1.log"
  mkdir -p "$corpus" "$crashes" "$build/logs"
  local options=(-max_total_time="$seconds" -max_len="${maxlen[$t]}"
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    -artifact_prefix="$crashes/")
  [ -n "${dict[$t]:-}" ] && options+=(-dict="${dict[$t]}")
  echo "fuzz.sh: $t for $seconds s (log: $log)"
  local status=0
  # New inputs go to the first directory, the scratch corpus.
  "$build/bin/${binary[$t]}" "${options[@]}" "$corpus" \
    "test/fuzz/corpus/$t" "test/fuzz/regressions/$t" >"$log" 2>&1 ||
    status=$?
  # The last coverage line and the final stats.
  { grep -E '^#[0-9]+' "$log" | tail -1; grep '^stat::' "$log"; } |
    sed "s/^/  $t: /"
  echo "  $t: corpus $(find "$corpus" -type f | wc -l) files," \
    "$(du -sk "$corpus" | cut -f1) KiB"
  if [ "$status" -ne 0 ]; then
    echo "fuzz.sh: $t failed (exit $status); see $log and $crashes" >&2
    return 1
  fi
}

if [ "$target" != all ]; then
  run "$target"
  exit
fi
parallel=${DAYBREAK_FUZZ_PARALLEL:-1}
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  rm -f "$build/logs/$t.failed"
  { run "$t" || touch "$build/logs/$t.failed"; } &
  running=$((running + 1))
done
wait
failed=0
for t in "${targets[@]}"; do
  [ ! -e "$build/logs/$t.failed" ] || failed=1
done
exit "$failed"
