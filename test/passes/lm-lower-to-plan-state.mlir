// RUN: daybreak-opt %s -split-input-file --lm-lower-to-plan="max-tokens=16" | FileCheck %s
// RUN: daybreak-opt %s -split-input-file --lm-lower-to-plan="max-tokens=16 kv-cache-tokens=100" | FileCheck %s --check-prefix=POOL

// Tests the three kinds of cache and state a plan holds: a paged cache pool
// of every row its sequences may fill ([batch * max_seq_len], or
// kv-cache-tokens rounded up to pages when given), a sliding-window cache as
// a ring per sequence of window - 1 + max-tokens rows rounded up to pages,
// and per-sequence state (`lm.state`) as a state pool of one slot per
// sequence, independent of the context length, named by plan.cache_ref.
// CHECK: plan.cache_pool @key_value {batch = 2 : i64, layers = 1 : i64, layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 8, storage = f32, scale_block = 0, tail_dim = 0, tail = bf16>, max_seq_len = 256 : i64, max_tokens = 512 : i64}
// CHECK: plan.cache_pool @key_value_1 {batch = 2 : i64, layers = 1 : i64, layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 8, storage = f32, scale_block = 0, tail_dim = 0, tail = bf16, window = 40>, max_seq_len = 256 : i64, max_tokens = 128 : i64}
// CHECK: plan.state_pool @state {batch = 2 : i64, layers = 2 : i64, layout = #lm.state_layout<storage = f32, key_major = true>, slot_shape = array<i64: 4, 8, 8>}
// CHECK-LABEL: plan.step @decode
// CHECK: plan.cache_ref @key_value layer(0) : memref<512x32xi8>
// CHECK: plan.cache_ref @key_value_1 layer(0) : memref<128x32xi8>
// CHECK: plan.cache_ref @state layer(0) : memref<2x1024xi8>
// CHECK: plan.cache_ref @state layer(1) : memref<2x1024xi8>
// POOL: plan.cache_pool @key_value {{.*}} max_tokens = 112 : i64}
// POOL: plan.cache_pool @key_value_1 {{.*}} max_tokens = 128 : i64}
func.func @decode(%full: tensor<2x256x8xf32>, %ring: tensor<2x256x8xf32>,
                  %s0: tensor<2x4x8x8xf32> {lm.state = #lm.state_layout<storage = f32, key_major = true>},
                  %s1: tensor<2x4x8x8xf32> {lm.state = #lm.state_layout<storage = f32, key_major = true>},
                  %kv: tensor<?x8xf32>, %slots: tensor<?xi32>, %seq: tensor<?xi32>)
    -> (tensor<2x256x8xf32>, tensor<2x256x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %f = lm.cache_write %full, %kv, %slots sequences %seq
      {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 8, storage = f32,
                              scale_block = 0, tail_dim = 0, tail = bf16>}
      : (tensor<2x256x8xf32>, tensor<?x8xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x256x8xf32>
  %r = lm.cache_write %ring, %kv, %slots sequences %seq
      {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 8, storage = f32,
                              scale_block = 0, tail_dim = 0, tail = bf16, window = 40>}
      : (tensor<2x256x8xf32>, tensor<?x8xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x256x8xf32>
  return %f, %r, %s0, %s1 : tensor<2x256x8xf32>, tensor<2x256x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

