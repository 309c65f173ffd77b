#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs every test:
# lit (dialect round trips, verifier diagnostics, tools) and GoogleTest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
ninja -C "${DAYBREAK_BUILD_DIR:-build}" check-daybreak
