#!/usr/bin/env bash
# Starts N processes of a command as `torchrun --nproc-per-node N --no-python`
# does: each with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
# (a port free now) in its environment. Waits for every one; fails if any
# failed. Usage: launch.sh N command args...
set -u
n=$1
shift
export WORLD_SIZE=$n MASTER_ADDR=127.0.0.1
MASTER_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export MASTER_PORT
pids=()
for ((r = n - 1; r >= 0; r--)); do
  RANK=$r LOCAL_RANK=$r "$@" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do
  wait "$p" || status=1
done
exit $status
