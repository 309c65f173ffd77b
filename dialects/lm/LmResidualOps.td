//===- LmResidualOps.td - Cross-layer residual ops ---------*- tablegen -*-===//
//
// Residual connections that reach across layers: Block Attention Residuals
// (Kimi) and manifold-constrained hyper-connections (mHC, DeepSeek-V4). The
// earlier layers' outputs are explicit operands, so their lifetimes are
// visible in the IR.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_LM_RESIDUAL_OPS_TD
#define DAYBREAK_LM_RESIDUAL_OPS_TD

include "dialects/lm/LmAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Lm_BlockAttnResOp : Lm_Op<"block_attn_res", [Pure]> {
  let summary = "Block AttnRes: depth softmax over earlier block outputs";
  let description = [{
    Mixes the sources `v_i [T, D]` (completed blocks, then the current
    partial block) with a softmax over depth whose logits compare each
    RMS-normalised source with a learned pseudo-query:
    `logit_i = sum_d v_i[d] / rms(v_i) * norm_weight[d] * proj[d]`,
    `rms(v) = sqrt(mean(v^2) + eps)`; `out = sum_i softmax_i(logit) v_i`.
    fp32 inside.

    ```mlir
    %h = lm.block_attn_res (%b0, %b1, %prefix) norm %g proj %w
        {eps = 1.0e-05 : f64}
        : (tensor<?x256xbf16>, tensor<?x256xbf16>, tensor<?x256xbf16>,
           tensor<256xbf16>, tensor<256xbf16>) -> tensor<?x256xbf16>
    ```
  }];
  let arguments = (ins Variadic<Lm_FloatTensor>:$sources,
                       Lm_WeightTensor:$norm_weight, Lm_WeightTensor:$proj,
                       F64Attr:$eps);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    `(` $sources `)` `norm` $norm_weight `proj` $proj attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_MhcPreOp : Lm_Op<"mhc_pre", [Pure]> {
  let summary = "mHC: collapse n residual streams into a sublayer input";
  let description = [{
    For `streams [T, n, D]`, computes the dynamic mixing coefficients of a
    manifold-constrained hyper-connection: `f = rms(flatten(X)) @ fn^T`
    with `fn [(2+n)n, nD]`, split into pre `[n]`, post `[n]` and comb
    `[n, n]` logits, each scaled by `scale [3]` and shifted by `base
    [(2+n)n]`; `pre = sigmoid(.) + eps`, `post = 2 sigmoid(.)`,
    `comb = Sinkhorn(softmax_row(.) + eps)` with `sinkhorn_iters`
    normalisations (doubly stochastic). Results: the sublayer input
    `sum_j pre_j X_j [T, D]`, `post [T, n]` and `comb [T, n, n]`.

    With `norm`, the sublayer input is `lm.rms_norm` of that sum with the
    weight `[D]` and `input_eps` (lm-fuse-mhc folds the sublayer's norm in,
    so the collapse and the norm are one pass over the streams).

    ```mlir
    %x, %post, %comb = lm.mhc_pre %streams, %fn, %base, %scale norm %w
        {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64,
         norm_eps = 1.0e-06 : f64, input_eps = 1.0e-05 : f64}
        : (tensor<?x4x64xf32>, tensor<24x256xf32>, tensor<24xf32>,
           tensor<3xf32>, tensor<64xbf16>) -> (tensor<?x64xf32>,
           tensor<?x4xf32>, tensor<?x4x4xf32>)
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$streams, Lm_F32Tensor:$fn,
                       Lm_F32Tensor:$base, Lm_F32Tensor:$scale,
                       Optional<Lm_WeightTensor>:$norm,
                       I64Attr:$sinkhorn_iters, F64Attr:$eps,
                       F64Attr:$norm_eps, OptionalAttr<F64Attr>:$input_eps);
  let results = (outs Lm_FloatTensor:$input, Lm_F32Tensor:$post,
                      Lm_F32Tensor:$comb);
  let assemblyFormat = [{
    $streams `,` $fn `,` $base `,` $scale (`norm` $norm^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_MhcPostOp : Lm_Op<"mhc_post", [Pure]> {
  let summary = "mHC: write a sublayer output back into the n streams";
  let description = [{
    `X'_k = post_k * y + sum_j comb[j, k] X_j`: `streams [T, n, D]`, the
    sublayer output `y [T, D]`, and `post`/`comb` from `lm.mhc_pre`.

    ```mlir
    %s1 = lm.mhc_post %streams, %y, %post, %comb
        : (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>,
           tensor<?x4x4xf32>) -> tensor<?x4x64xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$streams, Lm_FloatTensor:$y,
                       Lm_F32Tensor:$post, Lm_F32Tensor:$comb);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $streams `,` $y `,` $post `,` $comb attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_MhcPostPreOp : Lm_Op<"mhc_post_pre", [Pure]> {
  let summary = "mHC: a write-back and the next collapse in one pass";
  let description = [{
    `lm.mhc_post` of `streams`, `y`, `post` and `comb`, then `lm.mhc_pre`
    of the new streams with `fn`, `base`, `scale` and the optional `norm`:
    results the new streams `[T, n, D]` (for the next write-back) and the
    next sublayer's input, post and comb. lm-fuse-mhc forms it where a
    write-back feeds the next collapse, so the new streams are mixed while
    they are written instead of read back.

    ```mlir
    %s1, %x, %post1, %comb1 = lm.mhc_post_pre %s0, %y, %post, %comb,
        %fn, %base, %scale norm %w
        {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64,
         norm_eps = 1.0e-06 : f64, input_eps = 1.0e-05 : f64}
        : (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>,
           tensor<?x4x4xf32>, tensor<24x256xf32>, tensor<24xf32>,
           tensor<3xf32>, tensor<64xbf16>)
        -> (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>,
            tensor<?x4x4xf32>)
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$streams, Lm_FloatTensor:$y,
                       Lm_F32Tensor:$post, Lm_F32Tensor:$comb,
                       Lm_F32Tensor:$fn, Lm_F32Tensor:$base,
                       Lm_F32Tensor:$scale, Optional<Lm_WeightTensor>:$norm,
                       I64Attr:$sinkhorn_iters, F64Attr:$eps,
                       F64Attr:$norm_eps, OptionalAttr<F64Attr>:$input_eps);
  let results = (outs Lm_FloatTensor:$result, Lm_FloatTensor:$input,
                      Lm_F32Tensor:$next_post, Lm_F32Tensor:$next_comb);
  let assemblyFormat = [{
    $streams `,` $y `,` $post `,` $comb `,` $fn `,` $base `,` $scale
    (`norm` $norm^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // DAYBREAK_LM_RESIDUAL_OPS_TD
