//===- LmAttentionOps.td - Dense, sparse and DSA attention --*- tablegen -*-===//
//
// Dense attention (causal, sliding window, bidirectional segments; MHA, GQA,
// MQA; sinks), sparse MLA attention over selected keys, and the DeepSeek
// Sparse Attention index selection that picks those keys.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_LM_ATTENTION_OPS_TD
#define DAYBREAK_LM_ATTENTION_OPS_TD

include "dialects/lm/LmAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Lm_AttentionOp : Lm_Op<"attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "dense scaled-dot-product attention";
  let description = [{
    `q [T, Hq, Dqk]`, `k [S, Hkv, Dqk]`, `v [S, Hkv, Dv]` with `Hq` a
    multiple of `Hkv` (query head `h` reads KV head `h / (Hq / Hkv)`):
    `out[t, h] = sum_s softmax_s(scale * q[t,h] . k[s,h']) v[s,h']` over the
    keys the mask admits. `mask` is `causal` (`kpos <= qpos`),
    `sliding_window` (`qpos - window < kpos <= qpos`) or `bidirectional`.
    Positions default to the queries being the last `T` of the `S` keys;
    `q_positions [T]` and `k_positions [S]` override that (batched,
    chunked or cached layouts). With `q_segments [T]` and `k_segments [S]` a
    query sees only keys of its own segment (sequences packed in one batch,
    images in a vision tower). `sinks [Hq]` adds one learned logit per head
    to the softmax denominator (gpt-oss). A query that sees no key yields 0.

    Over per-sequence caches, `k [B, S, Hkv, Dqk]` and `v [B, S, Hkv, Dv]`
    (views of `[B, S, Hkv * D]` caches that `lm.cache_write` fills) hold
    the keys of `B` sequences, row `b`'s key `s` sitting at position `s`.
    Then `q_positions [T]` and `q_segments [T]` are required — query `t`
    reads row `q_segments[t]` only, its mask taken relative to
    `q_positions[t]` — and `k_positions`/`k_segments` are not allowed. The
    mask keeps a query off the rows its sequence has not written yet, so
    this is the form a step over a batch of sequences uses, its own keys
    written first; it lowers to the runtime's `attention` kernel (not
    `bidirectional`: the kernel is causal).

    ```mlir
    %o = lm.attention %q, %k, %v sinks %sinks sliding_window
        {scale = 0.125 : f64, window = 128 : i64}
        : (tensor<?x8x64xbf16>, tensor<?x2x64xbf16>, tensor<?x2x64xbf16>,
           tensor<8xf32>) -> tensor<?x8x64xbf16>
    %kc = tensor.expand_shape %kcache [[0], [1], [2, 3]]
        output_shape [4, 4096, 2, 64]
        : tensor<4x4096x128xf32> into tensor<4x4096x2x64xf32>
    %oc = lm.attention %q, %kc, %vc sinks %sinks q_positions %pos
        q_segments %seq causal {scale = 0.125 : f64}
        : (tensor<?x8x64xf32>, tensor<4x4096x2x64xf32>,
           tensor<4x4096x2x64xf32>, tensor<8xf32>, tensor<?xi32>,
           tensor<?xi32>) -> tensor<?x8x64xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$q, Lm_FloatTensor:$k,
                       Lm_FloatTensor:$v, Optional<Lm_F32Tensor>:$sinks,
                       Optional<Lm_PositionTensor>:$q_positions,
                       Optional<Lm_PositionTensor>:$k_positions,
                       Optional<Lm_IndexTensor>:$q_segments,
                       Optional<Lm_IndexTensor>:$k_segments,
                       Lm_MaskKindAttr:$mask, F64Attr:$scale,
                       OptionalAttr<I64Attr>:$window);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`sinks` $sinks^)?
    (`q_positions` $q_positions^)? (`k_positions` $k_positions^)?
    (`q_segments` $q_segments^)? (`k_segments` $k_segments^)?
    $mask attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_SparseAttentionOp : Lm_Op<"sparse_attention", [Pure,
    AttrSizedOperandSegments]> {
  let summary = "MLA attention in absorbed form over selected keys";
  let description = [{
    Multi-head latent attention with `W_UK` absorbed into the query, as
    DeepSeek-V3.2 and FlashMLA run it: all `H` query heads share one key
    row per token, `kv [S, Dqk]` = `[latent (kv_lora) | rope key]`, and the
    value is the latent, the first `value_dim` columns of `kv`.
    For each query `t` only the keys `indices[t, :]` are attended (-1 is
    padding): `out[t, h] = sum_{s in idx[t]} softmax(scale * q[t,h] . kv[s])
    kv[s, :value_dim]`. `scale` is explicit because MLA's is not
    `Dqk^-0.5` (DeepSeek: `192^-0.5 * mscale^2`). `sinks [H]` is optional.
    An empty index set yields 0. With `sequences [T]` the tokens of several
    sequences share the batch: `kv` is `[B, S, Dqk]` and query `t` reads the
    rows of sequence `sequences[t]`.

    ```mlir
    %o = lm.sparse_attention %q, %kv, %idx
        {scale = 0.1352338 : f64, value_dim = 512 : i64}
        : (tensor<?x128x576xbf16>, tensor<?x576xbf16>, tensor<?x2048xi32>)
        -> tensor<?x128x512xbf16>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$q, Lm_FloatTensor:$kv,
                       Lm_IndexTensor:$indices,
                       Optional<Lm_IndexTensor>:$sequences,
                       Optional<Lm_F32Tensor>:$sinks, F64Attr:$scale,
                       I64Attr:$value_dim);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $kv `,` $indices (`sequences` $sequences^)? (`sinks` $sinks^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_DsaIndexerScoresOp : Lm_Op<"dsa_indexer_scores",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "DSA lightning-indexer scores";
  let description = [{
    `scores[t, s] = scale * sum_h weights[t, h] * ReLU(q[t, h] . k[s])` over
    the `H` indexer heads, fp32: `q [T, H, D]`, the indexer key cache
    `k [S, D]` (one key per token shared by all heads) and per-token head
    weights `weights [T, H]`. Causality is applied by `lm.dsa_index_select`.
    With `sequences [T]`, `k` is `[B, S, D]` and query `t` scores the keys
    of sequence `sequences[t]`. With `bounds [T]` (the causal lengths
    `lm.dsa_index_select` takes), `scores[t, s]` is 0 for `s >= bounds[t]`
    and not computed: the work follows the keys a query can see, not the
    cache's capacity (a decode at 1K context in a 128K cache scores 1K
    keys).

    An optional prologue rotates each query head `q[t, h] [D]` before it
    is scored: RoPE at `positions[t]` over columns `[rope_offset,
    rope_offset + rope_dim)` as `lm.rope` with `rope_style`, `theta` and
    `yarn` computes it (`lm-fuse-query-rope` forms it from the `lm.rope`
    that only feeds the scores, so the kernel rotates the query as it
    stages it instead of a launch of its own).

    ```mlir
    %sc = lm.dsa_indexer_scores %iq, %ik, %iw {scale = 0.0884 : f64}
        : (tensor<?x64x128xbf16>, tensor<?x128xbf16>, tensor<?x64xf32>)
        -> tensor<?x?xf32>
    // DeepSeek's indexer query, rotated over its first 64 columns.
    %sr = lm.dsa_indexer_scores %iq, %ik, %iw bounds %b rope %pos
        {scale = 0.0884 : f64, rope_style = #lm<rope_style half_split>,
         rope_offset = 0 : i64, rope_dim = 64 : i64, theta = 10000.0 : f64}
        : (tensor<?x64x128xf32>, tensor<?x128xf32>, tensor<?x64xf32>,
           tensor<?xi32>, tensor<?xi32>) -> tensor<?x?xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$q, Lm_FloatTensor:$k,
                       Lm_FloatTensor:$weights,
                       Optional<Lm_IndexTensor>:$sequences,
                       Optional<Lm_IndexTensor>:$bounds,
                       Optional<Lm_PositionTensor>:$positions, F64Attr:$scale,
                       OptionalAttr<Lm_RopeStyleAttr>:$rope_style,
                       OptionalAttr<I64Attr>:$rope_offset,
                       OptionalAttr<I64Attr>:$rope_dim,
                       OptionalAttr<F64Attr>:$theta,
                       OptionalAttr<Lm_YarnAttr>:$yarn);
  let results = (outs Lm_F32Tensor:$result);
  let builders = [
    // Scores of queries as given (no prologue).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$q, "::mlir::Value":$k,
                   "::mlir::Value":$weights, "::mlir::Value":$sequences,
                   "::mlir::Value":$bounds, "::mlir::FloatAttr":$scale), [{
      build($_builder, $_state, result, q, k, weights, sequences, bounds,
            /*positions=*/::mlir::Value(), scale, /*rope_style=*/nullptr,
            /*rope_offset=*/nullptr, /*rope_dim=*/nullptr, /*theta=*/nullptr,
            /*yarn=*/nullptr);
    }]>
  ];
  let assemblyFormat = [{
    $q `,` $k `,` $weights (`sequences` $sequences^)? (`bounds` $bounds^)?
    (`rope` $positions^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_DsaIndexSelectOp : Lm_Op<"dsa_index_select", [Pure]> {
  let summary = "DSA top-k key selection with a causal bound per query";
  let description = [{
    For each query `t`, the `k = min(top_k, bounds[t])` keys `s <
    bounds[t]` with the highest `scores[t, s]` (ties to the lower index),
    listed in ascending key order, then -1 padding up to `top_k`. The
    selection is a set: its consumers (sparse attention, pooled attention)
    do not depend on an order, so none by score is paid for; key order is
    deterministic and reads the cache forwards. `bounds [T]` is the number
    of keys a query may see (its causal length). With `bounds[t] <= top_k`
    every visible key is selected: short sequences attend densely.

    ```mlir
    %idx = lm.dsa_index_select %sc, %bounds {top_k = 2048 : i64}
        : (tensor<?x?xf32>, tensor<?xi32>) -> tensor<?x2048xi32>
    ```
  }];
  let arguments = (ins Lm_F32Tensor:$scores, Lm_IndexTensor:$bounds,
                       I64Attr:$top_k);
  let results = (outs Lm_IndexTensor:$result);
  let assemblyFormat = [{
    $scores `,` $bounds attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_DsaKpoolOp : Lm_Op<"dsa_kpool", [Pure]> {
  let summary = "DSA k-pool: pooled indexer keys and the incomplete pool's state";
  let description = [{
    GLM-5.3's indexer scores groups of `P` consecutive tokens (pools,
    anchored at position 0) by one pooled key each: for pool `j`, per
    channel `c`, `K_j[c] = sum_i pi_i[c] key_i[c]` over its member tokens
    `i = jP .. jP + P - 1` with `pi = softmax_i(gate_i[c] + ape[i - jP,
    c])`. `keys` and `gate` are `[T, D]`, `ape` `[P, D]`.

    A step carries tokens of several sequences (`sequences [T]`, their
    `positions [T]`); a sequence's tokens in a step have consecutive
    positions, continuing what earlier steps gave it. `output[t]` is the
    pooled key of token `t`'s pool over the members known at the end of
    the step (the pool's key once it is complete: every token of a pool
    writes the same row), fp32. Members from earlier steps come from
    `state [B, max(P - 1, 1), 2D]`: row `m mod P` holds `[key | gate]` of
    the sequence's position `m` for the positions of its incomplete pool;
    `new_state` holds them after the step. A sequence that starts again at
    position 0 needs no reset.

    ```mlir
    %pooled, %tail1 = lm.dsa_kpool %k, %g, %ape, %tail, %pos, %seq
        : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<4x128xbf16>,
           tensor<8x3x256xf32>, tensor<?xi32>, tensor<?xi32>)
        -> (tensor<?x128xf32>, tensor<8x3x256xf32>)
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$keys, Lm_FloatTensor:$gate,
                       Lm_WeightTensor:$ape, Lm_F32Tensor:$state,
                       Lm_IndexTensor:$positions, Lm_IndexTensor:$sequences);
  let results = (outs Lm_F32Tensor:$output, Lm_F32Tensor:$new_state);
  let assemblyFormat = [{
    $keys `,` $gate `,` $ape `,` $state `,` $positions `,` $sequences
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_DsaKpoolExpandOp : Lm_Op<"dsa_kpool_expand", [Pure]> {
  let summary = "DSA k-pool: selected pools to attended tokens, plus the tail";
  let description = [{
    For each query `t` at `positions[t] = p`: the tokens of its selected
    pools (`pools [T, K]`, pool `j` = positions `jP .. jP + P - 1`, -1 is
    padding), then the tokens of its own incomplete pool, `P floor((p + 1)
    / P) .. p` (none when `p + 1` is a multiple of `P`), then -1 up to
    `K P + P - 1`. The pools are complete and causal (`lm.dsa_index_select`
    with bounds `(p + 1) / P`), so `t` attends to itself only through its
    tail or a selected pool of its own.

    ```mlir
    %tok = lm.dsa_kpool_expand %pools, %pos {pool_size = 4 : i64}
        : (tensor<?x512xi32>, tensor<?xi32>) -> tensor<?x2051xi32>
    ```
  }];
  let arguments = (ins Lm_IndexTensor:$pools, Lm_IndexTensor:$positions,
                       I64Attr:$pool_size);
  let results = (outs Lm_IndexTensor:$result);
  let assemblyFormat = [{
    $pools `,` $positions attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // DAYBREAK_LM_ATTENTION_OPS_TD
