//===- CudaKda.cuh - Kimi Delta Attention kernels ----------------*- CUDA -*-//
//
// The KDA kernels of Kernels.def (short_conv, kda_gate, kda_chunk, kda_step,
// gated_rms_norm; see cpu::kdaChunk and friends for the semantics). Part of
// CudaKernels.cu's translation unit (included at its end, as
// CudaAttention.cuh is): it uses that file's Weight, bf16 helpers and block
// reductions.
//
// Tokens of a step may belong to any slots in any order. kda_step and
// short_conv find a slot's tokens themselves, in step order, by scanning
// `sequences` (a block-wide ballot compaction, 64 tokens at a time). Tokens
// naming a slot outside [0, slots) are skipped (the CPU device reports
// them; a CUDA kernel cannot).
//
// kda_chunk is the WY/UT form of models.md 2.4 in four passes over a
// scratch buffer (CudaKernels::kdaChunkScratchBytes): count each slot's
// tokens; number them slot by slot and cut them into chunks of 64;
// daybreak_kda_intra computes everything of a chunk that does not depend
// on the state, for all chunks and heads at once (Aqk, T = (I + L)^-1,
// w = T diag(beta) (k e^G), u = T diag(beta) v; the products on the tensor
// cores in 3xTF32, the decay differences bounded by 16-row sub-chunks);
// daybreak_kda_inter then carries each slot's state through its chunks,
// three [C, Dk] x [Dk, 32] products a chunk on the CUDA cores in fp32:
//   U = u - w S; O = (q e^G) S + Aqk U; S <- e^{G_last} S + (k e^{G_last -
//   G})^T U.
//
// kda_step (decode) takes a block per token (times heads and 64 value
// columns); the block of a slot's first token keeps its [Dk, 64] slice of
// the state in registers for all of the slot's tokens: read first and
// written once a step, coalesced.
//
//===----------------------------------------------------------------------===//

namespace {

constexpr int kKdaChunk = 64;        // tokens a chunk
constexpr int kKdaMaxKeyDim = 128;   // key dim a block holds
constexpr int kKdaColumns = 32;      // value columns a block owns
constexpr int kKdaStepThreads = 256; // kda_step: a warp per 16 key rows
constexpr int kKdaStepColumns = 64;  // value columns a kda_step block owns
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

/// kda_chunk's scratch (daybreak::cuda::DeviceKdaScratch: same members,
/// same order), carved by CudaKernels::kda from one buffer of
/// kdaChunkScratchBytes. Positions p in [0, T) number the step's tokens
/// slot by slot, each slot's in step order (`order[p]` is the token), so a
/// chunk is a run of positions; per-position rows are [H][T][width].
struct KdaScratch {
  int32_t *counts;     // [slots] tokens of each slot
  int32_t *firstChunk; // [slots] the slot's first chunk
  int32_t *chunkCount; // [1] chunks in all
  int32_t *order;      // [T] the token at each position
  int32_t *chunks;     // [maxChunks][4] slot, first position, length, -
  float *qg;           // [H][T][DkP] q e^G (G: the chunk's cumulative g)
  float *kg;           // [H][T][DkP] k e^(G_last - G)
  float *w;            // [H][T][DkP] T diag(beta) (k e^G)
  float *u;            // [H][T][DvP] T diag(beta) v
  float *aqk;          // [H][T][64] Aqk's rows (zero above the diagonal)
  float *decay;        // [H][maxChunks][DkP] e^(G_last)
  int64_t maxChunks;   // ceil(T / 64) + slots
};

namespace {

/// Key and value widths the scratch rows are padded to (zeros): whole mma
/// k-steps of 8, and whole 32-column slices of the inter-chunk pass.
__host__ __device__ constexpr int64_t kdaKeyPad(int64_t dk) {
  return (dk + 7) / 8 * 8;
}
__host__ __device__ constexpr int64_t kdaValuePad(int64_t dv) {
  return (dv + 31) / 32 * 32;
}

/// A 32-bit float rounded to TF32 (its 19 high bits).
__device__ __forceinline__ uint32_t toTf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

/// x = hi + lo, both TF32: the operand split of 3xTF32.
__device__ __forceinline__ void splitTf32(float x, uint32_t &hi, uint32_t &lo) {
  hi = toTf32(x);
  lo = toTf32(x - __uint_as_float(hi));
}

__device__ __forceinline__ void mmaTf32(float (&d)[4], const uint32_t (&a)[4],
                                        uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, "
               "%2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// d (a 16 x 8 tile, the mma accumulator order: d[0], d[1] at row
/// lane / 4, columns 2 (lane % 4) + {0, 1}; d[2], d[3] eight rows down)
/// += A B over k in [0, kDim), kDim a multiple of 8, on the tensor cores
/// in 3xTF32 (a_hi b_hi + a_hi b_lo + a_lo b_hi: fp32's accuracy up to
/// summation order). A(r, k) = a[r * lda + k]; B(k, n) = b[k * bk + n * bn]
/// (shared memory). Called by a whole warp.
__device__ __forceinline__ void mmaTile3xTf32(float (&d)[4], const float *a,
                                              int lda, const float *b, int bk,
                                              int bn, int kDim) {
  const int lane = threadIdx.x & 31, row = lane >> 2, col = lane & 3;
  for (int k0 = 0; k0 < kDim; k0 += 8) {
    uint32_t ah[4], al[4], bh[2], bl[2];
    splitTf32(a[row * lda + k0 + col], ah[0], al[0]);
    splitTf32(a[(row + 8) * lda + k0 + col], ah[1], al[1]);
    splitTf32(a[row * lda + k0 + col + 4], ah[2], al[2]);
    splitTf32(a[(row + 8) * lda + k0 + col + 4], ah[3], al[3]);
    splitTf32(b[(k0 + col) * bk + row * bn], bh[0], bl[0]);
    splitTf32(b[(k0 + col + 4) * bk + row * bn], bh[1], bl[1]);
    mmaTf32(d, al, bh[0], bh[1]);
    mmaTf32(d, ah, bl[0], bl[1]);
    mmaTf32(d, ah, bh[0], bh[1]);
  }
}

/// The (row, column) of pair p of a lower triangle (diagonal included)
/// walked row by row.
__device__ __forceinline__ void trianglePair(int p, int &r, int &c) {
  r = int((sqrtf(8.0f * p + 1.0f) - 1.0f) * 0.5f);
  while (r * (r + 1) / 2 > p)
    --r;
  while ((r + 1) * (r + 2) / 2 <= p)
    ++r;
  c = p - r * (r + 1) / 2;
}

} // namespace

/// kda_chunk, pass 1 of 4: each slot's token count. Grid (slots), block
/// 256.
extern "C" __global__ void daybreak_kda_count(const int32_t *sequences,
                                              int64_t tokens, KdaScratch s) {
  int count = 0;
  for (int64_t base = 0; base < tokens; base += blockDim.x) {
    int64_t t = base + threadIdx.x;
    count += __syncthreads_count(t < tokens && sequences[t] == blockIdx.x);
  }
  if (threadIdx.x == 0)
    s.counts[blockIdx.x] = count;
}

/// kda_chunk, pass 2: the positions and chunks of each slot. Grid (slots),
/// block 256. A slot's positions follow those of the slots before it; its
/// tokens are cut into chunks of 64 (the last shorter).
extern "C" __global__ void daybreak_kda_order(const int32_t *sequences,
                                              int64_t tokens, KdaScratch s) {
  __shared__ int list[kKdaChunk];
  __shared__ int counts[34];
  __shared__ int64_t cursor;
  __shared__ int before[2];
  const int slot = blockIdx.x;
  if (threadIdx.x < 2)
    before[threadIdx.x] = 0;
  __syncthreads();
  int positions = 0, chunks = 0;
  for (int i = threadIdx.x; i < slot; i += blockDim.x) {
    positions += s.counts[i];
    chunks += (s.counts[i] + kKdaChunk - 1) / kKdaChunk;
  }
  atomicAdd(&before[0], positions);
  atomicAdd(&before[1], chunks);
  if (threadIdx.x == 0)
    cursor = 0;
  __syncthreads();
  int position = before[0], chunk = before[1];
  if (threadIdx.x == 0) {
    s.firstChunk[slot] = chunk;
    if (slot == gridDim.x - 1)
      *s.chunkCount = chunk + (s.counts[slot] + kKdaChunk - 1) / kKdaChunk;
  }
  for (;;) {
    int n = nextSlotTokens(sequences, tokens, slot, &cursor, list, kKdaChunk,
                           counts);
    if (n == 0)
      break;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
      s.order[position + i] = list[i];
    if (threadIdx.x == 0) {
      int32_t *entry = s.chunks + 4 * int64_t(chunk);
      entry[0] = slot;
      entry[1] = position;
      entry[2] = n;
      entry[3] = 0;
    }
    position += n;
    ++chunk;
  }
}

/// kda_chunk, pass 3: everything of a chunk that does not depend on the
/// state, all chunks (and heads) at once. Grid (maxChunks, heads), block
/// 512, dynamic shared memory kdaIntraSharedBytes(dk) (CudaKernels.cpp;
/// the layout carved below).
///
/// With G the chunk's cumulative g (per key channel): Aqk = q_r . k_c
/// e^(G_r - G_c) (c <= r), L = beta_r k_r . k_c e^(G_r - G_c) (c < r),
/// T = (I + L)^-1, and the rows of q e^G, k e^(G_last - G),
/// w = T diag(beta) (k e^G), u = T diag(beta) v. Aqk and L are 16 x 16
/// blocks: the four on the diagonal take e^(G_r - G_c) directly; below
/// them, block (I, J) factors it through the first row of sub-chunk I,
/// e^(G_r - G_I) e^(G_I - G_c), both factors at most 1 for a decaying g
/// (g <= 0, as kda_gate makes it), so the products run on the tensor
/// cores (3xTF32), as do w and u. T by forward substitution in 16-row
/// blocks, fp32.
extern "C" __global__ void __launch_bounds__(512)
    daybreak_kda_intra(const float *q, const float *k, const float *v,
                       const float *g, const float *beta, int64_t tokens,
                       int64_t heads, int64_t dk, int64_t dv, double scale,
                       int32_t l2norm, KdaScratch s) {
  extern __shared__ __align__(16) float shared[];
  const int chunk = blockIdx.x, h = blockIdx.y;
  if (chunk >= *s.chunkCount)
    return;
  const int DK = int(kdaKeyPad(dk)), KP = DK + 4, CP = kKdaChunk + 4;
  const int64_t DV = kdaValuePad(dv);
  float *qs = shared;                              // q          [C, KP]
  float *ks = qs + kKdaChunk * KP;                 // k, k e^G   [C, KP]
  float *gs = ks + kKdaChunk * KP;                 // G          [C, KP]
  float *stage = gs + kKdaChunk * KP;              // operands, V tiles
  float *aqk = stage + 80 * (KP > 132 ? KP : 132); // Aqk      [C, CP]
  float *lt = aqk + kKdaChunk * CP;                // L, T diag(beta)
  float *bs = lt + kKdaChunk * CP;                 // beta       [C]
  float *last = bs + kKdaChunk;                    // G_last     [DK]
  int *tok = reinterpret_cast<int *>(last + DK);   // tokens     [C]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int32_t *entry = s.chunks + 4 * int64_t(chunk);
  const int64_t begin = entry[1];
  const int n = entry[2];
  const int64_t rowBase = int64_t(h) * tokens + begin; // position rows

  // 1. The chunk's tokens and beta, then its q, k, g rows (zeros past n
  // and dk), 8 values of each a thread in flight.
  for (int r = tid; r < kKdaChunk; r += blockDim.x) {
    int t = r < n ? s.order[begin + r] : -1;
    tok[r] = t;
    bs[r] = t >= 0 ? beta[int64_t(t) * heads + h] : 0.0f;
  }
  __syncthreads();
  for (int base = 0; base < kKdaChunk * DK; base += 8 * blockDim.x) {
    float qv[8], kv[8], gv[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      int i = base + j * blockDim.x + tid, r = i / DK, d = i - r * DK;
      qv[j] = kv[j] = gv[j] = 0.0f;
      if (r < n && d < dk) {
        int64_t at = (int64_t(tok[r]) * heads + h) * dk + d;
        qv[j] = q[at];
        kv[j] = k[at];
        gv[j] = g[at];
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      int i = base + j * blockDim.x + tid, r = i / DK, d = i - r * DK;
      if (r < kKdaChunk) {
        qs[r * KP + d] = qv[j];
        ks[r * KP + d] = kv[j];
        gs[r * KP + d] = gv[j];
      }
    }
  }
  __syncthreads();
  // 2. G = cumsum(g); L2 norms (a warp a row), q times the scale.
  for (int d = tid; d < DK; d += blockDim.x) {
    float acc = 0.0f;
    for (int r = 0; r < kKdaChunk; ++r) {
      acc += gs[r * KP + d];
      gs[r * KP + d] = acc;
    }
    last[d] = acc; // rows past n add nothing: G_last = G_(n-1)
  }
  for (int r = warp; r < n; r += blockDim.x >> 5) {
    float qq = 0.0f, kk = 0.0f;
    for (int d = lane; d < DK; d += 32) {
      qq = fmaf(qs[r * KP + d], qs[r * KP + d], qq);
      kk = fmaf(ks[r * KP + d], ks[r * KP + d], kk);
    }
    qq = warpSum(qq);
    kk = warpSum(kk);
    float qf = float(scale), kf = 1.0f;
    if (l2norm) {
      qf = float(scale / sqrt(double(qq) + 1e-6));
      kf = float(1.0 / sqrt(double(kk) + 1e-6));
    }
    for (int d = lane; d < DK; d += 32) {
      qs[r * KP + d] *= qf;
      ks[r * KP + d] *= kf;
    }
  }
  // Above the diagonal: zero (Aqk, and T's upper triangle).
  for (int i = tid; i < kKdaChunk * kKdaChunk; i += blockDim.x) {
    int r = i / kKdaChunk, c = i % kKdaChunk;
    if (c > r)
      aqk[r * CP + c] = lt[r * CP + c] = 0.0f;
  }
  __syncthreads();
  // 3. The diagonal blocks, e^(G_r - G_c) taken directly. L's diagonal
  // holds T's (1); its own (zero) is never read.
  for (int p = tid; p < 4 * 136; p += blockDim.x) {
    int b = p / 136, r, c;
    trianglePair(p % 136, r, c);
    r += 16 * b;
    c += 16 * b;
    float qk = 0.0f, kk = 0.0f;
    for (int d = 0; d < DK; ++d) {
      float kc = ks[c * KP + d] * __expf(gs[r * KP + d] - gs[c * KP + d]);
      qk = fmaf(qs[r * KP + d], kc, qk);
      kk = fmaf(ks[r * KP + d], kc, kk);
    }
    aqk[r * CP + c] = qk;
    lt[r * CP + c] = c < r ? bs[r] * kk : 1.0f;
  }
  // 4. The blocks below the diagonal, sub-chunk I's rows against the 16 I
  // rows before it, on the tensor cores. stage: rows 0-15 q e^(G - G_I),
  // 16-31 k e^(G - G_I) of sub-chunk I; rows 32 on k e^(G_I - G) of the
  // rows before it.
  for (int I = 1; I < 4; ++I) {
    const float *ref = gs + 16 * I * KP;
    for (int i = tid; i < (32 + 16 * I) * DK; i += blockDim.x) {
      int r = i / DK, d = i % DK;
      float value;
      if (r < 32) {
        int row = 16 * I + (r & 15);
        float e = __expf(gs[row * KP + d] - ref[d]);
        value = (r < 16 ? qs : ks)[row * KP + d] * e;
      } else {
        int row = r - 32;
        value = ks[row * KP + d] * __expf(ref[d] - gs[row * KP + d]);
      }
      stage[r * KP + d] = value;
    }
    __syncthreads();
    for (int tile = warp; tile < 4 * I; tile += blockDim.x >> 5) {
      int which = tile / (2 * I), nt = tile % (2 * I); // 0: Aqk, 1: L
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mmaTile3xTf32(acc, stage + 16 * which * KP, KP,
                    stage + (32 + 8 * nt) * KP, 1, KP, DK);
      for (int e = 0; e < 4; ++e) {
        int r = 16 * I + (lane >> 2) + (e >> 1) * 8;
        int c = 8 * nt + 2 * (lane & 3) + (e & 1);
        if (which == 0)
          aqk[r * CP + c] = acc[e];
        else
          lt[r * CP + c] = bs[r] * acc[e];
      }
    }
    __syncthreads();
  }
  // 5. T = (I + L)^-1, unit lower triangular, in blocks of 16 rows: the
  // diagonal blocks by substitution, all four at once (T[r, j] = -sum_{j
  // <= c < r} L[r, c] T[c, j]); then block row I from the rows above it:
  // T_IJ = -T_II M_IJ, M_IJ = sum_{J <= K < I} L_IK T_KJ.
  for (int i = 1; i < 16; ++i) {
    int b = tid >> 4, j = tid & 15;
    bool active = b < 4 && j < i;
    float value = 0.0f;
    if (active) {
      int r = 16 * b + i;
      for (int c = j; c < i; ++c)
        value -= lt[r * CP + 16 * b + c] * lt[(16 * b + c) * CP + 16 * b + j];
    }
    __syncthreads();
    if (active)
      lt[(16 * b + i) * CP + 16 * b + j] = value;
    __syncthreads();
  }
  for (int I = 1; I < 4; ++I) {
    float part[3];
    int entries = I * 256;
    for (int e = tid, x = 0; e < entries; e += blockDim.x, ++x) {
      int J = e >> 8, a = (e >> 4) & 15, col = e & 15;
      float m = 0.0f;
      for (int K = J; K < I; ++K)
        for (int y = K == J ? col : 0; y < 16; ++y)
          m += lt[(16 * I + a) * CP + 16 * K + y] *
               lt[(16 * K + y) * CP + 16 * J + col];
      part[x] = m;
    }
    __syncthreads();
    for (int e = tid, x = 0; e < entries; e += blockDim.x, ++x)
      lt[(16 * I + ((e >> 4) & 15)) * CP + 16 * (e >> 8) + (e & 15)] = part[x];
    __syncthreads();
    for (int e = tid, x = 0; e < entries; e += blockDim.x, ++x) {
      int J = e >> 8, a = (e >> 4) & 15, col = e & 15;
      float t = lt[(16 * I + a) * CP + 16 * J + col]; // T_II's diagonal: 1
      for (int y = 0; y < a; ++y)
        t += lt[(16 * I + a) * CP + 16 * I + y] *
             lt[(16 * I + y) * CP + 16 * J + col];
      part[x] = -t;
    }
    __syncthreads();
    for (int e = tid, x = 0; e < entries; e += blockDim.x, ++x)
      lt[(16 * I + ((e >> 4) & 15)) * CP + 16 * (e >> 8) + (e & 15)] = part[x];
    __syncthreads();
  }
  // 6. T diag(beta); the rows of q e^G and k e^(G_last - G) out, k e^G in
  // place; Aqk and e^(G_last) out.
  for (int i = tid; i < kKdaChunk * kKdaChunk; i += blockDim.x) {
    int r = i / kKdaChunk, c = i % kKdaChunk;
    lt[r * CP + c] *= bs[c];
  }
  for (int i = tid; i < kKdaChunk * DK; i += blockDim.x) {
    int r = i / DK, d = i % DK;
    float gr = gs[r * KP + d], kr = ks[r * KP + d];
    if (r < n) {
      s.qg[(rowBase + r) * DK + d] = qs[r * KP + d] * __expf(gr);
      s.kg[(rowBase + r) * DK + d] = kr * __expf(last[d] - gr);
    }
    ks[r * KP + d] = kr * __expf(gr);
  }
  for (int i = tid; i < n * kKdaChunk; i += blockDim.x) {
    int r = i / kKdaChunk, c = i % kKdaChunk;
    s.aqk[(rowBase + r) * kKdaChunk + c] = aqk[r * CP + c];
  }
  for (int d = tid; d < DK; d += blockDim.x)
    s.decay[(int64_t(h) * s.maxChunks + chunk) * DK + d] = __expf(last[d]);
  __syncthreads();
  // 7. w = T diag(beta) (k e^G), on the tensor cores: 4 x DK / 8 tiles.
  for (int tile = warp; tile < 4 * (DK / 8); tile += blockDim.x >> 5) {
    int mt = tile / (DK / 8), nt = tile % (DK / 8);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mmaTile3xTf32(acc, lt + 16 * mt * CP, CP, ks + 8 * nt, KP, 1, kKdaChunk);
    for (int e = 0; e < 4; ++e) {
      int r = 16 * mt + (lane >> 2) + (e >> 1) * 8;
      if (r < n)
        s.w[(rowBase + r) * DK + 8 * nt + 2 * (lane & 3) + (e & 1)] = acc[e];
    }
  }
  // 8. u = T diag(beta) v, 128 value columns at a time (stage: [C, 132]).
  for (int64_t v0 = 0; v0 < DV; v0 += 128) {
    const int width = int(DV - v0 < 128 ? DV - v0 : 128);
    __syncthreads(); // the stage is free
    for (int base = 0; base < kKdaChunk * width; base += 8 * blockDim.x) {
      float x[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        int i = base + j * blockDim.x + tid, r = i / width, c = i - r * width;
        x[j] = r < n && v0 + c < dv
                   ? v[(int64_t(tok[r]) * heads + h) * dv + v0 + c]
                   : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        int i = base + j * blockDim.x + tid, r = i / width, c = i - r * width;
        if (r < kKdaChunk)
          stage[r * 132 + c] = x[j];
      }
    }
    __syncthreads();
    for (int tile = warp; tile < 4 * (width / 8); tile += blockDim.x >> 5) {
      int mt = tile / (width / 8), nt = tile % (width / 8);
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mmaTile3xTf32(acc, lt + 16 * mt * CP, CP, stage + 8 * nt, 132, 1,
                    kKdaChunk);
      for (int e = 0; e < 4; ++e) {
        int r = 16 * mt + (lane >> 2) + (e >> 1) * 8;
        if (r < n)
          s.u[(rowBase + r) * DV + v0 + 8 * nt + 2 * (lane & 3) + (e & 1)] =
              acc[e];
      }
    }
  }
}

/// kda_chunk, pass 4: the state through a slot's chunks in order. Grid
/// (slots, heads, DvP / 32), block 512, dynamic shared memory
/// kdaInterSharedBytes(dk) (CudaKernels.cpp). A chunk is three products on
/// the block's [Dk, 32] state slice S (fp32, CUDA cores; a lane a column):
///   U = u - w S;  O = (q e^G) S + Aqk U;  S <- e^(G_last) S + (k e^(G_last
///   - G))^T U.
/// The next chunk's operands stream in (cp.async) as the current ones are
/// done with: w and u after U, q e^G, Aqk and the tokens after O, k
/// e^(G_last - G) and the decay after the update. A slot's chunks are
/// consecutive, its positions too: nothing but the first is looked up.
extern "C" __global__ void __launch_bounds__(512)
    daybreak_kda_inter(uint8_t *state, int64_t slotBytes, int32_t stateBf16,
                       int64_t tokens, int64_t heads, int64_t dk, int64_t dv,
                       KdaScratch s, float *out) {
  extern __shared__ __align__(16) float shared[];
  const int slot = blockIdx.x, h = blockIdx.y;
  const int total = s.counts[slot];
  const int count = (total + kKdaChunk - 1) / kKdaChunk;
  if (count == 0)
    return; // no token: the state stays
  const int first = s.firstChunk[slot];
  const int64_t begin0 = s.chunks[4 * int64_t(first) + 1];
  const int DK = int(kdaKeyPad(dk)), KP = DK + 4, AP = kKdaChunk + 4;
  const int64_t DV = kdaValuePad(dv);
  const int64_t e0 = int64_t(blockIdx.z) * kKdaColumns;
  float *ws = shared;                             // w              [C, KP]
  float *qgs = ws + kKdaChunk * KP;               // q e^G          [C, KP]
  float *kgs = qgs + kKdaChunk * KP;              // k e^(Gl - G)   [C, KP]
  float *uin = kgs + kKdaChunk * KP;              // u's columns    [C, 32]
  float *us = uin + kKdaChunk * kKdaColumns;      // U              [C, 32]
  float *as = us + kKdaChunk * kKdaColumns;       // Aqk            [C, AP]
  float *ss = as + kKdaChunk * AP;                // S slice        [DK, 32]
  float *decay = ss + DK * kKdaColumns;           // e^(G_last)     [DK]
  int *tok = reinterpret_cast<int *>(decay + DK); // tokens    [C]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int warps = blockDim.x >> 5;
  const int64_t column = e0 + lane;
  uint8_t *slotState = state + slot * slotBytes;
  const int64_t stateBase = int64_t(h) * dk * dv;

  for (int i = tid; i < DK * kKdaColumns; i += blockDim.x) {
    int d = i / kKdaColumns, c = i % kKdaColumns;
    ss[i] = d < dk && e0 + c < dv
                ? stateLoad(slotState, stateBf16, stateBase + d * dv + e0 + c)
                : 0.0f;
  }

  // Chunk c: positions begin0 + 64 c on, its rows in the scratch from
  // `base`; rows past n zero-filled.
  auto length = [&](int c) {
    return total - kKdaChunk * c < kKdaChunk ? total - kKdaChunk * c
                                             : kKdaChunk;
  };
  auto rowBase = [&](int c) {
    return int64_t(h) * tokens + begin0 + int64_t(kKdaChunk) * c;
  };
  auto rows = [&](float *dst, int pitch, const float *src, int64_t stride,
                  int width, int n) {
    int pieces = width / 4;
    for (int i = tid; i < kKdaChunk * pieces; i += blockDim.x) {
      int r = i / pieces, c = 4 * (i - r * pieces);
      bool valid = r < n;
      copyAsync16(dst + r * pitch + c, valid ? src + r * stride + c : src,
                  valid);
    }
  };
  auto issueWu = [&](int c) {
    if (c < count) {
      int64_t base = rowBase(c);
      rows(ws, KP, s.w + base * DK, DK, DK, length(c));
      rows(uin, kKdaColumns, s.u + base * DV + e0, DV, kKdaColumns, length(c));
    }
    copyAsyncCommit();
  };
  auto issueQa = [&](int c) {
    if (c < count) {
      int64_t base = rowBase(c);
      int n = length(c);
      rows(qgs, KP, s.qg + base * DK, DK, DK, n);
      rows(as, AP, s.aqk + base * kKdaChunk, kKdaChunk, kKdaChunk, n);
      const int32_t *src = s.order + begin0 + int64_t(kKdaChunk) * c;
      for (int r = tid; r < n; r += blockDim.x)
        copyAsync4(tok + r, src + r, true);
    }
    copyAsyncCommit();
  };
  auto issueKd = [&](int c) {
    if (c < count) {
      rows(kgs, KP, s.kg + rowBase(c) * DK, DK, DK, length(c));
      const float *src = s.decay + (int64_t(h) * s.maxChunks + first + c) * DK;
      for (int i = tid; i < DK / 4; i += blockDim.x)
        copyAsync16(decay + 4 * i, src + 4 * i, true);
    }
    copyAsyncCommit();
  };
  issueWu(0);
  issueQa(0);
  issueKd(0);

  const int r0 = 4 * warp; // this warp's rows of U and O
  for (int c = 0; c < count; ++c) {
    const int n = length(c);
    // U = u - w S.
    copyAsyncWait<2>();
    __syncthreads();
    {
      float acc[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        acc[i] = uin[(r0 + i) * kKdaColumns + lane];
      for (int d = 0; d < DK; d += 4) {
        float s0 = ss[d * kKdaColumns + lane];
        float s1 = ss[(d + 1) * kKdaColumns + lane];
        float s2 = ss[(d + 2) * kKdaColumns + lane];
        float s3 = ss[(d + 3) * kKdaColumns + lane];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float4 x = *reinterpret_cast<const float4 *>(ws + (r0 + i) * KP + d);
          acc[i] = fmaf(-x.x, s0, acc[i]);
          acc[i] = fmaf(-x.y, s1, acc[i]);
          acc[i] = fmaf(-x.z, s2, acc[i]);
          acc[i] = fmaf(-x.w, s3, acc[i]);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
        us[(r0 + i) * kKdaColumns + lane] = acc[i];
    }
    __syncthreads();
    issueWu(c + 1);
    // O = (q e^G) S + Aqk U.
    copyAsyncWait<2>();
    __syncthreads();
    {
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int d = 0; d < DK; d += 4) {
        float s0 = ss[d * kKdaColumns + lane];
        float s1 = ss[(d + 1) * kKdaColumns + lane];
        float s2 = ss[(d + 2) * kKdaColumns + lane];
        float s3 = ss[(d + 3) * kKdaColumns + lane];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float4 x = *reinterpret_cast<const float4 *>(qgs + (r0 + i) * KP + d);
          acc[i] = fmaf(x.x, s0, acc[i]);
          acc[i] = fmaf(x.y, s1, acc[i]);
          acc[i] = fmaf(x.z, s2, acc[i]);
          acc[i] = fmaf(x.w, s3, acc[i]);
        }
      }
      // Aqk is zero above the diagonal: rows r0 + i need j < r0 + 4.
      for (int j = 0; j < r0 + 4; j += 4) {
        float u0 = us[j * kKdaColumns + lane];
        float u1 = us[(j + 1) * kKdaColumns + lane];
        float u2 = us[(j + 2) * kKdaColumns + lane];
        float u3 = us[(j + 3) * kKdaColumns + lane];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float4 a = *reinterpret_cast<const float4 *>(as + (r0 + i) * AP + j);
          acc[i] = fmaf(a.x, u0, acc[i]);
          acc[i] = fmaf(a.y, u1, acc[i]);
          acc[i] = fmaf(a.z, u2, acc[i]);
          acc[i] = fmaf(a.w, u3, acc[i]);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (r0 + i < n && column < dv)
          out[(int64_t(tok[r0 + i]) * heads + h) * dv + column] = acc[i];
    }
    __syncthreads();
    issueQa(c + 1);
    // S <- e^(G_last) S + (k e^(G_last - G))^T U: a warp 8 key rows.
    copyAsyncWait<2>();
    __syncthreads();
    for (int d0 = 8 * warp; d0 < DK; d0 += 8 * warps) {
      float acc[8];
#pragma unroll
      for (int i = 0; i < 8; ++i)
        acc[i] = decay[d0 + i] * ss[(d0 + i) * kKdaColumns + lane];
      for (int r = 0; r < kKdaChunk; ++r) {
        float u = us[r * kKdaColumns + lane];
        float4 x0 = *reinterpret_cast<const float4 *>(kgs + r * KP + d0);
        float4 x1 = *reinterpret_cast<const float4 *>(kgs + r * KP + d0 + 4);
        acc[0] = fmaf(x0.x, u, acc[0]);
        acc[1] = fmaf(x0.y, u, acc[1]);
        acc[2] = fmaf(x0.z, u, acc[2]);
        acc[3] = fmaf(x0.w, u, acc[3]);
        acc[4] = fmaf(x1.x, u, acc[4]);
        acc[5] = fmaf(x1.y, u, acc[5]);
        acc[6] = fmaf(x1.z, u, acc[6]);
        acc[7] = fmaf(x1.w, u, acc[7]);
      }
#pragma unroll
      for (int i = 0; i < 8; ++i)
        ss[(d0 + i) * kKdaColumns + lane] = acc[i];
    }
    __syncthreads();
    issueKd(c + 1);
  }
  copyAsyncWait<0>();
  for (int i = tid; i < DK * kKdaColumns; i += blockDim.x) {
    int d = i / kKdaColumns, c = i % kKdaColumns;
    if (d < dk && e0 + c < dv)
      stateStore(slotState, stateBf16, stateBase + d * dv + e0 + c, ss[i]);
  }
}

namespace {

/// kda_step's per-token work on a thread's part of the state slice, `s`:
/// 16 key rows (this warp's, 16 warp + i) by 2 value columns (this lane's,
/// c0 + j), in registers. Loads the token's operands (q, k, e^g into
/// shared memory), then S <- diag(e^g) S, u = beta (v - S^T k),
/// S += k u^T, o = S^T q, the sums over key rows across warps through
/// `part` (two [8][128] halves).
__device__ __forceinline__ void
kdaStepToken(float (&s)[16][2], const float *q, const float *k, const float *v,
             const float *g, const float *beta, int row, int dk, int dv, int c0,
             double scale, int32_t l2norm, float *qs, float *ks, float *gs,
             float (*part)[kKdaStepColumns], float (*norms)[8], float *out) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  float qd = 0.0f, kd = 0.0f;
  if (tid < kKdaMaxKeyDim) {
    float gd = 0.0f;
    if (tid < dk) {
      qd = q[row * dk + tid];
      kd = k[row * dk + tid];
      gd = __expf(g[row * dk + tid]);
    }
    qs[tid] = qd;
    ks[tid] = kd;
    gs[tid] = gd;
  }
  float vv[2];
#pragma unroll
  for (int j = 0; j < 2; ++j)
    vv[j] = c0 + j < dv ? v[row * dv + c0 + j] : 0.0f;
  const float b = beta[row];
  float qq = warpSum(qd * qd), kk = warpSum(kd * kd);
  if (lane == 0) {
    norms[0][warp] = qq;
    norms[1][warp] = kk;
  }
  __syncthreads();
  float qf = float(scale), kf = 1.0f;
  if (l2norm) {
    float qt = 0.0f, kt = 0.0f;
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      qt += norms[0][w];
      kt += norms[1][w];
    }
    qf = float(scale / sqrt(double(qt) + 1e-6));
    kf = float(1.0 / sqrt(double(kt) + 1e-6));
  }
  const int d0 = 16 * warp;
  float acc[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    float e = gs[d0 + i], kx = ks[d0 + i] * kf;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      s[i][j] *= e;
      acc[j] = fmaf(kx, s[i][j], acc[j]);
    }
  }
  *reinterpret_cast<float2 *>(&part[warp][2 * lane]) =
      make_float2(acc[0], acc[1]);
  __syncthreads();
  float u[2] = {0.0f, 0.0f};
#pragma unroll
  for (int w = 0; w < 8; ++w) {
    float2 x = *reinterpret_cast<const float2 *>(&part[w][2 * lane]);
    u[0] += x.x;
    u[1] += x.y;
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    u[j] = b * (vv[j] - u[j]);
    acc[j] = 0.0f;
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    float kx = ks[d0 + i] * kf, qx = qs[d0 + i] * qf;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      s[i][j] = fmaf(kx, u[j], s[i][j]);
      acc[j] = fmaf(qx, s[i][j], acc[j]);
    }
  }
  *reinterpret_cast<float2 *>(&part[8 + warp][2 * lane]) =
      make_float2(acc[0], acc[1]);
  __syncthreads();
  if (warp == 0) {
    float o[2] = {0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      float2 x = *reinterpret_cast<const float2 *>(&part[8 + w][2 * lane]);
      o[0] += x.x;
      o[1] += x.y;
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
      if (c0 + j < dv)
        out[row * dv + c0 + j] = o[j];
  }
  __syncthreads(); // qs, ks, gs and part are rewritten next token
}

} // namespace

/// A thread's part of a kda_step block's state slice: 16 key rows from
/// `first` (rows past dk hold zeros and are not stored), value columns c0
/// and c0 + 1 (past dv: zeros); the block's token `t`, its slot and head.
struct KdaStepSlice {
  uint8_t *slotState;
  int first, dv, c0, rows, slot, h;
  unsigned t;
  bool vec, bf16;
};

/// kda_step's shared memory.
struct KdaStepShared {
  float qs[kKdaMaxKeyDim], ks[kKdaMaxKeyDim], gs[kKdaMaxKeyDim];
  __align__(16) float part[16][kKdaStepColumns];
  float norms[2][8];
  int list[kKdaChunk];
  int counts[34];
  int votes[kKdaStepThreads / 32];
  int64_t cursor;
};

#define DAYBREAK_KDA_STEP_PARAMS                                               \
  const float *q, const float *k, const float *v, const float *g,              \
      const float *beta, uint8_t *state, int64_t slotBytes, int32_t stateBf16, \
      const int32_t *sequences, int64_t tokens, int64_t heads, int64_t slots,  \
      int64_t dk, int64_t dv, double scale, int32_t l2norm, float *out

/// This thread's slice, from the block index (the grid: see
/// daybreak_kda_step; the launcher keeps it under 2^31 blocks).
__device__ __forceinline__ KdaStepSlice kdaStepSliceOf(
    uint8_t *state, int64_t slotBytes, int32_t stateBf16,
    const int32_t *sequences, int64_t heads, int64_t dk, int64_t dv) {
  const unsigned slices =
      unsigned((dv + kKdaStepColumns - 1) / kKdaStepColumns);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  KdaStepSlice x;
  x.t = blockIdx.x / (unsigned(heads) * slices);
  x.h = int(blockIdx.x / slices % unsigned(heads));
  x.slot = sequences[x.t];
  x.slotState = state + x.slot * slotBytes;
  x.dv = int(dv);
  x.c0 = int(blockIdx.x % slices) * kKdaStepColumns + 2 * lane;
  const int d0 = 16 * warp;
  x.first = (x.h * int(dk) + d0) * x.dv + x.c0;
  x.bf16 = stateBf16;
  x.vec = !stateBf16 && dv % 2 == 0 && x.c0 + 2 <= dv &&
          (reinterpret_cast<unsigned long long>(state) & 7) == 0 &&
          slotBytes % 8 == 0;
  x.rows = int(dk) - d0 < 16 ? max(int(dk) - d0, 0) : 16;
  return x;
}

/// The slice into registers: 8-byte loads where the rows allow (f32, Dv
/// even), issued before anything else.
__device__ __forceinline__ void kdaStepLoad(float (&s)[16][2],
                                            const KdaStepSlice &x) {
  if (x.vec) {
    const float *p = reinterpret_cast<const float *>(x.slotState) + x.first;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float2 y = i < x.rows ? *reinterpret_cast<const float2 *>(p + i * x.dv)
                            : make_float2(0.0f, 0.0f);
      s[i][0] = y.x;
      s[i][1] = y.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        s[i][j] = i < x.rows && x.c0 + j < x.dv
                      ? stateLoad(x.slotState, x.bf16, x.first + i * x.dv + j)
                      : 0.0f;
  }
}

__device__ __forceinline__ void kdaStepStore(const float (&s)[16][2],
                                             const KdaStepSlice &x) {
  if (x.vec) {
    float *p = reinterpret_cast<float *>(x.slotState) + x.first;
#pragma unroll
    for (int i = 0; i < 16; ++i)
      if (i < x.rows)
        *reinterpret_cast<float2 *>(p + i * x.dv) =
            make_float2(s[i][0], s[i][1]);
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        if (i < x.rows && x.c0 + j < x.dv)
          stateStore(x.slotState, x.bf16, x.first + i * x.dv + j, s[i][j]);
  }
}

/// A slot's tokens in step order from the block's own (the step form over
/// several tokens of a slot; not decode), on a slice of its own loaded
/// again (the kernel's registers are not modified yet) and stored once at
/// the end, so that a bf16 state rounds once a step, as on the CPU. Out of
/// line and from the kernel's parameters alone, so that the decode path
/// keeps nothing live for it: the same loop inline made the step 16 %
/// slower at B = 256.
__device__ __noinline__ void kdaStepSlot(KdaStepShared &sh,
                                         DAYBREAK_KDA_STEP_PARAMS) {
  const KdaStepSlice x =
      kdaStepSliceOf(state, slotBytes, stateBf16, sequences, heads, dk, dv);
  if (threadIdx.x == 0)
    sh.cursor = x.t + 1; // read after kdaStepToken's barriers
  float s[16][2];
  kdaStepLoad(s, x);
  for (int token = int(x.t);;) {
    kdaStepToken(s, q, k, v, g, beta, token * int(heads) + x.h, int(dk), x.dv,
                 x.c0, scale, l2norm, sh.qs, sh.ks, sh.gs, sh.part, sh.norms,
                 out);
    if (!nextSlotTokens(sequences, tokens, x.slot, &sh.cursor, sh.list, 1,
                        sh.counts))
      break;
    token = sh.list[0];
  }
  kdaStepStore(s, x);
}

/// kda_step: a 1-D grid of tokens x heads x ceil(Dv / 64) blocks, the
/// column slices of a head adjacent, then heads, then tokens (a token's
/// blocks read its slot's state front to back together: 4 % faster than
/// token-major order at B = 256 on the H200), block 256 (dk <= 128). A
/// block's [Dk, 64] slice of the state lives in registers (a warp 16 key
/// rows, a lane 2 value columns: 32 values a thread), loaded first: 32 KiB
/// in flight a block, three blocks an SM. Whether the slot has earlier or
/// later tokens in the step is found while it loads: the block of a slot's
/// first token runs them all in order, the others leave. (Scanning for the
/// later tokens after the compute, before the stores, made the step 34 %
/// slower at B = 8 and 7 % at B = 256. A [Dk, Dv] head in shared memory by
/// one bulk copy, three blocks an SM, and a persistent grid streaming heads
/// through two or three shared-memory stages were slower still:
/// bench/kda_step_variants.cu.)
extern "C" __global__ void __launch_bounds__(kKdaStepThreads, 3)
    daybreak_kda_step(DAYBREAK_KDA_STEP_PARAMS) {
  __shared__ KdaStepShared sh;
  const KdaStepSlice x =
      kdaStepSliceOf(state, slotBytes, stateBf16, sequences, heads, dk, dv);
  if (x.slot < 0 || x.slot >= slots)
    return;
  float s[16][2];
  kdaStepLoad(s, x);
  bool earlier = false, later = false;
  for (unsigned i = threadIdx.x; i < unsigned(tokens); i += blockDim.x) {
    bool same = sequences[i] == x.slot;
    earlier |= same && i < x.t;
    later |= same && i > x.t;
  }
  // Both answers in one barrier: warp votes, bit 0 earlier, bit 1 later
  // (two __syncthreads_or made the step 15 % slower at B = 8 and 64).
  const int warp = threadIdx.x >> 5;
  int vote =
      (__any_sync(~0u, earlier) ? 1 : 0) | (__any_sync(~0u, later) ? 2 : 0);
  if ((threadIdx.x & 31) == 0)
    sh.votes[warp] = vote;
  __syncthreads();
  vote = 0;
#pragma unroll
  for (int w = 0; w < kKdaStepThreads / 32; ++w)
    vote |= sh.votes[w];
  if (vote & 1)
    return;
  if (!(vote & 2)) { // decode
    kdaStepToken(s, q, k, v, g, beta, int(x.t) * int(heads) + x.h, int(dk),
                 x.dv, x.c0, scale, l2norm, sh.qs, sh.ks, sh.gs, sh.part,
                 sh.norms, out);
    kdaStepStore(s, x);
    return;
  }
  kdaStepSlot(sh, q, k, v, g, beta, state, slotBytes, stateBf16, sequences,
              tokens, heads, slots, dk, dv, scale, l2norm, out);
}

#undef DAYBREAK_KDA_STEP_PARAMS
