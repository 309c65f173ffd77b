// RUN: daybreak-opt %s --lm-assign-kv-layout="kv-cache-dtype=f32" | FileCheck %s
// RUN: daybreak-opt %s --lm-assign-kv-layout | FileCheck %s --check-prefix=FP8
// RUN: daybreak-opt %s --lm-assign-kv-layout="kv-cache-dtype=f32 page-size=16" --lm-lower-to-plan="max-tokens=16" | FileCheck %s --check-prefix=PLAN

// Tests that the K and V caches of dense attention over cache views (gpt-oss:
// one sliding-window layer, one full layer) get key/value layouts, the
// sliding layer's with its window (a ring per sequence: window - 1 +
// max-tokens rows rounded up to pages) and the full layer's paged, each
// read through its [B, S, Hkv, D] expand_shape; and that the attention
// launches read those caches.
// CHECK-LABEL: func.func @gpt_oss_layers
// CHECK-COUNT-2: lm.cache_write {{.*}} {layout = #lm.kv_layout<key_value, page_size = 64, feature_dim = 32, storage = f32, scale_block = 0, tail_dim = 0, tail = bf16, window = 8>}
// CHECK-COUNT-2: lm.cache_write {{.*}} {layout = #lm.kv_layout<key_value, page_size = 64, feature_dim = 32, storage = f32, scale_block = 0, tail_dim = 0, tail = bf16>}
// FP8-COUNT-2: lm.cache_write {{.*}} {layout = #lm.kv_layout<key_value, page_size = 64, feature_dim = 32, storage = f8E4M3FN, scale_block = 32, tail_dim = 0, tail = bf16, window = 8>}
// FP8-COUNT-2: lm.cache_write {{.*}} {layout = #lm.kv_layout<key_value, page_size = 64, feature_dim = 32, storage = f8E4M3FN, scale_block = 32, tail_dim = 0, tail = bf16>}
// PLAN-DAG: plan.cache_pool @key_value {batch = 2 : i64, layers = 2 : i64, layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 32, storage = f32, scale_block = 0, tail_dim = 0, tail = bf16, window = 8>, max_seq_len = 64 : i64, max_tokens = 64 : i64}
// PLAN-DAG: plan.cache_pool @key_value_1 {batch = 2 : i64, layers = 2 : i64, layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 32, storage = f32, scale_block = 0, tail_dim = 0, tail = bf16>, max_seq_len = 64 : i64, max_tokens = 128 : i64}
// PLAN-LABEL: plan.step @gpt_oss_layers
// PLAN-DAG: %[[K0:.*]] = plan.cache_ref @key_value layer(0) : memref<64x128xi8>
// PLAN-DAG: %[[V0:.*]] = plan.cache_ref @key_value layer(1) : memref<64x128xi8>
// PLAN-DAG: %[[K1:.*]] = plan.cache_ref @key_value_1 layer(0) : memref<128x128xi8>
// PLAN-DAG: %[[V1:.*]] = plan.cache_ref @key_value_1 layer(1) : memref<128x128xi8>
// PLAN: plan.launch @attention.7[%{{.*}}] {{.*}}(%{{.*}}, %[[K0]], %[[V0]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {kv_heads = 2 : i64, num_results = 1 : i64, scale = 2.500000e-01 : f64, window = 8 : i64}
// PLAN: plan.launch @attention.6[%{{.*}}] {{.*}}(%{{.*}}, %[[K1]], %[[V1]], %{{.*}}, %{{.*}}, %{{.*}}) {absent = array<i64: 5>, kv_heads = 2 : i64, num_results = 1 : i64, scale = 2.500000e-01 : f64}
func.func @gpt_oss_layers(%k0c: tensor<2x64x32xf32>, %v0c: tensor<2x64x32xf32>,
                          %k1c: tensor<2x64x32xf32>, %v1c: tensor<2x64x32xf32>,
                          %q: tensor<?x8x16xf32>, %kv: tensor<?x32xf32>, %pos: tensor<?xi32>,
                          %seq: tensor<?xi32>, %sinks: tensor<8xf32>)
    -> (tensor<?x8x16xf32>, tensor<?x8x16xf32>, tensor<2x64x32xf32>, tensor<2x64x32xf32>,
        tensor<2x64x32xf32>, tensor<2x64x32xf32>) {
  %k0 = lm.cache_write %k0c, %kv, %pos sequences %seq
      : (tensor<2x64x32xf32>, tensor<?x32xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x32xf32>
  %v0 = lm.cache_write %v0c, %kv, %pos sequences %seq
      : (tensor<2x64x32xf32>, tensor<?x32xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x32xf32>
  %k0v = tensor.expand_shape %k0 [[0], [1], [2, 3]] output_shape [2, 64, 2, 16]
      : tensor<2x64x32xf32> into tensor<2x64x2x16xf32>
  %v0v = tensor.expand_shape %v0 [[0], [1], [2, 3]] output_shape [2, 64, 2, 16]
      : tensor<2x64x32xf32> into tensor<2x64x2x16xf32>
  %a0 = lm.attention %q, %k0v, %v0v sinks %sinks q_positions %pos q_segments %seq sliding_window
      {scale = 0.25 : f64, window = 8 : i64}
      : (tensor<?x8x16xf32>, tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32>, tensor<8xf32>,
         tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x16xf32>
  %k1 = lm.cache_write %k1c, %kv, %pos sequences %seq
      : (tensor<2x64x32xf32>, tensor<?x32xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x32xf32>
  %v1 = lm.cache_write %v1c, %kv, %pos sequences %seq
      : (tensor<2x64x32xf32>, tensor<?x32xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x32xf32>
  %k1v = tensor.expand_shape %k1 [[0], [1], [2, 3]] output_shape [2, 64, 2, 16]
      : tensor<2x64x32xf32> into tensor<2x64x2x16xf32>
  %v1v = tensor.expand_shape %v1 [[0], [1], [2, 3]] output_shape [2, 64, 2, 16]
      : tensor<2x64x32xf32> into tensor<2x64x2x16xf32>
  %a1 = lm.attention %q, %k1v, %v1v q_positions %pos q_segments %seq causal {scale = 0.25 : f64}
      : (tensor<?x8x16xf32>, tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32>,
         tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x16xf32>
  return %a0, %a1, %k0, %v0, %k1, %v1 : tensor<?x8x16xf32>, tensor<?x8x16xf32>, tensor<2x64x32xf32>,
      tensor<2x64x32xf32>, tensor<2x64x32xf32>, tensor<2x64x32xf32>
}
