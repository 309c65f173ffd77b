//===- CpuKernels.h - The runtime's CPU kernels -----------------*- C++ -*-===//
//
// The library kernels the CPU device runs for plan launches: fp32
// activations, fp32 weights (converted once at load), caches in their
// assigned storage layout. Each kernel splits its work over the thread pool
// it is given; all are deterministic (the same result for any thread count).
// Temporaries come from scratch arenas (Scratch.h: ScratchFrame) sized by the
// shapes, never per-call vectors: once a step has run at its shapes, running
// it again allocates nothing on the host.
// Data-dependent failures (token ids, expert ids, slots, sequences out of
// range) return a Status naming the kernel, the value and the limit; shapes
// were checked by the compiler.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_DEVICES_CPU_CPUKERNELS_H
#define DAYBREAK_RUNTIME_DEVICES_CPU_CPUKERNELS_H

#include "runtime/core/CacheState.h"
#include "runtime/core/KernelParams.h"
#include "runtime/devices/cpu/Scratch.h"
#include "runtime/devices/cpu/ThreadPool.h"
#include "runtime/numerics/Numerics.h"
#include "runtime/support/Status.h"

#include <cstdint>

namespace daybreak::cpu {

using runtime::CacheFormat;

/// One layer's cache of a batch of sequences, paged: row `pos` of sequence
/// `seq` lives in page pageTable[seq * pagesPerSeq + pos / pageSize], at row
/// pos % pageSize of that page; or, with ringRows (a sliding-window
/// cache), at row seq * ringRows + pos % ringRows.
struct CacheView {
  uint8_t *base = nullptr;
  CacheFormat format = CacheFormat::F32;
  int64_t width = 0;
  int64_t tailDim = 0;
  int64_t scaleBlock = 0;
  int64_t bytesPerRow = 0;
  int64_t batch = 0;
  int64_t maxSeqLen = 0;
  int64_t pageSize = 0;
  const int32_t *pageTable = nullptr; // [batch * pagesPerSeq]
  int64_t ringRows = 0;

  int64_t pagesPerSeq() const { return (maxSeqLen + pageSize - 1) / pageSize; }
  /// Byte address of a row (no bounds checks: callers check seq and pos).
  uint8_t *row(int64_t seq, int64_t pos) const;
  /// Decodes a row into `out[width]`.
  void read(int64_t seq, int64_t pos, float *out) const;
  /// Decodes columns [first, first + count) of a row into `out[count]` (one
  /// head of a row that holds several), each as read() decodes it.
  void readColumns(int64_t seq, int64_t pos, int64_t first, int64_t count,
                   float *out) const;
  /// Encodes `in[width]` into a row.
  void write(int64_t seq, int64_t pos, const float *in) const;
};

using runtime::cacheBytesPerRow;

//===----------------------------------------------------------------------===//
// Weights at their stored precision.
//===----------------------------------------------------------------------===//

/// How a weight is stored. The kernels read it as it is and widen values to
/// fp32 as they use them.
enum class WeightType : int32_t { F32 = 0, BF16 = 1, F8E4M3 = 2 };

/// A weight as the checkpoint stores it: fp32, bf16, or e4m3 codes scaled
/// per blockN x blockK block by fp32 `scales` ([ceil(rows / blockN),
/// ceil(cols / blockK)] per matrix). Stacked matrices of rows x cols
/// (experts) follow each other, and so do their scales. A view of memory
/// owned elsewhere; trivially copyable.
struct WeightView {
  const void *data = nullptr;
  WeightType type = WeightType::F32;
  const float *scales = nullptr;
  int64_t blockN = 0, blockK = 0;
  int64_t rows = 0, cols = 0;

  static WeightView f32(const float *values) {
    WeightView w;
    w.data = values;
    return w;
  }
  bool isF32() const { return type == WeightType::F32; }
  /// Element `i` of an unscaled weight (a vector: norms, biases).
  float at(int64_t i) const;
  /// Writes the `count` values of row `row` of matrix `matrix` from column
  /// `col` on to `out`, widened to fp32 (e4m3 times its block's scale, one
  /// float multiply).
  void decodeRow(int64_t matrix, int64_t row, int64_t col, int64_t count,
                 float *out) const;
};

/// MXFP4 experts as stored (gpt-oss, Kimi K3): E2M1 values [E, N, K], two
/// a byte, low nibble first, and one E8M0 exponent byte per 32 values along
/// K, [E, N, K / 32]; value (e, n, i) is E2M1 times 2^(scale - 127), 255 a
/// NaN scale. A view of memory owned elsewhere; trivially copyable.
struct Mxfp4Weights {
  const uint8_t *values = nullptr;
  const uint8_t *scales = nullptr;
};

//===----------------------------------------------------------------------===//
// Kernels. Row-major; `rows` is the product of all dims but the last.
//===----------------------------------------------------------------------===//

/// out[t, :] = table[ids[t], :]; errors on an id outside [0, vocab).
Status embedding(ThreadPool &pool, const float *table, int64_t vocab,
                 int64_t dim, const int32_t *ids, int64_t tokens, float *out);
Status embedding(ThreadPool &pool, const WeightView &table, int64_t vocab,
                 int64_t dim, const int32_t *ids, int64_t tokens, float *out);

/// out = x / sqrt(mean(x^2) + eps) * weight, per row of `dim`.
void rmsNorm(ThreadPool &pool, const float *x, const float *weight,
             int64_t rows, int64_t dim, double eps, float *out);
/// The same with a stored weight (null data: no weight), rows of x and out
/// `xStride` and `outStride` elements apart (0: dim; column views).
void rmsNorm(ThreadPool &pool, const float *x, const WeightView &weight,
             int64_t rows, int64_t dim, double eps, float *out,
             int64_t xStride = 0, int64_t outStride = 0);

/// One row of rmsNorm: double sums of squares, fp32 results (out may be
/// in).
void rmsNormRow(const float *in, const WeightView &weight, int64_t dim,
                double eps, float *out);
/// One row of layerNorm (out may be in).
void layerNormRow(const float *in, const WeightView &weight,
                  const WeightView &bias, int64_t dim, double eps, float *out);

/// sum = x + residual, out = rmsNorm(sum) per row of `dim`, a row at a time
/// (one launch, each row in cache between the add and the norm): sum's
/// elements as the add stores them, out as rmsNorm computes it from them.
/// sum may be x or residual.
void addRmsNorm(ThreadPool &pool, const float *x, const float *residual,
                const WeightView &weight, int64_t rows, int64_t dim, double eps,
                float *sum, float *out);

/// out = (x - mean) / sqrt(var + eps) * weight + bias (bias may be null).
void layerNorm(ThreadPool &pool, const float *x, const float *weight,
               const float *bias, int64_t rows, int64_t dim, double eps,
               float *out);
/// The same with stored weights (null data: none), rows of x and out
/// `xStride` and `outStride` elements apart (0: dim; column views).
void layerNorm(ThreadPool &pool, const float *x, const WeightView &weight,
               const WeightView &bias, int64_t rows, int64_t dim, double eps,
               float *out, int64_t xStride = 0, int64_t outStride = 0);

/// out[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]); w is [N, K] (PyTorch
/// layout), bias may be null. Blocked and multithreaded; fp32 accumulation
/// (pairwise or blocked sums keep the error within ~1e-6 relative).
void matmul(ThreadPool &pool, const float *x, const float *w,
            const float *bias, int64_t m, int64_t n, int64_t k, float *out);

/// Work split of a matmul chosen by the compiler's tiling pass: rows and
/// columns of the output per job (0: the kernel's own heuristic). The
/// arithmetic of each output element does not depend on it.
struct MatmulTiling {
  int64_t rowBlock = 0;
  int64_t colBlock = 0;
};
void matmul(ThreadPool &pool, const float *x, const float *w,
            const float *bias, int64_t m, int64_t n, int64_t k, float *out,
            const MatmulTiling &tiling);
/// The same with a stored weight [N, K] and bias (null data: none): each
/// job widens the weight rows it uses into scratch, so results
/// equal the fp32 matmul on the widened weight.
void matmul(ThreadPool &pool, const float *x, const WeightView &w,
            const WeightView &bias, int64_t m, int64_t n, int64_t k,
            float *out, const MatmulTiling &tiling);

/// x [rows, k] as the FP8 GEMMs read it (`--precision=fp8`,
/// runtime::fp8InputsApply): per row and 128 columns, scale s = 2^ceil(
/// log2(max(amax, 1e-4) / 448)) and out = e4m3(x / s) s (RNE, saturating;
/// exact in fp32). `out` may not alias `x`. `rounding` (nearest even by
/// default) may be the tolerance's model of it instead
/// (numerics::OperandRounding::e4m3).
void quantizeFp8Rows(ThreadPool &pool, const float *x, int64_t rows, int64_t k,
                     float *out,
                     numerics::OperandRounding rounding =
                         numerics::OperandRounding::nearestEven());

/// Per-head matmul: x [T, H, K], w [H, K, N] (or [H, N, K] when
/// transposeWeight) -> out [T, H, N].
void headMatmul(ThreadPool &pool, const float *x, const float *w,
                bool transposeWeight, int64_t tokens, int64_t heads, int64_t k,
                int64_t n, float *out);
/// The same with a stored weight (unscaled: f32 or bf16), each (token,
/// head) row of x and out `xStride` and `outStride` elements apart (0: k
/// and n; column views).
void headMatmul(ThreadPool &pool, const float *x, const WeightView &w,
                bool transposeWeight, int64_t tokens, int64_t heads, int64_t k,
                int64_t n, float *out, int64_t xStride = 0,
                int64_t outStride = 0);

using runtime::RopeParams;
/// Rotates, in place, each of the `rowsPerToken` rows (of `rowDim`) of
/// token t by positions[t]. YaRN as DeepSeek-V3 / transformers define it.
void rope(ThreadPool &pool, float *x, const int32_t *positions, int64_t tokens,
          int64_t rowsPerToken, int64_t rowDim, const RopeParams &params);
/// The same from x into out (x may be out), rows where `xRows` and
/// `outRows` place them (column views; rows of heads): the columns outside
/// the rotated slice are copied.
void rope(ThreadPool &pool, const float *x, runtime::RopeRows xRows, float *out,
          runtime::RopeRows outRows, const int32_t *positions, int64_t tokens,
          int64_t rowsPerToken, int64_t rowDim, const RopeParams &params);

/// rope's pieces, for kernels that rotate rows of their own: the pair
/// frequencies theta^(-2i/dim) with YaRN's NTK-by-parts blend (models.md
/// §1.4), dim / 2 of them; a position's cosines and sines (times the YaRN
/// attention factor); the rotation of one row's slice [offset, offset +
/// dim) from in into out (in may be out; other columns untouched).
void ropeFrequencies(const RopeParams &p, double *freqs);
void ropeAngles(double position, const double *freqs, const RopeParams &p,
                double *cosines, double *sines);
void ropeRotate(const float *in, float *out, const double *cosines,
                const double *sines, const RopeParams &p);

/// out = g' * sigmoid(alpha g') * (u' + upOffset), with the clamps of
/// lm.swiglu when hasLimit.
void swiglu(ThreadPool &pool, const float *gate, const float *up, int64_t n,
            double alpha, bool hasLimit, double limit, double upOffset,
            float *out);

/// out = a + b, elementwise.
void add(ThreadPool &pool, const float *a, const float *b, int64_t n,
         float *out);

using runtime::RouteParams;
/// DeepSeek noaux_tc routing (sigmoid scores, bias-for-selection, group
/// limit, renormalise, scale) as lm.moe_route `sigmoid`. Ties to the lower
/// expert id; results sorted by descending selection score. Rows are
/// topK + sharedExperts slots, the last the shared experts' (ids experts,
/// experts + 1, ..., weight 1).
void moeRouteSigmoid(ThreadPool &pool, const float *logits, const float *bias,
                     int64_t tokens, int64_t experts, const RouteParams &p,
                     int32_t *indices, float *weights);

/// gpt-oss routing as lm.moe_route `softmax_topk`: the topK experts of the
/// highest logits + bias (bias may be null; ties to the lower expert id,
/// sorted by descending selection score), weighted by the softmax of their
/// unbiased logits times scalingFactor. numGroups, topKGroups and
/// renormalize do not apply.
void moeRouteSoftmaxTopK(ThreadPool &pool, const float *logits,
                         const float *bias, int64_t tokens, int64_t experts,
                         const RouteParams &p, int32_t *indices,
                         float *weights);

/// Grouped expert matmul: x [T, K] (or [T, slots, K] when perSlotInput),
/// w [E, N, K], indices [T, slots] (-1 = empty slot); with routingWeights
/// [T, slots] out is [T, N] (weighted sum), else [T, slots, N]. Errors on an
/// expert id outside [-1, E).
Status expertMatmul(ThreadPool &pool, const float *x, bool perSlotInput,
                    const float *w, int64_t experts, int64_t n, int64_t k,
                    const int32_t *indices, int64_t tokens, int64_t slots,
                    const float *routingWeights, float *out);
/// The same with stored expert weights (one matrix of n x k per expert)
/// and an optional `bias` [E, N] (null data: none), added to a slot's
/// product before the routing weights.
Status expertMatmul(ThreadPool &pool, const float *x, bool perSlotInput,
                    const WeightView &w, int64_t experts, int64_t n, int64_t k,
                    const int32_t *indices, int64_t tokens, int64_t slots,
                    const float *routingWeights, float *out,
                    const WeightView &bias = WeightView());

/// The grouped expert matmul of expertMatmul over MXFP4 experts
/// ([experts, n, k], k a multiple of 32): each block of 32 values is
/// decoded as read and its fp32 dot product with the input scaled by the
/// block's power of two; `bias` [E, N] (null data: none) is added to a
/// slot's product before the routing weights. Errors on an expert id
/// outside [-1, E).
Status mxfp4ExpertMatmul(ThreadPool &pool, const float *x, bool perSlotInput,
                         const Mxfp4Weights &w, const WeightView &bias,
                         int64_t experts, int64_t n, int64_t k,
                         const int32_t *indices, int64_t tokens, int64_t slots,
                         const float *routingWeights, float *out);

/// The MXFP4 online route's conversion (Kernels.def mxfp4_to_fp8_experts):
/// the distinct experts of `indices` [tokens, slots], in increasing id
/// order, into workspace slots 0..: `codes` [S, n, k] E4M3 (each E2M1 value
/// exactly), `blockScales` [S, n, k / 32] (2^(scale - 127), NaN for 255),
/// `slotBias` [S, n] (the bias row, zero when bias.data is null), and
/// `remapped` [tokens, slots] (the slot of each entry, -1 kept). Slots past
/// the distinct count are not written. Errors on an expert id outside [-1,
/// experts) or more distinct experts than the `workspaceSlots`. `mode`
/// All converts every expert e into slot e instead (indices and remapped
/// unused; errors when the workspace has fewer than E slots); SlotsOnly
/// writes only `remapped`, as the indices themselves.
Status mxfp4ToFp8Experts(
    ThreadPool &pool, const Mxfp4Weights &w, const WeightView &bias,
    int64_t experts, int64_t n, int64_t k, const int32_t *indices,
    int64_t tokens, int64_t slots, int64_t workspaceSlots, uint8_t *codes,
    float *blockScales, float *slotBias, int32_t *remapped,
    runtime::Mxfp4ConvertMode mode = runtime::Mxfp4ConvertMode::Selected);

/// cacheWrite's prologue: the parameters, the norm's weight and bias (a
/// layer norm's may be absent) and RoPE's positions [T].
struct CacheWritePrologueArgs {
  runtime::CacheWritePrologue params;
  WeightView weight, bias;
  const int32_t *positions = nullptr;
};

/// Writes values [T, width] to rows (sequences[t], slots[t]) of the cache;
/// slot -1 skips. Errors on a sequence outside [0, batch) or a slot outside
/// [-1, maxSeqLen). With `prologue`, each row written is first normalised
/// and rotated as rmsNormRow / layerNormRow and rope compute them (bit for
/// bit the rms_norm / layer_norm and rope kernels' rows).
/// Token t's values start at values + t * valuesStride (0: the cache's
/// width; a column view's row stride).
Status cacheWrite(ThreadPool &pool, const CacheView &cache, const float *values,
                  const int32_t *slots, const int32_t *sequences,
                  int64_t tokens,
                  const CacheWritePrologueArgs *prologue = nullptr,
                  int64_t valuesStride = 0);

/// scores[t, s] = scale * sum_h weights[t, h] * ReLU(q[t, h] . key(seq_t, s))
/// for s < maxSeqLen of the (indexer) cache; q [T, H, D]. With `bounds`
/// (may be null), 0 for s >= bounds[t], whose keys are not read.
/// `roundQ`: q rounded to bf16 where runtime::indexerTensorCoresApply
/// holds, as the CUDA tensor-core kernel (daybreak_dsa_indexer_tc) rounds
/// it (to nearest even): its oracle. `queryRope` (may be null): each head
/// q[t, h] first rotated at positions[t] as rope rotates it (then
/// rounded).
struct QueryRope {
  RopeParams params;
  const int32_t *positions = nullptr;
};
Status dsaIndexerScores(ThreadPool &pool, const float *q, const float *weights,
                        const CacheView &keys, const int32_t *sequences,
                        const int32_t *bounds, int64_t tokens, int64_t heads,
                        double scale, float *scores,
                        numerics::OperandRounding roundQ = {},
                        const QueryRope *queryRope = nullptr);

/// Per query, the min(topK, bounds[t]) best of scores[t, 0 : bounds[t]]
/// (ties to the lower index) in ascending key order, then -1.
void dsaIndexSelect(ThreadPool &pool, const float *scores,
                    const int32_t *bounds, int64_t tokens, int64_t keys,
                    int64_t topK, int32_t *indices);

/// Sparse MLA (absorbed): out[t, h] = sum over s in indices[t] of
/// softmax(scale * q[t, h] . kv(seq_t, s)) * kv(seq_t, s)[:valueDim];
/// q [T, H, width], -1 indices skipped, empty sets give 0, sinks may be null.
/// `rounding`: q and the probabilities rounded to bf16 before their
/// products (to nearest even, or the test's model of it), the denominators
/// summing the rounded probabilities, as the CUDA tensor-core kernel
/// (daybreak_sparse_mla_tc) rounds them: its oracle (`daybreak-run --device=cpu
/// --attention=tensor-cores`).
Status sparseAttention(ThreadPool &pool, const float *q, const CacheView &kv,
                       const int32_t *indices, int64_t topK,
                       const int32_t *sequences, int64_t tokens, int64_t heads,
                       double scale, int64_t valueDim, const float *sinks,
                       float *out, numerics::OperandRounding rounding = {});

/// Dense GQA attention over K and V caches (the `attention` kernel, as
/// gpt-oss runs it): q [T, heads, headDim]; K rows hold [kvHeads, headDim]
/// and V rows [kvHeads, valueDim] (headDim = k.width / kvHeads, valueDim =
/// v.width / kvHeads); query head h reads KV head h / (heads / kvHeads).
/// Query t of sequence sequences[t] (null: 0) at position p = positions[t]
/// attends to its sequence's keys at positions max(0, p - window + 1) .. p
/// (window 0: 0 .. p) with softmax(scale * q . k); sinks[h] (null: none)
/// joins the maximum and the denominator only; no visible key gives 0.
/// out [T, heads, valueDim]. An online softmax over chunks of keys, in
/// fixed tiles of tokens x KV heads. Errors on a sequence outside [0,
/// batch), a position outside [0, maxSeqLen), heads that do not split into
/// kvHeads, or a ring (window) cache too short for the window and the step
/// (window - 1 + tokens > ringRows).
Status attention(ThreadPool &pool, const float *q, const CacheView &k,
                 const CacheView &v, const int32_t *positions,
                 const int32_t *sequences, const float *sinks, int64_t tokens,
                 int64_t heads, int64_t kvHeads, double scale, int64_t window,
                 float *out);

/// Copies columns [srcOffset, srcOffset + cols) of each of `rows` rows of
/// src (row length srcStride) to columns [dstOffset, ...) of dst (row
/// length dstStride): slices and concatenations along the last dim.
void copyColumns(ThreadPool &pool, const float *src, int64_t srcStride,
                 int64_t srcOffset, float *dst, int64_t dstStride,
                 int64_t dstOffset, int64_t rows, int64_t cols);

/// bounds[t] = positions[t] + 1.
void causalBounds(const int32_t *positions, int64_t tokens, int32_t *bounds);

/// Expert parallelism's renumbering: out[i] = ids[i] - first for ids in
/// [first, first + count), else -1 (an empty slot).
void localExperts(const int32_t *ids, int64_t n, int64_t first, int64_t count,
                  int32_t *out);

//===----------------------------------------------------------------------===//
// Kimi Delta Attention over per-slot state (CpuKda.cpp)
//===----------------------------------------------------------------------===//

/// One layer's per-slot state as stored: slot s is slotBytes at base + s *
/// slotBytes, its values f32 or bf16 (read widened, written rounded).
struct StateView {
  uint8_t *base = nullptr;
  bool bf16 = false;
  int64_t slotBytes = 0;
  int64_t slots = 0;
};

/// The KDA scans' operands: q, k, g [T, H, Dk], v [T, H, Dv], beta [T, H].
struct KdaInputs {
  const float *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr,
              *beta = nullptr;
};
struct KdaShape {
  int64_t heads = 0, keyDim = 0, valueDim = 0;
  double scale = 1.0;
  bool qkL2Norm = false;
  int64_t chunkSize = 64; ///< kda_chunk only
};

/// short_conv (Kernels.def): x [T, C], weight [C, W] as stored, a state slot
/// of [W - 1, C] per sequence; activation an abi::Activation. Errors on a
/// sequence outside [0, state.slots) or a slot that is not [W - 1, C].
Status shortConv(ThreadPool &pool, const float *x, const WeightView &weight,
                 int64_t channels, int64_t width, const StateView &state,
                 const int32_t *sequences, int64_t tokens, int64_t activation,
                 float *out);
/// kda_gate: raw [T, H, D], aLog [H], dtBias [H, D]; lowerBound null for
/// the softplus gate.
void kdaGate(ThreadPool &pool, const float *raw, const float *aLog,
             const float *dtBias, int64_t tokens, int64_t heads, int64_t dim,
             const double *lowerBound, float *out);
/// kda_chunk: each slot's tokens in chunks of shape.chunkSize, the WY/UT
/// form (models.md 2.4); state slots [H, Dk, Dv]. out [T, H, Dv].
Status kdaChunk(ThreadPool &pool, const KdaInputs &in, const StateView &state,
                const int32_t *sequences, int64_t tokens, const KdaShape &shape,
                float *out);
/// kda_step: the recurrence token by token.
Status kdaStep(ThreadPool &pool, const KdaInputs &in, const StateView &state,
               const int32_t *sequences, int64_t tokens, const KdaShape &shape,
               float *out);
/// dsa_kpool (Kernels.def): keys, gate [T, width], ape [poolSize, width]
/// as stored, a state slot of [max(poolSize - 1, 1), 2 width] per sequence
/// (row m mod poolSize: [key | gate] of position m of the incomplete pool).
/// out [T, width]: the pooled key of each token's pool over the members
/// known at the end of the step. Errors on a sequence outside the slots, a
/// slot of another size, or a sequence whose positions in the step are not
/// consecutive.
Status dsaKpool(ThreadPool &pool, const float *keys, const float *gate,
                const WeightView &ape, int64_t poolSize, int64_t width,
                const StateView &state, const int32_t *positions,
                const int32_t *sequences, int64_t tokens, float *out);
/// dsa_kpool_expand: pools [T, k] (-1 padding) to their tokens, then each
/// query's incomplete pool, then -1: out [T, k poolSize + poolSize - 1].
void dsaKpoolExpand(ThreadPool &pool, const int32_t *pools,
                    const int32_t *positions, int64_t tokens, int64_t k,
                    int64_t poolSize, int32_t *out);
/// gated_rms_norm: rows of dim; weight as stored (null data: none).
void gatedRmsNorm(ThreadPool &pool, const float *x, const float *gate,
                  const WeightView &weight, int64_t rows, int64_t dim,
                  double eps, int64_t activation, float *out);

/// mHC (CpuResidual.cpp), n streams of `width` values a token, n up to
/// kMhcMaxStreams. The mixing of one collapse: fn [(2+n)n, nD], base
/// [(2+n)n], scale [3], Sinkhorn rounds and epsilons as lm.mhc_pre's; with
/// a norm weight [D] the sublayer input is RMS-normalised with it and
/// inputEps (the sublayer's own norm, fused).
inline constexpr int64_t kMhcMaxStreams = 8;
struct MhcMix {
  const float *fn = nullptr, *base = nullptr, *scale = nullptr;
  int64_t sinkhornIters = 1;
  double eps = 0.0, normEps = 0.0;
  /// No data: the input is the plain collapse sum_j pre_j X_j.
  WeightView norm;
  double inputEps = 0.0;
};
/// mhcPre: streams [T, n, D] -> input [T, D], post [T, n], comb [T, n, n].
Status mhcPre(ThreadPool &pool, const float *streams, int64_t tokens, int64_t n,
              int64_t width, const MhcMix &mix, float *input, float *post,
              float *comb);
/// mhcPost: X'_k = post_k y + sum_j comb[j, k] X_j.
Status mhcPost(ThreadPool &pool, const float *streams, const float *y,
               const float *post, const float *comb, int64_t tokens, int64_t n,
               int64_t width, float *out);
/// mhcPostPre: mhcPost into `out`, then mhcPre on `out` (lm.mhc_post_pre),
/// a token at a time while its new streams are in cache; the same values
/// as the two kernels.
Status mhcPostPre(ThreadPool &pool, const float *streams, const float *y,
                  const float *post, const float *comb, int64_t tokens,
                  int64_t n, int64_t width, const MhcMix &mix, float *out,
                  float *input, float *nextPost, float *nextComb);

} // namespace daybreak::cpu

#endif // DAYBREAK_RUNTIME_DEVICES_CPU_CPUKERNELS_H
