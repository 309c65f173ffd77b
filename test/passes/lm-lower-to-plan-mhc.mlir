// RUN: daybreak-opt %s --lm-lower-to-plan="max-tokens=16" | FileCheck %s
// RUN: daybreak-opt %s --lm-check-target=target=cuda | FileCheck %s --check-prefix=CUDA

// Tests that the mHC ops lower to the mhc_pre and mhc_post kernels
// (Kernels.def), their parameters typed, the streams a [T, n, D] buffer of
// the arena; and that target cuda takes them (both devices implement the
// kernels), leaving them unchanged.
// CHECK-LABEL: plan.step @layer
// CHECK: plan.launch @mhc_pre{{.*}}(%[[S:[a-z0-9]+]], %{{.*}}, %{{.*}}, %{{.*}}, %[[X:[0-9]+]], %[[P:[0-9]+]], %[[C:[0-9]+]]) {eps = 9.9999999999999995E-7 : f64, norm_eps = 9.9999999999999995E-7 : f64, num_results = 3 : i64, sinkhorn_iters = 20 : i64} : memref<?x4x64xf32>, memref<24x256xf32>, memref<24xf32>, memref<3xf32>, memref<?x64xf32>, memref<?x4xf32>, memref<?x4x4xf32>
// CHECK: plan.launch @mhc_post{{.*}}(%[[S]], %[[X]], %[[P]], %[[C]], %{{.*}}) {num_results = 1 : i64}
// CUDA-LABEL: func.func @layer
// CUDA: %[[X:[a-z0-9_]+]], %[[P:[a-z0-9_]+]], %[[C:[a-z0-9_]+]] = lm.mhc_pre
// CUDA: lm.mhc_post %{{.*}}, %[[X]], %[[P]], %[[C]]
func.func @layer(%streams: tensor<?x4x64xf32>, %fn: tensor<24x256xf32>, %base: tensor<24xf32>,
                 %scale: tensor<3xf32>) -> tensor<?x4x64xf32> {
  %x, %post, %comb = lm.mhc_pre %streams, %fn, %base, %scale
      {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x4x64xf32>, tensor<24x256xf32>, tensor<24xf32>, tensor<3xf32>)
      -> (tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
  %s1 = lm.mhc_post %streams, %x, %post, %comb
      : (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>) -> tensor<?x4x64xf32>
  return %s1 : tensor<?x4x64xf32>
}
