// REQUIRES: nvrtc
// RUN: daybreak-opt %s --plan-specialize-library-kernels | FileCheck %s

// Tests that the CUDA library kernels are compiled by NVRTC for the plan's
// shapes: each launch a template serves names its instantiation's entry
// point in `specialized` (rms_norm and add_rms_norm per hidden size, the
// fp32 decode matmul per reduction dim K), a bf16-weight matmul (the
// stored-weight GEMV) keeps the generic kernel, and the PTX, holding those entry points next to the
// generic kernels, is recorded as plan.code_image @library with its
// instantiations.
// CHECK-LABEL: plan.step @decode
// CHECK: plan.launch @rms_norm.3{{.*}}, specialized = "[[RN128:_Z19daybreak_rms_norm_tILi128EE[^"]*]]"} : memref<?x128xf32>,
// CHECK: plan.launch @rms_norm.3{{.*}}, specialized = "[[RN64:_Z19daybreak_rms_norm_tILi64EE[^"]*]]"} : memref<?x64xf32>,
// CHECK: plan.launch @matmul.3{{.*}}, specialized = "[[MM64:_Z25daybreak_matmul_small_m_tILi64EE[^"]*]]"} : memref<?x64xf32>, memref<32x64xf32>,
// CHECK: plan.launch @matmul.3{{.*}} {absent = array<i64: 2>, num_results = 1 : i64} : memref<?x128xf32>, memref<32x128xbf16>,
// CHECK: plan.launch @add_rms_norm.5{{.*}}, specialized = "[[ARN128:_Z23daybreak_add_rms_norm_tILi128EE[^"]*]]"} : memref<?x128xf32>,
// CHECK: plan.code_image @library format "ptx" arch "sm_90a"
// CHECK-SAME: instantiations {"daybreak_add_rms_norm_t<128>" = "[[ARN128]]", "daybreak_matmul_small_m_t<64>" = "[[MM64]]", "daybreak_rms_norm_t<128>" = "[[RN128]]", "daybreak_rms_norm_t<64>" = "[[RN64]]"}
// CHECK-SAME: code "{{.*}}.target sm_90a
// CHECK-SAME: .entry daybreak_rms_norm(
// CHECK-SAME: .entry [[RN128]](
// CHECK-NOT: plan.code_image

// The plan of a small lm function, as lm-lower-to-plan and
// plan-assign-workspace leave it.
module {
  plan.weight @norm128 : tensor<128xf32> {lm.sources = ["norm128"], offset = 0 : i64, section = 0 : i64}
  plan.weight @norm64 : tensor<64xf32> {lm.sources = ["norm64"], offset = 512 : i64, section = 0 : i64}
  plan.weight @w32 : tensor<32x64xf32> {lm.sources = ["w32"], offset = 768 : i64, section = 0 : i64}
  plan.weight @wbf : tensor<32x128xbf16> {lm.sources = ["wbf"], offset = 8960 : i64, section = 0 : i64}
  plan.step @decode arena(114688) sizes ["tokens"] attributes {max_sizes = array<i64: 64>} {
  ^bb0(%arg0: index):
    %0 = plan.buffer "v0" offset(0) (%arg0) {io = "input"} : memref<?x128xf32>
    %1 = plan.buffer "v1" offset(65536) (%arg0) {io = "input"} : memref<?x64xf32>
    %2 = plan.weight_ref @norm128 : memref<128xf32>
    %3 = plan.buffer "v2" offset(32768) (%arg0) {io = "output"} : memref<?x128xf32>
    plan.launch @rms_norm.3[%arg0] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0(%0, %2, %3) {eps = 9.9999999999999995E-7 : f64, num_results = 1 : i64} : memref<?x128xf32>, memref<128xf32>, memref<?x128xf32>
    %4 = plan.weight_ref @norm64 : memref<64xf32>
    %5 = plan.buffer "v3" offset(81920) (%arg0) : memref<?x64xf32>
    plan.launch @rms_norm.3[%arg0] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0(%1, %4, %5) {eps = 9.9999999999999995E-7 : f64, num_results = 1 : i64} : memref<?x64xf32>, memref<64xf32>, memref<?x64xf32>
    %6 = plan.weight_ref @w32 : memref<32x64xf32>
    %7 = plan.buffer "v4" offset(98304) (%arg0) {io = "output"} : memref<?x32xf32>
    plan.launch @matmul.3[%arg0] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0(%5, %6, %7) {absent = array<i64: 2>, num_results = 1 : i64} : memref<?x64xf32>, memref<32x64xf32>, memref<?x32xf32>
    %8 = plan.weight_ref @wbf : memref<32x128xbf16>
    %9 = plan.buffer "v5" offset(106496) (%arg0) {io = "output"} : memref<?x32xf32>
    plan.launch @matmul.3[%arg0] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0(%3, %8, %9) {absent = array<i64: 2>, num_results = 1 : i64} : memref<?x128xf32>, memref<32x128xbf16>, memref<?x32xf32>
    plan.launch @add_rms_norm.5[%arg0] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0(%0, %3, %2, %0, %3) {eps = 9.9999999999999995E-7 : f64, num_results = 2 : i64} : memref<?x128xf32>, memref<?x128xf32>, memref<128xf32>, memref<?x128xf32>, memref<?x128xf32>
  }
  plan.kernel @add_rms_norm.5 {entry = "add_rms_norm", num_args = 5 : i64, target = #plan<target cuda>}
  plan.kernel @rms_norm.3 {entry = "rms_norm", num_args = 3 : i64, target = #plan<target cuda>}
  plan.kernel @matmul.3 {entry = "matmul", num_args = 3 : i64, target = #plan<target cuda>}
}

