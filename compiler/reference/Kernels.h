//===- Kernels.h - Reference semantics of every lm op -----------*- C++ -*-===//
//
// One plain C++ function per `lm` op: the oracle every generated or library
// kernel is compared against. Written for clarity, not speed: fp32 values,
// fp64 accumulation in every reduction (dot products, norms, softmax sums).
// Shapes are assumed to have passed the op verifiers; the functions that can
// meet bad *data* (token ids, slots, indices out of range) return
// llvm::Expected with a message naming the operand and the value.
//
// Results are F32 (indices I32) unless stated; the evaluator rounds them to
// the op's declared result type. Functions are thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_REFERENCE_KERNELS_H
#define DAYBREAK_COMPILER_REFERENCE_KERNELS_H

#include "compiler/reference/Tensor.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <vector>

namespace daybreak::ref {

//===----------------------------------------------------------------------===//
// Norms and activations (kernels/Norms.cpp, kernels/Activations.cpp)
//===----------------------------------------------------------------------===//

/// y = x / sqrt(mean(x^2) + eps) * weight over the last dim. An empty
/// `weight` means no weight (mHC's weightless norm).
Tensor rmsNorm(const Tensor &x, const Tensor &weight, double eps);

/// y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim (biased
/// variance). Empty `bias` means no bias.
Tensor layerNorm(const Tensor &x, const Tensor &weight, const Tensor &bias,
                 double eps);

/// Gated RMSNorm (KDA output): rmsNorm(x, weight) * act(gate), last dim.
enum class GateActivation { Sigmoid, Silu };
Tensor gatedRmsNorm(const Tensor &x, const Tensor &gate, const Tensor &weight,
                    double eps, GateActivation activation);

Tensor sigmoid(const Tensor &x);
Tensor silu(const Tensor &x);

/// SwiGLU: g' = limit ? min(g, limit) : g; u' = limit ? clamp(u, -limit,
/// limit) : u; y = g' * sigmoid(alpha * g') * (u' + upOffset).
/// DeepSeek: alpha 1, no limit, offset 0. gpt-oss: alpha 1.702, limit 7, +1.
Tensor swiglu(const Tensor &gate, const Tensor &up, double alpha,
              std::optional<double> limit, double upOffset);

/// SiTU (Kimi K3): beta*tanh(g/beta)*sigmoid(g) * linearBeta*tanh(u/linearBeta).
Tensor situ(const Tensor &gate, const Tensor &up, double beta,
            double linearBeta);

//===----------------------------------------------------------------------===//
// RoPE (kernels/Rope.cpp)
//===----------------------------------------------------------------------===//

enum class RopeStyle {
  Interleaved, ///< pairs (2i, 2i+1), GPT-J
  HalfSplit,   ///< pairs (i, i + dim/2), NeoX
};

/// YaRN "NTK-by-parts" frequency correction (DeepSeek-V3, gpt-oss).
struct YarnParams {
  double factor = 1.0;
  int64_t originalMaxPositions = 4096;
  double betaFast = 32.0;
  double betaSlow = 1.0;
  /// Multiplies cos and sin (HF "attention_factor"; 1 for DeepSeek).
  double attentionFactor = 1.0;
  /// floor/ceil the correction range (HF default true; gpt-oss false).
  bool truncate = true;
};

struct RopeParams {
  RopeStyle style = RopeStyle::HalfSplit;
  /// The rotated slice of the last dim is [offset, offset + dim).
  int64_t offset = 0;
  int64_t dim = 0;
  double theta = 10000.0;
  std::optional<YarnParams> yarn;
};

/// The rotation frequencies f_i, i < dim/2, with YaRN applied if present.
std::vector<double> ropeFrequencies(const RopeParams &params);

/// Rotates x[t, ..., offset:offset+dim] by position positions[t] (I32/I64,
/// shape [T]); x has rank >= 2 with the token dim first. Other dims pass
/// through unchanged.
Tensor rope(const Tensor &x, const Tensor &positions, const RopeParams &params);

//===----------------------------------------------------------------------===//
// Matmuls (kernels/Matmul.cpp)
//===----------------------------------------------------------------------===//

/// y[..., n] = sum_k x[..., k] * w[n, k] (+ bias[n]). Weights in PyTorch
/// [out, in] layout. Empty `bias` means none.
Tensor matmul(const Tensor &x, const Tensor &w, const Tensor &bias);

/// FP8 block-scaled matmul: w holds e4m3 values [N, K], scaleInv is
/// [ceil(N / blockN), ceil(K / blockK)] (partial edge blocks allowed) and
/// W[n, k] = w[n, k] * scaleInv[n / blockN, k / blockK].
Tensor fp8BlockMatmul(const Tensor &x, const Tensor &w, const Tensor &scaleInv,
                      int64_t blockN, int64_t blockK);

/// Grouped expert matmul over MXFP4 weights.
///   x:       [T, K] (every slot reads the token's row) or [T, k, K]
///   w:       [E, N, K] E2M1 values
///   scales:  [E, N, K / 32] E8M0 values (one per 32 along K)
///   indices: [T, k] expert ids (I32); -1 leaves the slot empty (zero)
///   routingWeights: optional [T, k]; when given the result is the weighted
///            sum over slots [T, N], otherwise per slot [T, k, N]
///   bias:    optional [E, N], added per expert before weighting
/// Errors on an expert id outside [-1, E).
llvm::Expected<Tensor> mxfp4ExpertMatmul(const Tensor &x, const Tensor &w,
                                         const Tensor &scales,
                                         const Tensor &indices,
                                         const Tensor &routingWeights,
                                         const Tensor &bias);

/// The MXFP4 online route's conversion (lm.mxfp4_to_fp8_experts): the
/// distinct experts of `indices` [T, k], in increasing id order, in slots
/// 0.. of `slotCount` slots: codes [S, N, K] (E4M3, the E2M1 values
/// exactly), blockScales [S, N, K / 32] (f32), slotBias [S, N] (f32, zero
/// without `bias`), slots [T, k] (the slot of each entry, -1 kept). Unused
/// slots are zero. Errors on an expert id outside [-1, E) or more distinct
/// experts than slots. With `allFromTokens` and T >= it, expert e goes to
/// slot e (S must be E) and slots are the indices.
struct Mxfp4Fp8Experts {
  Tensor codes, blockScales, slotBias, slots;
};
llvm::Expected<Mxfp4Fp8Experts>
mxfp4ToFp8Experts(const Tensor &w, const Tensor &scales, const Tensor &indices,
                  const Tensor &bias, int64_t slotCount,
                  std::optional<int64_t> allFromTokens = std::nullopt);

/// Grouped expert matmul over plain float weights w [E, N, K]; the same
/// routing semantics as mxfp4ExpertMatmul.
llvm::Expected<Tensor> expertMatmul(const Tensor &x, const Tensor &w,
                                    const Tensor &indices,
                                    const Tensor &routingWeights,
                                    const Tensor &bias);

/// Per-head matmul: x [T, H, K] with w [H, K, N] (or [H, N, K] when
/// transposeWeight) -> [T, H, N].
Tensor headMatmul(const Tensor &x, const Tensor &w, bool transposeWeight);

/// x with dimension d of the result being x's dimension permutation[d].
Tensor transpose(const Tensor &x, const std::vector<int64_t> &permutation);

/// w[.., n, k] * scaleInv[.., n / blockN, k / blockK] for an e4m3 weight of
/// rank 2 or 3 (a leading expert dim indexes the scales too).
Tensor fp8Dequant(const Tensor &w, const Tensor &scaleInv, int64_t blockN,
                  int64_t blockK);

//===----------------------------------------------------------------------===//
// MoE routing (kernels/Routing.cpp)
//===----------------------------------------------------------------------===//

enum class RoutingScore {
  /// DeepSeek-V3 noaux_tc: s = sigmoid(logits); selection on s + bias with
  /// group-limited top-k (group score = sum of its top-2 biased scores, keep
  /// topkGroup groups); weights = s[idx], renormalised if asked, * scale.
  Sigmoid,
  /// Softmax over all experts, then top-k (renormalise if asked) * scale.
  Softmax,
  /// gpt-oss: top-k of the raw logits, softmax over the k selected.
  SoftmaxTopK,
};

struct RoutingParams {
  RoutingScore score = RoutingScore::Sigmoid;
  int64_t topK = 1;
  int64_t numGroups = 1;
  int64_t topKGroups = 1;
  bool renormalize = true;
  double scalingFactor = 1.0;
  /// Slots after the top_k for shared experts stacked after the routed
  /// ones (ids E, E + 1, ...; weight 1).
  int64_t sharedExperts = 0;
};

struct Routing {
  Tensor indices; ///< [T, topK] I32, sorted by descending selection score
  Tensor weights; ///< [T, topK] F32
};

/// logits [T, E] (router output, pre-activation); bias [E] or empty.
/// Ties select the lower expert id.
Routing moeRoute(const Tensor &logits, const Tensor &bias,
                 const RoutingParams &params);

//===----------------------------------------------------------------------===//
// Attention (kernels/Attention.cpp)
//===----------------------------------------------------------------------===//

enum class MaskKind {
  Causal,        ///< key allowed iff kpos <= qpos
  SlidingWindow, ///< key allowed iff qpos - window < kpos <= qpos
  Bidirectional, ///< every key allowed (subject to segments)
};

struct AttentionParams {
  double scale = 1.0;
  MaskKind mask = MaskKind::Causal;
  int64_t window = 0;
};

/// Dense attention with MHA/GQA/MQA head sharing (query head h reads KV head
/// h / (Hq / Hkv)).
///   q [T, Hq, Dqk], k [S, Hkv, Dqk], v [S, Hkv, Dv] -> [T, Hq, Dv]
/// Optional: sinks [Hq] (an extra logit per head in the softmax denominator,
/// gpt-oss), qPositions [T] / kPositions [S] (default: queries are the last T
/// of the S keys, i.e. qpos = S - T + t, kpos = s), qSegments [T] /
/// kSegments [S] (a key is visible only within the query's segment). A query
/// with no visible key yields zeros.
Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const AttentionParams &params, const Tensor &sinks,
                 const Tensor &qPositions, const Tensor &kPositions,
                 const Tensor &qSegments, const Tensor &kSegments);

/// Dense attention over per-sequence caches: k [B, S, Hkv, Dqk], v [B, S,
/// Hkv, Dv]; query t reads row qSequences[t], whose key s sits at position
/// s, masked relative to qPositions[t] ([T] each, I32). Otherwise as
/// `attention`. Errors on a sequence outside [0, B).
llvm::Expected<Tensor> cachedAttention(const Tensor &q, const Tensor &k,
                                       const Tensor &v,
                                       const AttentionParams &params,
                                       const Tensor &sinks,
                                       const Tensor &qPositions,
                                       const Tensor &qSequences);

/// Sparse MLA in absorbed (MQA) form over selected keys:
///   q [T, H, Dqk], kv [S, Dqk] (latent | rope key), indices [T, topK] I32
///   with -1 padding -> [T, H, Dv] where V = kv[:, :Dv].
/// p = softmax over s in indices[t] of scale * q[t,h] . kv[s]; an empty set
/// yields zeros; optional sinks [H]. Errors on an index outside [-1, S).
/// With `sequences [T]` (I32), kv is [B, S, Dqk] and query t reads the rows of
/// sequence sequences[t]; errors on a sequence outside [0, B).
llvm::Expected<Tensor> sparseAttention(const Tensor &q, const Tensor &kv,
                                       const Tensor &indices, double scale,
                                       int64_t valueDim, const Tensor &sinks,
                                       const Tensor &sequences = Tensor());

//===----------------------------------------------------------------------===//
// DSA index selection (kernels/Dsa.cpp)
//===----------------------------------------------------------------------===//

/// Lightning-indexer scores:
///   I[t, s] = scale * sum_h weights[t, h] * ReLU(q[t, h] . k[s])
/// q [T, H, D], k [S, D], weights [T, H] -> [T, S] F32.
Tensor dsaIndexerScores(const Tensor &q, const Tensor &k,
                        const Tensor &weights, double scale);
/// Batched form: k [B, S, D] and query t scores the keys of sequence
/// sequences[t]; errors on a sequence outside [0, B). With `bounds` [T]
/// (empty: none), I[t, s] = 0 for s >= bounds[t].
llvm::Expected<Tensor> dsaIndexerScores(const Tensor &q, const Tensor &k,
                                        const Tensor &weights,
                                        const Tensor &sequences, double scale,
                                        const Tensor &bounds = Tensor());

/// Per query t, the top min(topK, bound[t]) keys among s < bound[t] (bound
/// clamped to [0, S]) by descending score, ties to the lower index, listed
/// in ascending key order, then -1 padding: scores [T, S], bounds [T] I32
/// -> [T, topK] I32.
Tensor dsaIndexSelect(const Tensor &scores, const Tensor &bounds, int64_t topK);

/// GLM's k-pool (lm.dsa_kpool): keys, gate [T, D], ape [P, D], the tail
/// state [B, max(P - 1, 1), 2D] (row m mod P: [key | gate] of position m
/// of the incomplete pool), positions and sequences [T]. output [T, D]:
/// the pooled key of each token's pool over its members known at the end
/// of the step; state: the incomplete pools after it. Errors on a
/// sequence outside the slots or a sequence whose positions in the step
/// are not consecutive.
struct KpoolResult {
  Tensor output, state;
};
llvm::Expected<KpoolResult> dsaKpool(const Tensor &keys, const Tensor &gate,
                                     const Tensor &ape, const Tensor &state,
                                     const Tensor &positions,
                                     const Tensor &sequences);

/// Selected pools [T, K] (-1 padding) to the tokens they hold, then each
/// query's own incomplete pool, then -1: [T, K P + P - 1] I32.
Tensor dsaKpoolExpand(const Tensor &pools, const Tensor &positions,
                      int64_t poolSize);

//===----------------------------------------------------------------------===//
// KDA (kernels/Kda.cpp)
//===----------------------------------------------------------------------===//

/// Causal depthwise convolution with a rolling state:
///   x [T, C], weight [C, W], state [W-1, C] (the W-1 inputs before x[0]).
///   y[t, c] = act(sum_j weight[c, j] * xx[t + j, c]), xx = state ++ x.
/// newState is the last W-1 rows of xx.
enum class ConvActivation { None, Silu };
struct ConvResult {
  Tensor output;
  Tensor state;
};
ConvResult causalConv1d(const Tensor &x, const Tensor &weight,
                        const Tensor &state, ConvActivation activation);

/// KDA forget gate (log decay, <= 0) from the raw projection:
///   graw [T, H, Dk], aLog [H], dtBias [H, Dk]
///   g = -exp(aLog[h]) * softplus(graw + dtBias)             (no lowerBound)
///   g = lowerBound * sigmoid(exp(aLog[h]) * (graw + dtBias)) (bounded)
Tensor kdaGate(const Tensor &graw, const Tensor &aLog, const Tensor &dtBias,
               std::optional<double> lowerBound);

struct KdaParams {
  double scale = 1.0;    ///< multiplies q (after the optional L2 norm)
  bool qkL2Norm = true;  ///< q, k <- x / sqrt(sum x^2 + 1e-6) per head
  int64_t chunkSize = 64;
};
struct KdaResult {
  Tensor output;
  Tensor state;
};

/// Gated delta rule over one sequence in the chunked WY/UT form:
///   q, k, g [T, H, Dk], v [T, H, Dv], beta [T, H], state [H, Dk, Dv]
/// Per token and head (S the state):
///   S <- diag(exp(g_t)) S;  u = beta_t (v_t - S^T k_t);  S <- S + k_t u^T;
///   o_t = S^T q_t
KdaResult kdaChunk(const Tensor &q, const Tensor &k, const Tensor &v,
                   const Tensor &g, const Tensor &beta, const Tensor &state,
                   const KdaParams &params);

/// One recurrent step for a batch of sequences:
///   q, k, g [B, H, Dk], v [B, H, Dv], beta [B, H], state [B, H, Dk, Dv].
KdaResult kdaStep(const Tensor &q, const Tensor &k, const Tensor &v,
                  const Tensor &g, const Tensor &beta, const Tensor &state,
                  const KdaParams &params);

/// Steps over many sequences: x, q, k, v, g, beta hold tokens of sequences
/// `sequences [T]` (slots of the state's leading dim: short_conv's state is
/// [B, W-1, C], KDA's [B, H, Dk, Dv]). Each slot's tokens, in step order,
/// run through the per-sequence kernel above from the slot's state
/// (kdaChunk, or kdaStep token by token when !chunked); slots no token
/// names keep their state. An error names a token whose slot is outside
/// [0, B).
llvm::Expected<ConvResult>
causalConv1dSlots(const Tensor &x, const Tensor &weight, const Tensor &state,
                  const Tensor &sequences, ConvActivation activation);
llvm::Expected<KdaResult> kdaSlots(const Tensor &q, const Tensor &k,
                                   const Tensor &v, const Tensor &g,
                                   const Tensor &beta, const Tensor &state,
                                   const Tensor &sequences,
                                   const KdaParams &params, bool chunked);

//===----------------------------------------------------------------------===//
// Cross-layer residuals (kernels/CrossLayer.cpp)
//===----------------------------------------------------------------------===//

/// Block AttnRes: sources v_i [T, D];
///   logit_i = sum_d v_i[d] / rms(v_i) * normWeight[d] * proj[d],
///   rms(v) = sqrt(mean(v^2) + eps); out = sum_i softmax_i(logit) v_i.
Tensor blockAttnRes(const std::vector<Tensor> &sources,
                    const Tensor &normWeight, const Tensor &proj, double eps);

/// mHC pre-mix for n streams (DeepSeek-V4):
///   streams [T, n, D], fn [(2+n)n, nD], base [(2+n)n], scale [3]
///   f = rmsNorm_noweight(flatten(X), normEps) @ fn^T split into
///   pre [n], post [n], comb [n*n];
///   pre = sigmoid(pre*scale[0] + base_pre) + eps
///   post = 2 sigmoid(post*scale[1] + base_post)
///   C = softmax_row(comb*scale[2] + base_comb) + eps; C /= colsum(C) + eps;
///   then (sinkhornIters - 1) times: C /= rowsum + eps; C /= colsum + eps
///   input = sum_j pre_j X_j
struct MhcPre {
  Tensor input; ///< [T, D]
  Tensor post;  ///< [T, n]
  Tensor comb;  ///< [T, n, n]
};
MhcPre mhcPre(const Tensor &streams, const Tensor &fn, const Tensor &base,
              const Tensor &scale, int64_t sinkhornIters, double eps,
              double normEps);

/// mHC post-mix: X'_k = post_k * y + sum_j comb[j, k] X_j.
///   streams [T, n, D], y [T, D], post [T, n], comb [T, n, n] -> [T, n, D]
Tensor mhcPost(const Tensor &streams, const Tensor &y, const Tensor &post,
               const Tensor &comb);

//===----------------------------------------------------------------------===//
// Memory: embedding, row gathers and cache writes (kernels/Memory.cpp)
//===----------------------------------------------------------------------===//

/// table [V, D], ids [T] -> [T, D]. Errors on an id outside [0, V).
llvm::Expected<Tensor> embedding(const Tensor &table, const Tensor &ids);
/// input [T, D], rows [R] -> [R, D]: result[r] = input[rows[r]]. Errors on
/// a row outside [0, T).
llvm::Expected<Tensor> gatherRows(const Tensor &input, const Tensor &rows);

/// Writes values[t] into cache[slots[t]] (cache [S, ...], values [T, ...],
/// slots [T]); slot -1 skips the row. Returns the updated cache. Errors on a
/// slot outside [-1, S).
/// How a cache stores its rows (lm's #lm.kv_layout): written values are
/// rounded as the storage would round them, so reads see what a device
/// cache holds. F8E4M3FN: the first width - tailDim values in tiles of
/// scaleBlock, each scaled by s = 2^ceil(log2(max(amax, 1e-4) / 448)) and
/// rounded to e4m3; the tail rounded to bf16. BF16: every value to bf16.
struct CacheStorage {
  ElementType storage = ElementType::F32;
  int64_t scaleBlock = 0;
  int64_t tailDim = 0;
};

/// With `sequences [T]` the cache is [B, S, ...] and token t writes row
/// slots[t] of sequence sequences[t].
llvm::Expected<Tensor> cacheWrite(const Tensor &cache, const Tensor &values,
                                  const Tensor &slots,
                                  const Tensor &sequences = Tensor(),
                                  const CacheStorage &storage = {});

} // namespace daybreak::ref

#endif // DAYBREAK_COMPILER_REFERENCE_KERNELS_H
