// RUN: daybreak-opt %s -split-input-file --lm-fuse-elementwise | FileCheck %s
// RUN: daybreak-opt %s -split-input-file --lm-fuse-elementwise | daybreak-opt -split-input-file | FileCheck %s

// Tests that a SwiGLU followed by a residual add, where the add is the
// SwiGLU's only user, becomes one lm.elementwise over the three inputs.
// CHECK-LABEL: func @swiglu_then_add
// CHECK-SAME: (%[[G:.*]]: tensor<?x8xf32>, %[[U:.*]]: tensor<?x8xf32>, %[[H:.*]]: tensor<?x8xf32>)
// CHECK: %[[R:.*]] = lm.elementwise(%[[H]], %[[G]], %[[U]])
// CHECK-NEXT: ^bb0(%[[C:.*]]: f32, %[[A:.*]]: f32, %[[B:.*]]: f32):
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: %[[ACT:.*]] = arith.mulf %[[A]], %{{.*}} : f32
// CHECK: %[[GLU:.*]] = arith.mulf %[[ACT]], %[[B]] : f32
// CHECK: %[[SUM:.*]] = arith.addf %[[C]], %[[GLU]] : f32
// CHECK: lm.yield %[[SUM]] : f32
// CHECK-NOT: lm.swiglu
// CHECK: return %[[R]]
func.func @swiglu_then_add(%g: tensor<?x8xf32>, %u: tensor<?x8xf32>, %h: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %a = lm.swiglu %g, %u : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = arith.addf %h, %a : tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

// Tests that a producer with two users is not merged: each op gets its own
// lm.elementwise, and gpt-oss's clamped SwiGLU keeps its clamps and +1.
// CHECK-LABEL: func @shared_producer
// CHECK: %[[S:.*]] = lm.elementwise
// CHECK: arith.minimumf
// CHECK: arith.maximumf
// CHECK: arith.constant 1.702
// CHECK: %[[X:.*]] = lm.elementwise(%[[S]], %{{.*}})
// CHECK: %[[Y:.*]] = lm.elementwise(%[[S]], %{{.*}})
// CHECK: return %[[X]], %[[Y]]
func.func @shared_producer(%g: tensor<4x8xf32>, %u: tensor<4x8xf32>, %h: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = lm.swiglu %g, %u {alpha = 1.702 : f64, limit = 7.0 : f64, up_offset = 1.0 : f64}
      : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %x = arith.addf %a, %h : tensor<4x8xf32>
  %y = arith.mulf %a, %h : tensor<4x8xf32>
  return %x, %y : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that non-pointwise ops stay as they are.
// CHECK-LABEL: func @untouched
// CHECK: lm.rms_norm
// CHECK-NOT: lm.elementwise
func.func @untouched(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = lm.rms_norm %x, %w {eps = 1.0e-06 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
