#!/usr/bin/env bash
# Here (no GPU): builds Daybreak and packs into device/ (ignored by git) what
# the H200 machine needs to compile and run a real-dimension checkpoint
# itself, since a real-dimension artifact (GBs) cannot travel to it and the
# machine has no MLIR: daybreak-compile and daybreak-run with the shared
# libraries of this Debian's LLVM/MLIR 22 they load (xz-compressed; the
# glibc, libstdc++ and CUDA libraries of the machine are used as they are).
# The libraries exceed what one device call carries (64 MiB with the
# working tree, itself ~39 MB), so they come in four parts:
#
#   device/toolchain-a1 the first half of libLLVM's xz (carry in the first call)
#   device/toolchain-a2 its second half
#   device/toolchain-b1 libMLIR
#   device/toolchain-b2 the other libraries but libz3
#   device/toolchain-c  libz3 and the two tools
#
# Then, through the device tool (bench/README.md, "The H200 run"):
#   run carry=["device/toolchain-a1"] bash bench/h200.sh unpack
#   run carry=["device/toolchain-a2"] bash bench/h200.sh unpack
#   run carry=["device/toolchain-b1"] bash bench/h200.sh unpack
#   run carry=["device/toolchain-b2"] bash bench/h200.sh unpack
#   run carry=["device/toolchain-c"]  bash bench/h200.sh unpack prepare
#   run                               bash bench/h200.sh daybreak
#   run                               bash bench/h200.sh baselines
#
# The same toolchain serves every family: FAMILY=gpt_oss or FAMILY=kimi_linear
# before each h200.sh step (bench/README.md, "The H200 run"), e.g.
#   run carry=["device/toolchain-c"]  FAMILY=kimi_linear bash bench/h200.sh unpack prepare
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh > /dev/null
build=${DAYBREAK_BUILD_DIR:-build}
rm -rf device/toolchain-a device/toolchain-a1 device/toolchain-a2 \
  device/toolchain-b device/toolchain-b1 device/toolchain-b2 device/toolchain-c
mkdir -p device/toolchain-a device/toolchain-a1 device/toolchain-a2 \
  device/toolchain-b1 device/toolchain-b2 device/toolchain-c

pack() { # pack DIR LIBRARY...
  local dir=$1
  shift
  for lib in "$@"; do
    xz -T2 -9 -c "$lib" > "$dir/$(basename "$lib").xz"
  done
}
# Every shared library daybreak-compile loads, except the C/C++ runtime and
# CUDA's (the H200 machine's own are newer or the same toolkit).
mapfile -t libs < <(ldd "$build/bin/daybreak-compile" | awk '$3 ~ /^\// {print $3}' |
  grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|librt|libdl)\.so|/usr/local/cuda')
llvm=() mlir=() z3=() rest=()
for lib in "${libs[@]}"; do
  case "$lib" in
  */libLLVM.so*) llvm+=("$lib") ;;
  */libMLIR.so*) mlir+=("$lib") ;;
  */libz3.so*) z3+=("$lib") ;;
  *) rest+=("$lib") ;;
  esac
done
pack device/toolchain-a "${llvm[@]}"
# libLLVM's xz (27 MB) in two halves, each carried on its own.
for f in device/toolchain-a/*.xz; do
  half=$((($(stat -c %s "$f") + 1) / 2))
  head -c "$half" "$f" > "device/toolchain-a1/$(basename "$f").part-1"
  tail -c +"$((half + 1))" "$f" > "device/toolchain-a2/$(basename "$f").part-2"
done
rm -rf device/toolchain-a
# libMLIR's xz (16 MB) alone: with the working tree (48 MB) it just fits a
# carry.
pack device/toolchain-b1 "${mlir[@]}"
pack device/toolchain-b2 "${rest[@]}"
pack device/toolchain-c "${z3[@]}" "$build/bin/daybreak-compile" \
  "$build/bin/daybreak-run"
du -sh device/toolchain-a1 device/toolchain-a2 device/toolchain-b1 \
  device/toolchain-b2 \
  device/toolchain-c
