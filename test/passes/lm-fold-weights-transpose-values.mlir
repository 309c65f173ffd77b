// RUN: daybreak-opt %s --lm-fold-weights="checkpoint=%S/../fixtures/deepseek_v32_small" | FileCheck %s

// Tests that lm.transpose moves the values: kv_b_proj's column 5 of rows
// 32, 96, 160 and 224 (head h's first W_UV row, [4, 1, 1]; lm-fold-weights.mlir
// prints them as sliced) permuted [2, 1, 0] to [1, 1, 4], in head order.
// CHECK: lm.weight @kv_b.folded.0 : tensor<1x1x4xbf16> {sources = [], value = dense<{{\[\[\[}}3.906250e-03, -1.269530e-02, 1.406250e-01, -2.500000e-01]]]> : tensor<1x1x4xbf16>}
// CHECK-LABEL: func.func @value
// CHECK-NOT: lm.transpose
lm.weight @kv_b : tensor<256x64xbf16> {sources = ["model.layers.0.self_attn.kv_b_proj.weight"]}
func.func @value(%x: tensor<?x1x4xf32>) -> tensor<?x1x1xf32> {
  %w = lm.weight_ref @kv_b : tensor<256x64xbf16>
  %e = tensor.expand_shape %w [[0, 1], [2]] output_shape [4, 64, 64]
      : tensor<256x64xbf16> into tensor<4x64x64xbf16>
  %s = tensor.extract_slice %e[0, 32, 5] [4, 1, 1] [1, 1, 1]
      : tensor<4x64x64xbf16> to tensor<4x1x1xbf16>
  %t = lm.transpose %s {permutation = array<i64: 2, 1, 0>}
      : (tensor<4x1x1xbf16>) -> tensor<1x1x4xbf16>
  %y = lm.head_matmul %x, %t {transpose_weight}
      : (tensor<?x1x4xf32>, tensor<1x1x4xbf16>) -> tensor<?x1x1xf32>
  return %y : tensor<?x1x1xf32>
}
