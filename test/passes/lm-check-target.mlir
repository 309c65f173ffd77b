// RUN: daybreak-opt %s --lm-check-target | FileCheck %s
// RUN: daybreak-opt %s --lm-check-target=target=cuda | FileCheck %s

// Tests that a function whose every op launches a kernel both targets
// implement (runtime/abi/Kernels.def), or launches nothing (weight
// references, sizes, constants, reshapes, FP8 codes an expert matmul reads),
// passes on both targets and is left unchanged.
// CHECK-LABEL: func.func @legal
// CHECK: lm.embedding
// CHECK: lm.rms_norm
// CHECK: tensor.expand_shape
// CHECK: lm.matmul
// CHECK: tensor.extract_slice
// CHECK: tensor.concat
// CHECK: arith.addf
// CHECK: arith.addi
// CHECK: lm.elementwise
// CHECK: lm.fp8_dequant
// CHECK: lm.expert_matmul
// CHECK: lm.cache_write
lm.weight @embed : tensor<256x128xbf16> {sources = ["model.embed_tokens.weight"]}
lm.weight @norm : tensor<128xbf16> {sources = ["model.norm.weight"]}
lm.weight @head : tensor<256x128xbf16> {sources = ["lm_head.weight"]}
lm.weight @w8 : tensor<8x64x128xf8E4M3FN> {sources = ["w8"]}
lm.weight @s : tensor<8x1x1xf32> {sources = ["s"]}
func.func @legal(%ids: tensor<?xi32>, %c: tensor<2x64x80xf32>, %kv: tensor<?x80xf32>,
                 %slots: tensor<?xi32>, %seq: tensor<?xi32>, %idx: tensor<?x2xi32>, %rw: tensor<?x2xf32>)
    -> (tensor<?x4x32xbf16>, tensor<?x272xf32>, tensor<?xi32>, tensor<?x64xf32>,
        tensor<2x64x80xf32>) {
  %te = lm.weight_ref @embed : tensor<256x128xbf16>
  %h = lm.embedding %te, %ids : (tensor<256x128xbf16>, tensor<?xi32>) -> tensor<?x128xbf16>
  %wn = lm.weight_ref @norm : tensor<128xbf16>
  %n = lm.rms_norm %h, %wn {eps = 1.0e-06 : f64}
      : (tensor<?x128xbf16>, tensor<128xbf16>) -> tensor<?x128xbf16>
  %c0 = arith.constant 0 : index
  %t = tensor.dim %n, %c0 : tensor<?x128xbf16>
  %r = tensor.expand_shape %n [[0], [1, 2]] output_shape [%t, 4, 32]
      : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %wh = lm.weight_ref @head : tensor<256x128xbf16>
  %l = lm.matmul %n, %wh : (tensor<?x128xbf16>, tensor<256x128xbf16>) -> tensor<?x256xf32>
  %sl = tensor.extract_slice %l[0, 0] [%t, 16] [1, 1] : tensor<?x256xf32> to tensor<?x16xf32>
  %cat = tensor.concat dim(1) %l, %sl : (tensor<?x256xf32>, tensor<?x16xf32>) -> tensor<?x272xf32>
  %sum = arith.addf %cat, %cat : tensor<?x272xf32>
  %one = arith.constant 1 : i32
  %ones = tensor.splat %one[%t] : tensor<?xi32>
  %next = arith.addi %ids, %ones : tensor<?xi32>
  %x = lm.elementwise(%sum) : (tensor<?x272xf32>) -> tensor<?x272xf32> {
  ^bb0(%a: f32):
    %b = arith.mulf %a, %a : f32
    lm.yield %b : f32
  }
  %w8 = lm.weight_ref @w8 : tensor<8x64x128xf8E4M3FN>
  %s = lm.weight_ref @s : tensor<8x1x1xf32>
  %w = lm.fp8_dequant %w8, %s {block_size = array<i64: 128, 128>}
      : (tensor<8x64x128xf8E4M3FN>, tensor<8x1x1xf32>) -> tensor<8x64x128xf32>
  %nf = lm.rms_norm %h, %wn {eps = 1.0e-06 : f64}
      : (tensor<?x128xbf16>, tensor<128xbf16>) -> tensor<?x128xf32>
  %y = lm.expert_matmul %nf, %w, %idx weights %rw
      : (tensor<?x128xf32>, tensor<8x64x128xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x64xf32>
  %c1 = lm.cache_write %c, %kv, %slots sequences %seq
      {layout = #lm.kv_layout<key_value, page_size = 64, feature_dim = 80, storage = bf16,
                              scale_block = 0, tail_dim = 0, tail = bf16>}
      : (tensor<2x64x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>)
      -> tensor<2x64x80xf32>
  return %r, %x, %next, %y, %c1
      : tensor<?x4x32xbf16>, tensor<?x272xf32>, tensor<?xi32>, tensor<?x64xf32>, tensor<2x64x80xf32>
}

// Tests that an expert matmul over MXFP4 weights (gpt-oss), read as stored by
// the mxfp4_expert_matmul kernel, passes on both targets, with and without
// routing weights and bias.
// CHECK-LABEL: func.func @mxfp4_experts
// CHECK: lm.mxfp4_expert_matmul
// CHECK: lm.mxfp4_expert_matmul
lm.weight @v4 : tensor<8x128x64xf4E2M1FN> {sources = ["v4_blocks"]}
lm.weight @s4 : tensor<8x128x2xf8E8M0FNU> {sources = ["v4_scales"]}
lm.weight @b4 : tensor<8x128xbf16> {sources = ["v4_bias"]}
func.func @mxfp4_experts(%x: tensor<?x64xf32>, %idx: tensor<?x2xi32>, %rw: tensor<?x2xf32>)
    -> (tensor<?x2x128xf32>, tensor<?x128xf32>) {
  %w = lm.weight_ref @v4 : tensor<8x128x64xf4E2M1FN>
  %s = lm.weight_ref @s4 : tensor<8x128x2xf8E8M0FNU>
  %b = lm.weight_ref @b4 : tensor<8x128xbf16>
  %slots = lm.mxfp4_expert_matmul %x, %w, %s, %idx bias %b
      : (tensor<?x64xf32>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>,
         tensor<?x2xi32>, tensor<8x128xbf16>) -> tensor<?x2x128xf32>
  %mixed = lm.mxfp4_expert_matmul %x, %w, %s, %idx weights %rw
      : (tensor<?x64xf32>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>,
         tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x128xf32>
  return %slots, %mixed : tensor<?x2x128xf32>, tensor<?x128xf32>
}

// Tests that dense attention over K and V cache views (gpt-oss's layers,
// sliding and full), which the runtime's attention kernel runs, passes on
// both targets.
// CHECK-LABEL: func.func @attention_over_caches
// CHECK: lm.attention {{.*}} sliding_window
// CHECK: lm.attention {{.*}} causal
func.func @attention_over_caches(%kc: tensor<2x64x32xf32>, %vc: tensor<2x64x32xf32>,
                                 %q: tensor<?x8x16xf32>, %pos: tensor<?xi32>, %seq: tensor<?xi32>,
                                 %sinks: tensor<8xf32>)
    -> (tensor<?x8x16xf32>, tensor<?x8x16xf32>) {
  %k = tensor.expand_shape %kc [[0], [1], [2, 3]] output_shape [2, 64, 2, 16]
      : tensor<2x64x32xf32> into tensor<2x64x2x16xf32>
  %v = tensor.expand_shape %vc [[0], [1], [2, 3]] output_shape [2, 64, 2, 16]
      : tensor<2x64x32xf32> into tensor<2x64x2x16xf32>
  %a0 = lm.attention %q, %k, %v sinks %sinks q_positions %pos q_segments %seq sliding_window
      {scale = 0.25 : f64, window = 8 : i64}
      : (tensor<?x8x16xf32>, tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32>, tensor<8xf32>,
         tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x16xf32>
  %a1 = lm.attention %q, %k, %v q_positions %pos q_segments %seq causal {scale = 0.25 : f64}
      : (tensor<?x8x16xf32>, tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32>,
         tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x16xf32>
  return %a0, %a1 : tensor<?x8x16xf32>, tensor<?x8x16xf32>
}
