//===- CudaSparseMla.cuh - Sparse MLA on the tensor cores ----*- CUDA -*-===//
//
// Part of Daybreak. Included by CudaKernels.cu (one translation unit, after
// CudaAttention.cuh, whose tcChunk, tcLoad, tcStore and ldmatrixX4 it
// uses, and CudaGemm.cuh, whose mbarrier and wgmma helpers it uses).
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
    return ((token * heads + h0 + h) * splits + blockIdx.z) *
           (valueDim + kSparseHeaderFloats);
  };

  // This block's rows [r0, r1) of the selection (splitRows: whole tiles of
  // the rows up to the last valid one); of them the valid ones (inside [0,
  // maxSeqLen)): how many, and where the last is, so that the walk stops
  // there (a selection's -1 padding is at its end).
  const bool live = seq >= 0 && seq < kv.batch;
  int64_t r0 = 0, r1 = topK;
  if (kSplit && live) {
    splitRows(selectionEnd(chosen, topK, kv.maxSeqLen, &validCount), splits,
              kSmlaKeys, r0, r1);
    __syncthreads(); // every thread has read validCount; it is reset below
  }
  if (tid == 0) {
    validCount = 0;
    lastValid = -1;
  }
  __syncthreads();
  if (live) {
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
      dst = head + kSparseHeaderFloats;
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
        // Partials too start 16 bytes in (kSparseHeaderFloats), the value
        // dim being a multiple of 16: aligned pairs either way.
        *reinterpret_cast<float2 *>(dst + col) = make_float2(
            o[2 * n + x][2 * i] * factor, o[2 * n + x][2 * i + 1] * factor);
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
  beginDependent();
  sparseMlaTc<false>(q, kv, indices, topK, sequences, heads, scale, valueDim,
                     sinks, out, 1, nullptr);
}

/// daybreak_sparse_mla_tc split over the selected rows: grid (tokens,
/// ceil(heads / 64), splits); block z takes its rows of splitRows (tiles of
/// kSmlaKeys) and leaves per head its running max, denominator, row count and
/// unnormalised sums in `partial` [tokens, heads, splits, valueDim + 4] for
/// daybreak_sparse_attention_combine, which adds the sinks.
extern "C" __global__ void __launch_bounds__(kSmlaThreads, 1)
    daybreak_sparse_mla_tc_split(const float *q, Cache kv,
                                 const int32_t *indices, int64_t topK,
                                 const int32_t *sequences, int64_t heads,
                                 float scale, int32_t valueDim, float *partial,
                                 int32_t splits) {
  beginDependent();
  sparseMlaTc<true>(q, kv, indices, topK, sequences, heads, scale, valueDim,
                    nullptr, nullptr, splits, partial);
}

//===----------------------------------------------------------------------===//
// daybreak_sparse_mla_wg and daybreak_sparse_mla_wg_split: the same
// attention for DeepSeek's FP8 latent rows (576 values: 512 e4m3 codes in
// four 128-column blocks with fp32 power-of-two scales, then 64 bf16 rope
// values; value dim 512) on the warpgroup MMA, after FlashMLA's sparse
// prefill kernels. The same roundings as daybreak_sparse_mla_tc (Q and P to
// bf16, fp32 sums, denominators over the rounded P), so the same oracle and
// bound hold; the sums run in another order.
//
// A block of three warpgroups takes one token and 64 of its heads, and
// walks the selected rows in tiles of 64:
// - warpgroup 0 gathers: each warp loads 16 rows of a tile into registers
//   a tile ahead (lane l of 8 rows' codes takes 16 codes of row l / 4 at a
//   time, so that every store below hits all 32 banks), widens them to
//   bf16 times their scales (exact) into a free buffer once the MMA has
//   released it, and marks the buffer full (mbarriers; two buffers);
// - warpgroups 1 and 2 multiply: S = Q K^T for the 64 heads and their own
//   32 keys of the tile (m64n32k16 over the 576 columns, Q and K from
//   shared memory), the online softmax with the other warpgroup's row
//   maxima exchanged through shared memory, P (bf16, the whole tile's 64
//   keys from both warpgroups) into shared memory, then O += P V for their
//   own 256 value columns (m64n256k16, V read from the same tile as the
//   N-major operand: no transposed copy). A tile's P V runs while the next
//   tile's S is issued; the buffer goes back to the gatherers when both
//   have completed.
//
// Shared memory, every tile in 64-column blocks of 64 rows x 128 bytes with
// the 128-byte swizzle (16-byte chunk c of row r at c ^ r % 8), each block
// 1024-byte aligned: Q (9 blocks), two K/V tiles (9 blocks each), P (one
// block), the maxima and sums exchanged, the tiles' valid-row masks and
// the barriers, the valid rows' count and last one and the selection's
// end: sparseMlaWgSharedBytes, 226 KiB.
//
// Roofline per 64-key tile and block: 8.9 MFLOP; the MMA reads 300 KB of
// shared memory (Q twice for S, K once, P twice, V once) and the gatherers
// write 74 KB. S's m64n32 steps read 3 KB each, which at 128 bytes a clock
// bounds S by shared memory: ~2,700 clocks a tile with P V, ~760 TFLOP/s
// for the GPU (measured: 318, bench/NOTES.md).
//===----------------------------------------------------------------------===//

namespace {

constexpr int kSmwThreads = 384; // the gatherers and two MMA warpgroups
constexpr int kSmwKeys = 64;     // selected rows a tile
constexpr int kSmwBlocks = 9;    // 64-column blocks of a 576-wide row
constexpr uint32_t kSmwBlockBytes = 64 * 128;
constexpr uint32_t kSmwTileBytes = kSmwBlocks * kSmwBlockBytes;
constexpr int kSmwValueDim = 512;
constexpr int kSmwRowBytes = 656; // 512 codes, 4 scales, 64 bf16
constexpr int kSmwTail = 528;     // where the bf16 rope values start

extern __shared__ __align__(1024) uint8_t smwShared[];

/// The wgmma descriptor of 128-byte-swizzled bf16 rows in shared memory at
/// `address` (1024-byte aligned, plus 32 bytes a later k16 step of a
/// K-major operand): `lbo` the offset between 64-element blocks of an
/// N-major operand (unused K-major), `sbo` between groups of 8 rows.
__device__ __forceinline__ uint64_t smwDescriptor(uint32_t address,
                                                  uint32_t lbo, uint32_t sbo) {
  return uint64_t((address & 0x3FFFF) >> 4) | uint64_t(lbo >> 4) << 16 |
         uint64_t(sbo >> 4) << 32 | uint64_t(1) << 62;
}

/// d (+)= a b for one m64n32k16 wgmma, bf16 operands K-major from shared
/// memory, fp32 accumulators; `accumulate` 0 overwrites d.
__device__ __forceinline__ void smwMma32(float (&d)[16], uint64_t a, uint64_t b,
                                         uint32_t accumulate) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %18, 0;\n\t"
               "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
               "%14, %15}, %16, %17, p, 1, 1, 0, 0;\n\t}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
                 "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
                 "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                 "+f"(d[14]), "+f"(d[15])
               : "l"(a), "l"(b), "r"(accumulate));
}

/// d += a b for one m64n256k16 wgmma: a K-major, b N-major (the tile's
/// rows are b's K), bf16 from shared memory, fp32 accumulators.
__device__ __forceinline__ void smwMma256N(float (&d)[128], uint64_t a,
                                           uint64_t b) {
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, 1, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
      "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "
      "%58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "
      "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, "
      "%86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "
      "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "
      "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, "
      "%122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 1;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),
        "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
        "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]),
        "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),
        "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]),
        "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]),
        "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]),
        "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]),
        "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),
        "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
        "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b));
}

/// A barrier for the two MMA warpgroups (named barrier `id`, 256 threads).
__device__ __forceinline__ void smwMmaBarrier(int id) {
  asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory");
}

/// Eight e4m3 codes (two words) times their power-of-two scale as eight
/// bf16 (exact, see CudaAttention.cuh).
__device__ __forceinline__ uint4 smwWiden(uint32_t lo, uint32_t hi,
                                          float scale) {
  uint32_t h[4];
  e4m3x4ToHalf2(lo, h[0], h[1]);
  e4m3x4ToHalf2(hi, h[2], h[3]);
  return make_uint4(tcScaledPair(h[0], scale), tcScaledPair(h[1], scale),
                    tcScaledPair(h[2], scale), tcScaledPair(h[3], scale));
}

/// Byte offset of 16-byte chunk `chunk` (0..71) of row `row` in a tile of
/// 64-column blocks with the 128-byte swizzle.
__device__ __forceinline__ uint32_t smwChunk(int row, int chunk) {
  return uint32_t(chunk >> 3) * kSmwBlockBytes + uint32_t(row) * 128 +
         uint32_t(((chunk & 7) ^ (row & 7)) << 4);
}

template <bool kSplit>
__device__ __forceinline__ void
sparseMlaWg(const float *q, const Cache &kv, const int32_t *indices,
            int64_t topK, const int32_t *sequences, int64_t heads, float scale,
            const float *sinks, float *out, int32_t splits, float *partial) {
  uint8_t *base =
      smwShared + ((1024 - (sharedAddress(smwShared) & 1023)) & 1023);
  uint8_t *qs = base;
  uint8_t *tiles = base + kSmwTileBytes; // [2][kSmwTileBytes]
  uint8_t *ps = base + 3 * kSmwTileBytes;
  float *maxima = reinterpret_cast<float *>(ps + kSmwBlockBytes); // [2][64]
  float *sums = maxima + 2 * 64;                                  // [2][64]
  uint16_t *masks = reinterpret_cast<uint16_t *>(sums + 2 * 64);  // [2][4]
  uint64_t *full = reinterpret_cast<uint64_t *>(masks + 8);       // [2]
  uint64_t *empty = full + 2;                                     // [2]
  // (In the dynamic shared memory: a static variable would take 1024
  // bytes of it for the alignment.)
  int &validCount = *reinterpret_cast<int *>(empty + 2);
  int &lastValid = (&validCount)[1];
  int &selectionSlot = (&validCount)[2]; // selectionEnd's reduction

  const int tid = threadIdx.x, lane = tid & 31, warpgroup = tid >> 7;
  const int64_t token = blockIdx.x, h0 = int64_t(blockIdx.y) * 64;
  const int hn = int(heads - h0 < 64 ? heads - h0 : 64);
  const int64_t seq = sequences ? sequences[token] : 0;
  const int32_t *chosen = indices + token * topK;
  const float negInf = -__int_as_float(0x7F800000);
  auto partialAt = [&](int64_t h) {
    return ((token * heads + h0 + h) * splits + blockIdx.z) *
           (kSmwValueDim + kSparseHeaderFloats);
  };

  // This block's rows [r0, r1) of the selection and, of them, how many are
  // valid and where the last is (as daybreak_sparse_mla_tc; the selection's
  // end through a word of its own, so no barrier before the reset below).
  const bool live = seq >= 0 && seq < kv.batch;
  int64_t r0 = 0, r1 = topK;
  if (kSplit && live)
    splitRows(selectionEnd(chosen, topK, kv.maxSeqLen, &selectionSlot), splits,
              kSmwKeys, r0, r1);
  if (tid == 0) {
    validCount = 0;
    lastValid = -1;
    for (int b = 0; b < 2; ++b) {
      barrierInit(&full[b], 4);  // lane 0 of each gathering warp
      barrierInit(&empty[b], 8); // lane 0 of each MMA warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (live) {
    int count = 0, last = -1;
    for (int64_t i = r0 + tid; i < r1; i += kSmwThreads) {
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
  // Q rounded to bf16 into its swizzled blocks, rows past hn zero: 8
  // columns (one 16-byte chunk) a step, 12 steps a thread.
#pragma unroll 4
  for (int c = tid; c < 64 * 72; c += kSmwThreads) {
    const int r = c / 72, chunk = c - r * 72;
    float4 x0 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), x1 = x0;
    if (r < hn) {
      const float4 *src = reinterpret_cast<const float4 *>(
          q + (token * heads + h0 + r) * 576 + chunk * 8);
      x0 = src[0];
      x1 = src[1];
    }
    *reinterpret_cast<uint4 *>(qs + smwChunk(r, chunk)) =
        make_uint4(smlaBf16Pair(x0.x, x0.y), smlaBf16Pair(x0.z, x0.w),
                   smlaBf16Pair(x1.x, x1.y), smlaBf16Pair(x1.z, x1.w));
  }
  // The tensor cores read what these stores wrote.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const int valid = validCount;
  if (valid == 0) { // no row: zeros, or a partial that weighs nothing
    if (kSplit) {
      if (tid < hn)
        partial[partialAt(tid) + 2] = 0.0f;
    } else {
      for (int64_t e = tid; e < int64_t(hn) * kSmwValueDim; e += kSmwThreads)
        out[(token * heads + h0) * kSmwValueDim + e] = 0.0f;
    }
    return;
  }
  const int64_t rEnd = int64_t(lastValid) + 1;
  const int tileCount = int((rEnd - r0 + kSmwKeys - 1) / kSmwKeys);

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 120;");
    // The gatherers: warp w takes rows 16 w .. 16 w + 15 of every tile,
    // found by lanes 0-15 (16-31 repeat them) in three steps a tile apart
    // (index, page, row: as daybreak_sparse_mla_tc).
    const int w = tid >> 5;
    struct RowRef {
      int32_t page, within; // page < 0: no row
    };
    const int32_t pageSize = int32_t(kv.ringRows ? 1 : kv.pageSize);
    const int32_t pagesPerSeq =
        int32_t((kv.maxSeqLen + kv.pageSize - 1) / kv.pageSize);
    auto index = [&](int tile) {
      int64_t i = r0 + int64_t(tile) * kSmwKeys + 16 * w + (lane & 15);
      return i < rEnd ? chosen[i] : int32_t(-1);
    };
    auto locate = [&](int32_t pos) -> RowRef {
      if (pos < 0 || pos >= kv.maxSeqLen)
        return {-1, 0};
      if (kv.ringRows)
        return {int32_t(seq * kv.ringRows + pos % int32_t(kv.ringRows)), 0};
      int32_t logical = int32_t(seq) * pagesPerSeq + pos / pageSize;
      return {kv.pageTable ? kv.pageTable[logical] : logical, pos % pageSize};
    };
    // A tile's raw rows: for each group of 8 rows, lane l holds 16 codes
    // (columns 64 j + 16 (l % 4), j = 0..7) of row l / 4 of the group,
    // scale l % 4 of that row, and two 16-byte chunks of the rope values
    // (chunk l % 8 of rows l / 8 and 4 + l / 8).
    uint4 codes[2][8], tail[2][2];
    uint32_t scaleBits[2];
    uint16_t rowMask = 0;
    auto fetch = [&](RowRef ref) {
      const uint8_t *mine =
          ref.page >= 0
              ? kv.base +
                    (int64_t(ref.page) * pageSize + ref.within) * kv.bytesPerRow
              : nullptr;
      rowMask = uint16_t(__ballot_sync(0xffffffffu, mine != nullptr));
      const uint64_t address = reinterpret_cast<uint64_t>(mine);
#pragma unroll
      for (int gi = 0; gi < 2; ++gi) {
        const uint8_t *row = reinterpret_cast<const uint8_t *>(
            __shfl_sync(0xffffffffu, address, 8 * gi + (lane >> 2)));
#pragma unroll
        for (int j = 0; j < 8; ++j)
          codes[gi][j] = row ? __ldg(reinterpret_cast<const uint4 *>(
                                   row + 16 * (4 * j + (lane & 3))))
                             : make_uint4(0, 0, 0, 0);
        scaleBits[gi] = row ? __ldg(reinterpret_cast<const uint32_t *>(
                                  row + 512 + 4 * (lane & 3)))
                            : 0u;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const uint8_t *tailRow = reinterpret_cast<const uint8_t *>(
              __shfl_sync(0xffffffffu, address, 8 * gi + 4 * i + (lane >> 3)));
          tail[gi][i] = tailRow ? __ldg(reinterpret_cast<const uint4 *>(
                                      tailRow + kSmwTail + 16 * (lane & 7)))
                                : make_uint4(0, 0, 0, 0);
        }
      }
    };
    fetch(locate(index(0)));
    RowRef ahead = locate(index(1));
    int32_t aheadIndex = index(2);
    for (int n = 0; n < tileCount; ++n) {
      const int b = n & 1;
      uint8_t *tile = tiles + b * kSmwTileBytes;
      barrierWait(&empty[b], ((n >> 1) & 1) ^ 1);
#pragma unroll
      for (int gi = 0; gi < 2; ++gi) {
        const int row = 16 * w + 8 * gi + (lane >> 2);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          // Columns 64 j .. are in scale block j / 2.
          const float s = __uint_as_float(
              __shfl_sync(0xffffffffu, scaleBits[gi], (lane & ~3) | (j >> 1)));
          const int chunk = 8 * j + 2 * (lane & 3);
          *reinterpret_cast<uint4 *>(tile + smwChunk(row, chunk)) =
              smwWiden(codes[gi][j].x, codes[gi][j].y, s);
          *reinterpret_cast<uint4 *>(tile + smwChunk(row, chunk + 1)) =
              smwWiden(codes[gi][j].z, codes[gi][j].w, s);
        }
#pragma unroll
        for (int i = 0; i < 2; ++i)
          *reinterpret_cast<uint4 *>(
              tile + smwChunk(16 * w + 8 * gi + 4 * i + (lane >> 3),
                              64 + (lane & 7))) = tail[gi][i];
      }
      if (lane == 0)
        masks[4 * b + w] = rowMask;
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      __syncwarp();
      if (lane == 0)
        barrierArrive(&full[b]);
      if (n + 1 < tileCount) {
        fetch(ahead);
        const int32_t loaded = aheadIndex;
        aheadIndex = index(n + 3);
        ahead = locate(loaded);
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 192;");
  // The MMA: warpgroup wg takes keys 32 wg .. 32 wg + 31 of each tile for
  // S, and value columns 256 wg .. 256 wg + 255 for O. Thread (warp wi,
  // lane 4 g + t) holds rows 16 wi + g and + 8; accumulator 4 j + 2 i + c
  // is row 16 wi + g + 8 i, column 8 j + 2 t + c (wgmma's order).
  const int wg = warpgroup - 1, wi = (tid >> 5) & 3;
  const int g = lane >> 2, t = lane & 3;
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i)
    o[i] = 0.0f;
  float rowMax[2], rowSum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = 16 * wi + g + 8 * i;
    rowMax[i] = negInf;
    if (!kSplit && sinks && row < hn) {
      // The sink as a key of weight e^(sink - max): counted once.
      rowMax[i] = sinks[h0 + row];
      rowSum[i] = wg == 0 && t == 0 ? 1.0f : 0.0f;
    }
  }
  // S's accumulators live across the tiles: only the wgmma writes them
  // (the first k-step of a tile overwrites), so nothing else defines them
  // while the previous tile's P V is in flight.
  float s[16];
#pragma unroll
  for (int i = 0; i < 16; ++i)
    s[i] = 0.0f;
  const uint32_t qAddress = sharedAddress(qs);
  const uint32_t tilesAddress = sharedAddress(tiles);
  const uint32_t pAddress = sharedAddress(ps);
  // (A do-while: valid > 0 makes tileCount at least 1, and a loop the
  // compiler knows to run keeps the accumulators out of a zero-trip path.)
  int n = 0;
  do {
    const int b = n & 1;
    const uint32_t tile = tilesAddress + uint32_t(b) * kSmwTileBytes;
    barrierWait(&full[b], (n >> 1) & 1);
    // S = Q K^T over the 9 blocks of 4 k16 steps.
    wgmmaFence();
#pragma unroll
    for (int kb = 0; kb < kSmwBlocks; ++kb)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        smwMma32(
            s,
            smwDescriptor(qAddress + kb * kSmwBlockBytes + 32 * kk, 16, 1024),
            smwDescriptor(tile + kb * kSmwBlockBytes + 4096 * wg + 32 * kk, 16,
                          1024),
            kb != 0 || kk != 0);
    wgmmaCommit();
    // This S and the previous tile's P V (issued back to back) have
    // completed: that tile's buffer goes back. (Waiting for the P V alone,
    // wait_group 1, makes ptxas serialise every wgmma here: C7514.)
    wgmmaWait<0>();
    if (n > 0 && lane == 0)
      barrierArrive(&empty[b ^ 1]);
    fenceAccumulators(s);
    fenceAccumulators(o);

    // Scale and mask, the tile maximum over both warpgroups.
    const uint64_t mask =
        *reinterpret_cast<const volatile uint64_t *>(masks + 4 * b);
    float logit[16], tileMax[2] = {negInf, negInf};
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = 32 * wg + 8 * j + 2 * t + (e & 1);
        logit[4 * j + e] = (mask >> key) & 1 ? s[4 * j + e] * scale : negInf;
        tileMax[e >> 1] = fmaxf(tileMax[e >> 1], logit[4 * j + e]);
      }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      tileMax[i] = quadMax(tileMax[i]);
      if (t == 0)
        maxima[wg * 64 + 16 * wi + g + 8 * i] = tileMax[i];
    }
    smwMmaBarrier(1);
    float correction[2], m[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float other = maxima[(wg ^ 1) * 64 + 16 * wi + g + 8 * i];
      m[i] = fmaxf(rowMax[i], fmaxf(tileMax[i], other));
      correction[i] = m[i] == rowMax[i] ? 1.0f : expf(rowMax[i] - m[i]);
      rowMax[i] = m[i];
      rowSum[i] *= correction[i];
    }
    // P, rounded to bf16, into its swizzled block; the sums add the
    // rounded P.
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float l0 = logit[4 * j + 2 * i], l1 = logit[4 * j + 2 * i + 1];
        const float p0 = l0 == negInf ? 0.0f : expf(l0 - m[i]);
        const float p1 = l1 == negInf ? 0.0f : expf(l1 - m[i]);
        const uint32_t pair = smlaBf16Pair(p0, p1);
        rowSum[i] +=
            __uint_as_float(pair << 16) + __uint_as_float(pair & 0xFFFF0000u);
        const int row = 16 * wi + g + 8 * i;
        *reinterpret_cast<uint32_t *>(ps + smwChunk(row, 4 * wg + j) + 4 * t) =
            pair;
      }
    if (!__all_sync(0xffffffffu,
                    correction[0] == 1.0f && correction[1] == 1.0f)) {
#pragma unroll
      for (int j = 0; j < 32; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          o[4 * j + e] *= correction[e >> 1];
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    smwMmaBarrier(2);
    // O += P V: the tile's 64 keys in 4 k16 steps, V N-major from the
    // tile (blocks 4 wg .. 4 wg + 3, 16 rows a step).
    wgmmaFence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      smwMma256N(o, smwDescriptor(pAddress + 32 * kk, 16, 1024),
                 smwDescriptor(tile + 4 * wg * kSmwBlockBytes + 2048 * kk,
                               kSmwBlockBytes, 1024));
    wgmmaCommit();
  } while (++n < tileCount);
  wgmmaWait<0>();
  fenceAccumulators(o);

  // The row sums: over the quad, then both warpgroups.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    rowSum[i] = quadSum(rowSum[i]);
    if (t == 0)
      sums[wg * 64 + 16 * wi + g + 8 * i] = rowSum[i];
  }
  smwMmaBarrier(1);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = 16 * wi + g + 8 * i;
    if (row >= hn)
      continue;
    const float sum = rowSum[i] + sums[(wg ^ 1) * 64 + row];
    float *dst;
    float factor = 1.0f;
    if (kSplit) {
      float *head = partial + partialAt(row);
      if (wg == 0 && t == 0) {
        head[0] = rowMax[i];
        head[1] = sum;
        head[2] = float(valid);
      }
      dst = head + kSparseHeaderFloats;
    } else {
      dst = out + (token * heads + h0 + row) * kSmwValueDim;
      factor = 1.0f / sum;
    }
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int col = 256 * wg + 8 * j + 2 * t;
      // Partials too start 16 bytes in (kSparseHeaderFloats): aligned
      // pairs either way.
      *reinterpret_cast<float2 *>(dst + col) =
          make_float2(o[4 * j + 2 * i] * factor, o[4 * j + 2 * i + 1] * factor);
    }
  }
}

} // namespace

/// Sparse MLA on the warpgroup MMA (see above): grid (tokens, ceil(heads /
/// 64)), block 384, CudaKernels::sparseMlaWgSharedBytes() of dynamic shared
/// memory; DeepSeek's FP8 latent rows only (CudaKernels::
/// sparseMlaWgApplies). A token with no valid row gets zeros.
extern "C" __global__ void __launch_bounds__(kSmwThreads, 1)
    daybreak_sparse_mla_wg(const float *q, Cache kv, const int32_t *indices,
                           int64_t topK, const int32_t *sequences,
                           int64_t heads, float scale, const float *sinks,
                           float *out) {
  beginDependent();
  sparseMlaWg<false>(q, kv, indices, topK, sequences, heads, scale, sinks, out,
                     1, nullptr);
}

/// daybreak_sparse_mla_wg split over the selected rows, as
/// daybreak_sparse_mla_tc_split: grid (tokens, ceil(heads / 64), splits),
/// partials [tokens, heads, splits, 512 + 4] for
/// daybreak_sparse_attention_combine.
extern "C" __global__ void __launch_bounds__(kSmwThreads, 1)
    daybreak_sparse_mla_wg_split(const float *q, Cache kv,
                                 const int32_t *indices, int64_t topK,
                                 const int32_t *sequences, int64_t heads,
                                 float scale, float *partial, int32_t splits) {
  beginDependent();
  sparseMlaWg<true>(q, kv, indices, topK, sequences, heads, scale, nullptr,
                    nullptr, splits, partial);
}
