//===- CudaKda.cuh - Kimi Delta Attention kernels ----------------*- CUDA -*-//
//
// The KDA kernels of Kernels.def (short_conv, kda_gate, kda_chunk, kda_step,
// gated_rms_norm; see cpu::kdaChunk and friends for the semantics). Part of
// CudaKernels.cu's translation unit (included at its end, as
// CudaAttention.cuh is): it uses that file's Weight, bf16 helpers and block
// reductions.
//
// Tokens of a step may belong to any slots in any order. The scans take a
// block per slot (times heads and value columns) that collects its slot's
// tokens itself, in step order, by scanning `sequences` (a block-wide ballot
// compaction, 64 tokens at a time): no grouping pass, no scratch. Tokens
// naming a slot outside [0, slots) are skipped (the CPU device reports
// them; a CUDA kernel cannot).
//
// kda_chunk is the WY/UT form of models.md 2.4 on the CUDA cores, fp32, a
// block per (slot, head, 32 value columns), 64-token chunks, everything of a
// chunk in shared memory (~165 KiB at Dk = 128):
//   L = beta_r k_r . k_c exp(G_r - G_c) (c < r), Aqk = q_r . k_c exp(G_r -
//   G_c) (c <= r), the decay differences taken directly, never factored (no
//   overflow whatever the gate); T = (I + L)^-1 by forward substitution;
//   X = V - (k e^G) S; U = T diag(beta) X; O = (q e^G) S + Aqk U;
//   S <- e^{G_last} S + (k e^{G_last - G})^T U.
// The products L and Aqk cost C^2 Dk exponentials a chunk and are
// recomputed by each of the Dv / 32 blocks of a head: this is the exact
// first version; the tensor-core form (sub-chunks of 16 with a reference
// decay between them) is the next step.
//
// kda_step (decode) takes a block per token (times heads and value
// columns); the block of a slot's first token keeps its [Dk, 32] slice of
// the state in shared memory for all of the slot's tokens: the state is
// read (cp.async, before anything else) and written once a step,
// coalesced.
//
//===----------------------------------------------------------------------===//

namespace {

constexpr int kKdaChunk = 64;        // tokens a chunk
constexpr int kKdaMaxKeyDim = 128;   // key dim a block holds
constexpr int kKdaColumns = 32;      // value columns a block owns
constexpr int kKdaThreads = 512;     // kda_chunk
constexpr int kKdaStepThreads = 128; // kda_step: a warp per 32 key rows
constexpr int kShortConvMaxWidth = 8;

__device__ __forceinline__ float stateLoad(const uint8_t *slot, bool bf16,
                                           int64_t i) {
  return bf16 ? bf16ToFloat(reinterpret_cast<const uint16_t *>(slot)[i])
              : reinterpret_cast<const float *>(slot)[i];
}

__device__ __forceinline__ void stateStore(uint8_t *slot, bool bf16, int64_t i,
                                           float value) {
  if (bf16)
    reinterpret_cast<uint16_t *>(slot)[i] = floatToBf16(value);
  else
    reinterpret_cast<float *>(slot)[i] = value;
}

__device__ __forceinline__ float kdaActivate(int activation, float x) {
  // abi::Activation: none, sigmoid, silu.
  if (activation == 1)
    return 1.0f / (1.0f + expf(-x));
  if (activation == 2)
    return x / (1.0f + expf(-x));
  return x;
}

/// The next (up to `limit`) tokens of `slot` from sequences[*cursor ..
/// tokens), in step order, into `list`; advances *cursor past them.
/// Called by every thread of the block (blockDim a multiple of 32);
/// `counts` is shared scratch of 33 ints. Returns the count (uniform).
__device__ int nextSlotTokens(const int32_t *sequences, int64_t tokens,
                              int slot, int64_t *cursor, int *list, int limit,
                              int *counts) {
  int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t pos = *cursor;
  int count = 0;
  while (count < limit && pos < tokens) {
    int64_t t = pos + threadIdx.x;
    bool match = t < tokens && sequences[t] == slot;
    unsigned ballot = __ballot_sync(0xffffffffu, match);
    if (lane == 0)
      counts[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < warps; ++w) {
      before += w < warp ? counts[w] : 0;
      total += counts[w];
    }
    int rank = before + __popc(ballot & ((1u << lane) - 1u));
    if (match && count + rank < limit)
      list[count + rank] = int(t);
    int64_t next = pos + blockDim.x;
    if (count + total > limit) {
      // The take ends at the limit-th match; the rest wait for next time.
      if (match && count + rank == limit - 1)
        counts[32] = int(t - pos);
      __syncthreads();
      next = pos + counts[32] + 1;
    }
    count = min(limit, count + total);
    pos = next;
    __syncthreads(); // counts is rewritten next round
  }
  __syncthreads();
  if (threadIdx.x == 0)
    *cursor = pos;
  __syncthreads();
  return count;
}

} // namespace

/// short_conv's outputs: grid (ceil(T * C / 256)), block 256, a thread per
/// (token, channel). Its W - 1 predecessors are the nearest earlier tokens
/// of its slot in the step, then the slot's state (oldest row first).
extern "C" __global__ void
daybreak_short_conv(const float *x, Weight weight, const uint8_t *state,
                    int64_t slotBytes, int32_t stateBf16,
                    const int32_t *sequences, int64_t tokens, int64_t channels,
                    int64_t width, int64_t slots, int32_t activation,
                    float *out) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * channels)
    return;
  int64_t t = i / channels, c = i % channels;
  int slot = sequences[t];
  if (slot < 0 || slot >= slots) {
    out[i] = 0.0f;
    return;
  }
  // Taps from the newest (the token itself) back.
  float sum = weightAt(weight, c * width + width - 1) * x[i];
  int64_t back = 1, from = t - 1;
  for (; back < width && from >= 0; --from)
    if (sequences[from] == slot)
      sum += weightAt(weight, c * width + width - 1 - back++) *
             x[from * channels + c];
  const uint8_t *s = state + slot * slotBytes;
  int64_t found = back - 1;
  for (; back < width; ++back) // state row (W - 1) - (back - found)
    sum += weightAt(weight, c * width + width - 1 - back) *
           stateLoad(s, stateBf16, (width - 1 - (back - found)) * channels + c);
  out[i] = kdaActivate(activation, sum);
}

/// short_conv's state update (after its outputs): grid (slots, ceil(C /
/// 128)), block 128. The new window is the last W - 1 inputs of state ++
/// the slot's tokens.
extern "C" __global__ void
daybreak_short_conv_state(const float *x, uint8_t *state, int64_t slotBytes,
                          int32_t stateBf16, const int32_t *sequences,
                          int64_t tokens, int64_t channels, int64_t width) {
  int slot = blockIdx.x;
  int64_t c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  int64_t latest[kShortConvMaxWidth];
  int found = 0;
  for (int64_t t = tokens - 1; t >= 0 && found < width - 1; --t)
    if (sequences[t] == slot)
      latest[found++] = t;
  if (found == 0 || c >= channels)
    return;
  uint8_t *s = state + slot * slotBytes;
  float rows[kShortConvMaxWidth];
  int history = int(width - 1);
  for (int r = 0; r < history; ++r)
    rows[r] = r < history - found
                  ? stateLoad(s, stateBf16, (r + found) * channels + c)
                  : x[latest[history - 1 - r] * channels + c];
  for (int r = 0; r < history; ++r)
    stateStore(s, stateBf16, r * channels + c, rows[r]);
}

/// kda_gate: grid (ceil(T * H * D / 256)), block 256.
extern "C" __global__ void
daybreak_kda_gate(const float *raw, const float *aLog, const float *dtBias,
                  int64_t count, int64_t heads, int64_t dim, int32_t bounded,
                  double lowerBound, float *out) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count)
    return;
  int64_t hd = i % (heads * dim), h = hd / dim;
  double a = exp(double(aLog[h]));
  double z = double(raw[i]) + dtBias[hd];
  double g = bounded ? lowerBound / (1.0 + exp(-a * z))
                     : -a * (z > 20.0 ? z : log1p(exp(z)));
  out[i] = float(g);
}

/// gated_rms_norm: grid (rows), block 128.
extern "C" __global__ void
daybreak_gated_rms_norm(const float *x, const float *gate, Weight weight,
                        int64_t dim, double eps, int32_t activation,
                        float *out) {
  __shared__ float scratch[32];
  int64_t row = blockIdx.x;
  const float *in = x + row * dim, *g = gate + row * dim;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    sum = fmaf(in[i], in[i], sum);
  sum = blockSum(sum, scratch);
  float inv = float(1.0 / sqrt(double(sum) / double(dim) + eps));
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[row * dim + i] = in[i] * inv *
                         (weight.data ? weightAt(weight, i) : 1.0f) *
                         kdaActivate(activation, g[i]);
}

namespace {

/// Dynamic shared memory of daybreak_kda_chunk for key dim `dk`.
__host__ __device__ constexpr int64_t kdaChunkSharedFloats(int64_t dk) {
  return 2 + 3 * kKdaChunk * (dk + 1) + 2 * kKdaChunk * (kKdaChunk + 1) +
         dk * (kKdaColumns + 1) + 2 * kKdaChunk * (kKdaColumns + 1) +
         kKdaChunk + (dk + 1) + kKdaChunk + 34;
}

} // namespace

/// kda_chunk: grid (slots, heads, ceil(Dv / 32)), block 512, dynamic shared
/// memory kdaChunkSharedFloats(dk) floats; dk <= 128.
extern "C" __global__ void __launch_bounds__(kKdaThreads)
    daybreak_kda_chunk(const float *q, const float *k, const float *v,
                       const float *g, const float *beta, uint8_t *state,
                       int64_t slotBytes, int32_t stateBf16,
                       const int32_t *sequences, int64_t tokens, int64_t heads,
                       int64_t dk, int64_t dv, double scale, int32_t l2norm,
                       float *out) {
  extern __shared__ float shared[];
  const int64_t P = dk + 1, CP = kKdaChunk + 1, VP = kKdaColumns + 1;
  int64_t *cursor = reinterpret_cast<int64_t *>(shared); // 8-aligned
  float *qm = shared + 2;          // q, then q e^G        [C, P]
  float *km = qm + kKdaChunk * P;  // k, then k e^G        [C, P]
  float *gm = km + kKdaChunk * P;  // G, then k e^(G_l-G)  [C, P]
  float *lm = gm + kKdaChunk * P;  // L, then (I + L)^-1   [C, CP]
  float *am = lm + kKdaChunk * CP; // Aqk                  [C, CP]
  float *sm = am + kKdaChunk * CP; // S slice              [dk, VP]
  float *xm = sm + dk * VP;        // V, then X            [C, VP]
  float *um = xm + kKdaChunk * VP; // U                    [C, VP]
  float *bm = um + kKdaChunk * VP; // beta                 [C]
  float *last = bm + kKdaChunk;    // G_last               [P]
  int *list = reinterpret_cast<int *>(last + P); // tokens       [C]
  int *counts = list + kKdaChunk;                // 34

  const int slot = blockIdx.x, h = blockIdx.y;
  const int64_t e0 = int64_t(blockIdx.z) * kKdaColumns;
  const int cols = int(dv - e0 < kKdaColumns ? dv - e0 : kKdaColumns);
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const int warp = tid >> 5, lane = tid & 31, warps = nthreads >> 5;
  uint8_t *slotState = state + slot * slotBytes;
  const int64_t stateBase = int64_t(h) * dk * dv;

  for (int64_t i = tid; i < dk * kKdaColumns; i += nthreads) {
    int64_t d = i / kKdaColumns, c = i % kKdaColumns;
    sm[d * VP + c] =
        c < cols ? stateLoad(slotState, stateBf16, stateBase + d * dv + e0 + c)
                 : 0.0f;
  }
  if (tid == 0)
    *cursor = 0;
  __syncthreads();

  bool any = false;
  for (;;) {
    int n = nextSlotTokens(sequences, tokens, slot, cursor, list, kKdaChunk,
                           counts);
    if (n == 0)
      break;
    any = true;
    // 1. The chunk's rows: q, k, the v slice, beta, and G = cumsum(g).
    for (int64_t i = tid; i < int64_t(n) * dk; i += nthreads) {
      int64_t r = i / dk, d = i % dk;
      int64_t at = (int64_t(list[r]) * heads + h) * dk + d;
      qm[r * P + d] = q[at];
      km[r * P + d] = k[at];
      gm[r * P + d] = g[at];
    }
    for (int64_t i = tid; i < int64_t(n) * kKdaColumns; i += nthreads) {
      int64_t r = i / kKdaColumns, c = i % kKdaColumns;
      xm[r * VP + c] =
          c < cols ? v[(int64_t(list[r]) * heads + h) * dv + e0 + c] : 0.0f;
    }
    for (int r = tid; r < n; r += nthreads)
      bm[r] = beta[int64_t(list[r]) * heads + h];
    __syncthreads();
    for (int64_t d = tid; d < dk; d += nthreads) {
      float acc = 0.0f;
      for (int r = 0; r < n; ++r) {
        acc += gm[r * P + d];
        gm[r * P + d] = acc;
      }
      last[d] = acc;
    }
    __syncthreads();
    // 2. L2 norms (a warp a row), q times the scale.
    for (int r = warp; r < n; r += warps) {
      float qs = 0.0f, ks = 0.0f;
      for (int64_t d = lane; d < dk; d += 32) {
        qs = fmaf(qm[r * P + d], qm[r * P + d], qs);
        ks = fmaf(km[r * P + d], km[r * P + d], ks);
      }
      qs = warpSum(qs);
      ks = warpSum(ks);
      float qf = float(scale), kf = 1.0f;
      if (l2norm) {
        qf = float(scale / sqrt(double(qs) + 1e-6));
        kf = float(1.0 / sqrt(double(ks) + 1e-6));
      }
      for (int64_t d = lane; d < dk; d += 32) {
        qm[r * P + d] *= qf;
        km[r * P + d] *= kf;
      }
    }
    __syncthreads();
    // 3. L and Aqk over the lower triangle, one decay difference each.
    int pairs = n * (n + 1) / 2;
    for (int p = tid; p < pairs; p += nthreads) {
      int r = int((sqrtf(8.0f * p + 1.0f) - 1.0f) * 0.5f);
      while (r * (r + 1) / 2 > p)
        --r;
      while ((r + 1) * (r + 2) / 2 <= p)
        ++r;
      int c = p - r * (r + 1) / 2;
      float kk = 0.0f, qk = 0.0f;
      for (int64_t d = 0; d < dk; ++d) {
        float kc = km[c * P + d] * __expf(gm[r * P + d] - gm[c * P + d]);
        kk = fmaf(km[r * P + d], kc, kk);
        qk = fmaf(qm[r * P + d], kc, qk);
      }
      // T's diagonal is 1; L's own (zero) is never read.
      lm[r * CP + c] = c < r ? bm[r] * kk : 1.0f;
      am[r * CP + c] = qk;
    }
    __syncthreads();
    // 4. q e^G, k e^G and k e^(G_last - G), in place (G is done with).
    for (int64_t i = tid; i < int64_t(n) * dk; i += nthreads) {
      int64_t r = i / dk, d = i % dk;
      float gr = gm[r * P + d], kr = km[r * P + d];
      float e = __expf(gr);
      qm[r * P + d] *= e;
      km[r * P + d] = kr * e;
      gm[r * P + d] = kr * __expf(last[d] - gr);
    }
    // 5. (I + L)^-1, unit lower triangular, in blocks of 16 rows: the
    // diagonal blocks by substitution, all four at once (T[r, j] = -sum_{j
    // <= c < r} L[r, c] T[c, j]); then block row I from the rows above it:
    // T_IJ = -T_II M_IJ, M_IJ = sum_{J <= K < I} L_IK T_KJ.
    const int blocks16 = (n + 15) / 16;
    for (int i = 1; i < 16; ++i) {
      int b = tid >> 4, j = tid & 15;
      bool active = b < blocks16 && j < i;
      float value = 0.0f;
      if (active) {
        int r = 16 * b + i;
        for (int c = j; c < i; ++c)
          value -= lm[r * CP + 16 * b + c] * lm[(16 * b + c) * CP + 16 * b + j];
      }
      __syncthreads();
      if (active)
        lm[(16 * b + i) * CP + 16 * b + j] = value;
      __syncthreads();
    }
    for (int I = 1; I < blocks16; ++I) {
      float part[3];
      int entries = I * 256;
      for (int e = tid, k = 0; e < entries; e += nthreads, ++k) {
        int J = e >> 8, a = (e >> 4) & 15, col = e & 15;
        float m = 0.0f;
        for (int K = J; K < I; ++K)
          for (int x = K == J ? col : 0; x < 16; ++x)
            m += lm[(16 * I + a) * CP + 16 * K + x] *
                 lm[(16 * K + x) * CP + 16 * J + col];
        part[k] = m;
      }
      __syncthreads();
      for (int e = tid, k = 0; e < entries; e += nthreads, ++k)
        lm[(16 * I + ((e >> 4) & 15)) * CP + 16 * (e >> 8) + (e & 15)] =
            part[k];
      __syncthreads();
      for (int e = tid, k = 0; e < entries; e += nthreads, ++k) {
        int J = e >> 8, a = (e >> 4) & 15, col = e & 15;
        float t = lm[(16 * I + a) * CP + 16 * J + col]; // T_II's diagonal: 1
        for (int x = 0; x < a; ++x)
          t += lm[(16 * I + a) * CP + 16 * I + x] *
               lm[(16 * I + x) * CP + 16 * J + col];
        part[k] = -t;
      }
      __syncthreads();
      for (int e = tid, k = 0; e < entries; e += nthreads, ++k)
        lm[(16 * I + ((e >> 4) & 15)) * CP + 16 * (e >> 8) + (e & 15)] =
            part[k];
      __syncthreads();
    }
    // 6. X = V - (k e^G) S.
    for (int i = tid; i < n * kKdaColumns; i += nthreads) {
      int r = i / kKdaColumns, c = i % kKdaColumns;
      float acc = xm[r * VP + c];
      for (int64_t d = 0; d < dk; ++d)
        acc = fmaf(-km[r * P + d], sm[d * VP + c], acc);
      xm[r * VP + c] = acc;
    }
    __syncthreads();
    // 7. U = T diag(beta) X.
    for (int i = tid; i < n * kKdaColumns; i += nthreads) {
      int r = i / kKdaColumns, c = i % kKdaColumns;
      float acc = 0.0f;
      for (int j = 0; j <= r; ++j)
        acc = fmaf(lm[r * CP + j] * bm[j], xm[j * VP + c], acc);
      um[r * VP + c] = acc;
    }
    __syncthreads();
    // 8. O = (q e^G) S + Aqk U.
    for (int i = tid; i < n * kKdaColumns; i += nthreads) {
      int r = i / kKdaColumns, c = i % kKdaColumns;
      if (c >= cols)
        continue;
      float acc = 0.0f;
      for (int64_t d = 0; d < dk; ++d)
        acc = fmaf(qm[r * P + d], sm[d * VP + c], acc);
      for (int j = 0; j <= r; ++j)
        acc = fmaf(am[r * CP + j], um[j * VP + c], acc);
      out[(int64_t(list[r]) * heads + h) * dv + e0 + c] = acc;
    }
    __syncthreads();
    // 9. S = e^(G_last) S + (k e^(G_last - G))^T U.
    for (int64_t i = tid; i < dk * kKdaColumns; i += nthreads) {
      int64_t d = i / kKdaColumns, c = i % kKdaColumns;
      float acc = sm[d * VP + c] * __expf(last[d]);
      for (int j = 0; j < n; ++j)
        acc = fmaf(gm[j * P + d], um[j * VP + c], acc);
      sm[d * VP + c] = acc;
    }
    __syncthreads();
  }
  if (!any)
    return;
  for (int64_t i = tid; i < dk * kKdaColumns; i += nthreads) {
    int64_t d = i / kKdaColumns, c = i % kKdaColumns;
    if (c < cols)
      stateStore(slotState, stateBf16, stateBase + d * dv + e0 + c,
                 sm[d * VP + c]);
  }
}

namespace {

/// A token's operands for kdaStepToken: q, k and e^g rows in shared memory,
/// its value and beta, and this thread's part of the squared norms.
struct KdaStepOperands {
  float v, beta, qsq, ksq;
};

__device__ __forceinline__ KdaStepOperands
kdaStepLoad(const float *q, const float *k, const float *v, const float *g,
            const float *beta, int64_t row, int64_t dk, int64_t dv, int64_t e,
            bool column, float *qs, float *ks, float *gs) {
  KdaStepOperands ops{column ? v[row * dv + e] : 0.0f, beta[row], 0.0f, 0.0f};
  for (int64_t d = threadIdx.x; d < dk; d += blockDim.x) {
    float qd = q[row * dk + d], kd = k[row * dk + d];
    qs[d] = qd;
    ks[d] = kd;
    gs[d] = __expf(g[row * dk + d]);
    ops.qsq = fmaf(qd, qd, ops.qsq);
    ops.ksq = fmaf(kd, kd, ops.ksq);
  }
  return ops;
}

/// One KDA step of token row `row` (token x heads + head), its operands
/// loaded by kdaStepLoad, on a block's [Dk, 32] fp32 state slice `work` in
/// shared memory (kda_step's layout: a warp per 32 key rows, a lane per
/// value column): the L2 norms, the decay, the delta update and o = S^T q.
__device__ __forceinline__ void
kdaStepToken(KdaStepOperands ops, int64_t row, int64_t dk, int64_t dv,
             int64_t e, int64_t d0, bool column, double scale, int32_t l2norm,
             float *work, const float *qs, const float *ks, const float *gs,
             float (*kPart)[32], float (*oPart)[32], float (*norms)[4],
             float *out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int warps = int(blockDim.x >> 5);
  float qsq = warpSum(ops.qsq), ksq = warpSum(ops.ksq);
  if (lane == 0) {
    norms[0][warp] = qsq;
    norms[1][warp] = ksq;
  }
  __syncthreads();
  float qf = float(scale), kf = 1.0f;
  if (l2norm) {
    float qt = 0.0f, kt = 0.0f;
    for (int w = 0; w < warps; ++w) {
      qt += norms[0][w];
      kt += norms[1][w];
    }
    qf = float(scale / sqrt(double(qt) + 1e-6));
    kf = float(1.0 / sqrt(double(kt) + 1e-6));
  }
  // S <- diag(e^g) S; S^T k over this warp's rows.
  float partial = 0.0f;
  int64_t rows = dk - d0 < 32 ? dk - d0 : 32;
  for (int64_t i = 0; i < rows; ++i) {
    float x = work[(d0 + i) * kKdaColumns + lane] * gs[d0 + i];
    work[(d0 + i) * kKdaColumns + lane] = x;
    partial = fmaf(ks[d0 + i] * kf, x, partial);
  }
  kPart[warp][lane] = partial;
  __syncthreads();
  float kS = 0.0f;
  for (int w = 0; w < warps; ++w)
    kS += kPart[w][lane];
  float u = column ? ops.beta * (ops.v - kS) : 0.0f;
  // S += k u^T; o = S^T q.
  float o = 0.0f;
  for (int64_t i = 0; i < rows; ++i) {
    float x = fmaf(ks[d0 + i] * kf, u, work[(d0 + i) * kKdaColumns + lane]);
    work[(d0 + i) * kKdaColumns + lane] = x;
    o = fmaf(qs[d0 + i] * qf, x, o);
  }
  oPart[warp][lane] = o;
  __syncthreads();
  if (warp == 0 && column) {
    float sum = 0.0f;
    for (int w = 0; w < warps; ++w)
      sum += oPart[w][lane];
    out[row * dv + e] = sum;
  }
  __syncthreads(); // qs, ks, gs and the partials are rewritten
}

} // namespace

/// kda_step: grid (tokens, heads, ceil(Dv / 32)), block 128 (dk <= 128).
/// The block of a slot's first token in the step runs all of the slot's
/// tokens in order (decode: one); the others leave. Its [Dk, 32] slice of
/// the state lives in shared memory (16 KiB, fp32), copied in with
/// cp.async where the rows allow (f32 state, Dv a multiple of 4): the copy
/// holds no registers, so a dozen blocks an SM keep ~200 KiB in flight, and
/// it depends on the token's slot only, overlapping the token's loads and
/// the check for earlier tokens of the slot.
extern "C" __global__ void __launch_bounds__(kKdaStepThreads)
    daybreak_kda_step(const float *q, const float *k, const float *v,
                      const float *g, const float *beta, uint8_t *state,
                      int64_t slotBytes, int32_t stateBf16,
                      const int32_t *sequences, int64_t tokens, int64_t heads,
                      int64_t slots, int64_t dk, int64_t dv, double scale,
                      int32_t l2norm, float *out) {
  __shared__ __align__(16) float work[kKdaMaxKeyDim * kKdaColumns];
  __shared__ float qs[kKdaMaxKeyDim], ks[kKdaMaxKeyDim], gs[kKdaMaxKeyDim];
  __shared__ float kPart[4][32], oPart[4][32], norms[2][4];
  __shared__ int list[kKdaChunk];
  __shared__ int counts[34];
  __shared__ int64_t cursor;
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y;
  const int slot = sequences[t];
  if (slot < 0 || slot >= slots)
    return;
  const int64_t e0 = int64_t(blockIdx.z) * kKdaColumns;
  const int64_t e = e0 + (threadIdx.x & 31);
  const int64_t d0 = int64_t(threadIdx.x >> 5) * 32;
  const int64_t cols = dv - e0 < kKdaColumns ? dv - e0 : kKdaColumns;
  const bool column = e < dv;
  uint8_t *slotState = state + slot * slotBytes;
  const int64_t stateBase = int64_t(h) * dk * dv;
  const bool async = !stateBf16 && dv % 4 == 0 &&
                     (reinterpret_cast<unsigned long long>(state) & 15) == 0 &&
                     slotBytes % 16 == 0;
  if (async) {
    const float *src = reinterpret_cast<const float *>(slotState) + stateBase;
    for (int64_t i = threadIdx.x; i < dk * (kKdaColumns / 4); i += blockDim.x) {
      int64_t d = i / (kKdaColumns / 4), c = 4 * (i % (kKdaColumns / 4));
      copyAsync16(work + d * kKdaColumns + c, src + d * dv + e0 + c, c < cols);
    }
    copyAsyncCommit();
  } else {
    for (int64_t i = threadIdx.x; i < dk * kKdaColumns; i += blockDim.x) {
      int64_t d = i / kKdaColumns, c = i % kKdaColumns;
      work[i] = c < cols ? stateLoad(slotState, stateBf16,
                                     stateBase + d * dv + e0 + c)
                         : 0.0f;
    }
  }
  KdaStepOperands first = kdaStepLoad(q, k, v, g, beta, t * heads + h, dk, dv,
                                      e, column, qs, ks, gs);
  bool earlier = false;
  for (int64_t i = threadIdx.x; i < t; i += blockDim.x)
    earlier |= sequences[i] == slot;
  if (async)
    copyAsyncWaitAll();
  if (__syncthreads_or(earlier))
    return;
  kdaStepToken(first, t * heads + h, dk, dv, e, d0, column, scale, l2norm, work,
               qs, ks, gs, kPart, oPart, norms, out);
  // Later tokens of the slot, in step order.
  if (threadIdx.x == 0)
    cursor = t + 1;
  __syncthreads();
  for (;;) {
    int n = nextSlotTokens(sequences, tokens, slot, &cursor, list, kKdaChunk,
                           counts);
    if (n == 0)
      break;
    for (int r = 0; r < n; ++r) {
      int64_t row = int64_t(list[r]) * heads + h;
      KdaStepOperands ops =
          kdaStepLoad(q, k, v, g, beta, row, dk, dv, e, column, qs, ks, gs);
      kdaStepToken(ops, row, dk, dv, e, d0, column, scale, l2norm, work, qs, ks,
                   gs, kPart, oPart, norms, out);
    }
  }
  // Back as stored: 16-byte stores of fp32 rows, else value by value.
  if (async) {
    float *dst = reinterpret_cast<float *>(slotState) + stateBase;
    for (int64_t i = threadIdx.x; i < dk * (kKdaColumns / 4); i += blockDim.x) {
      int64_t d = i / (kKdaColumns / 4), c = 4 * (i % (kKdaColumns / 4));
      if (c < cols)
        *reinterpret_cast<float4 *>(dst + d * dv + e0 + c) =
            *reinterpret_cast<const float4 *>(work + d * kKdaColumns + c);
    }
  } else {
    for (int64_t i = threadIdx.x; i < dk * kKdaColumns; i += blockDim.x) {
      int64_t d = i / kKdaColumns, c = i % kKdaColumns;
      if (c < cols)
        stateStore(slotState, stateBf16, stateBase + d * dv + e0 + c, work[i]);
    }
  }
}
