#!/usr/bin/env python3
r"""PyTorch (Hugging Face transformers) baseline for Daybreak's benchmark.

Loads a checkpoint in the hub format (as written by bench/generate_checkpoint.py, possibly sharded) into
transformers as a plain bf16 model, eager attention, and times it on one GPU. Four families:

  * deepseek_v32 (DeepseekV32ForCausalLM): FP8 e4m3 projection weights with 128x128 float32
    `weight_scale_inv` block scales, dequantized here (W = W8 * scale_inv[i // 128, j // 128]), per-expert
    routed weights packed as transformers' conversion mapping packs them;
  * gpt_oss (GptOssForCausalLM): MXFP4 experts (`*_blocks` two E2M1 codes a byte, low nibble first, and
    `*_scales` E8M0), dequantized here exactly (W = FP4[code] * 2^(scale - 127)) and transposed to
    transformers' [experts, in, out]; everything else as stored;
  * kimi_linear (KimiLinearForCausalLM): bf16 as stored (A_log, dt_bias, e_score_correction_bias float32), loaded
    by transformers' own from_pretrained (its hub conversion: q/k/v_conv1d concatenated, the forget gate's tensors
    moved, w1/w3/w2 experts packed), strict (an empty loading report). transformers 5.17 then holds every tensor in
    bf16, A_log, dt_bias and the router's weight and bias included (later versions keep dt_bias and the router in
    float32); the log names the float32 ones. Kimi Linear is run on transformers' torch
    code: before its modeling module is imported, `fla` and `causal_conv1d` are made unimportable (sys.modules
    entries of None), so KDA runs as transformers' chunked torch algorithm (chunks of 64, fp32) in prefill and its
    per-token recurrence in decode, and the short convolution as F.conv1d; the script checks that these functions
    are the torch ones and says so in its output and JSON ("implementation"). The MLA layers cache the compressed
    latent ([B, 1, C, kv_lora_rank] and the shared [B, 1, C, qk_rope_head_dim] key part) and expand it through
    kv_b_proj for every cached token at every step; KDA layers hold a conv state and a [B, heads, Dk, Dv] fp32
    recurrent state per sequence, whatever the context.
  * glm5_next (Glm5NextForConditionalGeneration, transformers >= 5.24): the hub FP8 layout (MLA projections, dense
    MLP, shared and routed experts FP8 e4m3 with 128x128 `weight_scale_inv`; KDA, indexer, router, kv_b_proj, mHC,
    embeddings and head bf16 or float32) dequantized here like DeepSeek's and placed as transformers' conversion
    mapping places it (forget-gate tensors moved, q/k/v_conv1d concatenated, experts packed), strict for the text
    model; the float32 modules transformers keeps (router, conv1d, dt_bias, A_log, mHC base and scale) kept float32.
    transformers' FP8 loader would need accelerate; loading a plain (bf16) checkpoint goes the same way. The vision
    tower, which transformers always builds, keeps its random initialisation when the checkpoint has none
    (bench/generate_checkpoint.py writes none; it is never run on text). KDA runs on transformers' torch code as for
    Kimi Linear (fla and causal_conv1d blocked). The DSA layers cache the latent ([B, 1, C, kv_lora_rank]) and per
    token indexer rows [B, C, 2 x index_head_dim + 1] from which every step recomputes all pooled keys, scores every
    pool and attends through a dense [B, heads, 1, C] mask of the selected tokens, expanding every cached latent
    through kv_b_proj (64 heads x 512 values a token at the real dimensions: large contexts and batches run out of
    memory, recorded as skipped cases).

Cases:

  * decode (B, C): one decode step (one new token for each of B sequences) with a KV cache that already
    holds C tokens per sequence;
  * prefill P: one sequence of P tokens from an empty cache;
  * probes: device-to-device copy bandwidth and bf16 GEMM rate on the same GPU.

A case that runs out of memory, raises, or would take longer than --case-timeout is recorded as skipped
with the reason, and the run goes on. The JSON (schema "daybreak-baseline/1") is rewritten after every case,
so an interrupted run still leaves the cases done so far.

    python3 bench/baseline.py --checkpoint DIR --mode eager|compile --batch 1,8,64 \
        --context 1024,8192,32768 --prefill 1024,8192 --warmup 3 --iters 10 --case-timeout 120 \
        --out baseline_eager.json

Checking the loader against a golden fixture (float32, transformers' own logits in expected.safetensors):

    python3 bench/baseline.py --check-fixture test/fixtures/deepseek_v32_small_fp8 --dtype float32 --device cpu
    python3 bench/baseline.py --check-fixture test/fixtures/gpt_oss_small --dtype float32 --device cpu
    python3 bench/baseline.py --check-fixture test/fixtures/shared/kimi_linear --dtype float32 --device cpu
    python3 bench/baseline.py --check-fixture test/fixtures/shared/glm5_next_fp8 --dtype float32 --device cpu

--device cpu exists only to test this script on a machine without a GPU (timings use time.perf_counter
there and the probes use smaller sizes). Needs torch, transformers >= 5 (with DeepseekV32ForCausalLM and
GptOssForCausalLM; KimiLinearForCausalLM for kimi_linear, which 5.17 has; Glm5NextForConditionalGeneration for
glm5_next, which 5.24 has) and safetensors.
"""

import argparse
import gc
import importlib.util
import inspect
import json
import math
import os
import platform
import re
import statistics
import sys
import time

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file
from transformers import AutoConfig, DeepseekV32ForCausalLM, DynamicCache, GptOssForCausalLM

# The cache for a decode case is made by prefilling at most this many tokens of one sequence and tiling them.
FILL_CHUNK = 512
COPY_PROBE_BYTES = {"cuda": 2 << 30, "cpu": 256 << 20}
GEMM_PROBE_SIZE = {"cuda": 8192, "cpu": 1024}
FIXTURE_TOLERANCE = 1e-4  # the fixtures' suggested bound for a float32 implementation (test/fixtures/README.md)

DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}
DTYPE_LABEL = {torch.bfloat16: "bf16", torch.float32: "fp32"}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------------
EXPERT_RE = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
LAYER_RE = re.compile(r"^model\.(?:language_model\.)?layers\.(\d+)\.")
MODELS = {"deepseek_v32": DeepseekV32ForCausalLM, "gpt_oss": GptOssForCausalLM}  # kimi_linear, glm5_next: own loaders
# Families with KDA layers (per-sequence conv and recurrent state next to token caches).
LINEAR_FAMILIES = ("kimi_linear", "glm5_next")
# Packages whose kernels transformers' Kimi Linear and GLM-5.3 would prefer to their torch code (hub_kernels'
# use_kernel_func_from_hub_with_fallback), and the functions they wrap that way.
KIMI_BLOCKED_PACKAGES = ("fla", "causal_conv1d")
KIMI_TORCH_FUNCTIONS = ("chunk_kimi_delta_attention", "recurrent_kimi_delta_attention", "causal_conv1d_fn",
                        "causal_conv1d_update")
# The modeling module and class of each KDA family, and the transformers that has it.
KDA_MODELS = {
    "kimi_linear": ("kimi_linear", "KimiLinearForCausalLM", "5.17"),
    "glm5_next": ("glm5_next", "Glm5NextForConditionalGeneration", "5.24"),
}
# GLM-5.3 hub names -> transformers' module names (its conversion_mapping.py entry "glm5_next"); the per-expert
# and per-q/k/v tensors are packed by load_glm5_next_weights.
GLM_RENAMES = [
    (re.compile(r"\.self_attn\.(f_a_proj|f_b_proj|dt_bias|A_log)"), r".self_attn.forget_gate.\1"),
    (re.compile(r"\.hc_(attn|ffn)_(fn|base|scale)$"), r".\1_hc.\2"),
]
GLM_CONV_RE = re.compile(r"^(.*\.self_attn)\.([qkv])_conv1d\.weight$")
# E2M1 (models.md 3.1): codes 0-7 positive, 8-15 their negatives.
FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def checkpoint_files(folder: str) -> dict:
    """Tensor name -> safetensors file, for a single-file or an index-sharded checkpoint."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        return {name: os.path.join(folder, fn) for name, fn in weight_map.items()}
    path = os.path.join(folder, "model.safetensors")
    with safe_open(path, framework="pt") as f:
        return {name: path for name in f.keys()}


def tensor_reader(files: dict, device: torch.device):
    """name -> the tensor on `device`, each safetensors file opened once."""
    handles = {}

    def read(name):
        path = files[name]
        if path not in handles:
            handles[path] = safe_open(path, framework="pt", device=str(device))
        return handles[path].get_tensor(name)

    return read


def dequantize(w8: torch.Tensor, scale_inv: torch.Tensor, block: list) -> torch.Tensor:
    """DeepSeek's block FP8: W[i, j] = W8[i, j] * scale_inv[i // bi, j // bj]; edge blocks may be partial."""
    rows, cols = w8.shape
    br, bc = block
    if tuple(scale_inv.shape) != (math.ceil(rows / br), math.ceil(cols / bc)):
        raise ValueError(f"scale shape {tuple(scale_inv.shape)} does not match weight {tuple(w8.shape)}")
    scale = scale_inv.float().repeat_interleave(br, 0).repeat_interleave(bc, 1)[:rows, :cols]
    return w8.float() * scale


def dequantize_mxfp4(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """MXFP4 as the hub stores it: blocks uint8 [..., rows, K / 32, 16], scales uint8 [..., rows, K / 32] ->
    float32 [..., rows, K] with W[..., r, 32 g + 2 b] = FP4[lo(blocks[..., r, g, b])] * 2^(scales[..., r, g] - 127)
    and W[..., r, 32 g + 2 b + 1] from the high nibble (exact: every product is a float32)."""
    if tuple(scales.shape) != tuple(blocks.shape[:-1]) or blocks.shape[-1] != 16:
        raise ValueError(f"MXFP4 blocks {tuple(blocks.shape)} and scales {tuple(scales.shape)} do not match")
    lut = torch.tensor(FP4_VALUES, dtype=torch.float32, device=blocks.device)
    lo, hi = lut[(blocks & 0x0F).long()], lut[(blocks >> 4).long()]
    values = torch.stack([lo, hi], dim=-1).reshape(*blocks.shape[:-1], 32)
    values = values * torch.exp2(scales.float() - 127.0).unsqueeze(-1)
    return values.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32)


def build_model(folder: str, dtype: torch.dtype, device: torch.device, experts: str):
    """transformers' model class for the checkpoint's model_type (MODELS), from its config without the
    quantization_config (our loader dequantizes FP8 and MXFP4 weights, so no quantization integration may kick
    in), built directly on `device` in `dtype`. For DeepSeek, like from_pretrained(dtype=bf16),
    e_score_correction_bias stays float32 (transformers creates it as float32 and lists it in
    _keep_in_fp32_modules_strict)."""
    config = AutoConfig.from_pretrained(folder)
    if config.model_type not in MODELS:
        raise ValueError(f"{folder}: model_type {config.model_type!r} is not one of {sorted(MODELS)}")
    if getattr(config, "quantization_config", None) is not None:
        delattr(config, "quantization_config")
    old_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        # Parameters are allocated (and randomly initialised) on the target device, then overwritten.
        with torch.device(device):
            model = MODELS[config.model_type](config)
    finally:
        torch.set_default_dtype(old_dtype)
    model.eval()
    model.set_attn_implementation("eager")
    model.set_experts_implementation(experts)
    return model


def load_weights(model, folder: str, device: torch.device) -> None:
    if model.config.model_type == "gpt_oss":
        load_gpt_oss_weights(model, folder, device)
    else:
        load_deepseek_weights(model, folder, device)


def load_gpt_oss_weights(model, folder: str, device: torch.device) -> None:
    """Copy every checkpoint tensor into the model: MXFP4 experts (`<name>_blocks` + `<name>_scales`)
    dequantized one expert at a time and transposed from the hub's [out, in] to transformers' [in, out] rows
    (gate_up rows stay interleaved, as GptOssExperts reads them), everything else cast to the parameter's
    dtype. Strict: every model tensor written exactly once, every checkpoint tensor used."""
    files = checkpoint_files(folder)
    read = tensor_reader(files, device)

    target = model.state_dict()
    written = set()
    for name in sorted(files):
        if name.endswith("_scales"):
            if name[: -len("_scales")] + "_blocks" not in files:
                raise ValueError(f"{name} has no _blocks tensor")
            continue
        m = LAYER_RE.match(name)
        if m and int(m.group(1)) >= model.config.num_hidden_layers:
            raise ValueError(f"checkpoint tensor {name} is beyond num_hidden_layers")
        key = name[: -len("_blocks")] if name.endswith("_blocks") else name
        if key not in target:
            raise KeyError(f"checkpoint tensor {name} has no place in the model")
        if key in written:
            raise ValueError(f"{name} written twice")
        dst = target[key]
        if name.endswith("_blocks"):
            blocks, scales = read(name), read(key + "_scales")
            if blocks.dim() != 4 or tuple(dst.shape) != (blocks.shape[0], blocks.shape[2] * 32, blocks.shape[1]):
                raise ValueError(f"{name}: blocks {tuple(blocks.shape)} vs model {key} {tuple(dst.shape)}")
            for e in range(blocks.shape[0]):
                dst[e].copy_(dequantize_mxfp4(blocks[e], scales[e]).t().to(dst.dtype))
        else:
            t = read(name)
            if tuple(dst.shape) != tuple(t.shape):
                raise ValueError(f"{name}: checkpoint shape {tuple(t.shape)} vs model {tuple(dst.shape)}")
            dst.copy_(t.to(dst.dtype))
        written.add(key)
    missing = sorted(set(target) - written)
    if missing:
        raise ValueError(f"{len(missing)} model tensors not in the checkpoint, e.g. {missing[:5]}")


def load_deepseek_weights(model, folder: str, device: torch.device) -> None:
    """Copy every checkpoint tensor into the model: FP8 weights dequantized with their block scales, then cast
    to the parameter's dtype; per-expert weights packed the way transformers' conversion mapping does for
    deepseek_v32 (the "qwen2_moe" converters: MergeModulelist(dim=0) + Concatenate(dim=1)), i.e.
    experts.gate_up_proj[j] = cat(gate_j, up_j) along the output rows and experts.down_proj[j] = down_j.
    Streams tensor by tensor onto the device, so host memory stays small. Fails unless every model tensor
    is written exactly once and every checkpoint tensor is used (strict load)."""
    def place(name, target):
        if name not in target:
            raise KeyError(f"checkpoint tensor {name} has no place in the model")
        return target[name], (name,)

    target = model.state_dict()
    written, skipped_layers = copy_fp8_checkpoint(model.config.num_hidden_layers, folder, device, target, place)
    missing = [p for key, t in target.items() for p in model_pieces(key, t) if p not in written]
    if missing:
        raise ValueError(f"{len(missing)} model tensors not in the checkpoint, e.g. {missing[:5]}")
    if skipped_layers:
        log(f"ignored checkpoint layers beyond num_hidden_layers: {sorted(skipped_layers)}")


def copy_fp8_checkpoint(num_layers: int, folder: str, device: torch.device, target: dict, place) -> tuple:
    """Copies every checkpoint tensor of a layer below num_layers (or of no layer) into `target` (a state dict),
    FP8 weights dequantized with their block scales (the block size from config.json's quantization_config, which
    the model's config no longer has) and cast to the parameter's dtype: a routed expert's gate_proj / up_proj /
    down_proj into `experts.gate_up_proj[j]` (gate rows first) / `experts.down_proj[j]`, any other tensor where
    place(name, target) says, as (destination view, piece). Checks shapes and that no piece is written twice.
    Returns (the pieces written, the checkpoint layers skipped: the hub's MTP layer, or a truncated model)."""
    with open(os.path.join(folder, "config.json")) as f:
        block = (json.load(f).get("quantization_config") or {}).get("weight_block_size", [128, 128])
    files = checkpoint_files(folder)
    read = tensor_reader(files, device)
    written, skipped_layers = set(), set()
    for name in sorted(files):
        if name.endswith("_scale_inv"):
            continue
        m = LAYER_RE.match(name)
        if m and int(m.group(1)) >= num_layers:
            skipped_layers.add(int(m.group(1)))
            continue
        t = read(name)
        if name + "_scale_inv" in files:
            if t.dtype != torch.float8_e4m3fn:
                raise ValueError(f"{name} has a scale but dtype {t.dtype}")
            t = dequantize(t, read(name + "_scale_inv"), block)
        e = EXPERT_RE.match(name)
        if e:
            prefix, j, proj = e.group(1), int(e.group(2)), e.group(3)
            if proj == "down_proj":
                key, dst = f"{prefix}.down_proj", target[f"{prefix}.down_proj"][j]
            else:
                packed = target[f"{prefix}.gate_up_proj"][j]
                half = packed.shape[0] // 2
                key, dst = f"{prefix}.gate_up_proj", packed[:half] if proj == "gate_proj" else packed[half:]
            piece = (key, j, proj)
        else:
            dst, piece = place(name, target)
        if tuple(dst.shape) != tuple(t.shape):
            raise ValueError(f"{name}: checkpoint shape {tuple(t.shape)} vs model {tuple(dst.shape)}")
        if piece in written:
            raise ValueError(f"{name} written twice")
        dst.copy_(t.to(dst.dtype))
        written.add(piece)
    return written, skipped_layers


def model_pieces(key: str, t: torch.Tensor) -> list:
    """The pieces copy_fp8_checkpoint writes model tensor `key` in: one per expert and projection of the packed
    expert tensors, one per q/k/v of a concatenated KDA convolution (GLM-5.3), none for an empty tensor (the
    shared experts with n_shared_experts 0), else the whole tensor."""
    if key.endswith("experts.gate_up_proj"):
        return [(key, j, p) for j in range(t.shape[0]) for p in ("gate_proj", "up_proj")]
    if key.endswith("experts.down_proj"):
        return [(key, j, "down_proj") for j in range(t.shape[0])]
    if key.endswith("self_attn.conv1d.weight"):
        return [(key, q) for q in "qkv"]
    return [] if t.numel() == 0 else [(key,)]


def kda_model_class(family: str):
    """transformers' model class of a KDA family (KDA_MODELS: KimiLinearForCausalLM, Glm5NextForConditionalGeneration),
    its modeling module imported with `fla` and `causal_conv1d` unimportable so that every KDA and short-convolution
    function is transformers' torch code. Returns (class, description); exits with the reason when this
    transformers lacks the model or the check fails."""
    package, class_name, first_version = KDA_MODELS[family]
    module_name = f"transformers.models.{package}.modeling_{package}"
    installed = [p for p in KIMI_BLOCKED_PACKAGES
                 if sys.modules.get(p) is not None or importlib.util.find_spec(p) is not None]
    if module_name not in sys.modules:
        for p in KIMI_BLOCKED_PACKAGES:
            if sys.modules.get(p) is None:
                sys.modules[p] = None  # `import p` now raises ImportError: transformers takes its torch path
    try:
        km = importlib.import_module(module_name)
    except ImportError as exc:
        sys.exit(f"baseline: transformers {transformers.__version__} has no {family} model "
                 f"(import of {module_name} failed: {exc}); {family} needs a transformers with "
                 f"{class_name} ({first_version} has it)")
    missing = [n for n in (class_name,) + KIMI_TORCH_FUNCTIONS if not hasattr(km, n)]
    if missing:
        sys.exit(f"baseline: transformers {transformers.__version__}'s modeling_{package} lacks {missing}, which "
                 f"this script checks (written against {first_version} and 5.24)")
    kernels = []
    for name in KIMI_TORCH_FUNCTIONS:
        # use_kernel_func_from_hub_with_fallback's wrapper records whether it found another implementation.
        chosen = inspect.getclosurevars(getattr(km, name)).nonlocals.get("is_new_implementation")
        if chosen:
            kernels.append(name)
    loaded = [p for p in KIMI_BLOCKED_PACKAGES if sys.modules.get(p) is not None]
    if kernels or loaded:
        sys.exit(f"baseline: transformers' {family} would not run its torch code: {kernels or loaded} come from "
                 f"{loaded or 'an external package'} (was {module_name} imported before this check?)")
    note = ("KDA and short convolution on transformers' torch code (chunked KDA, chunks of 64, for prompts; "
            "the per-token recurrence and the conv-state update in decode): "
            + " and ".join(KIMI_BLOCKED_PACKAGES) + " blocked from import"
            + (f" (installed here: {', '.join(installed)})" if installed else " (neither installed)"))
    if importlib.util.find_spec("kernels") is not None:
        note += "; the `kernels` package is installed but unused (no use_kernels / kernelize)"
    return getattr(km, class_name), note


def load_kimi_linear(folder: str, dtype: torch.dtype, device: torch.device, experts: str):
    """KimiLinearForCausalLM.from_pretrained on the folder (transformers' own hub conversion), strict: any missing,
    unexpected or mismatched key or conversion error fails the load."""
    cls, note = kda_model_class("kimi_linear")
    log(note)
    model, info = cls.from_pretrained(folder, dtype=dtype, attn_implementation="eager",
                                      experts_implementation=experts, device_map=str(device),
                                      output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        raise ValueError(f"{folder}: from_pretrained reported loading problems: {bad}")
    model.eval()
    config = model.config
    if "full_attention" not in config.layer_types:
        raise ValueError(f"{folder}: no MLA (full attention) layer in {config.layer_types}; transformers' cache "
                         "takes the position from one, so the baseline needs at least 4 layers")
    kinds = ["kda" if t == "linear_attention" else "mla" for t in config.layer_types]
    fp32 = sorted({re.sub(r"^model\.layers\.\d+\.", "", n)
                   for n, t in list(model.named_parameters()) + list(model.named_buffers())
                   if t.dtype == torch.float32})
    log(f"layers {kinds}, mlp {list(config.mlp_layer_types)}"
        + (f"; float32 tensors: {fp32 or 'none'}" if dtype != torch.float32 else ""))
    model.baseline_implementation = note
    return model


def load_glm5_next(folder: str, dtype: torch.dtype, device: torch.device, experts: str):
    """Glm5NextForConditionalGeneration (the only GLM-5.3 model class transformers has) built from the folder's
    config without its quantization_config, on `device` in `dtype`, the modules transformers keeps in float32
    (_keep_in_fp32_modules_strict: router weight and bias, conv1d, dt_bias, A_log, mHC base and scale) in float32 as
    from_pretrained would, then filled by load_glm5_next_weights. The vision tower is built by transformers
    whatever the input (random weights when the checkpoint has none; never run on text)."""
    cls, note = kda_model_class("glm5_next")
    log(note)
    config = AutoConfig.from_pretrained(folder)
    if getattr(config, "quantization_config", None) is not None:
        delattr(config, "quantization_config")
    text = config.get_text_config()
    if "linear_attention" not in text.layer_types or all(t == "linear_attention" for t in text.layer_types):
        raise ValueError(f"{folder}: layer types {text.layer_types}: the baseline needs KDA and DSA layers "
                         "(transformers' cache takes the position from a DSA layer)")
    old_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = cls(config)
    finally:
        torch.set_default_dtype(old_dtype)
    keep_fp32 = re.compile("|".join(re.escape(m) for m in cls._keep_in_fp32_modules_strict or []) or "$^")
    with torch.no_grad():
        for name, p in model.named_parameters():
            want = torch.float32 if dtype != torch.float32 and keep_fp32.search(name) else dtype
            if p.dtype != want:
                p.data = p.data.to(want)
    model.eval()
    model.set_attn_implementation("eager")
    model.set_experts_implementation(experts)
    with torch.no_grad():
        load_glm5_next_weights(model, folder, device)
    kinds = ["kda" if t == "linear_attention" else f"dsa-{i}" for t, i in zip(text.layer_types, text.indexer_types)]
    fp32 = sorted({re.sub(r"^model\.language_model\.layers\.\d+\.", "", n)
                   for n, t in list(model.named_parameters()) + list(model.named_buffers())
                   if t.dtype == torch.float32 and n.startswith("model.language_model.")})
    log(f"layers {kinds}, mlp {list(text.mlp_layer_types)}"
        + (f"; float32 tensors: {fp32 or 'none'}" if dtype != torch.float32 else ""))
    model.baseline_implementation = note
    return model


def load_glm5_next_weights(model, folder: str, device: torch.device) -> None:
    """Copy every text-model checkpoint tensor into the model, as transformers' conversion mapping for glm5_next
    places it: FP8 weights dequantized with their block scales (W = W8 * scale_inv[i // 128, j // 128]) and cast to
    the parameter's dtype; `self_attn.{f_a_proj, f_b_proj, dt_bias, A_log}` under `self_attn.forget_gate.`,
    `hc_{attn,ffn}_{fn,base,scale}` as `{attn,ffn}_hc.{fn,base,scale}`, `{q,k,v}_conv1d` concatenated (q, k, v) into
    `conv1d`, per-expert `gate_proj` / `up_proj` into `experts.gate_up_proj[j]` (gate rows first) and `down_proj`
    into `experts.down_proj[j]`. Tensor by tensor onto the device. Strict for the text model and lm_head: every
    model tensor written exactly once (zero-element ones need not be), every checkpoint tensor used (the MTP
    layer, beyond num_hidden_layers, skipped); `model.visual.*` loaded when the checkpoint has it, else left as
    built (the tower is never run)."""
    def place(name, target):
        c = GLM_CONV_RE.match(name)
        if c:
            key = f"{c.group(1)}.conv1d.weight"
            third = target[key].shape[0] // 3
            return target[key].narrow(0, "qkv".index(c.group(2)) * third, third), (key, c.group(2))
        key = name
        for pattern, repl in GLM_RENAMES:
            key = pattern.sub(repl, key)
        if key not in target:
            raise KeyError(f"checkpoint tensor {name} ({key}) has no place in the model")
        return target[key], (key,)

    target = model.state_dict()
    written, skipped_layers = copy_fp8_checkpoint(model.config.get_text_config().num_hidden_layers, folder, device,
                                                  target, place)
    missing, visual = [], []
    for key, t in target.items():
        for part in model_pieces(key, t):
            if part not in written:
                (visual if key.startswith("model.visual.") else missing).append(part)
    if missing:
        raise ValueError(f"{len(missing)} model tensors not in the checkpoint, e.g. {missing[:5]}")
    if visual:
        log(f"vision tower: {len(visual)} of its tensors not in the checkpoint, left as transformers initialised "
            "them (text only: never run)")
    if skipped_layers:
        log(f"ignored checkpoint layers beyond num_hidden_layers: {sorted(skipped_layers)}")


def load_model(folder: str, dtype: torch.dtype, device: torch.device, experts: str):
    t0 = time.perf_counter()
    with open(os.path.join(folder, "config.json")) as f:
        model_type = json.load(f).get("model_type")
    if model_type == "kimi_linear":
        with torch.no_grad():
            model = load_kimi_linear(folder, dtype, device, experts)
    elif model_type == "glm5_next":
        model = load_glm5_next(folder, dtype, device, experts)
    else:
        model = build_model(folder, dtype, device, experts)
        with torch.no_grad():
            load_weights(model, folder, device)
    n = sum(p.numel() for p in model.parameters())
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    log(f"loaded {folder}: {model.config.get_text_config().num_hidden_layers} layers, {n:,} parameters, "
        f"{nbytes / 2**30:.2f} GiB in {DTYPE_LABEL[dtype]} on {device}, attention={model.config._attn_implementation}, "
        f"experts={model.config._experts_implementation}, {time.perf_counter() - t0:.1f} s")
    return model


# --------------------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------------------
class CaseTimeout(Exception):
    pass


def timed_ms(fn, device: torch.device) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def measure(fn, reset, device, warmup: int, iters: int, timeout_s: float, first_call_compiles: bool) -> list:
    """Times warmup + iters calls of fn (reset() after each, untimed) and returns the last iters times in ms.
    After each call the time still needed is projected from that call's duration; when the case would exceed
    timeout_s it stops with CaseTimeout. Under torch.compile one extra first call compiles; it is neither
    counted nor used for the projection, and the warm-up calls follow it."""
    total = warmup + iters + (1 if first_call_compiles else 0)
    times = []
    budget_start = time.perf_counter()
    for i in range(total):
        ms = timed_ms(fn, device)
        reset()
        times.append(ms)
        if i == 0 and first_call_compiles:
            log(f"  first call (compilation included): {ms / 1e3:.1f} s")
            budget_start = time.perf_counter()
            continue
        elapsed = time.perf_counter() - budget_start
        projected = elapsed + (total - i - 1) * ms / 1e3
        if projected > timeout_s:
            raise CaseTimeout(f"timeout: one call took {ms / 1e3:.2f} s, {total} calls would take ~{projected:.0f} s "
                              f"> --case-timeout {timeout_s:g} s")
    return times[-iters:]


def percentile(values: list, q: float) -> float:
    """Nearest-rank percentile (no interpolation: with 10 samples p90 is the 9th smallest)."""
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def is_compile_failure(exc: BaseException) -> bool:
    return type(exc).__module__.startswith(("torch._dynamo", "torch._inductor"))


def describe(exc: BaseException) -> str:
    if isinstance(exc, torch.OutOfMemoryError):
        return "out of memory: " + str(exc).strip().splitlines()[0][:300]
    if isinstance(exc, CaseTimeout):
        return str(exc)
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:500]}"


# --------------------------------------------------------------------------------------------------------
# Probes
# --------------------------------------------------------------------------------------------------------
def probe_copy_bandwidth(device: torch.device, repeats: int = 5) -> float:
    """Bytes read + written per second by one large device-to-device copy (best of `repeats`)."""
    nbytes = COPY_PROBE_BYTES[device.type]
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = min(timed_ms(lambda: dst.copy_(src), device) for _ in range(repeats))
    return 2 * nbytes / (best / 1e3)


def probe_gemm(device: torch.device, repeats: int = 5) -> float:
    """bf16 matmul n x n x n: 2 n^3 / time (best of `repeats`)."""
    n = GEMM_PROBE_SIZE[device.type]
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=g)
    torch.matmul(a, b)
    best = min(timed_ms(lambda: torch.matmul(a, b), device) for _ in range(repeats))
    return 2 * n**3 / (best / 1e3)


# --------------------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------------------
CACHE_FILL = {
    "deepseek_v32": (
        "transformers DynamicCache (one DynamicIndexedLayer per layer: MLA keys [B, heads, C, qk_nope+qk_rope] "
        "and values [B, heads, C, v_head_dim], expanded per head, plus the DSA indexer keys [B, C, "
        f"index_head_dim]); filled by an eager prefill of min(C, {FILL_CHUNK}) random tokens of one sequence whose "
        "keys, values and indexer keys are tiled along the sequence to C tokens and broadcast to the B sequences; "
        "each timed step feeds B random tokens at position C, and DynamicCache.crop(-1) takes the cache back to C "
        "tokens after every step (untimed)"),
    "gpt_oss": (
        "transformers DynamicCache (full-attention layers: DynamicLayer keys and values [B, kv_heads, C, "
        "head_dim]; sliding layers: DynamicSlidingWindowLayer holding the last sliding_window - 1 tokens); "
        f"filled by an eager prefill of min(C, {FILL_CHUNK}) random tokens of one sequence whose keys and values "
        "are tiled along the sequence to C tokens (full layers) or kept as the window the prefill left (sliding "
        "layers, their position count set to C), broadcast to the B sequences; each timed step feeds B random "
        "tokens at position C, and the layers' tensors and counters are put back after every step (untimed)"),
    "kimi_linear": (
        "transformers DynamicCache (MLA layers: DynamicLayer holding the compressed latent, keys = kv_a_layernorm'd "
        "c_kv [B, 1, C, kv_lora_rank] and values = the shared key part [B, 1, C, qk_rope_head_dim], expanded through "
        "kv_b_proj for every cached token at every step; KDA layers: LinearAttentionLayer with the conv state "
        "[B, 3 x heads x head_dim, kernel] and the fp32 recurrent state [B, heads, head_dim, head_dim], the same "
        f"size at any context); filled by an eager prefill of min(C, {FILL_CHUNK}) random tokens of one sequence "
        "whose MLA latents are tiled along the sequence to C tokens and whose KDA states (those the prefill left) "
        "are copied to the B sequences; each timed step feeds B random tokens at position C (the KDA layers take "
        "transformers' recurrent decode path), then the MLA layers are cropped back to C tokens and the KDA "
        "states, which a step updates in place, are copied back (untimed)"),
    "glm5_next": (
        "transformers DynamicCache (DSA layers: DynamicIndexedLayer holding the NoPE MLA latent, keys = "
        "kv_a_layernorm'd c_kv [B, 1, C, kv_lora_rank] and empty values [B, 1, C, 0], expanded through kv_b_proj for "
        "every cached token at every step, and the indexer rows [B, C, 2 x index_head_dim + 1] (key, pool gate, valid "
        "flag), from which the k-pool keys of every pool are recomputed at every step; KDA layers: "
        "LinearAttentionLayer with the conv state [B, 3 x heads x head_dim, kernel] and the fp32 recurrent state "
        "[B, heads, head_dim, head_dim]; mHC keeps no state); filled by an eager prefill of "
        f"min(C, {FILL_CHUNK}) random tokens of one sequence whose latents and indexer rows are tiled along the "
        "sequence to C tokens (whole pools) and whose KDA states are copied to the B sequences; each timed step feeds "
        "B random tokens at position C (KDA: transformers' recurrent decode path), then the DSA layers are cropped "
        "back to C tokens and the KDA states copied back (untimed)"),
}


def cache_arg(model) -> str:
    """The forward keyword of the cache: past_key_values (transformers 5.17), cache (later 5.x, where
    past_key_values is a deprecated alias)."""
    return "past_key_values" if "past_key_values" in inspect.signature(model.forward).parameters else "cache"


def is_linear_layer(layer) -> bool:
    """A linear-attention (KDA) cache layer: conv and recurrent states, no tokens."""
    return hasattr(layer, "recurrent_states") and hasattr(layer, "conv_states")


def linear_states(cache: DynamicCache) -> list:
    """Every KDA conv and recurrent state tensor of the cache (a decode step updates them in place)."""
    return [t for layer in cache.layers if is_linear_layer(layer)
            for states in (layer.conv_states, layer.recurrent_states) for t in states.values() if t is not None]


def tile(t: torch.Tensor, batch: int, length: int, dim: int) -> torch.Tensor:
    """[1, ..., n, ...] -> [batch, ..., length, ...] by repeating the n entries along dim."""
    shape = list(t.shape)
    shape[0], shape[dim] = batch, length
    out = t.new_empty(shape)
    n = t.shape[dim]
    for start in range(0, length, n):
        m = min(n, length - start)
        out.narrow(dim, start, m).copy_(t.narrow(dim, 0, m))  # broadcasts batch 1 -> batch
    return out


def filled_cache(model, batch: int, context: int, gen: torch.Generator, device: torch.device) -> DynamicCache:
    config = model.config
    chunk = min(context, FILL_CHUNK)
    ids = torch.randint(0, config.get_text_config().vocab_size, (1, chunk), generator=gen, device=device)
    cache = DynamicCache(config=config)
    model(input_ids=ids, use_cache=True, logits_to_keep=1, **{cache_arg(model): cache})
    if config.model_type in LINEAR_FAMILIES:
        if not any(is_linear_layer(layer) for layer in cache.layers):
            raise RuntimeError(f"transformers {transformers.__version__}: no cache layer with conv_states and "
                               "recurrent_states after a prefill; this script knows the KDA cache layout of 5.17 "
                               "to 5.24 (LinearAttentionLayer)")
        for layer in cache.layers:
            if is_linear_layer(layer):
                # The state after min(C, FILL_CHUNK) tokens for every sequence (its size does not depend on C).
                for states in (layer.conv_states, layer.recurrent_states):
                    for k, t in states.items():
                        if t is not None:
                            states[k] = t.expand(batch, *t.shape[1:]).contiguous()
            else:
                layer.keys = tile(layer.keys, batch, context + 1, dim=2)
                layer.values = tile(layer.values, batch, context + 1, dim=2)
                if getattr(layer, "indexer_keys", None) is not None:
                    # GLM-5.3's DSA layers: per token [key | pool gate | valid], pooled again at every step; the
                    # fill (512 tokens, a multiple of index_kpool) tiles into whole pools.
                    layer.indexer_keys = tile(layer.indexer_keys, batch, context + 1, dim=1)
                layer.crop(-1)  # as every timed step will start: a view cropped from C + 1 tokens (see below)
        check_cache(cache, batch, context)
        return cache
    if config.model_type == "gpt_oss":
        for layer in cache.layers:
            if hasattr(layer, "sliding_window"):
                # The window the prefill left ([1, kv_heads, min(chunk, sliding_window - 1), head_dim]): the last
                # tokens before position C as far as the next step's attention can tell (their values differ).
                length = layer.keys.shape[2]
                layer.keys = tile(layer.keys, batch, length, dim=2)
                layer.values = tile(layer.values, batch, length, dim=2)
                layer.cumulative_length = context
            else:
                layer.keys = tile(layer.keys, batch, context, dim=2)
                layer.values = tile(layer.values, batch, context, dim=2)
        check_cache(cache, batch, context)
        return cache
    for layer in cache.layers:
        layer.keys = tile(layer.keys, batch, context + 1, dim=2)
        layer.values = tile(layer.values, batch, context + 1, dim=2)
        layer.indexer_keys = tile(layer.indexer_keys, batch, context + 1, dim=1)
    # Every timed step starts from a cache cropped back from C + 1 tokens (a strided view); starting the first
    # one the same way keeps torch.compile from recompiling for the contiguous layout.
    cache.crop(-1)
    check_cache(cache, batch, context)
    return cache


def check_cache(cache: DynamicCache, batch: int, context: int) -> None:
    """Every layer holds `context` tokens of `batch` sequences: every tensor the attention (and DeepSeek's
    indexer) reads, or for a sliding-window layer its position count and a window of at most sliding_window - 1
    tokens."""
    for i, layer in enumerate(cache.layers):
        if is_linear_layer(layer):
            states = [layer.conv_states.get(0), layer.recurrent_states.get(0)]
            if not all(t is not None and t.shape[0] == batch for t in states) or not layer.has_previous_state[0]:
                raise RuntimeError(f"layer {i} (linear attention) state: "
                                   f"{[None if t is None else tuple(t.shape) for t in states]}, previous state "
                                   f"{layer.has_previous_state[0]}; wanted {batch} sequences")
            continue
        if hasattr(layer, "sliding_window"):
            ok = (layer.get_seq_length() == context and layer.keys.shape[0] == batch
                  and layer.keys.shape[2] == min(context, layer.sliding_window - 1))
        else:
            shapes = [layer.keys.shape[:3:2], layer.values.shape[:3:2]]
            if hasattr(layer, "indexer_keys"):
                shapes.append(layer.indexer_keys.shape[:2])
            ok = all(tuple(s) == (batch, context) for s in shapes)
        if not ok:
            raise RuntimeError(f"layer {i} cache: keys {tuple(layer.keys.shape)}, values {tuple(layer.values.shape)}"
                               f", {layer.get_seq_length()} tokens; wanted {batch} x {context} tokens")


def snapshot(cache: DynamicCache) -> list:
    """Each layer's attributes (tensors are replaced, never written in place, by a step's update)."""
    return [dict(vars(layer)) for layer in cache.layers]


def restore(cache: DynamicCache, saved: list) -> None:
    for layer, attributes in zip(cache.layers, saved):
        vars(layer).clear()
        vars(layer).update(attributes)


def decode_case(model, step, args, device, batch, context, gen) -> dict:
    cache = filled_cache(model, batch, context, gen, device)
    ids = torch.randint(0, model.config.get_text_config().vocab_size, (batch, 1), generator=gen, device=device)

    kw = cache_arg(model)

    def call():
        step(input_ids=ids, use_cache=True, **{kw: cache})

    model_type = model.config.model_type
    saved = snapshot(cache) if model_type == "gpt_oss" else None
    # Kimi Linear and GLM-5.3: the KDA states a step overwrites in place, with copies to put back.
    states = [(t, t.clone()) for t in linear_states(cache)] if model_type in LINEAR_FAMILIES else []

    def reset():
        # Drop the token the step appended. DeepSeek: crop the keys, values and indexer keys; cropping rather
        # than keeping the old tensors aside frees them as the step replaces them, so memory peaks as in
        # generate(): the whole cache once plus one layer's worth being concatenated. gpt-oss: a sliding
        # layer cannot be cropped once its window is full, so every layer's tensors and counters are put back
        # (the cache is small enough: 8 KV heads).
        # Kimi Linear and GLM-5.3: the MLA (DSA) layers are cropped, GLM's indexer rows with them (the KDA layers
        # cannot be: no record of their past states), and the KDA states copied back.
        if saved is not None:
            restore(cache, saved)
        elif states:
            for layer in cache.layers:
                if not is_linear_layer(layer):
                    layer.crop(-1)
            for t, copy in states:
                t.copy_(copy)
        else:
            cache.crop(-1)
        check_cache(cache, batch, context)

    times = measure(call, reset, device, args.warmup, args.iters, args.case_timeout, args.mode == "compile")
    median = statistics.median(times)
    return {"batch": batch, "context": context, "median_ms": median, "p90_ms": percentile(times, 90),
            "tokens_per_s": batch / (median / 1e3)}


def prefill_case(model, step, args, device, tokens, gen) -> dict:
    ids = torch.randint(0, model.config.get_text_config().vocab_size, (1, tokens), generator=gen, device=device)

    kw = cache_arg(model)

    def call():
        # Like generate()'s prefill: a fresh cache is written and only the last position's logits are made.
        step(input_ids=ids, use_cache=True, logits_to_keep=1, **{kw: DynamicCache(config=model.config)})

    times = measure(call, lambda: None, device, args.warmup, args.iters, args.case_timeout, args.mode == "compile")
    median = statistics.median(times)
    return {"tokens": tokens, "ms": median, "tokens_per_s": tokens / (median / 1e3)}


def run_benchmark(args, device: torch.device) -> None:
    dtype = DTYPES[args.dtype]
    result = {
        "schema": "daybreak-baseline/1",
        "baseline": f"transformers {'eager' if args.mode == 'eager' else 'torch.compile'} {DTYPE_LABEL[dtype]}",
        "gpu": (torch.cuda.get_device_name(device) if device.type == "cuda"
                else f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)"),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "checkpoint": args.checkpoint,
        "cache_fill": None,
        "probes": {},
        "settings": {"warmup": args.warmup, "iterations": args.iters},
        "decode": [],
        "prefill": [],
    }

    def save():
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        os.replace(tmp, args.out)

    log(f"{result['baseline']} on {result['gpu']}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}")
    copy_bw = probe_copy_bandwidth(device)
    flops = probe_gemm(device)
    free_memory(device)  # the probes' buffers, before the model is loaded
    result["probes"] = {"copy_bandwidth_bytes_per_s": copy_bw, "tensor_flops_per_s": flops}
    log(f"probes: copy {copy_bw / 1e12:.3f} TB/s (read + write), bf16 GEMM {flops / 1e12:.2f} TFLOP/s")
    save()

    torch.set_grad_enabled(False)
    model = load_model(args.checkpoint, dtype, device, args.experts)
    result["model_type"] = model.config.model_type
    result["cache_fill"] = CACHE_FILL[model.config.model_type]
    result["implementation"] = (f"attention={model.config._attn_implementation}, "
                                f"experts={model.config._experts_implementation}"
                                + (f"; {model.baseline_implementation}"
                                   if hasattr(model, "baseline_implementation") else ""))
    step = model.forward
    if args.mode == "compile":
        # Every case is a new shape; without a higher limit dynamo would silently fall back to eager after 8.
        torch._dynamo.config.recompile_limit = 64
        step = torch.compile(model.forward, mode=args.compile_mode)
        log(f"torch.compile(model.forward, mode={args.compile_mode!r}); compiles on each case's first call")
    gen = torch.Generator(device=device).manual_seed(0)

    cases = [("decode", b, c) for b in args.batch for c in args.context] + [("prefill", p, None) for p in args.prefill]
    compile_failure = None
    for kind, a, b in cases:
        head = {"batch": a, "context": b} if kind == "decode" else {"tokens": a}
        label = f"{kind} " + " ".join(f"{k}={v}" for k, v in head.items())
        if compile_failure is not None:
            entry = dict(head, skipped=compile_failure)
        else:
            log(f"{label}: start")
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            try:
                if kind == "decode":
                    entry = decode_case(model, step, args, device, a, b, gen)
                else:
                    entry = prefill_case(model, step, args, device, a, gen)
            except Exception as exc:  # one case must never end the run
                entry = dict(head, skipped=describe(exc))
                if args.mode == "compile" and is_compile_failure(exc):
                    compile_failure = "torch.compile failed: " + describe(exc)
                    entry["skipped"] = compile_failure
            free_memory(device)
        if "skipped" in entry:
            log(f"{label}: skipped: {entry['skipped']}")
        else:
            ms = entry.get("median_ms", entry.get("ms"))
            extra = f", p90 {entry['p90_ms']:.3f} ms" if "p90_ms" in entry else ""
            peak = (f", peak memory {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB"
                    if device.type == "cuda" else "")
            log(f"{label}: {ms:.3f} ms{extra}, {entry['tokens_per_s']:.1f} tokens/s{peak}")
        result[kind].append(entry)
        save()
    log(f"wrote {args.out}")


# --------------------------------------------------------------------------------------------------------
# Fixture check
# --------------------------------------------------------------------------------------------------------
def check_fixture(args, device: torch.device) -> int:
    """Loads a golden fixture with our loader and compares seq0's prefill logits (full forward) and decode
    logits (through transformers' cache, one token at a time) with the transformers logits stored in it."""
    dtype = DTYPES[args.dtype]
    torch.set_grad_enabled(False)
    model = load_model(args.check_fixture, dtype, device, args.experts)
    with open(os.path.join(args.check_fixture, "inputs.json")) as f:
        seq = json.load(f)["sequences"][0]
    expected = load_file(os.path.join(args.check_fixture, "expected.safetensors"))
    prompt = torch.tensor([seq["prompt_ids"]], device=device)

    logits = model(input_ids=prompt, use_cache=False).logits[0].float().cpu()
    prefill_diff = float((logits - expected["seq0.prefill_logits"]).abs().max())

    cache = DynamicCache(config=model.config)
    kw = cache_arg(model)
    model(input_ids=prompt, use_cache=True, **{kw: cache})
    decoded = []
    for tok in seq["decode_ids"]:
        out = model(input_ids=torch.tensor([[tok]], device=device), use_cache=True, **{kw: cache})
        decoded.append(out.logits[0, -1].float().cpu())
    decode_diff = float((torch.stack(decoded) - expected["seq0.decode_logits"]).abs().max())

    scale = float(expected["seq0.prefill_logits"].abs().max())
    print(f"fixture {args.check_fixture} ({DTYPE_LABEL[dtype]}, {device}): seq0 prefill logits "
          f"{tuple(logits.shape)} max |diff| {prefill_diff:.3e}; decode logits (cached, "
          f"{len(decoded)} steps) max |diff| {decode_diff:.3e}; max |logit| {scale:.3f}", flush=True)
    if dtype == torch.float32 and max(prefill_diff, decode_diff) > FIXTURE_TOLERANCE:
        print(f"FAIL: above {FIXTURE_TOLERANCE:g}", flush=True)
        return 1
    return 0


# --------------------------------------------------------------------------------------------------------
def int_list(text: str) -> list:
    values = [int(x) for x in text.split(",") if x.strip()]
    if any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"positive integers expected: {text}")
    return values


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint",
                    help="DeepSeek-V3.2, gpt-oss, Kimi Linear or GLM-5.3 checkpoint folder (hub format)")
    ap.add_argument("--mode", choices=("eager", "compile"), default="eager")
    ap.add_argument("--compile-mode", default="default", help="torch.compile mode (default: %(default)s)")
    ap.add_argument("--batch", type=int_list, default=[1, 8, 64], help="decode batch sizes, comma-separated")
    ap.add_argument("--context", type=int_list, default=[1024, 8192, 32768], help="decode contexts (cached tokens)")
    ap.add_argument("--prefill", type=int_list, default=[1024, 8192], help="prefill lengths")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--case-timeout", type=float, default=120.0, help="seconds per case (default %(default)s)")
    ap.add_argument("--out", default="baseline.json")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    ap.add_argument("--experts", choices=("grouped_mm", "batched_mm", "eager"), default="grouped_mm",
                    help="transformers experts implementation (default %(default)s, transformers' own default)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: only for testing this script")
    ap.add_argument("--check-fixture", metavar="DIR",
                    help="compare logits with a golden fixture's expected.safetensors instead of benchmarking")
    args = ap.parse_args()

    device = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("CUDA is not available (use --device cpu to test on the CPU)")
    if args.check_fixture:
        return check_fixture(args, device)
    if not args.checkpoint:
        ap.error("--checkpoint is required")
    if min(args.warmup, args.iters - 1) < 0:
        ap.error("--warmup must be >= 0 and --iters >= 1")
    run_benchmark(args, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
