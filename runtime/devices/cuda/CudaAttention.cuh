//===- CudaAttention.cuh - Dense GQA attention over K and V caches -*- CUDA -*-//
//
// The `attention` kernel (see cpu::attention for the semantics): queries of
// one KV head's group attend to their sequence's keys in a window, with
// sinks. Part of CudaKernels.cu's translation unit (included at its end, so
// that the PTX build, SpecializedKernels.cu and the compiler's NVRTC build
// of the library all see one module): it uses that file's Cache, cacheRow,
// value decoders and warp reductions.
//
// This generic kernel (daybreak_attention, and its split) serves every
// shape the kernels below do not take. A block takes a tile of consecutive
// tokens and the query heads of one KV head (a head group when they do not
// fit), so each K and V row it decodes serves every query head of the
// group; runs of tokens of one sequence in the tile share the decoded rows.
// Keys come in chunks decoded to fp32 in shared memory, scores and the
// online softmax in fp32 on the CUDA cores (fp32-exact-ish against the CPU,
// whatever the cache's storage type). Decode (too few blocks to fill the
// GPU) also splits each token's keys over blocks (flash decoding) and
// daybreak_sparse_attention_combine, whose partial layout this shares,
// merges the splits in a fixed order with the sinks.
//
// Below it, three more kernels of the same semantics, which
// CudaKernels::attention chooses between:
// - daybreak_attention_tc64 / _tc128: prefill on the tensor cores (bf16
//   and fp8 caches; not exact, an option);
// - daybreak_attention_decode: decode steps (a token per cache slot), a
//   block a token, KV head and key split, warps on their own key tiles;
// - daybreak_attention_prefill64: prefill on the CUDA cores, register-
//   tiled like an SGEMM, for head and value dims up to 64.
//
//===----------------------------------------------------------------------===//

namespace {

/// Threads of an attention block, and output elements (rows x value dims)
/// each keeps in registers: a block holds rows x valueDim <= 256 * 16.
constexpr int kAttentionThreads = 256, kAttentionAcc = 16;

/// Column `col` of a cache row, decoded as readRow decodes it (so K and V
/// values are bit-identical to the CPU's).
__device__ __forceinline__ float cacheValue(const Cache &c,
                                            const uint8_t *row, int64_t col) {
  if (c.format == kF32)
    return reinterpret_cast<const float *>(row)[col];
  if (c.format == kBF16)
    return bf16ToFloat(reinterpret_cast<const uint16_t *>(row)[col]);
  int64_t quantized = c.width - c.tailDim;
  if (col < quantized)
    return e4m3ToFloat(row[col]) *
           reinterpret_cast<const float *>(row + quantized)[col / c.scaleBlock];
  const uint16_t *tail = reinterpret_cast<const uint16_t *>(
      row + quantized + 4 * (quantized / c.scaleBlock));
  return bf16ToFloat(tail[col - quantized]);
}

/// The keys query position `p` sees: [first, p].
__device__ __forceinline__ int64_t windowStart(int64_t p, int64_t window) {
  return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

/// daybreak_attention's body. Block (x, y, z): tokens [x * tileTokens, ...),
/// KV head y / headGroups and its query heads' group y % headGroups (of
/// headGroup heads), split z of `splits` (kSplit: one token a block; its
/// keys cut in `splits` equal parts, and the block leaves its running max,
/// denominator, key count and unnormalised accumulators per head in
/// `partial` [tokens, heads, splits, valueDim + 4]).
template <bool kSplit>
__device__ __forceinline__ void
denseAttention(const float *q, const Cache &k, const Cache &v,
               const int32_t *positions, const int32_t *sequences,
               const float *sinks, int64_t tokens, int64_t heads,
               int64_t kvHeads, double scale, int64_t window, float *out,
               int32_t tileTokens, int32_t headGroup, int32_t chunk,
               int32_t splits, float *partial) {
  extern __shared__ float smem[];
  const int64_t group = heads / kvHeads, headDim = k.width / kvHeads,
                valueDim = v.width / kvHeads;
  const int64_t kStride = headDim + 1; // odd: lanes read distinct banks
  const int maxRows = tileTokens * headGroup;
  float *qs = smem;                          // [maxRows, headDim]
  float *ks = qs + maxRows * headDim;        // [chunk, headDim + 1]
  float *vs = ks + chunk * kStride;          // [chunk, valueDim]
  float *ps = vs + chunk * valueDim;         // [maxRows, chunk]
  float *rowMax = ps + maxRows * chunk;      // [maxRows]
  float *rowSum = rowMax + maxRows;          // [maxRows]
  float *rowScale = rowSum + maxRows;        // [maxRows]
  int64_t floats = rowScale + maxRows - smem;
  int64_t *bounds = reinterpret_cast<int64_t *>(
      smem + floats + (floats & 1));         // [tileTokens][2]: first, last
  const uint8_t **kRows = reinterpret_cast<const uint8_t **>(
      bounds + 2 * tileTokens);              // [chunk]
  const uint8_t **vRows = kRows + chunk;     // [chunk]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warps = kAttentionThreads / 32;
  const int64_t groups = (group + headGroup - 1) / headGroup;
  const int64_t g = blockIdx.y / groups;
  const int64_t h0 = g * group + (blockIdx.y % groups) * headGroup;
  const int hn = int(g * group + group - h0 < headGroup ? g * group + group - h0
                                                         : headGroup);
  const float fscale = float(scale);
  const float negInf = -__int_as_float(0x7F800000);
  const int64_t t0 = int64_t(blockIdx.x) * tileTokens;
  const int64_t t1 = t0 + tileTokens < tokens ? t0 + tileTokens : tokens;
  const int64_t maxSeqLen = k.maxSeqLen < v.maxSeqLen ? k.maxSeqLen
                                                      : v.maxSeqLen;
  const int64_t batch = k.batch < v.batch ? k.batch : v.batch;

  for (int64_t ta = t0; ta < t1;) {
    int64_t seq = sequences ? sequences[ta] : 0;
    int64_t tb = ta + 1;
    while (tb < t1 && (sequences ? sequences[tb] : 0) == seq)
      ++tb;
    const int rows = int(tb - ta) * hn;
    // Each token's visible keys; a token outside the batch or the cache
    // sees none (zeros, as for a query without keys).
    __syncthreads(); // the previous run's bounds and rows are consumed
    if (tid < tb - ta) {
      int64_t p = positions[ta + tid];
      bool valid = seq >= 0 && seq < batch && p >= 0 && p < maxSeqLen;
      int64_t first = valid ? windowStart(p, window) : 0;
      int64_t last = valid ? p : -1;
      if (kSplit && valid) {
        int64_t per = (last - first + splits) / splits; // ceil(len / splits)
        int64_t from = first + int64_t(blockIdx.z) * per;
        last = from + per - 1 < last ? from + per - 1 : last;
        first = from;
      }
      bounds[2 * tid] = first;
      bounds[2 * tid + 1] = last;
    }
    for (int64_t e = tid; e < int64_t(rows) * headDim; e += blockDim.x) {
      int64_t r = e / headDim, d = e % headDim;
      qs[e] = q[((ta + r / hn) * heads + h0 + r % hn) * headDim + d];
    }
    for (int r = tid; r < rows; r += blockDim.x) {
      rowMax[r] = negInf;
      rowSum[r] = 0.0f;
    }
    __syncthreads();
    int64_t lo = 0x7FFFFFFFFFFFFFFFll, hi = -1;
    for (int64_t u = 0; u < tb - ta; ++u)
      if (bounds[2 * u] <= bounds[2 * u + 1]) {
        lo = bounds[2 * u] < lo ? bounds[2 * u] : lo;
        hi = bounds[2 * u + 1] > hi ? bounds[2 * u + 1] : hi;
      }
    float acc[kAttentionAcc];
#pragma unroll
    for (int j = 0; j < kAttentionAcc; ++j)
      acc[j] = 0.0f;
    for (int64_t c0 = lo; c0 <= hi; c0 += chunk) {
      const int cn = int(hi + 1 - c0 < chunk ? hi + 1 - c0 : chunk);
      __syncthreads(); // the previous chunk's keys, values and probs are used
      if (tid < cn) {
        kRows[tid] = cacheRow(k, seq, c0 + tid);
        vRows[tid] = cacheRow(v, seq, c0 + tid);
      }
      __syncthreads();
      // Decode this KV head's columns of the chunk's rows (32-bit index
      // arithmetic: a chunk holds at most 32 x 256 values).
      const int kd = int(headDim), vd = int(valueDim);
      for (int e = tid; e < cn * kd; e += kAttentionThreads) {
        int c = e / kd, d = e % kd;
        ks[c * kStride + d] = cacheValue(k, kRows[c], g * headDim + d);
      }
      for (int e = tid; e < cn * vd; e += kAttentionThreads) {
        int c = e / vd, d = e % vd;
        vs[c * vd + d] = cacheValue(v, vRows[c], g * valueDim + d);
      }
      __syncthreads();
      // Scores: a warp takes four rows at a time, a lane one key (chunk <=
      // 32), so each key value read serves four rows.
      for (int r0 = warp * 4; r0 < rows; r0 += warps * 4) {
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (lane < cn) {
          const float *kr = ks + lane * kStride;
          const float *q0 = qs + r0 * headDim;
          const float *q1 = qs + (r0 + 1 < rows ? r0 + 1 : r0) * headDim;
          const float *q2 = qs + (r0 + 2 < rows ? r0 + 2 : r0) * headDim;
          const float *q3 = qs + (r0 + 3 < rows ? r0 + 3 : r0) * headDim;
          for (int64_t d = 0; d < headDim; ++d) {
            float kd = kr[d];
            s[0] = fmaf(q0[d], kd, s[0]);
            s[1] = fmaf(q1[d], kd, s[1]);
            s[2] = fmaf(q2[d], kd, s[2]);
            s[3] = fmaf(q3[d], kd, s[3]);
          }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          int r = r0 + i;
          if (r >= rows || lane >= chunk)
            continue;
          int u = r / hn;
          int64_t pos = c0 + lane;
          bool visible = lane < cn && pos >= bounds[2 * u] &&
                         pos <= bounds[2 * u + 1];
          ps[r * chunk + lane] = visible ? s[i] * fscale : negInf;
        }
      }
      __syncthreads();
      // The online softmax: a warp per row, a lane per key.
      for (int r = warp; r < rows; r += warps) {
        float x = lane < cn ? ps[r * chunk + lane] : negInf;
        float previous = rowMax[r];
        float m = fmaxf(previous, warpMax(x));
        float correction = m == previous ? 1.0f : expf(previous - m);
        float e = x == negInf ? 0.0f : expf(x - m);
        if (lane < cn)
          ps[r * chunk + lane] = e;
        float sum = warpSum(e);
        if (lane == 0) {
          rowMax[r] = m;
          rowSum[r] = rowSum[r] * correction + sum;
          rowScale[r] = correction;
        }
      }
      __syncthreads();
      // acc[r, d] = acc[r, d] * correction[r] + probs[r, :] x V[:, d]
#pragma unroll
      for (int j = 0; j < kAttentionAcc; ++j) {
        int64_t e = tid + int64_t(j) * kAttentionThreads;
        if (e >= int64_t(rows) * valueDim)
          break;
        int r = int(e / valueDim);
        int64_t d = e % valueDim;
        float a = acc[j] * rowScale[r];
        for (int c = 0; c < cn; ++c)
          a = fmaf(ps[r * chunk + c], vs[c * valueDim + d], a);
        acc[j] = a;
      }
    }
    __syncthreads();
    if (kSplit) {
      // One token: rows are its heads.
      auto at = [&](int r) {
        return ((ta * heads + h0 + r) * splits + blockIdx.z) *
               (valueDim + kSparseHeaderFloats);
      };
      if (tid < rows) {
        float *head = partial + at(tid);
        head[0] = rowMax[tid];
        head[1] = rowSum[tid];
        head[2] = float(bounds[0] <= bounds[1] ? bounds[1] - bounds[0] + 1 : 0);
      }
#pragma unroll
      for (int j = 0; j < kAttentionAcc; ++j) {
        int64_t e = tid + int64_t(j) * kAttentionThreads;
        if (e >= int64_t(rows) * valueDim)
          break;
        partial[at(int(e / valueDim)) + kSparseHeaderFloats + e % valueDim] =
            acc[j];
      }
    } else {
      // out = acc e^(m - M) / (l e^(m - M) + e^(sink - M)), M = max(m, sink):
      // the sink joins the maximum and the denominator only.
      for (int r = tid; r < rows; r += blockDim.x) {
        float m = rowMax[r], l = rowSum[r];
        float factor = 0.0f; // no visible key: zeros
        if (l > 0.0f) {
          float sink = sinks ? sinks[h0 + r % hn] : negInf;
          float top = fmaxf(m, sink);
          float keep = expf(m - top);
          factor = keep / (l * keep + (sinks ? expf(sink - top) : 0.0f));
        }
        rowScale[r] = factor;
      }
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kAttentionAcc; ++j) {
        int64_t e = tid + int64_t(j) * kAttentionThreads;
        if (e >= int64_t(rows) * valueDim)
          break;
        int r = int(e / valueDim);
        out[((ta + r / hn) * heads + h0 + r % hn) * valueDim + e % valueDim] =
            acc[j] * rowScale[r];
      }
    }
    ta = tb;
  }
}

} // namespace

/// Dense GQA attention over K and V caches, see cpu::attention. grid
/// (ceil(tokens / tileTokens), kvHeads x head groups), block 256; dynamic
/// shared memory as CudaKernels::attention computes it. Rows x valueDim <=
/// 256 x 16 (rows: tileTokens x headGroup). A sequence outside [0, batch)
/// or a position outside [0, maxSeqLen) gives zeros.
extern "C" __global__ void __launch_bounds__(kAttentionThreads)
daybreak_attention(const float *q, Cache k, Cache v, const int32_t *positions,
                   const int32_t *sequences, const float *sinks,
                   int64_t tokens, int64_t heads, int64_t kvHeads,
                   double scale, int64_t window, float *out,
                   int32_t tileTokens, int32_t headGroup, int32_t chunk) {
  denseAttention<false>(q, k, v, positions, sequences, sinks, tokens, heads,
                        kvHeads, scale, window, out, tileTokens, headGroup,
                        chunk, 1, nullptr);
}

/// daybreak_attention split over each token's keys as well (flash
/// decoding): grid (tokens, kvHeads x head groups, splits), one token a
/// block; block z takes the z-th of `splits` equal parts of the token's
/// keys and leaves per head its running max, denominator, key count and
/// unnormalised accumulators in `partial` [tokens, heads, splits,
/// valueDim + 4] for daybreak_sparse_attention_combine, which adds the
/// sinks.
extern "C" __global__ void __launch_bounds__(kAttentionThreads)
daybreak_attention_split(const float *q, Cache k, Cache v,
                         const int32_t *positions, const int32_t *sequences,
                         int64_t tokens, int64_t heads, int64_t kvHeads,
                         double scale, int64_t window, float *partial,
                         int32_t headGroup, int32_t chunk, int32_t splits) {
  denseAttention<true>(q, k, v, positions, sequences, nullptr, tokens, heads,
                       kvHeads, scale, window, nullptr, 1, headGroup, chunk,
                       splits, partial);
}

//===----------------------------------------------------------------------===//
// Prefill attention on the tensor cores: daybreak_attention_tc64 (head and
// value dims up to 64) and daybreak_attention_tc128 (up to 128), for bf16
// and fp8 caches with dims that are multiples of 16. The semantics, masks,
// sinks and zeros for tokens outside the batch or the cache are
// denseAttention's; only where the products are formed changes.
//
// Precision. Every cache value is exactly a bf16. A bf16 cache stores it so;
// an fp8 cache stores e4m3 codes (4 significant bits) times a per-block
// scale that the format defines as a power of two (runtime::CacheFormat,
// and CacheView::write and daybreak_cache_write only write such), so code x
// scale, computed in fp32 as cacheValue does, is the CPU's value and has at
// most 4 significant bits: its bf16 truncation is exact. The scale is so
// folded into the decoded K and V values, exactly. (A scale that were not
// a power of two would need the per-block scale on the partial sums for K,
// and could not be folded for V, whose scale varies along the reduction;
// the format rules that out.) The fp32 operands, Q and the probabilities
// P, are split exactly into three bf16 parts by truncation (x = h1 + h2 +
// h3: 8 + 8 + 8 significant bits), so each bf16 x bf16 product the tensor
// core forms is exact and each fp32 product is the sum of three: scores
// and P V would be the fp32 products summed in another order, if the
// tensor core summed them as fp32 does. It does not: mma.sync aligns the
// addends of an mma (its products and the accumulator) and keeps fewer
// bits of them than fp32 rounding would. Each k-step's three mma therefore
// run on a fresh accumulator, smallest part first, and are added to the
// score or to the key tile's P V in fp32 (FADD): on the H200 that took
// rows of one key with sinks (one score of four k-steps, P = 1) from 3.2e-5
// to 1.7e-5 of the CPU and the worst row of CudaKernelsTest.DenseAttention
// from 6.6e-5 to 3.7e-5 (2026-12-02; the CUDA cores: within 2e-5), still
// not fp32's. So this path is not the exact mode's: CudaKernels::attention
// takes it only when asked (AttentionPath::TensorCores, or
// PreferTensorCores from `daybreak-run --attention=tensor-cores`), and its
// test bound is derived from the caches' own rounding. Each key tile's P V
// (64 keys; 32 for tc128) goes to a fresh accumulator that is folded into
// the fp32 output with the online softmax's correction (one FFMA, rounded
// to nearest). The softmax itself
// (scale, masks, running max and sum, expf) is fp32 on the CUDA cores as
// in denseAttention. f32 caches stay on denseAttention: their values would
// need three parts too (9 mma per product).
//
// Data flow. A block of 4 warps takes 64 query rows: a tile of 64 / hn
// tokens times hn = min(group, 64) query heads of one KV head, row r being
// token r / hn and head r % hn, so each K and V tile it loads serves every
// head of the group. A warp owns 16 rows (one mma M tile) and keeps their
// Q parts (A fragments), output accumulators, running max and sum in
// registers. Runs of tokens of one sequence in the tile are taken in turn
// (rows outside the run see no key, so their state does not change); for
// each run the block walks the keys [lo, hi] its tokens see in tiles of
// kKeys: each thread loads its 8-column chunks of the next tile's K and V
// rows (16-byte loads for bf16, 4-byte pieces for fp8 codes, scales and
// tails) into registers while the warps multiply the current tile out of
// shared memory (double-buffered; one barrier a tile), then widens them to
// bf16 into the other buffer. Per tile a warp forms S = Q K^T (B fragments
// by ldmatrix), masks and scales it, updates the softmax, turns its
// accumulators into P's A fragments (the m16n8 C layout of two key tiles is
// the m16k16 A layout) and adds P V (ldmatrix.trans) to the output. A warp
// whose rows see none of a tile's keys skips it.
//
// Roofline: gpt-oss-120b prefill, a full-attention layer (64 query heads,
// 8 KV heads, dims 64), 8192 tokens causal: 2 x 2 x 64 x 64 x 8192^2 / 2 =
// 0.55 TFLOP. Three bf16 mma per product: at mma.sync's ~60-70% of the
// H200's ~660 TFLOP/s (measured wgmma rate) that is ~130-150 TFLOP/s of
// fp32-exact work, ~4 ms a layer (the softmax's ALU work, about as many
// issue slots as the mma, overlaps it across warps). The CUDA-core kernel
// above peaks at the 67 TFLOP/s of fp32 FMA and reaches a fraction of it.
//===----------------------------------------------------------------------===//

namespace {

/// Query rows of a tensor-core attention block: 4 warps of 16.
constexpr int kTcAttentionThreads = 128, kTcAttentionRows = 64;

/// Per instance (kDim: the largest head or value dim it takes).
template <int kDim> struct TcAttentionShape {
  static constexpr int kKeys = 4096 / kDim;     // keys a tile: 64 or 32
  static constexpr int kSteps = kDim / 16;      // k-steps of Q K^T at most
  static constexpr int kKeySteps = kKeys / 16;  // k-steps of P V
  static constexpr int kStride = kDim + 8;      // bf16 a shared row (+16 B)
  static constexpr int kLanesPerKey = kDim / 8; // threads a row's chunks
  static constexpr int kKeysPerPass = kTcAttentionThreads / kLanesPerKey;
  static constexpr int kChunks = kKeys / kKeysPerPass; // chunks a thread
  static constexpr int kWarpKeys = 32 / kLanesPerKey;  // keys a warp a pass
  // tc128 has no registers left for its Q fragments (96) and the next
  // tile's loads (32): it keeps Q's parts in (dynamic) shared memory, read
  // by ldmatrix, and stores each tile as soon as it is loaded.
  static constexpr bool kQShared = kDim == 128;
  static constexpr bool kOverlap = kDim == 64;
};

/// Q's parts for the instances that keep them in shared memory:
/// [3][kTcAttentionRows][kStride] bf16.
extern __shared__ __align__(16) uint16_t tcAttentionQ[];

/// The max and the sum of v over the four lanes of an mma accumulator row
/// (lanes 4g .. 4g + 3), on every one of them.
__device__ __forceinline__ float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/// Where a thread's 8-column chunk of one cache's KV head lies in a row.
struct TcChunk {
  int32_t kind;   // kTcNone, kTcBf16 (16 bytes), kTcCodes, kTcTail
  int32_t offset; // bytes into the row
  int32_t scale;  // bytes into the row of the codes' fp32 scale
};
enum : int32_t { kTcNone = 0, kTcBf16 = 1, kTcCodes = 2, kTcTail = 3 };

/// The chunk of columns [col, col + 8) of a row (col < dim: else none).
/// fp8: CudaKernels::attention checks that no chunk straddles a scale
/// block or the tail, and that rows keep 4-byte alignment.
__device__ __forceinline__ TcChunk tcChunk(const Cache &c, int64_t col,
                                           bool inside) {
  if (!inside)
    return {kTcNone, 0, 0};
  if (c.format == kBF16)
    return {kTcBf16, int32_t(2 * col), 0};
  int64_t quantized = c.width - c.tailDim;
  if (col < quantized)
    return {kTcCodes, int32_t(col),
            int32_t(quantized + 4 * (col / c.scaleBlock))};
  int64_t scales = quantized > 0 ? quantized / c.scaleBlock : 0;
  return {kTcTail, int32_t(quantized + 4 * scales + 2 * (col - quantized)), 0};
}

/// The chunk's stored bytes (zeros without a row): bf16 values, or two
/// words of e4m3 codes and their scale's bits.
__device__ __forceinline__ uint4 tcLoad(const uint8_t *row, TcChunk c) {
  if (!row || c.kind == kTcNone)
    return make_uint4(0, 0, 0, 0);
  if (c.kind == kTcBf16)
    return __ldg(reinterpret_cast<const uint4 *>(row + c.offset));
  const uint32_t *p = reinterpret_cast<const uint32_t *>(row + c.offset);
  if (c.kind == kTcTail)
    return make_uint4(__ldg(p), __ldg(p + 1), __ldg(p + 2), __ldg(p + 3));
  return make_uint4(__ldg(p), __ldg(p + 1),
                    __ldg(reinterpret_cast<const uint32_t *>(row + c.scale)),
                    0);
}

/// e4m3 codes times their power-of-two scale as a bf16 pair (exact, see
/// above): the pair in `h2` (an f16 pair from e4m3x4ToHalf2).
__device__ __forceinline__ uint32_t tcScaledPair(uint32_t h2, float scale) {
  float lo, hi;
  unpackHalf2(h2, lo, hi);
  return __byte_perm(__float_as_uint(lo * scale), __float_as_uint(hi * scale),
                     0x7632);
}

/// Writes a loaded chunk to shared memory as 8 bf16.
__device__ __forceinline__ void tcStore(uint16_t *dst, uint4 raw, TcChunk c) {
  if (c.kind == kTcNone)
    return;
  if (c.kind == kTcCodes) {
    float scale = __uint_as_float(raw.z);
    uint32_t h[4];
    e4m3x4ToHalf2(raw.x, h[0], h[1]);
    e4m3x4ToHalf2(raw.y, h[2], h[3]);
    raw = make_uint4(tcScaledPair(h[0], scale), tcScaledPair(h[1], scale),
                     tcScaledPair(h[2], scale), tcScaledPair(h[3], scale));
  }
  *reinterpret_cast<uint4 *>(dst) = raw;
}

__device__ __forceinline__ uint32_t sharedAddress(const void *p) {
  uint64_t shared;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(shared) : "l"(p));
  return uint32_t(shared);
}

/// Four 8x8 bf16 matrices from shared memory (lane l gives the address of
/// row l % 8 of matrix l / 8), plain or transposed.
template <bool kTrans>
__device__ __forceinline__ void ldmatrixX4(uint32_t (&r)[4], const void *p) {
  if (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, "
                 "%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sharedAddress(p))
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, "
                 "[%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sharedAddress(p))
                 : "memory");
}

/// The tensor-core attention (see above). Grid (ceil(tokens / (64 / hn)),
/// kvHeads x ceil(group / hn)), block 128, hn = min(group, 64).
template <int kDim>
__device__ __forceinline__ void
denseAttentionTc(const float *q, const Cache &k, const Cache &v,
                 const int32_t *positions, const int32_t *sequences,
                 const float *sinks, int64_t tokens, int64_t heads,
                 int64_t kvHeads, double scale, int64_t window, float *out) {
  using S = TcAttentionShape<kDim>;
  __shared__ __align__(16) uint16_t kTile[2][S::kKeys * S::kStride];
  __shared__ __align__(16) uint16_t vTile[2][S::kKeys * S::kStride];
  __shared__ int32_t bounds[kTcAttentionRows][2]; // a run's tokens: first, last

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3; // mma fragment row and column pair
  const int64_t group = heads / kvHeads, headDim = k.width / kvHeads,
                valueDim = v.width / kvHeads;
  const int hn = int(group < kTcAttentionRows ? group : kTcAttentionRows);
  const int tileTokens = kTcAttentionRows / hn;
  const int64_t groups = (group + hn - 1) / hn;
  const int64_t kvHead = blockIdx.y / groups;
  const int64_t h0 = kvHead * group + (blockIdx.y % groups) * hn;
  const int64_t t0 = int64_t(blockIdx.x) * tileTokens;
  const int64_t t1 = t0 + tileTokens < tokens ? t0 + tileTokens : tokens;
  const int64_t maxSeqLen =
      k.maxSeqLen < v.maxSeqLen ? k.maxSeqLen : v.maxSeqLen;
  const int64_t batch = k.batch < v.batch ? k.batch : v.batch;
  const float fscale = float(scale);
  const float negInf = -__int_as_float(0x7F800000);
  const int dSteps = int(headDim / 16), vPairs = int(valueDim / 16);

  // This lane's rows g and g + 8 of the warp's 16: token t0 + rowU, head
  // h0 + rowH, and whether the block has that row.
  int rowU[2], rowH[2];
  bool rowValid[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    int r = warp * 16 + g + 8 * i;
    rowU[i] = r / hn;
    rowH[i] = r % hn;
    rowValid[i] = rowU[i] < tileTokens && t0 + rowU[i] < t1 &&
                  h0 + rowH[i] < kvHead * group + group;
  }
  auto rowIndex = [&](int i) { // (token, head) of row i in q and out
    return (t0 + rowU[i]) * heads + h0 + rowH[i];
  };

  // Q's A fragments, each fp32 pair split into three bf16 parts:
  // qa[step][part] = {(g, 2t..), (g + 8, 2t..), (g, 2t + 8..), (g + 8, ..)},
  // or the same parts at rows g, g + 8 of tcAttentionQ (read back by this
  // warp only, after the run loop's barriers).
  uint32_t qa[S::kQShared ? 1 : S::kSteps][3][4];
#pragma unroll
  for (int ks = 0; ks < S::kSteps; ++ks) {
    if (ks >= dSteps)
      break;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int i = j & 1, col = ks * 16 + (j >> 1) * 8 + 2 * t;
      float2 x = make_float2(0.0f, 0.0f);
      if (rowValid[i])
        x = *reinterpret_cast<const float2 *>(q + rowIndex(i) * headDim + col);
      uint32_t p[3];
      splitX<kWeightBF16>(x.x, x.y, p);
#pragma unroll
      for (int part = 0; part < 3; ++part) {
        int row = part * kTcAttentionRows + warp * 16 + g + 8 * i;
        if (S::kQShared)
          *reinterpret_cast<uint32_t *>(tcAttentionQ + row * S::kStride + col) =
              p[part];
        else
          qa[S::kQShared ? 0 : ks][part][j] = p[part];
      }
    }
  }
  const uint16_t *qBase =
      tcAttentionQ +
      (warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * S::kStride +
      (lane >> 4) * 8;

  // Output accumulators (C fragments of valueDim / 8 column tiles), and
  // each row's running max and sum; they span every run of the tile.
  float o[kDim / 8][4];
#pragma unroll
  for (int j = 0; j < kDim / 8; ++j)
    o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float rowMax[2] = {negInf, negInf}, rowSum[2] = {0.0f, 0.0f};

  // This thread's chunks: columns [col, col + 8) of its KV head in rows
  // key0 + kKeysPerPass x c of a tile. A lane of each half-warp finds one
  // K (lanes 0-15) or V (16-31) row a tile; the others take it by shuffle.
  const int col = (tid % S::kLanesPerKey) * 8;
  const int key0 = tid / S::kLanesPerKey;
  const TcChunk kChunk = tcChunk(k, kvHead * headDim + col, col < headDim);
  const TcChunk vChunk = tcChunk(v, kvHead * valueDim + col, col < valueDim);
  const int slot = lane & 15; // c x kWarpKeys + the key's lane group
  const int slotKey =
      warp * S::kWarpKeys + (slot % S::kWarpKeys) +
      (slot / S::kWarpKeys) * S::kKeysPerPass; // key of this lane's slot
  uint4 raw[2][S::kChunks];

  for (int64_t ta = t0; ta < t1;) {
    const int64_t seq = sequences ? sequences[ta] : 0;
    int64_t tb = ta + 1;
    while (tb < t1 && (sequences ? sequences[tb] : 0) == seq)
      ++tb;
    // The run's tokens' visible keys (none outside the batch or cache).
    __syncthreads(); // the previous run's bounds and tiles are consumed
    if (tid < tb - ta) {
      int64_t p = positions[ta + tid];
      bool valid = seq >= 0 && seq < batch && p >= 0 && p < maxSeqLen;
      bounds[tid][0] = valid ? int32_t(windowStart(p, window)) : 0;
      bounds[tid][1] = valid ? int32_t(p) : -1;
    }
    __syncthreads();
    int32_t lo = 0x7FFFFFFF, hi = -1;
    for (int u = 0; u < tb - ta; ++u)
      if (bounds[u][0] <= bounds[u][1]) {
        lo = bounds[u][0] < lo ? bounds[u][0] : lo;
        hi = bounds[u][1] > hi ? bounds[u][1] : hi;
      }
    // This lane's rows' keys (empty outside the run), and the warp's span.
    int32_t first[2], last[2];
    int32_t warpLo = 0x7FFFFFFF, warpHi = -1;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      int u = int(t0 - ta) + rowU[i]; // the row's token in the run
      bool in = rowValid[i] && u >= 0 && u < tb - ta;
      first[i] = in ? bounds[u][0] : 0;
      last[i] = in ? bounds[u][1] : -1;
      if (first[i] <= last[i]) {
        warpLo = first[i] < warpLo ? first[i] : warpLo;
        warpHi = last[i] > warpHi ? last[i] : warpHi;
      }
    }
    for (int d = 16; d > 0; d >>= 1) {
      int32_t l = __shfl_xor_sync(0xffffffffu, warpLo, d);
      int32_t h = __shfl_xor_sync(0xffffffffu, warpHi, d);
      warpLo = l < warpLo ? l : warpLo;
      warpHi = h > warpHi ? h : warpHi;
    }

    // Loads tile c0's chunks of K and V rows into `raw` (zeros past hi).
    auto fetch = [&](int32_t c0) {
      int32_t pos = c0 + slotKey;
      const uint8_t *mine = nullptr;
      if (slot < S::kChunks * S::kWarpKeys && pos <= hi)
        mine = lane < 16 ? cacheRow(k, seq, pos) : cacheRow(v, seq, pos);
#pragma unroll
      for (int c = 0; c < S::kChunks; ++c) {
        int from = c * S::kWarpKeys + lane / S::kLanesPerKey;
        const uint8_t *kRow = reinterpret_cast<const uint8_t *>(
            __shfl_sync(0xffffffffu, reinterpret_cast<uint64_t>(mine), from));
        const uint8_t *vRow = reinterpret_cast<const uint8_t *>(__shfl_sync(
            0xffffffffu, reinterpret_cast<uint64_t>(mine), 16 + from));
        raw[0][c] = tcLoad(kRow, kChunk);
        raw[1][c] = tcLoad(vRow, vChunk);
      }
    };
    auto store = [&](int buffer) {
#pragma unroll
      for (int c = 0; c < S::kChunks; ++c) {
        int offset = (key0 + c * S::kKeysPerPass) * S::kStride + col;
        tcStore(&kTile[buffer][offset], raw[0][c], kChunk);
        tcStore(&vTile[buffer][offset], raw[1][c], vChunk);
      }
    };

    int buffer = 0;
    if (lo <= hi) {
      fetch(lo);
      store(0);
    }
    __syncthreads();
    for (int32_t c0 = lo; c0 <= hi; c0 += S::kKeys) {
      const bool more = c0 + S::kKeys <= hi;
      if (more) {
        fetch(c0 + S::kKeys); // in flight while this tile is multiplied
        if (!S::kOverlap)
          store(buffer ^ 1);
      }
      if (c0 <= warpHi && c0 + S::kKeys > warpLo) {
        // S = Q K^T: B fragments of two 8-key tiles a ldmatrix.
        float s[S::kKeys / 8][4];
#pragma unroll
        for (int j = 0; j < S::kKeys / 8; ++j)
          s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
        const uint16_t *kBase = kTile[buffer] +
                                ((lane & 7) + ((lane >> 4) << 3)) * S::kStride +
                                ((lane >> 3) & 1) * 8;
#pragma unroll
        for (int ks = 0; ks < S::kSteps; ++ks) {
          if (ks >= dSteps)
            break;
          uint32_t a[3][4];
#pragma unroll
          for (int part = 0; part < 3; ++part)
            if (S::kQShared)
              ldmatrixX4<false>(a[part],
                                qBase + part * kTcAttentionRows * S::kStride +
                                    ks * 16);
            else
#pragma unroll
              for (int j = 0; j < 4; ++j)
                a[part][j] = qa[S::kQShared ? 0 : ks][part][j];
#pragma unroll
          for (int n = 0; n < S::kKeys / 16; ++n) {
            uint32_t b[4];
            ldmatrixX4<false>(b, kBase + n * 16 * S::kStride + ks * 16);
            // The k-step's three parts on a fresh accumulator, smallest
            // first, added to the score in fp32 (see "Precision" above).
            float step[2][4] = {};
#pragma unroll
            for (int part = 2; part >= 0; --part) {
              mma16816<kWeightBF16>(step[0], a[part], make_uint2(b[0], b[1]));
              mma16816<kWeightBF16>(step[1], a[part], make_uint2(b[2], b[3]));
            }
#pragma unroll
            for (int x = 0; x < 2; ++x)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                s[2 * n + x][e] += step[x][e];
          }
        }
        // Scale and mask (C element e: row g + 8 (e >> 1), key 2t + (e & 1)),
        // then the online softmax over the quad of lanes holding a row.
        float tileMax[2] = {negInf, negInf};
#pragma unroll
        for (int j = 0; j < S::kKeys / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            int32_t key = c0 + 8 * j + 2 * t + (e & 1);
            int i = e >> 1;
            s[j][e] =
                key >= first[i] && key <= last[i] ? s[j][e] * fscale : negInf;
            tileMax[i] = fmaxf(tileMax[i], s[j][e]);
          }
        float correction[2], m[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          tileMax[i] = quadMax(tileMax[i]);
          m[i] = fmaxf(rowMax[i], tileMax[i]);
          correction[i] = m[i] == rowMax[i] ? 1.0f : expf(rowMax[i] - m[i]);
        }
#pragma unroll
        for (int j = 0; j < S::kKeys / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            int i = e >> 1;
            s[j][e] = s[j][e] == negInf ? 0.0f : expf(s[j][e] - m[i]);
            sum[i] += s[j][e];
          }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          sum[i] = quadSum(sum[i]);
          rowMax[i] = m[i];
          rowSum[i] = rowSum[i] * correction[i] + sum[i];
        }
        // P's A fragments for each 16-key step, split into three parts.
        uint32_t pa[S::kKeySteps][3][4];
#pragma unroll
        for (int kk = 0; kk < S::kKeySteps; ++kk)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float *c = s[2 * kk + (j >> 1)] + 2 * (j & 1);
            uint32_t p[3];
            splitX<kWeightBF16>(c[0], c[1], p);
#pragma unroll
            for (int part = 0; part < 3; ++part)
              pa[kk][part][j] = p[part];
          }
        // P V into a fresh accumulator per pair of 8-column tiles, folded
        // into o with the correction.
        const uint16_t *vBase =
            vTile[buffer] +
            ((lane & 7) + (((lane >> 3) & 1) << 3)) * S::kStride +
            (lane >> 4) * 8;
#pragma unroll
        for (int n = 0; n < kDim / 16; ++n) {
          if (n >= vPairs)
            break;
          float part[2][4] = {};
#pragma unroll
          for (int kk = 0; kk < S::kKeySteps; ++kk) {
            uint32_t b[4];
            ldmatrixX4<true>(b, vBase + kk * 16 * S::kStride + n * 16);
            float step[2][4] = {};
#pragma unroll
            for (int p = 2; p >= 0; --p) {
              mma16816<kWeightBF16>(step[0], pa[kk][p], make_uint2(b[0], b[1]));
              mma16816<kWeightBF16>(step[1], pa[kk][p], make_uint2(b[2], b[3]));
            }
#pragma unroll
            for (int x = 0; x < 2; ++x)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                part[x][e] += step[x][e];
          }
#pragma unroll
          for (int x = 0; x < 2; ++x)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              o[2 * n + x][e] =
                  fmaf(o[2 * n + x][e], correction[e >> 1], part[x][e]);
        }
      }
      if (more && S::kOverlap)
        store(buffer ^ 1);
      __syncthreads();
      buffer ^= 1;
    }
    ta = tb;
  }

  // out = o e^(m - M) / (l e^(m - M) + e^(sink - M)), M = max(m, sink), as
  // denseAttention; a row without a visible key gets zeros.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (!rowValid[i])
      continue;
    float factor = 0.0f;
    if (rowSum[i] > 0.0f) {
      float sink = sinks ? sinks[h0 + rowH[i]] : negInf;
      float top = fmaxf(rowMax[i], sink);
      float keep = expf(rowMax[i] - top);
      factor = keep / (rowSum[i] * keep + (sinks ? expf(sink - top) : 0.0f));
    }
    float *dst = out + rowIndex(i) * valueDim + 2 * t;
#pragma unroll
    for (int j = 0; j < kDim / 8; ++j) {
      if (j >= 2 * vPairs)
        break;
      float2 value = rowSum[i] > 0.0f ? make_float2(o[j][2 * i] * factor,
                                                    o[j][2 * i + 1] * factor)
                                      : make_float2(0.0f, 0.0f);
      *reinterpret_cast<float2 *>(dst + 8 * j) = value;
    }
  }
}

} // namespace

/// denseAttentionTc for head and value dims up to 64 (multiples of 16).
/// Grid (ceil(tokens / (64 / hn)), kvHeads x ceil(group / hn)) with hn =
/// min(heads / kvHeads, 64), block 128, static shared memory only. The
/// bounds' `1` lets ptxas take every register it needs (250 here; without
/// it, it spilled tc128 to fit three blocks an SM).
extern "C" __global__ void __launch_bounds__(kTcAttentionThreads, 1)
    daybreak_attention_tc64(const float *q, Cache k, Cache v,
                            const int32_t *positions, const int32_t *sequences,
                            const float *sinks, int64_t tokens, int64_t heads,
                            int64_t kvHeads, double scale, int64_t window,
                            float *out) {
  denseAttentionTc<64>(q, k, v, positions, sequences, sinks, tokens, heads,
                       kvHeads, scale, window, out);
}

/// daybreak_attention_tc64 for dims up to 128 (32-key tiles), with 3 x 64 x
/// 136 x 2 bytes of dynamic shared memory for Q's parts.
extern "C" __global__ void __launch_bounds__(kTcAttentionThreads, 1)
    daybreak_attention_tc128(const float *q, Cache k, Cache v,
                             const int32_t *positions, const int32_t *sequences,
                             const float *sinks, int64_t tokens, int64_t heads,
                             int64_t kvHeads, double scale, int64_t window,
                             float *out) {
  denseAttentionTc<128>(q, k, v, positions, sequences, sinks, tokens, heads,
                        kvHeads, scale, window, out);
}

//===----------------------------------------------------------------------===//
// Decode attention on the CUDA cores: daybreak_attention_decode.
//
// A decode step's tokens each belong to their own sequence, so nothing is
// shared between tokens and denseAttention's tiles of tokens, chunks of 32
// keys and five barriers a chunk leave the GPU waiting on memory (at 64
// sequences of 8K keys, 18 ms a layer for 0.5 GB of fp8 cache). Here a
// block takes one token, the query heads of one KV head (up to
// kDecodeHeads) and one split of its keys; each of its warps walks its own
// 32-key tiles with no barrier:
// - scores: a lane a key, its K row read in 16-value vectors and decoded in
//   registers, every head's dot product against Q broadcast from shared
//   memory, summed over the head dim in order;
// - the online softmax per head over the tile (warp max and sum);
// - P x V: lanes split the value dims four at a time, 128 / valueDim keys a
//   pass, each lane's four values one vector load.
// The warps' partial softmax states merge in shared memory into the same
// per-split partials as daybreak_attention_split ([tokens, heads, splits,
// valueDim + 4]: max, denominator, key count, padding, unnormalised sums),
// which daybreak_sparse_attention_combine merges with the sinks. Caches: K and
// V in one format, rows of a multiple of 16 bytes, fp8 without a bf16 tail and
// with scale blocks of a multiple of 16 columns; head dims a multiple of 16 up
// to kDecodeMaxHeadDim, value dims 32, 64 or 128
// (CudaKernels::decodeAttentionApplies).
//
// Roofline (gpt-oss: 8 heads a KV head of 64, fp8 cache): a key costs 1024
// FMAs (8 x 64 for scores, as many for P x V) for 132 bytes of K and V, so
// fp32 CUDA cores at 33.5 TFMA/s and 4.3 TB/s of HBM run out together, at
// about 33 G keys x KV heads a second. Measured on the H200
// (DaybreakKernelBench attention): 64 sequences at 32K keys in 2.95 ms a
// layer, 750 GB/s, 17 % of the copy bandwidth (the earlier kernel: 75 ms).
// Occupancy limits it: at 128 registers four blocks fit an SM (three, at
// 168: 4.1 ms); loading the next K vector ahead of its use did not help.
// The tensor cores would lift the FMA ceiling but do not sum exactly.
//===----------------------------------------------------------------------===//

namespace {

constexpr int kDecodeWarps = 4, kDecodeHeads = 8, kDecodeMaxHeadDim = 256,
              kDecodeMaxValueDim = 128;

/// kN consecutive values of a cache row from column `col` (aligned to kN
/// values; for fp8, within one scale block), decoded as cacheValue does
/// (e4m3x2ToFloat: CudaKernels.cu's exact decode).
template <int kFormat, int kN>
__device__ __forceinline__ void loadCacheValues(const Cache &c,
                                                const uint8_t *row, int col,
                                                float *out) {
  constexpr int kSize = kFormat == kF32 ? 4 : kFormat == kBF16 ? 2 : 1;
  constexpr int kBytes = kN * kSize;
  const uint8_t *p = row + int64_t(col) * kSize;
  uint32_t w[(kBytes + 3) / 4];
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      uint4 v = __ldg(reinterpret_cast<const uint4 *>(p) + i);
      w[4 * i] = v.x;
      w[4 * i + 1] = v.y;
      w[4 * i + 2] = v.z;
      w[4 * i + 3] = v.w;
    }
  } else if constexpr (kBytes == 8) {
    uint2 v = __ldg(reinterpret_cast<const uint2 *>(p));
    w[0] = v.x;
    w[1] = v.y;
  } else if constexpr (kBytes == 4) {
    w[0] = __ldg(reinterpret_cast<const unsigned int *>(p));
  } else if constexpr (kBytes == 2) {
    w[0] = __ldg(reinterpret_cast<const unsigned short *>(p));
  } else {
    w[0] = __ldg(p);
  }
  if constexpr (kFormat == kF32) {
#pragma unroll
    for (int i = 0; i < kN; ++i)
      out[i] = __uint_as_float(w[i]);
  } else if constexpr (kFormat == kBF16) {
#pragma unroll
    for (int i = 0; i < kN; ++i)
      out[i] = __uint_as_float((w[i / 2] >> (16 * (i % 2))) << 16);
  } else {
    float scale = __ldg(reinterpret_cast<const float *>(row + c.width) +
                        col / int(c.scaleBlock));
    if constexpr (kN == 1) {
      out[0] = e4m3Fast(w[0]) * scale;
    } else {
#pragma unroll
      for (int i = 0; i < kN / 2; ++i) {
        e4m3x2ToFloat(uint16_t(w[i / 2] >> (16 * (i % 2))), out[2 * i],
                      out[2 * i + 1]);
        out[2 * i] *= scale;
        out[2 * i + 1] *= scale;
      }
    }
  }
}

/// daybreak_attention_decode's body for caches of format kFormat and up to
/// kHeads query heads a block.
template <int kFormat, int kHeads>
__device__ __forceinline__ void
decodeAttention(const float *q, const Cache &k, const Cache &v,
                const int32_t *positions, const int32_t *sequences,
                int64_t heads, int64_t kvHeads, double scale, int64_t window,
                float *partial, int32_t headGroup, int32_t splits, float *qs,
                float (*ps)[kDecodeHeads][32], const uint8_t *(*vRows)[32],
                float (*warpMaxes)[kDecodeHeads],
                float (*warpSums)[kDecodeHeads], float *warpAcc) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int headDim = int(k.width / kvHeads), valueDim = int(v.width / kvHeads);
  const int64_t group = heads / kvHeads;
  const int64_t groups = (group + headGroup - 1) / headGroup;
  const int64_t g = blockIdx.y / groups;
  const int64_t h0 = g * group + (blockIdx.y % groups) * headGroup;
  const int hn = int(g * group + group - h0 < headGroup ? g * group + group - h0
                                                         : headGroup);
  const int64_t t = blockIdx.x;
  const float negInf = -__int_as_float(0x7F800000);
  const float fscale = float(scale);

  // This split's keys [first, last] (denseAttention's bounds and split).
  const int64_t seq = sequences ? sequences[t] : 0, p = positions[t];
  const int64_t batch = k.batch < v.batch ? k.batch : v.batch;
  const int64_t maxSeqLen = k.maxSeqLen < v.maxSeqLen ? k.maxSeqLen
                                                      : v.maxSeqLen;
  int64_t first = 0, last = -1;
  if (seq >= 0 && seq < batch && p >= 0 && p < maxSeqLen) {
    first = windowStart(p, window);
    int64_t per = (p - first + splits) / splits; // ceil(len / splits)
    int64_t from = first + int64_t(blockIdx.z) * per;
    last = from + per - 1 < p ? from + per - 1 : p;
    first = from;
  }

  // Q rows of the block's heads; rows past hn stay zero.
  for (int e = tid; e < kHeads * headDim; e += blockDim.x)
    qs[e] = e < hn * headDim ? q[(t * heads + h0) * headDim + e] : 0.0f;
  __syncthreads();

  float m[kHeads], l[kHeads], acc[kHeads][4];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    m[h] = negInf;
    l[h] = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      acc[h][j] = 0.0f;
  }
  const int lanesPerKey = valueDim / 4, keysPerPass = 32 / lanesPerKey;
  const int passKey = lane / lanesPerKey, dim0 = 4 * (lane % lanesPerKey);
  for (int64_t base = first + 32 * warp; base <= last;
       base += 32 * kDecodeWarps) {
    const int n = int(last + 1 - base < 32 ? last + 1 - base : 32);
    // Scores: lane `lane` takes key base + lane.
    float s[kHeads];
#pragma unroll
    for (int h = 0; h < kHeads; ++h)
      s[h] = 0.0f;
    if (lane < n) {
      const uint8_t *kRow = cacheRow(k, seq, base + lane);
      vRows[warp][lane] = cacheRow(v, seq, base + lane);
      for (int d0 = 0; d0 < headDim; d0 += 16) {
        float kv[16];
        loadCacheValues<kFormat, 16>(k, kRow, int(g) * headDim + d0, kv);
#pragma unroll
        for (int h = 0; h < kHeads; ++h) {
          const float4 *qr =
              reinterpret_cast<const float4 *>(qs + h * headDim + d0);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            float4 qv = qr[i];
            s[h] = fmaf(qv.x, kv[4 * i], s[h]);
            s[h] = fmaf(qv.y, kv[4 * i + 1], s[h]);
            s[h] = fmaf(qv.z, kv[4 * i + 2], s[h]);
            s[h] = fmaf(qv.w, kv[4 * i + 3], s[h]);
          }
        }
      }
    }
    // The online softmax over the tile, per head.
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      float x = lane < n ? s[h] * fscale : negInf;
      float previous = m[h];
      float top = fmaxf(previous, warpMax(x));
      float correction = top == previous ? 1.0f : expf(previous - top);
      float e = lane < n ? expf(x - top) : 0.0f;
      l[h] = l[h] * correction + warpSum(e);
      m[h] = top;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        acc[h][j] *= correction;
      ps[warp][h][lane] = e;
    }
    __syncwarp();
    // P x V: lane `lane` takes dims dim0 .. dim0 + 3 of keys passKey,
    // passKey + keysPerPass, ...
    for (int c = passKey; c < n; c += keysPerPass) {
      float vv[4];
      loadCacheValues<kFormat, 4>(v, vRows[warp][c], int(g) * valueDim + dim0,
                                  vv);
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
        float pc = ps[warp][h][c];
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[h][j] = fmaf(pc, vv[j], acc[h][j]);
      }
    }
    __syncwarp(); // ps and vRows are rewritten by the next tile
  }

  // Lanes of one dim range hold sums over different keys: add them up.
  for (int offset = lanesPerKey; offset < 32; offset *= 2)
#pragma unroll
    for (int h = 0; h < kHeads; ++h)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        acc[h][j] += __shfl_xor_sync(0xffffffffu, acc[h][j], offset);
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    if (lane == 0) {
      warpMaxes[warp][h] = m[h];
      warpSums[warp][h] = l[h];
    }
    if (lane < lanesPerKey)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        warpAcc[(warp * kHeads + h) * valueDim + dim0 + j] = acc[h][j];
  }
  __syncthreads();

  // The warps' states merged: max M, denominator sum_w l_w e^(m_w - M),
  // sums sum_w acc_w e^(m_w - M), over the warps that saw keys.
  const int64_t stride = valueDim + kSparseHeaderFloats;
  float *out = partial + ((t * heads + h0) * splits + blockIdx.z) * stride;
  const int busyWarps =
      first + 32 * (kDecodeWarps - 1) <= last
          ? kDecodeWarps
          : int(first <= last ? (last - first) / 32 + 1 : 0);
  for (int e = tid; e < hn * (valueDim + 1); e += blockDim.x) {
    int h = e / (valueDim + 1), d = e % (valueDim + 1) - 1; // -1: the header
    float top = negInf;
    for (int w = 0; w < busyWarps; ++w)
      top = fmaxf(top, warpMaxes[w][h]);
    float sum = 0.0f;
    for (int w = 0; w < busyWarps; ++w)
        sum = fmaf(d < 0 ? warpSums[w][h]
                         : warpAcc[(w * kHeads + h) * valueDim + d],
                   expf(warpMaxes[w][h] - top), sum);
    float *head = out + int64_t(h) * splits * stride;
    if (d >= 0) {
      head[kSparseHeaderFloats + d] = sum;
    } else {
      head[0] = top;
      head[1] = sum;
      head[2] = float(first <= last ? last - first + 1 : 0);
    }
  }
}

} // namespace

/// Decode attention (see above): grid (tokens, kvHeads x ceil(group /
/// headGroup), splits), block 32 x kDecodeWarps, static shared memory; a
/// block takes the z-th of `splits` equal parts of token x's keys for up to
/// headGroup <= kDecodeHeads query heads of one KV head, and leaves
/// daybreak_attention_split's partials for
/// daybreak_sparse_attention_combine. `heads` of a block: 1, 2, 4 or 8, the
/// smallest that holds headGroup.
extern "C" __global__ void __launch_bounds__(32 * kDecodeWarps, 4)
daybreak_attention_decode(const float *q, Cache k, Cache v,
                          const int32_t *positions, const int32_t *sequences,
                          int64_t heads, int64_t kvHeads, double scale,
                          int64_t window, float *partial, int32_t headGroup,
                          int32_t splits) {
  __shared__ __align__(16) float qs[kDecodeHeads * kDecodeMaxHeadDim];
  __shared__ float ps[kDecodeWarps][kDecodeHeads][32];
  __shared__ const uint8_t *vRows[kDecodeWarps][32];
  __shared__ float warpMaxes[kDecodeWarps][kDecodeHeads];
  __shared__ float warpSums[kDecodeWarps][kDecodeHeads];
  __shared__ float warpAcc[kDecodeWarps * kDecodeHeads * kDecodeMaxValueDim];
#define DAYBREAK_DECODE(format, n)                                             \
  decodeAttention<format, n>(q, k, v, positions, sequences, heads, kvHeads,    \
                             scale, window, partial, headGroup, splits, qs,    \
                             ps, vRows, warpMaxes, warpSums, warpAcc)
#define DAYBREAK_DECODE_HEADS(format)                                          \
  if (headGroup <= 1)                                                          \
    DAYBREAK_DECODE(format, 1);                                                \
  else if (headGroup <= 2)                                                     \
    DAYBREAK_DECODE(format, 2);                                                \
  else if (headGroup <= 4)                                                     \
    DAYBREAK_DECODE(format, 4);                                                \
  else                                                                         \
    DAYBREAK_DECODE(format, 8)
  if (k.format == kF32) {
    DAYBREAK_DECODE_HEADS(kF32);
  } else if (k.format == kBF16) {
    DAYBREAK_DECODE_HEADS(kBF16);
  } else {
    DAYBREAK_DECODE_HEADS(kFp8Scaled);
  }
#undef DAYBREAK_DECODE_HEADS
#undef DAYBREAK_DECODE
}

//===----------------------------------------------------------------------===//
// Prefill attention on the CUDA cores, register-tiled:
// daybreak_attention_prefill64.
//
// denseAttention's products read shared memory for nearly every FMA (a
// warp takes four rows of one key a lane: five loads for four FMAs in the
// scores, two per FMA in P x V), so at gpt-oss's 8K prefill it ran at 4.7
// TFLOP/s, 118 ms a layer. Here a block holds 64 query rows (64 / group
// tokens x the group's heads of one KV head) and walks 32-key chunks as
// SGEMM does: each thread computes a 4-row x 2-key tile of the scores from
// Q^T and K^T in shared memory (a float4 and a float2 load per 8 FMAs) and
// a 4-row x 4-dim tile of the output from P^T and V (two float4 loads per
// 16 FMAs). The 16 threads of a row group sit in one half-warp, so the
// online softmax's row max and sum are shuffles. Sums run in the order
// denseAttention's do (scores over the head dim, outputs over the keys of
// each chunk in order), all in fp32: the same exactness against the CPU.
// Head dims up to 64, value dims up to 64, groups that divide 64
// (CudaKernels::attention falls back to daybreak_attention otherwise).
//
// Measured on the H200 (DaybreakKernelBench attention, gpt-oss heads, fp8
// cache, causal): 8K tokens 117.8 -> 43.6 ms (12.6 TFLOP/s, counting 4 x
// heads x dim FLOPs a visible pair), 1K 2.39 -> 0.97 ms, with three blocks
// an SM (80 registers; the cache decode loops kept rolled, else they
// spill); at two blocks an SM (127 registers) 50.9 ms. The fp32 CUDA-core
// ceiling is 67 TFLOP/s; the tensor-core kernel (not exact) takes 12.4 ms.
//===----------------------------------------------------------------------===//

namespace {
constexpr int kPrefillRows = 64, kPrefillKeys = 32, kPrefillDim = 64;
} // namespace

/// Grid (ceil(tokens / (64 / group)), kvHeads), block 256, static shared
/// memory; semantics as daybreak_attention (sinks, windows, zeros for a
/// token outside the batch or the cache).
extern "C" __global__ void __launch_bounds__(256, 3)
daybreak_attention_prefill64(const float *q, Cache k, Cache v,
                             const int32_t *positions,
                             const int32_t *sequences, const float *sinks,
                             int64_t tokens, int64_t heads, int64_t kvHeads,
                             double scale, int64_t window, float *out) {
  __shared__ __align__(16) float qT[kPrefillDim][kPrefillRows];
  __shared__ __align__(16) float kT[kPrefillDim][kPrefillKeys];
  __shared__ __align__(16) float vs[kPrefillKeys][kPrefillDim];
  // P^T's rows padded by 4: a warp's float4 stores of 16 keys spread over
  // the banks (unpadded, all 16 hit the same four).
  __shared__ __align__(16) float pT[kPrefillKeys][kPrefillRows + 4];
  __shared__ float rowMax[kPrefillRows], rowSum[kPrefillRows],
      rowScale[kPrefillRows];
  __shared__ int64_t bounds[kPrefillRows][2];
  __shared__ const uint8_t *kRows[kPrefillKeys], *vRows[kPrefillKeys];

  const int tid = threadIdx.x;
  const int64_t group = heads / kvHeads;
  const int headDim = int(k.width / kvHeads), valueDim = int(v.width / kvHeads);
  const int hn = int(group), tileTokens = kPrefillRows / hn;
  const int64_t g = blockIdx.y, h0 = g * group;
  const float fscale = float(scale);
  const float negInf = -__int_as_float(0x7F800000);
  const int64_t t0 = int64_t(blockIdx.x) * tileTokens;
  const int64_t t1 = t0 + tileTokens < tokens ? t0 + tileTokens : tokens;
  const int64_t maxSeqLen = k.maxSeqLen < v.maxSeqLen ? k.maxSeqLen
                                                      : v.maxSeqLen;
  const int64_t batch = k.batch < v.batch ? k.batch : v.batch;
  // Scores: rows 4 tr .. 4 tr + 3, keys 2 tc, 2 tc + 1 of a chunk; outputs:
  // the same rows, dims 4 tc .. 4 tc + 3.
  const int tr = tid / 16, tc = tid % 16;

  for (int64_t ta = t0; ta < t1;) {
    int64_t seq = sequences ? sequences[ta] : 0;
    int64_t tb = ta + 1;
    while (tb < t1 && (sequences ? sequences[tb] : 0) == seq)
      ++tb;
    const int rows = int(tb - ta) * hn;
    __syncthreads(); // the previous run's bounds, rows and Q are consumed
    if (tid < tb - ta) {
      int64_t p = positions[ta + tid];
      bool valid = seq >= 0 && seq < batch && p >= 0 && p < maxSeqLen;
      bounds[tid][0] = valid ? windowStart(p, window) : 0;
      bounds[tid][1] = valid ? p : -1;
    }
    // Q^T; rows past the run stay zero (their scores are masked).
    for (int e = tid; e < kPrefillRows * headDim; e += blockDim.x) {
      int r = e % kPrefillRows, d = e / kPrefillRows;
      qT[d][r] = r < rows ? q[((ta + r / hn) * heads + h0 + r % hn) * headDim + d]
                          : 0.0f;
    }
    if (tid < kPrefillRows) {
      rowMax[tid] = negInf;
      rowSum[tid] = 0.0f;
    }
    __syncthreads();
    int64_t lo = 0x7FFFFFFFFFFFFFFFll, hi = -1;
    for (int64_t u = 0; u < tb - ta; ++u)
      if (bounds[u][0] <= bounds[u][1]) {
        lo = bounds[u][0] < lo ? bounds[u][0] : lo;
        hi = bounds[u][1] > hi ? bounds[u][1] : hi;
      }
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        acc[i][j] = 0.0f;
    for (int64_t c0 = lo; c0 <= hi; c0 += kPrefillKeys) {
      const int cn = int(hi + 1 - c0 < kPrefillKeys ? hi + 1 - c0 : kPrefillKeys);
      __syncthreads(); // the previous chunk's K, V and P are used
      if (tid < cn) {
        kRows[tid] = cacheRow(k, seq, c0 + tid);
        vRows[tid] = cacheRow(v, seq, c0 + tid);
      }
      __syncthreads();
      {
        // K^T: a warp takes 8 dims of the 32 keys, a lane a key (stores
        // along a K^T row: no bank conflicts). V: 8 lanes a key, 8 dims a
        // lane. Columns past the head and keys past the chunk are zero.
        int c = tid & 31, d0 = 8 * (tid >> 5);
#pragma unroll 1
        for (int i = 0; i < 8; ++i) {
          int d = d0 + i;
          kT[d][c] = c < cn && d < headDim
                         ? cacheValue(k, kRows[c], g * headDim + d)
                         : 0.0f;
        }
        int cv = tid / 8, dv = 8 * (tid % 8);
#pragma unroll 1
        for (int i = 0; i < 8; ++i) {
          int d = dv + i;
          vs[cv][d] = cv < cn && d < valueDim
                          ? cacheValue(v, vRows[cv], g * valueDim + d)
                          : 0.0f;
        }
      }
      __syncthreads();
      float s[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        s[i][0] = s[i][1] = 0.0f;
      for (int d = 0; d < headDim; ++d) {
        float4 qv = *reinterpret_cast<const float4 *>(&qT[d][4 * tr]);
        float2 kv = *reinterpret_cast<const float2 *>(&kT[d][2 * tc]);
        const float qs[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          s[i][0] = fmaf(qs[i], kv.x, s[i][0]);
          s[i][1] = fmaf(qs[i], kv.y, s[i][1]);
        }
      }
      // The online softmax: a row's 16 threads are one half-warp.
      float e[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        int r = 4 * tr + i;
        int u = r / hn;
        float x[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          int c = 2 * tc + j;
          int64_t key = c0 + c;
          bool visible = r < rows && c < cn && key >= bounds[u][0] &&
                         key <= bounds[u][1];
          x[j] = visible ? s[i][j] * fscale : negInf;
        }
        float top = fmaxf(x[0], x[1]);
        for (int o = 8; o > 0; o >>= 1)
          top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
        float previous = rowMax[r];
        top = fmaxf(previous, top);
        float correction = top == previous ? 1.0f : expf(previous - top);
#pragma unroll
        for (int j = 0; j < 2; ++j)
          e[i][j] = x[j] == negInf ? 0.0f : expf(x[j] - top);
        float sum = e[i][0] + e[i][1];
        for (int o = 8; o > 0; o >>= 1)
          sum += __shfl_xor_sync(0xffffffffu, sum, o);
        __syncwarp(); // every lane has read rowMax[r]
        if (tc == 0) {
          rowMax[r] = top;
          rowSum[r] = rowSum[r] * correction + sum;
          rowScale[r] = correction;
        }
      }
#pragma unroll
      for (int j = 0; j < 2; ++j)
        *reinterpret_cast<float4 *>(&pT[2 * tc + j][4 * tr]) =
            make_float4(e[0][j], e[1][j], e[2][j], e[3][j]);
      __syncthreads();
      // acc = acc * correction + P x V over the chunk's keys in order.
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float correction = rowScale[4 * tr + i];
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] *= correction;
      }
      for (int c = 0; c < cn; ++c) {
        float4 p = *reinterpret_cast<const float4 *>(&pT[c][4 * tr]);
        float4 vv = *reinterpret_cast<const float4 *>(&vs[c][4 * tc]);
        const float ps[4] = {p.x, p.y, p.z, p.w};
        const float vals[4] = {vv.x, vv.y, vv.z, vv.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            acc[i][j] = fmaf(ps[i], vals[j], acc[i][j]);
      }
    }
    __syncthreads(); // rowMax and rowSum are final
    // out = acc e^(m - M) / (l e^(m - M) + e^(sink - M)), M = max(m, sink),
    // as denseAttention; a row without a visible key gets zeros.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int r = 4 * tr + i;
      if (r >= rows)
        continue;
      float m = rowMax[r], l = rowSum[r];
      float factor = 0.0f;
      if (l > 0.0f) {
        float sink = sinks ? sinks[h0 + r % hn] : negInf;
        float top = fmaxf(m, sink);
        float keep = expf(m - top);
        factor = keep / (l * keep + (sinks ? expf(sink - top) : 0.0f));
      }
      float *o = out + ((ta + r / hn) * heads + h0 + r % hn) * valueDim;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (4 * tc + j < valueDim)
          o[4 * tc + j] = acc[i][j] * factor;
    }
    ta = tb;
  }
}

//===----------------------------------------------------------------------===//
// Wide-head attention on the CUDA cores: daybreak_attention_wide.
//
// Absorbed MLA (Kimi Linear's NoPE MLA, DeepSeek's MLA over a dense latent
// cache) is MQA with wide heads: 32 or more query heads of 576 on one KV
// head whose values are the first 512 columns of the same latent row. The
// generic kernel fits 8 of those heads and 8 keys in its shared memory, so
// it decodes every K row once per 8 heads and spends its time on barriers
// (96 % of a Kimi-Linear-48B decode step at B = 64, 32K keys). Here a block
// takes one token, up to 32 query heads of one KV head and one split of the
// token's keys, with Q and a 32-key chunk of K decoded to fp32 in (up to
// 210 KiB of) shared memory; where V's rows are K's rows (a column prefix
// of the same cache: shareRows), V is read from K's chunk, else it has its
// own. Each warp owns 4 heads for the whole launch, so the online softmax
// needs no barrier:
// - scores: a lane a key, its K row against the warp's 4 Q rows (broadcast
//   16-byte reads; K's row stride is 4 floats past a multiple of 32, so
//   the 16-byte reads of a quarter-warp hit distinct banks);
// - P x V: a lane 16 value columns (lane + 32 j) of the warp's 4 heads,
//   each key's probability broadcast by a shuffle.
// Unsplit (prefill, or a decode grid large enough), the block normalises
// and writes the output with the sinks; split, it leaves the partials
// daybreak_sparse_attention_combine merges (its layout: max, denominator,
// key count, unnormalised sums).
//
// Roofline: a key costs 32 x (576 + 512) FMAs for 2.3 KB of f32 K (1.2 KB
// bf16) read once per block, so the kernel is FMA-bound (about 30 FMA a
// byte); scores take 8 shared-memory wavefronts per 512 FMAs a warp, P x V
// 20 per 2048, so shared memory caps it near half the fp32 FMA rate.
// Measured on the H200 (DaybreakKernelBench N mla, Kimi-Linear-48B's layer,
// fp8 cache): 4.2-5.4 TFLOP/s, 6-8 % of the FMA rate (B = 64 at 32K keys:
// 34.5 ms; the generic kernel took 210 ms): each chunk's global loads and
// per-element decode run between barriers with nothing to overlap them
// (one block an SM). Next: the chunk double-buffered (cp.async of the raw
// rows, decoded from shared memory).
//===----------------------------------------------------------------------===//

namespace {

constexpr int kWideHeads = 32, kWideKeys = 32, kWideThreads = 256,
              kWideRows = kWideHeads / (kWideThreads / 32),
              kWideMaxValueCols = 16; // value columns a lane: lane + 32 j

/// A K row's stride in shared memory: 4 floats past a multiple of 32.
__device__ __host__ constexpr int64_t wideKeyStride(int64_t headDim) {
  return headDim + (36 - headDim % 32) % 32;
}

} // namespace

/// daybreak_attention_wide: grid (tokens, kvHeads x ceil(group / 32),
/// splits), block 256, shared memory CudaKernels::wideAttentionSharedBytes.
/// Head dims a multiple of 8 up to kWideAttentionMaxHeadDim, value dims up
/// to 512 (CudaKernels::wideAttentionApplies).
extern "C" __global__ void __launch_bounds__(kWideThreads, 1)
    daybreak_attention_wide(const float *q, Cache k, Cache v,
                            const int32_t *positions, const int32_t *sequences,
                            const float *sinks, int64_t heads, int64_t kvHeads,
                            double scale, int64_t window, int32_t shareRows,
                            int32_t splits, float *partial, float *out) {
  extern __shared__ __align__(16) float wideSmem[];
  __shared__ const uint8_t *kRows[kWideKeys], *vRows[kWideKeys];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int headDim = int(k.width / kvHeads), valueDim = int(v.width / kvHeads);
  const int kStride = int(wideKeyStride(headDim));
  const int64_t group = heads / kvHeads;
  const int64_t groups = (group + kWideHeads - 1) / kWideHeads;
  const int64_t g = blockIdx.y / groups;
  const int64_t h0 = g * group + (blockIdx.y % groups) * kWideHeads;
  const int hn =
      int(g * group + group - h0 < kWideHeads ? g * group + group - h0
                                              : kWideHeads);
  const int64_t t = blockIdx.x;
  const float negInf = -__int_as_float(0x7F800000);
  const float fscale = float(scale);
  float *qs = wideSmem;                  // [32, headDim]
  float *ks = qs + kWideHeads * headDim; // [32, kStride]
  float *vs = ks + kWideKeys * kStride;  // [32, valueDim] unless shared
  const float *vb = shareRows ? ks : vs;
  const int vStride = shareRows ? kStride : valueDim;

  // This split's keys [first, last] (denseAttention's bounds and split).
  const int64_t seq = sequences ? sequences[t] : 0, p = positions[t];
  const int64_t batch = k.batch < v.batch ? k.batch : v.batch;
  const int64_t maxSeqLen =
      k.maxSeqLen < v.maxSeqLen ? k.maxSeqLen : v.maxSeqLen;
  int64_t first = 0, last = -1;
  if (seq >= 0 && seq < batch && p >= 0 && p < maxSeqLen) {
    first = windowStart(p, window);
    int64_t per = (p - first + splits) / splits; // ceil(len / splits)
    int64_t from = first + int64_t(blockIdx.z) * per;
    last = from + per - 1 < p ? from + per - 1 : p;
    first = from;
  }

  for (int e = tid; e < kWideHeads * headDim; e += blockDim.x)
    qs[e] = e < hn * headDim ? q[(t * heads + h0) * headDim + e] : 0.0f;

  const int r0 = kWideRows * warp; // this warp's heads r0 .. r0 + 3
  float m[kWideRows], l[kWideRows], acc[kWideRows][kWideMaxValueCols];
#pragma unroll
  for (int r = 0; r < kWideRows; ++r) {
    m[r] = negInf;
    l[r] = 0.0f;
#pragma unroll
    for (int j = 0; j < kWideMaxValueCols; ++j)
      acc[r][j] = 0.0f;
  }
  for (int64_t base = first; base <= last; base += kWideKeys) {
    const int n =
        int(last + 1 - base < kWideKeys ? last + 1 - base : kWideKeys);
    __syncthreads(); // the previous chunk is consumed (and Q written)
    if (tid < n) {
      kRows[tid] = cacheRow(k, seq, base + tid);
      vRows[tid] = cacheRow(v, seq, base + tid);
    }
    __syncthreads();
    for (int c = 0; c < n; ++c)
      for (int d = tid; d < headDim; d += blockDim.x)
        ks[c * kStride + d] = cacheValue(k, kRows[c], g * headDim + d);
    if (!shareRows)
      for (int c = 0; c < n; ++c)
        for (int d = tid; d < valueDim; d += blockDim.x)
          vs[c * valueDim + d] = cacheValue(v, vRows[c], g * valueDim + d);
    __syncthreads();

    // Scores of key `lane` for the warp's heads, two partial sums a head.
    float s[kWideRows][2];
#pragma unroll
    for (int r = 0; r < kWideRows; ++r)
      s[r][0] = s[r][1] = 0.0f;
    if (lane < n) {
      const float *kr = ks + lane * kStride;
      for (int d = 0; d < headDim; d += 8) {
        float4 k0 = *reinterpret_cast<const float4 *>(kr + d);
        float4 k1 = *reinterpret_cast<const float4 *>(kr + d + 4);
#pragma unroll
        for (int r = 0; r < kWideRows; ++r) {
          const float *qr = qs + (r0 + r) * headDim + d;
          float4 q0 = *reinterpret_cast<const float4 *>(qr);
          float4 q1 = *reinterpret_cast<const float4 *>(qr + 4);
          s[r][0] = fmaf(q0.x, k0.x, s[r][0]);
          s[r][1] = fmaf(q1.x, k1.x, s[r][1]);
          s[r][0] = fmaf(q0.y, k0.y, s[r][0]);
          s[r][1] = fmaf(q1.y, k1.y, s[r][1]);
          s[r][0] = fmaf(q0.z, k0.z, s[r][0]);
          s[r][1] = fmaf(q1.z, k1.z, s[r][1]);
          s[r][0] = fmaf(q0.w, k0.w, s[r][0]);
          s[r][1] = fmaf(q1.w, k1.w, s[r][1]);
        }
      }
    }
    // The online softmax over the chunk, per head.
    float e[kWideRows];
#pragma unroll
    for (int r = 0; r < kWideRows; ++r) {
      float x = lane < n ? (s[r][0] + s[r][1]) * fscale : negInf;
      float previous = m[r];
      float top = fmaxf(previous, warpMax(x));
      float correction = top == previous ? 1.0f : expf(previous - top);
      e[r] = lane < n ? expf(x - top) : 0.0f;
      l[r] = l[r] * correction + warpSum(e[r]);
      m[r] = top;
#pragma unroll
      for (int j = 0; j < kWideMaxValueCols; ++j)
        acc[r][j] *= correction;
    }
    // P x V: value columns lane + 32 j of every key of the chunk.
    for (int c = 0; c < n; ++c) {
      float pc[kWideRows];
#pragma unroll
      for (int r = 0; r < kWideRows; ++r)
        pc[r] = __shfl_sync(0xffffffffu, e[r], c);
      const float *vr = vb + c * vStride;
#pragma unroll
      for (int j = 0; j < kWideMaxValueCols; ++j) {
        int col = lane + 32 * j;
        if (col < valueDim) {
          float x = vr[col];
#pragma unroll
          for (int r = 0; r < kWideRows; ++r)
            acc[r][j] = fmaf(pc[r], x, acc[r][j]);
        }
      }
    }
  }

  const int64_t count = first <= last ? last - first + 1 : 0;
  const int64_t stride = valueDim + kSparseHeaderFloats;
#pragma unroll
  for (int r = 0; r < kWideRows; ++r) {
    if (r0 + r >= hn)
      continue;
    const int64_t h = h0 + r0 + r;
    if (splits > 1) {
      float *o = partial + ((t * heads + h) * splits + blockIdx.z) * stride;
      if (lane == 0) {
        o[0] = m[r];
        o[1] = l[r];
        o[2] = float(count);
      }
#pragma unroll
      for (int j = 0; j < kWideMaxValueCols; ++j)
        if (lane + 32 * j < valueDim)
          o[kSparseHeaderFloats + lane + 32 * j] = acc[r][j];
      continue;
    }
    // daybreak_sparse_attention_combine's formula with one split.
    float top = sinks ? fmaxf(sinks[h], m[r]) : m[r];
    float sum = (sinks ? expf(sinks[h] - top) : 0.0f) + l[r] * expf(m[r] - top);
    float factor = count > 0 ? expf(m[r] - top) / sum : 0.0f;
    float *o = out + (t * heads + h) * valueDim;
#pragma unroll
    for (int j = 0; j < kWideMaxValueCols; ++j)
      if (lane + 32 * j < valueDim)
        o[lane + 32 * j] = count > 0 ? acc[r][j] * factor : 0.0f;
  }
}
