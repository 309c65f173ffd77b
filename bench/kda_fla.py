#!/usr/bin/env python3
"""The flash-linear-attention (fla) KDA kernels at Kimi-Linear-48B's dims, the
baseline of DaybreakKernelBench's `kda` cases (bench/NOTES.md).

    python3 bench/kda_fla.py [--json out.json]

chunk_kda (Triton, chunked prefill) on one sequence of 4K to 64K tokens and
fused_recurrent_kda (decode) on B sequences of one token: 32 heads, K = V =
128, fp32 state in and out, q and k L2-normalised in the kernel, g the
precomputed log decay. Inputs in bf16 (fla's usual precision) and, for
chunk_kda, fp32 too (Daybreak's). Times are CUDA-event medians of 10 runs
after 3 warm-ups. Needs torch, triton and fla (fla-core + einops wheels).
"""
import argparse
import json

import torch

from fla.ops.kda import chunk_kda, fused_recurrent_kda

H, D = 32, 128


def median_ms(fn, reps=10, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def inputs(batch, tokens, dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(batch, tokens, H, D, device="cuda", dtype=dtype, generator=g)
    k = torch.randn(batch, tokens, H, D, device="cuda", dtype=dtype, generator=g)
    v = torch.randn(batch, tokens, H, D, device="cuda", dtype=dtype, generator=g)
    decay = -torch.rand(batch, tokens, H, D, device="cuda", dtype=torch.float32, generator=g) * 0.1
    beta = torch.rand(batch, tokens, H, device="cuda", dtype=dtype, generator=g)
    state = torch.zeros(batch, H, D, D, device="cuda", dtype=torch.float32)
    return q, k, v, decay.to(dtype), beta, state


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        for tokens in (4096, 8192, 16384, 32768, 65536):
            q, k, v, g, beta, state = inputs(1, tokens, dtype)
            try:
                ms = median_ms(lambda: chunk_kda(q, k, v, g, beta, scale=D ** -0.5, initial_state=state,
                                                 output_final_state=True, use_qk_l2norm_in_kernel=True))
            except Exception as e:  # an unsupported dtype is a row saying so
                print(f"chunk_kda {dtype} T={tokens}: {type(e).__name__}: {e}")
                continue
            rows.append({"kernel": "chunk_kda", "dtype": str(dtype), "tokens": tokens, "ms": ms})
            print(f"chunk_kda           prefill T={tokens:<6} {str(dtype):15} {ms:9.3f} ms {tokens / ms / 1e3:8.1f} Mtok/s")
            del q, k, v, g, beta, state
    for batch in (1, 8, 64, 256):
        q, k, v, g, beta, state = inputs(batch, 1, torch.bfloat16)
        ms = median_ms(lambda: fused_recurrent_kda(q, k, v, g, beta, scale=D ** -0.5, initial_state=state,
                                                   output_final_state=True, use_qk_l2norm_in_kernel=True),
                       reps=50)
        state_bytes = 2 * batch * H * D * D * 4
        rows.append({"kernel": "fused_recurrent_kda", "dtype": "torch.bfloat16", "batch": batch, "ms": ms})
        print(f"fused_recurrent_kda decode B={batch:<5} bf16 in, f32 state {ms * 1e3:9.2f} us "
              f"{state_bytes / ms / 1e6:8.1f} GB/s of state")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
