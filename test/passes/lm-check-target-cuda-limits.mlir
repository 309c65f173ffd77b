// RUN: daybreak-opt %s -split-input-file -verify-diagnostics --lm-check-target=target=cuda
// RUN: sed /expected-error/d %s | daybreak-opt -split-input-file --lm-check-target=target=cpu \
// RUN:   | FileCheck %s --check-prefix=CPU

// Shapes the CUDA kernels do not take are rejected at compile time for
// target cuda, at the op, naming the dim and the limit; the CPU kernels take
// them (for cpu the ops pass through).

// CPU: lm.kda_chunk
// CPU: lm.kda_step
// CPU: lm.short_conv
// CPU: lm.short_conv

// Tests that a KDA key dim above 128 is rejected for cuda (chunked and step).
func.func @kda_wide_keys(%q: tensor<?x2x256xf32>, %v: tensor<?x2x32xf32>, %g: tensor<?x2x256xf32>,
                         %beta: tensor<?x2xf32>, %s: tensor<2x256x32xf32>, %sb: tensor<3x2x256x32xf32>,
                         %seq: tensor<?xi32>)
    -> (tensor<?x2x32xf32>, tensor<2x256x32xf32>, tensor<?x2x32xf32>, tensor<3x2x256x32xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op has key dim 256; target 'cuda' runs KDA with key dims up to 128}}
  %o, %s1 = lm.kda_chunk %q, %q, %v, %g, %beta, %s {scale = 0.0625 : f64, qk_l2norm}
      : (tensor<?x2x256xf32>, tensor<?x2x256xf32>, tensor<?x2x32xf32>, tensor<?x2x256xf32>,
         tensor<?x2xf32>, tensor<2x256x32xf32>) -> (tensor<?x2x32xf32>, tensor<2x256x32xf32>)
  // expected-error @+1 {{'lm.kda_step' op has key dim 256; target 'cuda' runs KDA with key dims up to 128}}
  %p, %s2 = lm.kda_step %q, %q, %v, %g, %beta, %sb sequences %seq {scale = 0.0625 : f64, qk_l2norm}
      : (tensor<?x2x256xf32>, tensor<?x2x256xf32>, tensor<?x2x32xf32>, tensor<?x2x256xf32>,
         tensor<?x2xf32>, tensor<3x2x256x32xf32>, tensor<?xi32>) -> (tensor<?x2x32xf32>, tensor<3x2x256x32xf32>)
  return %o, %s1, %p, %s2 : tensor<?x2x32xf32>, tensor<2x256x32xf32>, tensor<?x2x32xf32>, tensor<3x2x256x32xf32>
}

// -----

// Tests that short convolutions wider than 8 or of width 1 are rejected for
// cuda.
func.func @conv_widths(%x: tensor<?x8xf32>, %w9: tensor<8x9xf32>, %s9: tensor<8x8xf32>,
                       %w1: tensor<8x1xf32>, %s1: tensor<0x8xf32>)
    -> (tensor<?x8xf32>, tensor<8x8xf32>, tensor<?x8xf32>, tensor<0x8xf32>) {
  // expected-error @+1 {{'lm.short_conv' op has kernel width 9; target 'cuda' runs short convolutions of width 2 to 8}}
  %y, %t = lm.short_conv %x, %w9, %s9 silu
      : (tensor<?x8xf32>, tensor<8x9xf32>, tensor<8x8xf32>) -> (tensor<?x8xf32>, tensor<8x8xf32>)
  // expected-error @+1 {{'lm.short_conv' op has kernel width 1; target 'cuda' runs short convolutions of width 2 to 8}}
  %z, %u = lm.short_conv %x, %w1, %s1 silu
      : (tensor<?x8xf32>, tensor<8x1xf32>, tensor<0x8xf32>) -> (tensor<?x8xf32>, tensor<0x8xf32>)
  return %y, %t, %z, %u : tensor<?x8xf32>, tensor<8x8xf32>, tensor<?x8xf32>, tensor<0x8xf32>
}
