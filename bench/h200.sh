#!/usr/bin/env bash
# On the H200 machine (through the device tool; bench/stage-h200.sh prepares
# what it carries): the benchmark of bench/README.md, one step per call so
# that each stays inside a call's time limit. Steps, in order:
#
#   unpack     decompress the carried toolchain parts into device/toolchain
#              and check that the tools load and the GPU and PyTorch are there
#   prepare    write the benchmark checkpoint (bench/generate_checkpoint.py)
#              and compile it for the GPU with daybreak-compile
#   memory     device memory of the loaded model against the checkpoint
#   daybreak   daybreak-run bench over the artifact -> $OUT/daybreak.json
#   baselines  transformers eager and torch.compile over the same checkpoint
#              -> $OUT/baseline_eager.json, $OUT/baseline_compile.json
#   report     bench/report.py -> $OUT/report.md, $OUT/decode.png
#
# Everything it writes besides $OUT stays in device/ (ignored), which the
# device tool keeps between calls while the machine is warm.
set -euo pipefail
cd "$(dirname "$0")/.."
tc=$PWD/device/toolchain
work=$PWD/device/work
out=${OUT:-$PWD/device/out}
mkdir -p "$tc" "$work" "$out"
export LD_LIBRARY_PATH=$tc:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1

# The benchmark model: DeepSeek-V3.2 at its real dimensions (hidden 7168, 128
# heads, MLA, indexer 64 x 128 with top-2048, vocabulary 129280), one dense
# layer and one MoE layer of EXPERTS routed experts of the real shape (top-8
# + 1 shared). Runs 1-2 (2026-11-29) used 64, since weights were fp32 on the
# device then; with weights held as stored, the real 256 fit (EXPERTS=256).
experts=${EXPERTS:-256}
ckpt=$work/ckpt
artifact=$work/model.daybreak
limits="--max-seq-len=33024 --max-batch=64 --max-tokens=8192"
cases="--batch 1,8,64 --context 1024,8192,32768 --prefill 1024,8192"

for step in "$@"; do
  echo "== $step ($(date -u +%T))"
  case $step in
  unpack)
    for part in device/toolchain-a device/toolchain-b; do
      [ -d "$part" ] || continue
      for f in "$part"/*; do
        case $f in
        *.xz) python3 -c 'import lzma, shutil, sys
shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"), 1 << 24)' \
          "$f" "$tc/$(basename "$f" .xz)" ;;
        *) cp "$f" "$tc/" ;;
        esac
      done
    done
    chmod +x "$tc"/daybreak-* 2> /dev/null || true
    ls "$tc"
    if [ -x "$tc/daybreak-compile" ]; then
      ldd "$tc/daybreak-compile" | grep "not found" || echo "daybreak-compile: all libraries found"
      "$tc/daybreak-run" devices
    fi
    nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.max.sm --format=csv || true
    df -h . | tail -1
    free -g | head -2
    nproc
    python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)
from transformers.models.deepseek_v32 import modeling_deepseek_v32 as m; print("deepseek_v32:", m.__file__)' || true
    ;;
  prepare)
    python3 bench/generate_checkpoint.py --preset real --layers 2 \
      --dense-layers 1 --experts "$experts" --out "$ckpt" --force
    du -sh "$ckpt"
    /usr/bin/time -v "$tc/daybreak-compile" "$ckpt" -o "$artifact" \
      --target=cuda $limits --kv-cache-dtype=fp8 2>&1 |
      grep -E "Elapsed|Maximum resident|error" || true
    "$tc/daybreak-run" inspect "$artifact" | tee "$out/inspect.txt" | head -40
    ;;
  memory)
    # Device memory against the checkpoint: the memory plan's weights (as
    # stored), arena and caches, and what cuMemGetInfo saw the load take.
    echo "checkpoint: $(du -sb "$ckpt" | cut -f1) bytes on disk"
    grep -E "^memory|weights " "$out/inspect.txt" || true
    "$tc/daybreak-run" generate "$artifact" --prompt-ids 1,17,42,7 \
      --max-new-tokens 4 2>&1 | tee "$out/memory.txt"
    ;;
  daybreak)
    "$tc/daybreak-run" bench "$artifact" $cases --iterations 10 \
      --prefill-iterations 2 --max-case-seconds 10 \
      --json "$out/daybreak.json" 2>&1 | tee "$out/daybreak.log"
    ;;
  baselines)
    for mode in eager compile; do
      python3 bench/baseline.py --checkpoint "$ckpt" --mode $mode $cases \
        --warmup 2 --iters 10 --case-timeout 30 \
        --out "$out/baseline_$mode.json" 2>&1 | tee "$out/baseline_$mode.log"
    done
    ;;
  report)
    python3 bench/report.py --daybreak "$out/daybreak.json" \
      $(for f in "$out"/baseline_*.json; do [ -f "$f" ] && echo --baseline "$f"; done) \
      --markdown "$out/report.md" --plot "$out/decode.png"
    ;;
  *)
    echo "unknown step '$step' (unpack, prepare, memory, daybreak, baselines, report)" >&2
    exit 2
    ;;
  esac
done
