//===- LmStateOps.td - Kimi Delta Attention state ops ------*- tablegen -*-===//
//
// The recurrent parts of Kimi Delta Attention: the causal short convolution
// with its rolling conv state, the per-channel forget gate, and the gated
// delta rule in chunked (prefill) and step (decode) form. States are
// explicit operands and results.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_LM_STATE_OPS_TD
#define DAYBREAK_LM_STATE_OPS_TD

include "dialects/lm/LmAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Lm_ShortConvOp : Lm_Op<"short_conv", [Pure]> {
  let summary = "causal depthwise convolution with a rolling state";
  let description = [{
    `input [T, C]`, `weight [C, W]`, `state [W-1, C]` (the `W-1` inputs
    that precede `input[0]`; zeros at the start of a sequence). With
    `xx = state ++ input`: `output[t, c] = act(sum_j weight[c, j] * xx[t +
    j, c])`, and `new_state` is the last `W-1` rows of `xx`. `act` is
    `none` or `silu`.

    With `sequences [T]` (I32) a step carries tokens of several sequences:
    `state` is `[B, W-1, C]`, one slot per sequence, and each slot's tokens
    (those `t` with `sequences[t] = b`, in step order) are convolved as
    above from slot `b`; slots no token names keep their state.

    ```mlir
    %y, %st = lm.short_conv %x, %w, %st0 silu
        : (tensor<?x4096xbf16>, tensor<4096x4xbf16>, tensor<3x4096xbf16>)
        -> (tensor<?x4096xbf16>, tensor<3x4096xbf16>)
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, Lm_WeightTensor:$weight,
                       Lm_FloatTensor:$state,
                       Optional<Lm_IndexTensor>:$sequences,
                       Lm_ActivationAttr:$activation);
  let results = (outs Lm_FloatTensor:$output, Lm_FloatTensor:$new_state);
  let assemblyFormat = [{
    $input `,` $weight `,` $state (`sequences` $sequences^)? $activation
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_KdaGateOp : Lm_Op<"kda_gate", [Pure]> {
  let summary = "KDA per-channel log-decay gate";
  let description = [{
    From the raw forget-gate projection `raw [T, H, Dk]`, per-head
    `a_log [H]` and `dt_bias [H, Dk]`:
    `g = -exp(a_log[h]) * softplus(raw + dt_bias)` (Kimi Linear), or with
    `lower_bound` (< 0): `g = lower_bound * sigmoid(exp(a_log[h]) * (raw +
    dt_bias))` (Kimi K3's bounded gate). `g <= 0` is a log decay; fp32.

    ```mlir
    %g = lm.kda_gate %raw, %alog, %dtb {lower_bound = -5.0 : f64}
        : (tensor<?x32x128xf32>, tensor<32xf32>, tensor<32x128xf32>)
        -> tensor<?x32x128xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$raw, Lm_F32Tensor:$a_log,
                       Lm_F32Tensor:$dt_bias, OptionalAttr<F64Attr>:$lower_bound);
  let results = (outs Lm_F32Tensor:$result);
  let assemblyFormat = [{
    $raw `,` $a_log `,` $dt_bias attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

class Lm_KdaOp<string mnemonic, dag extraArgs = (ins)>
    : Lm_Op<mnemonic, [Pure]> {
  let arguments = !con((ins Lm_FloatTensor:$q, Lm_FloatTensor:$k,
                            Lm_FloatTensor:$v, Lm_F32Tensor:$g,
                            Lm_FloatTensor:$beta, Lm_F32Tensor:$state,
                            Optional<Lm_IndexTensor>:$sequences,
                            F64Attr:$scale, UnitAttr:$qk_l2norm,
                            OptionalAttr<Lm_StateLayoutAttr>:$layout),
                       extraArgs);
  let results = (outs Lm_FloatTensor:$output, Lm_F32Tensor:$new_state);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $g `,` $beta `,` $state
    (`sequences` $sequences^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_KdaChunkOp : Lm_KdaOp<"kda_chunk",
    (ins DefaultValuedAttr<I64Attr, "64">:$chunk_size)> {
  let summary = "gated delta rule over one sequence (chunked, prefill)";
  let description = [{
    Kimi Delta Attention over the `T` tokens of one sequence, per head with
    state `S [Dk, Dv]` (fp32): `S <- diag(exp(g_t)) S`;
    `u = beta_t (v_t - S^T k_t)`; `S <- S + k_t u^T`; `o_t = S^T q_t`.
    `q, k, g [T, H, Dk]`, `v [T, H, Dv]`, `beta [T, H]`, `state [H, Dk,
    Dv]`. With `qk_l2norm`, `q` and `k` are L2-normalised per head first;
    `q` is then multiplied by `scale`. Equal to `lm.kda_step` applied token
    by token; implementations use the chunked WY/UT form with
    `chunk_size`-token chunks.

    With `sequences [T]` (I32) a step carries tokens of several sequences
    (a batched prefill): `state` is `[B, H, Dk, Dv]`, one slot per
    sequence, and each slot's tokens (in step order) run the rule from slot
    `b`'s state; slots no token names keep their state.

    ```mlir
    %o, %s1 = lm.kda_chunk %q, %k, %v, %g, %beta, %s0
        {scale = 0.0883883 : f64, qk_l2norm, chunk_size = 64 : i64}
        : (tensor<?x32x128xf32>, tensor<?x32x128xf32>, tensor<?x32x128xf32>,
           tensor<?x32x128xf32>, tensor<?x32xf32>, tensor<32x128x128xf32>)
        -> (tensor<?x32x128xf32>, tensor<32x128x128xf32>)
    ```
  }];
}

def Lm_KdaStepOp : Lm_KdaOp<"kda_step"> {
  let summary = "gated delta rule, one token per sequence (decode)";
  let description = [{
    One recurrent step of Kimi Delta Attention for a batch of `B`
    sequences: `q, k, g [B, H, Dk]`, `v [B, H, Dv]`, `beta [B, H]`,
    `state [B, H, Dk, Dv]`; same update as `lm.kda_chunk` with `T = 1`.
    With `sequences [T]` (I32) the tokens name slots of `state [B, H, Dk,
    Dv]` instead (a decode step over the slots of a step's sequences, `B`
    the slot count, not the token count); a slot named by several tokens
    takes them in step order, and slots no token names keep their state.

    ```mlir
    %o, %s1 = lm.kda_step %q, %k, %v, %g, %beta, %s0
        {scale = 0.0883883 : f64, qk_l2norm,
         layout = #lm.state_layout<storage = f32, key_major = true>}
        : (tensor<?x32x128xf32>, tensor<?x32x128xf32>, tensor<?x32x128xf32>,
           tensor<?x32x128xf32>, tensor<?x32xf32>, tensor<?x32x128x128xf32>)
        -> (tensor<?x32x128xf32>, tensor<?x32x128x128xf32>)
    ```
  }];
}

#endif // DAYBREAK_LM_STATE_OPS_TD
