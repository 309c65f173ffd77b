// RUN: daybreak-opt %s -split-input-file --lm-fold-weights="checkpoint=%S/../fixtures/deepseek_v32_small_fp8" --mlir-elide-elementsattrs-if-larger=4 | FileCheck %s

// Tests that MLA's absorbed weights of an FP8 kv_b_proj (power-of-two block
// scales) fold to bf16 when only lm.head_matmul reads them: W_UK through
// lm.transpose to [H, lora, nope], W_UV as sliced; every dequantised value
// is a bf16 value, so the narrower type changes none.
// CHECK-LABEL: module
// CHECK-DAG: lm.weight @kv_b.folded.{{[0-9]}} : tensor<4x64x32xbf16>
// CHECK-DAG: lm.weight @kv_b.folded.{{[0-9]}} : tensor<4x32x64xbf16>
// CHECK-NOT: lm.weight @kv_b :
// CHECK-LABEL: func.func @absorb
// CHECK-NOT: lm.transpose
// CHECK-NOT: lm.fp8_dequant
// CHECK: lm.head_matmul %{{.*}}, %{{.*}} {transpose_weight} : (tensor<?x4x32xf32>, tensor<4x64x32xbf16>) -> tensor<?x4x64xf32>
// CHECK: lm.head_matmul %{{.*}}, %{{.*}} {transpose_weight} : (tensor<?x4x64xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x32xf32>
lm.weight @kv_b : tensor<256x64xf8E4M3FN> {sources = ["model.layers.0.self_attn.kv_b_proj.weight"]}
lm.weight @kv_b_scale : tensor<2x1xf32> {sources = ["model.layers.0.self_attn.kv_b_proj.weight_scale_inv"]}
func.func @absorb(%qn: tensor<?x4x32xf32>, %ol: tensor<?x4x64xf32>)
    -> (tensor<?x4x64xf32>, tensor<?x4x32xf32>) {
  %w8 = lm.weight_ref @kv_b : tensor<256x64xf8E4M3FN>
  %s = lm.weight_ref @kv_b_scale : tensor<2x1xf32>
  %w = lm.fp8_dequant %w8, %s {block_size = array<i64: 128, 128>}
      : (tensor<256x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<256x64xf32>
  %e = tensor.expand_shape %w [[0, 1], [2]] output_shape [4, 64, 64]
      : tensor<256x64xf32> into tensor<4x64x64xf32>
  %uk = tensor.extract_slice %e[0, 0, 0] [4, 32, 64] [1, 1, 1]
      : tensor<4x64x64xf32> to tensor<4x32x64xf32>
  %ukt = lm.transpose %uk {permutation = array<i64: 0, 2, 1>}
      : (tensor<4x32x64xf32>) -> tensor<4x64x32xf32>
  %uv = tensor.extract_slice %e[0, 32, 0] [4, 32, 64] [1, 1, 1]
      : tensor<4x64x64xf32> to tensor<4x32x64xf32>
  %ql = lm.head_matmul %qn, %ukt {transpose_weight}
      : (tensor<?x4x32xf32>, tensor<4x64x32xf32>) -> tensor<?x4x64xf32>
  %o = lm.head_matmul %ol, %uv {transpose_weight}
      : (tensor<?x4x64xf32>, tensor<4x32x64xf32>) -> tensor<?x4x32xf32>
  return %ql, %o : tensor<?x4x64xf32>, tensor<?x4x32xf32>
}

// -----

// Tests that a fold read by anything but head matmuls keeps its f32 type
// (its users expect it), even where its values would fit bf16.
// CHECK-LABEL: module
// CHECK: lm.weight @kv_b.folded.0 : tensor<4x32x64xf32>
// CHECK-LABEL: func.func @other_use
// CHECK: lm.head_matmul %{{.*}}, %[[W:.*]] {transpose_weight} : (tensor<?x4x64xf32>, tensor<4x32x64xf32>)
// CHECK: return %{{.*}}, %[[W]]
lm.weight @kv_b : tensor<256x64xf8E4M3FN> {sources = ["model.layers.0.self_attn.kv_b_proj.weight"]}
lm.weight @kv_b_scale : tensor<2x1xf32> {sources = ["model.layers.0.self_attn.kv_b_proj.weight_scale_inv"]}
func.func @other_use(%ol: tensor<?x4x64xf32>)
    -> (tensor<?x4x32xf32>, tensor<4x32x64xf32>) {
  %w8 = lm.weight_ref @kv_b : tensor<256x64xf8E4M3FN>
  %s = lm.weight_ref @kv_b_scale : tensor<2x1xf32>
  %w = lm.fp8_dequant %w8, %s {block_size = array<i64: 128, 128>}
      : (tensor<256x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<256x64xf32>
  %e = tensor.expand_shape %w [[0, 1], [2]] output_shape [4, 64, 64]
      : tensor<256x64xf32> into tensor<4x64x64xf32>
  %uv = tensor.extract_slice %e[0, 32, 0] [4, 32, 64] [1, 1, 1]
      : tensor<4x64x64xf32> to tensor<4x32x64xf32>
  %o = lm.head_matmul %ol, %uv {transpose_weight}
      : (tensor<?x4x64xf32>, tensor<4x32x64xf32>) -> tensor<?x4x32xf32>
  return %o, %uv : tensor<?x4x32xf32>, tensor<4x32x64xf32>
}
