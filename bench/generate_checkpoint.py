#!/usr/bin/env python3
"""Write a random-weight DeepSeek-V3.2, gpt-oss, Kimi Linear or GLM-5.3 checkpoint in the Hugging Face hub format,
for benchmarks.

The folder holds config.json (hub field names, quantization_config fmt e4m3 with 128x128 blocks) and
model.safetensors, or model-0000i-of-0000n.safetensors + model.safetensors.index.json when the tensors
exceed --max-shard-bytes. Tensor names, dtypes and shapes follow the published checkpoint and our
fixtures (test/fixtures/generate_deepseek_v32.py --fp8): every *_proj weight and indexer.wq_b/wk is
F8_E4M3 with an F32 `weight_scale_inv` [ceil(out/128), ceil(in/128)]; embeddings, lm_head, mlp.gate,
indexer.weights_proj, norms and indexer.k_norm.bias are BF16; mlp.gate.e_score_correction_bias is F32.
No MTP layer is written (num_nextn_predict_layers 0).

    python3 bench/generate_checkpoint.py --preset small --out /tmp/ds-small
    python3 bench/generate_checkpoint.py --preset real --layers 2 --out /data/ds-real-2l
    python3 bench/generate_checkpoint.py --preset real --layers 4 --dense-layers 1 --dry-run
    python3 bench/generate_checkpoint.py --family gpt_oss --preset real --layers 2 --out /data/oss-real-2l
    python3 bench/generate_checkpoint.py --family kimi_linear --preset real --layers 4 --out /data/kimi-real-4l
    python3 bench/generate_checkpoint.py --family glm5_next --preset real --layers 4 --out /data/glm-real-4l

gpt_oss (`--family gpt_oss`, gpt-oss-120b at `--preset real`): the hub MXFP4 layout of models.md 3.2 and the
gpt_oss_mxfp4 fixture's README: experts as U8 `*_blocks` [E, out, in/32, 16] (two E2M1 codes a byte, uniformly
random codes) and U8 E8M0 `*_scales` [E, out, in/32] (one power of two per tensor, so that the dequantized
weights have std ~ 1/sqrt(fan_in)), bf16 expert biases, attention (q/k/v/o with biases, sinks), router and
lm_head; float32 norms; `layer_types` alternating sliding/full from layer 0 as the hub config has them.

kimi_linear (`--family kimi_linear`, Kimi-Linear-48B-A3B at `--preset real`, the shared kimi_linear fixture's dimensions
at `--preset small`): models.md 2.8 and the fixtures' README (test/fixtures/kimi_linear_long): KDA layers
(`self_attn.{q,k,v}_proj`, depthwise `{q,k,v}_conv1d` [C, 1, W], `f_a_proj`/`f_b_proj`, `b_proj`, `g_a_proj`/`g_b_proj`,
`A_log` [1, 1, H, 1], `dt_bias` [H * Dk], `o_norm`, `o_proj`) and NoPE MLA layers with a plain `q_proj` (q_lora_rank
null), 3 KDA then 1 MLA repeating (`linear_attn_config` kda_layers / full_attn_layers, 1-based; at --layers 27 the
hub's lists, whose last layer is MLA), layers 0..--dense-layers-1 a dense MLP and the rest MoE under
`block_sparse_moe.` (per-expert w1/w3/w2, sigmoid router + e_score_correction_bias, one shared expert). Everything
bf16 except A_log, dt_bias and e_score_correction_bias (float32). The KDA decay is drawn as generate_kimi_linear.py
draws it (A = exp(A_log) ~ U(1, 16), dt_bias = softplus^-1(dt), dt log-uniform in [1e-3, 0.3], f_b_proj at half
scale), so g = -A softplus(f + dt_bias) mostly spans -5 .. 0.

glm5_next (`--family glm5_next`, GLM-5.3-Flash at `--preset real`, the shared glm5_next_fp8 fixture's dimensions at
`--preset small`): ../shared/reference/glm5_next.md 7 and 11 and that fixture's README. config.json is nested as on the
hub (`text_config`, the released `vision_config`, `quantization_config` at the top with the fixture's
`modules_to_not_convert`); layer_types KDA except MLA + DSA at i % 4 == 3 (`--layers 4`, the default: KDA 0-2, DSA 3),
mlp_layer_types dense for layers 0..--dense-layers-1, indexer_types all full. Tensors under `model.language_model.`
(+ `lm_head.weight`), no `model.visual.*` (the tower is never run) and no MTP layer: per layer `hc_{attn,ffn}_fn`
bf16 [(2 + n) n, n H] with float32 `_base` and `_scale`; KDA as Kimi Linear's, all bf16, but `A_log` 1-D [H] and
the bounded gate's draws (A = exp(A_log) ~ U(0.5, 8), dt_bias ~ U(-3, 2), as test/fixtures/generate_glm5_next.py);
NoPE MLA with FP8 q_a/q_b/kv_a_with_mqa/o_proj, bf16 kv_b_proj, and a bf16 indexer (wq_b, wk, LayerNorm k_norm with
bias, weights_proj, index_kpool_compress_ape [kpool, d], index_kpool_compress_gate [d, H]); FP8 dense MLP, shared and
routed experts (per expert, as on the hub), bf16 router with a float32 correction bias.

Weights are random but well scaled: FP8 codes are drawn from a 256-entry table of quantized normal quantiles
(finite e4m3 codes only, |code| <= ~180, never the 0x7F/0xFF NaNs), with a power-of-two (ue8m0-style) block
scale so that the dequantized weights have std ~ 1/sqrt(fan_in); bf16 linear weights likewise; embeddings
std ~1; norms ~1 + 0.1 N(0,1). Tensors are streamed to disk in chunks, so memory use stays ~ a few
hundred MB at the real dimensions. Only the Python standard library is used (seeded random.Random.randbytes
mapped through bytes.translate tables: bulk C speed, reproducible for a given --seed independent of sharding).
"""

import argparse
import json
import math
import multiprocessing
import os
import random
import re
import shutil
import statistics
import struct
import sys
import time

BLOCK = 128
CHUNK = 64 << 20  # bytes of random codes generated per step

# --------------------------------------------------------------------------------------------------------
# Configurations (hub config.json field names)
# --------------------------------------------------------------------------------------------------------
QUANT = {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "scale_fmt": "ue8m0",
    "weight_block_size": [BLOCK, BLOCK],
}

COMMON = {
    "architectures": ["DeepseekV32ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "ep_size": 1,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "model_type": "deepseek_v32",
    "moe_layer_freq": 1,
    "norm_topk_prob": True,
    "num_nextn_predict_layers": 0,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "tie_word_embeddings": False,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "use_cache": True,
}

PRESETS = {
    # DeepSeek-V3.2 (deepseek-ai/DeepSeek-V3.2 config.json), minus the MTP layer.
    "real": {
        "hidden_size": 7168,
        "index_head_dim": 128,
        "index_n_heads": 64,
        "index_topk": 2048,
        "intermediate_size": 18432,
        "kv_lora_rank": 512,
        "max_position_embeddings": 163840,
        "moe_intermediate_size": 2048,
        "n_group": 8,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_attention_heads": 128,
        "num_experts_per_tok": 8,
        "num_key_value_heads": 128,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "rope_scaling": {
            "beta_fast": 32,
            "beta_slow": 1,
            "factor": 40,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
            "type": "yarn",
        },
        "topk_group": 4,
        "v_head_dim": 128,
        "vocab_size": 129280,
    },
    # The dimensions of test/fixtures/deepseek_v32_small_fp8 (partial 128-blocks included).
    "small": {
        "hidden_size": 128,
        "index_head_dim": 32,
        "index_n_heads": 4,
        "index_topk": 8,
        "intermediate_size": 256,
        "kv_lora_rank": 64,
        "max_position_embeddings": 2560,
        "moe_intermediate_size": 48,
        "n_group": 4,
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "num_attention_heads": 4,
        "num_experts_per_tok": 2,
        "num_key_value_heads": 4,
        "q_lora_rank": 96,
        "qk_nope_head_dim": 32,
        "qk_rope_head_dim": 16,
        "rope_scaling": {
            "beta_fast": 32,
            "beta_slow": 1,
            "factor": 40,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 64,
            "type": "yarn",
        },
        "topk_group": 2,
        "v_head_dim": 32,
        "vocab_size": 256,
    },
}
# `small` with DeepSeek's latent attention dimensions (kv_lora_rank 512, rope 64: cache rows of 576,
# the shape the warpgroup sparse MLA kernel takes) and a top-k of 96, so that prompts past 96 tokens
# select rows over more than one 64-row tile; still a few MB.
PRESETS["small-mla"] = json.loads(json.dumps(PRESETS["small"]))
PRESETS["small-mla"].update({"kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_topk": 96, "index_head_dim": 128,
                             "num_attention_heads": 8, "num_key_value_heads": 8})

# gpt-oss (openai/gpt-oss-120b config.json; `small`: the gpt_oss_mxfp4 fixture's dimensions).
GPT_OSS_COMMON = {
    "architectures": ["GptOssForCausalLM"],
    "attention_bias": True,
    "attention_dropout": 0.0,
    "eos_token_id": 200002,
    "hidden_act": "silu",
    "initial_context_length": 4096,
    "initializer_range": 0.02,
    "model_type": "gpt_oss",
    "output_router_logits": False,
    "pad_token_id": 199999,
    "quantization_config": {
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                   "model.embed_tokens", "lm_head"],
        "quant_method": "mxfp4",
    },
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                     "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000,
    "router_aux_loss_coef": 0.9,
    "swiglu_limit": 7.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
}

GPT_OSS_PRESETS = {
    "real": {
        "experts_per_token": 4,
        "head_dim": 64,
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "max_position_embeddings": 131072,
        "num_attention_heads": 64,
        "num_experts_per_tok": 4,
        "num_key_value_heads": 8,
        "num_local_experts": 128,
        "sliding_window": 128,
        "vocab_size": 201088,
    },
    "small": {
        "experts_per_token": 4,
        "head_dim": 32,
        "hidden_size": 128,
        "intermediate_size": 128,
        "max_position_embeddings": 131072,
        "num_attention_heads": 4,
        "num_experts_per_tok": 4,
        "num_key_value_heads": 2,
        "num_local_experts": 8,
        "sliding_window": 8,
        "vocab_size": 512,
    },
}


# Kimi Linear (moonshotai/Kimi-Linear-48B-A3B-Instruct config.json, models.md 2.1; `small`: the dimensions of
# test/fixtures/shared/kimi_linear, whose config `--preset small --layers 4` writes again).
KIMI_COMMON = {
    "architectures": ["KimiLinearForCausalLM"],
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "mla_use_nope": True,
    "model_max_length": 1048576,
    "model_type": "kimi_linear",
    "moe_layer_freq": 1,
    "moe_renormalize": True,
    "moe_router_activation_func": "sigmoid",
    "num_expert_group": 1,
    "num_nextn_predict_layers": 0,
    "q_lora_rank": None,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "routed_scaling_factor": 2.446,
    "tie_word_embeddings": False,
    "topk_group": 1,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "use_grouped_topk": True,
}

KIMI_PRESETS = {
    "real": {
        "bos_token_id": 163584,
        "eos_token_id": 163586,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "kv_lora_rank": 512,
        "linear_attn_config": {"head_dim": 128, "num_heads": 32, "short_conv_kernel_size": 4},
        "moe_intermediate_size": 1024,
        "num_attention_heads": 32,
        "num_experts": 256,
        "num_experts_per_token": 8,
        "num_key_value_heads": 32,
        "num_shared_experts": 1,
        "pad_token_id": 163839,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "vocab_size": 163840,
    },
    "small": {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_size": 128,
        "intermediate_size": 256,
        "kv_lora_rank": 32,
        "linear_attn_config": {"head_dim": 32, "num_heads": 2, "short_conv_kernel_size": 4},
        "moe_intermediate_size": 64,
        "num_attention_heads": 2,
        "num_experts": 8,
        "num_experts_per_token": 2,
        "num_key_value_heads": 2,
        "num_shared_experts": 1,
        "pad_token_id": None,
        "qk_nope_head_dim": 32,
        "qk_rope_head_dim": 16,
        "v_head_dim": 32,
        "vocab_size": 512,
    },
}
# The hub's 27 layers: 3 KDA : 1 MLA, ending KDA, KDA, MLA (models.md 2.1).
KIMI_HUB_FULL_ATTN_LAYERS = [4, 8, 12, 16, 20, 24, 27]


def make_config(preset: str, layers: int, dense_layers: int, experts: int = 0) -> dict:
    cfg = dict(COMMON)
    cfg.update(json.loads(json.dumps(PRESETS[preset])))
    cfg["num_hidden_layers"] = layers
    cfg["first_k_dense_replace"] = dense_layers
    if experts:
        # Fewer routed experts of the same shape, in groups of the preset's size
        # (8 groups of 32 at the real dimensions become experts/32 groups): what
        # fits a benchmark machine's disk and memory while per-token work is unchanged.
        per_group = cfg["n_routed_experts"] // cfg["n_group"]
        cfg["n_routed_experts"] = experts
        cfg["n_group"] = max(1, experts // per_group)
        cfg["topk_group"] = min(cfg["topk_group"], cfg["n_group"])
    cfg["quantization_config"] = dict(QUANT)
    return cfg


def make_gpt_oss_config(preset: str, layers: int, experts: int = 0) -> dict:
    cfg = json.loads(json.dumps(GPT_OSS_COMMON))
    cfg.update(json.loads(json.dumps(GPT_OSS_PRESETS[preset])))
    cfg["num_hidden_layers"] = layers
    cfg["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    if experts:
        cfg["num_local_experts"] = experts
    if cfg["vocab_size"] <= cfg["pad_token_id"]:  # the small preset: the fixture's ids
        cfg["eos_token_id"], cfg["pad_token_id"] = 2, 1
    return cfg


def make_kimi_config(preset: str, layers: int, dense_layers: int, experts: int = 0) -> dict:
    cfg = json.loads(json.dumps(KIMI_COMMON))
    cfg.update(json.loads(json.dumps(KIMI_PRESETS[preset])))
    cfg["num_hidden_layers"] = layers
    cfg["first_k_dense_replace"] = dense_layers
    # 1-based, as on the hub: layer l is MLA ("full attention") every fourth layer, KDA otherwise.
    full = KIMI_HUB_FULL_ATTN_LAYERS if layers == 27 else [l for l in range(1, layers + 1) if l % 4 == 0]
    cfg["linear_attn_config"]["full_attn_layers"] = full
    cfg["linear_attn_config"]["kda_layers"] = [l for l in range(1, layers + 1) if l not in full]
    if experts:
        cfg["num_experts"] = experts
    return cfg


# GLM-5.3-Flash (zai-org/GLM-5.3-Flash, ../shared/reference/glm5_next.md 11; `small`: the dimensions of the shared
# glm5_next_fp8 fixture). The hub config is nested: the text model's fields in `text_config`, a `vision_config`
# (the tower is never run: its tensors are not written) and, for the FP8 release, `quantization_config` at the top.
GLM_TEXT_COMMON = {
    "attention_bias": False,
    "bos_token_id": None,
    "dtype": "bfloat16",
    "hc_eps": 1e-06,
    "hc_mult": 4,
    "hc_sinkhorn_iters": 20,
    "head_dim": 0,
    "hidden_act": "silu",
    "index_kpool_always_select_tail": True,
    "index_kpool_compress": True,
    "index_share_for_mtp_iteration": True,
    "indexer_rope_interleave": True,
    "mhc": True,
    "mla_use_nope": True,
    "model_type": "glm5_next_text",
    "moe_router_dtype": "float32",
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_nextn_predict_layers": 0,
    "pad_token_id": None,
    "qk_rope_head_dim": 0,
    "rms_norm_eps": 1e-05,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "tie_word_embeddings": False,
    "topk_method": "noaux_tc",
}

GLM_PRESETS = {
    "real": {
        "eos_token_id": [154820, 154827, 154829],
        "hidden_size": 4096,
        "index_head_dim": 128,
        "index_kpool": 4,
        "index_n_heads": 32,
        "index_topk": 2048,
        "intermediate_size": 12288,
        "kv_lora_rank": 512,
        "linear_attn_config": {"gate_lower_bound": -5.0, "head_dim": 128, "num_heads": 64,
                               "short_conv_kernel_size": 4},
        "max_position_embeddings": 1048576,
        "moe_intermediate_size": 2048,
        "n_group": 1,
        "n_routed_experts": 288,
        "num_attention_heads": 64,
        "num_experts_per_tok": 8,
        "num_key_value_heads": 64,
        "q_lora_rank": 1536,
        "qk_head_dim": 256,
        "qk_nope_head_dim": 256,
        "swiglu_limit": 10.0,
        "topk_group": 1,
        "v_head_dim": 256,
        "vocab_size": 154880,
    },
    "small": {
        "eos_token_id": 1,
        "hidden_size": 128,
        "index_head_dim": 32,
        "index_kpool": 4,
        "index_n_heads": 4,
        "index_topk": 16,
        "intermediate_size": 256,
        "kv_lora_rank": 32,
        "linear_attn_config": {"gate_lower_bound": -5.0, "head_dim": 32, "num_heads": 2,
                               "short_conv_kernel_size": 4},
        "max_position_embeddings": 4096,
        "moe_intermediate_size": 64,
        "n_group": 2,
        "n_routed_experts": 8,
        "num_attention_heads": 4,
        "num_experts_per_tok": 2,
        "num_key_value_heads": 4,
        "q_lora_rank": 64,
        "qk_head_dim": 32,
        "qk_nope_head_dim": 32,
        "swiglu_limit": 3.0,
        "topk_group": 1,
        "v_head_dim": 32,
        "vocab_size": 512,
    },
}

# The released vision tower's config (glm5_next.md 1.2; fields it does not give are left to transformers'
# defaults), and the fixture's one-block tower for the small preset.
GLM_VISION = {
    "real": {"attention_bias": True, "depth": 24, "hidden_act": "silu", "hidden_size": 1024, "image_size": 448,
             "in_channels": 3, "intermediate_size": 4096, "model_type": "glm5_next_vision", "num_heads": 16,
             "out_hidden_size": 4096, "patch_size": 14, "rms_norm_eps": 1e-05, "spatial_merge_size": 2,
             "swiglu_limit": 10.0, "temporal_patch_size": 2},
    "small": {"attention_bias": True, "depth": 1, "hidden_act": "silu", "hidden_size": 32, "image_size": 56,
              "in_channels": 3, "intermediate_size": 64, "model_type": "glm5_next_vision", "num_heads": 2,
              "out_hidden_size": 128, "patch_size": 14, "projection_intermediate_size": 64,
              "rms_norm_eps": 1e-05, "spatial_merge_size": 2, "swiglu_limit": 10.0, "temporal_patch_size": 2},
}


def glm_is_kda(i: int) -> bool:
    """The released schedule: DSA (MLA + indexer) at every fourth layer, i % 4 == 3, KDA elsewhere."""
    return i % 4 != 3


def make_glm_config(preset: str, layers: int, dense_layers: int, experts: int = 0) -> dict:
    text = json.loads(json.dumps(GLM_TEXT_COMMON))
    text.update(json.loads(json.dumps(GLM_PRESETS[preset])))
    text["num_hidden_layers"] = layers
    # transformers reads the schedules from layer_types / mlp_layer_types / indexer_types (the hub spelling);
    # first_k_dense_replace and linear_attn_config's layer lists (0-based, as in the fixtures) are written as the
    # hub config has them but not read.
    text["layer_types"] = ["linear_attention" if glm_is_kda(i) else "deepseek_sparse_attention"
                           for i in range(layers)]
    text["mlp_layer_types"] = ["dense" if i < dense_layers else "sparse" for i in range(layers)]
    text["first_k_dense_replace"] = dense_layers
    text["indexer_types"] = ["full"] * layers
    text["linear_attn_config"]["kda_layers"] = [i for i in range(layers) if glm_is_kda(i)]
    text["linear_attn_config"]["full_attn_layers"] = [i for i in range(layers) if not glm_is_kda(i)]
    if experts:
        per_group = text["n_routed_experts"] // text["n_group"]
        text["n_routed_experts"] = experts
        text["n_group"] = max(1, experts // per_group)
        text["topk_group"] = min(text["topk_group"], text["n_group"])
    # Hub module names left unquantized (bf16), as in the glm5_next_fp8 fixture.
    keep = ["lm_head", "model.visual"]
    for i in range(layers):
        a = f"model.language_model.layers.{i}.self_attn."
        if glm_is_kda(i):
            keep += [a + p for p in ("q_proj", "k_proj", "v_proj", "b_proj", "f_a_proj", "f_b_proj", "g_a_proj",
                                     "g_b_proj", "o_proj")]
        else:
            keep += [a + p for p in ("kv_b_proj", "indexer.wq_b", "indexer.wk", "indexer.weights_proj")]
        if i >= dense_layers:
            keep.append(f"model.language_model.layers.{i}.mlp.gate")
    quant = dict(QUANT)
    del quant["scale_fmt"]
    quant["modules_to_not_convert"] = keep
    return {
        "architectures": ["Glm5NextForConditionalGeneration"],
        "dtype": "bfloat16",
        "image_end_token_id": 154831,
        "image_start_token_id": 154830,
        "image_token_id": 154854,
        "model_type": "glm5_next",
        "quantization_config": quant,
        "text_config": text,
        "tie_word_embeddings": False,
        "transformers_version": "5.24.0",
        "video_end_token_id": 154833,
        "video_start_token_id": 154832,
        "video_token_id": 154855,
        "vision_config": dict(GLM_VISION[preset]),
    }


# --------------------------------------------------------------------------------------------------------
# Tensor plan: (name, dtype, shape, kind, param) in hub order
# --------------------------------------------------------------------------------------------------------
ITEMSIZE = {"F32": 4, "BF16": 2, "F8_E4M3": 1, "U8": 1}


class T:
    __slots__ = ("name", "dtype", "shape", "kind", "std", "fan_in", "nbytes", "shard", "offset")

    def __init__(self, name, dtype, shape, kind, std=0.0, fan_in=0):
        self.name, self.dtype, self.shape, self.kind = name, dtype, tuple(shape), kind
        self.std, self.fan_in = std, fan_in
        self.nbytes = math.prod(self.shape) * ITEMSIZE[dtype]
        self.shard = 0
        self.offset = 0

    @property
    def numel(self):
        return math.prod(self.shape)


def fp8_linear(name, rows, cols):
    """An FP8 weight and its block scales: [rows, cols] e4m3 + [ceil(rows/128), ceil(cols/128)] f32."""
    std = cols ** -0.5
    return [T(name, "F8_E4M3", (rows, cols), "fp8", std, cols),
            T(name[: -len(".weight")] + ".weight_scale_inv", "F32",
              (math.ceil(rows / BLOCK), math.ceil(cols / BLOCK)), "scale", std, cols)]


def bf16_linear(name, rows, cols, gain=1.0):
    return [T(name, "BF16", (rows, cols), "bf16", gain * cols ** -0.5, cols)]


def norm(name, n):
    return [T(name, "BF16", (n,), "norm")]


def layer_tensors(cfg: dict, i: int) -> list:
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    ql, kvl = cfg["q_lora_rank"], cfg["kv_lora_rank"]
    inh, ihd = cfg["index_n_heads"], cfg["index_head_dim"]
    p = f"model.layers.{i}."
    a = p + "self_attn."
    ts = []
    ts += norm(p + "input_layernorm.weight", H)
    ts += fp8_linear(a + "q_a_proj.weight", ql, H)
    ts += norm(a + "q_a_layernorm.weight", ql)
    ts += fp8_linear(a + "q_b_proj.weight", nh * (nope + rope), ql)
    ts += fp8_linear(a + "kv_a_proj_with_mqa.weight", kvl + rope, H)
    ts += norm(a + "kv_a_layernorm.weight", kvl)
    ts += fp8_linear(a + "kv_b_proj.weight", nh * (nope + vd), kvl)
    ts += fp8_linear(a + "o_proj.weight", H, nh * vd)
    ts += fp8_linear(a + "indexer.wq_b.weight", inh * ihd, ql)
    ts += fp8_linear(a + "indexer.wk.weight", ihd, H)
    ts += norm(a + "indexer.k_norm.weight", ihd)
    ts += [T(a + "indexer.k_norm.bias", "BF16", (ihd,), "bias")]
    ts += bf16_linear(a + "indexer.weights_proj.weight", inh, H)
    ts += norm(p + "post_attention_layernorm.weight", H)
    ts += fp8_mlp(p + "mlp.", cfg, H, i < cfg["first_k_dense_replace"])
    return ts


def fp8_mlp(m: str, cfg: dict, H: int, dense: bool) -> list:
    """The FP8 MLP under prefix m: dense (gate/up/down of intermediate_size), or sigmoid-routed experts (router
    weight + e_score_correction_bias, n_routed_experts of moe_intermediate_size, then the shared experts, if any,
    as one MLP n_shared_experts times as wide), as DeepSeek-V3.2 and GLM-5.3 store them."""
    def mlp(prefix, width):
        return (fp8_linear(prefix + "gate_proj.weight", width, H) + fp8_linear(prefix + "up_proj.weight", width, H)
                + fp8_linear(prefix + "down_proj.weight", H, width))
    if dense:
        return mlp(m, cfg["intermediate_size"])
    E, mI = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
    ts = bf16_linear(m + "gate.weight", E, H)
    ts += [T(m + "gate.e_score_correction_bias", "F32", (E,), "router_bias")]
    for e in range(E):
        ts += mlp(m + f"experts.{e}.", mI)
    if cfg["n_shared_experts"]:
        ts += mlp(m + "shared_experts.", mI * cfg["n_shared_experts"])
    return ts


# E2M1 values of the 16 codes; uniformly random codes have this RMS.
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
E2M1_RMS = math.sqrt(sum(v * v for v in E2M1) / 16)


def mxfp4_experts(name, experts, rows, cols):
    """`{name}_blocks` U8 [E, rows, cols/32, 16], `{name}_scales` U8 [E, rows, cols/32], `{name}_bias` bf16."""
    std = cols ** -0.5
    return [T(name + "_blocks", "U8", (experts, rows, cols // 32, 16), "mxfp4", std, cols),
            T(name + "_scales", "U8", (experts, rows, cols // 32), "e8m0", std, cols),
            T(name + "_bias", "BF16", (experts, rows), "bias")]


def gpt_oss_layer_tensors(cfg: dict, i: int) -> list:
    H, I, E = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_local_experts"]
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    p = f"model.layers.{i}."
    a = p + "self_attn."
    ts = [T(p + "input_layernorm.weight", "F32", (H,), "norm")]
    for proj, rows, cols in (("q", nh * hd, H), ("k", nkv * hd, H), ("v", nkv * hd, H), ("o", H, nh * hd)):
        ts += bf16_linear(a + f"{proj}_proj.weight", rows, cols)
        ts += [T(a + f"{proj}_proj.bias", "BF16", (rows,), "bias")]
    ts += [T(a + "sinks", "BF16", (nh,), "bias")]
    ts += [T(p + "post_attention_layernorm.weight", "F32", (H,), "norm")]
    m = p + "mlp."
    ts += bf16_linear(m + "router.weight", E, H)
    ts += [T(m + "router.bias", "BF16", (E,), "bias")]
    ts += mxfp4_experts(m + "experts.gate_up_proj", E, 2 * I, H)
    ts += mxfp4_experts(m + "experts.down_proj", E, H, I)
    return ts


def plan_gpt_oss_tensors(cfg: dict):
    H, V = cfg["hidden_size"], cfg["vocab_size"]
    groups = [("embed_tokens", [T("model.embed_tokens.weight", "BF16", (V, H), "embed", 1.0)])]
    for i in range(cfg["num_hidden_layers"]):
        groups.append((f"layer {i} ({cfg['layer_types'][i].split('_')[0]})", gpt_oss_layer_tensors(cfg, i)))
    groups.append(("norm + lm_head",
                   [T("model.norm.weight", "F32", (H,), "norm")] + bf16_linear("lm_head.weight", V, H)))
    return groups


def kimi_layer_tensors(cfg: dict, i: int) -> list:
    """Layer i (0-based) of a Kimi Linear checkpoint, hub names (models.md 2.8; the fixtures' README)."""
    H = cfg["hidden_size"]
    lin = cfg["linear_attn_config"]
    nk, dk, W = lin["num_heads"], lin["head_dim"], lin["short_conv_kernel_size"]
    C = nk * dk
    p = f"model.layers.{i}."
    a = p + "self_attn."
    ts = norm(p + "input_layernorm.weight", H)
    if i + 1 in lin["kda_layers"]:
        for n in "qkv":
            ts += bf16_linear(a + f"{n}_proj.weight", C, H)
            # depthwise kernel of W taps, std W^-1/2: the conv output keeps the input's scale
            ts += [T(a + f"{n}_conv1d.weight", "BF16", (C, 1, W), "bf16", W ** -0.5, W)]
        ts += bf16_linear(a + "f_a_proj.weight", dk, H)
        ts += bf16_linear(a + "f_b_proj.weight", C, dk, 0.5)  # forget-gate input f ~ N(0, 1/4)
        ts += bf16_linear(a + "b_proj.weight", nk, H)
        ts += bf16_linear(a + "g_a_proj.weight", dk, H)
        ts += bf16_linear(a + "g_b_proj.weight", C, dk)
        ts += [T(a + "A_log", "F32", (1, 1, nk, 1), "a_log")]
        ts += [T(a + "dt_bias", "F32", (C,), "dt_bias")]
        ts += norm(a + "o_norm.weight", dk)
        ts += bf16_linear(a + "o_proj.weight", H, C)
    else:
        nh, kvl = cfg["num_attention_heads"], cfg["kv_lora_rank"]
        nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        ts += bf16_linear(a + "q_proj.weight", nh * (nope + rope), H, 2.0)  # wider scores: a sharper softmax
        ts += bf16_linear(a + "kv_a_proj_with_mqa.weight", kvl + rope, H, 2.0)
        ts += norm(a + "kv_a_layernorm.weight", kvl)
        ts += bf16_linear(a + "kv_b_proj.weight", nh * (nope + vd), kvl)
        ts += bf16_linear(a + "o_proj.weight", H, nh * vd)
    ts += norm(p + "post_attention_layernorm.weight", H)
    if i < cfg["first_k_dense_replace"]:
        I = cfg["intermediate_size"]
        ts += bf16_linear(p + "mlp.gate_proj.weight", I, H)
        ts += bf16_linear(p + "mlp.up_proj.weight", I, H)
        ts += bf16_linear(p + "mlp.down_proj.weight", H, I)
    else:
        m = p + "block_sparse_moe."
        E, mI = cfg["num_experts"], cfg["moe_intermediate_size"]
        sI = mI * cfg["num_shared_experts"]
        ts += bf16_linear(m + "gate.weight", E, H, 2.0)
        ts += [T(m + "gate.e_score_correction_bias", "F32", (E,), "router_bias")]
        for e in range(E):
            ts += bf16_linear(m + f"experts.{e}.w1.weight", mI, H)
            ts += bf16_linear(m + f"experts.{e}.w3.weight", mI, H)
            ts += bf16_linear(m + f"experts.{e}.w2.weight", H, mI)
        if sI:
            ts += bf16_linear(m + "shared_experts.gate_proj.weight", sI, H)
            ts += bf16_linear(m + "shared_experts.up_proj.weight", sI, H)
            ts += bf16_linear(m + "shared_experts.down_proj.weight", H, sI)
    return ts


def plan_kimi_tensors(cfg: dict):
    H, V = cfg["hidden_size"], cfg["vocab_size"]
    groups = [("embed_tokens", [T("model.embed_tokens.weight", "BF16", (V, H), "embed", 1.0)])]
    for i in range(cfg["num_hidden_layers"]):
        attn = "kda" if i + 1 in cfg["linear_attn_config"]["kda_layers"] else "mla"
        mlp = "dense" if i < cfg["first_k_dense_replace"] else "moe"
        groups.append((f"layer {i} ({attn}, {mlp})", kimi_layer_tensors(cfg, i)))
    groups.append(("norm + lm_head", norm("model.norm.weight", H) + bf16_linear("lm_head.weight", V, H)))
    return groups


def glm_layer_tensors(cfg: dict, i: int) -> list:
    """Layer i of a GLM-5.3 checkpoint, hub names, dtypes and shapes (glm5_next.md 7; the glm5_next_fp8 fixture's
    README): the mHC weights, a KDA or MLA + DSA indexer mixer, a dense MLP or an MoE."""
    t = cfg["text_config"]
    H, n = t["hidden_size"], t["hc_mult"]
    lin = t["linear_attn_config"]
    p = f"model.language_model.layers.{i}."
    a = p + "self_attn."
    ts = []
    for kind in ("attn", "ffn"):
        # fn [(2 + n) n, n H] bf16 (std (n H)^-1/2), base [(2 + n) n] and scale [3] float32.
        ts += bf16_linear(p + f"hc_{kind}_fn", (2 + n) * n, n * H)
        ts += [T(p + f"hc_{kind}_base", "F32", ((2 + n) * n,), "hc_base"),
               T(p + f"hc_{kind}_scale", "F32", (3,), "hc_scale")]
    ts += norm(p + "input_layernorm.weight", H)
    if t["layer_types"][i] == "linear_attention":
        nk, dk, W = lin["num_heads"], lin["head_dim"], lin["short_conv_kernel_size"]
        C = nk * dk
        for c in "qkv":
            ts += bf16_linear(a + f"{c}_proj.weight", C, H)
            ts += [T(a + f"{c}_conv1d.weight", "BF16", (C, 1, W), "bf16", W ** -0.5, W)]
        ts += bf16_linear(a + "f_a_proj.weight", dk, H)
        ts += bf16_linear(a + "f_b_proj.weight", C, dk)
        ts += bf16_linear(a + "b_proj.weight", nk, H)
        ts += bf16_linear(a + "g_a_proj.weight", dk, H)
        ts += bf16_linear(a + "g_b_proj.weight", C, dk)
        ts += [T(a + "A_log", "F32", (nk,), "glm_a_log")]  # 1-D on the hub (Kimi Linear: [1, 1, H, 1])
        ts += [T(a + "dt_bias", "F32", (C,), "glm_dt_bias")]
        ts += norm(a + "o_norm.weight", dk)
        ts += bf16_linear(a + "o_proj.weight", H, C)
    else:
        nh, ql, kvl = t["num_attention_heads"], t["q_lora_rank"], t["kv_lora_rank"]
        nope, vd = t["qk_nope_head_dim"], t["v_head_dim"]
        inh, ihd, pool = t["index_n_heads"], t["index_head_dim"], t["index_kpool"]
        ts += fp8_linear(a + "q_a_proj.weight", ql, H)
        ts += norm(a + "q_a_layernorm.weight", ql)
        ts += fp8_linear(a + "q_b_proj.weight", nh * nope, ql)
        ts += fp8_linear(a + "kv_a_proj_with_mqa.weight", kvl, H)  # no rope part: kv_lora rows
        ts += norm(a + "kv_a_layernorm.weight", kvl)
        ts += bf16_linear(a + "kv_b_proj.weight", nh * (nope + vd), kvl)
        ts += fp8_linear(a + "o_proj.weight", H, nh * vd)
        if t["indexer_types"][i] == "full":
            x = a + "indexer."
            ts += bf16_linear(x + "wq_b.weight", inh * ihd, ql)
            ts += bf16_linear(x + "wk.weight", ihd, H)
            ts += norm(x + "k_norm.weight", ihd)
            ts += [T(x + "k_norm.bias", "BF16", (ihd,), "bias")]
            ts += bf16_linear(x + "weights_proj.weight", inh, H)
            ts += [T(x + "index_kpool_compress_ape", "BF16", (pool, ihd), "bf16", 0.5)]
            ts += bf16_linear(x + "index_kpool_compress_gate", ihd, H)  # no .weight suffix
    ts += norm(p + "post_attention_layernorm.weight", H)
    ts += fp8_mlp(p + "mlp.", t, H, t["mlp_layer_types"][i] == "dense")
    return ts


def plan_glm_tensors(cfg: dict):
    t = cfg["text_config"]
    H, V = t["hidden_size"], t["vocab_size"]
    lm = "model.language_model."
    groups = [("embed_tokens", [T(lm + "embed_tokens.weight", "BF16", (V, H), "embed", 1.0)])]
    for i in range(t["num_hidden_layers"]):
        attn = "kda" if t["layer_types"][i] == "linear_attention" else "dsa"
        mlp = "dense" if t["mlp_layer_types"][i] == "dense" else "moe"
        groups.append((f"layer {i} ({attn}, {mlp})", glm_layer_tensors(cfg, i)))
    groups.append(("norm + lm_head", norm(lm + "norm.weight", H) + bf16_linear("lm_head.weight", V, H)))
    return groups


def plan_tensors(cfg: dict):
    """[(group label, [T])] in hub order: embeddings, layers, final norm + lm_head."""
    H, V = cfg["hidden_size"], cfg["vocab_size"]
    groups = [("embed_tokens", [T("model.embed_tokens.weight", "BF16", (V, H), "embed", 1.0)])]
    for i in range(cfg["num_hidden_layers"]):
        kind = "dense" if i < cfg["first_k_dense_replace"] else "moe"
        groups.append((f"layer {i} ({kind})", layer_tensors(cfg, i)))
    groups.append(("norm + lm_head", norm("model.norm.weight", H) + bf16_linear("lm_head.weight", V, H)))
    return groups


def assign_shards(tensors: list, max_shard_bytes: int) -> int:
    """Greedy, in hub order; a tensor larger than the limit gets a shard of its own. Returns the shard count."""
    shard, used = 0, 0
    for t in tensors:
        if used > 0 and used + t.nbytes > max_shard_bytes:
            shard, used = shard + 1, 0
        t.shard = shard
        used += t.nbytes
    return shard + 1


# --------------------------------------------------------------------------------------------------------
# Number formats
# --------------------------------------------------------------------------------------------------------
def e4m3_value(code: int) -> float:
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 0x7
    if e == 0xF and m == 0x7:
        return math.nan
    if e == 0:
        return s * m / 8.0 * 2.0 ** -6
    return s * (1.0 + m / 8.0) * 2.0 ** (e - 7)


FINITE_E4M3 = sorted((e4m3_value(c), c) for c in range(256) if not math.isnan(e4m3_value(c)))


def e4m3_nearest(x: float) -> int:
    best = min(FINITE_E4M3, key=lambda vc: (abs(vc[0] - x), vc[1]))
    return best[1]


def bf16_bits(x: float) -> int:
    """Round-to-nearest-even float32 -> bfloat16 bit pattern."""
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


_ND = statistics.NormalDist()
_QUANTILES = [_ND.inv_cdf((i + 0.5) / 256) for i in range(256)]


def code_table(target_std: float):
    """A 256-entry table of e4m3 codes (random byte -> code) whose values are quantized normal quantiles, and a
    power-of-two scale, such that scale * value has std ~ target_std and |value| stays well under 448."""
    k = math.floor(math.log2(target_std / 32.0))
    scale = 2.0 ** k
    sigma = target_std / scale  # in [32, 64)
    for _ in range(3):  # correct for the quantization of the table
        codes = [e4m3_nearest(q * sigma) for q in _QUANTILES]
        vals = [e4m3_value(c) for c in codes]
        std = math.sqrt(sum(v * v for v in vals) / 256)
        sigma *= (target_std / scale) / std
    codes = [e4m3_nearest(q * sigma) for q in _QUANTILES]
    vals = [e4m3_value(c) for c in codes]
    assert all(c not in (0x7F, 0xFF) for c in codes)
    return bytes(codes), vals, scale


_TABLES = {}


def tables_for(target_std: float):
    key = float(target_std)
    if key not in _TABLES:
        codes, vals, scale = code_table(key)
        lo = bytes(bf16_bits(v * scale) & 0xFF for v in vals)
        hi = bytes(bf16_bits(v * scale) >> 8 for v in vals)
        _TABLES[key] = (codes, scale, lo, hi)
    return _TABLES[key]


# --------------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------------
def tensor_chunks(t: T, seed: int):
    """Yields the tensor's little-endian bytes in chunks of at most ~2*CHUNK bytes."""
    rng = random.Random(f"{seed}:{t.name}")
    n = t.numel
    if t.kind in ("fp8", "bf16", "embed"):
        codes, scale, lo, hi = tables_for(t.std)
        left = n
        while left:
            k = min(left, CHUNK)
            rb = rng.randbytes(k)
            if t.kind == "fp8":
                yield rb.translate(codes)
            else:
                buf = bytearray(2 * k)
                buf[0::2] = rb.translate(lo)
                buf[1::2] = rb.translate(hi)
                yield bytes(buf)
            left -= k
    elif t.kind == "scale":
        _, scale, _, _ = tables_for(t.std)
        yield struct.pack("<f", scale) * n
    elif t.kind == "norm" and t.dtype == "F32":
        yield b"".join(struct.pack("<f", 1.0 + 0.1 * rng.gauss(0.0, 1.0)) for _ in range(n))
    elif t.kind == "norm":
        yield b"".join(struct.pack("<H", bf16_bits(1.0 + 0.1 * rng.gauss(0.0, 1.0))) for _ in range(n))
    elif t.kind == "mxfp4":
        left = n  # two uniformly random E2M1 codes a byte
        while left:
            k = min(left, CHUNK)
            yield rng.randbytes(k)
            left -= k
    elif t.kind == "e8m0":
        # One power of two for the tensor: E2M1_RMS * 2^(byte - 127) ~ std.
        yield bytes([127 + round(math.log2(t.std / E2M1_RMS))]) * n
    elif t.kind == "bias":
        yield b"".join(struct.pack("<H", bf16_bits(0.1 * rng.gauss(0.0, 1.0))) for _ in range(n))
    elif t.kind == "router_bias":
        yield b"".join(struct.pack("<f", 0.05 * rng.gauss(0.0, 1.0)) for _ in range(n))
    elif t.kind == "a_log":
        # KDA decay rate per head: A = exp(A_log) ~ U(1, 16) (fla's and transformers' initialisation).
        yield b"".join(struct.pack("<f", math.log(rng.uniform(1.0, 16.0))) for _ in range(n))
    elif t.kind == "dt_bias":
        # softplus^-1(dt) per channel, dt log-uniform in [1e-3, 0.3] (test/fixtures/generate_kimi_linear.py).
        out = []
        for _ in range(n):
            dt = math.exp(rng.uniform(math.log(1e-3), math.log(0.3)))
            out.append(struct.pack("<f", dt + math.log(-math.expm1(-dt))))
        yield b"".join(out)
    elif t.kind == "glm_a_log":
        # GLM's bounded gate g = lower_bound * sigmoid(exp(A_log) (f + dt_bias)): A = exp(A_log) ~ U(0.5, 8) and
        # dt_bias ~ U(-3, 2), as test/fixtures/generate_glm5_next.py draws them (g / lower_bound spans 0 .. 1).
        yield b"".join(struct.pack("<f", math.log(rng.uniform(0.5, 8.0))) for _ in range(n))
    elif t.kind == "glm_dt_bias":
        yield b"".join(struct.pack("<f", rng.uniform(-3.0, 2.0)) for _ in range(n))
    elif t.kind == "hc_base":
        # mHC biases [pre n | post n | comb n x n] ~ N(0, 1/4), +2 on the comb block's diagonal (each new stream
        # mostly its old self), as in the fixtures; n from (2 + n) n entries.
        streams = math.isqrt(n + 1) - 1
        diagonal = {2 * streams + j * (streams + 1) for j in range(streams)}
        yield b"".join(struct.pack("<f", 0.5 * rng.gauss(0.0, 1.0) + (2.0 if k in diagonal else 0.0))
                       for k in range(n))
    elif t.kind == "hc_scale":
        yield b"".join(struct.pack("<f", rng.uniform(0.5, 1.5)) for _ in range(n))
    else:
        raise AssertionError(t.kind)


def write_tensor(task) -> int:
    """Writes one tensor's bytes at its offset in its shard (created at full size); returns the count."""
    path, offset, t, seed = task
    fd = os.open(path, os.O_WRONLY)
    try:
        n = 0
        for chunk in tensor_chunks(t, seed):
            view = memoryview(chunk)
            while view:
                k = os.pwrite(fd, view, offset + n)
                view, n = view[k:], n + k
    finally:
        os.close(fd)
    assert n == t.nbytes, (t.name, n, t.nbytes)
    return n


def shard_header(tensors: list) -> bytes:
    """safetensors header for one shard; sets t.offset. Tensors ordered by dtype size (descending) then name, as
    the safetensors library writes them, so every tensor is aligned to its element size."""
    hdr = {"__metadata__": {"format": "pt"}}
    off = 0
    for t in sorted(tensors, key=lambda t: (-ITEMSIZE[t.dtype], t.name)):
        t.offset = off
        hdr[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [off, off + t.nbytes]}
        off += t.nbytes
    js = json.dumps(hdr, separators=(",", ":")).encode()
    js += b" " * (-(8 + len(js)) % 8)
    return struct.pack("<Q", len(js)) + js


def parse_bytes(s: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)B?\s*", s, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"not a byte count: {s!r}")
    return int(float(m.group(1)) * 1024 ** " KMGT".index((m.group(2) or " ").upper()))


def human(n: float) -> str:
    for u in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or u == "TiB":
            return f"{n:.1f} {u}" if u != "B" else f"{int(n)} B"
        n /= 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", choices=["deepseek_v32", "gpt_oss", "kimi_linear", "glm5_next"],
                    default="deepseek_v32")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="small")
    ap.add_argument("--layers", type=int, default=None,
                    help="num_hidden_layers (default 2; kimi_linear 4: three KDA layers, then one MLA; "
                         "glm5_next 4: three KDA layers, then one MLA + DSA)")
    ap.add_argument("--dense-layers", type=int, default=1,
                    help="first_k_dense_replace: layers 0..k-1 dense MLP, the rest MoE (default 1; "
                         "deepseek_v32, kimi_linear and glm5_next)")
    ap.add_argument("--experts", type=int, default=0,
                    help="n_routed_experts (default: the preset's; 256 at the real dimensions), "
                         "a multiple of the experts per group (32 real, 2 small); gpt_oss: "
                         "num_local_experts (128 real), at least 4; kimi_linear: num_experts (256 real), "
                         "at least num_experts_per_token (8 real, 2 small); glm5_next: n_routed_experts (288 "
                         "real), at least num_experts_per_tok (8 real; small: a multiple of 4, at least 2)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="checkpoint folder to write (created; old model*.safetensors* removed)")
    ap.add_argument("--max-shard-bytes", type=parse_bytes, default=4 << 30,
                    help="shard limit, bytes or with K/M/G suffix (binary units; default 4G)")
    ap.add_argument("--dry-run", action="store_true", help="print the config, tensors and sizes; write nothing")
    ap.add_argument("--list", action="store_true", help="with --dry-run: list every tensor (experts included)")
    ap.add_argument("--force", action="store_true", help="write even if the free disk space looks too small")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="processes drawing tensors at once (default: one a CPU); the bytes do not depend on it")
    args = ap.parse_args()
    if args.layers is None:
        args.layers = 4 if args.family in ("kimi_linear", "glm5_next") else 2
    if args.layers < 1 or not 0 <= args.dense_layers <= args.layers:
        ap.error("need --layers >= 1 and 0 <= --dense-layers <= --layers")
    if args.family == "gpt_oss":
        if args.experts and args.experts < GPT_OSS_PRESETS[args.preset]["num_experts_per_tok"]:
            ap.error("--experts must be at least num_experts_per_tok (4)")
    elif args.family == "kimi_linear":
        topk = KIMI_PRESETS[args.preset]["num_experts_per_token"]
        if args.experts and args.experts < topk:
            ap.error(f"--experts must be at least num_experts_per_token ({topk})")
    elif args.family == "glm5_next":
        base = GLM_PRESETS[args.preset]
        per_group = base["n_routed_experts"] // base["n_group"]
        if args.experts and (args.experts < base["num_experts_per_tok"]
                             or (base["n_group"] > 1 and args.experts % per_group)):
            ap.error(f"--experts must be at least num_experts_per_tok ({base['num_experts_per_tok']})"
                     + (f" and a multiple of {per_group}" if base["n_group"] > 1 else ""))
    else:
        base = PRESETS[args.preset]
        per_group = base["n_routed_experts"] // base["n_group"]
        if args.experts and (args.experts % per_group or args.experts < base["num_experts_per_tok"]):
            ap.error(f"--experts must be a multiple of {per_group} and at least num_experts_per_tok "
                     f"({base['num_experts_per_tok']})")
    if not args.dry_run and not args.out:
        ap.error("--out is required unless --dry-run")

    if args.family == "gpt_oss":
        cfg = make_gpt_oss_config(args.preset, args.layers, args.experts)
        groups = plan_gpt_oss_tensors(cfg)
    elif args.family == "kimi_linear":
        cfg = make_kimi_config(args.preset, args.layers, args.dense_layers, args.experts)
        groups = plan_kimi_tensors(cfg)
    elif args.family == "glm5_next":
        cfg = make_glm_config(args.preset, args.layers, args.dense_layers, args.experts)
        groups = plan_glm_tensors(cfg)
    else:
        cfg = make_config(args.preset, args.layers, args.dense_layers, args.experts)
        groups = plan_tensors(cfg)
    tensors = [t for _, ts in groups for t in ts]
    nshards = assign_shards(tensors, args.max_shard_bytes)
    total = sum(t.nbytes for t in tensors)
    # Parameters: MXFP4 blocks hold two a byte; scales are not parameters.
    params = sum(t.numel * (2 if t.kind == "mxfp4" else 1) for t in tensors if t.kind not in ("scale", "e8m0"))

    def fname(s):
        return "model.safetensors" if nshards == 1 else f"model-{s + 1:05d}-of-{nshards:05d}.safetensors"

    shape = (f"{args.layers} layers ({args.dense_layers} dense, {args.layers - args.dense_layers} MoE)"
             if args.family == "deepseek_v32" else f"{args.layers} layers")
    if args.family == "kimi_linear":
        lin = cfg["linear_attn_config"]
        shape = (f"{args.layers} layers (KDA {lin['kda_layers']}, MLA {lin['full_attn_layers']}, 1-based; "
                 f"{args.dense_layers} dense, {args.layers - args.dense_layers} MoE)")
    if args.family == "glm5_next":
        lin = cfg["text_config"]["linear_attn_config"]
        shape = (f"{args.layers} layers (KDA {lin['kda_layers']}, MLA + DSA {lin['full_attn_layers']}, 0-based; "
                 f"{args.dense_layers} dense, {args.layers - args.dense_layers} MoE; no vision tower, no MTP layer)")
    print(f"{args.family} preset {args.preset}: {shape}, {len(tensors)} tensors, {params:,} parameters, "
          f"{total:,} bytes of tensor data ({human(total)}) in {nshards} shard(s)")
    for label, ts in groups:
        nb = sum(t.nbytes for t in ts)
        npar = sum(t.numel * (2 if t.kind == "mxfp4" else 1) for t in ts if t.kind not in ("scale", "e8m0"))
        print(f"  {label:<22} {len(ts):6d} tensors {npar:16,d} params {nb:16,d} bytes ({human(nb)})")

    if args.dry_run:
        print("config.json:")
        print(json.dumps(cfg, indent=2, sort_keys=True))
        for t in tensors:
            if args.list or not re.search(r"\.experts\.[1-9]\d*\.", t.name):
                print(f"  {t.name} {t.dtype} {list(t.shape)} {t.nbytes} -> {fname(t.shard)}")
        if not args.list:
            print("  (experts 1.. elided; --list shows all)")
        return

    os.makedirs(args.out, exist_ok=True)
    for fn in os.listdir(args.out):
        if re.fullmatch(r"model(-\d+-of-\d+)?\.safetensors(\.index\.json)?", fn):
            os.remove(os.path.join(args.out, fn))
    free = shutil.disk_usage(args.out).free
    if free < total + (64 << 20) and not args.force:
        sys.exit(f"generate_checkpoint: {human(total)} needed but only {human(free)} free in {args.out} "
                 f"(--force to try anyway)")
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")

    # Every shard's header first, each file at its full size; then the tensors, largest first, each drawn
    # from its own seeded generator and written at its offset, by --jobs processes at once.
    t0 = time.time()
    written, next_report = 0, 2 << 30
    tasks = []
    for s in range(nshards):
        ts = [t for t in tensors if t.shard == s]
        path = os.path.join(args.out, fname(s))
        hdr = shard_header(ts)
        with open(path, "wb") as f:
            f.write(hdr)
            f.truncate(len(hdr) + sum(t.nbytes for t in ts))
        written += len(hdr)
        tasks += [(path, len(hdr) + t.offset, t, args.seed) for t in ts]
    tasks.sort(key=lambda task: -task[2].nbytes)
    jobs = max(1, min(args.jobs, len(tasks)))
    if jobs > 1:
        methods = multiprocessing.get_all_start_methods()
        pool = multiprocessing.get_context("fork" if "fork" in methods else None).Pool(jobs)
        done = pool.imap_unordered(write_tensor, tasks, chunksize=1)
    else:
        pool, done = None, map(write_tensor, tasks)
    try:
        for n in done:
            written += n
            if written >= next_report:
                next_report += 2 << 30
                print(f"  ... {human(written)} of {human(total)} written ({time.time() - t0:.0f} s)",
                      file=sys.stderr, flush=True)
    finally:
        if pool:
            pool.close()
            pool.join()
    if nshards > 1:
        index = {"metadata": {"total_size": total},
                 "weight_map": {t.name: fname(t.shard) for t in sorted(tensors, key=lambda t: t.name)}}
        with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
    dt = time.time() - t0
    print(f"wrote {args.out}: {nshards} file(s), {written:,} bytes ({human(written)}) in {dt:.1f} s "
          f"({human(written / max(dt, 1e-9))}/s)")


if __name__ == "__main__":
    main()
