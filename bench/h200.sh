#!/usr/bin/env bash
# On the H200 machine (through the device tool; bench/stage-h200.sh prepares
# what it carries): the benchmark of bench/README.md, one step per call so
# that each stays inside a call's time limit. Steps, in order:
#
#   unpack     decompress the carried toolchain parts into device/toolchain
#              and check that the tools load and the GPU and PyTorch are there
#   prepare    write the benchmark checkpoint (bench/generate_checkpoint.py),
#              then compile
#   generate   only write the checkpoint (prepare without the compile)
#   compile    compile it for the GPU with daybreak-compile (once per route)
#   memory     device memory of the loaded model against the checkpoint
#   daybreak   daybreak-run bench over the artifact -> $OUT/daybreak.json
#   baselines  transformers eager and torch.compile over the same checkpoint
#              -> $OUT/baseline_eager.json, $OUT/baseline_compile.json
#              (MODES="eager" or "compile": one of them, e.g. one per call)
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

# The benchmark model, by FAMILY:
# - deepseek_v32 (default): DeepSeek-V3.2 at its real dimensions (hidden 7168,
#   128 heads, MLA, indexer 64 x 128 with top-2048, vocabulary 129280), one
#   dense layer and one MoE layer of EXPERTS routed experts of the real shape
#   (top-8 + 1 shared). Runs 1-2 (2026-11-29) used 64, since weights were fp32
#   on the device then; with weights held as stored, the real 256 fit.
# - gpt_oss: gpt-oss-120b at its real dimensions (hidden 2880, 64 query and 8
#   KV heads of 64, 128 MXFP4 experts top-4, vocabulary 201088), LAYERS layers
#   (default 2: one sliding-window layer, one full), compiled once per MXFP4
#   route in ROUTES; each route gets its own artifact and results. PRESET=small
#   (generate_checkpoint.py's) tries the steps on a tiny model.
# - kimi_linear: Kimi-Linear-48B-A3B at its real dimensions (hidden 2304, KDA
#   32 heads x 128 with short conv 4, NoPE MLA 32 heads with kv_lora 512, 256
#   bf16 experts top-8 + 1 shared, vocabulary 163840), LAYERS layers (default
#   4: KDA, KDA, KDA, MLA; layer 0 a dense MLP, the rest MoE; 12.0 GiB), bf16
#   as the hub has it (no MXFP4 routes). EXPERTS, if set, fewer routed
#   experts of the same shape. The transformers baseline runs its torch KDA
#   and conv code (baseline.py keeps fla and causal_conv1d out). PRESET=small
#   tries the steps on the shared kimi_linear fixture's dimensions.
# - glm5_next: GLM-5.3-Flash at its real dimensions (hidden 4096, KDA 64
#   heads x 128 with the bounded forget gate, NoPE MLA 64 heads with kv_lora
#   512 and a DSA indexer 32 x 128 over pools of 4 tokens, top-2048, 4 mHC
#   streams, 288 FP8 experts top-8 + 1 shared, vocabulary 154880), LAYERS
#   layers (default 4: KDA, KDA, KDA, DSA; layer 0 a dense MLP, the rest MoE;
#   23.8 GiB, FP8 as the hub has it), no vision tower. EXPERTS as for
#   kimi_linear. Cases: decode B 1, 8, 64 at CONTEXTS (default 8192,32768;
#   CONTEXTS=8192,32768,131072 adds 128K: the artifact's --max-seq-len follows
#   the largest), prefill 8K and 32K (PRESET=small: 1K and 3K, its limit
#   being 4096 positions). The transformers baseline needs transformers
#   5.24, the version its loader was checked with (this machine has 5.17,
#   whose glm5_next was never checked): the wheels carried in device/wheels
#   (bench/README.md, "The H200 run") are installed without network into
#   device/pyglm, which PYTHONPATH puts first for the baseline only.
#   PRESET=small tries the steps on the shared glm5_next_fp8 fixture's
#   dimensions.
family=${FAMILY:-deepseek_v32}
experts=${EXPERTS:-256}
ckpt=$work/ckpt-$family
# DeepSeek: LAYERS layers (default 2), the first dense, the rest MoE of
# EXPERTS experts; CONTEXTS (default 1024,8192,32768) and PREFILLS (default
# 1024,8192); MAX_TOKENS (default 8192) the prefill step's limit, e.g.
# MAX_TOKENS=32768 PREFILLS=1024,8192,32768 for the issue's 32K prefill. The
# artifact's --max-seq-len follows the largest context or prefill (+ 256
# for the token each decode step adds and the bench's fill). The limits are
# read by the compile step; the cases by daybreak and baselines, so a later
# call may bench a subset of the compiled contexts (CONTEXTS=...) and keep
# its results apart with RUN_TAG (a suffix of the result files' names).
contexts=${CONTEXTS:-1024,8192,32768}
prefills=${PREFILLS:-1024,8192}
longest=$(tr , '\n' <<< "$contexts,$prefills" | sort -n | tail -1)
limits="--max-seq-len=$((longest + 256)) --max-batch=64 --max-tokens=${MAX_TOKENS:-8192}"
cases="--batch 1,8,64 --context $contexts --prefill $prefills"
if [ "$family" = glm5_next ]; then
  if [ "${PRESET:-real}" = small ]; then
    # The fixture's max_position_embeddings is 4096.
    contexts=${CONTEXTS:-1024,3072} prefills=1024,3072
  else
    contexts=${CONTEXTS:-8192,32768} prefills=8192,32768
  fi
  # Room for the largest context, the token each decode step adds and the
  # bench's fill, as for the others (32768 + 256).
  longest=$(tr , '\n' <<< "$contexts,$prefills" | sort -n | tail -1)
  limits="--max-seq-len=$((longest + 256)) --max-batch=64 --max-tokens=8192"
  cases="--batch 1,8,64 --context $contexts --prefill $prefills"
fi
if [ "$family" = gpt_oss ]; then
  # online: on CUDA no step converts by default (the warpgroup GEMM reads
  # the packed experts). online-convert: the online route converting in
  # prefill (--mxfp4-convert-in-prefill), its prefills (and B = 1 at 1K)
  # only. online-every: converting in decode too
  # (--mxfp4-convert-in-decode), timed at 1K only, to show what that costs.
  # online-overlap: the overlapped conversion (--mxfp4-overlap), its
  # prefills (and B = 1 at 1K) only, to time it against online-convert in
  # the same lease.
  routes=${ROUTES:-online direct offline online-every}
else
  routes=default
fi
# route_flags ROUTE: daybreak-compile's flags for a route.
route_flags() {
  case $1 in
  default) ;;
  online-convert) echo "--mxfp4-route=online --mxfp4-convert-in-prefill" ;;
  online-every)
    echo "--mxfp4-route=online --mxfp4-convert-in-prefill --mxfp4-convert-in-decode"
    ;;
  online-overlap)
    echo "--mxfp4-route=online --mxfp4-convert-in-prefill --mxfp4-overlap"
    ;;
  *) echo "--mxfp4-route=$1" ;;
  esac
}
# route_cases ROUTE: the bench cases of a route.
route_cases() {
  if [ "$1" = online-every ]; then
    echo "--batch 1,8,64 --context 1024 --prefill 1024"
  elif [ "$1" = online-overlap ] || [ "$1" = online-convert ]; then
    echo "--batch 1 --context 1024 --prefill $prefills"
  else
    echo "$cases"
  fi
}
# artifact ROUTE: the artifact compiled for a route (the plain name for DeepSeek).
# ARTIFACT_DIR (default device/work): where artifacts are written, e.g.
# /dev/shm/daybreak when the checkpoint and its artifact together exceed the
# machine's disk (DeepSeek with LAYERS=4: 2 x 36 GiB on 64 GiB).
adir=${ARTIFACT_DIR:-$work}
mkdir -p "$adir"
artifact() { if [ "$1" = default ]; then echo "$adir/model.daybreak"; else echo "$adir/model-$1.daybreak"; fi; }
# suffix ROUTE: what the route's result files add to their names.
# ATTENTION=tensor-cores: daybreak-run's dense attention at prefill and its
# sparse MLA on the tensor cores (--attention=tensor-cores); its results get
# the suffix -tc.
# PRECISION=bf16 or fp8: daybreak-run --precision=... (matmul inputs rounded
# to bf16, or FP8 for 128 x 128-block FP8 weights; the warpgroup and FP8
# GEMMs, the tensor-core attention paths and indexer); results get the
# suffix -bf16 or -fp8.
run_flags="${ATTENTION:+--attention=$ATTENTION} ${PRECISION:+--precision=$PRECISION}"
tag=${ATTENTION:+-tc}${PRECISION:+-$PRECISION}${RUN_TAG:+-$RUN_TAG}
suffix() { if [ "$1" = default ]; then echo "$tag"; else echo "-$1$tag"; fi; }

# glm_transformers: transformers >= 5.24 (Glm5NextForConditionalGeneration)
# for the GLM baseline, from the wheels carried in device/wheels (no network
# here): installed once with --no-deps into device/pyglm, which is put first on
# PYTHONPATH (the system's torch, tokenizers and the rest stay as they are).
glm_transformers() {
  local site=$PWD/device/pyglm
  if ! ls device/wheels/transformers-*.whl > /dev/null 2>&1 &&
    [ ! -d "$site/transformers" ]; then
    echo "h200.sh: FAMILY=glm5_next needs transformers >= 5.24 for its baseline, and" \
      "device/wheels/ has no transformers wheel: carry device/wheels (bench/README.md, The H200 run)" >&2
    exit 1
  fi
  if ls device/wheels/*.whl > /dev/null 2>&1; then
    if python3 -m pip --version > /dev/null 2>&1; then
      python3 -m pip install --quiet --no-index --no-deps --upgrade --target "$site" device/wheels/*.whl
    else # pure-Python wheels: unpacking them is installing them
      python3 -c 'import sys, zipfile
for w in sys.argv[2:]:
    zipfile.ZipFile(w).extractall(sys.argv[1])' "$site" device/wheels/*.whl
    fi
  fi
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  python3 -c 'import sys, torch, transformers
from transformers import Glm5NextForConditionalGeneration
print("glm5_next baseline: transformers", transformers.__version__, "from", transformers.__file__,
      "; torch", torch.__version__)' || {
    echo "h200.sh: transformers from device/pyglm does not import (see above); the carried wheels" \
      "may need newer dependencies than this machine has" >&2
    exit 1
  }
}

for step in "$@"; do
  echo "== $step ($(date -u +%T))"
  case $step in
  unpack)
    # Each file is written beside its target and renamed over it, so a
    # library this very unpacking has loaded (python's lzma loads
    # liblzma.so.5 from $tc once an earlier call unpacked it) is replaced,
    # never rewritten in place.
    # A library split in halves (NAME.xz.part-1 in device/toolchain-a1,
    # NAME.xz.part-2 in -a2: stage-h200.sh) waits in $tc for its other half,
    # then is joined and decompressed into NAME.
    for part in device/toolchain-a device/toolchain-a1 device/toolchain-a2 \
      device/toolchain-b device/toolchain-b1 device/toolchain-b2 \
      device/toolchain-c; do
      [ -d "$part" ] || continue
      for f in "$part"/*; do
        case $f in
        *.xz.part-[12])
          cp "$f" "$tc/$(basename "$f")"
          whole=$tc/$(basename "${f%.part-[12]}")
          if [ -f "$whole.part-1" ] && [ -f "$whole.part-2" ]; then
            target=${whole%.xz}
            cat "$whole.part-1" "$whole.part-2" | python3 -c 'import lzma, shutil, sys
shutil.copyfileobj(lzma.open(sys.stdin.buffer), open(sys.argv[1], "wb"), 1 << 24)' \
              "$target.part"
            mv -f "$target.part" "$target"
            rm -f "$whole.part-1" "$whole.part-2"
          fi ;;
        *.xz) target=$tc/$(basename "$f" .xz)
          python3 -c 'import lzma, shutil, sys
shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"), 1 << 24)' \
            "$f" "$target.part"
          mv -f "$target.part" "$target" ;;
        *) cp "$f" "$tc/$(basename "$f").part"
          mv -f "$tc/$(basename "$f").part" "$tc/$(basename "$f")" ;;
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
    df -h . /dev/shm | tail -2
    free -g | head -2
    nproc
    python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)
from transformers.models.deepseek_v32 import modeling_deepseek_v32 as m; print("deepseek_v32:", m.__file__)
from transformers.models.gpt_oss import modeling_gpt_oss as g; print("gpt_oss:", g.__file__)
import importlib.util
try:
    from transformers.models.kimi_linear import configuration_kimi_linear as k; print("kimi_linear:", k.__file__)
except ImportError as e:
    print("kimi_linear: not in this transformers:", e)
try:
    from transformers.models.glm5_next import configuration_glm5_next as z; print("glm5_next:", z.__file__)
except ImportError as e:
    print("glm5_next: not in this transformers (FAMILY=glm5_next installs device/wheels):", e)
for p in ("fla", "causal_conv1d", "kernels"):
    print(p, "installed" if importlib.util.find_spec(p) else "not installed")' || true
    ;;
  prepare | generate)
    if [ "$family" = gpt_oss ]; then
      python3 bench/generate_checkpoint.py --family gpt_oss --preset "${PRESET:-real}" \
        --layers "${LAYERS:-2}" --out "$ckpt" --force
    elif [ "$family" = kimi_linear ] || [ "$family" = glm5_next ]; then
      python3 bench/generate_checkpoint.py --family "$family" --preset "${PRESET:-real}" \
        --layers "${LAYERS:-4}" ${EXPERTS:+--experts "$EXPERTS"} --out "$ckpt" --force
    else
      python3 bench/generate_checkpoint.py --preset real --layers "${LAYERS:-2}" \
        --dense-layers 1 --experts "$experts" --out "$ckpt" --force
    fi
    du -sh "$ckpt"
    [ "$step" = generate ] && continue
    ;&
  compile)
    for route in $routes; do
      /usr/bin/time -v "$tc/daybreak-compile" "$ckpt" -o "$(artifact "$route")" \
        --target=cuda $limits --kv-cache-dtype=fp8 $(route_flags "$route") 2>&1 |
        grep -E "Elapsed|Maximum resident|error|mxfp4 experts" || true
      "$tc/daybreak-run" inspect "$(artifact "$route")" |
        tee "$out/inspect$(suffix "$route").txt" | head -40
    done
    ;;
  memory)
    # Device memory against the checkpoint: the memory plan's weights (as
    # stored), arena and caches, and what cuMemGetInfo saw the load take.
    echo "checkpoint: $(du -sb "$ckpt" | cut -f1) bytes on disk"
    for route in $routes; do
      grep -E "^memory|weights |mxfp4 experts" "$out/inspect$(suffix "$route").txt" || true
      "$tc/daybreak-run" generate "$(artifact "$route")" --prompt-ids 1,17,42,7 \
        --max-new-tokens 4 2>&1 | tee "$out/memory$(suffix "$route").txt"
    done
    ;;
  daybreak)
    for route in $routes; do
      "$tc/daybreak-run" bench "$(artifact "$route")" $(route_cases "$route") $run_flags --iterations 10 \
        --prefill-iterations 2 --max-case-seconds 10 \
        --json "$out/daybreak$(suffix "$route").json" 2>&1 |
        tee "$out/daybreak$(suffix "$route").log"
    done
    ;;
  baselines)
    if [ "$family" = glm5_next ]; then
      glm_transformers
    fi
    for mode in ${MODES:-eager compile}; do
      python3 bench/baseline.py --checkpoint "$ckpt" --mode $mode $cases \
        --warmup 2 --iters 10 --case-timeout 30 \
        --out "$out/baseline_$mode${RUN_TAG:+-$RUN_TAG}.json" 2>&1 | tee "$out/baseline_$mode${RUN_TAG:+-$RUN_TAG}.log"
    done
    ;;
  report)
    for route in $routes; do
      # The route's results, whole or split over calls (RUN_TAG).
      runs=()
      for f in "$out/daybreak$(suffix "$route")"{,-*}.json; do
        [ -f "$f" ] && runs+=("$f")
      done
      python3 bench/report.py --daybreak "${runs[@]}" \
        $(for f in "$out"/baseline_*.json; do [ -f "$f" ] && echo --baseline "$f"; done) \
        --markdown "$out/report$(suffix "$route").md" --plot "$out/decode$(suffix "$route").png"
    done
    ;;
  *)
    echo "unknown step '$step' (unpack, prepare, generate, compile, memory, daybreak, baselines, report)" >&2
    exit 2
    ;;
  esac
done
