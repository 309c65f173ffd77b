// RUN: daybreak-opt %s -split-input-file --lm-mxfp4-route="route=online max-tokens=3" | FileCheck %s --check-prefix=ONLINE
// RUN: daybreak-opt %s -split-input-file --lm-mxfp4-route="route=offline" | FileCheck %s --check-prefix=OFFLINE
// RUN: daybreak-opt %s -split-input-file --lm-mxfp4-route="route=direct" | FileCheck %s --check-prefix=DIRECT
// RUN: daybreak-opt %s -split-input-file --lm-mxfp4-route="route=online max-tokens=3 convert-in-decode=true" | FileCheck %s --check-prefix=EVERY
// RUN: not daybreak-opt %s -split-input-file --lm-mxfp4-route="route=both" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: daybreak-opt %s -split-input-file --lm-mxfp4-route="route=online max-tokens=16 overlap=true" | FileCheck %s --check-prefix=OVERLAP
// RUN: daybreak-opt %s -split-input-file --lm-mxfp4-route="route=online max-tokens=8 overlap=true" | FileCheck %s --check-prefix=SHORT
// RUN: daybreak-opt %s -split-input-file --lm-mxfp4-route="route=online max-tokens=16 overlap=true convert-in-decode=true" | FileCheck %s --check-prefix=EVERYOVERLAP

// Tests each route on a gate/up and a down expert matmul of one layer.
// online: the selected experts are converted into a workspace of
// min(E, max-tokens x k) = min(8, 3 x 2) = 6 slots, and an FP8 expert matmul
// reads it with the remapped indices and the slots' bias rows.
// offline: the packed weights are widened (arith.extf, folded later by
// lm-fold-weights) and read by the FP8 expert matmul in [1, 32] blocks.
// direct: unchanged. Each records the route on the module.
// BAD: lm-mxfp4-route: unknown route 'both' (expected online, offline or direct)
// overlap, max-tokens 16: uniformly routed tokens select 90 % of the 8
// experts from 9 tokens on at top-2 (0.75^9 <= 0.1 < 0.75^8), so each
// conversion takes all of them from there, into a workspace of E = 8
// slots. With max-tokens 8 no step gets there: the selection alone,
// in min(8, 8 x 2) slots.

// OVERLAP-LABEL: module attributes {lm.mxfp4_route = "online"}
// OVERLAP: lm.mxfp4_to_fp8_experts {{.*}} {all_from_tokens = 9 : i64} : {{.*}} -> (tensor<8x128x64xf8E4M3FN>, tensor<8x128x2xf32>, tensor<8x128xf32>, tensor<?x2xi32>)
// OVERLAP: lm.mxfp4_to_fp8_experts {{.*}} {all_from_tokens = 9 : i64} : {{.*}} -> (tensor<8x64x128xf8E4M3FN>
// SHORT-LABEL: module attributes {lm.mxfp4_route = "online"}
// SHORT-NOT: all_from_tokens
// SHORT: lm.mxfp4_to_fp8_experts {{.*}} -> (tensor<8x128x64xf8E4M3FN>

// ONLINE-LABEL: module attributes {lm.mxfp4_route = "online"}
// ONLINE: func.func @moe
// ONLINE: %[[C:[^ ,]+]], %[[S:[^ ,]+]], %[[B:[^ ,]+]], %[[SLOTS:[^ ,]+]] = lm.mxfp4_to_fp8_experts %{{.*}}, %{{.*}}, %[[IDX:[^ ,]+]] bias %{{.*}} : (tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<?x2xi32>, tensor<8x128xbf16>) -> (tensor<6x128x64xf8E4M3FN>, tensor<6x128x2xf32>, tensor<6x128xf32>, tensor<?x2xi32>)
// ONLINE: %[[W:.*]] = lm.fp8_dequant %[[C]], %[[S]] {block_size = array<i64: 1, 32>} : (tensor<6x128x64xf8E4M3FN>, tensor<6x128x2xf32>) -> tensor<6x128x64xf32>
// ONLINE: %[[H:.*]] = lm.expert_matmul %{{.*}}, %[[W]], %[[SLOTS]] bias %[[B]]
// ONLINE: %[[C2:[^ ,]+]], %[[S2:[^ ,]+]], %{{[^ ,]+}}, %[[SLOTS2:[^ ,]+]] = lm.mxfp4_to_fp8_experts %{{.*}}, %{{.*}}, %[[IDX]] :
// ONLINE-SAME: -> (tensor<6x64x128xf8E4M3FN>, tensor<6x64x4xf32>, tensor<6x64xf32>, tensor<?x2xi32>)
// ONLINE: %[[W2:.*]] = lm.fp8_dequant %[[C2]], %[[S2]] {block_size = array<i64: 1, 32>}
// ONLINE: lm.expert_matmul %[[H]], %[[W2]], %[[SLOTS2]] weights %{{.*}} :
// ONLINE-NOT: lm.mxfp4_expert_matmul

// OFFLINE-LABEL: module attributes {lm.mxfp4_route = "offline"}
// OFFLINE: %[[W8:.*]] = lm.weight_ref @w
// OFFLINE: %[[S8:.*]] = lm.weight_ref @s
// OFFLINE: %[[C:.*]] = arith.extf %[[W8]] : tensor<8x128x64xf4E2M1FN> to tensor<8x128x64xf8E4M3FN>
// OFFLINE: %[[S:.*]] = arith.extf %[[S8]] : tensor<8x128x2xf8E8M0FNU> to tensor<8x128x2xf32>
// OFFLINE: %[[W:.*]] = lm.fp8_dequant %[[C]], %[[S]] {block_size = array<i64: 1, 32>}
// OFFLINE: lm.expert_matmul %{{.*}}, %[[W]], %{{.*}} bias %{{.*}} :
// OFFLINE-NOT: lm.mxfp4_expert_matmul

// DIRECT-LABEL: module attributes {lm.mxfp4_route = "direct"}
// DIRECT: lm.mxfp4_expert_matmul
// DIRECT: lm.mxfp4_expert_matmul
lm.weight @w : tensor<8x128x64xf4E2M1FN> {sources = ["w"]}
lm.weight @s : tensor<8x128x2xf8E8M0FNU> {sources = ["s"]}
lm.weight @b : tensor<8x128xbf16> {sources = ["b"]}
lm.weight @w2 : tensor<8x64x128xf4E2M1FN> {sources = ["w2"]}
lm.weight @s2 : tensor<8x64x4xf8E8M0FNU> {sources = ["s2"]}
func.func @moe(%x: tensor<?x64xf32>, %idx: tensor<?x2xi32>, %rw: tensor<?x2xf32>) -> tensor<?x64xf32> {
  %w = lm.weight_ref @w : tensor<8x128x64xf4E2M1FN>
  %s = lm.weight_ref @s : tensor<8x128x2xf8E8M0FNU>
  %b = lm.weight_ref @b : tensor<8x128xbf16>
  %h = lm.mxfp4_expert_matmul %x, %w, %s, %idx bias %b
      : (tensor<?x64xf32>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>,
         tensor<?x2xi32>, tensor<8x128xbf16>) -> tensor<?x2x128xf32>
  %w2 = lm.weight_ref @w2 : tensor<8x64x128xf4E2M1FN>
  %s2 = lm.weight_ref @s2 : tensor<8x64x4xf8E8M0FNU>
  %y = lm.mxfp4_expert_matmul %h, %w2, %s2, %idx weights %rw
      : (tensor<?x2x128xf32>, tensor<8x64x128xf4E2M1FN>, tensor<8x64x4xf8E8M0FNU>,
         tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Tests that a module without MXFP4 experts is left alone, with no route
// recorded (the memory plan then prints none).
// ONLINE-LABEL: module {
// ONLINE-NOT: lm.mxfp4_route
// OFFLINE-LABEL: module {
// DIRECT-LABEL: module {
func.func @none(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  return %x : tensor<?x64xf32>
}

// -----

// Tests that the online route leaves the @decode step direct: converting a
// decode step's few selected experts moves about 5x the bytes of reading
// them packed (docs/mxfp4.md). convert-in-decode converts there too.
// ONLINE-LABEL: module attributes {lm.mxfp4_route = "online"}
// ONLINE: func.func @prefill
// ONLINE: lm.mxfp4_to_fp8_experts
// ONLINE: lm.expert_matmul
// ONLINE: func.func @decode
// ONLINE-NOT: lm.mxfp4_to_fp8_experts
// ONLINE: lm.mxfp4_expert_matmul
// ONLINE-NOT: lm.mxfp4_to_fp8_experts
// With overlap too, only @prefill's conversion takes every expert.
// EVERYOVERLAP-LABEL: func.func @prefill
// EVERYOVERLAP: lm.mxfp4_to_fp8_experts {{.*}} {all_from_tokens = 9 : i64}
// EVERYOVERLAP-LABEL: func.func @decode
// EVERYOVERLAP-NOT: all_from_tokens
// EVERYOVERLAP: lm.mxfp4_to_fp8_experts
// EVERYOVERLAP-NOT: all_from_tokens
// EVERY-LABEL: module attributes {lm.mxfp4_route = "online"}
// EVERY: func.func @prefill
// EVERY: lm.mxfp4_to_fp8_experts
// EVERY: func.func @decode
// EVERY: lm.mxfp4_to_fp8_experts
// EVERY-NOT: lm.mxfp4_expert_matmul
// OFFLINE-LABEL: module attributes {lm.mxfp4_route = "offline"}
// DIRECT-LABEL: module attributes {lm.mxfp4_route = "direct"}
lm.weight @w : tensor<8x128x64xf4E2M1FN> {sources = ["w"]}
lm.weight @s : tensor<8x128x2xf8E8M0FNU> {sources = ["s"]}
func.func @prefill(%x: tensor<?x64xf32>, %idx: tensor<?x2xi32>) -> tensor<?x2x128xf32> {
  %w = lm.weight_ref @w : tensor<8x128x64xf4E2M1FN>
  %s = lm.weight_ref @s : tensor<8x128x2xf8E8M0FNU>
  %h = lm.mxfp4_expert_matmul %x, %w, %s, %idx
      : (tensor<?x64xf32>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>,
         tensor<?x2xi32>) -> tensor<?x2x128xf32>
  return %h : tensor<?x2x128xf32>
}
func.func @decode(%x: tensor<?x64xf32>, %idx: tensor<?x2xi32>) -> tensor<?x2x128xf32> {
  %w = lm.weight_ref @w : tensor<8x128x64xf4E2M1FN>
  %s = lm.weight_ref @s : tensor<8x128x2xf8E8M0FNU>
  %h = lm.mxfp4_expert_matmul %x, %w, %s, %idx
      : (tensor<?x64xf32>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>,
         tensor<?x2xi32>) -> tensor<?x2x128xf32>
  return %h : tensor<?x2x128xf32>
}
