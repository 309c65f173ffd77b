// RUN: daybreak-opt %s --lm-tile | FileCheck %s
// RUN: daybreak-opt %s --lm-tile=decode-columns=32 | FileCheck %s --check-prefix=NARROW
// RUN: not daybreak-opt %s --lm-tile=target=tpu 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: daybreak-opt %s --lm-tile=target=cuda 2>&1 | FileCheck %s --check-prefix=CUDA-NONE
// Tests that the CUDA target records no CPU tiles on these matmuls: they
// have bf16 weights, whose configurations the launcher keeps.
// CUDA-NONE-NOT: tile =

// Tests that prefill matmuls get 2-D panels and decode matmuls one row job
// with narrow column tiles; other ops are left alone.
// CHECK-LABEL: func @prefill
// CHECK: lm.matmul {{.*}} {tile = array<i64: 96, 256>}
// CHECK: lm.matmul {{.*}} {tile = array<i64: 96, 8>}
// CHECK: lm.rms_norm
// CHECK-NOT: tile
// CHECK-LABEL: func @decode
// CHECK: lm.matmul {{.*}} {tile = array<i64: 1048576, 64>}
// NARROW-LABEL: func @decode
// NARROW: lm.matmul {{.*}} {tile = array<i64: 1048576, 32>}
// TARGET: lm-tile: unknown target 'tpu' (expected cpu or cuda)
func.func @prefill(%x: tensor<?x64xf32>, %w: tensor<512x64xbf16>, %v: tensor<8x64xbf16>,
                   %n: tensor<64xf32>) -> (tensor<?x512xf32>, tensor<?x8xf32>, tensor<?x64xf32>) {
  %a = lm.matmul %x, %w : (tensor<?x64xf32>, tensor<512x64xbf16>) -> tensor<?x512xf32>
  %b = lm.matmul %x, %v : (tensor<?x64xf32>, tensor<8x64xbf16>) -> tensor<?x8xf32>
  %c = lm.rms_norm %x, %n {eps = 1.0e-06 : f64} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  return %a, %b, %c : tensor<?x512xf32>, tensor<?x8xf32>, tensor<?x64xf32>
}
func.func @decode(%x: tensor<?x64xf32>, %w: tensor<512x64xbf16>) -> tensor<?x512xf32> {
  %a = lm.matmul %x, %w : (tensor<?x64xf32>, tensor<512x64xbf16>) -> tensor<?x512xf32>
  return %a : tensor<?x512xf32>
}
