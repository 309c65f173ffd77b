// RUN: daybreak-opt %s --lm-assign-kv-layout | FileCheck %s
// RUN: daybreak-opt %s --lm-assign-kv-layout="state-dtype=bf16" | FileCheck %s --check-prefix=BF16
// RUN: not daybreak-opt %s --lm-assign-kv-layout="state-dtype=f8" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: unsupported state-dtype 'f8' (expected f32 or bf16)

// Tests that a cache read only by sliding-window attention gets the window
// in its layout (a ring, not pages), and that arguments KDA and the short
// convolution carry as their state become per-sequence state (`lm.state`)
// with the KDA op's layout, f32 unless state-dtype says otherwise.
// CHECK-LABEL: func.func @windowed_and_state
// CHECK-SAME: %{{.*}}: tensor<2x4x8x8xf32> {lm.state = #lm.state_layout<storage = f32, key_major = true>}
// CHECK-SAME: %{{.*}}: tensor<3x8xf32> {lm.state = #lm.state_layout<storage = f32, key_major = true>}
// CHECK: lm.cache_write {{.*}} {layout = #lm.kv_layout<key_value, page_size = 64, feature_dim = 8, storage = f8E4M3FN, scale_block = 8, tail_dim = 0, tail = bf16, window = 128>}
// CHECK: lm.kda_step {{.*}}layout = #lm.state_layout<storage = f32, key_major = true>
// BF16-LABEL: func.func @windowed_and_state
// BF16-SAME: {lm.state = #lm.state_layout<storage = bf16, key_major = true>}
// BF16: lm.kda_step {{.*}}layout = #lm.state_layout<storage = bf16, key_major = true>
func.func @windowed_and_state(%c: tensor<2x256x8xf32>, %kv: tensor<?x8xf32>, %slots: tensor<?xi32>,
                              %seq: tensor<?xi32>, %q: tensor<?x2x4xf32>,
                              %st: tensor<2x4x8x8xf32>, %qq: tensor<?x4x8xf32>, %g: tensor<?x4x8xf32>,
                              %beta: tensor<?x4xf32>, %x: tensor<?x8xf32>, %w: tensor<8x4xf32>,
                              %cs: tensor<3x8xf32>)
    -> (tensor<2x256x8xf32>, tensor<?x2x4xf32>, tensor<?x4x8xf32>, tensor<2x4x8x8xf32>,
        tensor<?x8xf32>, tensor<3x8xf32>) {
  %c1 = lm.cache_write %c, %kv, %slots sequences %seq
      : (tensor<2x256x8xf32>, tensor<?x8xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x256x8xf32>
  // The reader sees the cache through reshapes.
  %flat = tensor.collapse_shape %c1 [[0, 1], [2]] : tensor<2x256x8xf32> into tensor<512x8xf32>
  %keys = tensor.expand_shape %flat [[0], [1, 2]] output_shape [512, 2, 4]
      : tensor<512x8xf32> into tensor<512x2x4xf32>
  %a = lm.attention %q, %keys, %keys sliding_window {scale = 0.125 : f64, window = 128 : i64}
      : (tensor<?x2x4xf32>, tensor<512x2x4xf32>, tensor<512x2x4xf32>) -> tensor<?x2x4xf32>
  %o, %s1 = lm.kda_step %qq, %qq, %qq, %g, %beta, %st {scale = 0.35 : f64, qk_l2norm}
      : (tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>,
         tensor<?x4xf32>, tensor<2x4x8x8xf32>) -> (tensor<?x4x8xf32>, tensor<2x4x8x8xf32>)
  %y, %cs1 = lm.short_conv %x, %w, %cs silu
      : (tensor<?x8xf32>, tensor<8x4xf32>, tensor<3x8xf32>) -> (tensor<?x8xf32>, tensor<3x8xf32>)
  return %c1, %a, %o, %s1, %y, %cs1 : tensor<2x256x8xf32>, tensor<?x2x4xf32>, tensor<?x4x8xf32>,
      tensor<2x4x8x8xf32>, tensor<?x8xf32>, tensor<3x8xf32>
}
