//===- LmMatmulOps.td - Matmuls and MoE routing ------------*- tablegen -*-===//
//
// Matmuls against weights in the checkpoint's storage formats (plain, FP8
// block-scaled, MXFP4 experts) and the router that drives the experts.
// Weights are in PyTorch `[out, in]` layout: `y = x @ W^T`.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_LM_MATMUL_OPS_TD
#define DAYBREAK_LM_MATMUL_OPS_TD

include "dialects/lm/LmAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Lm_MatmulOp : Lm_Op<"matmul", [Pure]> {
  let summary = "x @ W^T (+ bias)";
  let description = [{
    `result[..., n] = sum_k input[..., k] * weight[n, k] (+ bias[n])`, fp32
    accumulation. `input` has any rank >= 1; `weight` is `[N, K]`.

    ```mlir
    %y = lm.matmul %x, %w bias %b
        : (tensor<?x256xbf16>, tensor<512x256xbf16>, tensor<512xbf16>)
        -> tensor<?x512xbf16>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, Lm_WeightTensor:$weight,
                       Optional<Lm_WeightTensor>:$bias);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_Fp8MatmulOp : Lm_Op<"fp8_matmul", [Pure]> {
  let summary = "x @ W^T with an FP8 E4M3 weight and per-block scales";
  let description = [{
    The weight is `weight[n, k] * scale_inv[n / bn, k / bk]` with
    `block_size = [bn, bk]` (DeepSeek: `[128, 128]`); `scale_inv` has shape
    `[ceil(N / bn), ceil(K / bk)]`, so edge blocks may be partial. fp32
    accumulation.

    ```mlir
    %y = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>}
        : (tensor<?x7168xbf16>, tensor<1536x7168xf8E4M3FN>, tensor<12x56xf32>)
        -> tensor<?x1536xbf16>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, Lm_Fp8Tensor:$weight,
                       Lm_F32Tensor:$scale_inv,
                       DenseI64ArrayAttr:$block_size);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $scale_inv attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_Mxfp4ExpertMatmulOp : Lm_Op<"mxfp4_expert_matmul",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "grouped expert matmul over MXFP4 (E2M1 + E8M0) weights";
  let description = [{
    For each token `t` and routing slot `j`, multiplies the token's row by
    expert `e = indices[t, j]`: `y[t, j, n] = sum_k x[t, (j,) k] *
    weight[e, n, k] * scales[e, n, k / 32] (+ bias[e, n])`. `weight` holds
    E2M1 values `[E, N, K]` and `scales` one E8M0 power of two per 32 along
    K, `[E, N, K / 32]` (the layout of gpt-oss and Kimi K3 experts, logically
    unpacked; the storage planner decides the packing). `input` is `[T, K]`
    (every slot reads the token's row) or `[T, k, K]` (one row per slot).
    An index of -1 leaves its slot empty. With `routing_weights [T, k]` the
    result is the weighted sum over slots, `[T, N]`; without it, `[T, k, N]`.

    ```mlir
    %h = lm.mxfp4_expert_matmul %x, %w, %s, %idx bias %b
        : (tensor<?x64xbf16>, tensor<8x128x64xf4E2M1FN>,
           tensor<8x128x2xf8E8M0FNU>, tensor<?x2xi32>, tensor<8x128xbf16>)
        -> tensor<?x2x128xf32>
    %y = lm.mxfp4_expert_matmul %a, %w2, %s2, %idx weights %rw
        : (tensor<?x2x64xf32>, tensor<8x64x64xf4E2M1FN>,
           tensor<8x64x2xf8E8M0FNU>, tensor<?x2xi32>, tensor<?x2xf32>)
        -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, Lm_Fp4Tensor:$weight,
                       Lm_E8M0Tensor:$scales, Lm_IndexTensor:$indices,
                       Optional<Lm_F32Tensor>:$routing_weights,
                       Optional<Lm_WeightTensor>:$bias);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $scales `,` $indices
    (`weights` $routing_weights^)? (`bias` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_Mxfp4ToFp8ExpertsOp : Lm_Op<"mxfp4_to_fp8_experts", [Pure]> {
  let summary = "the step's selected MXFP4 experts converted to FP8";
  let description = [{
    The online MXFP4 route (`lm-mxfp4-route{route=online}`): the distinct
    experts that `indices [T, k]` name (ids >= 0), in increasing id order,
    go to the workspace slots 0, 1, ...: `codes [S, N, K]` E4M3 (each E2M1
    value re-encoded, exactly), `block_scales [S, N, K / 32]` f32 (the
    block's `2^(scale - 127)`, exact; NaN for byte 255) and `slot_bias [S,
    N]` f32 (the expert's bias row, zero without `bias`). `slots [T, k]`
    names each (token, slot)'s workspace slot; -1 stays -1. So an
    `lm.expert_matmul` over `lm.fp8_dequant %codes, %block_scales
    {block_size = [1, 32]}` with `slots` (and `slot_bias`) computes what
    `lm.mxfp4_expert_matmul` does. `S` must hold every expert a step can
    select, `min(E, max_tokens x k)`; slots past the distinct count are
    unspecified (the reference evaluator zeroes them, the kernels leave
    them).

    With `all_from_tokens = T0` (the online route's overlapped conversion,
    which needs `S = E`), a step of `T >= T0` tokens (the rows of
    `indices`) holds every expert `e` in slot `e` and `slots` is `indices`
    (ids outside [0, E) as -1): such a step selects nearly every expert, so
    converting all of them needs no routing and can run ahead of it, beside
    the previous layer (plan-overlap-conversions). Below `T0` it is the
    selection above. `lm.expert_matmul` computes the same either way.

    ```mlir
    %c, %s, %b, %slots = lm.mxfp4_to_fp8_experts %w, %sc, %idx bias %bias
        : (tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>,
           tensor<?x2xi32>, tensor<8x128xbf16>)
        -> (tensor<8x128x64xf8E4M3FN>, tensor<8x128x2xf32>,
            tensor<8x128xf32>, tensor<?x2xi32>)
    ```
  }];
  let arguments = (ins Lm_Fp4Tensor:$weight, Lm_E8M0Tensor:$scales,
                       Lm_IndexTensor:$indices,
                       Optional<Lm_WeightTensor>:$bias,
                       OptionalAttr<I64Attr>:$all_from_tokens);
  let results = (outs Lm_Fp8Tensor:$codes, Lm_F32Tensor:$block_scales,
                      Lm_F32Tensor:$slot_bias, Lm_IndexTensor:$slots);
  let assemblyFormat = [{
    $weight `,` $scales `,` $indices (`bias` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_HeadMatmulOp : Lm_Op<"head_matmul", [Pure]> {
  let summary = "per-head matmul (MLA absorption)";
  let description = [{
    `result[t, h, n] = sum_k input[t, h, k] * weight[h, k, n]` with `weight
    [H, K, N]`, or `weight[h, n, k]` with `transpose_weight` (`[H, N, K]`).
    MLA in absorbed form multiplies each query head's nope part by its
    `W_UK[h]` and each head's latent output by `W_UV[h]`.

    ```mlir
    %ql = lm.head_matmul %qn, %wuk
        : (tensor<?x4x32xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x64xf32>
    %o = lm.head_matmul %ol, %wuv {transpose_weight}
        : (tensor<?x4x64xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x32xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, Lm_WeightTensor:$weight,
                       UnitAttr:$transpose_weight);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_Fp8DequantOp : Lm_Op<"fp8_dequant", [Pure]> {
  let summary = "dequantise an FP8 block-scaled weight";
  let description = [{
    `result[.., n, k] = weight[.., n, k] * scale_inv[.., n / bn, k / bk]`
    for a `[N, K]` or `[E, N, K]` E4M3 weight with `block_size = [bn, bk]`.
    Used on weights only (MLA absorption, stacked experts), so compilation
    folds it; activations go through `lm.fp8_matmul`.

    ```mlir
    %w = lm.fp8_dequant %w8, %s {block_size = array<i64: 128, 128>}
        : (tensor<256x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Lm_Fp8Tensor:$weight, Lm_F32Tensor:$scale_inv,
                       DenseI64ArrayAttr:$block_size);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $weight `,` $scale_inv attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_TransposeOp : Lm_Op<"transpose", [Pure]> {
  let summary = "permute the dimensions of a weight";
  let description = [{
    `result` has dimension `d` of size `input` dimension `permutation[d]`:
    `result[i_0, .., i_n] = input[j]` with `j[permutation[d]] = i_d`. Used
    on weights only, to store them in the layout a kernel reads (MLA's
    `W_UK[h]` as `[N, K]`), so compilation folds it; no device runs it.

    ```mlir
    %t = lm.transpose %w {permutation = array<i64: 0, 2, 1>}
        : (tensor<4x32x64xbf16>) -> tensor<4x64x32xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       DenseI64ArrayAttr:$permutation);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_ExpertMatmulOp : Lm_Op<"expert_matmul", [Pure,
    AttrSizedOperandSegments]> {
  let summary = "grouped expert matmul over plain (bf16/f16/f32) weights";
  let description = [{
    The routing semantics of `lm.mxfp4_expert_matmul` over a stacked
    `weight [E, N, K]` of a plain float type (DeepSeek's bf16 experts, or
    FP8 experts after `lm.fp8_dequant`): `y[t, j, n] = sum_k x[t, (j,) k] *
    weight[indices[t, j], n, k]`; -1 leaves a slot empty; with
    `routing_weights [T, k]` the result is the weighted sum `[T, N]`.

    ```mlir
    %g = lm.expert_matmul %x, %wg, %idx
        : (tensor<?x256xf32>, tensor<8x64x256xbf16>, tensor<?x2xi32>)
        -> tensor<?x2x64xf32>
    %y = lm.expert_matmul %a, %wd, %idx weights %rw
        : (tensor<?x2x64xf32>, tensor<8x256x64xbf16>, tensor<?x2xi32>,
           tensor<?x2xf32>) -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, Lm_WeightTensor:$weight,
                       Lm_IndexTensor:$indices,
                       Optional<Lm_F32Tensor>:$routing_weights,
                       Optional<Lm_WeightTensor>:$bias);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $indices (`weights` $routing_weights^)?
    (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_MoeRouteOp : Lm_Op<"moe_route", [Pure]> {
  let summary = "MoE router: logits to top-k expert ids and weights";
  let description = [{
    `routing` selects the scheme:
    - `sigmoid` (DeepSeek-V3 `noaux_tc`, Kimi): `s = sigmoid(logits)`;
      experts are selected on `s + bias`, limited to the `top_k_groups` best
      of `num_groups` equal groups (group score: sum of its two best biased
      scores); the weights are the unbiased `s` of the selected experts,
      renormalised when `renormalize`, times `scaling_factor`.
    - `softmax`: softmax over all experts, top-k, optional renormalisation,
      times `scaling_factor`.
    - `softmax_topk` (gpt-oss): top-k of the raw logits, softmax over them.
    Ties select the lower expert id. Results are sorted by descending
    selection score. With `shared_experts` S, each token's S slots after
    its top_k hold the experts numbered from the logits' count on (E, E + 1,
    ...) with weight 1: shared experts stacked after the routed ones, so
    that the routed experts' matmuls compute them in the same launches.

    ```mlir
    %idx, %wts = lm.moe_route %logits bias %corr sigmoid {top_k = 8 : i64,
        num_groups = 8 : i64, top_k_groups = 4 : i64, renormalize = true,
        scaling_factor = 2.5 : f64}
        : (tensor<?x256xf32>, tensor<256xf32>)
        -> (tensor<?x8xi32>, tensor<?x8xf32>)
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$logits, Optional<Lm_F32Tensor>:$bias,
                       Lm_RoutingScoreAttr:$routing, I64Attr:$top_k,
                       DefaultValuedAttr<I64Attr, "1">:$num_groups,
                       DefaultValuedAttr<I64Attr, "1">:$top_k_groups,
                       DefaultValuedAttr<BoolAttr, "true">:$renormalize,
                       DefaultValuedAttr<F64Attr, "1.0">:$scaling_factor,
                       DefaultValuedAttr<I64Attr, "0">:$shared_experts);
  let results = (outs Lm_IndexTensor:$indices, Lm_F32Tensor:$weights);
  let assemblyFormat = [{
    $logits (`bias` $bias^)? $routing attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // DAYBREAK_LM_MATMUL_OPS_TD
