// RUN: daybreak-opt %s -split-input-file --lm-select-logit-rows=max-rows=4 | FileCheck %s

// Tests that @prefill gains a `logit_rows` input after its other inputs by
// role (before the caches), gathers those rows of the final residual, and
// runs the final norm and the head on 4 rows: the result of role `logits`
// becomes [4, vocab]. @decode is left alone.
// CHECK-LABEL: func.func @prefill
// CHECK-SAME: %arg0: tensor<?xi32> {lm.role = "token_ids"}
// CHECK-SAME: %[[ROWS:.*]]: tensor<4xi32> {lm.role = "logit_rows"}
// CHECK-SAME: %arg2: tensor<2x16x32xf32>
// CHECK-SAME: -> (tensor<4x64xf32> {lm.role = "logits"}, tensor<2x16x32xf32>)
// CHECK: %[[H:.*]] = lm.embedding
// CHECK: %[[G:.*]] = lm.gather_rows %[[H]], %[[ROWS]] : (tensor<?x32xf32>, tensor<4xi32>) -> tensor<4x32xf32>
// CHECK: %[[N:.*]] = lm.rms_norm %[[G]], %{{.*}} {eps = {{.*}}} : (tensor<4x32xf32>, tensor<32xbf16>) -> tensor<4x32xf32>
// CHECK: %[[L:.*]] = lm.matmul %[[N]], %{{.*}} : (tensor<4x32xf32>, tensor<64x32xbf16>) -> tensor<4x64xf32>
// CHECK: return %[[L]], %arg2
// CHECK-LABEL: func.func @decode
// CHECK-NOT: logit_rows
// CHECK-NOT: lm.gather_rows
// CHECK: -> tensor<?x64xf32>
lm.weight @embed : tensor<64x32xbf16> {sources = ["embed"]}
lm.weight @norm : tensor<32xbf16> {sources = ["norm"]}
lm.weight @head : tensor<64x32xbf16> {sources = ["head"]}
func.func @prefill(%ids: tensor<?xi32> {lm.role = "token_ids"},
                   %cache: tensor<2x16x32xf32>)
    -> (tensor<?x64xf32> {lm.role = "logits"}, tensor<2x16x32xf32>) {
  %e = lm.weight_ref @embed : tensor<64x32xbf16>
  %h = lm.embedding %e, %ids : (tensor<64x32xbf16>, tensor<?xi32>) -> tensor<?x32xf32>
  %nw = lm.weight_ref @norm : tensor<32xbf16>
  %n = lm.rms_norm %h, %nw {eps = 1.0e-06 : f64}
      : (tensor<?x32xf32>, tensor<32xbf16>) -> tensor<?x32xf32>
  %hw = lm.weight_ref @head : tensor<64x32xbf16>
  %l = lm.matmul %n, %hw : (tensor<?x32xf32>, tensor<64x32xbf16>) -> tensor<?x64xf32>
  return %l, %cache : tensor<?x64xf32>, tensor<2x16x32xf32>
}
func.func @decode(%ids: tensor<?xi32> {lm.role = "token_ids"})
    -> (tensor<?x64xf32> {lm.role = "logits"}) {
  %e = lm.weight_ref @embed : tensor<64x32xbf16>
  %h = lm.embedding %e, %ids : (tensor<64x32xbf16>, tensor<?xi32>) -> tensor<?x32xf32>
  %hw = lm.weight_ref @head : tensor<64x32xbf16>
  %l = lm.matmul %h, %hw : (tensor<?x32xf32>, tensor<64x32xbf16>) -> tensor<?x64xf32>
  return %l : tensor<?x64xf32>
}

// -----

// Tests that the hoisting stops at a value something else reads: the
// normed residual also feeds another output, so the gather sits between
// the norm and an FP8 head, and the norm runs on every token.
// CHECK-LABEL: func.func @prefill
// CHECK: %[[N:.*]] = lm.rms_norm %{{.*}} : (tensor<?x32xf32>, tensor<32xf32>) -> tensor<?x32xf32>
// CHECK: %[[G:.*]] = lm.gather_rows %[[N]], %arg1 : (tensor<?x32xf32>, tensor<4xi32>) -> tensor<4x32xf32>
// CHECK: %[[L:.*]] = lm.fp8_matmul %[[G]], %{{.*}}, %{{.*}} {block_size = array<i64: 32, 32>} : (tensor<4x32xf32>, tensor<64x32xf8E4M3FN>, tensor<2x1xf32>) -> tensor<4x64xf32>
// CHECK: return %[[L]], %[[N]] : tensor<4x64xf32>, tensor<?x32xf32>
lm.weight @norm : tensor<32xf32> {sources = ["norm"]}
lm.weight @head : tensor<64x32xf8E4M3FN> {sources = ["head"]}
lm.weight @scale : tensor<2x1xf32> {sources = ["head_scale"]}
func.func @prefill(%x: tensor<?x32xf32> {lm.role = "token_ids"})
    -> (tensor<?x64xf32> {lm.role = "logits"}, tensor<?x32xf32> {lm.role = "hidden"}) {
  %nw = lm.weight_ref @norm : tensor<32xf32>
  %n = lm.rms_norm %x, %nw {eps = 1.0e-06 : f64}
      : (tensor<?x32xf32>, tensor<32xf32>) -> tensor<?x32xf32>
  %hw = lm.weight_ref @head : tensor<64x32xf8E4M3FN>
  %hs = lm.weight_ref @scale : tensor<2x1xf32>
  %l = lm.fp8_matmul %n, %hw, %hs {block_size = array<i64: 32, 32>}
      : (tensor<?x32xf32>, tensor<64x32xf8E4M3FN>, tensor<2x1xf32>) -> tensor<?x64xf32>
  return %l, %n : tensor<?x64xf32>, tensor<?x32xf32>
}

// -----

// Tests that logits no row-wise op computes are gathered as they are.
// CHECK-LABEL: func.func @prefill
// CHECK: %[[S:.*]] = arith.addf
// CHECK: %[[G:.*]] = lm.gather_rows %[[S]], %arg2 : (tensor<?x64xf32>, tensor<4xi32>) -> tensor<4x64xf32>
// CHECK: return %[[G]] : tensor<4x64xf32>
func.func @prefill(%a: tensor<?x64xf32> {lm.role = "token_ids"},
                   %b: tensor<?x64xf32> {lm.role = "positions"})
    -> (tensor<?x64xf32> {lm.role = "logits"}) {
  %s = arith.addf %a, %b : tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}
