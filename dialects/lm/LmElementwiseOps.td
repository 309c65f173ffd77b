//===- LmElementwiseOps.td - Norms, activations, RoPE ------*- tablegen -*-===//
//
// Ops that act independently per token: normalisations over the last dim,
// pointwise activations and rotary position embeddings.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_LM_ELEMENTWISE_OPS_TD
#define DAYBREAK_LM_ELEMENTWISE_OPS_TD

include "dialects/lm/LmAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

def Lm_RmsNormOp : Lm_Op<"rms_norm", [Pure]> {
  let summary = "RMS normalisation over the last dim";
  let description = [{
    `y = x / sqrt(mean(x^2) + eps) * weight`, computed in fp32 over the last
    dim of `input`; `weight` has that dim's size.

    ```mlir
    %y = lm.rms_norm %x, %w {eps = 1.0e-06 : f64}
        : (tensor<?x256xbf16>, tensor<256xbf16>) -> tensor<?x256xbf16>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, Lm_WeightTensor:$weight,
                       F64Attr:$eps);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_AddRmsNormOp : Lm_Op<"add_rms_norm", [Pure]> {
  let summary = "A residual add and the RMS normalisation of its sum";
  let description = [{
    `sum = input + residual`, then `result = rms_norm(sum, weight, eps)` as
    `lm.rms_norm` computes it: a block's residual update and the next
    sublayer's norm in one pass over the rows (`lm-fuse-add-norm` forms it
    from an `arith.addf` and the `lm.rms_norm` that reads it). `input`,
    `residual` and `sum` have one type; `result` their shape.

    ```mlir
    %h, %y = lm.add_rms_norm %x, %attn, %w {eps = 1.0e-06 : f64}
        : (tensor<?x256xf32>, tensor<?x256xf32>, tensor<256xf32>)
        -> (tensor<?x256xf32>, tensor<?x256xf32>)
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, Lm_FloatTensor:$residual,
                       Lm_WeightTensor:$weight, F64Attr:$eps);
  let results = (outs Lm_FloatTensor:$sum, Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $residual `,` $weight attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_LayerNormOp : Lm_Op<"layer_norm", [Pure]> {
  let summary = "Layer normalisation over the last dim";
  let description = [{
    `y = (x - mean) / sqrt(var + eps) * weight + bias` over the last dim,
    biased variance, fp32. `bias` is optional (the DSA indexer's `k_norm`
    has one).

    ```mlir
    %y = lm.layer_norm %x, %w bias %b {eps = 1.0e-06 : f64}
        : (tensor<8x128xf32>, tensor<128xf32>, tensor<128xf32>)
        -> tensor<8x128xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, Lm_WeightTensor:$weight,
                       Optional<Lm_WeightTensor>:$bias, F64Attr:$eps);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_GatedRmsNormOp : Lm_Op<"gated_rms_norm", [Pure]> {
  let summary = "RMS normalisation times an activated gate (KDA output)";
  let description = [{
    `y = rms_norm(x, weight, eps) * act(gate)` over the last dim, where `act`
    is `sigmoid` (Kimi Delta Attention) or `silu`. `input` and `gate` have
    the same shape; `weight` has the last dim's size (one head's width, so
    the norm is per head when the last dim is the head dim).

    ```mlir
    %y = lm.gated_rms_norm %o, %gate, %w sigmoid {eps = 1.0e-05 : f64}
        : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<16xf32>)
        -> tensor<4x2x16xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, Lm_FloatTensor:$gate,
                       Lm_WeightTensor:$weight, Lm_ActivationAttr:$activation,
                       F64Attr:$eps);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gate `,` $weight $activation attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

class Lm_UnaryOp<string mnemonic, string what> : Lm_Op<mnemonic,
    [Pure, SameOperandsAndResultType]> {
  let summary = what;
  let arguments = (ins Lm_FloatTensor:$input);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Lm_SigmoidOp : Lm_UnaryOp<"sigmoid", "logistic sigmoid, pointwise"> {
  let description = [{
    `y = 1 / (1 + exp(-x))`, e.g. KDA's per-head `beta`.

    ```mlir
    %beta = lm.sigmoid %b : tensor<?x32xf32>
    ```
  }];
}

def Lm_SiluOp : Lm_UnaryOp<"silu", "SiLU (swish), pointwise"> {
  let description = [{
    `y = x * sigmoid(x)`.

    ```mlir
    %y = lm.silu %x : tensor<?x64xbf16>
    ```
  }];
}

class Lm_GluOp<string mnemonic> : Lm_Op<mnemonic, [Pure]> {
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $gate `,` $up attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_SwigluOp : Lm_GluOp<"swiglu"> {
  let summary = "gated linear unit with a swish gate";
  let description = [{
    With `g' = min(g, limit)` and `u' = clamp(u, -limit, limit)` when `limit`
    is set (else `g' = g`, `u' = u`):
    `y = g' * sigmoid(alpha * g') * (u' + up_offset)`.
    DeepSeek: `alpha = 1`, no limit, `up_offset = 0`; gpt-oss: `alpha =
    1.702`, `limit = 7`, `up_offset = 1`. Computed in fp32.

    ```mlir
    %a = lm.swiglu %g, %u {alpha = 1.702 : f64, limit = 7.0 : f64,
                           up_offset = 1.0 : f64}
        : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$gate, Lm_FloatTensor:$up,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha,
                       OptionalAttr<F64Attr>:$limit,
                       DefaultValuedAttr<F64Attr, "0.0">:$up_offset);
}

def Lm_SituOp : Lm_GluOp<"situ"> {
  let summary = "SiTU gated linear unit (Kimi K3)";
  let description = [{
    `y = beta * tanh(g / beta) * sigmoid(g) * linear_beta * tanh(u /
    linear_beta)`: SwiGLU with both branches soft-clipped, in fp32.

    ```mlir
    %a = lm.situ %g, %u {beta = 4.0 : f64, linear_beta = 25.0 : f64}
        : (tensor<?x64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$gate, Lm_FloatTensor:$up,
                       F64Attr:$beta, F64Attr:$linear_beta);
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

def Lm_RopeOp : Lm_Op<"rope", [Pure]> {
  let summary = "rotary position embedding on a slice of the last dim";
  let description = [{
    Rotates `input[t, ..., offset : offset + dim]` by the angle
    `positions[t] * f_i` for each pair `i < dim / 2`, with
    `f_i = theta^(-2i / dim)` corrected by `yarn` when present. `style`
    says which dims pair up: `interleaved` rotates `(2i, 2i+1)` (DeepSeek
    MLA), `half_split` rotates `(i, i + dim/2)` (NeoX; the DSA indexer,
    gpt-oss). Dims outside the slice pass through, so MLA's `[nope | rope]`
    query and the indexer's `[rope | nope]` head need no slicing.

    With `head_dim`, each row of `input` is heads of `head_dim` columns and
    each head is rotated as a last dim of that size: `[T, H * D]` with
    `head_dim = D` is the `[T, H, D]` rope reshaped (`lm-rope-rows` makes
    it, so that the rows can be a column view of a wider projection).

    ```mlir
    %q = lm.rope %q0, %pos interleaved {offset = 32 : i64, dim = 16 : i64,
        theta = 10000.0 : f64,
        yarn = #lm.yarn<factor = 40.0, original_max_positions = 4096,
                        beta_fast = 32.0, beta_slow = 1.0,
                        attention_factor = 1.0, truncate = true>}
        : (tensor<?x4x48xf32>, tensor<?xi32>) -> tensor<?x4x48xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, Lm_PositionTensor:$positions,
                       Lm_RopeStyleAttr:$style, I64Attr:$offset, I64Attr:$dim,
                       F64Attr:$theta, OptionalAttr<Lm_YarnAttr>:$yarn,
                       OptionalAttr<I64Attr>:$head_dim);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions $style attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused elementwise
//===----------------------------------------------------------------------===//

def Lm_ElementwiseOp : Lm_Op<"elementwise", [Pure,
    SingleBlock, IsolatedFromAbove]> {
  let summary = "a fused pointwise computation over same-shaped tensors";
  let description = [{
    Applies the scalar body to every element position of `inputs` (all of
    the result's shape) and yields the result element. Made by
    `lm-fuse-elementwise` from chains of pointwise ops (residual adds,
    SwiGLU, SiLU, sigmoid) so that one generated kernel reads each input
    once and writes once. The body holds `arith` and `math` ops on scalars.

    ```mlir
    %y = lm.elementwise (%g, %u) : (tensor<?x64xf32>, tensor<?x64xf32>)
        -> tensor<?x64xf32> {
    ^bb0(%a: f32, %b: f32):
      %n = arith.negf %a : f32
      %e = math.exp %n : f32
      %one = arith.constant 1.0 : f32
      %d = arith.addf %one, %e : f32
      %s = arith.divf %a, %d : f32
      %r = arith.mulf %s, %b : f32
      lm.yield %r : f32
    }
    ```
  }];
  let arguments = (ins Variadic<Lm_FloatTensor>:$inputs);
  let results = (outs Lm_FloatTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, results) $body
  }];
  let hasVerifier = 1;
}

def Lm_YieldOp : Lm_Op<"yield", [Pure, Terminator,
    HasParent<"ElementwiseOp">]> {
  let summary = "the element an lm.elementwise body produces";
  let description = [{
    ```mlir
    lm.yield %r : f32
    ```
  }];
  let arguments = (ins AnyFloat:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

#endif // DAYBREAK_LM_ELEMENTWISE_OPS_TD
