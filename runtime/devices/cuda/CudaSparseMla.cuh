//===- CudaSparseMla.cuh - Sparse MLA on the tensor cores ----*- CUDA -*-===//
//
// Part of Daybreak. Included by CudaKernels.cu (one translation unit, after
// CudaAttention.cuh, whose tcChunk, tcLoad, tcStore and ldmatrixX4 it
// uses).
//
//===----------------------------------------------------------------------===//
//
// daybreak_sparse_mla_tc and daybreak_sparse_mla_tc_split: DeepSeek Sparse
// Attention's absorbed MLA (cpu::sparseAttention's semantics: each token's
// query heads attend to the cache rows its indexer chose; V is the first
// valueDim columns of the same rows) with both products on the tensor
// cores, the heads as the M dimension of the tiles, after FlashMLA's sparse
// kernels.
//
// Data flow. A block of 8 warps takes one token and 64 of its heads (rows
// of the tiles; a head group of fewer heads pads with zero rows) and walks
// the token's selected rows in tiles of 32: each lane of every warp finds
// one row of the next tile (index, page table) and its warp shares the
// address by shuffle; each thread loads its 8-column chunks of the tile's
// rows (16 bytes of bf16, or 8 e4m3 codes and their block's scale, or 16
// bytes of the bf16 tail) into registers while the warps multiply the
// current tile out of shared memory, and widens them to bf16 into the other
// buffer afterwards (double-buffered; one block barrier a tile). Q, rounded
// to bf16 once, stays in shared memory for the whole walk.
//
// Warp (m, n), m = warp % 4 and n = warp / 4, owns rows 16m..16m+15:
// - S = Q K^T for its rows and the tile's keys 16n..16n+15, over the whole
//   row width (576 for DeepSeek: 36 k-steps);
// - the online softmax: the pair (m, 0), (m, 1) exchange their tile maxima
//   through shared memory (a 64-thread named barrier, not the block's), so
//   both hold the same running max; each keeps its own partial sums (their
//   corrections are the same), added at the end;
// - P (bf16) goes to shared memory, a second pair barrier, and the warp adds
//   P V for all 32 keys to its output columns: the first or the second half
//   of valueDim (256 of DeepSeek's 512: 128 fp32 accumulators a thread).
//
// Precision: not the exact mode's. Every cache value is exactly a bf16 (an
// e4m3 code times a power-of-two scale, or a bf16; see CudaAttention.cuh),
// so K and V are exact; Q and the probabilities P are rounded to bf16
// (round to nearest even, relative error 2^-9), the sums are fp32 in the
// tensor core, the softmax fp32 on the CUDA cores, and the denominators sum
// the rounded P so that the weights stay normalised. Q in three bf16 parts,
// as the dense tensor-core attention keeps it, would need 3 x 64 x 584 x 2
// bytes of shared memory for DeepSeek's rows (219 KiB) next to the tiles.
// CudaKernelsTest.SparseAttentionTensorCores derives its bound from these
// roundings. CudaKernels::sparseAttention takes this path only when asked
// (AttentionPath::TensorCores, or PreferTensorCores from `daybreak-run
// --attention=tensor-cores`).
//
// Roofline (DeepSeek-V3.2: 128 heads, top-2048 of 576-wide rows, value dim
// 512): 2 x 128 x 2048 x (576 + 512) = 570 MFLOP a token, 4.7 TFLOP for an
// 8K prefill. Per 32-key tile an SM issues 8 x (72 + 64) mma.m16n8k16 and
// reads ~430 KB of shared memory by ldmatrix (Q again for every tile): at
// 128 bytes a clock the reads, not the tensor cores, bound it, near a
// third of the H200's dense bf16 rate. Decode reads each selected row
// (656 bytes in fp8) once per 64 heads.
//
//===----------------------------------------------------------------------===//

namespace {

constexpr int kSmlaThreads = 256; // 8 warps: 4 row tiles x 2 halves
constexpr int kSmlaRows = 64;     // heads a block (the tiles' M)
constexpr int kSmlaKeys = 32;     // selected rows a tile
constexpr int kSmlaMaxWidth = 576;
constexpr int kSmlaMaxValueDim = 512;
constexpr int kSmlaPStride = kSmlaKeys + 8; // bf16 a P row (+16 bytes)
// Rows of a tile a thread loads a chunk of, at most: 256 threads take
// floor(256 / (width / 8)) rows a pass, 3 for the widest rows.
constexpr int kSmlaPasses =
    (kSmlaKeys + kSmlaThreads / (kSmlaMaxWidth / 8) - 1) /
    (kSmlaThreads / (kSmlaMaxWidth / 8));

/// Two floats as a bf16 pair, rounded to nearest even (lo in the low half).
__device__ __forceinline__ uint32_t smlaBf16Pair(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/// ldmatrixX4 at a 32-bit shared-memory address (the loops below add
/// immediate offsets to a base they form once).
template <bool kTrans>
__device__ __forceinline__ void smlaLdsm(uint32_t (&r)[4], uint32_t address) {
  if (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, "
                 "%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, "
                 "[%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
}

/// A barrier for the two warps of row tile m (named barrier 1 + m).
__device__ __forceinline__ void smlaPairBarrier(int m) {
  asm volatile("bar.sync %0, 64;" ::"r"(1 + m) : "memory");
}

/// The tensor-core sparse MLA (see above). Grid (tokens, ceil(heads / 64),
/// splits), block 256, CudaKernels::sparseMlaTcSharedBytes(width) bytes of
/// dynamic shared memory.
template <bool kSplit>
__device__ __forceinline__ void
sparseMlaTc(const float *q, const Cache &kv, const int32_t *indices,
            int64_t topK, const int32_t *sequences, int64_t heads, float scale,
            int valueDim, const float *sinks, float *out, int32_t splits,
            float *partial) {
  extern __shared__ __align__(16) uint8_t smlaShared[];
  __shared__ int validCount, lastValid;
  const int width = int(kv.width), stride = width + 8;
  uint16_t *qs = reinterpret_cast<uint16_t *>(smlaShared); // [64][stride]
  uint16_t *tiles = qs + kSmlaRows * stride;               // [2][32][stride]
  uint16_t *ps = tiles + 2 * kSmlaKeys * stride;           // [64][kSmlaPStride]
  float *exchange =
      reinterpret_cast<float *>(ps + kSmlaRows * kSmlaPStride); // [2][64]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, quad = lane & 3; // mma fragment row, column pair
  const int mw = warp & 3, nw = warp >> 2;
  const int64_t token = blockIdx.x, h0 = int64_t(blockIdx.y) * kSmlaRows;
  const int hn = int(heads - h0 < kSmlaRows ? heads - h0 : kSmlaRows);
  const int64_t seq = sequences ? sequences[token] : 0;
  const int32_t *chosen = indices + token * topK;
  const float negInf = -__int_as_float(0x7F800000);
  auto partialAt = [&](int64_t h) {
    return ((token * heads + h0 + h) * splits + blockIdx.z) * (valueDim + 3);
  };

  // This block's rows [r0, r1) of the selection; of them the valid ones
  // (inside [0, maxSeqLen)): how many, and where the last is, so that the
  // walk stops there (a selection's -1 padding is at its end).
  int64_t perSplit = kSplit ? (topK + splits - 1) / splits : topK;
  int64_t r0 = kSplit ? int64_t(blockIdx.z) * perSplit : 0;
  int64_t r1 = kSplit && r0 + perSplit < topK ? r0 + perSplit : topK;
  if (tid == 0) {
    validCount = 0;
    lastValid = -1;
  }
  __syncthreads();
  if (seq >= 0 && seq < kv.batch) {
    int count = 0, last = -1;
    for (int64_t i = r0 + tid; i < r1; i += kSmlaThreads) {
      int32_t pos = chosen[i];
      if (pos >= 0 && pos < kv.maxSeqLen) {
        ++count;
        last = int(i);
      }
    }
    for (int d = 16; d > 0; d >>= 1) {
      count += __shfl_xor_sync(0xffffffffu, count, d);
      last = max(last, __shfl_xor_sync(0xffffffffu, last, d));
    }
    if (lane == 0 && count > 0) {
      atomicAdd(&validCount, count);
      atomicMax(&lastValid, last);
    }
  }
  __syncthreads();
  const int valid = validCount;
  if (valid == 0) { // no row: zeros, or a partial that weighs nothing
    if (kSplit) {
      if (tid < hn)
        partial[partialAt(tid) + 2] = 0.0f;
    } else {
      for (int64_t e = tid; e < int64_t(hn) * valueDim; e += kSmlaThreads)
        out[(token * heads + h0) * valueDim + e] = 0.0f;
    }
    return;
  }
  const int64_t rEnd = int64_t(lastValid) + 1;

  // Q rounded to bf16, rows past hn zero: 9 loads in flight at a time,
  // then their conversions.
  constexpr int kQBatch = 9;
  for (int e0 = tid * 4; e0 < kSmlaRows * width;
       e0 += kQBatch * kSmlaThreads * 4) {
    float4 x[kQBatch];
#pragma unroll
    for (int b = 0; b < kQBatch; ++b) {
      int e = e0 + b * kSmlaThreads * 4, r = e / width;
      x[b] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (e < kSmlaRows * width && r < hn)
        x[b] = *reinterpret_cast<const float4 *>(
            q + (token * heads + h0 + r) * int64_t(width) + (e - r * width));
    }
#pragma unroll
    for (int b = 0; b < kQBatch; ++b) {
      int e = e0 + b * kSmlaThreads * 4, r = e / width;
      if (e < kSmlaRows * width)
        *reinterpret_cast<uint2 *>(qs + r * stride + (e - r * width)) =
            make_uint2(smlaBf16Pair(x[b].x, x[b].y),
                       smlaBf16Pair(x[b].z, x[b].w));
    }
  }

  // The tiles' chunks: a thread has one 8-column chunk (columns col..
  // col + 7) of rows key0, key0 + keysPerPass, ... of every tile, so that
  // where the chunk lies in a row is found once.
  const int rowChunks = width / 8, keysPerPass = kSmlaThreads / rowChunks;
  const int key0 = tid / rowChunks, col = (tid - key0 * rowChunks) * 8;
  const bool loads = key0 < keysPerPass;
  TcChunk chunk = {kTcNone, 0, 0};
  if (loads) {
    if (kv.format != kFp8Scaled) {
      chunk = {kTcBf16, 2 * col, 0};
    } else {
      int quantized = int(kv.width - kv.tailDim), block = int(kv.scaleBlock);
      chunk = col < quantized
                  ? TcChunk{kTcCodes, col, quantized + 4 * (col / block)}
                  : TcChunk{kTcTail,
                            quantized +
                                4 * (quantized > 0 ? quantized / block : 0) +
                                2 * (col - quantized),
                            0};
    }
  }
  // Where a tile's rows are, in three steps a tile apart so that no warp
  // waits on a dependent load: lane l of every warp loads the index of row
  // l of a tile (index()), a tile later looks its page up (locate(): the
  // page-table load is in flight, its value not yet used), and a tile
  // later still the row's address is formed and its chunks are loaded
  // (fetch()). cacheRow's arithmetic in 32 bits.
  struct RowRef {
    int32_t page, within; // page < 0: no row
  };
  const int32_t pageSize = int32_t(kv.ringRows ? 1 : kv.pageSize);
  const int32_t pagesPerSeq =
      int32_t((kv.maxSeqLen + kv.pageSize - 1) / kv.pageSize);
  auto index = [&](int64_t c0) {
    return c0 + lane < rEnd ? chosen[c0 + lane] : int32_t(-1);
  };
  auto locate = [&](int32_t pos) -> RowRef {
    if (pos < 0 || pos >= kv.maxSeqLen)
      return {-1, 0};
    if (kv.ringRows)
      return {int32_t(seq * kv.ringRows + pos % int32_t(kv.ringRows)), 0};
    int32_t logical = int32_t(seq) * pagesPerSeq + pos / pageSize;
    return {kv.pageTable ? kv.pageTable[logical] : logical, pos % pageSize};
  };
  uint4 raw[kSmlaPasses];
  // Loads this thread's chunks of the tile whose rows `ref` holds (lane l:
  // row l) into `raw`; the tile's valid rows as a mask.
  auto fetch = [&](RowRef ref) {
    const uint8_t *mine =
        ref.page >= 0 ? kv.base + (int64_t(ref.page) * pageSize + ref.within) *
                                      kv.bytesPerRow
                      : nullptr;
    uint32_t mask = __ballot_sync(0xffffffffu, mine != nullptr);
#pragma unroll
    for (int j = 0; j < kSmlaPasses; ++j) {
      int key = key0 + j * keysPerPass;
      const uint8_t *row = reinterpret_cast<const uint8_t *>(
          __shfl_sync(0xffffffffu, reinterpret_cast<uint64_t>(mine), key & 31));
      raw[j] = loads && key < kSmlaKeys ? tcLoad(row, chunk)
                                        : make_uint4(0, 0, 0, 0);
    }
    return mask;
  };
  auto store = [&](uint16_t *tile) {
    if (!loads)
      return;
#pragma unroll
    for (int j = 0; j < kSmlaPasses; ++j) {
      int key = key0 + j * keysPerPass;
      if (key >= kSmlaKeys)
        break;
      tcStore(tile + key * stride + col, raw[j], chunk);
    }
  };

  // Output accumulators: this warp's 16 rows x its half of the value
  // columns, in pairs of 8-column tiles; running max per row (the same in
  // both warps of the pair) and this lane's partial sums.
  const int pairs = valueDim / 16, half = (pairs + 1) / 2;
  const int pair0 = nw * half;
  const int myPairs = min(half, pairs - pair0);
  float o[kSmlaMaxValueDim / 16][4];
#pragma unroll
  for (int j = 0; j < kSmlaMaxValueDim / 16; ++j)
    o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float rowMax[2], rowSum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    int row = 16 * mw + g + 8 * i;
    rowMax[i] = negInf;
    if (!kSplit && sinks && row < hn) {
      // The sink as a key of weight e^(sink - max): counted once.
      rowMax[i] = sinks[h0 + row];
      rowSum[i] = nw == 0 && quad == 0 ? 1.0f : 0.0f;
    }
  }

  // This lane's ldmatrix addresses (bytes in shared memory): Q's and P's
  // A fragments, K's B fragments (keys 16 nw..), V's (transposed; this
  // warp's columns), each tile's at the buffer's offset.
  const uint32_t qAddress = sharedAddress(
      qs + (16 * mw + (lane & 7) + ((lane >> 3) & 1) * 8) * stride +
      (lane >> 4) * 8);
  const uint32_t pAddress = sharedAddress(
      ps + (16 * mw + (lane & 7) + ((lane >> 3) & 1) * 8) * kSmlaPStride +
      (lane >> 4) * 8);
  const uint32_t tilesAddress = sharedAddress(tiles);
  const uint32_t tileBytes = uint32_t(kSmlaKeys * stride * 2);
  const uint32_t kOffset =
      uint32_t(2 * ((16 * nw + (lane & 7) + ((lane >> 4) << 3)) * stride +
                    ((lane >> 3) & 1) * 8));
  const uint32_t vOffset =
      uint32_t(2 * (((lane & 7) + ((lane >> 3) & 1) * 8) * stride +
                    (lane >> 4) * 8 + pair0 * 16));
  const uint32_t vStep = uint32_t(2 * 16 * stride); // 16 keys of V
  const int dSteps = width / 16;

  // The first tile at once; the second's rows located, the third's indices
  // loading.
  uint32_t mask = fetch(locate(index(r0)));
  store(tiles);
  RowRef ahead = locate(index(r0 + kSmlaKeys));
  int32_t aheadIndex = index(r0 + 2 * kSmlaKeys);
  __syncthreads();
  int buffer = 0;
  for (int64_t c0 = r0; c0 < rEnd; c0 += kSmlaKeys) {
    const bool more = c0 + kSmlaKeys < rEnd;
    uint32_t nextMask = more ? fetch(ahead) : 0;
    int32_t loaded = aheadIndex; // tile c0 + 64's, loaded a tile ago
    aheadIndex = index(c0 + 3 * kSmlaKeys);
    const uint32_t tileAddress = tilesAddress + uint32_t(buffer) * tileBytes;
    const uint32_t kAddress = tileAddress + kOffset;

    // S = Q K^T: this warp's 16 rows x keys 16 nw .. 16 nw + 15; even and
    // odd k-steps in their own accumulators, so that four mma chains are
    // in flight, not two. DeepSeek's rows (36 k-steps) fully unrolled.
    float s[2][4] = {}, sOdd[2][4] = {};
    auto kStep = [&](float(&acc)[2][4], int ks) {
      uint32_t a[4], b[4];
      smlaLdsm<false>(a, qAddress + uint32_t(ks * 32));
      smlaLdsm<false>(b, kAddress + uint32_t(ks * 32));
      mma16816<kWeightBF16>(acc[0], a, make_uint2(b[0], b[1]));
      mma16816<kWeightBF16>(acc[1], a, make_uint2(b[2], b[3]));
    };
    if (dSteps == kSmlaMaxWidth / 16) {
      // Fragments a step ahead: step ks + 1's ldmatrix are issued before
      // step ks's mma, which so find theirs loaded.
      uint32_t a[2][4], b[2][4];
      smlaLdsm<false>(a[0], qAddress);
      smlaLdsm<false>(b[0], kAddress);
#pragma unroll
      for (int ks = 0; ks < kSmlaMaxWidth / 16; ++ks) {
        const int cur = ks & 1;
        if (ks + 1 < kSmlaMaxWidth / 16) {
          smlaLdsm<false>(a[cur ^ 1], qAddress + uint32_t((ks + 1) * 32));
          smlaLdsm<false>(b[cur ^ 1], kAddress + uint32_t((ks + 1) * 32));
        }
        float(&acc)[2][4] = cur ? sOdd : s;
        mma16816<kWeightBF16>(acc[0], a[cur], make_uint2(b[cur][0], b[cur][1]));
        mma16816<kWeightBF16>(acc[1], a[cur], make_uint2(b[cur][2], b[cur][3]));
      }
    } else {
#pragma unroll 4
      for (int ks = 0; ks < kSmlaMaxWidth / 16; ks += 2) {
        if (ks >= dSteps)
          break;
        kStep(s, ks);
        if (ks + 1 >= dSteps)
          break;
        kStep(sOdd, ks + 1);
      }
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[j][e] += sOdd[j][e];
    ahead = locate(loaded); // its page-table load overlaps the rest
    // Scale and mask (C element e: row g + 8 (e >> 1), key 8 j + 2 quad +
    // (e & 1) of the warp's 16), the tile maximum over the pair.
    float tileMax[2] = {negInf, negInf};
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int key = 16 * nw + 8 * j + 2 * quad + (e & 1);
        s[j][e] = (mask >> key) & 1 ? s[j][e] * scale : negInf;
        tileMax[e >> 1] = fmaxf(tileMax[e >> 1], s[j][e]);
      }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      tileMax[i] = quadMax(tileMax[i]);
      if (quad == 0)
        exchange[nw * kSmlaRows + 16 * mw + g + 8 * i] = tileMax[i];
    }
    smlaPairBarrier(mw);
    float correction[2], m[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float other = exchange[(nw ^ 1) * kSmlaRows + 16 * mw + g + 8 * i];
      m[i] = fmaxf(rowMax[i], fmaxf(tileMax[i], other));
      correction[i] = m[i] == rowMax[i] ? 1.0f : expf(rowMax[i] - m[i]);
      rowMax[i] = m[i];
      rowSum[i] *= correction[i];
    }
    // P, rounded to bf16, into shared memory; the sums add the rounded P.
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float p0 = s[j][2 * i] == negInf ? 0.0f : expf(s[j][2 * i] - m[i]);
        float p1 =
            s[j][2 * i + 1] == negInf ? 0.0f : expf(s[j][2 * i + 1] - m[i]);
        uint32_t pair = smlaBf16Pair(p0, p1);
        rowSum[i] +=
            __uint_as_float(pair << 16) + __uint_as_float(pair & 0xFFFF0000u);
        *reinterpret_cast<uint32_t *>(ps +
                                      (16 * mw + g + 8 * i) * kSmlaPStride +
                                      16 * nw + 8 * j + 2 * quad) = pair;
      }
    // (Once the running maxima settle, most tiles change none.)
    if (!__all_sync(0xffffffffu,
                    correction[0] == 1.0f && correction[1] == 1.0f)) {
#pragma unroll
      for (int j = 0; j < kSmlaMaxValueDim / 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          o[j][e] *= correction[e >> 1];
    }
    smlaPairBarrier(mw);
    // O += P V: the tile's 32 keys (two k-steps) x this warp's columns.
#pragma unroll
    for (int kk = 0; kk < kSmlaKeys / 16; ++kk) {
      uint32_t a[4];
      smlaLdsm<false>(a, pAddress + uint32_t(kk * 32));
      const uint32_t vAddress = tileAddress + vOffset + uint32_t(kk) * vStep;
      if (myPairs == kSmlaMaxValueDim / 32) {
        // DeepSeek's 512 columns: B fragments a pair ahead.
        uint32_t b[2][4];
        smlaLdsm<true>(b[0], vAddress);
#pragma unroll
        for (int n = 0; n < kSmlaMaxValueDim / 32; ++n) {
          const int cur = n & 1;
          if (n + 1 < kSmlaMaxValueDim / 32)
            smlaLdsm<true>(b[cur ^ 1], vAddress + uint32_t((n + 1) * 32));
          mma16816<kWeightBF16>(o[2 * n], a, make_uint2(b[cur][0], b[cur][1]));
          mma16816<kWeightBF16>(o[2 * n + 1], a,
                                make_uint2(b[cur][2], b[cur][3]));
        }
        continue;
      }
#pragma unroll
      for (int n = 0; n < kSmlaMaxValueDim / 32; ++n) {
        if (n >= myPairs)
          break;
        uint32_t b[4];
        smlaLdsm<true>(b, vAddress + uint32_t(n * 32));
        mma16816<kWeightBF16>(o[2 * n], a, make_uint2(b[0], b[1]));
        mma16816<kWeightBF16>(o[2 * n + 1], a, make_uint2(b[2], b[3]));
      }
    }
    if (more)
      store(tiles + (buffer ^ 1) * kSmlaKeys * stride);
    mask = nextMask;
    __syncthreads();
    buffer ^= 1;
  }

  // The row sums: over the quad, then the pair.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    rowSum[i] = quadSum(rowSum[i]);
    if (quad == 0)
      exchange[nw * kSmlaRows + 16 * mw + g + 8 * i] = rowSum[i];
  }
  smlaPairBarrier(mw);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    int row = 16 * mw + g + 8 * i;
    if (row >= hn)
      continue;
    float sum = rowSum[i] + exchange[(nw ^ 1) * kSmlaRows + row];
    float *dst;
    float factor = 1.0f;
    if (kSplit) {
      float *head = partial + partialAt(row);
      if (nw == 0 && quad == 0) {
        head[0] = rowMax[i];
        head[1] = sum;
        head[2] = float(valid);
      }
      dst = head + 3;
    } else {
      dst = out + (token * heads + h0 + row) * valueDim;
      factor = 1.0f / sum;
    }
#pragma unroll
    for (int n = 0; n < kSmlaMaxValueDim / 32; ++n) {
      if (n >= myPairs)
        break;
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        int col = (pair0 + n) * 16 + 8 * x + 2 * quad;
        float2 v = make_float2(o[2 * n + x][2 * i] * factor,
                               o[2 * n + x][2 * i + 1] * factor);
        if (kSplit) {
          dst[col] = v.x; // partials: valueDim + 3 floats a head, unaligned
          dst[col + 1] = v.y;
        } else {
          *reinterpret_cast<float2 *>(dst + col) = v;
        }
      }
    }
  }
}

} // namespace

/// Sparse MLA on the tensor cores (see above): grid (tokens, ceil(heads /
/// 64)), block 256. Rows are caches of bf16 or fp8 (CudaKernels::
/// sparseMlaTcApplies); a token with no valid row gets zeros.
extern "C" __global__ void __launch_bounds__(kSmlaThreads, 1)
    daybreak_sparse_mla_tc(const float *q, Cache kv, const int32_t *indices,
                           int64_t topK, const int32_t *sequences,
                           int64_t heads, float scale, int32_t valueDim,
                           const float *sinks, float *out) {
  sparseMlaTc<false>(q, kv, indices, topK, sequences, heads, scale, valueDim,
                     sinks, out, 1, nullptr);
}

/// daybreak_sparse_mla_tc split over the selected rows: grid (tokens,
/// ceil(heads / 64), splits); block z takes rows [z, z + 1) x ceil(topK /
/// splits) and leaves per head its running max, denominator, row count and
/// unnormalised sums in `partial` [tokens, heads, splits, valueDim + 3] for
/// daybreak_sparse_attention_combine, which adds the sinks.
extern "C" __global__ void __launch_bounds__(kSmlaThreads, 1)
    daybreak_sparse_mla_tc_split(const float *q, Cache kv,
                                 const int32_t *indices, int64_t topK,
                                 const int32_t *sequences, int64_t heads,
                                 float scale, int32_t valueDim, float *partial,
                                 int32_t splits) {
  sparseMlaTc<true>(q, kv, indices, topK, sequences, heads, scale, valueDim,
                    nullptr, nullptr, splits, partial);
}
