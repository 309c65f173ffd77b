#!/usr/bin/env bash
# Configures (once) and builds Daybreak into ${DAYBREAK_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DAYBREAK_BUILD_DIR:-build}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
linker=()
command -v ld.lld >/dev/null && linker=(-DLLVM_USE_LINKER=lld)
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S . -B "$build" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DCMAKE_BUILD_TYPE=Release \
    -DDAYBREAK_WERROR=ON \
    "${launcher[@]}" "${linker[@]}"
fi
ninja -C "$build" -j"${DAYBREAK_JOBS:-2}"
