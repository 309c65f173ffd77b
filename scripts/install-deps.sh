#!/usr/bin/env bash
# Installs everything Daybreak needs to build and test on Debian 12, idempotently.
# LLVM/MLIR 22 come from bookworm-security; the rest is plain Debian 12.
# Extra packages named as arguments are installed with them (scripts/fuzz.sh
# asks for clang-22 and libclang-rt-22-dev).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache git python3
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libprotobuf-dev protobuf-compiler
  libgtest-dev
  nlohmann-json3-dev
  libxxhash-dev
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
