// RUN: daybreak-opt %s -split-input-file -verify-diagnostics --lm-fold-weights="checkpoint=%S/../fixtures/deepseek_v32_small"
// RUN: not daybreak-opt %s -split-input-file --lm-fold-weights 2>&1 | FileCheck %s --check-prefix=NOCKPT
// RUN: not daybreak-opt %s -split-input-file --lm-fold-weights="checkpoint=%S/no-such-checkpoint" 2>&1 | FileCheck %s --check-prefix=BADDIR

// The pass reports a missing or unreadable checkpoint on the module.
// NOCKPT: error: lm-fold-weights needs checkpoint=<dir>
// BADDIR: error: no model.safetensors or model.safetensors.index.json in {{.*}}no-such-checkpoint

// Tests that a weight whose source is not in the checkpoint cannot be folded,
// reported at the op whose value was to be folded.
module {
  lm.weight @kv_b : tensor<256x64xbf16> {sources = ["model.layers.9.self_attn.kv_b_proj.weight"]}
  func.func @missing(%qn: tensor<?x4x32xf32>) -> tensor<?x4x64xf32> {
    %w = lm.weight_ref @kv_b : tensor<256x64xbf16>
    %e = tensor.expand_shape %w [[0, 1], [2]] output_shape [4, 64, 64]
        : tensor<256x64xbf16> into tensor<4x64x64xbf16>
    // expected-error @+1 {{missing tensor 'model.layers.9.self_attn.kv_b_proj.weight'}}
    %uk = tensor.extract_slice %e[0, 0, 0] [4, 32, 64] [1, 1, 1]
        : tensor<4x64x64xbf16> to tensor<4x32x64xbf16>
    %ql = lm.head_matmul %qn, %uk
        : (tensor<?x4x32xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x64xf32>
    return %ql : tensor<?x4x64xf32>
  }
}

// -----

// Tests that a weight declared with another shape than its checkpoint tensor
// cannot be folded.
module {
  lm.weight @kv_b : tensor<128x64xbf16> {sources = ["model.layers.0.self_attn.kv_b_proj.weight"]}
  func.func @wrong_shape(%qn: tensor<?x4x32xf32>) -> tensor<?x4x64xf32> {
    %w = lm.weight_ref @kv_b : tensor<128x64xbf16>
    // expected-error @+1 {{weight @kv_b: expected tensor<128x64xbf16>, got bf16[256x64]}}
    %e = tensor.expand_shape %w [[0, 1], [2]] output_shape [4, 32, 64]
        : tensor<128x64xbf16> into tensor<4x32x64xbf16>
    %ql = lm.head_matmul %qn, %e
        : (tensor<?x4x32xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x64xf32>
    return %ql : tensor<?x4x64xf32>
  }
}
