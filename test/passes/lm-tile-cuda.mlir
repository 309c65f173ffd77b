// RUN: daybreak-opt %s --lm-tile="target=cuda max-batch=64 max-tokens=4096" | FileCheck %s
// RUN: daybreak-opt %s --lm-tile="target=cuda max-batch=8 max-tokens=4096" | FileCheck %s --check-prefix=GEMV
// RUN: daybreak-opt %s --lm-tile="target=cuda max-batch=64 max-tokens=4096 sms=8" | FileCheck %s --check-prefix=SMALL
// RUN: not daybreak-opt %s --lm-tile="target=cuda max-batch=0" 2>&1 | FileCheck %s --check-prefix=LIMITS

// The FP8 GEMM's tile for each fp8_matmul of DeepSeek's 128 x 128 blocks, by
// phase: the decode batch of 64 rows takes one MMA warpgroup a block (64
// rows); a weight of 12 or 56 column tiles fills few of the 132 SMs, so K is
// split; 192 column tiles fill them, so it is not. The prefill budget of 4096
// rows takes two warpgroups (128 rows) and 32 row tiles: no split. The
// stages are the library's (9 beside 64 rows, 6 beside 128).
// CHECK-LABEL: func @decode
// CHECK: lm.fp8_matmul {{.*}}cuda_tile = array<i64: 64, 128, 9, {{[2-8]}}>{{.*}} -> tensor<?x1536xf32>
// CHECK: lm.fp8_matmul {{.*}}cuda_tile = array<i64: 64, 128, 9, {{[2-8]}}>{{.*}} -> tensor<?x7168xf32>
// CHECK: lm.fp8_matmul {{.*}}cuda_tile = array<i64: 64, 128, 9, 1>{{.*}} -> tensor<?x24576xf32>
// Blocks other than 128 x 128, and bf16 weights: none.
// CHECK: lm.fp8_matmul
// CHECK-NOT: cuda_tile
// CHECK-SAME: -> tensor<?x256xf32>
// CHECK: lm.matmul
// CHECK-NOT: cuda_tile
// CHECK-SAME: -> tensor<?x512xf32>
// CHECK-LABEL: func @prefill
// CHECK: lm.fp8_matmul {{.*}}cuda_tile = array<i64: 128, 128, 6, 1>{{.*}} -> tensor<?x1536xf32>
// The rows count the input's static dimensions: 4096 x 4 = 16384.
// CHECK: lm.fp8_matmul {{.*}}cuda_tile = array<i64: 128, 128, 6, 1>{{.*}} -> tensor<?x4x512xf32>

// At most 8 decode rows take the GEMVs: no tile.
// GEMV-LABEL: func @decode
// GEMV-NOT: cuda_tile
// GEMV-LABEL: func @prefill
// GEMV: cuda_tile

// The model plans for the `sms` given. On 8 SMs the 56 column tiles of the
// 7168-wide weight are 7 whole waves, which a split would only lengthen
// (132 SMs split it, above); the 12 of the 1536-wide one are a wave and a
// half, whose tail a split still shortens.
// SMALL-LABEL: func @decode
// SMALL: cuda_tile = array<i64: 64, 128, 9, {{[2-8]}}>
// SMALL: cuda_tile = array<i64: 64, 128, 9, 1>
// SMALL: cuda_tile = array<i64: 64, 128, 9, 1>

// LIMITS: lm-tile: max-batch and max-tokens must be positive

func.func @decode(%x: tensor<?x7168xf32>, %wa: tensor<1536x7168xf8E4M3FN>,
                  %sa: tensor<12x56xf32>, %xo: tensor<?x16384xf32>,
                  %wo: tensor<7168x16384xf8E4M3FN>, %so: tensor<56x128xf32>,
                  %xb: tensor<?x1536xf32>, %wb: tensor<24576x1536xf8E4M3FN>,
                  %sb: tensor<192x12xf32>, %wc: tensor<256x7168xf8E4M3FN>,
                  %sc: tensor<4x112xf32>, %wd: tensor<512x7168xbf16>)
    -> (tensor<?x1536xf32>, tensor<?x7168xf32>, tensor<?x24576xf32>,
        tensor<?x256xf32>, tensor<?x512xf32>) {
  %a = lm.fp8_matmul %x, %wa, %sa {block_size = array<i64: 128, 128>}
      : (tensor<?x7168xf32>, tensor<1536x7168xf8E4M3FN>, tensor<12x56xf32>) -> tensor<?x1536xf32>
  %o = lm.fp8_matmul %xo, %wo, %so {block_size = array<i64: 128, 128>}
      : (tensor<?x16384xf32>, tensor<7168x16384xf8E4M3FN>, tensor<56x128xf32>) -> tensor<?x7168xf32>
  %b = lm.fp8_matmul %xb, %wb, %sb {block_size = array<i64: 128, 128>}
      : (tensor<?x1536xf32>, tensor<24576x1536xf8E4M3FN>, tensor<192x12xf32>) -> tensor<?x24576xf32>
  %c = lm.fp8_matmul %x, %wc, %sc {block_size = array<i64: 64, 64>}
      : (tensor<?x7168xf32>, tensor<256x7168xf8E4M3FN>, tensor<4x112xf32>) -> tensor<?x256xf32>
  %d = lm.matmul %x, %wd : (tensor<?x7168xf32>, tensor<512x7168xbf16>) -> tensor<?x512xf32>
  return %a, %o, %b, %c, %d : tensor<?x1536xf32>, tensor<?x7168xf32>, tensor<?x24576xf32>,
      tensor<?x256xf32>, tensor<?x512xf32>
}

func.func @prefill(%x: tensor<?x7168xf32>, %wa: tensor<1536x7168xf8E4M3FN>,
                   %sa: tensor<12x56xf32>, %xh: tensor<?x4x1536xf32>,
                   %wh: tensor<512x1536xf8E4M3FN>, %sh: tensor<4x12xf32>)
    -> (tensor<?x1536xf32>, tensor<?x4x512xf32>) {
  %a = lm.fp8_matmul %x, %wa, %sa {block_size = array<i64: 128, 128>}
      : (tensor<?x7168xf32>, tensor<1536x7168xf8E4M3FN>, tensor<12x56xf32>) -> tensor<?x1536xf32>
  %h = lm.fp8_matmul %xh, %wh, %sh {block_size = array<i64: 128, 128>}
      : (tensor<?x4x1536xf32>, tensor<512x1536xf8E4M3FN>, tensor<4x12xf32>) -> tensor<?x4x512xf32>
  return %a, %h : tensor<?x1536xf32>, tensor<?x4x512xf32>
}
