// RUN: daybreak-opt %s --pass-pipeline='builtin.module(func.func(lm-fuse-cache-write))' --split-input-file | FileCheck %s

// Tests that the norms and RoPE that only compute a cache row become the
// write's prologue: DeepSeek's latent row (RMS over c_kv, k_pe rotated, as
// built and as lm-narrow-rope leaves it), its indexer key (layer norm, then
// RoPE), Kimi Linear's latent row (RMS over a prefix, no RoPE), GLM's (RMS
// over the row) and RoPE alone; and that nothing fuses where a norm or rope
// has another reader, where the RoPE is outside the rest of the row or
// comes before the norm, or where the prefix is not the row's start.

// The latent row as lm-narrow-rope leaves it: the rotated slice of the row.
// CHECK-LABEL: func.func @latent_narrowed
// CHECK-SAME: (%[[C:[a-z0-9]+]]: tensor<2x16x80xf32>, %[[KV:[a-z0-9]+]]: tensor<?x80xf32>, %[[W:[a-z0-9]+]]: tensor<64xbf16>, %[[P:[a-z0-9]+]]: tensor<?xi32>, %[[S:[a-z0-9]+]]: tensor<?xi32>)
// CHECK-NOT: tensor.extract_slice
// CHECK-NOT: lm.
// CHECK: %[[R:.+]] = lm.cache_write %[[C]], %[[KV]], %[[P]] sequences %[[S]] norm %[[W]] rope %[[P]] {eps = 9.9999999999999995E-7 : f64, layout = #lm.kv_layout<mla_latent, page_size = 16, feature_dim = 80, storage = f8E4M3FN, scale_block = 64, tail_dim = 16, tail = bf16>, norm = #lm<norm_kind rms>, norm_dim = 64 : i64, rope_dim = 16 : i64, rope_offset = 64 : i64, rope_style = #lm<rope_style interleaved>, theta = 1.000000e+04 : f64, yarn = #lm.yarn<factor = 4.000000e+01 : f64, original_max_positions = 64, beta_fast = 3.200000e+01 : f64, beta_slow = 1.000000e+00 : f64, attention_factor = 1.000000e+00 : f64, truncate = true>}
// CHECK-NEXT: return %[[R]]
func.func @latent_narrowed(%c: tensor<2x16x80xf32>, %kv: tensor<?x80xf32>,
                           %w: tensor<64xbf16>, %pos: tensor<?xi32>,
                           %seq: tensor<?xi32>) -> tensor<2x16x80xf32> {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %kv, %c0 : tensor<?x80xf32>
  %head = tensor.extract_slice %kv[0, 0] [%t, 64] [1, 1]
      : tensor<?x80xf32> to tensor<?x64xf32>
  %n = lm.rms_norm %head, %w {eps = 1.0e-06 : f64}
      : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  %t2 = tensor.dim %kv, %c0 : tensor<?x80xf32>
  %tail = tensor.extract_slice %kv[0, 64] [%t2, 16] [1, 1]
      : tensor<?x80xf32> to tensor<?x16xf32>
  %r = lm.rope %tail, %pos interleaved {offset = 0 : i64, dim = 16 : i64,
      theta = 1.0e+04 : f64,
      yarn = #lm.yarn<factor = 40.0, original_max_positions = 64,
                      beta_fast = 32.0, beta_slow = 1.0,
                      attention_factor = 1.0, truncate = true>}
      : (tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  %row = tensor.concat dim(1) %n, %r
      : (tensor<?x64xf32>, tensor<?x16xf32>) -> tensor<?x80xf32>
  %c1 = lm.cache_write %c, %row, %pos sequences %seq
      {layout = #lm.kv_layout<mla_latent, page_size = 16, feature_dim = 80,
                              storage = f8E4M3FN, scale_block = 64,
                              tail_dim = 16, tail = bf16>}
      : (tensor<2x16x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>)
      -> tensor<2x16x80xf32>
  return %c1 : tensor<2x16x80xf32>
}

// -----

// The latent row as the builder writes it: the row rotated, then sliced.
// CHECK-LABEL: func.func @latent_built
// CHECK-SAME: (%[[C:[a-z0-9]+]]: tensor<16x80xf32>, %[[KV:[a-z0-9]+]]: tensor<4x80xf32>, %[[W:[a-z0-9]+]]: tensor<64xf32>, %[[P:[a-z0-9]+]]: tensor<4xi32>)
// CHECK-NEXT: %[[R:.+]] = lm.cache_write %[[C]], %[[KV]], %[[P]] norm %[[W]] rope %[[P]] {eps = 1.000000e-05 : f64, norm = #lm<norm_kind rms>, norm_dim = 64 : i64, rope_dim = 16 : i64, rope_offset = 64 : i64, rope_style = #lm<rope_style interleaved>, theta = 1.000000e+04 : f64}
// CHECK-NEXT: return %[[R]]
func.func @latent_built(%c: tensor<16x80xf32>, %kv: tensor<4x80xf32>,
                        %w: tensor<64xf32>, %pos: tensor<4xi32>)
    -> tensor<16x80xf32> {
  %head = tensor.extract_slice %kv[0, 0] [4, 64] [1, 1]
      : tensor<4x80xf32> to tensor<4x64xf32>
  %n = lm.rms_norm %head, %w {eps = 1.0e-05 : f64}
      : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  %r = lm.rope %kv, %pos interleaved {offset = 64 : i64, dim = 16 : i64,
      theta = 1.0e+04 : f64} : (tensor<4x80xf32>, tensor<4xi32>) -> tensor<4x80xf32>
  %tail = tensor.extract_slice %r[0, 64] [4, 16] [1, 1]
      : tensor<4x80xf32> to tensor<4x16xf32>
  %row = tensor.concat dim(1) %n, %tail
      : (tensor<4x64xf32>, tensor<4x16xf32>) -> tensor<4x80xf32>
  %c1 = lm.cache_write %c, %row, %pos
      : (tensor<16x80xf32>, tensor<4x80xf32>, tensor<4xi32>) -> tensor<16x80xf32>
  return %c1 : tensor<16x80xf32>
}

// -----

// The indexer key: layer norm with a bias over the row, then RoPE.
// CHECK-LABEL: func.func @indexer_key
// CHECK-SAME: (%[[C:[a-z0-9]+]]: tensor<16x32xf32>, %[[K:[a-z0-9]+]]: tensor<?x32xf32>, %[[W:[a-z0-9]+]]: tensor<32xbf16>, %[[B:[a-z0-9]+]]: tensor<32xbf16>, %[[P:[a-z0-9]+]]: tensor<?xi32>)
// CHECK-NEXT: %[[R:.+]] = lm.cache_write %[[C]], %[[K]], %[[P]] norm %[[W]] bias %[[B]] rope %[[P]] {eps = 9.9999999999999995E-7 : f64, norm = #lm<norm_kind layer>, norm_dim = 32 : i64, rope_dim = 16 : i64, rope_offset = 0 : i64, rope_style = #lm<rope_style half_split>, theta = 1.000000e+04 : f64}
// CHECK-NEXT: return %[[R]]
func.func @indexer_key(%c: tensor<16x32xf32>, %k: tensor<?x32xf32>,
                       %w: tensor<32xbf16>, %b: tensor<32xbf16>,
                       %pos: tensor<?xi32>) -> tensor<16x32xf32> {
  %n = lm.layer_norm %k, %w bias %b {eps = 1.0e-06 : f64}
      : (tensor<?x32xf32>, tensor<32xbf16>, tensor<32xbf16>) -> tensor<?x32xf32>
  %r = lm.rope %n, %pos half_split {offset = 0 : i64, dim = 16 : i64,
      theta = 1.0e+04 : f64} : (tensor<?x32xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  %c1 = lm.cache_write %c, %r, %pos
      : (tensor<16x32xf32>, tensor<?x32xf32>, tensor<?xi32>) -> tensor<16x32xf32>
  return %c1 : tensor<16x32xf32>
}

// -----

// Kimi Linear's latent row: the prefix normalised, the rest as it is; GLM's:
// the whole row normalised; RoPE alone.
// CHECK-LABEL: func.func @norm_or_rope_alone
// CHECK-SAME: (%[[C:[a-z0-9]+]]: tensor<16x80xf32>, %[[KV:[a-z0-9]+]]: tensor<?x80xf32>, %[[W:[a-z0-9]+]]: tensor<64xf32>, %[[W2:[a-z0-9]+]]: tensor<80xf32>, %[[P:[a-z0-9]+]]: tensor<?xi32>)
// CHECK-NOT: tensor.extract_slice
// CHECK-NOT: lm.
// CHECK: %[[A:.+]] = lm.cache_write %[[C]], %[[KV]], %[[P]] norm %[[W]] {eps = 9.9999999999999995E-7 : f64, norm = #lm<norm_kind rms>, norm_dim = 64 : i64}
// CHECK-NEXT: %[[B:.+]] = lm.cache_write %[[A]], %[[KV]], %[[P]] norm %[[W2]] {eps = 9.9999999999999995E-7 : f64, norm = #lm<norm_kind rms>, norm_dim = 80 : i64}
// CHECK-NEXT: %[[D:.+]] = lm.cache_write %[[B]], %[[KV]], %[[P]] rope %[[P]] {rope_dim = 8 : i64, rope_offset = 4 : i64, rope_style = #lm<rope_style half_split>, theta = 5.000000e+05 : f64}
// CHECK-NEXT: return %[[D]]
func.func @norm_or_rope_alone(%c: tensor<16x80xf32>, %kv: tensor<?x80xf32>,
                              %w: tensor<64xf32>, %w2: tensor<80xf32>,
                              %pos: tensor<?xi32>) -> tensor<16x80xf32> {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %kv, %c0 : tensor<?x80xf32>
  %head = tensor.extract_slice %kv[0, 0] [%t, 64] [1, 1]
      : tensor<?x80xf32> to tensor<?x64xf32>
  %n = lm.rms_norm %head, %w {eps = 1.0e-06 : f64}
      : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %tail = tensor.extract_slice %kv[0, 64] [%t, 16] [1, 1]
      : tensor<?x80xf32> to tensor<?x16xf32>
  %row = tensor.concat dim(1) %n, %tail
      : (tensor<?x64xf32>, tensor<?x16xf32>) -> tensor<?x80xf32>
  %c1 = lm.cache_write %c, %row, %pos
      : (tensor<16x80xf32>, tensor<?x80xf32>, tensor<?xi32>) -> tensor<16x80xf32>
  %whole = lm.rms_norm %kv, %w2 {eps = 1.0e-06 : f64}
      : (tensor<?x80xf32>, tensor<80xf32>) -> tensor<?x80xf32>
  %c2 = lm.cache_write %c1, %whole, %pos
      : (tensor<16x80xf32>, tensor<?x80xf32>, tensor<?xi32>) -> tensor<16x80xf32>
  %r = lm.rope %kv, %pos half_split {offset = 4 : i64, dim = 8 : i64,
      theta = 5.0e+05 : f64} : (tensor<?x80xf32>, tensor<?xi32>) -> tensor<?x80xf32>
  %c3 = lm.cache_write %c2, %r, %pos
      : (tensor<16x80xf32>, tensor<?x80xf32>, tensor<?xi32>) -> tensor<16x80xf32>
  return %c3 : tensor<16x80xf32>
}

// -----

// gpt-oss's keys: RoPE of each head of [T, H * D] seen as [T, H, D].
// CHECK-LABEL: func.func @gqa_keys
// CHECK-SAME: (%[[C:[a-z0-9]+]]: tensor<2x16x64xf32>, %[[K:[a-z0-9]+]]: tensor<?x64xf32>, %[[P:[a-z0-9]+]]: tensor<?xi32>, %[[S:[a-z0-9]+]]: tensor<?xi32>)
// CHECK-NOT: tensor.expand_shape
// CHECK-NOT: lm.rope
// CHECK: %[[R:.+]] = lm.cache_write %[[C]], %[[K]], %[[P]] sequences %[[S]] rope %[[P]] {rope_dim = 32 : i64, rope_head_dim = 32 : i64, rope_offset = 0 : i64, rope_style = #lm<rope_style half_split>, theta = 1.500000e+05 : f64}
// CHECK-NEXT: return %[[R]]
func.func @gqa_keys(%c: tensor<2x16x64xf32>, %k: tensor<?x64xf32>,
                    %pos: tensor<?xi32>, %seq: tensor<?xi32>)
    -> tensor<2x16x64xf32> {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %k, %c0 : tensor<?x64xf32>
  %heads = tensor.expand_shape %k [[0], [1, 2]] output_shape [%t, 2, 32]
      : tensor<?x64xf32> into tensor<?x2x32xf32>
  %r = lm.rope %heads, %pos half_split {offset = 0 : i64, dim = 32 : i64,
      theta = 1.5e+05 : f64} : (tensor<?x2x32xf32>, tensor<?xi32>) -> tensor<?x2x32xf32>
  %rows = tensor.collapse_shape %r [[0], [1, 2]]
      : tensor<?x2x32xf32> into tensor<?x64xf32>
  %c1 = lm.cache_write %c, %rows, %pos sequences %seq
      : (tensor<2x16x64xf32>, tensor<?x64xf32>, tensor<?xi32>, tensor<?xi32>)
      -> tensor<2x16x64xf32>
  return %c1 : tensor<2x16x64xf32>
}

// -----

// The normed key is also read elsewhere: the norm stays, the RoPE (read
// only by the write) fuses alone.
// CHECK-LABEL: func.func @norm_read_elsewhere
// CHECK: %[[N:.+]] = lm.layer_norm
// CHECK-NOT: lm.rope
// CHECK: %[[R:.+]] = lm.cache_write %{{.*}}, %[[N]], %{{.*}} rope %{{.*}} {rope_dim = 16
// CHECK: return %[[R]], %[[N]]
func.func @norm_read_elsewhere(%c: tensor<16x32xf32>, %k: tensor<?x32xf32>,
                               %w: tensor<32xf32>, %pos: tensor<?xi32>)
    -> (tensor<16x32xf32>, tensor<?x32xf32>) {
  %n = lm.layer_norm %k, %w {eps = 1.0e-06 : f64}
      : (tensor<?x32xf32>, tensor<32xf32>) -> tensor<?x32xf32>
  %r = lm.rope %n, %pos half_split {offset = 0 : i64, dim = 16 : i64,
      theta = 1.0e+04 : f64} : (tensor<?x32xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  %c1 = lm.cache_write %c, %r, %pos
      : (tensor<16x32xf32>, tensor<?x32xf32>, tensor<?xi32>) -> tensor<16x32xf32>
  return %c1, %n : tensor<16x32xf32>, tensor<?x32xf32>
}

// -----

// Nothing fuses where the rotated row is read elsewhere, where RoPE reaches
// into the normalised prefix, where the "prefix" does not start the row or
// where the row has more than two parts. RoPE before a norm of the row stays
// (the prologue normalises first); the norm alone fuses.
// CHECK-LABEL: func.func @unfused
// CHECK: %[[R:.+]] = lm.rope
// CHECK: %[[C1:.+]] = lm.cache_write %{{.*}}, %[[R]], %{{[^ ]+}} :
// CHECK: %[[R2:.+]] = lm.rope
// CHECK: %[[C2:.+]] = lm.cache_write %[[C1]], %[[R2]], %{{[^ ]+}} norm %{{[^ ]+}} {eps = 9.9999999999999995E-7 : f64, norm = #lm<norm_kind rms>, norm_dim = 80 : i64}
// CHECK: %[[ROW3:.+]] = tensor.concat
// CHECK: %[[C3:.+]] = lm.cache_write %[[C2]], %[[ROW3]], %{{[^ ]+}} :
// CHECK: %[[ROW4:.+]] = tensor.concat
// CHECK: %[[C4:.+]] = lm.cache_write %[[C3]], %[[ROW4]], %{{[^ ]+}} :
// CHECK: %[[ROW5:.+]] = tensor.concat
// CHECK: %[[C5:.+]] = lm.cache_write %[[C4]], %[[ROW5]], %{{[^ ]+}} :
// CHECK: return %[[C5]], %[[R]]
func.func @unfused(%c: tensor<16x80xf32>, %kv: tensor<4x80xf32>,
                   %w: tensor<64xf32>, %w80: tensor<80xf32>,
                   %pos: tensor<4xi32>) -> (tensor<16x80xf32>, tensor<4x80xf32>) {
  %r = lm.rope %kv, %pos half_split {offset = 0 : i64, dim = 16 : i64,
      theta = 1.0e+04 : f64} : (tensor<4x80xf32>, tensor<4xi32>) -> tensor<4x80xf32>
  %c1 = lm.cache_write %c, %r, %pos
      : (tensor<16x80xf32>, tensor<4x80xf32>, tensor<4xi32>) -> tensor<16x80xf32>
  %r2 = lm.rope %kv, %pos half_split {offset = 8 : i64, dim = 16 : i64,
      theta = 1.0e+04 : f64} : (tensor<4x80xf32>, tensor<4xi32>) -> tensor<4x80xf32>
  %n2 = lm.rms_norm %r2, %w80 {eps = 1.0e-06 : f64}
      : (tensor<4x80xf32>, tensor<80xf32>) -> tensor<4x80xf32>
  %c2 = lm.cache_write %c1, %n2, %pos
      : (tensor<16x80xf32>, tensor<4x80xf32>, tensor<4xi32>) -> tensor<16x80xf32>
  %head = tensor.extract_slice %kv[0, 0] [4, 64] [1, 1]
      : tensor<4x80xf32> to tensor<4x64xf32>
  %n3 = lm.rms_norm %head, %w {eps = 1.0e-06 : f64}
      : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  %r3 = lm.rope %kv, %pos interleaved {offset = 56 : i64, dim = 16 : i64,
      theta = 1.0e+04 : f64} : (tensor<4x80xf32>, tensor<4xi32>) -> tensor<4x80xf32>
  %tail3 = tensor.extract_slice %r3[0, 64] [4, 16] [1, 1]
      : tensor<4x80xf32> to tensor<4x16xf32>
  %row3 = tensor.concat dim(1) %n3, %tail3
      : (tensor<4x64xf32>, tensor<4x16xf32>) -> tensor<4x80xf32>
  %c3 = lm.cache_write %c2, %row3, %pos
      : (tensor<16x80xf32>, tensor<4x80xf32>, tensor<4xi32>) -> tensor<16x80xf32>
  %mid = tensor.extract_slice %kv[0, 16] [4, 64] [1, 1]
      : tensor<4x80xf32> to tensor<4x64xf32>
  %n4 = lm.rms_norm %mid, %w {eps = 1.0e-06 : f64}
      : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  %tail4 = tensor.extract_slice %kv[0, 64] [4, 16] [1, 1]
      : tensor<4x80xf32> to tensor<4x16xf32>
  %row4 = tensor.concat dim(1) %n4, %tail4
      : (tensor<4x64xf32>, tensor<4x16xf32>) -> tensor<4x80xf32>
  %c4 = lm.cache_write %c3, %row4, %pos
      : (tensor<16x80xf32>, tensor<4x80xf32>, tensor<4xi32>) -> tensor<16x80xf32>
  %head5 = tensor.extract_slice %kv[0, 0] [4, 32] [1, 1]
      : tensor<4x80xf32> to tensor<4x32xf32>
  %w32 = tensor.extract_slice %w[0] [32] [1] : tensor<64xf32> to tensor<32xf32>
  %n5 = lm.rms_norm %head5, %w32 {eps = 1.0e-06 : f64}
      : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  %a5 = tensor.extract_slice %kv[0, 32] [4, 32] [1, 1]
      : tensor<4x80xf32> to tensor<4x32xf32>
  %b5 = tensor.extract_slice %kv[0, 64] [4, 16] [1, 1]
      : tensor<4x80xf32> to tensor<4x16xf32>
  %row5 = tensor.concat dim(1) %n5, %a5, %b5
      : (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x16xf32>) -> tensor<4x80xf32>
  %c5 = lm.cache_write %c4, %row5, %pos
      : (tensor<16x80xf32>, tensor<4x80xf32>, tensor<4xi32>) -> tensor<16x80xf32>
  return %c5, %r : tensor<16x80xf32>, tensor<4x80xf32>
}
