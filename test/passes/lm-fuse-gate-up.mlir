// RUN: daybreak-opt %s -split-input-file --lm-fuse-gate-up | FileCheck %s

// Tests that a GLU's FP8 expert gate and up become one expert matmul over
// the two stacked weights, the experts' tensors interleaved (gate 0, up 0,
// gate 1, up 1), codes and scales alike, and that the GLU reads the halves.
// CHECK-LABEL: module
// CHECK-NOT: lm.weight @g8
// CHECK-NOT: lm.weight @u8
// CHECK: lm.weight @"g8+u8" : tensor<2x256x64xf8E4M3FN> {sources = ["e.0.gate", "e.0.up", "e.1.gate", "e.1.up"]}
// CHECK: lm.weight @"gs+us" : tensor<2x2x1xf32> {sources = ["e.0.gate_scale", "e.0.up_scale", "e.1.gate_scale", "e.1.up_scale"]}
// CHECK-LABEL: func.func @fp8_experts
// CHECK: %[[W8:.*]] = lm.weight_ref @"g8+u8" : tensor<2x256x64xf8E4M3FN>
// CHECK: %[[S:.*]] = lm.weight_ref @"gs+us" : tensor<2x2x1xf32>
// CHECK: %[[W:.*]] = lm.fp8_dequant %[[W8]], %[[S]] {block_size = array<i64: 128, 128>} : (tensor<2x256x64xf8E4M3FN>, tensor<2x2x1xf32>) -> tensor<2x256x64xf32>
// CHECK: %[[BOTH:.*]] = lm.expert_matmul %arg0, %[[W]], %arg1 : (tensor<?x64xf32>, tensor<2x256x64xf32>, tensor<?x2xi32>) -> tensor<?x2x256xf32>
// CHECK: %[[G:.*]] = tensor.extract_slice %[[BOTH]][0, 0, 0] [%{{.*}}, 2, 128] [1, 1, 1]
// CHECK: %[[U:.*]] = tensor.extract_slice %[[BOTH]][0, 0, 128] [%{{.*}}, 2, 128] [1, 1, 1]
// CHECK: lm.swiglu %[[G]], %[[U]]
// CHECK-NOT: lm.expert_matmul
lm.weight @g8 : tensor<2x128x64xf8E4M3FN> {sources = ["e.0.gate", "e.1.gate"]}
lm.weight @gs : tensor<2x1x1xf32> {sources = ["e.0.gate_scale", "e.1.gate_scale"]}
lm.weight @u8 : tensor<2x128x64xf8E4M3FN> {sources = ["e.0.up", "e.1.up"]}
lm.weight @us : tensor<2x1x1xf32> {sources = ["e.0.up_scale", "e.1.up_scale"]}
func.func @fp8_experts(%x: tensor<?x64xf32>, %idx: tensor<?x2xi32>) -> tensor<?x2x128xf32> {
  %g8 = lm.weight_ref @g8 : tensor<2x128x64xf8E4M3FN>
  %gs = lm.weight_ref @gs : tensor<2x1x1xf32>
  %gw = lm.fp8_dequant %g8, %gs {block_size = array<i64: 128, 128>}
      : (tensor<2x128x64xf8E4M3FN>, tensor<2x1x1xf32>) -> tensor<2x128x64xf32>
  %u8 = lm.weight_ref @u8 : tensor<2x128x64xf8E4M3FN>
  %us = lm.weight_ref @us : tensor<2x1x1xf32>
  %uw = lm.fp8_dequant %u8, %us {block_size = array<i64: 128, 128>}
      : (tensor<2x128x64xf8E4M3FN>, tensor<2x1x1xf32>) -> tensor<2x128x64xf32>
  %g = lm.expert_matmul %x, %gw, %idx
      : (tensor<?x64xf32>, tensor<2x128x64xf32>, tensor<?x2xi32>) -> tensor<?x2x128xf32>
  %u = lm.expert_matmul %x, %uw, %idx
      : (tensor<?x64xf32>, tensor<2x128x64xf32>, tensor<?x2xi32>) -> tensor<?x2x128xf32>
  %a = lm.swiglu %g, %u : (tensor<?x2x128xf32>, tensor<?x2x128xf32>) -> tensor<?x2x128xf32>
  return %a : tensor<?x2x128xf32>
}

// -----

// Tests that FP8 dense gate and up stack when 128-row blocks do not straddle
// the halves, and that a plain (bf16) pair stacks in both functions that read
// it to one declaration.
// CHECK-LABEL: module
// CHECK-DAG: lm.weight @"g+u" : tensor<256x64xf8E4M3FN> {sources = ["gate", "up"]}
// CHECK-DAG: lm.weight @"gs+us" : tensor<2x1xf32> {sources = ["gate_scale", "up_scale"]}
// CHECK-DAG: lm.weight @"pg+pu" : tensor<64x64xbf16> {sources = ["p.gate", "p.up"]}
// CHECK-LABEL: func.func @fp8_dense
// CHECK: lm.fp8_matmul %arg0, %{{.*}}, %{{.*}} {block_size = array<i64: 128, 128>} : (tensor<?x64xf32>, tensor<256x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<?x256xf32>
// CHECK: lm.situ
// CHECK-LABEL: func.func @plain
// CHECK: lm.matmul %arg0, %{{.*}} : (tensor<?x64xf32>, tensor<64x64xbf16>) -> tensor<?x64xf32>
// CHECK-NOT: lm.matmul
// CHECK-LABEL: func.func @plain_again
// CHECK: lm.weight_ref @"pg+pu"
// CHECK-NOT: lm.matmul %{{.*}} -> tensor<?x32xf32>
lm.weight @g : tensor<128x64xf8E4M3FN> {sources = ["gate"]}
lm.weight @gs : tensor<1x1xf32> {sources = ["gate_scale"]}
lm.weight @u : tensor<128x64xf8E4M3FN> {sources = ["up"]}
lm.weight @us : tensor<1x1xf32> {sources = ["up_scale"]}
lm.weight @pg : tensor<32x64xbf16> {sources = ["p.gate"]}
lm.weight @pu : tensor<32x64xbf16> {sources = ["p.up"]}
func.func @fp8_dense(%x: tensor<?x64xf32>) -> tensor<?x128xf32> {
  %g8 = lm.weight_ref @g : tensor<128x64xf8E4M3FN>
  %gs = lm.weight_ref @gs : tensor<1x1xf32>
  %u8 = lm.weight_ref @u : tensor<128x64xf8E4M3FN>
  %us = lm.weight_ref @us : tensor<1x1xf32>
  %g = lm.fp8_matmul %x, %g8, %gs {block_size = array<i64: 128, 128>}
      : (tensor<?x64xf32>, tensor<128x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<?x128xf32>
  %u = lm.fp8_matmul %x, %u8, %us {block_size = array<i64: 128, 128>}
      : (tensor<?x64xf32>, tensor<128x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<?x128xf32>
  %a = lm.situ %g, %u {beta = 4.0 : f64, linear_beta = 25.0 : f64}
      : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x128xf32>
  return %a : tensor<?x128xf32>
}
func.func @plain(%x: tensor<?x64xf32>) -> tensor<?x32xf32> {
  %wg = lm.weight_ref @pg : tensor<32x64xbf16>
  %wu = lm.weight_ref @pu : tensor<32x64xbf16>
  %g = lm.matmul %x, %wg : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  %u = lm.matmul %x, %wu : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  %a = lm.swiglu %g, %u : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}
func.func @plain_again(%x: tensor<?x64xf32>) -> tensor<?x32xf32> {
  %wg = lm.weight_ref @pg : tensor<32x64xbf16>
  %wu = lm.weight_ref @pu : tensor<32x64xbf16>
  %g = lm.matmul %x, %wg : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  %u = lm.matmul %x, %wu : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  %a = lm.swiglu %g, %u : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

// Tests what stays apart: FP8 gate and up whose 128-row block would straddle
// the halves (96 rows), projections of different inputs, a gate read by
// another op too, a gate with a bias, and a gate whose tile another pass
// recorded (the fused op would drop it).
// CHECK-LABEL: func.func @straddle
// CHECK-COUNT-2: lm.fp8_matmul
// CHECK-LABEL: func.func @different_inputs
// CHECK-COUNT-2: lm.matmul
// CHECK-LABEL: func.func @gate_read_twice
// CHECK-COUNT-2: lm.matmul
// CHECK-LABEL: func.func @bias
// CHECK-COUNT-2: lm.matmul
// CHECK-LABEL: func.func @tiled
// CHECK-COUNT-2: lm.matmul
lm.weight @g : tensor<96x64xf8E4M3FN> {sources = ["gate"]}
lm.weight @gs : tensor<1x1xf32> {sources = ["gate_scale"]}
lm.weight @u : tensor<96x64xf8E4M3FN> {sources = ["up"]}
lm.weight @us : tensor<1x1xf32> {sources = ["up_scale"]}
lm.weight @pg : tensor<32x64xbf16> {sources = ["p.gate"]}
lm.weight @pu : tensor<32x64xbf16> {sources = ["p.up"]}
lm.weight @pb : tensor<32xbf16> {sources = ["p.bias"]}
func.func @straddle(%x: tensor<?x64xf32>) -> tensor<?x96xf32> {
  %g8 = lm.weight_ref @g : tensor<96x64xf8E4M3FN>
  %gs = lm.weight_ref @gs : tensor<1x1xf32>
  %u8 = lm.weight_ref @u : tensor<96x64xf8E4M3FN>
  %us = lm.weight_ref @us : tensor<1x1xf32>
  %g = lm.fp8_matmul %x, %g8, %gs {block_size = array<i64: 128, 128>}
      : (tensor<?x64xf32>, tensor<96x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<?x96xf32>
  %u = lm.fp8_matmul %x, %u8, %us {block_size = array<i64: 128, 128>}
      : (tensor<?x64xf32>, tensor<96x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<?x96xf32>
  %a = lm.swiglu %g, %u : (tensor<?x96xf32>, tensor<?x96xf32>) -> tensor<?x96xf32>
  return %a : tensor<?x96xf32>
}
func.func @different_inputs(%x: tensor<?x64xf32>, %y: tensor<?x64xf32>) -> tensor<?x32xf32> {
  %wg = lm.weight_ref @pg : tensor<32x64xbf16>
  %wu = lm.weight_ref @pu : tensor<32x64xbf16>
  %g = lm.matmul %x, %wg : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  %u = lm.matmul %y, %wu : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  %a = lm.swiglu %g, %u : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}
func.func @gate_read_twice(%x: tensor<?x64xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %wg = lm.weight_ref @pg : tensor<32x64xbf16>
  %wu = lm.weight_ref @pu : tensor<32x64xbf16>
  %g = lm.matmul %x, %wg : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  %u = lm.matmul %x, %wu : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  %a = lm.swiglu %g, %u : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %a, %g : tensor<?x32xf32>, tensor<?x32xf32>
}
func.func @bias(%x: tensor<?x64xf32>) -> tensor<?x32xf32> {
  %wg = lm.weight_ref @pg : tensor<32x64xbf16>
  %wu = lm.weight_ref @pu : tensor<32x64xbf16>
  %b = lm.weight_ref @pb : tensor<32xbf16>
  %g = lm.matmul %x, %wg bias %b : (tensor<?x64xf32>, tensor<32x64xbf16>, tensor<32xbf16>) -> tensor<?x32xf32>
  %u = lm.matmul %x, %wu : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  %a = lm.swiglu %g, %u : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}
func.func @tiled(%x: tensor<?x64xf32>) -> tensor<?x32xf32> {
  %wg = lm.weight_ref @pg : tensor<32x64xbf16>
  %wu = lm.weight_ref @pu : tensor<32x64xbf16>
  %g = lm.matmul %x, %wg {tile = array<i64: 96, 256>} : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  %u = lm.matmul %x, %wu : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  %a = lm.swiglu %g, %u : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}
