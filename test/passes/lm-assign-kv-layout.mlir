// RUN: daybreak-opt %s -split-input-file --lm-assign-kv-layout | FileCheck %s
// RUN: daybreak-opt %s -split-input-file --lm-assign-kv-layout="kv-cache-dtype=fp8" | FileCheck %s
// RUN: daybreak-opt %s -split-input-file --lm-assign-kv-layout="kv-cache-dtype=bf16" | FileCheck %s --check-prefix=BF16
// RUN: daybreak-opt %s -split-input-file --lm-assign-kv-layout="kv-cache-dtype=f32" | FileCheck %s --check-prefix=F32
// RUN: daybreak-opt %s -split-input-file --lm-assign-kv-layout="page-size=16" | FileCheck %s --check-prefix=PAGE
// RUN: daybreak-opt %s -split-input-file --lm-assign-kv-layout --lm-lower-to-plan | FileCheck %s --check-prefix=PLAN

// Tests that DeepSeek-V3.2's latent cache (576 wide, value_dim 512), read by
// sparse attention, gets the deployed FP8 layout: e4m3 latent with one scale
// per 128 values and the 64-wide RoPE key in bf16, 656 bytes per token
// (the cache_ref of the lowered pool), and plain rows in bf16 and f32.
// CHECK-LABEL: func.func @mla_deepseek
// CHECK: lm.cache_write %{{.*}}, %{{.*}}, %{{.*}} sequences %{{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576, storage = f8E4M3FN, scale_block = 128, tail_dim = 64, tail = bf16>}
// CHECK: lm.sparse_attention
// CHECK-NOT: layout
// BF16-LABEL: func.func @mla_deepseek
// BF16: lm.cache_write {{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>}
// F32-LABEL: func.func @mla_deepseek
// F32: lm.cache_write {{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576, storage = f32, scale_block = 0, tail_dim = 0, tail = bf16>}
// PAGE-LABEL: func.func @mla_deepseek
// PAGE: lm.cache_write {{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 16, feature_dim = 576, storage = f8E4M3FN, scale_block = 128, tail_dim = 64, tail = bf16>}
// PLAN: plan.cache_pool @mla_latent {batch = 2 : i64, layers = 1 : i64, layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576, storage = f8E4M3FN, scale_block = 128, tail_dim = 64, tail = bf16>, max_seq_len = 64 : i64, max_tokens = 128 : i64}
// PLAN-LABEL: plan.step @mla_deepseek
// PLAN: %[[C:.*]] = plan.cache_ref @mla_latent layer(0) : memref<128x656xi8>
// PLAN: plan.launch @cache_write.4[%{{.*}}] {{.*}}(%[[C]], {{.*}}) {{.*}}: memref<128x656xi8>,
// PLAN: plan.launch @sparse_attention.5[%{{.*}}] {{.*}}(%{{.*}}, %[[C]], {{.*}}) {{.*}}: memref<?x4x576xbf16>, memref<128x656xi8>,
func.func @mla_deepseek(%c: tensor<2x64x576xbf16>, %kv: tensor<?x576xbf16>, %slots: tensor<?xi32>,
                        %seq: tensor<?xi32>, %q: tensor<?x4x576xbf16>, %idx: tensor<?x16xi32>)
    -> (tensor<?x4x512xbf16>, tensor<2x64x576xbf16>) {
  %c1 = lm.cache_write %c, %kv, %slots sequences %seq
      : (tensor<2x64x576xbf16>, tensor<?x576xbf16>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x576xbf16>
  %o = lm.sparse_attention %q, %c1, %idx sequences %seq {scale = 0.1352338 : f64, value_dim = 512 : i64}
      : (tensor<?x4x576xbf16>, tensor<2x64x576xbf16>, tensor<?x16xi32>, tensor<?xi32>) -> tensor<?x4x512xbf16>
  return %o, %c1 : tensor<?x4x512xbf16>, tensor<2x64x576xbf16>
}

// -----

// Tests that a small latent cache (kv_lora 64 + rope 16, value_dim 64) keeps
// width - value_dim = 16 columns in bf16 and scales the 64 others in one
// block of gcd(64, 128) = 64: 64 + 4 + 32 = 100 bytes per token.
// CHECK-LABEL: func.func @mla_small
// CHECK: lm.cache_write {{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 80, storage = f8E4M3FN, scale_block = 64, tail_dim = 16, tail = bf16>} : (tensor<2x64x80xf32>,
// BF16-LABEL: func.func @mla_small
// BF16: lm.cache_write {{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 80, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>}
// F32-LABEL: func.func @mla_small
// F32: lm.cache_write {{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 80, storage = f32, scale_block = 0, tail_dim = 0, tail = bf16>}
// PAGE-LABEL: func.func @mla_small
// PAGE: lm.cache_write {{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 16, feature_dim = 80, storage = f8E4M3FN, scale_block = 64, tail_dim = 16, tail = bf16>}
// PLAN-LABEL: plan.step @mla_small
// PLAN: plan.cache_ref @mla_latent layer(0) : memref<128x100xi8>
func.func @mla_small(%c: tensor<2x64x80xf32>, %kv: tensor<?x80xf32>, %slots: tensor<?xi32>,
                     %seq: tensor<?xi32>, %q: tensor<?x4x80xf32>, %idx: tensor<?x8xi32>)
    -> tensor<?x4x64xf32> {
  %c1 = lm.cache_write %c, %kv, %slots sequences %seq
      : (tensor<2x64x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x80xf32>
  %o = lm.sparse_attention %q, %c1, %idx sequences %seq {scale = 0.125 : f64, value_dim = 64 : i64}
      : (tensor<?x4x80xf32>, tensor<2x64x80xf32>, tensor<?x8xi32>, tensor<?xi32>) -> tensor<?x4x64xf32>
  return %o : tensor<?x4x64xf32>
}

// -----

// Tests that a latent of 96 values beside a 32-wide RoPE key is scaled in
// blocks of gcd(96, 128) = 32: 96 + 12 + 64 = 172 bytes per token.
// CHECK-LABEL: func.func @mla_odd_latent
// CHECK: lm.cache_write {{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 128, storage = f8E4M3FN, scale_block = 32, tail_dim = 32, tail = bf16>}
// BF16-LABEL: func.func @mla_odd_latent
// BF16: lm.cache_write {{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 128, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>}
// F32-LABEL: func.func @mla_odd_latent
// F32: lm.cache_write {{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 128, storage = f32, scale_block = 0, tail_dim = 0, tail = bf16>}
// PAGE-LABEL: func.func @mla_odd_latent
// PAGE: lm.cache_write {{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 16, feature_dim = 128,
// PLAN-LABEL: plan.step @mla_odd_latent
// PLAN: plan.cache_ref @mla_latent layer(0) : memref<128x172xi8>
func.func @mla_odd_latent(%c: tensor<2x64x128xf32>, %kv: tensor<?x128xf32>, %slots: tensor<?xi32>,
                          %seq: tensor<?xi32>, %q: tensor<?x4x128xf32>, %idx: tensor<?x8xi32>)
    -> tensor<?x4x96xf32> {
  %c1 = lm.cache_write %c, %kv, %slots sequences %seq
      : (tensor<2x64x128xf32>, tensor<?x128xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x128xf32>
  %o = lm.sparse_attention %q, %c1, %idx sequences %seq {scale = 0.125 : f64, value_dim = 96 : i64}
      : (tensor<?x4x128xf32>, tensor<2x64x128xf32>, tensor<?x8xi32>, tensor<?xi32>) -> tensor<?x4x96xf32>
  return %o : tensor<?x4x96xf32>
}

// -----

// Tests that the indexer key cache, read by the indexer scores, is stored
// whole in FP8 with one scale per 128 keys values (no bf16 tail), or as plain
// rows: 128 + 4 bytes per token.
// CHECK-LABEL: func.func @indexer
// CHECK: lm.cache_write {{.*}} {layout = #lm.kv_layout<indexer_key, page_size = 64, feature_dim = 128, storage = f8E4M3FN, scale_block = 128, tail_dim = 0, tail = bf16>}
// CHECK-NEXT: lm.dsa_indexer_scores
// BF16-LABEL: func.func @indexer
// BF16: lm.cache_write {{.*}} {layout = #lm.kv_layout<indexer_key, page_size = 64, feature_dim = 128, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>}
// F32-LABEL: func.func @indexer
// F32: lm.cache_write {{.*}} {layout = #lm.kv_layout<indexer_key, page_size = 64, feature_dim = 128, storage = f32, scale_block = 0, tail_dim = 0, tail = bf16>}
// PAGE-LABEL: func.func @indexer
// PAGE: lm.cache_write {{.*}} {layout = #lm.kv_layout<indexer_key, page_size = 16, feature_dim = 128, storage = f8E4M3FN, scale_block = 128, tail_dim = 0, tail = bf16>}
// PLAN-LABEL: plan.step @indexer
// PLAN: plan.cache_ref @indexer_key layer(0) : memref<128x132xi8>
func.func @indexer(%c: tensor<2x64x128xbf16>, %k: tensor<?x128xbf16>, %slots: tensor<?xi32>,
                   %seq: tensor<?xi32>, %q: tensor<?x4x128xbf16>, %w: tensor<?x4xf32>)
    -> tensor<?x64xf32> {
  %c1 = lm.cache_write %c, %k, %slots sequences %seq
      : (tensor<2x64x128xbf16>, tensor<?x128xbf16>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x128xbf16>
  %s = lm.dsa_indexer_scores %q, %c1, %w sequences %seq {scale = 0.0884 : f64}
      : (tensor<?x4x128xbf16>, tensor<2x64x128xbf16>, tensor<?x4xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}

// -----

// Tests that the DeepSeek-V3.2-Small indexer cache (32 wide) is scaled in
// one block of 32.
// CHECK-LABEL: func.func @indexer_small
// CHECK: lm.cache_write {{.*}} {layout = #lm.kv_layout<indexer_key, page_size = 64, feature_dim = 32, storage = f8E4M3FN, scale_block = 32, tail_dim = 0, tail = bf16>}
// BF16-LABEL: func.func @indexer_small
// BF16: lm.cache_write {{.*}} {layout = #lm.kv_layout<indexer_key, {{.*}}storage = bf16, scale_block = 0,
// F32-LABEL: func.func @indexer_small
// F32: lm.cache_write {{.*}} {layout = #lm.kv_layout<indexer_key, {{.*}}storage = f32, scale_block = 0,
// PAGE-LABEL: func.func @indexer_small
// PAGE: lm.cache_write {{.*}} {layout = #lm.kv_layout<indexer_key, page_size = 16, feature_dim = 32,
// PLAN-LABEL: plan.step @indexer_small
// PLAN: plan.cache_ref @indexer_key layer(0) : memref<128x36xi8>
func.func @indexer_small(%c: tensor<2x64x32xf32>, %k: tensor<?x32xf32>, %slots: tensor<?xi32>,
                         %seq: tensor<?xi32>, %q: tensor<?x4x32xf32>, %w: tensor<?x4xf32>)
    -> tensor<?x64xf32> {
  %c1 = lm.cache_write %c, %k, %slots sequences %seq
      : (tensor<2x64x32xf32>, tensor<?x32xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x32xf32>
  %s = lm.dsa_indexer_scores %q, %c1, %w sequences %seq {scale = 0.0884 : f64}
      : (tensor<?x4x32xf32>, tensor<2x64x32xf32>, tensor<?x4xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}

// -----

// Tests that a cache no attention reads is a plain key/value cache: whole
// rows in the storage type, FP8 scaled in blocks of gcd(80, 128) = 16.
// CHECK-LABEL: func.func @unread
// CHECK: lm.cache_write {{.*}} {layout = #lm.kv_layout<key_value, page_size = 64, feature_dim = 80, storage = f8E4M3FN, scale_block = 16, tail_dim = 0, tail = bf16>}
// BF16-LABEL: func.func @unread
// BF16: lm.cache_write {{.*}} {layout = #lm.kv_layout<key_value, page_size = 64, feature_dim = 80, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>}
// F32-LABEL: func.func @unread
// F32: lm.cache_write {{.*}} {layout = #lm.kv_layout<key_value, page_size = 64, feature_dim = 80, storage = f32, scale_block = 0, tail_dim = 0, tail = bf16>}
// PAGE-LABEL: func.func @unread
// PAGE: lm.cache_write {{.*}} {layout = #lm.kv_layout<key_value, page_size = 16,
// PLAN-LABEL: plan.step @unread
// PLAN: plan.cache_ref @key_value layer(0) : memref<128x100xi8>
func.func @unread(%c: tensor<2x64x80xf32>, %k: tensor<?x80xf32>, %slots: tensor<?xi32>,
                  %seq: tensor<?xi32>) -> tensor<2x64x80xf32> {
  %c1 = lm.cache_write %c, %k, %slots sequences %seq
      : (tensor<2x64x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x80xf32>
  return %c1 : tensor<2x64x80xf32>
}

