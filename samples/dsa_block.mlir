// A one-layer DeepSeek-V3.2-style model in lm IR, small enough to read:
// embedding, MLA in absorbed form with q-LoRA, YaRN RoPE, the lightning
// indexer with top-k selection (top_k 4 < 6 tokens, so later tokens attend
// sparsely), the latent cache written through lm.cache_write, a SwiGLU MLP,
// the final norm and the LM head. Weights are arguments; the sample command
// fills them from a seed (README.md).
//
// Dims: vocab 32, hidden 64, q_lora 32, 2 heads, kv_lora 16, rope 8
// (absorbed d_qk 24, d_v 16), indexer 2 heads x 16, MLP 96, 6 tokens,
// a 16-row cache.

func.func @prefill(%ids: tensor<6xi32>, %pos: tensor<6xi32>, %bounds: tensor<6xi32>,
                   %slots: tensor<6xi32>, %cache: tensor<16x24xf32>,
                   %embed: tensor<32x64xf32>, %attn_norm: tensor<64xf32>,
                   %wq_a: tensor<32x64xf32>, %q_norm: tensor<32xf32>,
                   %wq_b: tensor<48x32xf32>, %wkv_a: tensor<24x64xf32>,
                   %kv_norm: tensor<16xf32>, %wiq: tensor<32x32xf32>,
                   %wik: tensor<16x64xf32>, %ik_norm: tensor<16xf32>,
                   %ik_bias: tensor<16xf32>, %wiw: tensor<2x64xf32>,
                   %wo: tensor<64x32xf32>, %mlp_norm: tensor<64xf32>,
                   %w_gate: tensor<96x64xf32>, %w_up: tensor<96x64xf32>,
                   %w_down: tensor<64x96xf32>, %final_norm: tensor<64xf32>,
                   %lm_head: tensor<32x64xf32>)
    -> (tensor<6x32xf32>, tensor<16x24xf32>, tensor<6x4xi32>) {
  %h = lm.embedding %embed, %ids : (tensor<32x64xf32>, tensor<6xi32>) -> tensor<6x64xf32>
  %x = lm.rms_norm %h, %attn_norm {eps = 1.0e-06 : f64}
      : (tensor<6x64xf32>, tensor<64xf32>) -> tensor<6x64xf32>

  // Queries: q-LoRA, then per head [latent 16 | rope 8] (W_UK absorbed).
  %qa = lm.matmul %x, %wq_a : (tensor<6x64xf32>, tensor<32x64xf32>) -> tensor<6x32xf32>
  %qr = lm.rms_norm %qa, %q_norm {eps = 1.0e-06 : f64}
      : (tensor<6x32xf32>, tensor<32xf32>) -> tensor<6x32xf32>
  %qf = lm.matmul %qr, %wq_b : (tensor<6x32xf32>, tensor<48x32xf32>) -> tensor<6x48xf32>
  %q3 = tensor.expand_shape %qf [[0], [1, 2]] output_shape [6, 2, 24]
      : tensor<6x48xf32> into tensor<6x2x24xf32>
  %q = lm.rope %q3, %pos interleaved {offset = 16 : i64, dim = 8 : i64, theta = 10000.0 : f64,
      yarn = #lm.yarn<factor = 40.0, original_max_positions = 4, beta_fast = 32.0,
                      beta_slow = 1.0, attention_factor = 1.0, truncate = true>}
      : (tensor<6x2x24xf32>, tensor<6xi32>) -> tensor<6x2x24xf32>

  // The latent key row [c_kv 16 | k_pe 8]: norm the latent, rotate the rope key.
  %kv = lm.matmul %x, %wkv_a : (tensor<6x64xf32>, tensor<24x64xf32>) -> tensor<6x24xf32>
  %c = tensor.extract_slice %kv[0, 0] [6, 16] [1, 1] : tensor<6x24xf32> to tensor<6x16xf32>
  %cn = lm.rms_norm %c, %kv_norm {eps = 1.0e-06 : f64}
      : (tensor<6x16xf32>, tensor<16xf32>) -> tensor<6x16xf32>
  %kr = lm.rope %kv, %pos interleaved {offset = 16 : i64, dim = 8 : i64, theta = 10000.0 : f64,
      yarn = #lm.yarn<factor = 40.0, original_max_positions = 4, beta_fast = 32.0,
                      beta_slow = 1.0, attention_factor = 1.0, truncate = true>}
      : (tensor<6x24xf32>, tensor<6xi32>) -> tensor<6x24xf32>
  %kpe = tensor.extract_slice %kr[0, 16] [6, 8] [1, 1] : tensor<6x24xf32> to tensor<6x8xf32>
  %row = tensor.concat dim(1) %cn, %kpe : (tensor<6x16xf32>, tensor<6x8xf32>) -> tensor<6x24xf32>
  %cache1 = lm.cache_write %cache, %row, %slots
      : (tensor<16x24xf32>, tensor<6x24xf32>, tensor<6xi32>) -> tensor<16x24xf32>

  // Lightning indexer: half-split RoPE on the first 8 dims of each head.
  %iqf = lm.matmul %qr, %wiq : (tensor<6x32xf32>, tensor<32x32xf32>) -> tensor<6x32xf32>
  %iq3 = tensor.expand_shape %iqf [[0], [1, 2]] output_shape [6, 2, 16]
      : tensor<6x32xf32> into tensor<6x2x16xf32>
  %iq = lm.rope %iq3, %pos half_split {offset = 0 : i64, dim = 8 : i64, theta = 10000.0 : f64}
      : (tensor<6x2x16xf32>, tensor<6xi32>) -> tensor<6x2x16xf32>
  %ik0 = lm.matmul %x, %wik : (tensor<6x64xf32>, tensor<16x64xf32>) -> tensor<6x16xf32>
  %ik1 = lm.layer_norm %ik0, %ik_norm bias %ik_bias {eps = 1.0e-06 : f64}
      : (tensor<6x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<6x16xf32>
  %ik = lm.rope %ik1, %pos half_split {offset = 0 : i64, dim = 8 : i64, theta = 10000.0 : f64}
      : (tensor<6x16xf32>, tensor<6xi32>) -> tensor<6x16xf32>
  %iw = lm.matmul %x, %wiw : (tensor<6x64xf32>, tensor<2x64xf32>) -> tensor<6x2xf32>
  %scores = lm.dsa_indexer_scores %iq, %ik, %iw bounds %bounds {scale = 0.17677669529663687 : f64}
      : (tensor<6x2x16xf32>, tensor<6x16xf32>, tensor<6x2xf32>, tensor<6xi32>) -> tensor<6x6xf32>
  %idx = lm.dsa_index_select %scores, %bounds {top_k = 4 : i64}
      : (tensor<6x6xf32>, tensor<6xi32>) -> tensor<6x4xi32>

  // Sparse MLA over the selected rows of the cache.
  %o = lm.sparse_attention %q, %cache1, %idx {scale = 0.2041241452 : f64, value_dim = 16 : i64}
      : (tensor<6x2x24xf32>, tensor<16x24xf32>, tensor<6x4xi32>) -> tensor<6x2x16xf32>
  %of = tensor.collapse_shape %o [[0], [1, 2]] : tensor<6x2x16xf32> into tensor<6x32xf32>
  %a = lm.matmul %of, %wo : (tensor<6x32xf32>, tensor<64x32xf32>) -> tensor<6x64xf32>
  %h1 = arith.addf %h, %a : tensor<6x64xf32>

  // SwiGLU MLP.
  %x2 = lm.rms_norm %h1, %mlp_norm {eps = 1.0e-06 : f64}
      : (tensor<6x64xf32>, tensor<64xf32>) -> tensor<6x64xf32>
  %g = lm.matmul %x2, %w_gate : (tensor<6x64xf32>, tensor<96x64xf32>) -> tensor<6x96xf32>
  %u = lm.matmul %x2, %w_up : (tensor<6x64xf32>, tensor<96x64xf32>) -> tensor<6x96xf32>
  %act = lm.swiglu %g, %u : (tensor<6x96xf32>, tensor<6x96xf32>) -> tensor<6x96xf32>
  %f = lm.matmul %act, %w_down : (tensor<6x96xf32>, tensor<64x96xf32>) -> tensor<6x64xf32>
  %h2 = arith.addf %h1, %f : tensor<6x64xf32>

  %xf = lm.rms_norm %h2, %final_norm {eps = 1.0e-06 : f64}
      : (tensor<6x64xf32>, tensor<64xf32>) -> tensor<6x64xf32>
  %logits = lm.matmul %xf, %lm_head : (tensor<6x64xf32>, tensor<32x64xf32>) -> tensor<6x32xf32>
  return %logits, %cache1, %idx : tensor<6x32xf32>, tensor<16x24xf32>, tensor<6x4xi32>
}
