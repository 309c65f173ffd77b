// RUN: daybreak-opt %s --lm-mxfp4-route="route=online max-tokens=2" --lm-lower-to-plan="max-tokens=2" --plan-assign-workspace | FileCheck %s

// Tests that the online route's workspace is one buffer shared by every
// layer: two MoE layers of different expert shapes ([8, 128, 64] and
// [8, 64, 128], top-2, max-tokens 2: min(8, 2 x 2) = 4 slots) each convert
// into buffers named mxfp4_workspace.{codes,scales,bias}, which
// plan-assign-workspace places once, at the same offsets in both layers and
// sized for the larger layer (4 x 128 x 64 codes), live from the first
// conversion to the last expert matmul. The remapped indices are per layer.
// The expert matmuls read the workspace as E4M3 in [1, 32] blocks.
// CHECK-LABEL: plan.step @moe
// CHECK: %[[C0:.*]] = plan.buffer "mxfp4_workspace.codes" offset([[CODES:[0-9]+]]) {{.*}}: memref<4x128x64xf8E4M3FN>
// CHECK: %[[S0:.*]] = plan.buffer "mxfp4_workspace.scales" offset([[SCALES:[0-9]+]]) {{.*}}: memref<4x128x2xf32>
// CHECK: %[[B0:.*]] = plan.buffer "mxfp4_workspace.bias" offset([[BIAS:[0-9]+]]) {{.*}}: memref<4x128xf32>
// CHECK: %[[I0:.*]] = plan.buffer "v{{[0-9]+}}" offset({{[0-9]+}}) (%{{.*}}) {{.*}}: memref<?x2xi32>
// CHECK: plan.launch @mxfp4_to_fp8_experts.8[{{.*}}(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C0]], %[[S0]], %[[B0]], %[[I0]]) {num_results = 4 : i64}
// CHECK: plan.launch @expert_matmul.{{[0-9]+}}[{{.*}}(%{{.*}}, %[[C0]], %[[I0]], %{{.*}}, %[[B0]], %[[S0]], %{{.*}}) {block_size = array<i64: 1, 32>, num_results = 1 : i64}
// CHECK: %[[C1:.*]] = plan.buffer "mxfp4_workspace.codes" offset([[CODES]]) {{.*}}: memref<4x64x128xf8E4M3FN>
// CHECK: %[[S1:.*]] = plan.buffer "mxfp4_workspace.scales" offset([[SCALES]]) {{.*}}: memref<4x64x4xf32>
// CHECK: %[[B1:.*]] = plan.buffer "mxfp4_workspace.bias" offset([[BIAS]]) {{.*}}: memref<4x64xf32>
// CHECK: plan.launch @mxfp4_to_fp8_experts.8[{{.*}}(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C1]], %[[S1]], %[[B1]], %{{.*}})
// CHECK: plan.launch @expert_matmul.{{[0-9]+}}[{{.*}}(%{{.*}}, %[[C1]], %{{.*}}, %{{.*}}, %[[B1]], %[[S1]], %{{.*}}) {block_size = array<i64: 1, 32>, num_results = 1 : i64}
lm.weight @w : tensor<8x128x64xf4E2M1FN> {sources = ["w"]}
lm.weight @s : tensor<8x128x2xf8E8M0FNU> {sources = ["s"]}
lm.weight @b : tensor<8x128xbf16> {sources = ["b"]}
lm.weight @w2 : tensor<8x64x128xf4E2M1FN> {sources = ["w2"]}
lm.weight @s2 : tensor<8x64x4xf8E8M0FNU> {sources = ["s2"]}
lm.weight @b2 : tensor<8x64xbf16> {sources = ["b2"]}
func.func @moe(%x: tensor<?x64xf32>, %idx: tensor<?x2xi32>, %rw: tensor<?x2xf32>) -> tensor<?x64xf32> {
  %w = lm.weight_ref @w : tensor<8x128x64xf4E2M1FN>
  %s = lm.weight_ref @s : tensor<8x128x2xf8E8M0FNU>
  %b = lm.weight_ref @b : tensor<8x128xbf16>
  %h = lm.mxfp4_expert_matmul %x, %w, %s, %idx weights %rw bias %b
      : (tensor<?x64xf32>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>,
         tensor<?x2xi32>, tensor<?x2xf32>, tensor<8x128xbf16>) -> tensor<?x128xf32>
  %w2 = lm.weight_ref @w2 : tensor<8x64x128xf4E2M1FN>
  %s2 = lm.weight_ref @s2 : tensor<8x64x4xf8E8M0FNU>
  %b2 = lm.weight_ref @b2 : tensor<8x64xbf16>
  %y = lm.mxfp4_expert_matmul %h, %w2, %s2, %idx weights %rw bias %b2
      : (tensor<?x128xf32>, tensor<8x64x128xf4E2M1FN>, tensor<8x64x4xf8E8M0FNU>,
         tensor<?x2xi32>, tensor<?x2xf32>, tensor<8x64xbf16>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
