// RUN: daybreak-opt %s --pass-pipeline='builtin.module(func.func(lm-rope-rows))' --split-input-file | FileCheck %s
// RUN: daybreak-opt %s --pass-pipeline='builtin.module(func.func(lm-rope-rows),lm-fuse-projections)' --split-input-file | FileCheck %s --check-prefix=FUSED

// Tests that a rope of a projection's heads (gpt-oss's q: rows [T, H * D]
// reshaped to [T, H, D]) rotates the rows with head_dim = D and the result
// is reshaped instead, keeping the style, slice, theta and YaRN; and that
// the projection then stacks with another one of its input (FUSED).

// CHECK-LABEL: func.func @query_heads
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<?x32xf32>, %[[P:[a-z0-9]+]]: tensor<?xi32>)
// CHECK: %[[Q:.+]] = lm.matmul %[[X]]
// CHECK-NOT: tensor.expand_shape
// CHECK: %[[R:.+]] = lm.rope %[[Q]], %[[P]] half_split {dim = 8 : i64, head_dim = 16 : i64, offset = 2 : i64, theta = 1.500000e+05 : f64, yarn = #lm.yarn<factor = 3.200000e+01 : f64, original_max_positions = 64, beta_fast = 3.200000e+01 : f64, beta_slow = 1.000000e+00 : f64, attention_factor = 1.200000e+00 : f64, truncate = false>} : (tensor<?x64xf32>, tensor<?xi32>) -> tensor<?x64xf32>
// CHECK: %[[H:.+]] = tensor.expand_shape %[[R]] {{\[}}[0], [1, 2]] output_shape [%{{.+}}, 4, 16] : tensor<?x64xf32> into tensor<?x4x16xf32>
// CHECK: return %[[H]], %{{.+}}

// FUSED-LABEL: func.func @query_heads
// FUSED: %[[W:.+]] = lm.weight_ref @"q+k"
// FUSED: %[[QK:.+]] = lm.matmul %{{.+}}, %[[W]] : (tensor<?x32xf32>, tensor<96x32xbf16>) -> tensor<?x96xf32>
// FUSED-DAG: %[[Q:.+]] = tensor.extract_slice %[[QK]][0, 0] [%{{.+}}, 64] [1, 1]
// FUSED-DAG: %[[K:.+]] = tensor.extract_slice %[[QK]][0, 64] [%{{.+}}, 32] [1, 1]
// FUSED: lm.rope %[[Q]], %{{.+}} half_split {dim = 8 : i64, head_dim = 16 : i64
lm.weight @q : tensor<64x32xbf16> {sources = ["q"]}
lm.weight @k : tensor<32x32xbf16> {sources = ["k"]}
func.func @query_heads(%x: tensor<?x32xf32>, %pos: tensor<?xi32>)
    -> (tensor<?x4x16xf32>, tensor<?x32xf32>) {
  %qw = lm.weight_ref @q : tensor<64x32xbf16>
  %q = lm.matmul %x, %qw : (tensor<?x32xf32>, tensor<64x32xbf16>)
      -> tensor<?x64xf32>
  %kw = lm.weight_ref @k : tensor<32x32xbf16>
  %k = lm.matmul %x, %kw : (tensor<?x32xf32>, tensor<32x32xbf16>)
      -> tensor<?x32xf32>
  %c0 = arith.constant 0 : index
  %t = tensor.dim %q, %c0 : tensor<?x64xf32>
  %heads = tensor.expand_shape %q [[0], [1, 2]] output_shape [%t, 4, 16]
      : tensor<?x64xf32> into tensor<?x4x16xf32>
  %r = lm.rope %heads, %pos half_split {offset = 2 : i64, dim = 8 : i64,
      theta = 1.5e+05 : f64,
      yarn = #lm.yarn<factor = 32.0, original_max_positions = 64,
                      beta_fast = 32.0, beta_slow = 1.0,
                      attention_factor = 1.2, truncate = false>}
      : (tensor<?x4x16xf32>, tensor<?xi32>) -> tensor<?x4x16xf32>
  %kr = lm.rope %k, %pos interleaved {offset = 0 : i64, dim = 32 : i64,
      theta = 1.0e+04 : f64}
      : (tensor<?x32xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %r, %kr : tensor<?x4x16xf32>, tensor<?x32xf32>
}

// -----

// Heads that are not split from rows [T, W] (here [T, S, W] -> [T, S, H,
// D]), and a rope that already rotates rows, stay as they are.
// CHECK-LABEL: func.func @not_rows
// CHECK: %[[E:.+]] = tensor.expand_shape
// CHECK: lm.rope %[[E]], %{{.+}} interleaved {dim = 4 : i64, offset = 0 : i64, theta = 1.000000e+04 : f64}
// CHECK: lm.rope %{{.+}}, %{{.+}} interleaved {dim = 4 : i64, head_dim = 8 : i64, offset = 0 : i64, theta = 1.000000e+04 : f64}
func.func @not_rows(%x: tensor<?x2x16xf32>, %y: tensor<?x16xf32>,
                    %pos: tensor<?xi32>)
    -> (tensor<?x2x2x8xf32>, tensor<?x16xf32>) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %x, %c0 : tensor<?x2x16xf32>
  %e = tensor.expand_shape %x [[0], [1], [2, 3]] output_shape [%t, 2, 2, 8]
      : tensor<?x2x16xf32> into tensor<?x2x2x8xf32>
  %r = lm.rope %e, %pos interleaved {offset = 0 : i64, dim = 4 : i64,
      theta = 1.0e+04 : f64}
      : (tensor<?x2x2x8xf32>, tensor<?xi32>) -> tensor<?x2x2x8xf32>
  %s = lm.rope %y, %pos interleaved {offset = 0 : i64, dim = 4 : i64,
      theta = 1.0e+04 : f64, head_dim = 8 : i64}
      : (tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  return %r, %s : tensor<?x2x2x8xf32>, tensor<?x16xf32>
}
