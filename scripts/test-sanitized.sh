#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine, builds every target with
# AddressSanitizer and UndefinedBehaviorSanitizer into build-asan, and runs
# the whole test suite there (lit and GoogleTest, as scripts/test.sh does).
#
# LeakSanitizer needs no build of its own: on x86-64 Linux it is part of
# AddressSanitizer and runs at every process's exit (detect_leaks=1 is its
# default, set here anyway), so the same run checks leaks. Any report fails
# the process that made it, and so its test: UBSan does not recover
# (-fno-sanitize-recover=all), ASan stops at the first error.
#
#   scripts/test-sanitized.sh             build and run every test
#   scripts/test-sanitized.sh unit        only the GoogleTest cases
#
# The code the compiler generates for the CPU target and the CUDA kernels
# (nvcc) are not instrumented; the host code that calls them is.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
build=${DAYBREAK_ASAN_BUILD_DIR:-build-asan}
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
if [ ! -f "$build/build.ninja" ]; then
  # -O1 -g1: a third faster to build than the release build's -O2, with
  # line numbers in the reports.
  cmake -G Ninja -S . -B "$build" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS="$sanitize" \
    -DCMAKE_EXE_LINKER_FLAGS="$sanitize" \
    -DCMAKE_SHARED_LINKER_FLAGS="$sanitize" \
    "${launcher[@]}"
fi
# allow_user_poisoning=0: LLVM's headers poison and unpoison the slabs of
# the BumpPtrAllocator when compiled with ASan, and libMLIR.so (Debian's,
# not instrumented) then reads memory our code poisoned: reports in MLIR's
# own allocator, not in Daybreak's code.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allow_user_poisoning=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [ "${1:-all}" = unit ]; then
  # Every GoogleTest case ctest knows; lit (one ctest entry) left out.
  ninja -C "$build" -j"${DAYBREAK_JOBS:-2}" DaybreakUnitTests DaybreakRuntimeTests \
    DaybreakStepTests DaybreakSessionTests DaybreakCommunicatorTests
  (cd "$build" && ctest --output-on-failure -j2 -E '^lit$')
else
  ninja -C "$build" -j"${DAYBREAK_JOBS:-2}" check-daybreak
fi
