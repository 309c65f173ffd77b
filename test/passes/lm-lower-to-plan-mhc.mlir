// RUN: daybreak-opt %s --lm-lower-to-plan="max-tokens=16" | FileCheck %s
// RUN: daybreak-opt %s --lm-check-target=target=cuda | FileCheck %s --check-prefix=CUDA

// Tests that the mHC ops lower to the mhc_pre, mhc_post and mhc_post_pre
// kernels (Kernels.def), their parameters typed, an absent norm weight
// marked absent, the streams a [T, n, D] buffer of the arena; and that
// target cuda takes them (both devices implement the kernels), leaving them
// unchanged.
// CHECK-LABEL: plan.step @layer
// CHECK: plan.launch @mhc_pre{{.*}}(%[[S:[a-z0-9]+]], %{{.*}}, %{{.*}}, %{{.*}}, %[[X:[0-9]+]], %[[P:[0-9]+]], %[[C:[0-9]+]]) {absent = array<i64: 4>, eps = 9.9999999999999995E-7 : f64, norm_eps = 9.9999999999999995E-7 : f64, num_results = 3 : i64, sinkhorn_iters = 20 : i64} : memref<?x4x64xf32>, memref<24x256xf32>, memref<24xf32>, memref<3xf32>, memref<?x64xf32>, memref<?x4xf32>, memref<?x4x4xf32>
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

// The fused forms: the collapse with its norm weight and input_eps, and
// the write-back with the next collapse, whose new streams are a second
// arena buffer of the same shape.
// CHECK-LABEL: plan.step @fused
// CHECK: plan.launch @mhc_pre{{.*}}(%[[S:[a-z0-9]+]], %{{.*}}, %{{.*}}, %{{.*}}, %[[W:[0-9]+]], %[[X:[0-9]+]], %[[P:[0-9]+]], %[[C:[0-9]+]]) {eps = {{.*}}, input_eps = 1.000000e-05 : f64, norm_eps = {{.*}}, num_results = 3 : i64, sinkhorn_iters = 20 : i64} : memref<?x4x64xf32>, memref<24x256xf32>, memref<24xf32>, memref<3xf32>, memref<64xbf16>, memref<?x64xf32>
// CHECK: plan.launch @mhc_post_pre{{.*}}(%[[S]], %[[X]], %[[P]], %[[C]], %{{.*}}, %{{.*}}, %{{.*}}, %[[W]], %[[S1:[0-9]+]], %{{.*}}, %{{.*}}, %{{.*}}) {eps = {{.*}}, input_eps = 1.000000e-05 : f64, norm_eps = {{.*}}, num_results = 4 : i64, sinkhorn_iters = 20 : i64} : memref<?x4x64xf32>, {{.*}}, memref<64xbf16>, memref<?x4x64xf32>, memref<?x64xf32>, memref<?x4xf32>, memref<?x4x4xf32>
// CUDA-LABEL: func.func @fused
// CUDA: lm.mhc_pre {{.*}} norm
// CUDA: lm.mhc_post_pre {{.*}} norm
func.func @fused(%streams: tensor<?x4x64xf32>, %fn: tensor<24x256xf32>, %base: tensor<24xf32>,
                 %scale: tensor<3xf32>, %w: tensor<64xbf16>) -> tensor<?x64xf32> {
  %x, %post, %comb = lm.mhc_pre %streams, %fn, %base, %scale norm %w
      {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64, input_eps = 1.0e-05 : f64}
      : (tensor<?x4x64xf32>, tensor<24x256xf32>, tensor<24xf32>, tensor<3xf32>, tensor<64xbf16>)
      -> (tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
  %s1, %x2, %post2, %comb2 = lm.mhc_post_pre %streams, %x, %post, %comb, %fn, %base, %scale norm %w
      {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64, input_eps = 1.0e-05 : f64}
      : (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>,
         tensor<24x256xf32>, tensor<24xf32>, tensor<3xf32>, tensor<64xbf16>)
      -> (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
  return %x2 : tensor<?x64xf32>
}
