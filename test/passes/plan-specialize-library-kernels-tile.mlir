// RUN: not daybreak-opt %s --split-input-file --plan-specialize-library-kernels 2>&1 | FileCheck %s

// Tests that a cuda_tile the FP8 GEMM cannot take (96 rows a block; more
// stages than fit beside 128 rows) is rejected at its launch before NVRTC
// is asked to instantiate it.
// CHECK: error: plan-specialize-library-kernels: cuda_tile is not a tile the FP8 GEMM takes: [rows 64 or 128, columns 128, stages 2-9 (7 beside 128 rows), splits 1-8]
// CHECK: error: plan-specialize-library-kernels: cuda_tile is not a tile the FP8 GEMM takes

module {
  plan.weight @w : tensor<256x256xf8E4M3FN> {lm.sources = ["w"], offset = 0 : i64, section = 0 : i64}
  plan.weight @s : tensor<2x2xf32> {lm.sources = ["s"], offset = 65536 : i64, section = 0 : i64}
  plan.step @prefill arena(131072) sizes ["tokens"] attributes {max_sizes = array<i64: 64>} {
  ^bb0(%arg0: index):
    %0 = plan.buffer "x" offset(0) (%arg0) {io = "input"} : memref<?x256xf32>
    %1 = plan.weight_ref @w : memref<256x256xf8E4M3FN>
    %2 = plan.weight_ref @s : memref<2x2xf32>
    %3 = plan.buffer "y" offset(65536) (%arg0) {io = "output"} : memref<?x256xf32>
    plan.launch @fp8_matmul.4[%arg0] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0(%0, %1, %2, %3) {block_size = array<i64: 128, 128>, cuda_tile = array<i64: 96, 128, 6, 1>, num_results = 1 : i64} : memref<?x256xf32>, memref<256x256xf8E4M3FN>, memref<2x2xf32>, memref<?x256xf32>
  }
  plan.kernel @fp8_matmul.4 {entry = "fp8_matmul", num_args = 4 : i64, target = #plan<target cuda>}
}

// -----

module {
  plan.weight @w : tensor<256x256xf8E4M3FN> {lm.sources = ["w"], offset = 0 : i64, section = 0 : i64}
  plan.weight @s : tensor<2x2xf32> {lm.sources = ["s"], offset = 65536 : i64, section = 0 : i64}
  plan.step @prefill arena(131072) sizes ["tokens"] attributes {max_sizes = array<i64: 64>} {
  ^bb0(%arg0: index):
    %0 = plan.buffer "x" offset(0) (%arg0) {io = "input"} : memref<?x256xf32>
    %1 = plan.weight_ref @w : memref<256x256xf8E4M3FN>
    %2 = plan.weight_ref @s : memref<2x2xf32>
    %3 = plan.buffer "y" offset(65536) (%arg0) {io = "output"} : memref<?x256xf32>
    plan.launch @fp8_matmul.4[%arg0] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0(%0, %1, %2, %3) {block_size = array<i64: 128, 128>, cuda_tile = array<i64: 128, 128, 8, 1>, num_results = 1 : i64} : memref<?x256xf32>, memref<256x256xf8E4M3FN>, memref<2x2xf32>, memref<?x256xf32>
  }
  plan.kernel @fp8_matmul.4 {entry = "fp8_matmul", num_args = 4 : i64, target = #plan<target cuda>}
}
