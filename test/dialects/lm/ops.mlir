// RUN: daybreak-opt %s -split-input-file | daybreak-opt -split-input-file | FileCheck %s
// RUN: daybreak-opt %s -split-input-file -mlir-print-op-generic | daybreak-opt -split-input-file | FileCheck %s

// Tests that the norms round-trip, with and without the optional bias.
// CHECK-LABEL: func @norms
func.func @norms(%x: tensor<?x256xbf16>, %w: tensor<256xbf16>,
                 %y: tensor<8x128xf32>, %lw: tensor<128xf32>, %lb: tensor<128xf32>,
                 %o: tensor<4x2x16xf32>, %gate: tensor<4x2x16xf32>, %gw: tensor<16xf32>) {
  // CHECK: lm.rms_norm %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<?x256xbf16>, tensor<256xbf16>) -> tensor<?x256xbf16>
  %0 = lm.rms_norm %x, %w {eps = 1.0e-06 : f64}
      : (tensor<?x256xbf16>, tensor<256xbf16>) -> tensor<?x256xbf16>
  // CHECK: lm.layer_norm %{{.*}}, %{{.*}} bias %{{.*}} {eps
  %1 = lm.layer_norm %y, %lw bias %lb {eps = 1.0e-06 : f64}
      : (tensor<8x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<8x128xf32>
  // CHECK: lm.layer_norm %{{.*}}, %{{.*}} {eps
  %2 = lm.layer_norm %y, %lw {eps = 1.0e-06 : f64}
      : (tensor<8x128xf32>, tensor<128xf32>) -> tensor<8x128xf32>
  // CHECK: lm.gated_rms_norm %{{.*}}, %{{.*}}, %{{.*}} sigmoid {eps
  %3 = lm.gated_rms_norm %o, %gate, %gw sigmoid {eps = 1.0e-05 : f64}
      : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<16xf32>) -> tensor<4x2x16xf32>
  // CHECK: lm.gated_rms_norm %{{.*}}, %{{.*}}, %{{.*}} silu
  %4 = lm.gated_rms_norm %o, %gate, %gw silu {eps = 1.0e-05 : f64}
      : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<16xf32>) -> tensor<4x2x16xf32>
  // CHECK: lm.add_rms_norm %{{.*}}, %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<?x256xbf16>, tensor<?x256xbf16>, tensor<256xbf16>) -> (tensor<?x256xbf16>, tensor<?x256xbf16>)
  %5:2 = lm.add_rms_norm %x, %0, %w {eps = 1.0e-06 : f64}
      : (tensor<?x256xbf16>, tensor<?x256xbf16>, tensor<256xbf16>)
      -> (tensor<?x256xbf16>, tensor<?x256xbf16>)
  return
}

// -----

// Tests that the pointwise activations and gated linear units round-trip.
// CHECK-LABEL: func @activations
func.func @activations(%g: tensor<?x64xf32>, %u: tensor<?x64xf32>,
                       %gb: tensor<?x64xbf16>, %ub: tensor<?x64xbf16>) {
  // CHECK: lm.sigmoid %{{.*}} : tensor<?x64xf32>
  %0 = lm.sigmoid %g : tensor<?x64xf32>
  // CHECK: lm.silu %{{.*}} : tensor<?x64xbf16>
  %1 = lm.silu %gb : tensor<?x64xbf16>
  // CHECK: lm.swiglu %{{.*}}, %{{.*}} {alpha = 1.702000e+00 : f64, limit = 7.000000e+00 : f64, up_offset = 1.000000e+00 : f64}
  %2 = lm.swiglu %g, %u {alpha = 1.702 : f64, limit = 7.0 : f64, up_offset = 1.0 : f64}
      : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK: lm.swiglu %{{.*}}, %{{.*}} : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %3 = lm.swiglu %g, %u : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK: lm.situ %{{.*}}, %{{.*}} {beta = 4.000000e+00 : f64, linear_beta = 2.500000e+01 : f64}
  %4 = lm.situ %gb, %ub {beta = 4.0 : f64, linear_beta = 25.0 : f64}
      : (tensor<?x64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  return
}

// -----

// Tests that RoPE round-trips in both pairings, with and without YaRN.
// CHECK-LABEL: func @rope
func.func @rope(%q: tensor<?x4x48xf32>, %k: tensor<?x32xf32>, %pos: tensor<?xi32>,
                %pos64: tensor<?xi64>) {
  // CHECK: lm.rope %{{.*}}, %{{.*}} interleaved {dim = 16 : i64, offset = 32 : i64, theta = 1.000000e+04 : f64, yarn = #lm.yarn<factor = 4.000000e+01 : f64, original_max_positions = 4096, beta_fast = 3.200000e+01 : f64, beta_slow = 1.000000e+00 : f64, attention_factor = 1.000000e+00 : f64, truncate = true>}
  %0 = lm.rope %q, %pos interleaved {offset = 32 : i64, dim = 16 : i64,
      theta = 10000.0 : f64,
      yarn = #lm.yarn<factor = 40.0, original_max_positions = 4096,
                      beta_fast = 32.0, beta_slow = 1.0,
                      attention_factor = 1.0, truncate = true>}
      : (tensor<?x4x48xf32>, tensor<?xi32>) -> tensor<?x4x48xf32>
  // CHECK: lm.rope %{{.*}}, %{{.*}} half_split {dim = 16 : i64, offset = 0 : i64
  %1 = lm.rope %k, %pos64 half_split {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64}
      : (tensor<?x32xf32>, tensor<?xi64>) -> tensor<?x32xf32>
  return
}

// -----

// Tests that the three matmul forms round-trip.
// CHECK-LABEL: func @matmuls
func.func @matmuls(%x: tensor<?x256xbf16>, %w: tensor<512x256xbf16>, %b: tensor<512xbf16>,
                   %x8: tensor<?x300xbf16>, %w8: tensor<200x300xf8E4M3FN>, %s8: tensor<2x3xf32>,
                   %xe: tensor<?x64xbf16>, %we: tensor<8x128x64xf4E2M1FN>,
                   %se: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<?x2xi32>, %be: tensor<8x128xbf16>,
                   %a: tensor<?x2x64xf32>, %w2: tensor<8x64x64xf4E2M1FN>,
                   %s2: tensor<8x64x2xf8E8M0FNU>, %rw: tensor<?x2xf32>) {
  // CHECK: lm.matmul %{{.*}}, %{{.*}} bias %{{.*}} : (tensor<?x256xbf16>, tensor<512x256xbf16>, tensor<512xbf16>) -> tensor<?x512xbf16>
  %0 = lm.matmul %x, %w bias %b
      : (tensor<?x256xbf16>, tensor<512x256xbf16>, tensor<512xbf16>) -> tensor<?x512xbf16>
  // CHECK: lm.matmul %{{.*}}, %{{.*}} : (tensor<?x256xbf16>, tensor<512x256xbf16>) -> tensor<?x512xf32>
  %1 = lm.matmul %x, %w : (tensor<?x256xbf16>, tensor<512x256xbf16>) -> tensor<?x512xf32>
  // CHECK: lm.fp8_matmul %{{.*}}, %{{.*}}, %{{.*}} {block_size = array<i64: 128, 128>}
  %2 = lm.fp8_matmul %x8, %w8, %s8 {block_size = array<i64: 128, 128>}
      : (tensor<?x300xbf16>, tensor<200x300xf8E4M3FN>, tensor<2x3xf32>) -> tensor<?x200xbf16>
  // CHECK: lm.mxfp4_expert_matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} :
  %3 = lm.mxfp4_expert_matmul %xe, %we, %se, %idx bias %be
      : (tensor<?x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>,
         tensor<?x2xi32>, tensor<8x128xbf16>) -> tensor<?x2x128xf32>
  // CHECK: lm.mxfp4_expert_matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} weights %{{.*}} :
  %4 = lm.mxfp4_expert_matmul %a, %w2, %s2, %idx weights %rw
      : (tensor<?x2x64xf32>, tensor<8x64x64xf4E2M1FN>, tensor<8x64x2xf8E8M0FNU>,
         tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x64xf32>
  return
}

// -----

// Tests that the MXFP4 online route's conversion round-trips, with and
// without the bias.
// CHECK-LABEL: func @mxfp4_to_fp8
func.func @mxfp4_to_fp8(%w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>,
                        %idx: tensor<?x2xi32>, %b: tensor<8x128xbf16>) {
  // CHECK: lm.mxfp4_to_fp8_experts %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} : (tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<?x2xi32>, tensor<8x128xbf16>) -> (tensor<4x128x64xf8E4M3FN>, tensor<4x128x2xf32>, tensor<4x128xf32>, tensor<?x2xi32>)
  %c:4 = lm.mxfp4_to_fp8_experts %w, %s, %idx bias %b
      : (tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<?x2xi32>, tensor<8x128xbf16>)
      -> (tensor<4x128x64xf8E4M3FN>, tensor<4x128x2xf32>, tensor<4x128xf32>, tensor<?x2xi32>)
  // CHECK: lm.mxfp4_to_fp8_experts %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<?x2xi32>) -> (tensor<8x128x64xf8E4M3FN>
  %d:4 = lm.mxfp4_to_fp8_experts %w, %s, %idx
      : (tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<?x2xi32>)
      -> (tensor<8x128x64xf8E4M3FN>, tensor<8x128x2xf32>, tensor<8x128xf32>, tensor<?x2xi32>)
  return
}

// -----

// Tests that MoE routing round-trips in all three scoring schemes.
// CHECK-LABEL: func @routing
func.func @routing(%logits: tensor<?x256xf32>, %corr: tensor<256xf32>, %l2: tensor<?x32xbf16>) {
  // CHECK: lm.moe_route %{{.*}} bias %{{.*}} sigmoid {num_groups = 8 : i64, scaling_factor = 2.500000e+00 : f64, top_k = 8 : i64, top_k_groups = 4 : i64}
  %i0, %w0 = lm.moe_route %logits bias %corr sigmoid {top_k = 8 : i64,
      num_groups = 8 : i64, top_k_groups = 4 : i64, renormalize = true,
      scaling_factor = 2.5 : f64}
      : (tensor<?x256xf32>, tensor<256xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  // CHECK: lm.moe_route %{{.*}} softmax_topk {top_k = 4 : i64}
  %i1, %w1 = lm.moe_route %l2 softmax_topk {top_k = 4 : i64}
      : (tensor<?x32xbf16>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  // CHECK: lm.moe_route %{{.*}} softmax {renormalize = false, top_k = 2 : i64}
  %i2, %w2 = lm.moe_route %l2 softmax {top_k = 2 : i64, renormalize = false}
      : (tensor<?x32xbf16>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  // A shared expert stacked after the routed ones: one more slot.
  // CHECK: lm.moe_route %{{.*}} sigmoid {shared_experts = 1 : i64, top_k = 8 : i64} : (tensor<?x256xf32>) -> (tensor<?x9xi32>, tensor<?x9xf32>)
  %i3, %w3 = lm.moe_route %logits sigmoid {top_k = 8 : i64, shared_experts = 1 : i64}
      : (tensor<?x256xf32>) -> (tensor<?x9xi32>, tensor<?x9xf32>)
  return
}

// -----

// Tests that dense attention round-trips with every optional operand.
// CHECK-LABEL: func @attention
func.func @attention(%q: tensor<?x8x64xbf16>, %k: tensor<?x2x64xbf16>, %v: tensor<?x2x64xbf16>,
                     %sinks: tensor<8xf32>, %qp: tensor<?xi32>, %kp: tensor<?xi32>,
                     %qs: tensor<?xi32>, %ks: tensor<?xi32>) {
  // CHECK: lm.attention %{{.*}}, %{{.*}}, %{{.*}} sinks %{{.*}} sliding_window {scale = 1.250000e-01 : f64, window = 128 : i64}
  %0 = lm.attention %q, %k, %v sinks %sinks sliding_window
      {scale = 0.125 : f64, window = 128 : i64}
      : (tensor<?x8x64xbf16>, tensor<?x2x64xbf16>, tensor<?x2x64xbf16>, tensor<8xf32>)
      -> tensor<?x8x64xbf16>
  // CHECK: lm.attention %{{.*}}, %{{.*}}, %{{.*}} q_positions %{{.*}} k_positions %{{.*}} q_segments %{{.*}} k_segments %{{.*}} causal
  %1 = lm.attention %q, %k, %v q_positions %qp k_positions %kp q_segments %qs k_segments %ks causal
      {scale = 0.125 : f64}
      : (tensor<?x8x64xbf16>, tensor<?x2x64xbf16>, tensor<?x2x64xbf16>,
         tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x64xf32>
  // CHECK: lm.attention %{{.*}}, %{{.*}}, %{{.*}} q_segments %{{.*}} k_segments %{{.*}} bidirectional
  %2 = lm.attention %q, %k, %v q_segments %qs k_segments %ks bidirectional {scale = 0.125 : f64}
      : (tensor<?x8x64xbf16>, tensor<?x2x64xbf16>, tensor<?x2x64xbf16>,
         tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x64xbf16>
  return
}

// -----

// Tests that lm.attention over [B, S, Hkv, D] cache views (each query's
// position and batch row given) round-trips, sliding and causal.
// CHECK-LABEL: func @attention_over_caches
func.func @attention_over_caches(%q: tensor<?x8x16xf32>, %kc: tensor<3x64x32xf32>,
                                 %vc: tensor<3x64x32xf32>, %sinks: tensor<8xf32>,
                                 %pos: tensor<?xi32>, %seq: tensor<?xi32>) {
  %k = tensor.expand_shape %kc [[0], [1], [2, 3]] output_shape [3, 64, 2, 16]
      : tensor<3x64x32xf32> into tensor<3x64x2x16xf32>
  %v = tensor.expand_shape %vc [[0], [1], [2, 3]] output_shape [3, 64, 2, 16]
      : tensor<3x64x32xf32> into tensor<3x64x2x16xf32>
  // CHECK: lm.attention %{{.*}}, %{{.*}}, %{{.*}} sinks %{{.*}} q_positions %{{.*}} q_segments %{{.*}} sliding_window {scale = 2.500000e-01 : f64, window = 8 : i64} : (tensor<?x8x16xf32>, tensor<3x64x2x16xf32>, tensor<3x64x2x16xf32>, tensor<8xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x16xf32>
  %0 = lm.attention %q, %k, %v sinks %sinks q_positions %pos q_segments %seq sliding_window
      {scale = 0.25 : f64, window = 8 : i64}
      : (tensor<?x8x16xf32>, tensor<3x64x2x16xf32>, tensor<3x64x2x16xf32>, tensor<8xf32>,
         tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x16xf32>
  // CHECK: lm.attention %{{.*}}, %{{.*}}, %{{.*}} q_positions %{{.*}} q_segments %{{.*}} causal
  %1 = lm.attention %q, %k, %v q_positions %pos q_segments %seq causal {scale = 0.25 : f64}
      : (tensor<?x8x16xf32>, tensor<3x64x2x16xf32>, tensor<3x64x2x16xf32>,
         tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x16xf32>
  return
}

// -----

// Tests that DSA index selection and sparse MLA attention round-trip.
// CHECK-LABEL: func @dsa
func.func @dsa(%iq: tensor<?x64x128xbf16>, %ik: tensor<?x128xbf16>, %iw: tensor<?x64xf32>,
               %bounds: tensor<?xi32>, %q: tensor<?x128x576xbf16>, %kv: tensor<?x576xbf16>,
               %sinks: tensor<128xf32>) {
  // CHECK: %[[SC:.*]] = lm.dsa_indexer_scores %{{.*}}, %{{.*}}, %{{.*}} {scale = 8.840000e-02 : f64}
  %sc = lm.dsa_indexer_scores %iq, %ik, %iw {scale = 0.0884 : f64}
      : (tensor<?x64x128xbf16>, tensor<?x128xbf16>, tensor<?x64xf32>) -> tensor<?x?xf32>
  // CHECK: %[[IDX:.*]] = lm.dsa_index_select %[[SC]], %{{.*}} {top_k = 2048 : i64}
  %idx = lm.dsa_index_select %sc, %bounds {top_k = 2048 : i64}
      : (tensor<?x?xf32>, tensor<?xi32>) -> tensor<?x2048xi32>
  // CHECK: lm.sparse_attention %{{.*}}, %{{.*}}, %[[IDX]] {scale = 0.13523379999999999 : f64, value_dim = 512 : i64}
  %o = lm.sparse_attention %q, %kv, %idx {scale = 0.1352338 : f64, value_dim = 512 : i64}
      : (tensor<?x128x576xbf16>, tensor<?x576xbf16>, tensor<?x2048xi32>) -> tensor<?x128x512xbf16>
  // CHECK: lm.sparse_attention %{{.*}}, %{{.*}}, %[[IDX]] sinks %{{.*}} {scale
  %o2 = lm.sparse_attention %q, %kv, %idx sinks %sinks {scale = 0.1352338 : f64, value_dim = 512 : i64}
      : (tensor<?x128x576xbf16>, tensor<?x576xbf16>, tensor<?x2048xi32>, tensor<128xf32>)
      -> tensor<?x128x512xf32>
  return
}

// -----

// Tests that GLM's k-pool ops round-trip: pooled keys with the incomplete
// pool's state, and selected pools expanded to tokens plus the tail.
// CHECK-LABEL: func @dsa_kpool
func.func @dsa_kpool(%k: tensor<?x128xf32>, %g: tensor<?x128xf32>, %ape: tensor<4x128xbf16>,
                     %tail: tensor<8x3x256xf32>, %pos: tensor<?xi32>, %seq: tensor<?xi32>,
                     %pools: tensor<?x512xi32>) {
  // CHECK: lm.dsa_kpool %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<4x128xbf16>, tensor<8x3x256xf32>, tensor<?xi32>, tensor<?xi32>) -> (tensor<?x128xf32>, tensor<8x3x256xf32>)
  %pooled, %tail1 = lm.dsa_kpool %k, %g, %ape, %tail, %pos, %seq
      : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<4x128xbf16>,
         tensor<8x3x256xf32>, tensor<?xi32>, tensor<?xi32>)
      -> (tensor<?x128xf32>, tensor<8x3x256xf32>)
  // CHECK: lm.dsa_kpool_expand %{{.*}}, %{{.*}} {pool_size = 4 : i64} : (tensor<?x512xi32>, tensor<?xi32>) -> tensor<?x2051xi32>
  %tok = lm.dsa_kpool_expand %pools, %pos {pool_size = 4 : i64}
      : (tensor<?x512xi32>, tensor<?xi32>) -> tensor<?x2051xi32>
  return
}

// -----

// Tests that the KDA state ops round-trip with explicit states.
// CHECK-LABEL: func @kda
func.func @kda(%x: tensor<?x4096xbf16>, %cw: tensor<4096x4xbf16>, %cs: tensor<3x4096xbf16>,
               %raw: tensor<?x32x128xf32>, %alog: tensor<32xf32>, %dtb: tensor<32x128xf32>,
               %q: tensor<?x32x128xf32>, %k: tensor<?x32x128xf32>, %v: tensor<?x32x128xf32>,
               %beta: tensor<?x32xf32>, %s0: tensor<32x128x128xf32>,
               %sb: tensor<?x32x128x128xf32>) {
  // CHECK: lm.short_conv %{{.*}}, %{{.*}}, %{{.*}} silu :
  %y, %st = lm.short_conv %x, %cw, %cs silu
      : (tensor<?x4096xbf16>, tensor<4096x4xbf16>, tensor<3x4096xbf16>)
      -> (tensor<?x4096xbf16>, tensor<3x4096xbf16>)
  // CHECK: lm.kda_gate %{{.*}}, %{{.*}}, %{{.*}} {lower_bound = -5.000000e+00 : f64}
  %g = lm.kda_gate %raw, %alog, %dtb {lower_bound = -5.0 : f64}
      : (tensor<?x32x128xf32>, tensor<32xf32>, tensor<32x128xf32>) -> tensor<?x32x128xf32>
  // CHECK: lm.kda_gate %{{.*}}, %{{.*}}, %{{.*}} :
  %g2 = lm.kda_gate %raw, %alog, %dtb
      : (tensor<?x32x128xf32>, tensor<32xf32>, tensor<32x128xf32>) -> tensor<?x32x128xf32>
  // CHECK: lm.kda_chunk %{{.*}} {chunk_size = 16 : i64, qk_l2norm, scale = 8.838830e-02 : f64}
  %o, %s1 = lm.kda_chunk %q, %k, %v, %g, %beta, %s0
      {scale = 0.0883883 : f64, qk_l2norm, chunk_size = 16 : i64}
      : (tensor<?x32x128xf32>, tensor<?x32x128xf32>, tensor<?x32x128xf32>,
         tensor<?x32x128xf32>, tensor<?x32xf32>, tensor<32x128x128xf32>)
      -> (tensor<?x32x128xf32>, tensor<32x128x128xf32>)
  // CHECK: lm.kda_step %{{.*}} {layout = #lm.state_layout<storage = f32, key_major = true>, qk_l2norm, scale
  %o2, %s2 = lm.kda_step %q, %k, %v, %g, %beta, %sb
      {scale = 0.0883883 : f64, qk_l2norm,
       layout = #lm.state_layout<storage = f32, key_major = true>}
      : (tensor<?x32x128xf32>, tensor<?x32x128xf32>, tensor<?x32x128xf32>,
         tensor<?x32x128xf32>, tensor<?x32xf32>, tensor<?x32x128x128xf32>)
      -> (tensor<?x32x128xf32>, tensor<?x32x128x128xf32>)
  return
}

// -----

// Tests that the KDA state ops round-trip over the slots of several
// sequences (`sequences`: state with a leading slot dim, 8 slots here, not
// tied to the token count).
// CHECK-LABEL: func @kda_slots
func.func @kda_slots(%x: tensor<?x64xbf16>, %cw: tensor<64x4xbf16>, %cs: tensor<8x3x64xbf16>,
                     %seq: tensor<?xi32>, %q: tensor<?x2x32xf32>, %g: tensor<?x2x32xf32>,
                     %beta: tensor<?x2xf32>, %s: tensor<8x2x32x32xf32>) {
  // CHECK: lm.short_conv %{{.*}}, %{{.*}}, %{{.*}} sequences %{{.*}} silu :
  %y, %st = lm.short_conv %x, %cw, %cs sequences %seq silu
      : (tensor<?x64xbf16>, tensor<64x4xbf16>, tensor<8x3x64xbf16>, tensor<?xi32>)
      -> (tensor<?x64xbf16>, tensor<8x3x64xbf16>)
  // CHECK: lm.kda_chunk %{{.*}} sequences %{{.*}} {qk_l2norm, scale
  %o, %s1 = lm.kda_chunk %q, %q, %q, %g, %beta, %s sequences %seq {scale = 0.17 : f64, qk_l2norm}
      : (tensor<?x2x32xf32>, tensor<?x2x32xf32>, tensor<?x2x32xf32>, tensor<?x2x32xf32>,
         tensor<?x2xf32>, tensor<8x2x32x32xf32>, tensor<?xi32>)
      -> (tensor<?x2x32xf32>, tensor<8x2x32x32xf32>)
  // CHECK: lm.kda_step %{{.*}} sequences %{{.*}} {qk_l2norm, scale
  %o2, %s2 = lm.kda_step %q, %q, %q, %g, %beta, %s1 sequences %seq {scale = 0.17 : f64, qk_l2norm}
      : (tensor<?x2x32xf32>, tensor<?x2x32xf32>, tensor<?x2x32xf32>, tensor<?x2x32xf32>,
         tensor<?x2xf32>, tensor<8x2x32x32xf32>, tensor<?xi32>)
      -> (tensor<?x2x32xf32>, tensor<8x2x32x32xf32>)
  return
}

// -----

// Tests that the cross-layer residual ops round-trip with explicit sources.
// CHECK-LABEL: func @residuals
func.func @residuals(%b0: tensor<?x256xbf16>, %b1: tensor<?x256xbf16>, %p: tensor<?x256xbf16>,
                     %g: tensor<256xbf16>, %w: tensor<256xbf16>,
                     %streams: tensor<?x4x64xf32>, %fn: tensor<24x256xf32>, %base: tensor<24xf32>,
                     %scale: tensor<3xf32>, %y: tensor<?x64xf32>, %w4: tensor<64xbf16>) {
  // CHECK: lm.block_attn_res(%{{.*}}, %{{.*}}, %{{.*}}) norm %{{.*}} proj %{{.*}} {eps
  %h = lm.block_attn_res (%b0, %b1, %p) norm %g proj %w {eps = 1.0e-05 : f64}
      : (tensor<?x256xbf16>, tensor<?x256xbf16>, tensor<?x256xbf16>,
         tensor<256xbf16>, tensor<256xbf16>) -> tensor<?x256xbf16>
  // CHECK: lm.mhc_pre %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {eps
  %x, %post, %comb = lm.mhc_pre %streams, %fn, %base, %scale
      {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x4x64xf32>, tensor<24x256xf32>, tensor<24xf32>, tensor<3xf32>)
      -> (tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
  // CHECK: lm.mhc_post %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} :
  %s1 = lm.mhc_post %streams, %y, %post, %comb
      : (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
      -> tensor<?x4x64xf32>
  // CHECK: lm.mhc_pre %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} norm %{{.*}} {eps = {{.*}}, input_eps = 1.000000e-05 : f64
  %x2, %post2, %comb2 = lm.mhc_pre %streams, %fn, %base, %scale norm %w4
      {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64, input_eps = 1.0e-05 : f64}
      : (tensor<?x4x64xf32>, tensor<24x256xf32>, tensor<24xf32>, tensor<3xf32>, tensor<64xbf16>)
      -> (tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
  // CHECK: lm.mhc_post_pre %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} norm %{{.*}} {
  %s2, %x3, %post3, %comb3 = lm.mhc_post_pre %streams, %y, %post, %comb, %fn, %base, %scale norm %w4
      {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64, input_eps = 1.0e-05 : f64}
      : (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>,
         tensor<24x256xf32>, tensor<24xf32>, tensor<3xf32>, tensor<64xbf16>)
      -> (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
  // CHECK: lm.mhc_post_pre %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {
  %s3, %x4, %post4, %comb4 = lm.mhc_post_pre %streams, %y, %post, %comb, %fn, %base, %scale
      {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>,
         tensor<24x256xf32>, tensor<24xf32>, tensor<3xf32>)
      -> (tensor<?x4x64xf32>, tensor<?x64xf32>, tensor<?x4xf32>, tensor<?x4x4xf32>)
  return
}

// -----

// Tests that the embedding lookup and cache writes round-trip.
// CHECK-LABEL: func @memory
func.func @memory(%table: tensor<512x256xbf16>, %ids: tensor<?xi32>,
                  %c0: tensor<?x576xbf16>, %kv: tensor<?x576xbf16>, %slots: tensor<?xi32>) {
  // CHECK: lm.embedding %{{.*}}, %{{.*}} : (tensor<512x256xbf16>, tensor<?xi32>) -> tensor<?x256xbf16>
  %h = lm.embedding %table, %ids : (tensor<512x256xbf16>, tensor<?xi32>) -> tensor<?x256xbf16>
  // CHECK: lm.cache_write %{{.*}}, %{{.*}}, %{{.*}} {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576, storage = f8E4M3FN, scale_block = 128, tail_dim = 64, tail = bf16>}
  %c1 = lm.cache_write %c0, %kv, %slots
      {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576,
                              storage = f8E4M3FN, scale_block = 128,
                              tail_dim = 64, tail = bf16>}
      : (tensor<?x576xbf16>, tensor<?x576xbf16>, tensor<?xi32>) -> tensor<?x576xbf16>
  return
}

// -----

// Tests that the absorption helpers (transpose, head matmuls), FP8
// dequantisation, plain expert matmuls and weights round-trip.
// CHECK-LABEL: lm.weight @kv_b : tensor<256x64xf8E4M3FN> {sources = ["model.layers.0.self_attn.kv_b_proj.weight"]}
lm.weight @kv_b : tensor<256x64xf8E4M3FN> {sources = ["model.layers.0.self_attn.kv_b_proj.weight"]}
lm.weight @kv_b_scale : tensor<2x1xf32> {sources = ["model.layers.0.self_attn.kv_b_proj.weight_scale_inv"]}
// CHECK: lm.weight @experts : tensor<2x64x256xbf16> {sources = ["e.0", "e.1"]}
lm.weight @experts : tensor<2x64x256xbf16> {sources = ["e.0", "e.1"]}
// CHECK-LABEL: func @absorbed
func.func @absorbed(%qn: tensor<?x4x32xf32>, %wuk: tensor<4x32x64xbf16>, %ol: tensor<?x4x64xf32>,
                    %x: tensor<?x256xf32>, %idx: tensor<?x2xi32>, %rw: tensor<?x2xf32>,
                    %wd: tensor<2x256x64xbf16>) {
  // CHECK: %[[W:.*]] = lm.weight_ref @kv_b : tensor<256x64xf8E4M3FN>
  %w8 = lm.weight_ref @kv_b : tensor<256x64xf8E4M3FN>
  %s = lm.weight_ref @kv_b_scale : tensor<2x1xf32>
  // CHECK: lm.fp8_dequant %[[W]], %{{.*}} {block_size = array<i64: 128, 128>}
  %w = lm.fp8_dequant %w8, %s {block_size = array<i64: 128, 128>}
      : (tensor<256x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<256x64xf32>
  // CHECK: lm.transpose %{{.*}} {permutation = array<i64: 0, 2, 1>} : (tensor<4x32x64xbf16>) -> tensor<4x64x32xbf16>
  %wukt = lm.transpose %wuk {permutation = array<i64: 0, 2, 1>} : (tensor<4x32x64xbf16>) -> tensor<4x64x32xbf16>
  // CHECK: lm.head_matmul %{{.*}}, %{{.*}} {transpose_weight} : (tensor<?x4x32xf32>, tensor<4x64x32xbf16>) -> tensor<?x4x64xf32>
  %qlt = lm.head_matmul %qn, %wukt {transpose_weight} : (tensor<?x4x32xf32>, tensor<4x64x32xbf16>) -> tensor<?x4x64xf32>
  // CHECK: lm.head_matmul %{{.*}}, %{{.*}} : (tensor<?x4x32xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x64xf32>
  %ql = lm.head_matmul %qn, %wuk : (tensor<?x4x32xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x64xf32>
  // CHECK: lm.head_matmul %{{.*}}, %{{.*}} {transpose_weight}
  %o = lm.head_matmul %ol, %wuk {transpose_weight} : (tensor<?x4x64xf32>, tensor<4x32x64xbf16>) -> tensor<?x4x32xf32>
  %we = lm.weight_ref @experts : tensor<2x64x256xbf16>
  // CHECK: lm.expert_matmul %{{.*}}, %{{.*}}, %{{.*}} :
  %g = lm.expert_matmul %x, %we, %idx : (tensor<?x256xf32>, tensor<2x64x256xbf16>, tensor<?x2xi32>) -> tensor<?x2x64xf32>
  // CHECK: lm.expert_matmul %{{.*}}, %{{.*}}, %{{.*}} weights %{{.*}} :
  %y = lm.expert_matmul %g, %wd, %idx weights %rw
      : (tensor<?x2x64xf32>, tensor<2x256x64xbf16>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x256xf32>
  return
}

// -----

// Tests that the batched cache readers and writers round-trip with their
// sequences operand.
// CHECK-LABEL: func @batched_caches
func.func @batched_caches(%c: tensor<2x64x80xf32>, %row: tensor<?x80xf32>, %pos: tensor<?xi32>,
                          %seq: tensor<?xi32>, %q: tensor<?x4x80xf32>, %idx: tensor<?x16xi32>,
                          %iq: tensor<?x4x32xf32>, %ik: tensor<2x64x32xf32>, %iw: tensor<?x4xf32>) {
  // CHECK: lm.cache_write %{{.*}}, %{{.*}}, %{{.*}} sequences %{{.*}} :
  %c1 = lm.cache_write %c, %row, %pos sequences %seq
      : (tensor<2x64x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x80xf32>
  // CHECK: lm.cache_write %{{.*}}, %{{.*}}, %{{.*}} sequences %{{.*}} norm %{{.*}} bias %{{.*}} rope %{{.*}} {eps = 9.9999999999999995E-7 : f64, norm = #lm<norm_kind layer>, norm_dim = 64 : i64, rope_dim = 16 : i64, rope_offset = 64 : i64, rope_style = #lm<rope_style interleaved>, theta = 1.000000e+04 : f64, yarn = #lm.yarn<
  %nw = arith.constant dense<1.0> : tensor<64xbf16>
  %c2 = lm.cache_write %c1, %row, %pos sequences %seq norm %nw bias %nw rope %pos
      {norm = #lm<norm_kind layer>, norm_dim = 64 : i64, eps = 1.0e-06 : f64,
       rope_style = #lm<rope_style interleaved>, rope_offset = 64 : i64,
       rope_dim = 16 : i64, theta = 1.0e+04 : f64,
       yarn = #lm.yarn<factor = 40.0, original_max_positions = 4096,
                       beta_fast = 32.0, beta_slow = 1.0,
                       attention_factor = 1.0, truncate = true>}
      : (tensor<2x64x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>,
         tensor<64xbf16>, tensor<64xbf16>, tensor<?xi32>) -> tensor<2x64x80xf32>
  // CHECK: lm.dsa_indexer_scores %{{.*}}, %{{.*}}, %{{.*}} sequences %{{.*}} {scale
  %sc = lm.dsa_indexer_scores %iq, %ik, %iw sequences %seq {scale = 0.0884 : f64}
      : (tensor<?x4x32xf32>, tensor<2x64x32xf32>, tensor<?x4xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  // CHECK: lm.dsa_indexer_scores %{{.*}}, %{{.*}}, %{{.*}} sequences %{{.*}} bounds %[[POS:[a-z0-9]+]] {scale
  %sb = lm.dsa_indexer_scores %iq, %ik, %iw sequences %seq bounds %pos {scale = 0.0884 : f64}
      : (tensor<?x4x32xf32>, tensor<2x64x32xf32>, tensor<?x4xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x64xf32>
  // CHECK: lm.sparse_attention %{{.*}}, %{{.*}}, %{{.*}} sequences %{{.*}} {scale
  %o = lm.sparse_attention %q, %c1, %idx sequences %seq {scale = 0.27 : f64, value_dim = 64 : i64}
      : (tensor<?x4x80xf32>, tensor<2x64x80xf32>, tensor<?x16xi32>, tensor<?xi32>) -> tensor<?x4x64xf32>
  return
}

// -----

// Tests that lm.elementwise round-trips with a multi-op body ending in lm.yield.
// CHECK-LABEL: func @elementwise
func.func @elementwise(%g: tensor<?x64xf32>, %u: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  // CHECK: %[[Y:.*]] = lm.elementwise(%{{.*}}, %{{.*}}) : (tensor<?x64xf32>, tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: bf16):
  // CHECK-NEXT: %[[N:.*]] = arith.negf %[[A]] : f32
  // CHECK-NEXT: %[[E:.*]] = math.exp %[[N]] : f32
  // CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
  // CHECK-NEXT: %[[D:.*]] = arith.addf %[[ONE]], %[[E]] : f32
  // CHECK-NEXT: %[[S:.*]] = arith.divf %[[A]], %[[D]] : f32
  // CHECK-NEXT: %[[BF:.*]] = arith.extf %[[B]] : bf16 to f32
  // CHECK-NEXT: %[[R:.*]] = arith.mulf %[[S]], %[[BF]] : f32
  // CHECK-NEXT: %[[T:.*]] = arith.truncf %[[R]] : f32 to bf16
  // CHECK-NEXT: lm.yield %[[T]] : bf16
  // CHECK-NEXT: }
  %y = lm.elementwise (%g, %u) : (tensor<?x64xf32>, tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: f32, %b: bf16):
    %n = arith.negf %a : f32
    %e = math.exp %n : f32
    %one = arith.constant 1.0 : f32
    %d = arith.addf %one, %e : f32
    %s = arith.divf %a, %d : f32
    %bf = arith.extf %b : bf16 to f32
    %r = arith.mulf %s, %bf : f32
    %t = arith.truncf %r : f32 to bf16
    lm.yield %t : bf16
  }
  // CHECK: return %[[Y]]
  return %y : tensor<?x64xbf16>
}

// -----

// Tests that a rank's shard of a weight and the collectives that join the
// ranks' results round-trip: a column-parallel projection (rows of its
// weight), a row-parallel one (columns) and the all-reduce and all-gather
// after them.
// CHECK-LABEL: lm.weight @up : tensor<32x64xbf16> {shard = #lm.shard<dim = 0, offset = 32, size = 32>, sources = ["model.up.weight"]}
lm.weight @up : tensor<32x64xbf16> {sources = ["model.up.weight"], shard = #lm.shard<dim = 0, offset = 32, size = 32>}
// CHECK: lm.weight @down : tensor<64x32xbf16> {shard = #lm.shard<dim = 1, offset = 32, size = 32>, sources = ["model.down.weight"]}
lm.weight @down : tensor<64x32xbf16> {sources = ["model.down.weight"], shard = #lm.shard<dim = 1, offset = 32, size = 32>}
// CHECK-LABEL: func @tensor_parallel
func.func @tensor_parallel(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %wu = lm.weight_ref @up : tensor<32x64xbf16>
  %wd = lm.weight_ref @down : tensor<64x32xbf16>
  %u = lm.matmul %x, %wu : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  %p = lm.matmul %u, %wd : (tensor<?x32xf32>, tensor<64x32xbf16>) -> tensor<?x64xf32>
  // CHECK: %[[Y:.*]] = lm.all_reduce %{{.*}} over 2 ranks : tensor<?x64xf32>
  %y = lm.all_reduce %p over 2 ranks : tensor<?x64xf32>
  // CHECK: %[[G:.*]] = lm.all_gather %{{.*}} over 2 ranks : tensor<?x32xf32> -> tensor<?x64xf32>
  %g = lm.all_gather %u over 2 ranks : tensor<?x32xf32> -> tensor<?x64xf32>
  // CHECK: return %[[Y]], %[[G]]
  return %y, %g : tensor<?x64xf32>, tensor<?x64xf32>
}

// Tests that expert parallelism's renumbering of routed ids round-trips.
// CHECK-LABEL: func @local_experts
func.func @local_experts(%ids: tensor<?x8xi32>) -> tensor<?x8xi32> {
  // CHECK: lm.local_experts %{{.*}} from 64 count 64 : tensor<?x8xi32>
  %local = lm.local_experts %ids from 64 count 64 : tensor<?x8xi32>
  return %local : tensor<?x8xi32>
}
