// RUN: daybreak-opt %s -split-input-file --lm-fold-weights="checkpoint=%S/../fixtures/deepseek_v32_small" --mlir-elide-elementsattrs-if-larger=4 | FileCheck %s

// Tests that a weight_ref -> expand_shape -> extract_slice chain feeding a
// kernel (MLA's absorbed W_UK) becomes one weight_ref of a new weight holding
// the folded value, and that the source weight, now unused, is removed.
// CHECK-LABEL: module
// CHECK-NOT: lm.weight @kv_b :
// CHECK: lm.weight @kv_b.folded.0 : tensor<4x32x64xbf16> {sources = [], value = dense_resource<__elided__> : tensor<4x32x64xbf16>}
// CHECK-NOT: lm.weight @kv_b :
// CHECK-LABEL: func.func @absorb
// CHECK-SAME: (%[[QN:.*]]: tensor<?x4x32xf32>)
// CHECK-NEXT: %[[W:.*]] = lm.weight_ref @kv_b.folded.0 : tensor<4x32x64xbf16>
// CHECK-NEXT: %[[QL:.*]] = lm.head_matmul %[[QN]], %[[W]] : (tensor<?x4x32xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x64xf32>
// CHECK-NEXT: return %[[QL]]
lm.weight @kv_b : tensor<256x64xbf16> {sources = ["model.layers.0.self_attn.kv_b_proj.weight"]}
func.func @absorb(%qn: tensor<?x4x32xf32>) -> tensor<?x4x64xf32> {
  %w = lm.weight_ref @kv_b : tensor<256x64xbf16>
  %e = tensor.expand_shape %w [[0, 1], [2]] output_shape [4, 64, 64]
      : tensor<256x64xbf16> into tensor<4x64x64xbf16>
  %uk = tensor.extract_slice %e[0, 0, 0] [4, 32, 64] [1, 1, 1]
      : tensor<4x64x64xbf16> to tensor<4x32x64xbf16>
  %ql = lm.head_matmul %qn, %uk
      : (tensor<?x4x32xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x64xf32>
  return %ql : tensor<?x4x64xf32>
}

// -----

// Tests that the folded value is read from the checkpoint: rows 32, 96, 160
// and 224 of kv_b_proj at column 5 (head h's first W_UV row), small enough
// to be printed in full.
// CHECK-LABEL: module
// CHECK: lm.weight @kv_b.folded.0 : tensor<4x1x1xbf16> {sources = [], value = dense<{{\[}}{{\[}}[3.906250e-03]], {{\[}}[-1.269530e-02]], {{\[}}[1.406250e-01]], {{\[}}[-2.500000e-01]]]> : tensor<4x1x1xbf16>}
// CHECK-NOT: lm.weight @kv_b :
// CHECK-LABEL: func.func @value
// CHECK: %[[W:.*]] = lm.weight_ref @kv_b.folded.0 : tensor<4x1x1xbf16>
// CHECK-NEXT: lm.head_matmul %{{.*}}, %[[W]]
lm.weight @kv_b : tensor<256x64xbf16> {sources = ["model.layers.0.self_attn.kv_b_proj.weight"]}
func.func @value(%x: tensor<?x4x1xf32>) -> tensor<?x4x1xf32> {
  %w = lm.weight_ref @kv_b : tensor<256x64xbf16>
  %e = tensor.expand_shape %w [[0, 1], [2]] output_shape [4, 64, 64]
      : tensor<256x64xbf16> into tensor<4x64x64xbf16>
  %s = tensor.extract_slice %e[0, 32, 5] [4, 1, 1] [1, 1, 1]
      : tensor<4x64x64xbf16> to tensor<4x1x1xbf16>
  %y = lm.head_matmul %x, %s
      : (tensor<?x4x1xf32>, tensor<4x1x1xbf16>) -> tensor<?x4x1xf32>
  return %y : tensor<?x4x1xf32>
}

// -----

// Tests that a chain shared by @prefill and @decode folds once (both read the
// same new weight), while a different slice of the same source (W_UV) gets
// its own weight.
// CHECK-LABEL: module
// CHECK-DAG: lm.weight @kv_b.folded.0 : tensor<4x32x64xbf16>
// CHECK-DAG: lm.weight @kv_b.folded.1 : tensor<4x32x64xbf16>
// CHECK-NOT: lm.weight
// CHECK-LABEL: func.func @prefill
// CHECK-SAME: (%[[QN:.*]]: tensor<?x4x32xf32>, %[[OL:.*]]: tensor<?x4x64xf32>)
// CHECK-DAG: %[[UK:.*]] = lm.weight_ref @kv_b.folded.0 : tensor<4x32x64xbf16>
// CHECK-DAG: %[[UV:.*]] = lm.weight_ref @kv_b.folded.1 : tensor<4x32x64xbf16>
// CHECK: lm.head_matmul %[[QN]], %[[UK]] :
// CHECK: lm.head_matmul %[[OL]], %[[UV]] {transpose_weight}
// CHECK-NOT: tensor.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[QN:.*]]: tensor<?x4x32xf32>)
// CHECK-NEXT: %[[UK:.*]] = lm.weight_ref @kv_b.folded.0 : tensor<4x32x64xbf16>
// CHECK-NEXT: lm.head_matmul %[[QN]], %[[UK]] :
// CHECK-NOT: kv_b.folded.2
lm.weight @kv_b : tensor<256x64xbf16> {sources = ["model.layers.0.self_attn.kv_b_proj.weight"]}
func.func @prefill(%qn: tensor<?x4x32xf32>, %ol: tensor<?x4x64xf32>)
    -> (tensor<?x4x64xf32>, tensor<?x4x32xf32>) {
  %w = lm.weight_ref @kv_b : tensor<256x64xbf16>
  %e = tensor.expand_shape %w [[0, 1], [2]] output_shape [4, 64, 64]
      : tensor<256x64xbf16> into tensor<4x64x64xbf16>
  %uk = tensor.extract_slice %e[0, 0, 0] [4, 32, 64] [1, 1, 1]
      : tensor<4x64x64xbf16> to tensor<4x32x64xbf16>
  %uv = tensor.extract_slice %e[0, 32, 0] [4, 32, 64] [1, 1, 1]
      : tensor<4x64x64xbf16> to tensor<4x32x64xbf16>
  %ql = lm.head_matmul %qn, %uk
      : (tensor<?x4x32xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x64xf32>
  %o = lm.head_matmul %ol, %uv {transpose_weight}
      : (tensor<?x4x64xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x32xf32>
  return %ql, %o : tensor<?x4x64xf32>, tensor<?x4x32xf32>
}
func.func @decode(%qn: tensor<?x4x32xf32>) -> tensor<?x4x64xf32> {
  %w = lm.weight_ref @kv_b : tensor<256x64xbf16>
  %e = tensor.expand_shape %w [[0, 1], [2]] output_shape [4, 64, 64]
      : tensor<256x64xbf16> into tensor<4x64x64xbf16>
  %uk = tensor.extract_slice %e[0, 0, 0] [4, 32, 64] [1, 1, 1]
      : tensor<4x64x64xbf16> to tensor<4x32x64xbf16>
  %ql = lm.head_matmul %qn, %uk
      : (tensor<?x4x32xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x64xf32>
  return %ql : tensor<?x4x64xf32>
}

// -----

// Tests that weights read directly by kernels stay as they are: @o is not
// touched, and @kv_b, still read by a matmul, is kept beside the weight
// folded from it.
// CHECK-LABEL: module
// CHECK-DAG: lm.weight @kv_b.folded.0 : tensor<4x32x64xbf16>
// CHECK-DAG: lm.weight @kv_b : tensor<256x64xbf16> {sources = ["model.layers.0.self_attn.kv_b_proj.weight"]}
// CHECK-DAG: lm.weight @o : tensor<128x128xbf16> {sources = ["model.layers.0.self_attn.o_proj.weight"]}
// CHECK-LABEL: func.func @direct
// CHECK-SAME: (%[[X:.*]]: tensor<?x128xf32>, %[[Y:.*]]: tensor<?x64xf32>, %[[QN:.*]]: tensor<?x4x32xf32>)
// CHECK: %[[WO:.*]] = lm.weight_ref @o : tensor<128x128xbf16>
// CHECK: lm.matmul %[[X]], %[[WO]] :
// CHECK: %[[WKV:.*]] = lm.weight_ref @kv_b : tensor<256x64xbf16>
// CHECK: lm.matmul %[[Y]], %[[WKV]] :
// CHECK: %[[UK:.*]] = lm.weight_ref @kv_b.folded.0 : tensor<4x32x64xbf16>
// CHECK: lm.head_matmul %[[QN]], %[[UK]] :
lm.weight @kv_b : tensor<256x64xbf16> {sources = ["model.layers.0.self_attn.kv_b_proj.weight"]}
lm.weight @o : tensor<128x128xbf16> {sources = ["model.layers.0.self_attn.o_proj.weight"]}
func.func @direct(%x: tensor<?x128xf32>, %y: tensor<?x64xf32>, %qn: tensor<?x4x32xf32>)
    -> (tensor<?x128xf32>, tensor<?x256xf32>, tensor<?x4x64xf32>) {
  %wo = lm.weight_ref @o : tensor<128x128xbf16>
  %a = lm.matmul %x, %wo : (tensor<?x128xf32>, tensor<128x128xbf16>) -> tensor<?x128xf32>
  %w = lm.weight_ref @kv_b : tensor<256x64xbf16>
  %b = lm.matmul %y, %w : (tensor<?x64xf32>, tensor<256x64xbf16>) -> tensor<?x256xf32>
  %e = tensor.expand_shape %w [[0, 1], [2]] output_shape [4, 64, 64]
      : tensor<256x64xbf16> into tensor<4x64x64xbf16>
  %uk = tensor.extract_slice %e[0, 0, 0] [4, 32, 64] [1, 1, 1]
      : tensor<4x64x64xbf16> to tensor<4x32x64xbf16>
  %ql = lm.head_matmul %qn, %uk
      : (tensor<?x4x32xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x64xf32>
  return %a, %b, %ql : tensor<?x128xf32>, tensor<?x256xf32>, tensor<?x4x64xf32>
}
