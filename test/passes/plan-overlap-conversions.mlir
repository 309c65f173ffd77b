// RUN: daybreak-opt %s --lm-mxfp4-route="route=online max-tokens=16 overlap=true" --lm-lower-to-plan="max-tokens=16" --plan-overlap-conversions --plan-assign-workspace | FileCheck %s
// RUN: daybreak-opt %s --lm-mxfp4-route="route=online max-tokens=16 overlap=true" --lm-lower-to-plan="max-tokens=16" --plan-assign-workspace | FileCheck %s --check-prefix=INORDER

// Tests the online route's overlapped conversions: two layers of a gate/up
// ([8, 128, 64]) and a down ([8, 64, 128]) expert matmul, top-2 of 8
// experts, max-tokens 16. Each conversion takes every expert from 9 tokens
// (0.75^9 <= 0.1): a mxfp4_to_fp8_all_experts launch, then the
// mxfp4_to_fp8_experts launch that converts the selection below 9 tokens
// and remaps from there. Conversions alternate between two workspaces
// (set 0: gate/up, set 1: down), each of E = 8 slots.
// plan-overlap-conversions moves each all-experts launch onto the side
// queue right after the last launch that touches its workspace: layer 0's
// down conversion to the step's start (nothing touches set 1 before it),
// layer 1's gate/up conversion after layer 0's gate/up matmul, layer 1's
// down conversion after layer 0's down matmul. Layer 0's gate/up conversion
// has nothing before it and stays on the main queue. Each conversion's own
// mxfp4_to_fp8_experts joins it: join_queue counts the side launches, in
// order, that it waits for (1, 2, 3), so layer 0's down waits for its own
// conversion and not for layer 1's gate/up one, issued before it. The
// workspaces stay live from their first conversion to their last matmul
// (set 1 from the step's start).
// CHECK-LABEL: plan.step @moe
// CHECK: plan.buffer "mxfp4_workspace.1.codes" offset([[SET1:[0-9]+]]) {live = array<i64: [[S1FIRST:[0-9]+]], [[S1LAST:[0-9]+]]>} : memref<8x64x128xf8E4M3FN>
// CHECK: plan.launch @mxfp4_to_fp8_all_experts.{{[0-9]+}}{{.*}}{from_tokens = 9 : i64, num_results = 3 : i64, queue = 1 : i64} : memref<8x64x128xf4E2M1FN>
// CHECK: plan.buffer "mxfp4_workspace.0.codes" offset([[SET0:[0-9]+]]) {{.*}}: memref<8x128x64xf8E4M3FN>
// CHECK-NOT: queue
// CHECK: plan.launch @mxfp4_to_fp8_all_experts.{{[0-9]+}}{{.*}}{from_tokens = 9 : i64, num_results = 3 : i64} : memref<8x128x64xf4E2M1FN>
// CHECK-NEXT: plan.launch @mxfp4_to_fp8_experts.{{[0-9]+}}{{.*}}{all_from_tokens = 9 : i64, num_results = 4 : i64}
// CHECK: plan.launch @expert_matmul
// CHECK: plan.buffer "mxfp4_workspace.0.codes" offset([[SET0]])
// CHECK: plan.launch @mxfp4_to_fp8_all_experts.{{[0-9]+}}{{.*}}queue = 1 : i64} : memref<8x128x64xf4E2M1FN>
// CHECK: plan.launch @mxfp4_to_fp8_experts.{{[0-9]+}}{{.*}}{all_from_tokens = 9 : i64, join_queue = 1 : i64, num_results = 4 : i64} : memref<8x64x128xf4E2M1FN>
// CHECK-NEXT: plan.buffer
// CHECK-NEXT: plan.launch @expert_matmul
// CHECK: plan.buffer "mxfp4_workspace.1.codes" offset([[SET1]])
// CHECK: plan.launch @mxfp4_to_fp8_all_experts.{{[0-9]+}}{{.*}}queue = 1 : i64} : memref<8x64x128xf4E2M1FN>
// CHECK: plan.launch @mxfp4_to_fp8_experts.{{[0-9]+}}{{.*}}{all_from_tokens = 9 : i64, join_queue = 2 : i64, num_results = 4 : i64} : memref<8x128x64xf4E2M1FN>
// CHECK-NEXT: plan.buffer
// CHECK-NEXT: plan.launch @expert_matmul
// CHECK: plan.launch @mxfp4_to_fp8_experts.{{[0-9]+}}{{.*}}{all_from_tokens = 9 : i64, join_queue = 3 : i64, num_results = 4 : i64} : memref<8x64x128xf4E2M1FN>
// CHECK-NEXT: plan.buffer
// CHECK-NEXT: plan.launch @expert_matmul
// CHECK-NOT: plan.launch
// CHECK: plan.kernel @mxfp4_to_fp8_all_experts.{{[0-9]+}} {entry = "mxfp4_to_fp8_all_experts"

// Without the pass every launch stays in place, on the main queue.
// INORDER-NOT: queue
// INORDER-NOT: join_queue
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
  %w3 = lm.weight_ref @w : tensor<8x128x64xf4E2M1FN>
  %s3 = lm.weight_ref @s : tensor<8x128x2xf8E8M0FNU>
  %h3 = lm.mxfp4_expert_matmul %y, %w3, %s3, %idx weights %rw bias %b
      : (tensor<?x64xf32>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>,
         tensor<?x2xi32>, tensor<?x2xf32>, tensor<8x128xbf16>) -> tensor<?x128xf32>
  %y3 = lm.mxfp4_expert_matmul %h3, %w2, %s2, %idx weights %rw bias %b2
      : (tensor<?x128xf32>, tensor<8x64x128xf4E2M1FN>, tensor<8x64x4xf8E8M0FNU>,
         tensor<?x2xi32>, tensor<?x2xf32>, tensor<8x64xbf16>) -> tensor<?x64xf32>
  return %y3 : tensor<?x64xf32>
}
