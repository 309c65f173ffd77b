// RUN: daybreak-opt %s --pass-pipeline='builtin.module(func.func(lm-fuse-add-norm{target=cpu}))' --split-input-file | FileCheck %s
// RUN: daybreak-opt %s --pass-pipeline='builtin.module(func.func(lm-fuse-add-norm{target=cuda}))' --split-input-file | FileCheck %s
// RUN: not daybreak-opt %s --pass-pipeline='builtin.module(func.func(lm-fuse-add-norm{target=tpu}))' --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// Tests that a residual add and the RMS norm that reads it become one
// lm.add_rms_norm whose sum stands for the add everywhere, that the chain of
// a block (attention's update, the MLP's update, the next block's norm)
// fuses at each norm, and that nothing fuses where another reader of the
// sum comes before the norm or where the norm reads something else, on
// both targets (each implements the add_rms_norm kernel); an unknown target
// is an error.
// BAD: lm-fuse-add-norm: unknown target 'tpu' (expected cpu or cuda)

// A block: the update after attention feeds the MLP's norm and the next
// update; that one feeds the final norm and is returned.
// CHECK-LABEL: func.func @block
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<?x64xf32>, %[[A:[a-z0-9]+]]: tensor<?x64xf32>, %[[W1:[a-z0-9]+]]: tensor<64xf32>, %[[W2:[a-z0-9]+]]: tensor<64xbf16>)
// CHECK: %[[H:.+]], %[[N:.+]] = lm.add_rms_norm %[[X]], %[[A]], %[[W1]] {eps = 9.9999999999999995E-7 : f64} : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>)
// CHECK: %[[M:.+]] = lm.silu %[[N]]
// CHECK: %[[H2:.+]], %[[N2:.+]] = lm.add_rms_norm %[[H]], %[[M]], %[[W2]] {eps = 1.000000e-05 : f64}
// CHECK-NOT: arith.addf
// CHECK-NOT: lm.rms_norm
// CHECK: return %[[H2]], %[[N2]]
func.func @block(%x: tensor<?x64xf32>, %a: tensor<?x64xf32>,
                 %w1: tensor<64xf32>, %w2: tensor<64xbf16>)
    -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %h = arith.addf %x, %a : tensor<?x64xf32>
  %n = lm.rms_norm %h, %w1 {eps = 1.0e-06 : f64}
      : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %m = lm.silu %n : tensor<?x64xf32>
  %h2 = arith.addf %h, %m : tensor<?x64xf32>
  %n2 = lm.rms_norm %h2, %w2 {eps = 1.0e-05 : f64}
      : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  return %h2, %n2 : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// The sum is read before the norm: the add stays, so does the norm.
// CHECK-LABEL: func.func @read_before
// CHECK: %[[H:.+]] = arith.addf
// CHECK: lm.silu %[[H]]
// CHECK: lm.rms_norm %[[H]]
// CHECK-NOT: lm.add_rms_norm
func.func @read_before(%x: tensor<4x64xf32>, %a: tensor<4x64xf32>,
                       %w: tensor<64xf32>)
    -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  %h = arith.addf %x, %a : tensor<4x64xf32>
  %s = lm.silu %h : tensor<4x64xf32>
  %n = lm.rms_norm %h, %w {eps = 1.0e-06 : f64}
      : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return %s, %n : tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

// A norm of something that is not an add, and an add no norm reads: both
// stay as they are.
// CHECK-LABEL: func.func @no_pair
// CHECK: arith.addf
// CHECK: lm.rms_norm
// CHECK-NOT: lm.add_rms_norm
func.func @no_pair(%x: tensor<4x64xf32>, %a: tensor<4x64xf32>,
                   %w: tensor<64xf32>)
    -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  %h = arith.addf %x, %a : tensor<4x64xf32>
  %s = lm.silu %x : tensor<4x64xf32>
  %n = lm.rms_norm %s, %w {eps = 1.0e-06 : f64}
      : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return %h, %n : tensor<4x64xf32>, tensor<4x64xf32>
}
