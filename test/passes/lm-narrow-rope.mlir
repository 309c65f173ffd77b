// RUN: daybreak-opt %s --lm-narrow-rope --split-input-file | FileCheck %s

// Tests MLA's query: the slice outside the rotated columns reads the rope's
// input, the slice of the rotated columns becomes a rope of offset 0 over
// that slice of the input, and the full-row rope is gone.
// CHECK-LABEL: func.func @query
// CHECK-SAME: (%[[Q:.*]]: tensor<?x4x48xf32>, %[[POS:.*]]: tensor<?xi32>)
// CHECK-NOT: lm.rope %[[Q]]
// CHECK: %[[NOPE:.*]] = tensor.extract_slice %[[Q]][0, 0, 0] [%{{.*}}, 4, 32] [1, 1, 1]
// CHECK: %[[ROT:.*]] = tensor.extract_slice %[[Q]][0, 0, 32] [%{{.*}}, 4, 16] [1, 1, 1]
// CHECK: %[[PE:.*]] = lm.rope %[[ROT]], %[[POS]] interleaved {dim = 16 : i64, offset = 0 : i64, theta = 1.000000e+04 : f64} : (tensor<?x4x16xf32>, tensor<?xi32>) -> tensor<?x4x16xf32>
// CHECK: return %[[NOPE]], %[[PE]]
func.func @query(%q: tensor<?x4x48xf32>, %pos: tensor<?xi32>)
    -> (tensor<?x4x32xf32>, tensor<?x4x16xf32>) {
  %r = lm.rope %q, %pos interleaved {offset = 32 : i64, dim = 16 : i64, theta = 10000.0 : f64}
      : (tensor<?x4x48xf32>, tensor<?xi32>) -> tensor<?x4x48xf32>
  %c0 = arith.constant 0 : index
  %t = tensor.dim %r, %c0 : tensor<?x4x48xf32>
  %nope = tensor.extract_slice %r[0, 0, 0] [%t, 4, 32] [1, 1, 1]
      : tensor<?x4x48xf32> to tensor<?x4x32xf32>
  %pe = tensor.extract_slice %r[0, 0, 32] [%t, 4, 16] [1, 1, 1]
      : tensor<?x4x48xf32> to tensor<?x4x16xf32>
  return %nope, %pe : tensor<?x4x32xf32>, tensor<?x4x16xf32>
}

// -----

// Tests that a rope read whole, or by a slice straddling the rotated
// columns, stays as it is, with all its slices: narrowing the others would
// run the rope twice.
// CHECK-LABEL: func.func @kept
// CHECK-SAME: (%[[X:.*]]: tensor<?x80xf32>, %[[POS:.*]]: tensor<?xi32>)
// CHECK: %[[R:.*]] = lm.rope %[[X]], %[[POS]] half_split {dim = 16 : i64, offset = 64 : i64
// CHECK: tensor.extract_slice %[[R]][0, 64] [%{{.*}}, 16] [1, 1]
// CHECK-NOT: lm.rope
// CHECK-LABEL: func.func @straddle
// CHECK: %[[R:.*]] = lm.rope
// CHECK: tensor.extract_slice %[[R]][0, 56]
// CHECK: tensor.extract_slice %[[R]][0, 64]
// CHECK-NOT: lm.rope
func.func @kept(%x: tensor<?x80xf32>, %pos: tensor<?xi32>)
    -> (tensor<?x80xf32>, tensor<?x16xf32>) {
  %r = lm.rope %x, %pos half_split {offset = 64 : i64, dim = 16 : i64, theta = 10000.0 : f64}
      : (tensor<?x80xf32>, tensor<?xi32>) -> tensor<?x80xf32>
  %c0 = arith.constant 0 : index
  %t = tensor.dim %r, %c0 : tensor<?x80xf32>
  %pe = tensor.extract_slice %r[0, 64] [%t, 16] [1, 1]
      : tensor<?x80xf32> to tensor<?x16xf32>
  return %r, %pe : tensor<?x80xf32>, tensor<?x16xf32>
}
func.func @straddle(%x: tensor<?x80xf32>, %pos: tensor<?xi32>)
    -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %r = lm.rope %x, %pos half_split {offset = 64 : i64, dim = 16 : i64, theta = 10000.0 : f64}
      : (tensor<?x80xf32>, tensor<?xi32>) -> tensor<?x80xf32>
  %c0 = arith.constant 0 : index
  %t = tensor.dim %r, %c0 : tensor<?x80xf32>
  %straddle = tensor.extract_slice %r[0, 56] [%t, 16] [1, 1]
      : tensor<?x80xf32> to tensor<?x16xf32>
  %pe = tensor.extract_slice %r[0, 64] [%t, 16] [1, 1]
      : tensor<?x80xf32> to tensor<?x16xf32>
  return %straddle, %pe : tensor<?x16xf32>, tensor<?x16xf32>
}
