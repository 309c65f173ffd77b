// RUN: daybreak-opt %s -split-input-file -verify-diagnostics --lm-check-target
// RUN: daybreak-opt %s -split-input-file -verify-diagnostics --lm-check-target=target=cuda
// RUN: not daybreak-opt %s -split-input-file --lm-check-target=target=tpu 2>&1 | FileCheck %s --check-prefix=TARGET

// TARGET: error: lm-check-target: unknown target 'tpu' (expected cpu or cuda)

// Kernels.def declares every kernel for both targets, so the cases below are
// ops that no runtime kernel runs at all: rejected for each target, at the
// op, naming the kernel the lowering would launch and the target.

// Tests that a SiTU activation (Kimi K3), which no runtime kernel runs
// yet, is rejected at the op.
func.func @situ(%g: tensor<?x64xf32>, %u: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error-re @+1 {{'lm.situ' op has no runtime kernel: no declaration of 'situ' in runtime/abi/Kernels.def, so target '{{cpu|cuda}}' cannot run it}}
  %y = lm.situ %g, %u {beta = 4.0 : f64, linear_beta = 25.0 : f64}
      : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Tests that every illegal op of a function is reported, not only the
// first.
func.func @situ_twice(%g: tensor<?x64xf32>, %u: tensor<?x64xf32>)
    -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  // expected-error @+1 {{'lm.situ' op has no runtime kernel: no declaration of 'situ'}}
  %y = lm.situ %g, %u {beta = 4.0 : f64, linear_beta = 25.0 : f64}
      : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  // expected-error @+1 {{'lm.situ' op has no runtime kernel: no declaration of 'situ'}}
  %z = lm.situ %y, %u {beta = 4.0 : f64, linear_beta = 25.0 : f64}
      : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return %y, %z : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// Tests that an FP8 dequantisation of a weight feeding anything but an
// expert matmul (lm-fold-weights folds those) is rejected: no kernel
// dequantises at run time.
lm.weight @w8 : tensor<8x48xf8E4M3FN> {sources = ["w8"]}
lm.weight @s : tensor<1x1xf32> {sources = ["s"]}
func.func @unfolded(%x: tensor<?x48xf32>) -> tensor<?x8xf32> {
  %w8 = lm.weight_ref @w8 : tensor<8x48xf8E4M3FN>
  %s = lm.weight_ref @s : tensor<1x1xf32>
  // expected-error @+1 {{'lm.fp8_dequant' op has no runtime kernel: no declaration of 'fp8_dequant' in runtime/abi/Kernels.def}}
  %w = lm.fp8_dequant %w8, %s {block_size = array<i64: 128, 128>}
      : (tensor<8x48xf8E4M3FN>, tensor<1x1xf32>) -> tensor<8x48xf32>
  %y = lm.matmul %x, %w : (tensor<?x48xf32>, tensor<8x48xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Tests that an op outside lm with no lowering (a float multiply that
// lm-fuse-elementwise has not fused) is rejected at the op.
func.func @unfused(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error-re @+1 {{'arith.mulf' op has no lowering to a runtime kernel, so target '{{cpu|cuda}}' cannot run it}}
  %m = arith.mulf %a, %b : tensor<?x8xf32>
  return %m : tensor<?x8xf32>
}

// -----

// Tests that dense attention over K and V tensors (not cache views) is
// rejected at the op: the runtime's attention kernel reads caches.
func.func @attention_over_tensors(%q: tensor<?x8x16xf32>, %k: tensor<64x2x16xf32>,
                                  %v: tensor<64x2x16xf32>) -> tensor<?x8x16xf32> {
  // expected-error-re @+1 {{'lm.attention' op has no lowering to a runtime kernel, so target '{{cpu|cuda}}' cannot run it}}
  %a = lm.attention %q, %k, %v causal {scale = 0.25 : f64}
      : (tensor<?x8x16xf32>, tensor<64x2x16xf32>, tensor<64x2x16xf32>) -> tensor<?x8x16xf32>
  return %a : tensor<?x8x16xf32>
}

// -----

// Tests that bidirectional attention over cache views is rejected at the op:
// the runtime's attention kernel is causal.
func.func @bidirectional_over_caches(%q: tensor<?x8x16xf32>, %k: tensor<2x64x2x16xf32>,
                                     %v: tensor<2x64x2x16xf32>, %pos: tensor<?xi32>,
                                     %seq: tensor<?xi32>) -> tensor<?x8x16xf32> {
  // expected-error-re @+1 {{'lm.attention' op has no lowering to a runtime kernel, so target '{{cpu|cuda}}' cannot run it}}
  %a = lm.attention %q, %k, %v q_positions %pos q_segments %seq bidirectional {scale = 0.25 : f64}
      : (tensor<?x8x16xf32>, tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32>,
         tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x16xf32>
  return %a : tensor<?x8x16xf32>
}
