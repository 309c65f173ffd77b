// RUN: daybreak-opt %s -split-input-file -verify-diagnostics --lm-lower-to-plan
// RUN: not daybreak-opt %s -split-input-file --lm-lower-to-plan="max-tokens=0" 2>&1 | FileCheck %s --check-prefix=MAX

// RUN: not daybreak-opt %s -split-input-file --lm-lower-to-plan="target=tpu" 2>&1 | FileCheck %s --check-prefix=TARGET

// MAX: error: max-tokens must be positive
// TARGET: error: lm-lower-to-plan: unknown target 'tpu' (expected cpu or cuda)

// Tests that an op with no plan lowering is reported.
func.func @no_lowering(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{no lowering to plan for this op}}
  %m = arith.mulf %a, %b : tensor<?x8xf32>
  return %m : tensor<?x8xf32>
}

// -----

// Tests that an lm op no runtime kernel runs (no declaration in
// runtime/abi/Kernels.def) is rejected at compile time, at the op.
func.func @no_kernel(%g: tensor<?x64xf32>, %u: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{no runtime kernel 'situ' (runtime/abi/Kernels.def) runs this op}}
  %y = lm.situ %g, %u {beta = 4.0 : f64, linear_beta = 25.0 : f64}
      : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Tests that a KDA step without `sequences` (its state one sequence's, not
// per-slot) is rejected: the runtime's state is a slot per sequence.
func.func @kda_step_unbatched(%q: tensor<?x2x8xf32>, %k: tensor<?x2x8xf32>,
    %v: tensor<?x2x8xf32>, %g: tensor<?x2x8xf32>, %beta: tensor<?x2xf32>,
    %s0: tensor<2x2x8x8xf32> {lm.state = #lm.state_layout<storage = f32, key_major = true>})
    -> (tensor<?x2x8xf32>, tensor<2x2x8x8xf32>) {
  // expected-error @+1 {{needs `sequences` (the state slot of each token) to lower to plan}}
  %o, %s1 = lm.kda_step %q, %k, %v, %g, %beta, %s0 {scale = 0.35 : f64}
      : (tensor<?x2x8xf32>, tensor<?x2x8xf32>, tensor<?x2x8xf32>,
         tensor<?x2x8xf32>, tensor<?x2xf32>, tensor<2x2x8x8xf32>)
      -> (tensor<?x2x8xf32>, tensor<2x2x8x8xf32>)
  return %o, %s1 : tensor<?x2x8xf32>, tensor<2x2x8x8xf32>
}

// -----

// Tests that a short convolution whose state is a computed value, not a
// per-sequence state argument, is rejected.
func.func @conv_state_not_an_argument(%x: tensor<?x8xf32>, %w: tensor<8x4xf32>,
    %s0: tensor<2x3x8xf32>, %seq: tensor<?xi32>) -> tensor<?x8xf32> {
  %s = arith.addf %s0, %s0 : tensor<2x3x8xf32>
  // expected-error @+1 {{only state that is a per-sequence state argument (lm.state) lowers to plan}}
  %y, %s1 = lm.short_conv %x, %w, %s sequences %seq silu
      : (tensor<?x8xf32>, tensor<8x4xf32>, tensor<2x3x8xf32>, tensor<?xi32>)
      -> (tensor<?x8xf32>, tensor<2x3x8xf32>)
  return %y : tensor<?x8xf32>
}

// -----

// Tests that a cache whose writer has no layout is reported.
func.func @no_layout(%c: tensor<2x64x80xf32>, %kv: tensor<?x80xf32>, %slots: tensor<?xi32>,
                     %seq: tensor<?xi32>) -> tensor<2x64x80xf32> {
  // expected-error @+1 {{caches need a layout (run lm-assign-kv-layout)}}
  %c1 = lm.cache_write %c, %kv, %slots sequences %seq
      : (tensor<2x64x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x80xf32>
  return %c1 : tensor<2x64x80xf32>
}

// -----

// Tests that a cache that is not a static [batch, max_seq_len, width] tensor
// is reported.
func.func @dynamic_cache(%c: tensor<?x80xf32>, %kv: tensor<?x80xf32>, %slots: tensor<?xi32>)
    -> tensor<?x80xf32> {
  // expected-error @+1 {{expects a static [batch, max_seq_len, width] cache, got 'tensor<?x80xf32>'}}
  %c1 = lm.cache_write %c, %kv, %slots
      {layout = #lm.kv_layout<key_value, page_size = 64, feature_dim = 80, storage = bf16,
                              scale_block = 0, tail_dim = 0, tail = bf16>}
      : (tensor<?x80xf32>, tensor<?x80xf32>, tensor<?xi32>) -> tensor<?x80xf32>
  return %c1 : tensor<?x80xf32>
}

// -----

// Tests that a slice along another dim than the last is reported.
func.func @row_slice(%a: tensor<8x80xf32>) -> tensor<4x80xf32> {
  // expected-error @+1 {{only slices of the last dim lower to plan}}
  %s = tensor.extract_slice %a[4, 0] [4, 80] [1, 1] : tensor<8x80xf32> to tensor<4x80xf32>
  return %s : tensor<4x80xf32>
}

// -----

// Tests that a concatenation along another dim than the last is reported.
func.func @row_concat(%a: tensor<4x80xf32>) -> tensor<8x80xf32> {
  // expected-error @+1 {{only last-dim concatenations lower to plan}}
  %c = tensor.concat dim(0) %a, %a : (tensor<4x80xf32>, tensor<4x80xf32>) -> tensor<8x80xf32>
  return %c : tensor<8x80xf32>
}

// -----

// Tests that an integer add of anything but a constant splat is reported.
func.func @add_tensors(%a: tensor<?xi32>, %b: tensor<?xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{only adding a constant splat lowers to plan}}
  %s = arith.addi %a, %b : tensor<?xi32>
  return %s : tensor<?xi32>
}

// -----

// Tests that an FP8 dequantisation that lm-fold-weights would have folded
// (its user is not an expert matmul) is reported, not launched.
lm.weight @w8 : tensor<8x48xf8E4M3FN> {sources = ["w8"]}
lm.weight @s : tensor<1x1xf32> {sources = ["s"]}
func.func @unfolded(%x: tensor<?x48xf32>) -> tensor<?x8xf32> {
  %w8 = lm.weight_ref @w8 : tensor<8x48xf8E4M3FN>
  %s = lm.weight_ref @s : tensor<1x1xf32>
  // expected-error @+1 {{only FP8 expert weights reach the lowering undequantised (run lm-fold-weights)}}
  %w = lm.fp8_dequant %w8, %s {block_size = array<i64: 128, 128>}
      : (tensor<8x48xf8E4M3FN>, tensor<1x1xf32>) -> tensor<8x48xf32>
  %y = lm.matmul %x, %w : (tensor<?x48xf32>, tensor<8x48xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Tests that per-sequence state must be a static [max_batch, ...] tensor.
// expected-error @+1 {{state argument 0 must be a static [max_batch, ...] tensor, got 'tensor<?x4xf32>'}}
func.func @dynamic_state(%s: tensor<?x4xf32> {lm.state = #lm.state_layout<storage = f32, key_major = true>})
    -> tensor<?x4xf32> {
  return %s : tensor<?x4xf32>
}

// -----

// Tests that dense attention over K and V tensors rather than cache views is
// reported: the attention kernel reads caches.
func.func @attention_over_tensors(%q: tensor<?x8x16xf32>, %k: tensor<64x2x16xf32>,
                                  %v: tensor<64x2x16xf32>) -> tensor<?x8x16xf32> {
  // expected-error @+1 {{only attention over K and V caches ([B, S, Hkv, D] views of cache arguments) lowers to plan}}
  %a = lm.attention %q, %k, %v causal {scale = 0.25 : f64}
      : (tensor<?x8x16xf32>, tensor<64x2x16xf32>, tensor<64x2x16xf32>) -> tensor<?x8x16xf32>
  return %a : tensor<?x8x16xf32>
}

// -----

// Tests that bidirectional attention over caches is reported: the attention
// kernel is causal.
func.func @bidirectional_over_caches(%kc: tensor<2x64x32xf32>, %kv: tensor<?x32xf32>,
                                     %q: tensor<?x8x16xf32>, %pos: tensor<?xi32>,
                                     %seq: tensor<?xi32>) -> (tensor<?x8x16xf32>, tensor<2x64x32xf32>) {
  %c = lm.cache_write %kc, %kv, %pos sequences %seq
      {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 32, storage = f32,
                              scale_block = 0, tail_dim = 0, tail = bf16>}
      : (tensor<2x64x32xf32>, tensor<?x32xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x32xf32>
  %k = tensor.expand_shape %c [[0], [1], [2, 3]] output_shape [2, 64, 2, 16]
      : tensor<2x64x32xf32> into tensor<2x64x2x16xf32>
  // expected-error @+1 {{bidirectional attention over caches has no runtime kernel}}
  %a = lm.attention %q, %k, %k q_positions %pos q_segments %seq bidirectional {scale = 0.25 : f64}
      : (tensor<?x8x16xf32>, tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32>,
         tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x16xf32>
  return %a, %c : tensor<?x8x16xf32>, tensor<2x64x32xf32>
}
