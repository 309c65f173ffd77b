// RUN: daybreak-opt %s --lm-fuse-elementwise --lm-lower-to-plan | FileCheck %s

// Tests that last-dim slices read only by fused elementwise kernels are read
// in place: the stacked gate/up result's halves, and the odd column of
// interleaved pairs seen through a reshape, take no copy_columns; the
// generated kernel takes its element range and indexes the source's rows
// (row, column from the index, the source's width, the offset). A slice that
// a kernel taking dense rows reads (matmul) is copied as before.
// CHECK-LABEL: plan.step @f
// CHECK: plan.launch @matmul
// CHECK-NOT: plan.launch @copy_columns
// CHECK: plan.launch @elementwise{{.*}}(%[[BOTH:[0-9]+]], %[[BOTH]], %{{[0-9]+}}) {{.*}}symbol = "daybreak_elementwise_0"
// CHECK: plan.launch @elementwise{{.*}}symbol = "daybreak_elementwise_1"
// CHECK: plan.launch @copy_columns
// CHECK: plan.launch @matmul
// CHECK-LABEL: func.func @daybreak_elementwise_0(%{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK: arith.constant 5 : i64
// CHECK: arith.divui
// CHECK: arith.constant 10 : i64
// CHECK-LABEL: func.func @daybreak_elementwise_1
// CHECK: arith.constant 1 : i64
// CHECK: arith.divui
// CHECK: arith.constant 2 : i64
lm.weight @w : tensor<10x8xbf16> {sources = ["w"]}
lm.weight @n : tensor<5x5xbf16> {sources = ["n"]}
func.func @f(%x: tensor<?x8xf32>, %pairs: tensor<?x3x2xf32>, %y: tensor<?x3xf32>)
    -> (tensor<?x5xf32>, tensor<?x3xf32>, tensor<?x5xf32>) {
  %c0 = arith.constant 0 : index
  %wr = lm.weight_ref @w : tensor<10x8xbf16>
  %both = lm.matmul %x, %wr : (tensor<?x8xf32>, tensor<10x8xbf16>) -> tensor<?x10xf32>
  %t = tensor.dim %both, %c0 : tensor<?x10xf32>
  %g = tensor.extract_slice %both[0, 0] [%t, 5] [1, 1] : tensor<?x10xf32> to tensor<?x5xf32>
  %u = tensor.extract_slice %both[0, 5] [%t, 5] [1, 1] : tensor<?x10xf32> to tensor<?x5xf32>
  %a = lm.swiglu %g, %u : (tensor<?x5xf32>, tensor<?x5xf32>) -> tensor<?x5xf32>
  %p = tensor.dim %pairs, %c0 : tensor<?x3x2xf32>
  %odd = tensor.extract_slice %pairs[0, 0, 1] [%p, 3, 1] [1, 1, 1]
      : tensor<?x3x2xf32> to tensor<?x3x1xf32>
  %o = tensor.collapse_shape %odd [[0], [1, 2]] : tensor<?x3x1xf32> into tensor<?x3xf32>
  %m = arith.mulf %o, %y : tensor<?x3xf32>
  %t2 = tensor.dim %both, %c0 : tensor<?x10xf32>
  %h = tensor.extract_slice %both[0, 5] [%t2, 5] [1, 1] : tensor<?x10xf32> to tensor<?x5xf32>
  %nr = lm.weight_ref @n : tensor<5x5xbf16>
  %r = lm.matmul %h, %nr : (tensor<?x5xf32>, tensor<5x5xbf16>) -> tensor<?x5xf32>
  return %a, %m, %r : tensor<?x5xf32>, tensor<?x3xf32>, tensor<?x5xf32>
}
