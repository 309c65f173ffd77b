// RUN: daybreak-opt %s --lm-assign-kv-layout --lm-lower-to-plan --split-input-file | FileCheck %s
// RUN: daybreak-opt %s --lm-assign-kv-layout --lm-lower-to-plan --plan-assign-workspace --split-input-file | FileCheck %s --check-prefix=WORKSPACE

// Tests MLA's key row [norm(latent) | rope(pe)] lowered without a copy: the
// two column slices of the projection are views its norm and rope read
// (Kernels.def's VIEW slots), and the norm and rope write the parts of the
// concatenation in place, so the cache write reads the whole row.
// CHECK-LABEL: plan.step @key
// CHECK-NOT: copy_columns
// CHECK: %[[KV:.*]] = plan.buffer "[[KVNAME:v[0-9]+]]" offset(0) (%{{.*}}) : memref<?x80xf32>
// CHECK: plan.launch @matmul{{.*}}(%{{.*}}, %{{.*}}, %[[KV]])
// CHECK: %[[LATENT:.*]] = plan.column_view %[[KV]][0] : memref<?x80xf32> to memref<?x64xf32, strided<[80, 1]>>
// CHECK: %[[ROW:.*]] = plan.buffer "[[ROWNAME:v[0-9]+]]" offset(0) (%{{.*}}) : memref<?x80xf32>
// CHECK: %[[NORMED:.*]] = plan.column_view %[[ROW]][0] : memref<?x80xf32> to memref<?x64xf32, strided<[80, 1]>>
// CHECK: plan.launch @rms_norm{{.*}}(%[[LATENT]], %{{.*}}, %[[NORMED]])
// CHECK: %[[PE:.*]] = plan.column_view %[[KV]][64] : memref<?x80xf32> to memref<?x16xf32, strided<[80, 1], offset: 64>>
// CHECK: %[[ROTATED:.*]] = plan.column_view %[[ROW]][64] : memref<?x80xf32> to memref<?x16xf32, strided<[80, 1], offset: 64>>
// CHECK: plan.launch @rope{{.*}}(%[[PE]], %{{.*}}, %[[ROTATED]])
// CHECK: plan.launch @cache_write{{.*}}(%{{.*}}, %[[ROW]],
// A view's reads and writes are its source's: the projection's buffer lives
// until the rope reads its view (op 5), the row's from the norm writing its
// view (op 4) to the cache write.
// WORKSPACE-LABEL: plan.step @key
// WORKSPACE: plan.buffer "v3" {{.*}}live = array<i64: 2, 5>
// WORKSPACE: plan.buffer "v4" {{.*}}live = array<i64: 4, 6>
lm.weight @kv_a : tensor<80x32xbf16> {sources = ["kv_a"]}
lm.weight @kv_norm : tensor<64xbf16> {sources = ["kv_norm"]}
func.func @key(%x: tensor<?x32xf32>, %pos: tensor<?xi32> {lm.role = "positions"},
               %seq: tensor<?xi32> {lm.role = "sequences"},
               %cache: tensor<2x16x80xf32>) -> tensor<2x16x80xf32> {
  %c0 = arith.constant 0 : index
  %w = lm.weight_ref @kv_a : tensor<80x32xbf16>
  %kv = lm.matmul %x, %w : (tensor<?x32xf32>, tensor<80x32xbf16>) -> tensor<?x80xf32>
  %t = tensor.dim %kv, %c0 : tensor<?x80xf32>
  %latent = tensor.extract_slice %kv[0, 0] [%t, 64] [1, 1] : tensor<?x80xf32> to tensor<?x64xf32>
  %nw = lm.weight_ref @kv_norm : tensor<64xbf16>
  %normed = lm.rms_norm %latent, %nw {eps = 1.0e-06 : f64} : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  %pe = tensor.extract_slice %kv[0, 64] [%t, 16] [1, 1] : tensor<?x80xf32> to tensor<?x16xf32>
  %rotated = lm.rope %pe, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64}
      : (tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  %row = tensor.concat dim(1) %normed, %rotated : (tensor<?x64xf32>, tensor<?x16xf32>) -> tensor<?x80xf32>
  %new = lm.cache_write %cache, %row, %pos sequences %seq
      : (tensor<2x16x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x16x80xf32>
  return %new : tensor<2x16x80xf32>
}

// -----

// Tests what stays a copy: a slice a kernel taking dense rows also reads
// (matmul), and a concatenation part read by something else too or
// computed by a kernel that writes dense rows only (matmul's result).
// CHECK-LABEL: plan.step @copies
// CHECK: plan.launch @copy_columns
// CHECK: plan.launch @rms_norm
// CHECK: plan.launch @matmul
// CHECK: plan.launch @rms_norm
// CHECK: plan.launch @copy_columns
// CHECK: plan.launch @copy_columns
// CHECK-NOT: column_view
lm.weight @n : tensor<4xbf16> {sources = ["n"]}
lm.weight @m : tensor<4x4xbf16> {sources = ["m"]}
func.func @copies(%x: tensor<?x8xf32>) -> (tensor<?x4xf32>, tensor<?x8xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %x, %c0 : tensor<?x8xf32>
  %s = tensor.extract_slice %x[0, 4] [%t, 4] [1, 1] : tensor<?x8xf32> to tensor<?x4xf32>
  %w = lm.weight_ref @n : tensor<4xbf16>
  %m = lm.weight_ref @m : tensor<4x4xbf16>
  %a = lm.rms_norm %s, %w {eps = 1.0e-06 : f64} : (tensor<?x4xf32>, tensor<4xbf16>) -> tensor<?x4xf32>
  %b = lm.matmul %s, %m : (tensor<?x4xf32>, tensor<4x4xbf16>) -> tensor<?x4xf32>
  %c = lm.rms_norm %b, %w {eps = 1.0e-06 : f64} : (tensor<?x4xf32>, tensor<4xbf16>) -> tensor<?x4xf32>
  %cat = tensor.concat dim(1) %b, %c : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x8xf32>
  return %a, %cat, %c : tensor<?x4xf32>, tensor<?x8xf32>, tensor<?x4xf32>
}

// -----

// Tests a concatenation part that is a column slice read by nothing else
// (Kimi Linear's MLA query without rope: [absorbed nope | pe as projected]):
// the concatenation copies the columns from the slice's source, one copy
// instead of a copy into the slice's buffer and another out of it, and a
// layer_norm without its bias reads a view (its optional slot absent).
// CHECK-LABEL: plan.step @part
// CHECK: %[[Q:.*]] = plan.buffer "{{v[0-9]+}}" {{.*}} : memref<?x48xf32>
// CHECK: plan.launch @matmul{{.*}}(%{{.*}}, %{{.*}}, %[[Q]])
// CHECK: %[[NOPE:.*]] = plan.column_view %[[Q]][0] : memref<?x48xf32> to memref<?x32xf32, strided<[48, 1]>>
// CHECK: %[[ROW:.*]] = plan.buffer "{{v[0-9]+}}" {{.*}} : memref<?x48xf32>
// CHECK: %[[HEAD:.*]] = plan.column_view %[[ROW]][0] : memref<?x48xf32> to memref<?x32xf32, strided<[48, 1]>>
// CHECK: plan.launch @layer_norm{{.*}}(%[[NOPE]], %{{.*}}, %[[HEAD]]) {absent = array<i64: 2>
// CHECK: plan.launch @copy_columns{{.*}}(%[[Q]], %[[ROW]]) {dst_offset = 32 : i64, num_results = 1 : i64, src_offset = 32 : i64}
// CHECK-NOT: plan.launch @copy_columns
lm.weight @wq : tensor<48x16xbf16> {sources = ["wq"]}
lm.weight @ln : tensor<32xbf16> {sources = ["ln"]}
func.func @part(%x: tensor<?x16xf32>) -> tensor<?x48xf32> {
  %c0 = arith.constant 0 : index
  %w = lm.weight_ref @wq : tensor<48x16xbf16>
  %q = lm.matmul %x, %w : (tensor<?x16xf32>, tensor<48x16xbf16>) -> tensor<?x48xf32>
  %t = tensor.dim %q, %c0 : tensor<?x48xf32>
  %nope = tensor.extract_slice %q[0, 0] [%t, 32] [1, 1] : tensor<?x48xf32> to tensor<?x32xf32>
  %pe = tensor.extract_slice %q[0, 32] [%t, 16] [1, 1] : tensor<?x48xf32> to tensor<?x16xf32>
  %lw = lm.weight_ref @ln : tensor<32xbf16>
  %head = lm.layer_norm %nope, %lw {eps = 1.0e-06 : f64} : (tensor<?x32xf32>, tensor<32xbf16>) -> tensor<?x32xf32>
  %row = tensor.concat dim(1) %head, %pe : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x48xf32>
  return %row : tensor<?x48xf32>
}
