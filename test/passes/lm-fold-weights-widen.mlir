// RUN: daybreak-opt %s --lm-fold-weights="checkpoint=%S/../fixtures/deepseek_v32_small" | FileCheck %s

// Tests that a bf16 weight widened to f32 (arith.extf: gpt-oss's attention
// sinks, which the attention kernel reads in f32) folds to an f32 weight
// carrying the exact values, and that the bf16 weight, no longer read, is
// dropped.
// CHECK-NOT: lm.weight @norm :
// CHECK: lm.weight @norm.folded.0 : tensor<128xf32> {sources = [], value = dense<
// CHECK-NOT: lm.weight @norm :
// CHECK-LABEL: func.func @widen
// CHECK: %[[W:.*]] = lm.weight_ref @norm.folded.0 : tensor<128xf32>
// CHECK-NOT: arith.extf
// CHECK: lm.moe_route %{{.*}} bias %[[W]]
lm.weight @norm : tensor<128xbf16> {sources = ["model.norm.weight"]}
func.func @widen(%logits: tensor<?x128xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
  %w = lm.weight_ref @norm : tensor<128xbf16>
  %b = arith.extf %w : tensor<128xbf16> to tensor<128xf32>
  %i, %r = lm.moe_route %logits bias %b softmax {top_k = 2 : i64}
      : (tensor<?x128xf32>, tensor<128xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return %i, %r : tensor<?x2xi32>, tensor<?x2xf32>
}
