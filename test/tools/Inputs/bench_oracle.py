"""Checks a `daybreak-run bench` JSON against floors computed here from the checkpoint alone.

The oracle for bench-command.test: the bytes a decode step must move and the FLOPs of a prefill,
derived from config.json and the safetensors header (tensor names and shapes; kv_b_proj's block
scales) with DeepSeek-V3.2's, gpt-oss's or Kimi Linear's math, not from the artifact Daybreak compiled. Also checks the JSON's shape: every
requested case present, measured cases with positive times, skipped ones with a reason naming the limit.

    python3 bench_oracle.py CHECKPOINT bench.json --max-tokens 64 [--mxfp4-route direct|online|offline]
"""
import argparse
import json
import math
import struct
import sys


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def f32_values(path, info):
    """A little-endian F32 tensor's values (the checkpoint's block scales)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        begin, end = info["data_offsets"]
        f.seek(8 + n + begin)
        return struct.unpack(f"<{(end - begin) // 4}f", f.read(end - begin))


def fp8_row_bytes(values, tail):
    """An FP8 cache row: e4m3 codes, one fp32 scale per block of <= 128 values, a bf16 tail."""
    main = values - tail
    block = min(128, main)
    return main + 4 * math.ceil(main / block) + 2 * tail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("bench")
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--mxfp4-route", choices=("direct", "online", "offline"), default="direct")
    args = ap.parse_args()
    cfg = json.load(open(f"{args.checkpoint}/config.json"))
    tensors = {k: v for k, v in header(f"{args.checkpoint}/model.safetensors").items()
               if k != "__metadata__"}
    numel = {k: math.prod(v["shape"]) for k, v in tensors.items()}
    doc = json.load(open(args.bench))
    if cfg["model_type"] == "gpt_oss":
        failures = gpt_oss_failures(cfg, tensors, numel, doc, args)
    elif cfg["model_type"] == "kimi_linear":
        failures = kimi_linear_failures(cfg, tensors, numel, doc, args)
    else:
        failures = deepseek_failures(cfg, tensors, numel, doc, args)
    for f in failures:
        print("FAIL", f)
    measured = sum("skipped" not in r for r in doc["decode"] + doc["prefill"])
    print(f"checked {measured} measured cases, {len(failures)} failures")
    sys.exit(1 if failures else 0)


def check_times(doc, failures, max_tokens):
    for row in doc["decode"]:
        if "skipped" not in row and not (row["median_ms"] > 0 and row["p90_ms"] >= row["median_ms"]
                                         and row["tokens_per_s"] > 0):
            failures.append(f"decode {row['batch']}x{row['context']}: implausible times {row}")
    for row in doc["prefill"]:
        if "skipped" not in row and (row["steps"] != math.ceil(row["tokens"] / max_tokens) or not row["ms"] > 0):
            failures.append(f"prefill {row['tokens']}: {row}")


def closeness(failures):
    def close(what, got, want):
        if not math.isclose(got, want, rel_tol=1e-9):
            failures.append(f"{what}: bench says {got}, the checkpoint gives {want}")
    return close


def gpt_oss_failures(cfg, tensors, numel, doc, args):
    """gpt-oss (models.md 3): a decode step reads every weight as stored (bf16, f32 norms; the learned sinks
    widened to f32), the MXFP4 experts the batch picks under uniform routing as the route holds them (direct
    and online: the packed values, their E8M0 bytes and bf16 biases, which the online route's conversion
    reads; offline: one e4m3 byte a value and an f32 scale per 32), B embedding rows, and per layer and
    sequence the K and V rows the attention sees (min(C + 1, window) on sliding layers) plus the row each
    writes. A prefill does 2 P x every projection, top-k experts of 3 I x H each, and 2 heads (D + D) FLOPs per
    visible key."""
    failures = []
    close = closeness(failures)
    check_times(doc, failures, args.max_tokens)
    H, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    E, k, I = cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg["intermediate_size"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim") or H // heads
    window = cfg["sliding_window"]
    dtype_bytes = {"F32": 4, "BF16": 2, "U8": 1}

    def is_expert(name):
        return ".mlp.experts." in name

    def stored(n):
        if n.endswith(".sinks"):
            return 4 * numel[n]
        if args.mxfp4_route == "offline" and n.endswith("_blocks"):
            return 2 * numel[n]  # one e4m3 code per value, two values a packed byte
        if args.mxfp4_route == "offline" and n.endswith("_scales"):
            return 4 * numel[n]  # f32 2^(s - 127) per 32 values
        return dtype_bytes[tensors[n]["dtype"]] * numel[n]

    embed = "model.embed_tokens.weight"
    dense_bytes = sum(stored(n) for n in tensors if not is_expert(n) and n != embed)
    expert_bytes = sum(stored(n) for n in tensors if is_expert(n))
    embed_row = dtype_bytes[tensors[embed]["dtype"]] * H
    row = fp8_row_bytes(kv_heads * D, 0)  # one K or V row of a layer (the tests use fp8 caches)
    for r in doc["decode"]:
        if "skipped" in r:
            continue
        B, C = r["batch"], r["context"]
        share = 1 - (1 - k / E) ** B
        close(f"decode {B}x{C} weight bytes", r["floor_weight_bytes"],
              dense_bytes + min(B, V) * embed_row + share * expert_bytes)
        seen = [min(C + 1, window) if t == "sliding_attention" else C + 1 for t in cfg["layer_types"]]
        close(f"decode {B}x{C} cache bytes", r["floor_cache_bytes"], sum(B * 2 * (n + 1) * row for n in seen))

    linear = sum(numel[n] for n in tensors if n.endswith(".weight") and len(tensors[n]["shape"]) == 2
                 and not is_expert(n) and n != embed)
    for r in doc["prefill"]:
        if "skipped" in r:
            continue
        P = r["tokens"]
        flops = 2.0 * P * (linear + L * k * 3 * I * H)
        for t in cfg["layer_types"]:
            keys = sum(min(p + 1, window) if t == "sliding_attention" else p + 1 for p in range(P))
            flops += 2.0 * heads * (D + D) * keys
        close(f"prefill {P} FLOPs", r["floor_flops"], flops)
    return failures


def kimi_linear_failures(cfg, tensors, numel, doc, args):
    """Kimi Linear (models.md 2): per sequence, a decode step reads and writes every KDA layer's recurrent
    state (heads x Dk x Dk, f32 by default) and its q, k, v convolution windows (3 x heads x Dk x (W - 1),
    f32) once, and every MLA layer's latent rows [c_kv | k_pe] once, though attention takes them as keys
    and their c_kv prefix as values (C + 1 rows read, one written; fp8 rows in the tests). A prefill does
    2 P x every projection, top-k experts of 3 I x H each, 2 heads (kv_lora + rope + kv_lora) FLOPs per
    visible key in the absorbed MLA layers, and 6 heads Dk Dk per token in the KDA layers (the
    recurrence's three products). The weight bytes are the DeepSeek and gpt-oss oracles' business (same
    code path); this one checks what Kimi Linear adds."""
    failures = []
    close = closeness(failures)
    check_times(doc, failures, args.max_tokens)
    lin = cfg["linear_attn_config"]
    heads_kda, dk, width = lin["num_heads"], lin["head_dim"], lin["short_conv_kernel_size"]
    kda_layers, mla_layers = len(lin["kda_layers"]), len(lin["full_attn_layers"])
    kv, rope, heads = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"], cfg["num_attention_heads"]
    state = 4 * heads_kda * dk * dk + 4 * 3 * heads_kda * dk * (width - 1)
    latent_row = fp8_row_bytes(kv + rope, rope)
    for r in doc["decode"]:
        if "skipped" in r:
            continue
        B, C = r["batch"], r["context"]
        close(f"decode {B}x{C} state bytes", r["floor_state_bytes"], kda_layers * 2 * B * state)
        close(f"decode {B}x{C} cache bytes", r["floor_cache_bytes"], mla_layers * B * (C + 2) * latent_row)

    def is_expert(name):
        return ".experts." in name and "shared_experts" not in name

    H, E, k = cfg["hidden_size"], cfg["num_experts"], cfg["num_experts_per_token"]
    moe_layers = cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
    linear = sum(numel[n] for n in tensors if n.endswith(".weight") and len(tensors[n]["shape"]) == 2
                 and not is_expert(n) and n != "model.embed_tokens.weight")
    for r in doc["prefill"]:
        if "skipped" in r:
            continue
        P = r["tokens"]
        flops = 2.0 * P * (linear + moe_layers * k * 3 * cfg["moe_intermediate_size"] * H)
        flops += mla_layers * 2.0 * heads * (kv + rope + kv) * sum(p + 1 for p in range(P))
        flops += kda_layers * 6.0 * P * heads_kda * dk * dk
        close(f"prefill {P} FLOPs", r["floor_flops"], flops)
    return failures


def deepseek_failures(cfg, tensors, numel, doc, args):
    """DeepSeek-V3.2 (MLA with the DSA indexer, FP8 block-scaled weights, MoE after the dense layers)."""
    H, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    E, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    moe_layers = L - cfg["first_k_dense_replace"]
    heads, topk = cfg["num_attention_heads"], cfg["index_topk"]
    kv, rope = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]
    latent_row = fp8_row_bytes(kv + rope, rope)
    index_row = fp8_row_bytes(cfg["index_head_dim"], 0)

    def is_expert(name):
        return ".mlp.experts." in name

    params = [n for n in tensors if not n.endswith("_scale_inv")]
    # A decode step reads every weight once as the devices hold it: as the checkpoint stores it
    # (e4m3 codes and their fp32 block scales, bf16, fp32), except kv_b_proj, which MLA absorption
    # folds into the products of the same size (its scales are then not read): bf16 where every
    # product is a bf16 value (e4m3 codes times power-of-two scales), else fp32.
    dtype_bytes = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1}

    def power_of_two(v):
        return v != 0 and math.frexp(abs(v))[0] == 0.5

    def stored(n):
        if "kv_b_proj" in n:
            if n.endswith("_scale_inv"):
                return 0
            if tensors[n]["dtype"] != "F8_E4M3":
                return dtype_bytes[tensors[n]["dtype"]] * numel[n]
            scales = f32_values(f"{args.checkpoint}/model.safetensors",
                                tensors[n[: -len(".weight")] + ".weight_scale_inv"])
            return (2 if all(power_of_two(v) for v in scales) else 4) * numel[n]
        return dtype_bytes[tensors[n]["dtype"]] * numel[n]

    embed = "model.embed_tokens.weight"
    dense_bytes = sum(stored(n) for n in tensors if not is_expert(n) and n != embed)
    expert_bytes = sum(stored(n) for n in tensors if is_expert(n))
    embed_row = dtype_bytes[tensors[embed]["dtype"]] * H

    failures = []

    def close(what, got, want):
        if not math.isclose(got, want, rel_tol=1e-9):
            failures.append(f"{what}: bench says {got}, the checkpoint gives {want}")

    for row in doc["decode"]:
        B, C = row["batch"], row["context"]
        if "skipped" in row:
            continue
        if not (row["median_ms"] > 0 and row["p90_ms"] >= row["median_ms"] and row["tokens_per_s"] > 0):
            failures.append(f"decode {B}x{C}: implausible times {row}")
        share = 1 - (1 - k / E) ** B
        weights = dense_bytes + min(B, cfg["vocab_size"]) * embed_row + share * expert_bytes
        # Per layer and sequence: the indexer reads every key, sparse attention the top-k
        # latent rows, and the step writes one row of each cache.
        cache = L * B * ((C + 1) * index_row + min(C + 1, topk) * latent_row + index_row + latent_row)
        close(f"decode {B}x{C} weight bytes", row["floor_weight_bytes"], weights)
        close(f"decode {B}x{C} cache bytes", row["floor_cache_bytes"], cache)

    linear = sum(numel[n] for n in params if len(tensors[n]["shape"]) == 2 and not is_expert(n)
                 and n != "model.embed_tokens.weight")
    expert_per_token = k * 3 * cfg["moe_intermediate_size"] * H * moe_layers
    for row in doc["prefill"]:
        if "skipped" in row:
            continue
        P = row["tokens"]
        flops = 2.0 * P * (linear + expert_per_token)
        # Chunks of max_tokens see every earlier key: sums over all positions.
        keys = sum(p + 1 for p in range(P))
        sparse_keys = sum(min(p + 1, topk) for p in range(P))
        flops += L * 2.0 * cfg["index_n_heads"] * cfg["index_head_dim"] * keys
        flops += L * 2.0 * heads * (kv + rope + kv) * sparse_keys
        close(f"prefill {P} FLOPs", row["floor_flops"], flops)
        if row["steps"] != math.ceil(P / args.max_tokens) or not row["ms"] > 0:
            failures.append(f"prefill {P}: {row}")

    return failures


if __name__ == "__main__":
    main()
