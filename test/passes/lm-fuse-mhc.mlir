// RUN: daybreak-opt %s --lm-fuse-mhc --split-input-file | FileCheck %s

// Tests that a collapse takes the RMS norm that is its input's only user,
// that a write-back feeding the next collapse becomes one lm.mhc_post_pre
// (which keeps the norm the collapse took), and that neither happens when
// another op reads the value the fusion would remove.

// Two sublayers: the first collapse takes its norm; the write-back of the
// first and the collapse of the second become one op; the last write-back
// is left alone (nothing collapses after it).
// CHECK-LABEL: func.func @two_sublayers
// CHECK-SAME: (%[[S:[a-z0-9]+]]: {{.*}}, %[[W1:[a-z0-9]+]]: tensor<64xf32>, %[[W2:[a-z0-9]+]]: tensor<64xbf16>
// CHECK: %[[X:.+]], %[[P:.+]], %[[C:.+]] = lm.mhc_pre %[[S]], %{{.*}}, %{{.*}}, %{{.*}} norm %[[W1]] {eps = {{.*}}, input_eps = 1.000000e-05 : f64, norm_eps = {{.*}}, sinkhorn_iters = 20 : i64}
// CHECK-NOT: lm.rms_norm
// CHECK: %[[Y:.+]] = lm.matmul %[[X]]
// CHECK: %[[S1:.+]], %[[X2:.+]], %[[P2:.+]], %[[C2:.+]] = lm.mhc_post_pre %[[S]], %[[Y]], %[[P]], %[[C]], %{{.*}}, %{{.*}}, %{{.*}} norm %[[W2]] {eps = {{.*}}, input_eps = 9.9999999999999995E-7 : f64
// CHECK-NOT: lm.rms_norm
// CHECK: %[[Y2:.+]] = lm.matmul %[[X2]]
// CHECK: %[[S2:.+]] = lm.mhc_post %[[S1]], %[[Y2]], %[[P2]], %[[C2]]
// CHECK: return %[[S2]]
func.func @two_sublayers(%streams: tensor<?x4x64xf32>, %w1: tensor<64xf32>, %w2: tensor<64xbf16>,
                         %fn: tensor<24x256xf32>, %base: tensor<24xf32>, %scale: tensor<3xf32>,
                         %proj: tensor<64x64xf32>) -> tensor<?x4x64xf32> {
  %x, %post, %comb = lm.mhc_pre %streams, %fn, %base, %scale
      {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x4x64xf32>, tensor<24x256xf32>, tensor<24xf32>, tensor<3xf32>)
      -> (tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
  %n = lm.rms_norm %x, %w1 {eps = 1.0e-05 : f64} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %y = lm.matmul %n, %proj : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %s1 = lm.mhc_post %streams, %y, %post, %comb
      : (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>) -> tensor<?x4x64xf32>
  %x2, %post2, %comb2 = lm.mhc_pre %s1, %fn, %base, %scale
      {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x4x64xf32>, tensor<24x256xf32>, tensor<24xf32>, tensor<3xf32>)
      -> (tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
  %n2 = lm.rms_norm %x2, %w2 {eps = 1.0e-06 : f64} : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  %y2 = lm.matmul %n2, %proj : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %s2 = lm.mhc_post %s1, %y2, %post2, %comb2
      : (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>) -> tensor<?x4x64xf32>
  return %s2 : tensor<?x4x64xf32>
}

// -----

// The collapse is read by something besides the norm: the norm stays. The
// new streams are also returned, which is after the next collapse: the
// fused op still produces them.
// CHECK-LABEL: func.func @collapse_read_twice
// CHECK: %[[X:.+]], %[[P:.+]], %[[C:.+]] = lm.mhc_pre %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}} {
// CHECK: %[[N:.+]] = lm.rms_norm %[[X]]
// CHECK: %[[S1:.+]], %[[X2:.+]], %{{.+}}, %{{.+}} = lm.mhc_post_pre %{{.*}}, %[[X]], %[[P]], %[[C]]
// CHECK: return %[[N]], %[[S1]], %[[X2]]
func.func @collapse_read_twice(%streams: tensor<?x4x64xf32>, %w: tensor<64xf32>,
                               %fn: tensor<24x256xf32>, %base: tensor<24xf32>, %scale: tensor<3xf32>)
    -> (tensor<?x64xf32>, tensor<?x4x64xf32>, tensor<?x64xf32>) {
  %x, %post, %comb = lm.mhc_pre %streams, %fn, %base, %scale
      {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x4x64xf32>, tensor<24x256xf32>, tensor<24xf32>, tensor<3xf32>)
      -> (tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
  %n = lm.rms_norm %x, %w {eps = 1.0e-05 : f64} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %s1 = lm.mhc_post %streams, %x, %post, %comb
      : (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>) -> tensor<?x4x64xf32>
  %x2, %post2, %comb2 = lm.mhc_pre %s1, %fn, %base, %scale
      {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x4x64xf32>, tensor<24x256xf32>, tensor<24xf32>, tensor<3xf32>)
      -> (tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
  return %n, %s1, %x2 : tensor<?x64xf32>, tensor<?x4x64xf32>, tensor<?x64xf32>
}

// -----

// The new streams are read before the next collapse (here by a second
// write-back): the fused op could not produce them in time, so the
// write-back stays.
// CHECK-LABEL: func.func @streams_read_before_the_collapse
// CHECK: %[[S1:.+]] = lm.mhc_post
// CHECK: lm.mhc_post %[[S1]]
// CHECK: lm.mhc_pre %[[S1]]
// CHECK-NOT: lm.mhc_post_pre
func.func @streams_read_before_the_collapse(
    %streams: tensor<?x4x64xf32>, %y: tensor<?x64xf32>, %post: tensor<?x4xf32>,
    %comb: tensor<?x4x4xf32>, %fn: tensor<24x256xf32>, %base: tensor<24xf32>,
    %scale: tensor<3xf32>) -> (tensor<?x4x64xf32>, tensor<?x64xf32>) {
  %s1 = lm.mhc_post %streams, %y, %post, %comb
      : (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>) -> tensor<?x4x64xf32>
  %s2 = lm.mhc_post %s1, %y, %post, %comb
      : (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>) -> tensor<?x4x64xf32>
  %x2, %post2, %comb2 = lm.mhc_pre %s1, %fn, %base, %scale
      {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x4x64xf32>, tensor<24x256xf32>, tensor<24xf32>, tensor<3xf32>)
      -> (tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
  return %s2, %x2 : tensor<?x4x64xf32>, tensor<?x64xf32>
}
