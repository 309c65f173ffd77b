// RUN: daybreak-opt %s -split-input-file --lm-lower-to-plan | FileCheck %s
// RUN: daybreak-opt %s -split-input-file --lm-lower-to-plan="max-tokens=16" | FileCheck %s --check-prefix=MAX
// RUN: daybreak-opt %s -split-input-file --lm-lower-to-plan="max-tokens=16 max-batch=2" | FileCheck %s --check-prefix=BATCH
// RUN: daybreak-opt %s -split-input-file --lm-lower-to-plan="target=cuda" | FileCheck %s --check-prefix=CUDA

// Tests that a small function lowers to one step sized by the token count:
// weights become plan.weights packed 64-byte aligned in section 0 with their
// checkpoint sources, the cache a pool of [batch * max_seq_len] rows of its
// layout's bytes, every value a buffer (the reshape reuses its source's
// name), every op a launch carrying its attributes, and the arguments and
// results io markers.
// CHECK-LABEL: module
// CHECK: plan.weight @embed : tensor<256x128xbf16> {lm.sources = ["model.embed_tokens.weight"], offset = 0 : i64, section = 0 : i64}
// CHECK: plan.weight @norm : tensor<128xbf16> {lm.sources = ["model.norm.weight"], offset = 65536 : i64, section = 0 : i64}
// CHECK: plan.weight @head : tensor<256x128xbf16> {lm.sources = ["lm_head.weight"], offset = 65792 : i64, section = 0 : i64}
// CHECK: plan.cache_pool @key_value {batch = 2 : i64, layers = 1 : i64, layout = #lm.kv_layout<key_value, page_size = 64, feature_dim = 80, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>, max_seq_len = 64 : i64, max_tokens = 128 : i64}
// CHECK-LABEL: plan.step @prefill arena({{[0-9]+}}) sizes ["tokens"] attributes {max_sizes = array<i64: 4096>} {
// CHECK-NEXT: ^bb0(%[[T:.*]]: index):
// CHECK-NEXT: %[[IDS:.*]] = plan.buffer "v0" offset(0) (%[[T]]) {io = "input"} : memref<?xi32>
// CHECK-NEXT: %[[C:.*]] = plan.cache_ref @key_value layer(0) : memref<128x160xi8>
// CHECK-NEXT: %[[KV:.*]] = plan.buffer "v1" offset(0) (%[[T]]) {io = "input"} : memref<?x80xf32>
// CHECK-NEXT: %[[SL:.*]] = plan.buffer "v2" offset(0) (%[[T]]) {io = "input"} : memref<?xi32>
// CHECK-NEXT: %[[SEQ:.*]] = plan.buffer "v3" offset(0) (%[[T]]) {io = "input"} : memref<?xi32>
// CHECK-NEXT: %[[TE:.*]] = plan.weight_ref @embed : memref<256x128xbf16>
// CHECK-NEXT: %[[H:.*]] = plan.buffer "v4" offset(0) (%[[T]]) : memref<?x128xbf16>
// CHECK-NEXT: plan.launch @embedding.3[%[[T]]] grid #{{.*}} block [1, 1, 1] smem 0(%[[TE]], %[[IDS]], %[[H]]) {num_results = 1 : i64} : memref<256x128xbf16>, memref<?xi32>, memref<?x128xbf16>
// CHECK-NEXT: %[[WN:.*]] = plan.weight_ref @norm : memref<128xbf16>
// CHECK-NEXT: %[[N:.*]] = plan.buffer "v5" offset(0) (%[[T]]) : memref<?x128xbf16>
// CHECK-NEXT: plan.launch @rms_norm.3[%[[T]]] grid #{{.*}} block [1, 1, 1] smem 0(%[[H]], %[[WN]], %[[N]]) {eps = 9.9999999999999995E-7 : f64, num_results = 1 : i64}
// CHECK-NEXT: %[[R:.*]] = plan.buffer "v5" offset(0) (%[[T]]) {io = "output"} : memref<?x4x32xbf16>
// CHECK-NEXT: %[[WH:.*]] = plan.weight_ref @head : memref<256x128xbf16>
// CHECK-NEXT: %[[L:.*]] = plan.buffer "v6" offset(0) (%[[T]]) {io = "output"} : memref<?x256xf32>
// CHECK-NEXT: plan.launch @matmul.3[%[[T]]] grid #{{.*}} block [1, 1, 1] smem 0(%[[N]], %[[WH]], %[[L]]) {absent = array<i64: 2>, num_results = 1 : i64} : memref<?x128xbf16>, memref<256x128xbf16>, memref<?x256xf32>
// CHECK-NEXT: plan.launch @cache_write.4[%[[T]]] grid #{{.*}} block [1, 1, 1] smem 0(%[[C]], %[[KV]], %[[SL]], %[[SEQ]]) {absent = array<i64: 4, 5, 6>, num_results = 0 : i64} : memref<128x160xi8>, memref<?x80xf32>, memref<?xi32>, memref<?xi32>
// CHECK-NEXT: }
// CHECK-DAG: plan.kernel @embedding.3 {entry = "embedding", num_args = 3 : i64, target = #plan<target cpu>}
// CHECK-DAG: plan.kernel @rms_norm.3 {entry = "rms_norm", num_args = 3 : i64, target = #plan<target cpu>}
// CHECK-DAG: plan.kernel @matmul.3 {entry = "matmul", num_args = 3 : i64, target = #plan<target cpu>}
// CHECK-DAG: plan.kernel @cache_write.4 {entry = "cache_write", num_args = 4 : i64, target = #plan<target cpu>}
// CHECK-NOT: func.func
// CHECK-NOT: lm.weight
// Kernels are declared for the target the plan is lowered for.
// CUDA-LABEL: plan.step @prefill
// CUDA-DAG: plan.kernel @embedding.3 {entry = "embedding", num_args = 3 : i64, target = #plan<target cuda>}
// CUDA-DAG: plan.kernel @matmul.3 {entry = "matmul", num_args = 3 : i64, target = #plan<target cuda>}
// MAX-LABEL: plan.step @prefill arena({{[0-9]+}}) sizes ["tokens"] attributes {max_sizes = array<i64: 16>}
lm.weight @embed : tensor<256x128xbf16> {sources = ["model.embed_tokens.weight"]}
lm.weight @norm : tensor<128xbf16> {sources = ["model.norm.weight"]}
lm.weight @head : tensor<256x128xbf16> {sources = ["lm_head.weight"]}
func.func @prefill(%ids: tensor<?xi32>, %c: tensor<2x64x80xf32>, %kv: tensor<?x80xf32>,
                   %slots: tensor<?xi32>, %seq: tensor<?xi32>)
    -> (tensor<?x256xf32>, tensor<?x4x32xbf16>, tensor<2x64x80xf32>) {
  %te = lm.weight_ref @embed : tensor<256x128xbf16>
  %h = lm.embedding %te, %ids : (tensor<256x128xbf16>, tensor<?xi32>) -> tensor<?x128xbf16>
  %wn = lm.weight_ref @norm : tensor<128xbf16>
  %n = lm.rms_norm %h, %wn {eps = 1.0e-06 : f64}
      : (tensor<?x128xbf16>, tensor<128xbf16>) -> tensor<?x128xbf16>
  %c0 = arith.constant 0 : index
  %t = tensor.dim %n, %c0 : tensor<?x128xbf16>
  %r = tensor.expand_shape %n [[0], [1, 2]] output_shape [%t, 4, 32]
      : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %wh = lm.weight_ref @head : tensor<256x128xbf16>
  %l = lm.matmul %n, %wh : (tensor<?x128xbf16>, tensor<256x128xbf16>) -> tensor<?x256xf32>
  %c1 = lm.cache_write %c, %kv, %slots sequences %seq
      {layout = #lm.kv_layout<key_value, page_size = 64, feature_dim = 80, storage = bf16,
                              scale_block = 0, tail_dim = 0, tail = bf16>}
      : (tensor<2x64x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x80xf32>
  return %l, %r, %c1 : tensor<?x256xf32>, tensor<?x4x32xbf16>, tensor<2x64x80xf32>
}

// -----

// Tests that a folded weight keeps its value for the artifact writer.
// CHECK-LABEL: module
// CHECK: plan.weight @folded : tensor<2x2xf32> {lm.sources = [], lm.value = dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>, offset = 0 : i64, section = 0 : i64}
// CHECK-LABEL: plan.step @folded_weight
// CHECK: %[[X:.*]] = plan.buffer "v0" offset(0) (%{{.*}}) {io = "input"} : memref<?x2xf32>
// CHECK: %[[W:.*]] = plan.weight_ref @folded : memref<2x2xf32>
// CHECK: %[[Y:.*]] = plan.buffer "v1" offset(0) (%{{.*}}) {io = "output"} : memref<?x2xf32>
// CHECK: plan.launch @matmul.3[%{{.*}}] {{.*}}(%[[X]], %[[W]], %[[Y]])
// MAX-LABEL: plan.step @folded_weight arena({{[0-9]+}}) sizes ["tokens"] attributes {max_sizes = array<i64: 16>}
lm.weight @folded : tensor<2x2xf32> {sources = [], value = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>}
func.func @folded_weight(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %w = lm.weight_ref @folded : tensor<2x2xf32>
  %y = lm.matmul %x, %w : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// Tests that caches of one layout share a pool, one layer per cache in each
// step (layer numbers restart in every step), with max_seq_len rounded up to
// whole pages: 2 x 64 rows for 60 tokens.
// CHECK-LABEL: module
// CHECK: plan.cache_pool @key_value {batch = 2 : i64, layers = 2 : i64, {{.*}}, max_seq_len = 60 : i64, max_tokens = 128 : i64}
// CHECK-NOT: plan.cache_pool
// CHECK-LABEL: plan.step @prefill
// CHECK: %[[C:.*]] = plan.cache_ref @key_value layer(0) : memref<128x160xi8>
// CHECK: %[[D:.*]] = plan.cache_ref @key_value layer(1) : memref<128x160xi8>
// CHECK: plan.launch @cache_write.4[%{{.*}}] {{.*}}(%[[C]],
// CHECK: plan.launch @cache_write.4[%{{.*}}] {{.*}}(%[[D]],
// CHECK-LABEL: plan.step @decode
// CHECK: %[[C:.*]] = plan.cache_ref @key_value layer(0) : memref<128x160xi8>
// CHECK: plan.launch @cache_write.4[%{{.*}}] {{.*}}(%[[C]],
// MAX-LABEL: plan.step @prefill arena({{[0-9]+}}) sizes ["tokens"] attributes {max_sizes = array<i64: 16>}
// MAX-LABEL: plan.step @decode arena({{[0-9]+}}) sizes ["tokens"] attributes {max_sizes = array<i64: 16>}
// With max-batch, @decode (one token a sequence) is planned for 2 tokens,
// and its arena holds its inputs at 2 tokens: 2 rows of 80 floats (640 B,
// aligned to 768) and two int32 pairs (256 B each, aligned).
// BATCH-LABEL: plan.step @prefill arena({{[0-9]+}}) sizes ["tokens"] attributes {max_sizes = array<i64: 16>}
// BATCH-LABEL: plan.step @decode arena(1280) sizes ["tokens"] attributes {max_sizes = array<i64: 2>}
#kv = #lm.kv_layout<key_value, page_size = 64, feature_dim = 80, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>
func.func @prefill(%c: tensor<2x60x80xf32>, %d: tensor<2x60x80xf32>, %kv: tensor<?x80xf32>,
                   %slots: tensor<?xi32>, %seq: tensor<?xi32>)
    -> (tensor<2x60x80xf32>, tensor<2x60x80xf32>) {
  %c1 = lm.cache_write %c, %kv, %slots sequences %seq {layout = #kv}
      : (tensor<2x60x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x60x80xf32>
  %d1 = lm.cache_write %d, %kv, %slots sequences %seq {layout = #kv}
      : (tensor<2x60x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x60x80xf32>
  return %c1, %d1 : tensor<2x60x80xf32>, tensor<2x60x80xf32>
}
func.func @decode(%c: tensor<2x60x80xf32>, %kv: tensor<?x80xf32>, %slots: tensor<?xi32>,
                  %seq: tensor<?xi32>) -> tensor<2x60x80xf32> {
  %c1 = lm.cache_write %c, %kv, %slots sequences %seq {layout = #kv}
      : (tensor<2x60x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x60x80xf32>
  return %c1 : tensor<2x60x80xf32>
}

// -----

// Tests that last-dim slices and concatenations become column copies with
// their source and destination column offsets; a slice read only by a
// concatenation is copied once, from its source's columns.
// CHECK-LABEL: plan.step @columns
// CHECK-NEXT: ^bb0(%[[T:.*]]: index):
// CHECK-NEXT: %[[A:.*]] = plan.buffer "v0" offset(0) (%[[T]]) {io = "input"} : memref<?x80xf32>
// CHECK-NEXT: %[[CAT:.*]] = plan.buffer "v1" offset(0) (%[[T]]) {io = "output"} : memref<?x96xf32>
// CHECK-NEXT: plan.launch @copy_columns.2[%[[T]]] {{.*}}(%[[A]], %[[CAT]]) {dst_offset = 0 : i64, num_results = 1 : i64, src_offset = 0 : i64}
// CHECK-NEXT: plan.launch @copy_columns.2[%[[T]]] {{.*}}(%[[A]], %[[CAT]]) {dst_offset = 80 : i64, num_results = 1 : i64, src_offset = 64 : i64}
// MAX-LABEL: plan.step @columns
func.func @columns(%a: tensor<?x80xf32>) -> tensor<?x96xf32> {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %a, %c0 : tensor<?x80xf32>
  %s = tensor.extract_slice %a[0, 64] [%t, 16] [1, 1] : tensor<?x80xf32> to tensor<?x16xf32>
  %cat = tensor.concat dim(1) %a, %s : (tensor<?x80xf32>, tensor<?x16xf32>) -> tensor<?x96xf32>
  return %cat : tensor<?x96xf32>
}

// -----

// Tests that an expert matmul over FP8 experts (left undequantised by
// lm-fold-weights) launches on the stored codes, with the block scales as
// its last operand, `weight_scale` set and the blocks: the devices
// dequantise at load. The fp8_dequant itself launches nothing.
// CHECK-LABEL: plan.step @experts
// CHECK-NEXT: ^bb0(%[[T:.*]]: index):
// CHECK-NEXT: %[[X:.*]] = plan.buffer "v0" offset(0) (%[[T]]) {io = "input"} : memref<?x2x48xf32>
// CHECK-NEXT: %[[IDX:.*]] = plan.buffer "v1" offset(0) (%[[T]]) {io = "input"} : memref<?x2xi32>
// CHECK-NEXT: %[[RW:.*]] = plan.buffer "v2" offset(0) (%[[T]]) {io = "input"} : memref<?x2xf32>
// CHECK-NEXT: %[[W8:.*]] = plan.weight_ref @w8 : memref<8x128x48xf8E4M3FN>
// CHECK-NEXT: %[[S:.*]] = plan.weight_ref @s : memref<8x1x1xf32>
// CHECK-NEXT: %[[Y:.*]] = plan.buffer "v3" offset(0) (%[[T]]) {io = "output"} : memref<?x128xf32>
// CHECK-NEXT: plan.launch @expert_matmul.6[%[[T]]] {{.*}}(%[[X]], %[[W8]], %[[IDX]], %[[RW]], %[[S]], %[[Y]]) {absent = array<i64: 4>, block_size = array<i64: 128, 128>, num_results = 1 : i64}
// CHECK-NOT: plan.launch
// MAX-LABEL: plan.step @experts
lm.weight @w8 : tensor<8x128x48xf8E4M3FN> {sources = ["w8"]}
lm.weight @s : tensor<8x1x1xf32> {sources = ["s"]}
func.func @experts(%x: tensor<?x2x48xf32>, %idx: tensor<?x2xi32>, %rw: tensor<?x2xf32>) -> tensor<?x128xf32> {
  %w8 = lm.weight_ref @w8 : tensor<8x128x48xf8E4M3FN>
  %s = lm.weight_ref @s : tensor<8x1x1xf32>
  %w = lm.fp8_dequant %w8, %s {block_size = array<i64: 128, 128>}
      : (tensor<8x128x48xf8E4M3FN>, tensor<8x1x1xf32>) -> tensor<8x128x48xf32>
  %y = lm.expert_matmul %x, %w, %idx weights %rw
      : (tensor<?x2x48xf32>, tensor<8x128x48xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

// Tests that an expert matmul over MXFP4 experts launches
// mxfp4_expert_matmul on the stored weights: values packed two a byte (the
// [8, 128, 64] f4E2M1FN weight takes 32 KiB, so the scales follow at 32768)
// and one E8M0 byte per 32 (2 KiB, the bias at 34816), slots by declaration
// (routing weights absent with a bias, bias absent with routing weights).
// CHECK: plan.weight @v4 : tensor<8x128x64xf4E2M1FN> {lm.sources = ["v4_blocks"], offset = 0 : i64, section = 0 : i64}
// CHECK: plan.weight @s4 : tensor<8x128x2xf8E8M0FNU> {lm.sources = ["v4_scales"], offset = 32768 : i64, section = 0 : i64}
// CHECK: plan.weight @b4 : tensor<8x128xbf16> {lm.sources = ["v4_bias"], offset = 34816 : i64, section = 0 : i64}
// CHECK-LABEL: plan.step @mxfp4_experts
// CHECK-NEXT: ^bb0(%[[T:.*]]: index):
// CHECK-NEXT: %[[X:.*]] = plan.buffer "v0" offset(0) (%[[T]]) {io = "input"} : memref<?x64xf32>
// CHECK-NEXT: %[[IDX:.*]] = plan.buffer "v1" offset(0) (%[[T]]) {io = "input"} : memref<?x2xi32>
// CHECK-NEXT: %[[RW:.*]] = plan.buffer "v2" offset(0) (%[[T]]) {io = "input"} : memref<?x2xf32>
// CHECK-NEXT: %[[W:.*]] = plan.weight_ref @v4 : memref<8x128x64xf4E2M1FN>
// CHECK-NEXT: %[[S:.*]] = plan.weight_ref @s4 : memref<8x128x2xf8E8M0FNU>
// CHECK-NEXT: %[[B:.*]] = plan.weight_ref @b4 : memref<8x128xbf16>
// CHECK-NEXT: %[[Y:.*]] = plan.buffer "v3" offset(0) (%[[T]]) {io = "output"} : memref<?x2x128xf32>
// CHECK-NEXT: plan.launch @mxfp4_expert_matmul.6[%[[T]]] {{.*}}(%[[X]], %[[W]], %[[S]], %[[IDX]], %[[B]], %[[Y]]) {absent = array<i64: 4>, num_results = 1 : i64}
// CHECK-NEXT: %[[M:.*]] = plan.buffer "v4" offset(0) (%[[T]]) {io = "output"} : memref<?x128xf32>
// CHECK-NEXT: plan.launch @mxfp4_expert_matmul.6[%[[T]]] {{.*}}(%[[X]], %[[W]], %[[S]], %[[IDX]], %[[RW]], %[[M]]) {absent = array<i64: 5>, num_results = 1 : i64}
// CHECK-DAG: plan.kernel @mxfp4_expert_matmul.6 {entry = "mxfp4_expert_matmul", num_args = 6 : i64, target = #plan<target cpu>}
lm.weight @v4 : tensor<8x128x64xf4E2M1FN> {sources = ["v4_blocks"]}
lm.weight @s4 : tensor<8x128x2xf8E8M0FNU> {sources = ["v4_scales"]}
lm.weight @b4 : tensor<8x128xbf16> {sources = ["v4_bias"]}
func.func @mxfp4_experts(%x: tensor<?x64xf32>, %idx: tensor<?x2xi32>, %rw: tensor<?x2xf32>)
    -> (tensor<?x2x128xf32>, tensor<?x128xf32>) {
  %w = lm.weight_ref @v4 : tensor<8x128x64xf4E2M1FN>
  %s = lm.weight_ref @s4 : tensor<8x128x2xf8E8M0FNU>
  %b = lm.weight_ref @b4 : tensor<8x128xbf16>
  %slots = lm.mxfp4_expert_matmul %x, %w, %s, %idx bias %b
      : (tensor<?x64xf32>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>,
         tensor<?x2xi32>, tensor<8x128xbf16>) -> tensor<?x2x128xf32>
  %mixed = lm.mxfp4_expert_matmul %x, %w, %s, %idx weights %rw
      : (tensor<?x64xf32>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>,
         tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x128xf32>
  return %slots, %mixed : tensor<?x2x128xf32>, tensor<?x128xf32>
}
