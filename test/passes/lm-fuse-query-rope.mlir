// RUN: daybreak-opt %s --pass-pipeline='builtin.module(func.func(lm-fuse-query-rope))' --split-input-file | FileCheck %s

// Tests that the RoPE that only feeds the DSA indexer's query becomes the
// indexer's prologue (DeepSeek's indexer query: heads of a projection,
// half-split over the first columns, YaRN), keeping the indexer's
// sequences and bounds; and that a rope with another reader stays.

// CHECK-LABEL: func.func @indexer_query
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<?x128xf32>, %[[P:[a-z0-9]+]]: tensor<?xi32>, %[[S:[a-z0-9]+]]: tensor<?xi32>, %[[B:[a-z0-9]+]]: tensor<?xi32>, %[[K:[a-z0-9]+]]: tensor<2x64x32xf32>, %[[W:[a-z0-9]+]]: tensor<?x4xf32>)
// CHECK: %[[H:.+]] = tensor.expand_shape %[[Q]]
// CHECK-NOT: lm.rope
// CHECK: %[[R:.+]] = lm.dsa_indexer_scores %[[H]], %[[K]], %[[W]] sequences %[[S]] bounds %[[B]] rope %[[P]] {rope_dim = 16 : i64, rope_offset = 0 : i64, rope_style = #lm<rope_style half_split>, scale = 1.250000e-01 : f64, theta = 1.000000e+04 : f64, yarn = #lm.yarn<factor = 4.000000e+01 : f64, original_max_positions = 64, beta_fast = 3.200000e+01 : f64, beta_slow = 1.000000e+00 : f64, attention_factor = 1.000000e+00 : f64, truncate = true>}
// CHECK-NEXT: return %[[R]]
func.func @indexer_query(%q: tensor<?x128xf32>, %pos: tensor<?xi32>,
                         %seq: tensor<?xi32>, %bounds: tensor<?xi32>,
                         %keys: tensor<2x64x32xf32>, %w: tensor<?x4xf32>)
    -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %q, %c0 : tensor<?x128xf32>
  %heads = tensor.expand_shape %q [[0], [1, 2]] output_shape [%t, 4, 32]
      : tensor<?x128xf32> into tensor<?x4x32xf32>
  %r = lm.rope %heads, %pos half_split {offset = 0 : i64, dim = 16 : i64,
      theta = 1.0e+04 : f64,
      yarn = #lm.yarn<factor = 40.0, original_max_positions = 64,
                      beta_fast = 32.0, beta_slow = 1.0,
                      attention_factor = 1.0, truncate = true>}
      : (tensor<?x4x32xf32>, tensor<?xi32>) -> tensor<?x4x32xf32>
  %s = lm.dsa_indexer_scores %r, %keys, %w sequences %seq bounds %bounds
      {scale = 0.125 : f64}
      : (tensor<?x4x32xf32>, tensor<2x64x32xf32>, tensor<?x4xf32>,
         tensor<?xi32>, tensor<?xi32>) -> tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}

// -----

// A rotated query with another reader keeps its rope.
// CHECK-LABEL: func.func @shared_query
// CHECK: %[[R:.+]] = lm.rope
// CHECK: %[[S:.+]] = lm.dsa_indexer_scores %[[R]], %{{.+}}, %{{.+}} {scale = 1.250000e-01 : f64}
// CHECK-NEXT: return %[[S]], %[[R]]
func.func @shared_query(%q: tensor<?x4x32xf32>, %pos: tensor<?xi32>,
                        %keys: tensor<64x32xf32>, %w: tensor<?x4xf32>)
    -> (tensor<?x64xf32>, tensor<?x4x32xf32>) {
  %r = lm.rope %q, %pos interleaved {offset = 8 : i64, dim = 16 : i64,
      theta = 1.0e+04 : f64}
      : (tensor<?x4x32xf32>, tensor<?xi32>) -> tensor<?x4x32xf32>
  %s = lm.dsa_indexer_scores %r, %keys, %w {scale = 0.125 : f64}
      : (tensor<?x4x32xf32>, tensor<64x32xf32>, tensor<?x4xf32>)
      -> tensor<?x64xf32>
  return %s, %r : tensor<?x64xf32>, tensor<?x4x32xf32>
}
