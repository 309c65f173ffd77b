//===- CudaAttention.cuh - Dense GQA attention over K and V caches -*- CUDA -*-//
//
// The `attention` kernel (see cpu::attention for the semantics): queries of
// one KV head's group attend to their sequence's keys in a window, with
// sinks. Part of CudaKernels.cu's translation unit (included at its end, so
// that the PTX build, SpecializedKernels.cu and the compiler's NVRTC build
// of the library all see one module): it uses that file's Cache, cacheRow,
// value decoders and warp reductions.
//
// One body serves prefill and decode. A block takes a tile of consecutive
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
/// `partial` [tokens, heads, splits, valueDim + 3]).
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
        return ((ta * heads + h0 + r) * splits + blockIdx.z) * (valueDim + 3);
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
        partial[at(int(e / valueDim)) + 3 + e % valueDim] = acc[j];
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
/// valueDim + 3] for daybreak_sparse_attention_combine, which adds the
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
