// RUN: daybreak-opt %s -split-input-file --lm-fold-weights="checkpoint=%S/../fixtures/deepseek_v32_small_fp8" --mlir-elide-elementsattrs-if-larger=4 | FileCheck %s

// Tests that routed experts dequantised only for expert matmuls stay FP8:
// the fp8_dequant of the stored codes and scales is left for the lowering
// (the devices dequantise at load), so no fp32 copy of every expert is made.
// CHECK-LABEL: module
// CHECK-NOT: folded
// CHECK: lm.weight @w8 : tensor<8x48x128xf8E4M3FN>
// CHECK: lm.weight @s : tensor<8x1x1xf32>
// CHECK-LABEL: func.func @experts
// CHECK: %[[W8:.*]] = lm.weight_ref @w8
// CHECK: %[[S:.*]] = lm.weight_ref @s
// CHECK: %[[W:.*]] = lm.fp8_dequant %[[W8]], %[[S]]
// CHECK: lm.expert_matmul %{{.*}}, %[[W]], %{{.*}}
lm.weight @w8 : tensor<8x48x128xf8E4M3FN> {sources = [
  "model.layers.1.mlp.experts.0.gate_proj.weight", "model.layers.1.mlp.experts.1.gate_proj.weight",
  "model.layers.1.mlp.experts.2.gate_proj.weight", "model.layers.1.mlp.experts.3.gate_proj.weight",
  "model.layers.1.mlp.experts.4.gate_proj.weight", "model.layers.1.mlp.experts.5.gate_proj.weight",
  "model.layers.1.mlp.experts.6.gate_proj.weight", "model.layers.1.mlp.experts.7.gate_proj.weight"]}
lm.weight @s : tensor<8x1x1xf32> {sources = [
  "model.layers.1.mlp.experts.0.gate_proj.weight_scale_inv", "model.layers.1.mlp.experts.1.gate_proj.weight_scale_inv",
  "model.layers.1.mlp.experts.2.gate_proj.weight_scale_inv", "model.layers.1.mlp.experts.3.gate_proj.weight_scale_inv",
  "model.layers.1.mlp.experts.4.gate_proj.weight_scale_inv", "model.layers.1.mlp.experts.5.gate_proj.weight_scale_inv",
  "model.layers.1.mlp.experts.6.gate_proj.weight_scale_inv", "model.layers.1.mlp.experts.7.gate_proj.weight_scale_inv"]}
func.func @experts(%x: tensor<?x128xf32>, %idx: tensor<?x2xi32>) -> tensor<?x2x48xf32> {
  %w8 = lm.weight_ref @w8 : tensor<8x48x128xf8E4M3FN>
  %s = lm.weight_ref @s : tensor<8x1x1xf32>
  %w = lm.fp8_dequant %w8, %s {block_size = array<i64: 128, 128>}
      : (tensor<8x48x128xf8E4M3FN>, tensor<8x1x1xf32>) -> tensor<8x48x128xf32>
  %y = lm.expert_matmul %x, %w, %idx
      : (tensor<?x128xf32>, tensor<8x48x128xf32>, tensor<?x2xi32>) -> tensor<?x2x48xf32>
  return %y : tensor<?x2x48xf32>
}

// -----

// Tests that the same dequantised weight is folded when anything but an
// expert matmul's weight operand reads it: here a head matmul, so to bf16
// (the fixture's scales are powers of two: every value is a bf16 value;
// lm-fold-weights-transpose.mlir has the fp32 case).
// CHECK-LABEL: module
// CHECK: lm.weight @w8.folded.0 : tensor<8x48x128xbf16>
// CHECK-LABEL: func.func @other
// CHECK-NOT: lm.fp8_dequant
// CHECK: lm.head_matmul
lm.weight @w8 : tensor<8x48x128xf8E4M3FN> {sources = [
  "model.layers.1.mlp.experts.0.gate_proj.weight", "model.layers.1.mlp.experts.1.gate_proj.weight",
  "model.layers.1.mlp.experts.2.gate_proj.weight", "model.layers.1.mlp.experts.3.gate_proj.weight",
  "model.layers.1.mlp.experts.4.gate_proj.weight", "model.layers.1.mlp.experts.5.gate_proj.weight",
  "model.layers.1.mlp.experts.6.gate_proj.weight", "model.layers.1.mlp.experts.7.gate_proj.weight"]}
lm.weight @s : tensor<8x1x1xf32> {sources = [
  "model.layers.1.mlp.experts.0.gate_proj.weight_scale_inv", "model.layers.1.mlp.experts.1.gate_proj.weight_scale_inv",
  "model.layers.1.mlp.experts.2.gate_proj.weight_scale_inv", "model.layers.1.mlp.experts.3.gate_proj.weight_scale_inv",
  "model.layers.1.mlp.experts.4.gate_proj.weight_scale_inv", "model.layers.1.mlp.experts.5.gate_proj.weight_scale_inv",
  "model.layers.1.mlp.experts.6.gate_proj.weight_scale_inv", "model.layers.1.mlp.experts.7.gate_proj.weight_scale_inv"]}
func.func @other(%x: tensor<?x8x48xf32>) -> tensor<?x8x128xf32> {
  %w8 = lm.weight_ref @w8 : tensor<8x48x128xf8E4M3FN>
  %s = lm.weight_ref @s : tensor<8x1x1xf32>
  %w = lm.fp8_dequant %w8, %s {block_size = array<i64: 128, 128>}
      : (tensor<8x48x128xf8E4M3FN>, tensor<8x1x1xf32>) -> tensor<8x48x128xf32>
  %y = lm.head_matmul %x, %w
      : (tensor<?x8x48xf32>, tensor<8x48x128xf32>) -> tensor<?x8x128xf32>
  return %y : tensor<?x8x128xf32>
}
