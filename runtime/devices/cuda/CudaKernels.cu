//===- CudaKernels.cu - The CUDA device's library kernels -----------------===//
//
// Device code for every CPU library kernel (runtime/devices/cpu/CpuKernels.h
// holds the semantics): fp32 data, fp32 accumulation (double where the CPU
// kernel's result depends on it: RoPE angles, sigmoid routing, the FP8 scale
// exponent). Compiled to PTX for sm_90a at build time and embedded in the
// runtime (CudaKernelsPtx.h); the host launchers are in CudaKernels.cpp.
//
// Hot kernels whose loops run over a model dimension also exist as templates
// on that dimension (the `_t` kernels below, same parameters and the same
// accumulation order as their generic `extern "C"` kernel). The compiler
// instantiates them for the model's shapes with NVRTC at
// `daybreak-compile --target=cuda` time (compiler/targets/cuda/
// LibraryKernels.cpp) and records each launch's instantiation in the
// artifact; the generic kernels stay the fallback.
//
// Data-dependent errors the CPU kernels report (token, expert, slot,
// sequence or index out of range) cannot fail a launch: each kernel clamps
// or skips instead, as its comment says. The host validates inputs first.
//
// No CUDA runtime API: only built-ins and device math.
//
//===----------------------------------------------------------------------===//

#ifdef __CUDACC_RTC__
// NVRTC has no C library headers.
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

/// Mirrors daybreak::cuda::DeviceCacheView's kernel argument (KernelCache in
/// CudaKernels.cpp): same members, same order, same sizes. Outside the
/// anonymous namespace so specialised kernels' mangled names stay stable.
struct Cache {
  uint8_t *base;
  const int32_t *pageTable; // null: identity
  int64_t width, tailDim, scaleBlock, bytesPerRow;
  int64_t batch, maxSeqLen, pageSize;
  int32_t format;   // 0 F32, 1 BF16, 2 Fp8Scaled
  int32_t ringRows; // a sliding-window ring's rows per slot, or 0: paged
};

/// A weight as stored (daybreak::cuda::DeviceWeight: same members, same
/// order): fp32, bf16, or e4m3 codes scaled per blockN x blockK block by
/// fp32 `scales` ([ceil(rows / blockN), ceil(cols / blockK)] per matrix);
/// stacked rows x cols matrices (experts) follow each other. Null data: no
/// weight (a norm without one, an absent bias).
struct Weight {
  const void *data;
  const float *scales;
  int64_t rows, cols, blockN, blockK;
  int32_t type; // 0 F32, 1 BF16, 2 E4M3, 3 E2M1 (kWeightE2M1)
  int32_t pad;
};

/// The DSA indexer's query prologue (lm.dsa_indexer_scores' rope;
/// KernelQueryRope in CudaKernels.cpp: same members, same order): columns
/// [offset, offset + dim) of each query head rotated at positions[t] as
/// daybreak_rope rotates them (interleaved pairs or half-split; low/high:
/// YaRN's ramp ends). dim 0: no prologue.
struct QueryRope {
  const int32_t *positions;
  int64_t offset, dim;
  double theta, factor, low, high, attentionFactor;
  int32_t interleaved, yarn;
};

/// Whether decode kernels stream their weights with L2's evict-first
/// priority (streamPolicy); the host may clear it at load.
extern "C" __constant__ int32_t daybreak_l2_evict_first = 1;

namespace {

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

enum : int32_t { kF32 = 0, kBF16 = 1, kFp8Scaled = 2 };

__device__ __forceinline__ uint8_t *cacheRow(const Cache &c, int64_t seq,
                                             int64_t pos) {
  if (c.ringRows)
    return c.base + (seq * c.ringRows + pos % c.ringRows) * c.bytesPerRow;
  int64_t pagesPerSeq = (c.maxSeqLen + c.pageSize - 1) / c.pageSize;
  int64_t logical = seq * pagesPerSeq + pos / c.pageSize;
  int64_t page = c.pageTable ? c.pageTable[logical] : logical;
  return c.base + (page * c.pageSize + pos % c.pageSize) * c.bytesPerRow;
}

/// cacheRow as a call: for loops unrolled over many rows whose common case
/// resolves a row without it (a kernel's code is fetched from HBM at each
/// launch of a decode step, so an inlined lookup a row costs time).
__device__ __noinline__ const uint8_t *
cacheRowOutOfLine(const Cache &c, int64_t seq, int64_t pos) {
  return cacheRow(c, seq, pos);
}

__device__ __forceinline__ float bf16ToFloat(uint16_t bits) {
  return __uint_as_float(uint32_t(bits) << 16);
}

/// As numerics::floatToBf16: RNE, NaN stays a quiet NaN.
__device__ __forceinline__ uint16_t floatToBf16(float value) {
  uint32_t bits = __float_as_uint(value);
  if (value != value)
    return uint16_t((bits >> 16) | 0x0040);
  uint32_t lsb = (bits >> 16) & 1;
  return uint16_t((bits + 0x7FFF + lsb) >> 16);
}

/// OCP E4M3FN decode, as numerics::e4m3ToFloat.
__device__ __forceinline__ float e4m3ToFloat(uint8_t bits) {
  if ((bits & 0x7F) == 0x7F)
    return __int_as_float(0x7FC00000);
  int exponent = (bits >> 3) & 0xF, mantissa = bits & 7;
  float magnitude = exponent == 0
                        ? ldexpf(float(mantissa), -9)
                        : ldexpf(float(8 + mantissa), exponent - 7 - 3);
  return (bits & 0x80) ? -magnitude : magnitude;
}

/// e4m3 code to fp32 without a libm call: the code's exponent and mantissa
/// placed in an fp32 and scaled by 2^120 (exact, subnormals included); the
/// NaN codes (0x7F, 0xFF) stay NaN, as e4m3ToFloat.
__device__ __forceinline__ float e4m3Fast(uint32_t code) {
  uint32_t em = code & 0x7F;
  float v = __uint_as_float(((code & 0x80) << 24) | (em << 20)) *
            __int_as_float(0x7B800000); // 2^120
  return em == 0x7F ? __int_as_float(0x7FC00000) : v;
}

/// As numerics::floatToE4m3(value, /*saturate=*/true): RNE, magnitudes
/// above 448 clamp to 448, NaN gives sign | 0x7F.
__device__ __forceinline__ uint8_t floatToE4m3(float value) {
  uint8_t sign = (__float_as_uint(value) >> 31) ? 0x80 : 0;
  if (value != value)
    return sign | 0x7F;
  float a = fabsf(value);
  if (a > 448.0f)
    return sign | 0x7E;
  int exponent;
  frexpf(a, &exponent); // a = m * 2^exponent, m in [.5, 1)
  exponent -= 1;        // a in [2^exponent, 2^(exponent+1))
  if (a == 0.0f || exponent < -6) {
    // Subnormal grid 2^-9 (a rounded value of 8 is the smallest normal).
    float q = rintf(ldexpf(a, 9));
    return sign | uint8_t(q);
  }
  float q = rintf(ldexpf(a, 3 - exponent)); // in [8, 16]
  if (q == 16.0f) {
    q = 8.0f;
    ++exponent;
  }
  int code = ((exponent + 7) << 3) | (int(q) - 8);
  return sign | uint8_t(code > 0x7E ? 0x7E : code);
}

/// Programmatic dependent launch (PDL). A kernel launched with the
/// programmatic-stream-serialization attribute (CudaKernels::tensorGemv on
/// a constant weight, CudaKernels::launchDependent) may start while the
/// kernel before it on the stream still runs; waitForPrevious() returns
/// once that kernel has completed and its writes are visible (at once for
/// an ordinary launch). Before it such a kernel reads only constant data
/// and writes nothing: the workspace planner reuses buffers, so any buffer
/// may still be read or written by an earlier kernel. Completion is
/// transitive: a dependent completes only after its wait, so kernels
/// launched after it stay ordered as before.
__device__ __forceinline__ void waitForPrevious() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

/// Lets the next kernel on the stream start now if it was launched as a
/// programmatic dependent (a no-op otherwise). Safe anywhere in any
/// kernel: the dependent still waits for this one's completion before it
/// reads or writes a buffer; it only starts (and streams its weights)
/// sooner, on the SMs this grid leaves free.
__device__ __forceinline__ void allowDependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

/// The first statement of a kernel CudaKernels::launchDependent starts as a
/// programmatic dependent: waits for the kernel before it (before any
/// buffer is read or written), then lets the next kernel launch, whose
/// launch and block setup then overlap this kernel's work. Triggering after
/// the wait keeps at most one grid waiting behind the running one.
__device__ __forceinline__ void beginDependent() {
  waitForPrevious();
  allowDependents();
}

/// 2^ceil(log2(max(amax, 1e-4) / 448)) as an exponent, as CpuCache.cpp.
/// Weight.type. kWeightE2M1 (MXFP4: packed E2M1 values, E8M0 scale bytes in
/// `scales`) is taken by the decode expert GEMV's E2M1 form alone.
enum : int32_t {
  kWeightF32 = 0,
  kWeightBF16 = 1,
  kWeightE4M3 = 2,
  kWeightE2M1 = 3
};

/// Element `i` of an unscaled weight (a norm's weight, a bias, a table).
__device__ __forceinline__ float weightAt(const Weight &w, int64_t i) {
  switch (w.type) {
  case kWeightBF16:
    return bf16ToFloat(static_cast<const uint16_t *>(w.data)[i]);
  case kWeightE4M3:
    return e4m3ToFloat(static_cast<const uint8_t *>(w.data)[i]);
  default:
    return static_cast<const float *>(w.data)[i];
  }
}

/// Element (row, col) of matrix `matrix`, widened to fp32 (e4m3 times its
/// block's scale: one float multiply, as the CPU kernels).
__device__ __forceinline__ float matrixAt(const Weight &w, int64_t matrix,
                                          int64_t row, int64_t col) {
  int64_t i = (matrix * w.rows + row) * w.cols + col;
  if (w.type != kWeightE4M3)
    return weightAt(w, i);
  int64_t scaleRows = (w.rows + w.blockN - 1) / w.blockN;
  int64_t scaleCols = (w.cols + w.blockK - 1) / w.blockK;
  float scale = w.scales[(matrix * scaleRows + row / w.blockN) * scaleCols +
                         col / w.blockK];
  return e4m3ToFloat(static_cast<const uint8_t *>(w.data)[i]) * scale;
}

__device__ __forceinline__ int fp8ScaleExponent(float amax) {
  double ratio = fmax(double(amax), 1e-4) / 448.0;
  int exponent;
  double mantissa = frexp(ratio, &exponent);
  return mantissa == 0.5 ? exponent - 1 : exponent;
}

/// The L2 policy of weights a decode kernel streams once (the GEMVs' and
/// expert GEMVs' matrices, the LM head): their lines are the first L2
/// evicts. A decode step streams gigabytes through the 50 MB L2 between two
/// launches of a kernel; at the default priority that flushes everything
/// else, so each small kernel (a norm, a cache write, the indexer, sparse
/// attention) fetched its code, and read the activations, caches and norm
/// weights, from HBM. A hint only: results are the same.
/// DAYBREAK_CUDA_L2_EVICT_FIRST=0 at load sets daybreak_l2_evict_first to
/// 0 (CudaKernels::load), and the streams keep L2's normal priority.
__device__ __forceinline__ uint64_t streamPolicy() {
  uint64_t policy;
  if (daybreak_l2_evict_first)
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  else
    asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

/// 16 bytes of a streamed weight: not kept in L1, 256-byte L2 fills, evicted
/// first from L2 (streamPolicy).
__device__ __forceinline__ uint4 ldgStream(const void *p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 "
      "{%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(streamPolicy()));
  return v;
}

/// __ldg of 16 bytes of a streamed weight (the same L1 caching), evicted
/// first from L2.
__device__ __forceinline__ uint4 ldgOnce(const void *p) {
  uint4 v;
  asm("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(streamPolicy()));
  return v;
}

/// Brings `bytes` (a multiple of 16) at `p` into L2 ahead of ldgStream's
/// loads, with their policy.
__device__ __forceinline__ void prefetchStream(const void *p, uint32_t bytes) {
  asm volatile(
      "cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p),
      "r"(bytes), "l"(streamPolicy())
      : "memory");
}

__device__ __forceinline__ float warpSum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// Sum over the block (any blockDim multiple of 32, up to 1024); every
/// thread gets the result. `scratch` holds 32 floats.
__device__ float blockSum(float v, float *scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int warps = (blockDim.x + 31) >> 5;
  v = warpSum(v);
  __syncthreads(); // scratch may still be read by a previous call
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warpSum(v);
}

/// Sigmoid that never overflows exp, in double (as CpuKernels.cpp).
__device__ __forceinline__ double sigmoidD(double x) {
  if (x >= 0.0)
    return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

/// Descending score, ties (and NaN, below every number) to the lower index.
__device__ __forceinline__ double orderKey(double v) {
  return v != v ? -__longlong_as_double(0x7FF0000000000000ll) : v;
}
__device__ __forceinline__ bool better(double ka, int64_t a, double kb,
                                       int64_t b) {
  return ka != kb ? ka > kb : a < b;
}

//===----------------------------------------------------------------------===//
// Tiled SGEMM: C[b][m, n] = sum_k A[b][m, k] * B[b](n, k) (+ bias[n]).
// 64x64 output tiles, K in steps of 16, 256 threads with 4x4 outputs each.
//===----------------------------------------------------------------------===//

constexpr int kTileM = 64, kTileN = 64, kTileK = 16;

/// B(n, k) = b[n * ldb + k] (weights [N, K]) or, with kIsRow, b[k * ldb + n]
/// (weights [K, N]).
struct FloatB {
  const float *__restrict__ b;
  int64_t ldb;
  bool isRow;
  __device__ float operator()(int64_t n, int64_t k) const {
    return isRow ? b[k * ldb + n] : b[n * ldb + k];
  }
};
struct FloatBias {
  const float *__restrict__ bias;
  __device__ float operator()(int64_t n) const { return bias ? bias[n] : 0.0f; }
};
/// A stored weight [N, K] and bias, widened as loaded.
struct StoredB {
  Weight w;
  __device__ float operator()(int64_t n, int64_t k) const {
    return matrixAt(w, 0, n, k);
  }
};
struct StoredBias {
  Weight bias;
  __device__ float operator()(int64_t n) const {
    return bias.data ? weightAt(bias, n) : 0.0f;
  }
};

/// Head h's matrix of a stored [H, N, K] (transposed) or [H, K, N] weight.
struct StoredHeadB {
  Weight w;
  int64_t h, n, k;
  bool transposed;
  __device__ float operator()(int64_t col, int64_t p) const {
    return weightAt(w, h * n * k + (transposed ? col * k + p : p * n + col));
  }
};

template <bool kIsRow, typename BLoad = FloatB, typename BiasLoad = FloatBias>
__device__ void sgemmTileWith(const float *__restrict__ a, int64_t lda,
                              BLoad load, BiasLoad biasAt,
                              float *__restrict__ c, int64_t ldc, int64_t m,
                              int64_t n, int64_t k) {
  __shared__ float as[kTileK][kTileM + 4];
  __shared__ float bs[kTileK][kTileN + 4];
  int tid = threadIdx.x;
  int64_t m0 = int64_t(blockIdx.y) * kTileM, n0 = int64_t(blockIdx.x) * kTileN;
  int tx = tid % 16, ty = tid / 16; // outputs (ty + 16 i, tx + 16 j)
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
    // A tile: 64 rows x 16 k, consecutive threads along k.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int e = tid + 256 * i, r = e / kTileK, kk = e % kTileK;
      int64_t gm = m0 + r, gk = k0 + kk;
      as[kk][r] = (gm < m && gk < k) ? a[gm * lda + gk] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int e = tid + 256 * i;
      int r, kk;
      if (kIsRow) { // consecutive threads along n
        r = e % kTileN;
        kk = e / kTileN;
      } else {
        r = e / kTileK;
        kk = e % kTileK;
      }
      int64_t gn = n0 + r, gk = k0 + kk;
      bs[kk][r] = (gn < n && gk < k) ? load(gn, gk) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        av[i] = as[kk][ty + 16 * i];
        bv[i] = bs[kk][tx + 16 * i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    int64_t gm = m0 + ty + 16 * i;
    if (gm >= m)
      continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int64_t gn = n0 + tx + 16 * j;
      if (gn < n)
        c[gm * ldc + gn] = acc[i][j] + biasAt(gn);
    }
  }
}

template <bool kIsRow>
__device__ void sgemmTile(const float *__restrict__ a, int64_t lda,
                          const float *__restrict__ b, int64_t ldb,
                          const float *__restrict__ bias, float *__restrict__ c,
                          int64_t ldc, int64_t m, int64_t n, int64_t k) {
  sgemmTileWith<kIsRow>(a, lda, FloatB{b, ldb, kIsRow}, FloatBias{bias}, c,
                        ldc, m, n, k);
}

constexpr int kSmallM = 8;

} // namespace

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// grid (tokens), block 256. An id outside [0, vocab) gives a zero row.
/// A thread's values are loaded 8 at a time before they are stored: one
/// load in flight at a time (the stores may alias the table, as far as the
/// compiler knows) left the row 28 dependent loads long at DeepSeek's 7168.
extern "C" __global__ void daybreak_embedding(Weight table, int64_t vocab,
                                              int64_t dim, const int32_t *ids,
                                              int64_t tokens, float *out) {
  beginDependent();
  constexpr int kBatch = 8;
  int64_t t = blockIdx.x;
  int64_t id = ids[t];
  bool valid = id >= 0 && id < vocab;
  const int64_t step = blockDim.x;
  for (int64_t i0 = threadIdx.x; i0 < dim; i0 += kBatch * step) {
    float v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int64_t i = i0 + j * step;
      v[j] = valid && i < dim ? weightAt(table, id * dim + i) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j)
      if (i0 + j * step < dim)
        out[t * dim + i0 + j * step] = v[j];
  }
}

namespace {

/// Threads of a rms_norm block (CudaKernels::rmsNorm launches this many).
constexpr int kRmsNormThreads = 256;

/// The kDim form of rmsNormRow with the weight's type a template argument:
/// a thread's ceil(kDim / 256) values stay in registers between the sum and
/// the scaling, and its weights load together (the generic loop waits on
/// one load at a time, its stores possibly aliasing x: norms run in place).
/// The sums and products are the generic kernel's, in the same order.
///
/// The loops are unrolled, so the code is straight-line and a decode step
/// fetches all of it from HBM at every launch (gigabytes of weights pass
/// through L2 between two launches). Converting the weight by its type
/// inside the unrolled loop made add_rms_norm<7168> 37 KB of SASS (18 us a
/// launch in the H100's decode graph, 4.4 us back to back); one type a body
/// runs 10 KB of it.
template <int kDim, int32_t kType>
__device__ __forceinline__ void
rmsNormRegisters(const float *in, const void *weight, double eps, float *o,
                 const float *res, float *s, float *scratch) {
  constexpr int kPer = (kDim + kRmsNormThreads - 1) / kRmsNormThreads;
  const int tid = int(threadIdx.x);
  // The launcher's block: with it the bounds tests of whole rounds of 256
  // fold away (7168 has none left).
  __builtin_assume(tid < kRmsNormThreads);
  float v[kPer], w[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = tid + j * kRmsNormThreads;
    v[j] = i < kDim ? in[i] : 0.0f;
  }
  if (res) {
    float r[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = tid + j * kRmsNormThreads;
      r[j] = i < kDim ? res[i] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = tid + j * kRmsNormThreads;
      v[j] += r[j];
      if (i < kDim)
        s[i] = v[j];
    }
  }
  float squares = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j)
    if (tid + j * kRmsNormThreads < kDim)
      squares = fmaf(v[j], v[j], squares);
  squares = blockSum(squares, scratch);
  const float inv = float(1.0 / sqrt(double(squares) / double(kDim) + eps));
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = tid + j * kRmsNormThreads;
    if (i >= kDim)
      w[j] = 1.0f;
    else if constexpr (kType == kWeightBF16)
      w[j] = bf16ToFloat(static_cast<const uint16_t *>(weight)[i]);
    else if constexpr (kType == kWeightE4M3)
      w[j] = e4m3Fast(static_cast<const uint8_t *>(weight)[i]);
    else if constexpr (kType == kWeightF32)
      w[j] = static_cast<const float *>(weight)[i];
    else
      w[j] = 1.0f; // no weight
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = tid + j * kRmsNormThreads;
    if (i < kDim)
      o[i] = v[j] * inv * w[j];
  }
}

/// rms_norm over rows of kDim (0: `dim` at run time).
///
/// With `residual` (add_rms_norm), the row normalised is x + residual,
/// rounded to fp32 and written to `sum` (rows of dim floats, as x and
/// residual then are): cpu::addRmsNorm's sum, bit for bit. A thread reads
/// and writes only its own elements, so `sum` or `out` may alias an input.
template <int kDim>
__device__ __forceinline__ void
rmsNormRow(const float *x, const Weight &weight, int64_t dimArg, double eps,
           float *out, int64_t xStride, int64_t outStride,
           const float *residual = nullptr, float *sum = nullptr) {
  __shared__ float scratch[32];
  // Launched as a programmatic dependent; a decode GEMV usually follows
  // (q_a, the MLP, lm_head): it streams its first weights while the rows
  // are normalised.
  beginDependent();
  const int64_t dim = kDim > 0 ? int64_t(kDim) : dimArg;
  const float *in = x + int64_t(blockIdx.x) * xStride;
  float *o = out + int64_t(blockIdx.x) * outStride;
  const float *res = residual ? residual + int64_t(blockIdx.x) * dim : nullptr;
  float *s = residual ? sum + int64_t(blockIdx.x) * dim : nullptr;
  if constexpr (kDim > 0) {
    // No weight: type -1.
    switch (weight.data ? weight.type : -1) {
    case kWeightBF16:
      return rmsNormRegisters<kDim, kWeightBF16>(in, weight.data, eps, o, res,
                                                 s, scratch);
    case kWeightE4M3:
      return rmsNormRegisters<kDim, kWeightE4M3>(in, weight.data, eps, o, res,
                                                 s, scratch);
    case -1:
      return rmsNormRegisters<kDim, -1>(in, nullptr, eps, o, res, s, scratch);
    default:
      return rmsNormRegisters<kDim, kWeightF32>(in, weight.data, eps, o, res, s,
                                                scratch);
    }
  } else {
    // With a residual the sums are written first and read back (each by
    // the thread that wrote it).
    if (res)
      for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
        s[i] = in[i] + res[i];
    const float *row = res ? s : in;
    float squares = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
      squares = fmaf(row[i], row[i], squares);
    squares = blockSum(squares, scratch);
    float inv = float(1.0 / sqrt(double(squares) / double(dim) + eps));
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
      o[i] = row[i] * inv * (weight.data ? weightAt(weight, i) : 1.0f);
  }
}

} // namespace

/// grid (rows), block 256: one row per block, rows of x and out xStride
/// and outStride floats apart (column views). weight may be null.
extern "C" __global__ void
daybreak_rms_norm(const float *x, Weight weight, int64_t rows, int64_t dim,
                  double eps, float *out, int64_t xStride, int64_t outStride) {
  rmsNormRow<0>(x, weight, dim, eps, out, xStride, outStride);
}

/// daybreak_rms_norm for dim == kDim.
template <int kDim>
__global__ void daybreak_rms_norm_t(const float *x, Weight weight, int64_t rows,
                                    int64_t dim, double eps, float *out,
                                    int64_t xStride, int64_t outStride) {
  rmsNormRow<kDim>(x, weight, dim, eps, out, xStride, outStride);
}

/// grid (rows), block 256: sum = x + residual and out = rms_norm(sum), rows
/// of dim floats (lm.add_rms_norm). weight may be null.
extern "C" __global__ void daybreak_add_rms_norm(const float *x,
                                                 const float *residual,
                                                 Weight weight, int64_t rows,
                                                 int64_t dim, double eps,
                                                 float *sum, float *out) {
  rmsNormRow<0>(x, weight, dim, eps, out, dim, dim, residual, sum);
}

/// daybreak_add_rms_norm for dim == kDim.
template <int kDim>
__global__ void daybreak_add_rms_norm_t(const float *x, const float *residual,
                                        Weight weight, int64_t rows,
                                        int64_t dim, double eps, float *sum,
                                        float *out) {
  rmsNormRow<kDim>(x, weight, dim, eps, out, dim, dim, residual, sum);
}

namespace {

/// One row of layer_norm with the block's threads; o may be in (each
/// thread writes only what it read).
__device__ void layerNormRow(const float *in, const Weight &weight,
                             const Weight &bias, int64_t dim, double eps,
                             float *o) {
  __shared__ float scratch[32];
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    sum += in[i];
  float mean = blockSum(sum, scratch) / float(dim);
  float var = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float d = in[i] - mean;
    var = fmaf(d, d, var);
  }
  var = blockSum(var, scratch);
  float inv = float(1.0 / sqrt(double(var) / double(dim) + eps));
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    o[i] = (in[i] - mean) * inv * (weight.data ? weightAt(weight, i) : 1.0f) +
           (bias.data ? weightAt(bias, i) : 0.0f);
}

} // namespace

/// grid (rows), block 256: mean, then the centred variance. weight and bias
/// may be null. Rows of x and out xStride and outStride floats apart.
extern "C" __global__ void daybreak_layer_norm(const float *x, Weight weight,
                                               Weight bias, int64_t rows,
                                               int64_t dim, double eps,
                                               float *out, int64_t xStride,
                                               int64_t outStride) {
  beginDependent();
  layerNormRow(x + int64_t(blockIdx.x) * xStride, weight, bias, dim, eps,
               out + int64_t(blockIdx.x) * outStride);
}

/// out = x w^T (+ bias), w [N, K]: grid (ceil(N/64), ceil(M/64)), block 256.
extern "C" __global__ void daybreak_matmul_tiled(const float *x, const float *w,
                                                 const float *bias, int64_t m,
                                                 int64_t n, int64_t k,
                                                 float *out) {
  sgemmTile<false>(x, k, w, k, bias, out, n, m, n, k);
}

namespace {

/// The decode matmul's body for k == kK (0: `kArg` at run time), reading
/// W(col, p) and the bias through loaders (fp32 or stored weights).
template <int kK, typename WLoad, typename BiasLoad>
__device__ __forceinline__ void
matmulSmallMWith(const float *x, WLoad load, BiasLoad biasAt, int64_t m,
                 int64_t n, int64_t kArg, float *out) {
  const int64_t k = kK > 0 ? int64_t(kK) : kArg;
  int lane = threadIdx.x & 31;
  int64_t col = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (col >= n)
    return;
  float acc[kSmallM] = {};
  for (int64_t p = lane; p < k; p += 32) {
    float wv = load(col, p);
#pragma unroll
    for (int r = 0; r < kSmallM; ++r)
      if (r < m)
        acc[r] = fmaf(x[r * k + p], wv, acc[r]);
  }
#pragma unroll
  for (int r = 0; r < kSmallM; ++r) {
    if (r >= m)
      break;
    float v = warpSum(acc[r]);
    if (lane == 0)
      out[r * n + col] = v + biasAt(col);
  }
}

template <int kK>
__device__ __forceinline__ void
matmulSmallM(const float *x, const float *w, const float *bias, int64_t m,
             int64_t n, int64_t kArg, float *out) {
  const int64_t k = kK > 0 ? int64_t(kK) : kArg;
  matmulSmallMWith<kK>(x, FloatB{w, k, false}, FloatBias{bias}, m, n, kArg,
                       out);
}

} // namespace

/// The few-row (decode) matmul, m <= 8: grid (ceil(N/8)), block 256; each
/// warp one output column, lanes striding K so weight loads coalesce.
extern "C" __global__ void
daybreak_matmul_small_m(const float *x, const float *w, const float *bias,
                        int64_t m, int64_t n, int64_t k, float *out) {
  matmulSmallM<0>(x, w, bias, m, n, k, out);
}

/// daybreak_matmul_small_m for k == kK.
template <int kK>
__global__ void daybreak_matmul_small_m_t(const float *x, const float *w,
                                          const float *bias, int64_t m,
                                          int64_t n, int64_t k, float *out) {
  matmulSmallM<kK>(x, w, bias, m, n, k, out);
}

//===----------------------------------------------------------------------===//
// Matmuls on weights at their stored precision (bf16; e4m3 with block
// scales): the weight is widened to fp32 as it is loaded, so each product is
// the fp32 product with the widened weight, as on the CPU.
//===----------------------------------------------------------------------===//

/// out = x W^T (+ bias), W [N, K] stored: grid (ceil(N/64), ceil(M/64)),
/// block 256.
extern "C" __global__ void daybreak_matmul_stored_tiled(const float *x,
                                                        Weight w, Weight bias,
                                                        int64_t m, int64_t n,
                                                        int64_t k, float *out) {
  sgemmTileWith<false>(x, k, StoredB{w}, StoredBias{bias}, out, n, m, n, k);
}

/// The decode (m <= 8) matmul on a stored weight, any shape: one warp per
/// output column, lanes striding K. grid (ceil(N/8)), block 256.
extern "C" __global__ void daybreak_gemv_stored(const float *x, Weight w,
                                                Weight bias, int64_t m,
                                                int64_t n, int64_t k,
                                                float *out) {
  matmulSmallMWith<0>(x, StoredB{w}, StoredBias{bias}, m, n, k, out);
}

namespace {

/// Two e4m3 codes (the low byte first) to fp32: Hopper converts the pair to
/// f16 in one instruction, exactly, NaN codes to NaN.
__device__ __forceinline__ void e4m3x2ToFloat(uint16_t pair, float &low,
                                              float &high) {
  uint32_t halves;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(pair));
  asm("{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %2;\n\t"
      "cvt.f32.f16 %0, lo;\n\tcvt.f32.f16 %1, hi;\n\t}"
      : "=f"(low), "=f"(high)
      : "r"(halves));
}

/// Widens the 16-byte piece `bits` of a weight row to fp32: 16 e4m3 codes
/// (e4m3x2ToFloat), or 8 bf16 values. The e4m3 block scale is applied by
/// the caller.
template <int kType>
__device__ __forceinline__ void widenPiece(const uint4 &bits, float *out) {
  const uint32_t words[4] = {bits.x, bits.y, bits.z, bits.w};
  if (kType == kWeightE4M3) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      e4m3x2ToFloat(uint16_t(words[i / 2] >> (16 * (i % 2))), out[2 * i],
                    out[2 * i + 1]);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      out[i] = __uint_as_float(((words[i / 2] >> (16 * (i % 2))) & 0xFFFF)
                               << 16);
  }
}

/// The decode matmul on a bf16 or e4m3 weight at memory speed. Each warp
/// takes kRows consecutive output columns; each lane reads 16-byte pieces
/// of their weight rows (16 e4m3 codes or 8 bf16 values: one vector load,
/// coalesced across the warp), widens them in registers, accumulates the
/// piece against the m <= kM input rows (read through L1) and adds it to
/// its sum times the piece's block scale (e4m3), and the warp sums its
/// lanes at the end. Needs k a multiple of the piece and, for e4m3, blockK
/// a multiple of 16 (a piece never straddles two scales); the launcher
/// falls back to daybreak_gemv_stored otherwise. Warps loop over tasks of
/// kRows columns; block 128 (CudaKernels::launchGemv sizes the grid).
template <int kType, int kM, int kRows>
__device__ __forceinline__ void gemvStored(const float *__restrict__ x,
                                           const Weight &w, const Weight &bias,
                                           int64_t m, int64_t n, int64_t k,
                                           float *__restrict__ out) {
  constexpr int kPer = kType == kWeightE4M3 ? 16 : 8;
  constexpr int kBytes = kType == kWeightE4M3 ? 1 : 2;
  int lane = threadIdx.x & 31;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t col0 =
           (int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32) * kRows;
       col0 < n; col0 += warps * kRows) {
  const uint8_t *rows[kRows];
  const float *scales[kRows];
  int64_t scaleCols = kType == kWeightE4M3 ? (k + w.blockK - 1) / w.blockK : 0;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    int64_t col = min(col0 + r, n - 1); // a tail warp repeats the last column
    rows[r] = static_cast<const uint8_t *>(w.data) + col * k * kBytes;
    scales[r] = kType == kWeightE4M3
                    ? w.scales + (col / w.blockN) * scaleCols
                    : nullptr;
  }
  // The scale of the piece at p: p >> shift for power-of-two blocks.
  uint32_t blockK = uint32_t(w.blockK);
  bool pow2 = kType == kWeightE4M3 && (blockK & (blockK - 1)) == 0;
  uint32_t shift = pow2 ? __ffs(blockK) - 1 : 0;
  float acc[kM][kRows] = {};
  // Deeper unrolling keeps more loads in flight where registers allow.
  constexpr int kUnroll = kM == 1 ? 4 : 2;
#pragma unroll kUnroll
  for (int64_t p = int64_t(lane) * kPer; p < k; p += 32 * kPer) {
    float wv[kRows][kPer];
    float scale[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      uint4 bits = ldgOnce(rows[r] + p * kBytes);
      widenPiece<kType>(bits, wv[r]);
      if (kType == kWeightE4M3) {
        uint32_t block = pow2 ? uint32_t(p) >> shift : uint32_t(p) / blockK;
        scale[r] = __ldg(scales[r] + block);
      }
    }
#pragma unroll
    for (int t = 0; t < kM; ++t) {
      if (t >= m)
        break;
      const float4 *xp = reinterpret_cast<const float4 *>(x + t * k + p);
      float piece[kRows] = {};
#pragma unroll
      for (int q = 0; q < kPer / 4; ++q) {
        float4 xv = __ldg(xp + q);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          piece[r] = fmaf(xv.x, wv[r][4 * q + 0], piece[r]);
          piece[r] = fmaf(xv.y, wv[r][4 * q + 1], piece[r]);
          piece[r] = fmaf(xv.z, wv[r][4 * q + 2], piece[r]);
          piece[r] = fmaf(xv.w, wv[r][4 * q + 3], piece[r]);
        }
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        acc[t][r] = kType == kWeightE4M3 ? fmaf(scale[r], piece[r], acc[t][r])
                                         : acc[t][r] + piece[r];
    }
  }
#pragma unroll
  for (int t = 0; t < kM; ++t) {
    if (t >= m)
      break;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float v = warpSum(acc[t][r]);
      int64_t col = col0 + r;
      if (lane == 0 && col < n)
        out[t * n + col] = v + (bias.data ? weightAt(bias, col) : 0.0f);
    }
  }
  }
}

/// gemvStored for one input row (decode at batch 1): each lane first issues
/// the loads of its piece of all kRows weight rows, then reads its 16 (or 8)
/// x values once and widens and accumulates the rows one after another, so
/// x is read once per kRows rows and few values are live at a time.
template <int kType, int kRows>
__device__ __forceinline__ void gemvStoredM1(const float *__restrict__ x,
                                             const Weight &w,
                                             const Weight &bias, int64_t n,
                                             int64_t k,
                                             float *__restrict__ out) {
  constexpr int kPer = kType == kWeightE4M3 ? 16 : 8;
  constexpr int kBytes = kType == kWeightE4M3 ? 1 : 2;
  int lane = threadIdx.x & 31;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  int64_t scaleCols = kType == kWeightE4M3 ? (k + w.blockK - 1) / w.blockK : 0;
  uint32_t blockK = uint32_t(w.blockK);
  bool pow2 = kType == kWeightE4M3 && (blockK & (blockK - 1)) == 0;
  uint32_t shift = pow2 ? __ffs(blockK) - 1 : 0;
  for (int64_t col0 =
           (int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32) * kRows;
       col0 < n; col0 += warps * kRows) {
    const uint8_t *base = static_cast<const uint8_t *>(w.data);
    float acc[kRows] = {};
    for (int64_t p = int64_t(lane) * kPer; p < k; p += 32 * kPer) {
      uint4 bits[kRows];
      float scale[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        int64_t col = min(col0 + r, n - 1);
        bits[r] = ldgOnce(base + (col * k + p) * kBytes);
        if (kType == kWeightE4M3) {
          uint32_t block = pow2 ? uint32_t(p) >> shift : uint32_t(p) / blockK;
          scale[r] = __ldg(w.scales + (col / w.blockN) * scaleCols + block);
        }
      }
      float xv[kPer];
#pragma unroll
      for (int q = 0; q < kPer / 4; ++q) {
        float4 v = __ldg(reinterpret_cast<const float4 *>(x + p) + q);
        xv[4 * q] = v.x;
        xv[4 * q + 1] = v.y;
        xv[4 * q + 2] = v.z;
        xv[4 * q + 3] = v.w;
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float wv[kPer];
        widenPiece<kType>(bits[r], wv);
        float piece = 0.0f;
#pragma unroll
        for (int i = 0; i < kPer; ++i)
          piece = fmaf(xv[i], wv[i], piece);
        acc[r] = kType == kWeightE4M3 ? fmaf(scale[r], piece, acc[r])
                                      : acc[r] + piece;
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float v = warpSum(acc[r]);
      int64_t col = col0 + r;
      if (lane == 0 && col < n)
        out[col] = v + (bias.data ? weightAt(bias, col) : 0.0f);
    }
  }
}

} // namespace

/// gemvStoredM1 on eight rows a warp task (large N).
extern "C" __global__ void __launch_bounds__(128)
    daybreak_gemv_e4m3_m1(const float *x, Weight w, Weight bias, int64_t m,
                          int64_t n, int64_t k, float *out) {
  gemvStoredM1<kWeightE4M3, 8>(x, w, bias, n, k, out);
}

/// For bf16 (widening is a shift) the generic layout measured faster: four
/// rows a task, x re-read per token row.
extern "C" __global__ void __launch_bounds__(128)
    daybreak_gemv_bf16_m1(const float *x, Weight w, Weight bias, int64_t m,
                          int64_t n, int64_t k, float *out) {
  gemvStored<kWeightBF16, 1, 4>(x, w, bias, m, n, k, out);
}

/// gemvStoredM1 on two rows a warp task (small N: more warps busy).
extern "C" __global__ void __launch_bounds__(128)
    daybreak_gemv_e4m3_m1_narrow(const float *x, Weight w, Weight bias,
                                 int64_t m, int64_t n, int64_t k, float *out) {
  gemvStoredM1<kWeightE4M3, 2>(x, w, bias, n, k, out);
}

extern "C" __global__ void __launch_bounds__(128)
    daybreak_gemv_bf16_m1_narrow(const float *x, Weight w, Weight bias,
                                 int64_t m, int64_t n, int64_t k, float *out) {
  gemvStoredM1<kWeightBF16, 2>(x, w, bias, n, k, out);
}

/// gemvStored on an e4m3 weight with block scales (see above).
extern "C" __global__ void __launch_bounds__(128)
    daybreak_gemv_e4m3(const float *x, Weight w, Weight bias, int64_t m,
                       int64_t n, int64_t k, float *out) {
  gemvStored<kWeightE4M3, kSmallM, 2>(x, w, bias, m, n, k, out);
}

/// gemvStored on a bf16 weight.
extern "C" __global__ void __launch_bounds__(128)
    daybreak_gemv_bf16(const float *x, Weight w, Weight bias, int64_t m,
                       int64_t n, int64_t k, float *out) {
  gemvStored<kWeightBF16, kSmallM, 2>(x, w, bias, m, n, k, out);
}

//===----------------------------------------------------------------------===//
// Decode GEMVs on the tensor cores: out[m, N] = x[m, K] W[N, K]^T (+ bias)
// for m <= 8 on an e4m3 (128 x 128 block scales) or bf16 weight.
//
// Weights are the mma A operand (16 rows a tile), widened in registers:
// e4m3 pairs convert exactly to f16 pairs (one cvt per two codes), bf16 is
// used as stored. x is the B operand, split exactly into three parts of
// the weight's 16-bit type (x = h1 + h2 + h3; bf16 parts by truncation,
// f16 parts of x times a power of two per token and 128-column group that
// puts the group's largest |x| in [2^14, 2^15): exact down to 2^-15 of that
// largest, below which the parts round at 2^-40 of it), so the products a
// tensor core forms are the fp32 products and sums are fp32: the fp32 GEMV
// on the widened weight up to summation order. Each group's mma sum (at most 24
// mma steps) is folded into an fp32 accumulator with the group's block scale
// and the inverse x scale (FFMA, round to nearest), so the tensor cores'
// truncating accumulation never runs long.
//
// A block's warps each own kTiles row tiles of 16 and share one K range,
// which it keeps for its whole life: it converts x's columns of that range
// into shared memory in fragment order once, then walks row tiles (grid:
// as many blocks as are resident at once, so no launch has a straggling
// second wave), streaming each tile's weights with 16-byte loads, one or
// two groups in flight while the current one is multiplied and the next
// tile's first ones during a tile's write-back. A cluster of C blocks
// (1..16) splits K; its partial sums are added through distributed shared
// memory in a fixed order (deterministic), the barrier's wait deferred by
// a tile. m = 1 puts the three x parts in three B columns (one mma per
// k-step); m > 1 gives each token a column and issues one mma per part.
//===----------------------------------------------------------------------===//

namespace {

/// Per weight type: a group is the K span of two 16-byte loads by each of
/// four lanes per row (128 e4m3 codes: one scale block; 64 bf16 values).
template <int kType> struct TcShape {
  static constexpr int kBytes = kType == kWeightE4M3 ? 1 : 2;
  static constexpr int kGroupK = 128 / kBytes;
  static constexpr int kSteps = kGroupK / 16;    // mma k-steps per group
  static constexpr int kChunkSteps = kSteps / 2; // k-steps per 16-byte load
};

/// E2M1 (MXFP4, the decode expert GEMV only): a group is 8 blocks of 32
/// values, 128 bytes of a row as for the others; a lane's 16-byte load is
/// one block (4 words), which quadTranspose turns into one word of each of
/// four blocks (two k-steps a word).
template <> struct TcShape<kWeightE2M1> {
  static constexpr int kGroupK = 256;
  static constexpr int kSteps = kGroupK / 16;
  static constexpr int kChunkSteps = kSteps / 2;
};

/// T if kFirst else F (std::conditional, which NVRTC's headers lack).
template <bool kFirst, class T, class F> struct Pick { using type = T; };
template <class T, class F> struct Pick<false, T, F> { using type = F; };

/// Shared-memory B entries per k-step: 3 parts x 8 tokens x 4 lanes (m > 1),
/// or 3 parts x 4 lanes (m = 1: lanes 0-11; the other lanes' columns are 0).
template <int kTokens> struct TcSlots {
  static constexpr int kValue = kTokens == 1 ? 12 : 96;
};

/// Four e4m3 codes to two f16 pairs (exact; NaN codes give NaN): lo holds
/// codes 0 and 1 (code 0 in its low half), hi codes 2 and 3.
__device__ __forceinline__ void e4m3x4ToHalf2(uint32_t codes, uint32_t &lo,
                                              uint32_t &hi) {
  asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\t"
      "cvt.rn.f16x2.e4m3x2 %0, l;\n\tcvt.rn.f16x2.e4m3x2 %1, h;\n\t}"
      : "=r"(lo), "=r"(hi)
      : "r"(codes));
}

/// f16 pair of (lo, hi), rounded to nearest.
__device__ __forceinline__ uint32_t packHalf2(float lo, float hi) {
  uint32_t h;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(h) : "f"(hi), "f"(lo));
  return h;
}

__device__ __forceinline__ void unpackHalf2(uint32_t h, float &lo, float &hi) {
  asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\t"
      "cvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, h;\n\t}"
      : "=f"(lo), "=f"(hi)
      : "r"(h));
}

/// x = p[0] + p[1] + p[2] for two values (lo and hi half of each part): f16
/// parts (for every weight type but bf16) rounded to nearest (exact for values
/// scaled into f16's range: each residual is exact and 24 bits fit in three
/// 11-bit significands), or bf16 parts by truncation (8 + 8 + 8 bits, exact
/// over fp32's range).
template <int kType>
__device__ __forceinline__ void splitX(float lo, float hi, uint32_t (&p)[3]) {
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    float l, h;
    if (kType != kWeightBF16) {
      p[i] = packHalf2(lo, hi);
      unpackHalf2(p[i], l, h);
    } else {
      l = __uint_as_float(__float_as_uint(lo) & 0xFFFF0000u);
      h = __uint_as_float(__float_as_uint(hi) & 0xFFFF0000u);
      p[i] = __byte_perm(__float_as_uint(l), __float_as_uint(h), 0x7632);
    }
    lo -= l;
    hi -= h;
  }
}

/// The powers of two that put `amax`, the largest |x| of a stage, in
/// [2^14, 2^15) for splitX's f16 parts (x: up, the result back: down),
/// kept within fp32's normal range.
__device__ __forceinline__ float2 f16StageScale(float amax) {
  int exponent = int(__float_as_uint(amax) >> 23) & 0xFF;
  int shift = min(max(141 - exponent, -112), 126);
  return make_float2(__uint_as_float(uint32_t(127 + shift) << 23),
                     __uint_as_float(uint32_t(127 - shift) << 23));
}

/// The one-part form of splitX (`daybreak-run --precision=bf16`): each
/// value rounded to bf16 (nearest even) first, then, for f16, the scaled
/// bf16 value converted (exact while it stays a normal f16, i.e. down to
/// 2^-28 of the stage's largest |x|; below that it rounds at 2^-39 of
/// it). The products are then those of bf16(x) and the widened weight.
template <int kType>
__device__ __forceinline__ uint32_t roundX(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  if (kType == kWeightBF16)
    return r;
  return packHalf2(__uint_as_float(r << 16), __uint_as_float(r & 0xFFFF0000u));
}

/// E8M0 to fp32, as numerics::e8m0ToFloat: 2^(bits - 127) is the fp32 whose
/// exponent field is `bits`; 0 gives the subnormal 2^-127, 255 NaN.
__device__ __forceinline__ float e8m0ToFloat(uint32_t bits) {
  if (bits == 0xFF)
    return __int_as_float(0x7FC00000);
  return __uint_as_float(bits ? bits << 23 : 0x00400000u);
}

/// The eight E2M1 codes of `word` (code i in bits 4i .. 4i + 3, low nibble
/// first as stored) times 2^-14, exactly, as four f16 pairs: pair i holds
/// codes i (low half) and i + 4. Codes i and i + 4 are 16 bits apart, as
/// the two halves of an f16 pair: one shift puts their signs at bits 15
/// and 31, another their exponent and mantissa bits (e1 e0 m) at bits
/// 11 .. 9, the low exponent bits and the top mantissa bit of each f16.
/// That f16 is the E2M1 value times 2^-14 for every code (e = 0, code 0.5,
/// lands on the f16 subnormal 2^-15, as e = 0 is E2M1's subnormal): two
/// shifts and two LOP3 a pair, no table.
__device__ __forceinline__ void e2m1x8ToHalf2(uint32_t word, uint32_t (&h)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t sign = (word << (12 - 4 * i)) & 0x80008000u;
    uint32_t bits = (i < 3 ? word << (9 - 4 * i) : word >> 3) & 0x0E000E00u;
    h[i] = sign | bits;
  }
}

/// e2m1x8ToHalf2's codes widened to fp32 (exact), code i into v[i].
__device__ __forceinline__ void e2m1x8ToFloat(uint32_t word, float (&v)[8]) {
  uint32_t h[4];
  e2m1x8ToHalf2(word, h);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    unpackHalf2(h[i], v[i], v[i + 4]);
}

/// d += a b for one m16n8k16 step, bf16 operands for bf16 weights and f16
/// for the others, fp32 accumulators.
template <int kType>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4],
                                         uint2 b) {
  if (kType != kWeightBF16)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.x), "r"(b.y));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, "
        "%3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.x), "r"(b.y));
}

__device__ __forceinline__ uint32_t clusterRank() {
  uint32_t r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

__device__ __forceinline__ uint32_t clusterSize() {
  uint32_t r;
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}

/// A cluster barrier in two halves: shared-memory writes before a thread's
/// arrive are visible to every block of the cluster after its wait, and a
/// block can work between the two (each thread alternates them).
__device__ __forceinline__ void clusterArrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}

__device__ __forceinline__ void clusterWait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/// The float at `local` (this block's shared memory) in cluster block `rank`.
__device__ __forceinline__ float clusterLoad(const float *local,
                                             uint32_t rank) {
  uint64_t shared;
  uint32_t remote;
  float v;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(shared) : "l"(local));
  uint32_t addr = uint32_t(shared);
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];"
               : "=f"(v)
               : "r"(remote)
               : "memory");
  return v;
}

extern __shared__ __align__(16) uint8_t tcGemvShared[];

/// The tensor-core GEMV (see above). Block kWarps x 32 threads; grid: C
/// blocks (a cluster, 1..16) per cluster, as many clusters as are resident at
/// once (no more than row tiles of kWarps x kTiles x 16), each looping over
/// row tiles. Needs K a multiple of the group, and for e4m3 blockK a
/// multiple of 128 and blockN of 16 (CudaKernels::tensorGemv checks).
/// Shared memory: the B entries and inverse x scales of ceil(groups / C)
/// groups, then, when C > 1, two buffers of kWarps x kTiles x 16 x kTokens
/// partial sums.
template <int kType, int kTokens, int kWarps, int kTiles, int kDepth>
__device__ __forceinline__ void
gemvTensor(const float *__restrict__ x, const Weight &w, const Weight &bias,
           int64_t m, int64_t n, int64_t k, float *__restrict__ out) {
  using S = TcShape<kType>;
  constexpr int kSlots = TcSlots<kTokens>::kValue;
  constexpr int kRows = kWarps * kTiles * 16;
  // The next GEMV (or any programmatic dependent) may take the SMs this
  // grid's blocks leave as they finish, and stream its weights during this
  // one's tail.
  allowDependents();
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int warp = threadIdx.x >> 5;
  const uint32_t clusters = clusterSize(), rank = clusterRank();
  const int64_t rowTiles = (n + kRows - 1) / kRows;
  const int64_t tileStride = gridDim.x / clusters;
  const int groups = int(k / S::kGroupK);
  const int gBegin = int(int64_t(groups) * rank / clusters);
  const int gCount = int(int64_t(groups) * (rank + 1) / clusters) - gBegin;
  // The partial sums first: every block of a cluster finds them at the
  // same offset (the B entries' size depends on the block's K range).
  float *partials = reinterpret_cast<float *>(tcGemvShared);
  uint2 *stage = reinterpret_cast<uint2 *>(
      partials + (clusters > 1 ? 2 * kRows * kTokens : 0));
  float *inverse =
      reinterpret_cast<float *>(stage + int64_t(gCount) * S::kSteps * kSlots);

  // This warp's rows of a tile: 16-row tiles, lane (g, t) loading rows g
  // and g + 8 (clamped to the last row; such rows are never written).
  const uint8_t *src[kTiles][2];
  const float *scaleRow[kTiles];
  int64_t tileRow[kTiles];
  const int64_t scaleCols = (k + w.blockK - 1) / w.blockK;
  const int64_t blockK = w.blockK;
  auto setRows = [&](int64_t tile) {
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
      tileRow[i] = tile * kRows + (warp * kTiles + i) * 16;
      int64_t r0 = min(tileRow[i] + g, n - 1);
      int64_t r1 = min(tileRow[i] + g + 8, n - 1);
      int64_t offset =
          (int64_t(gBegin) * S::kGroupK + t * 4 * S::kChunkSteps) * S::kBytes;
      src[i][0] =
          static_cast<const uint8_t *>(w.data) + r0 * k * S::kBytes + offset;
      src[i][1] =
          static_cast<const uint8_t *>(w.data) + r1 * k * S::kBytes + offset;
      scaleRow[i] =
          kType == kWeightE4M3
              ? w.scales + (min(tileRow[i], n - 1) / w.blockN) * scaleCols
              : nullptr;
    }
  };

  // Loads of group gl: two 16-byte chunks per row (the second 64 bytes on).
  auto load = [&](uint32_t(&raw)[kTiles][2][8], float(&scale)[kTiles], int gl) {
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint8_t *p = src[i][r] + int64_t(gl) * 128;
        uint4 c0 = ldgStream(p), c1 = ldgStream(p + 64);
        raw[i][r][0] = c0.x;
        raw[i][r][1] = c0.y;
        raw[i][r][2] = c0.z;
        raw[i][r][3] = c0.w;
        raw[i][r][4] = c1.x;
        raw[i][r][5] = c1.y;
        raw[i][r][6] = c1.z;
        raw[i][r][7] = c1.w;
      }
      if (kType == kWeightE4M3)
        scale[i] = __ldg(scaleRow[i] + (int64_t(gBegin + gl) * 128) / blockK);
    }
  };

  // kDepth - 1 groups in flight ahead of the one being multiplied (three
  // register buffers, or two); the first tile's first ones while x is
  // staged, the next tile's during a tile's write-back.
  uint32_t rawA[kTiles][2][8], rawB[kTiles][2][8], rawC[kTiles][2][8];
  float scaleA[kTiles] = {}, scaleB[kTiles] = {}, scaleC[kTiles] = {};
  auto prologue = [&]() {
    load(rawA, scaleA, 0);
    if (kDepth > 2 && gCount > 1)
      load(rawB, scaleB, 1);
  };
  int64_t tile = blockIdx.x / clusters;
  if (tile < rowTiles && gCount > 0) {
    setRows(tile);
    prologue();
    // The first tile's next groups into L2, a row a lane (the warp's rows
    // are consecutive), the whole grid prefetching at most kPrefetchBytes:
    // about what HBM delivers while a short kernel ahead of a programmatic
    // launch runs, and little enough of L2 that the lines are still there
    // when the loads below reach them.
    constexpr int64_t kPrefetchBytes = 16 << 20;
    const int64_t ahead = min(
        int64_t(gCount), kPrefetchBytes / (int64_t(gridDim.x) * kRows * 128));
    if (ahead > kDepth - 1 && lane < kTiles * 16) {
      int64_t row = min(tile * kRows + warp * kTiles * 16 + lane, n - 1);
      const uint8_t *p = static_cast<const uint8_t *>(w.data) +
                         row * k * S::kBytes +
                         int64_t(gBegin + kDepth - 1) * 128;
      prefetchStream(p, uint32_t(ahead - (kDepth - 1)) * 128u);
    }
  }
  // Everything above reads the weight alone, so it may overlap the kernel
  // before this one (programmatic launch); x is that kernel's output and
  // `out` may be a buffer it still reads.
  waitForPrevious();

  // x's columns of this K range in fragment order: lane (g, t) of k-step s
  // of a group reads group columns (s / kChunkSteps) * 16 * kChunkSteps +
  // t * 4 * kChunkSteps + (s % kChunkSteps) * 4 + j, j = 0..3 (b0: j = 0, 1;
  // b1: j = 2, 3), the columns its weight loads hold. A quad of four
  // columns per thread; a warp covers one (group, token) for e4m3. Staged
  // once: the block keeps its K range for every tile.
  constexpr int kQuads = S::kGroupK / 4;
  for (int q = threadIdx.x; q < gCount * kTokens * kQuads; q += blockDim.x) {
    int task = q / kQuads, l = q % kQuads;
    int gl = task / kTokens, token = task % kTokens;
    int64_t col = int64_t(gBegin + gl) * S::kGroupK + l * 4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (token < m)
      v = *reinterpret_cast<const float4 *>(x + token * k + col);
    if (kType == kWeightE4M3) {
      float amax = warpMax(
          fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
      const float2 scale = f16StageScale(amax);
      v.x *= scale.x;
      v.y *= scale.x;
      v.z *= scale.x;
      v.w *= scale.x;
      if (l == 0)
        inverse[gl * kTokens + token] = scale.y;
    }
    uint32_t p01[3], p23[3];
    splitX<kType>(v.x, v.y, p01);
    splitX<kType>(v.z, v.w, p23);
    int step = (l / (4 * S::kChunkSteps)) * S::kChunkSteps + l % S::kChunkSteps;
    int quarter = (l / S::kChunkSteps) % 4;
    uint2 *entry = stage + (gl * S::kSteps + step) * kSlots;
#pragma unroll
    for (int p = 0; p < 3; ++p)
      entry[kTokens == 1 ? p * 4 + quarter : p * 32 + token * 4 + quarter] =
          make_uint2(p01[p], p23[p]);
  }
  __syncthreads();

  // acc[i]: m = 1: rows g, g + 8 (this lane's columns, summed over lanes
  // at the end); m > 1: (row g, token 2t), (g, 2t + 1), (g + 8, 2t),
  // (g + 8, 2t + 1).
  float acc[kTiles][4] = {};
  auto compute = [&](const uint32_t(&raw)[kTiles][2][8],
                     const float(&scale)[kTiles], int gl) {
    // m > 1 with one tile: even and odd k-steps in two accumulators (two
    // dependency chains of 12 mma instead of one of 24).
    float c[kTiles][4] = {}, c2[kTiles][4] = {};
#pragma unroll
    for (int s = 0; s < S::kSteps; ++s) {
      const int chunk = s / S::kChunkSteps, sub = s % S::kChunkSteps;
      uint32_t a[kTiles][4];
#pragma unroll
      for (int i = 0; i < kTiles; ++i) {
        if (kType == kWeightE4M3) {
          e4m3x4ToHalf2(raw[i][0][chunk * 4 + sub], a[i][0], a[i][2]);
          e4m3x4ToHalf2(raw[i][1][chunk * 4 + sub], a[i][1], a[i][3]);
        } else {
          a[i][0] = raw[i][0][chunk * 4 + 2 * sub];
          a[i][2] = raw[i][0][chunk * 4 + 2 * sub + 1];
          a[i][1] = raw[i][1][chunk * 4 + 2 * sub];
          a[i][3] = raw[i][1][chunk * 4 + 2 * sub + 1];
        }
      }
      const uint2 *entry = stage + (gl * S::kSteps + s) * kSlots;
      if (kTokens == 1) {
        uint2 b = lane < 12 ? entry[lane] : make_uint2(0u, 0u);
#pragma unroll
        for (int i = 0; i < kTiles; ++i)
          mma16816<kType>(c[i], a[i], b);
      } else {
#pragma unroll
        for (int p = 0; p < 3; ++p) {
          uint2 b = entry[p * 32 + lane];
#pragma unroll
          for (int i = 0; i < kTiles; ++i)
            mma16816<kType>(kTiles == 1 && s % 2 ? c2[i] : c[i], a[i], b);
        }
      }
    }
    if (kTokens > 1 && kTiles == 1)
#pragma unroll
      for (int i = 0; i < kTiles; ++i)
#pragma unroll
        for (int q = 0; q < 4; ++q)
          c[i][q] += c2[i][q];
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
      if (kType == kWeightE4M3 && kTokens == 1) {
        float f = scale[i] * inverse[gl];
        acc[i][0] = fmaf(c[i][0] + c[i][1], f, acc[i][0]);
        acc[i][1] = fmaf(c[i][2] + c[i][3], f, acc[i][1]);
      } else if (kType == kWeightE4M3) {
        float f0 = scale[i] * inverse[gl * kTokens + 2 * t];
        float f1 = scale[i] * inverse[gl * kTokens + 2 * t + 1];
        acc[i][0] = fmaf(c[i][0], f0, acc[i][0]);
        acc[i][1] = fmaf(c[i][1], f1, acc[i][1]);
        acc[i][2] = fmaf(c[i][2], f0, acc[i][2]);
        acc[i][3] = fmaf(c[i][3], f1, acc[i][3]);
      } else if (kTokens == 1) {
        acc[i][0] += c[i][0] + c[i][1];
        acc[i][1] += c[i][2] + c[i][3];
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q)
          acc[i][q] += c[i][q];
      }
    }
  };

  auto biasAt = [&](int64_t row) {
    return bias.data ? weightAt(bias, row) : 0.0f;
  };
  // Adds tile `which`'s partial sums at `partial` (every block's) in rank
  // order for this block's share of its rows and tokens.
  auto reduce = [&](int64_t which, const float *partial) {
    const int total = kRows * kTokens;
    const int share = (total + int(clusters) - 1) / int(clusters);
    const int end = min(total, share * int(rank + 1));
    for (int e = share * int(rank) + threadIdx.x; e < end; e += blockDim.x) {
      float sum = 0.0f;
      for (uint32_t c = 0; c < clusters; ++c)
        sum += clusterLoad(partial + e, c);
      int64_t row = which * kRows + e / kTokens;
      int token = e % kTokens;
      if (row < n && token < m)
        out[token * n + row] = sum + biasAt(row);
    }
  };
  int parity = 0;
  int64_t pending = -1; // the tile whose partial sums await their reduction
  // Every block of a cluster walks the same tiles, so the cluster barriers
  // below match.
  while (tile < rowTiles) {
    if (kDepth > 2) {
      // Groups gl and gl + 1 are in flight in A and B at the top.
      for (int gl = 0; gl < gCount; gl += 3) {
        if (gl + 2 < gCount)
          load(rawC, scaleC, gl + 2);
        compute(rawA, scaleA, gl);
        if (gl + 1 < gCount) {
          if (gl + 3 < gCount)
            load(rawA, scaleA, gl + 3);
          compute(rawB, scaleB, gl + 1);
        }
        if (gl + 2 < gCount) {
          if (gl + 4 < gCount)
            load(rawB, scaleB, gl + 4);
          compute(rawC, scaleC, gl + 2);
        }
      }
    } else {
      for (int gl = 0; gl < gCount; gl += 2) {
        if (gl + 1 < gCount)
          load(rawB, scaleB, gl + 1);
        compute(rawA, scaleA, gl);
        if (gl + 1 < gCount) {
          if (gl + 2 < gCount)
            load(rawA, scaleA, gl + 2);
          compute(rawB, scaleB, gl + 1);
        }
      }
    }
    // m = 1: the row sums over the four lanes of a row (fixed order).
    if (kTokens == 1) {
#pragma unroll
      for (int i = 0; i < kTiles; ++i)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          acc[i][q] += __shfl_xor_sync(0xffffffffu, acc[i][q], 1);
          acc[i][q] += __shfl_xor_sync(0xffffffffu, acc[i][q], 2);
        }
    }
    float sums[kTiles][4];
    int64_t rows[kTiles];
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
      rows[i] = tileRow[i];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        sums[i][q] = acc[i][q];
        acc[i][q] = 0.0f;
      }
    }
    // The next tile's first weights are in flight during the write-back.
    const int64_t current = tile;
    tile += tileStride;
    if (tile < rowTiles && gCount > 0) {
      setRows(tile);
      prologue();
    }
    if (clusters == 1) {
#pragma unroll
      for (int i = 0; i < kTiles; ++i)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          int64_t row = rows[i] + g + 8 * half;
          if (row >= n)
            continue;
          if (kTokens == 1) {
            if (t == 0)
              out[row] = sums[i][half] + biasAt(row);
          } else {
            for (int j = 0; j < 2; ++j)
              if (2 * t + j < m)
                out[(2 * t + j) * n + row] =
                    sums[i][2 * half + j] + biasAt(row);
          }
        }
      continue;
    }
    // C > 1: partial sums [row][token] in this tile's buffer; block `rank`
    // adds its share of them over the C blocks in rank order once the next
    // tile is multiplied (the barrier's wait hidden behind it). A buffer is
    // written again two tiles later, after a wait that no block passes
    // before every block has read it.
    if (pending >= 0) {
      clusterWait();
      reduce(pending, partials + (parity ^ 1) * kRows * kTokens);
    }
    float *partial = partials + parity * kRows * kTokens;
#pragma unroll
    for (int i = 0; i < kTiles; ++i)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int local = (warp * kTiles + i) * 16 + g + 8 * half;
        if (kTokens == 1) {
          if (t == 0)
            partial[local] = sums[i][half];
        } else {
          partial[local * kTokens + 2 * t] = sums[i][2 * half];
          partial[local * kTokens + 2 * t + 1] = sums[i][2 * half + 1];
        }
      }
    clusterArrive();
    pending = current;
    parity ^= 1;
  }
  if (pending >= 0) {
    clusterWait();
    reduce(pending, partials + (parity ^ 1) * kRows * kTokens);
    clusterArrive(); // no block leaves while others read its shared memory
    clusterWait();
  }
}

} // namespace

#define DAYBREAK_TC_GEMV(name, type, tokens, warps, tiles, depth, minBlocks)   \
  extern "C" __global__ void __launch_bounds__(warps * 32, minBlocks)          \
      name(const float *x, Weight w, Weight bias, int64_t m, int64_t n,        \
           int64_t k, float *out) {                                            \
    gemvTensor<type, tokens, warps, tiles, depth>(x, w, bias, m, n, k, out);   \
  }
/// Tensor-core GEMVs (CudaKernels::tensorGemv): weight type, one input row
/// or up to 8, four or eight warps of one or two 16-row tiles each, groups
/// in flight plus one, and the blocks an SM must hold (registers).
DAYBREAK_TC_GEMV(daybreak_gemv_tc_e4m3_m1_t1, kWeightE4M3, 1, 4, 1, 2, 6)
DAYBREAK_TC_GEMV(daybreak_gemv_tc_e4m3_m1_t2, kWeightE4M3, 1, 4, 2, 2, 4)
DAYBREAK_TC_GEMV(daybreak_gemv_tc_e4m3_m8_t1, kWeightE4M3, 8, 8, 1, 3, 2)
DAYBREAK_TC_GEMV(daybreak_gemv_tc_e4m3_m8_t2, kWeightE4M3, 8, 8, 2, 2, 2)
DAYBREAK_TC_GEMV(daybreak_gemv_tc_bf16_m1_t1, kWeightBF16, 1, 4, 1, 2, 6)
DAYBREAK_TC_GEMV(daybreak_gemv_tc_bf16_m1_t2, kWeightBF16, 1, 4, 2, 2, 4)
DAYBREAK_TC_GEMV(daybreak_gemv_tc_bf16_m8_t1, kWeightBF16, 8, 8, 1, 3, 2)
DAYBREAK_TC_GEMV(daybreak_gemv_tc_bf16_m8_t2, kWeightBF16, 8, 8, 2, 2, 2)
#undef DAYBREAK_TC_GEMV

//===----------------------------------------------------------------------===//
// GEMMs on the tensor cores for many rows (prefill, large batches):
// out[m, N] = x[m, K] W[N, K]^T (+ bias) on a bf16 or e4m3 (block-scaled)
// weight, dense or grouped by expert, with the decode GEMVs' exact numerics:
// x is the mma A operand split into three 16-bit parts (splitX; for e4m3
// each 64-column stage of a row scaled into f16's range by a power of two),
// the weight the B operand widened exactly to f16 (e4m3) or used as stored
// (bf16), so the products are the fp32 products of x and the widened
// weight. A group of k-steps (one e4m3 scale block of K, at most 64
// columns: at most 12 mma on one accumulator) is summed on the tensor
// cores, then folded into an fp32 accumulator with the block scale and the
// inverse x scale (FMUL, FFMA round to nearest): the fp32 GEMM on the
// widened weight up to summation order.
//
// A block (4 warps) computes 64 rows x 128 columns and walks K in stages
// of 64 columns, two in shared memory: while stage s is converted and
// multiplied, cp.async brings stage s + 1 (x as fp32, 16 bytes a copy, 4
// bytes on L2 a value; the weight as stored; the stage's e4m3 scales per
// column). Each stage's x is split into its three parts once, by all
// threads, into shared memory in the mma's fragment order (ldmatrix reads
// them); each warp (32 rows x 64 columns, 2 x 8 mma tiles) reads its
// weight words with one 8-byte load per 8 columns and two k-steps (e4m3)
// or one (bf16) for each of its two 16-row tiles in turn, and widens them
// in registers (a row tile's group sums in 32 registers). The k order in a
// 16-byte piece is permuted so that one lane's piece holds its fragment's
// columns of several k-steps (as the GEMVs: lane (g, t) of k-step s takes
// piece columns (s % C) * 4 + t * 4C + j; with [1, 32] scale groups the
// two k-steps of a group stay inside its 32 columns instead: 32 (s / 2) +
// 8 t + 4 (s % 2) + j); x's parts are stored with the same permutation,
// so every product pairs the right x and weight values.
// Two blocks an SM (registers): one converts x while the other multiplies.
// ptxas (CUDA 13.0, sm_90a) gives them 250-255 registers: no spills for
// bf16, 40-44 bytes for e4m3 with 128-column scale blocks, 64-240 with
// 32-column ones (loop-invariant addresses, nearly all outside the mma).
//
// Roofline (H200, 132 SMs): each product costs three 16-bit mma, so the
// ceiling is a third of the dense bf16 rate: 990 / 3 = 330 TFLOP/s with
// wgmma, about 200-230 TFLOP/s at mma.sync's 60-70 % of it, less the
// conversion of x (about 20 instructions a value pair for each 128-column
// tile, on the ALU and conversion pipes beside the tensor cores: the other
// block's mma hide it) and the folds. Per K column a block moves 64 x 4
// bytes of x and 128 (e4m3) or 256 (bf16) bytes of weights for 2 x 64 x
// 128 FLOP: 43 (e4m3) or 32 (bf16) FLOP a byte from L2, so 150 TFLOP/s
// takes 3.5-4.7 TB/s of L2 bandwidth: fp32 x is the next limit (a
// cluster multicasting x to the blocks of one row tile would halve it).
// Predicted ~150 TFLOP/s: gpt-oss-120b's experts at a prefill of 8192
// tokens (top-4: 8192 x 4 x (5760 + 2880) x 2880 x 2 = 1.63 TFLOP a layer)
// ~11 ms; a dense 8192 x 7168 x 7168 e4m3 projection (0.84 TFLOP) ~5.6 ms.
//===----------------------------------------------------------------------===//

namespace {

constexpr int kGemmRows = 64;       // x rows (tokens) a block
constexpr int kGemmCols = 128;      // output columns (weight rows) a block
constexpr int kGemmK = 64;          // K columns a stage
constexpr int kGemmThreads = 128;   // 2 x 2 warps of 32 rows x 64 columns
constexpr int kGemmXStride = 68;    // floats a staged x row (272 bytes)
constexpr int kGemmPartStride = 72; // halves a row of a part (144 bytes)

/// Per weight type: C k-steps a 16-byte piece of a weight row, and the
/// bytes of one row's stage in shared memory.
template <int kType> struct GemmShape {
  static constexpr int kBytes = kType == kWeightE4M3 ? 1 : 2;
  static constexpr int kChunkSteps = 4 / kBytes;
  static constexpr int kRowBytes = kGemmK * kBytes;
};

/// Shared memory of a GEMM block (bytes): two stages of x (64 rows, padded
/// so a quarter warp's rows hit distinct banks) and of the weight (128
/// rows), x's three parts, two stages of e4m3 scales (two groups x 128
/// columns), the stage's inverse x scales, and the block's source and
/// destination row of each of its 64 rows. CudaKernels.cpp mirrors it.
template <int kType> struct GemmSmem {
  static constexpr int kX = 0;
  static constexpr int kW = kX + 2 * kGemmRows * kGemmXStride * 4;
  static constexpr int kParts =
      kW + 2 * kGemmCols * GemmShape<kType>::kRowBytes;
  static constexpr int kScales = kParts + 3 * kGemmRows * kGemmPartStride * 2;
  static constexpr int kInverse = kScales + 2 * 2 * kGemmCols * 4;
  static constexpr int kSource = kInverse + kGemmRows * 4;
  static constexpr int kDest = kSource + kGemmRows * 4; // + 64 x 4 bytes
};

/// The shared-window address of a generic pointer into shared memory (as
/// CudaAttention.cuh's sharedAddress, which this file includes after).
__device__ __forceinline__ uint32_t gemmSharedAddress(const void *p) {
  uint64_t shared;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(shared) : "l"(p));
  return uint32_t(shared);
}

/// The mbarriers of the kernels fed by the copy engine (the MXFP4 expert
/// kernel's stages below, CudaGemm.cuh's and CudaSparseMla.cuh's tiles).
__device__ __forceinline__ void barrierInit(uint64_t *bar, uint32_t count) {
  asm volatile(
      "mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(gemmSharedAddress(bar)),
      "r"(count)
      : "memory");
}

/// Arrives on `bar` and adds `bytes` to the transactions its phase awaits.
__device__ __forceinline__ void barrierExpectBytes(uint64_t *bar,
                                                   uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   gemmSharedAddress(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void barrierArrive(uint64_t *bar) {
  asm volatile(
      "mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(gemmSharedAddress(bar))
      : "memory");
}

/// Waits until the phase of `bar` with this parity has completed (a fresh
/// barrier counts its phase before the first, parity 1, as complete).
__device__ __forceinline__ void barrierWait(uint64_t *bar, uint32_t parity) {
  uint32_t done = 0;
  const uint32_t address = gemmSharedAddress(bar);
  do {
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done)
                 : "r"(address), "r"(parity)
                 : "memory");
  } while (!done);
}

/// `bytes` (a multiple of 16, both addresses 16-byte aligned) of a streamed
/// weight from global to shared memory by the copy engine, counted on
/// `bar`'s transactions, evicted first from L2 (streamPolicy).
__device__ __forceinline__ void copyBulkStream(void *dst, const void *src,
                                               uint32_t bytes, uint64_t *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
               "bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
                   gemmSharedAddress(dst)),
               "l"(src), "r"(bytes), "r"(gemmSharedAddress(bar)),
               "l"(streamPolicy())
               : "memory");
}

/// 16 (or 4) bytes from global to shared memory, asynchronously; zeros
/// where !valid (`src` is then not read).
__device__ __forceinline__ void copyAsync16(void *dst, const void *src,
                                            bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                   gemmSharedAddress(dst)),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
/// copyAsync16 of a streamed weight (always valid), evicted first from L2
/// (streamPolicy).
__device__ __forceinline__ void copyAsync16Stream(void *dst, const void *src) {
  asm volatile(
      "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(
          gemmSharedAddress(dst)),
      "l"(src), "l"(streamPolicy())
      : "memory");
}
__device__ __forceinline__ void copyAsync4(void *dst, const void *src,
                                           bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(
                   gemmSharedAddress(dst)),
               "l"(src), "r"(valid ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void copyAsyncCommit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
__device__ __forceinline__ void copyAsyncWaitAll() {
  asm volatile("cp.async.wait_group 0;" ::: "memory");
}
/// Waits until at most kPending of this thread's committed copy groups are
/// still in flight.
template <int kPending> __device__ __forceinline__ void copyAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

/// An mma A fragment (16 x 16, 16-bit) from shared memory: lanes 0-15 give
/// the rows of columns 0-7, lanes 16-31 those of columns 8-15.
__device__ __forceinline__ void loadMatrixX4(uint32_t (&a)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, "
               "[%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(gemmSharedAddress(p))
               : "memory");
}

/// One block's 64 x 128 output tile (see above). `source[r]`: the x row of
/// tile row r (-1: none, a zero row; rows `ldx` floats apart); `dest[r]`:
/// its output row (-1: not written; rows `ldo` apart); both in shared memory,
/// written before the call and followed by a barrier. `weight` and `scales`
/// point at the expert's matrix and its scale rows; `biasOffset` at its bias
/// row. kFoldSteps: k-steps a scale group (2: blockK 32; 4: blockK a multiple
/// of 64, and bf16). kParts: 3, x split exactly (splitX); 1, x rounded to bf16
/// (roundX:
/// `--precision=bf16`, a third of the mma).
template <int kType, int kFoldSteps, int kParts>
__device__ __forceinline__ void
gemmTile(const float *__restrict__ x, const uint8_t *__restrict__ weight,
         const float *__restrict__ scales, const Weight &w, const Weight &bias,
         int64_t biasOffset, int64_t n, int64_t k, int64_t n0,
         float *__restrict__ out, uint8_t *smem, int64_t ldx, int64_t ldo) {
  using S = GemmShape<kType>;
  using L = GemmSmem<kType>;
  constexpr int C = S::kChunkSteps;
  constexpr int kGroups = 4 / kFoldSteps; // scale groups a stage
  // The stage's K permutation: lane t's four columns of k-step s. Whole
  // stage groups (bf16; e4m3 with blockK >= 64) take 16 t + 4 s, so one
  // 8-byte load of a lane serves two k-steps of e4m3 and every k-step
  // spans the stage. [1, 32] scale groups (kFoldSteps 2) must keep each
  // group's two k-steps inside its 32 columns: 32 (s / 2) + 8 t + 4 (s % 2),
  // still two k-steps an 8-byte load. x's parts follow the same map.
  constexpr bool kSplitGroups = kType == kWeightE4M3 && kFoldSteps == 2;
  auto stepColumn = [](int step, int lane) {
    return kSplitGroups ? 32 * (step / 2) + 8 * lane + 4 * (step % 2)
                        : (step / C) * 16 * C + lane * 4 * C + (step % C) * 4;
  };
  float *xs = reinterpret_cast<float *>(smem + L::kX);
  uint8_t *ws = smem + L::kW;
  uint16_t *parts = reinterpret_cast<uint16_t *>(smem + L::kParts);
  float *scaleStage = reinterpret_cast<float *>(smem + L::kScales);
  float *inverse = reinterpret_cast<float *>(smem + L::kInverse);
  const int32_t *source = reinterpret_cast<const int32_t *>(smem + L::kSource);
  const int32_t *dest = reinterpret_cast<const int32_t *>(smem + L::kDest);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wm = warp & 1, wn = warp >> 1;

  // The scale row of this thread's column (thread i loads column n0 + i).
  const bool ownColumn = n0 + tid < n;
  const float *scaleRow =
      kType == kWeightE4M3 && ownColumn
          ? scales + ((n0 + tid) / w.blockN) * ((k + w.blockK - 1) / w.blockK)
          : scales;

  // Stage loads: x's 64 rows of 16 pieces, two threads a row taking every
  // other piece (a warp fills whole 32-byte sectors of 16 rows, from one
  // row pointer a thread), the weight's 128 rows, and the e4m3 scales of
  // the stage's groups per column.
  const int xRow = tid >> 1, xHalf = tid & 1;
  const int32_t xSource = source[xRow];
  const float *xBase =
      x + (xSource >= 0 ? int64_t(xSource) * ldx : 0) + xHalf * 4;
  constexpr int kPieces = S::kRowBytes / 16, kRowStep = kGemmThreads / kPieces;
  const int wRow = tid / kPieces, wPiece = tid % kPieces;
  const int wCol = wPiece * (16 / S::kBytes);
  const uint8_t *wBase = weight + ((n0 + wRow) * k + wCol) * S::kBytes;
  uint8_t *wDst =
      ws + (kType == kWeightE4M3 ? wPiece : wPiece ^ ((wRow & 1) << 2)) * 16;
  auto load = [&](int64_t k0, int buf) {
    float *xDst = xs + (buf * kGemmRows + xRow) * kGemmXStride + xHalf * 4;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      bool valid = xSource >= 0 && k0 + xHalf * 4 + i * 8 < k;
      copyAsync16(xDst + i * 8, valid ? xBase + k0 + i * 8 : x, valid);
    }
    // The weight: 128 rows of 4 (e4m3) or 8 (bf16) pieces, a thread taking
    // one piece of every kRowStep-th row; bf16 swaps the halves of odd
    // rows so a quarter warp's two rows hit distinct banks.
#pragma unroll
    for (int i = 0; i < kGemmCols / kRowStep; ++i) {
      const int row = wRow + i * kRowStep;
      bool valid = n0 + row < n && k0 + wCol < k;
      copyAsync16(wDst + (buf * kGemmCols + row) * S::kRowBytes,
                  valid ? wBase + (i * kRowStep * k + k0) * S::kBytes : weight,
                  valid);
    }
    if (kType == kWeightE4M3) {
#pragma unroll
      for (int grp = 0; grp < kGroups; ++grp) {
        int64_t col = k0 + grp * kFoldSteps * 16;
        bool valid = ownColumn && col < k;
        copyAsync4(scaleStage + (buf * 2 + grp) * kGemmCols + tid,
                   valid ? scaleRow + col / w.blockK : scales, valid);
      }
    }
    copyAsyncCommit();
  };

  // Splits stage `buf` of x into the parts: thread (row, h) takes k-steps
  // 2h and 2h + 1 of its row; a quarter warp holds 8 rows at one h, so
  // its loads and stores fall in distinct banks.
  auto convert = [&](int buf) {
    const int h = (tid >> 3) & 1, row = (tid >> 4) * 8 + (tid & 7);
    const float *xr = xs + (buf * kGemmRows + row) * kGemmXStride;
    float4 v[2][4];
#pragma unroll
    for (int jj = 0; jj < 2; ++jj)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int step = 2 * h + jj;
        v[jj][q] = *reinterpret_cast<const float4 *>(xr + stepColumn(step, q));
      }
    if (kType == kWeightE4M3) {
      // The row's largest |x| of the stage into [2^14, 2^15).
      float amax = 0.0f;
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int q = 0; q < 4; ++q)
          amax = fmaxf(fmaxf(amax, fmaxf(fabsf(v[jj][q].x), fabsf(v[jj][q].y))),
                       fmaxf(fabsf(v[jj][q].z), fabsf(v[jj][q].w)));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 8));
      const float2 scales = f16StageScale(amax);
      const float scale = scales.x;
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          v[jj][q].x *= scale;
          v[jj][q].y *= scale;
          v[jj][q].z *= scale;
          v[jj][q].w *= scale;
        }
      if (h == 0)
        inverse[row] = scales.y;
    }
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      // Fragment columns 2q, 2q + 1 (lo) and 2q + 8, 2q + 9 (hi) of the
      // k-step: piece q's first and second pair.
      uint32_t lo[kParts][4], hi[kParts][4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        if (kParts == 1) {
          lo[0][q] = roundX<kType>(v[jj][q].x, v[jj][q].y);
          hi[0][q] = roundX<kType>(v[jj][q].z, v[jj][q].w);
          continue;
        }
        uint32_t p[3];
        splitX<kType>(v[jj][q].x, v[jj][q].y, p);
#pragma unroll
        for (int i = 0; i < kParts; ++i)
          lo[i][q] = p[i];
        splitX<kType>(v[jj][q].z, v[jj][q].w, p);
#pragma unroll
        for (int i = 0; i < kParts; ++i)
          hi[i][q] = p[i];
      }
      const int step = 2 * h + jj;
#pragma unroll
      for (int i = 0; i < kParts; ++i) {
        uint16_t *dst =
            parts + (i * kGemmRows + row) * kGemmPartStride + step * 16;
        *reinterpret_cast<uint4 *>(dst) =
            make_uint4(lo[i][0], lo[i][1], lo[i][2], lo[i][3]);
        *reinterpret_cast<uint4 *>(dst + 8) =
            make_uint4(hi[i][0], hi[i][1], hi[i][2], hi[i][3]);
      }
    }
  };

  // acc[mt][nt]: rows wm * 32 + mt * 16 + g (+ 8), columns wn * 64 +
  // nt * 8 + 2t (+ 1), the mma's accumulator order. One row tile at a time
  // sums a scale group on the tensor cores (c) and folds it into acc: the
  // weight's words are read and widened once per row tile, which keeps the
  // registers under the 255 two blocks an SM allow.
  float acc[2][8][4] = {};
  auto fold = [&](const float(&c)[8][4], int mt, int buf, int grp) {
    float inv0 = 1.0f, inv1 = 1.0f;
    if (kType == kWeightE4M3) {
      inv0 = inverse[wm * 32 + mt * 16 + g];
      inv1 = inverse[wm * 32 + mt * 16 + g + 8];
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      if (kType == kWeightE4M3) {
        float2 s = *reinterpret_cast<const float2 *>(
            scaleStage + (buf * 2 + grp) * kGemmCols + wn * 64 + nt * 8 +
            2 * t);
        acc[mt][nt][0] = fmaf(c[nt][0], s.x * inv0, acc[mt][nt][0]);
        acc[mt][nt][1] = fmaf(c[nt][1], s.y * inv0, acc[mt][nt][1]);
        acc[mt][nt][2] = fmaf(c[nt][2], s.x * inv1, acc[mt][nt][2]);
        acc[mt][nt][3] = fmaf(c[nt][3], s.y * inv1, acc[mt][nt][3]);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q)
          acc[mt][nt][q] += c[nt][q];
      }
    }
  };

  // 8 bytes of a weight row per load: two k-steps of e4m3, one of bf16.
  constexpr int kPerLoad = 2 / S::kBytes;
  auto multiply = [&](int buf) {
    const uint8_t *wb = ws + buf * kGemmCols * S::kRowBytes;
#pragma unroll
    for (int grp = 0; grp < kGroups; ++grp)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        float c[8][4] = {};
#pragma unroll
        for (int step0 = grp * kFoldSteps; step0 < (grp + 1) * kFoldSteps;
             step0 += kPerLoad) {
          // This lane's words of each of its 8 column tiles: row g of the
          // tile, piece t of the k-steps' span (bf16: halves swapped on
          // odd rows).
          const int span = step0 / C, sub0 = step0 % C;
          uint2 raw[8];
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) {
            int row = wn * 64 + nt * 8 + g;
            int piece = span * 4 + t;
            if (kType != kWeightE4M3)
              piece ^= (g & 1) << 2;
            raw[nt] = *reinterpret_cast<const uint2 *>(
                wb + row * S::kRowBytes +
                (kSplitGroups ? stepColumn(step0, t)
                              : piece * 16 + (sub0 / kPerLoad) * 8));
          }
#pragma unroll
          for (int d = 0; d < kPerLoad; ++d) {
            const int step = step0 + d;
            uint2 b[8];
#pragma unroll
            for (int nt = 0; nt < 8; ++nt) {
              if (kType == kWeightE4M3)
                e4m3x4ToHalf2(d == 0 ? raw[nt].x : raw[nt].y, b[nt].x, b[nt].y);
              else
                b[nt] = raw[nt];
            }
#pragma unroll
            for (int i = 0; i < kParts; ++i) {
              uint32_t a[4];
              loadMatrixX4(
                  a, parts +
                         (i * kGemmRows + wm * 32 + mt * 16 + (lane & 15)) *
                             kGemmPartStride +
                         step * 16 + (lane >> 4) * 8);
#pragma unroll
              for (int nt = 0; nt < 8; ++nt)
                mma16816<kType>(c[nt], a, b[nt]);
            }
          }
        }
        fold(c, mt, buf, grp);
      }
  };

  const int64_t stages = (k + kGemmK - 1) / kGemmK;
  load(0, 0);
  for (int64_t s = 0; s < stages; ++s) {
    const int buf = int(s & 1);
    // Stage s has landed for every thread, and every warp is done with
    // stage s - 1 (its buffers and the parts are free).
    copyAsyncWaitAll();
    __syncthreads();
    if (s + 1 < stages)
      load((s + 1) * kGemmK, buf ^ 1);
    convert(buf);
    __syncthreads();
    multiply(buf);
  }

#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int32_t row = dest[wm * 32 + mt * 16 + g + 8 * half];
      if (row < 0)
        continue;
      float *o = out + int64_t(row) * ldo;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          int64_t col = n0 + wn * 64 + nt * 8 + 2 * t + j;
          if (col < n)
            o[col] = acc[mt][nt][2 * half + j] +
                     (bias.data ? weightAt(bias, biasOffset + col) : 0.0f);
        }
    }
}

extern __shared__ __align__(16) uint8_t tcGemmShared[];

/// The dense GEMM: grid (ceil(N / 128), ceil(M / 64)), block 128, dynamic
/// shared memory as GemmSmem lays it out. Needs K a multiple of 16, x and
/// the weight 16-byte aligned, and for e4m3 blockK 32 (kFoldSteps 2) or a
/// multiple of 64 (CudaKernels::tensorGemmApplies).
template <int kType, int kFoldSteps, int kParts>
__device__ __forceinline__ void gemmDense(const float *x, const Weight &w,
                                          const Weight &bias, int64_t m,
                                          int64_t n, int64_t k, float *out) {
  using L = GemmSmem<kType>;
  int32_t *source = reinterpret_cast<int32_t *>(tcGemmShared + L::kSource);
  int32_t *dest = reinterpret_cast<int32_t *>(tcGemmShared + L::kDest);
  const int64_t m0 = int64_t(blockIdx.y) * kGemmRows;
  if (threadIdx.x < kGemmRows) {
    int64_t row = m0 + threadIdx.x;
    source[threadIdx.x] = dest[threadIdx.x] = row < m ? int32_t(row) : -1;
  }
  __syncthreads();
  gemmTile<kType, kFoldSteps, kParts>(
      x, static_cast<const uint8_t *>(w.data), w.scales, w, bias, 0, n, k,
      int64_t(blockIdx.x) * kGemmCols, out, tcGemmShared, k, n);
}

/// The per-head GEMM (lm.head_matmul over [H, N, K] weights, MLA's
/// absorbed W_UK and W_UV): grid (ceil(N / 128), ceil(T / 64), H); head h
/// multiplies x[:, h, :] (rows H xStride floats apart) by its [N, K] matrix
/// into out[:, h, :] (rows H outStride apart); the strides are K and N, or
/// wider for column views (xStride a multiple of 4: rows stay 16-byte
/// aligned). As gemmDense otherwise.
template <int kType, int kFoldSteps, int kParts>
__device__ __forceinline__ void gemmHeads(const float *x, const Weight &w,
                                          int64_t tokens, int64_t heads,
                                          int64_t n, int64_t k, float *out,
                                          int64_t xStride, int64_t outStride) {
  using L = GemmSmem<kType>;
  int32_t *source = reinterpret_cast<int32_t *>(tcGemmShared + L::kSource);
  int32_t *dest = reinterpret_cast<int32_t *>(tcGemmShared + L::kDest);
  const int64_t m0 = int64_t(blockIdx.y) * kGemmRows, h = blockIdx.z;
  if (threadIdx.x < kGemmRows) {
    int64_t row = m0 + threadIdx.x;
    source[threadIdx.x] = dest[threadIdx.x] = row < tokens ? int32_t(row) : -1;
  }
  __syncthreads();
  const float *scales = w.scales;
  if (kType == kWeightE4M3)
    scales +=
        h * ((n + w.blockN - 1) / w.blockN) * ((k + w.blockK - 1) / w.blockK);
  gemmTile<kType, kFoldSteps, kParts>(
      x + h * xStride,
      static_cast<const uint8_t *>(w.data) +
          h * n * k * GemmShape<kType>::kBytes,
      scales, w, Weight{}, 0, n, k, int64_t(blockIdx.x) * kGemmCols,
      out + h * outStride, tcGemmShared, heads * xStride, heads * outStride);
}

/// The grouped expert GEMM over the tiles daybreak_expert_group built:
/// grid (ceil(N / 128), an upper bound on the tiles), block 128; a block
/// past the tile count returns. Tile (expert, begin, rows) multiplies the
/// rows order[begin, begin + rows) (each a token x slots + slot pair) by
/// the expert's matrix into `out` row pair (bias: the expert's row).
template <int kType, int kFoldSteps, int kParts>
__device__ __forceinline__ void
gemmExperts(const float *x, int32_t perSlotInput, const Weight &w, int64_t n,
            int64_t k, const int32_t *order, const int4 *tiles,
            const int32_t *tileCount, int64_t slots, const Weight &bias,
            float *out) {
  using L = GemmSmem<kType>;
  if (int64_t(blockIdx.y) >= int64_t(*tileCount))
    return;
  const int4 tile = tiles[blockIdx.y];
  int32_t *source = reinterpret_cast<int32_t *>(tcGemmShared + L::kSource);
  int32_t *dest = reinterpret_cast<int32_t *>(tcGemmShared + L::kDest);
  if (threadIdx.x < kGemmRows) {
    int32_t pair = int(threadIdx.x) < tile.z ? order[tile.y + threadIdx.x] : -1;
    source[threadIdx.x] = pair < 0       ? -1
                          : perSlotInput ? pair
                                         : int32_t(pair / slots);
    dest[threadIdx.x] = pair;
  }
  __syncthreads();
  const int64_t e = tile.x;
  const float *scales = w.scales;
  if (kType == kWeightE4M3)
    scales +=
        e * ((n + w.blockN - 1) / w.blockN) * ((k + w.blockK - 1) / w.blockK);
  gemmTile<kType, kFoldSteps, kParts>(x,
                                      static_cast<const uint8_t *>(w.data) +
                                          e * n * k * GemmShape<kType>::kBytes,
                                      scales, w, bias, e * n, n, k,
                                      int64_t(blockIdx.x) * kGemmCols, out,
                                      tcGemmShared, k, n);
}

/// Exclusive prefix sums over the block (1024 threads) of two counts;
/// `totals` (33 int2 in shared memory: a warp's each, then the block's)
/// gets reused, `sum` the totals.
__device__ int2 blockExclusiveScan(int2 v, int2 *totals, int2 &sum) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int2 inclusive = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    int a = __shfl_up_sync(0xffffffffu, inclusive.x, o);
    int b = __shfl_up_sync(0xffffffffu, inclusive.y, o);
    if (lane >= o) {
      inclusive.x += a;
      inclusive.y += b;
    }
  }
  if (lane == 31)
    totals[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int2 w = totals[lane], scanned = w;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      int a = __shfl_up_sync(0xffffffffu, scanned.x, o);
      int b = __shfl_up_sync(0xffffffffu, scanned.y, o);
      if (lane >= o) {
        scanned.x += a;
        scanned.y += b;
      }
    }
    totals[lane] = make_int2(scanned.x - w.x, scanned.y - w.y);
    if (lane == 31)
      totals[32] = scanned;
  }
  __syncthreads();
  sum = totals[32];
  int2 base = totals[warp];
  return make_int2(base.x + inclusive.x - v.x, base.y + inclusive.y - v.y);
}

} // namespace

#define DAYBREAK_TC_GEMM(name, type, fold, parts)                              \
  extern "C" __global__ void __launch_bounds__(kGemmThreads, 2)                \
      daybreak_gemm_tc_##name(const float *x, Weight w, Weight bias,           \
                              int64_t m, int64_t n, int64_t k, float *out) {   \
    gemmDense<type, fold, parts>(x, w, bias, m, n, k, out);                    \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kGemmThreads, 2)                \
      daybreak_expert_gemm_tc_##name(                                          \
          const float *x, int32_t perSlotInput, Weight w, int64_t n,           \
          int64_t k, const int32_t *order, const int4 *tiles,                  \
          const int32_t *tileCount, int64_t slots, Weight bias, float *out) {  \
    gemmExperts<type, fold, parts>(x, perSlotInput, w, n, k, order, tiles,     \
                                   tileCount, slots, bias, out);               \
  }
/// Tensor-core GEMMs (CudaKernels::tensorGemm, tensorExpertMatmul): bf16;
/// e4m3 with blockK a multiple of 64 (DeepSeek's 128 x 128 blocks); e4m3
/// with blockK 32 (gpt-oss's MXFP4 experts as e4m3 with [1, 32] scales).
/// The _x1 forms take x rounded to bf16 (`--precision=bf16`).
DAYBREAK_TC_GEMM(bf16, kWeightBF16, 4, 3)
DAYBREAK_TC_GEMM(e4m3, kWeightE4M3, 4, 3)
DAYBREAK_TC_GEMM(e4m3_k32, kWeightE4M3, 2, 3)
DAYBREAK_TC_GEMM(bf16_x1, kWeightBF16, 4, 1)
DAYBREAK_TC_GEMM(e4m3_x1, kWeightE4M3, 4, 1)
DAYBREAK_TC_GEMM(e4m3_k32_x1, kWeightE4M3, 2, 1)
#undef DAYBREAK_TC_GEMM

/// Per-head tensor-core GEMMs (CudaKernels::headMatmul): bf16 [H, N, K]
/// weights; _x1 takes x rounded to bf16.
#define DAYBREAK_HEAD_GEMM(name, type, fold, parts)                            \
  extern "C" __global__ void __launch_bounds__(kGemmThreads, 2)                \
      daybreak_head_gemm_tc_##name(                                            \
          const float *x, Weight w, int64_t tokens, int64_t heads, int64_t n,  \
          int64_t k, float *out, int64_t xStride, int64_t outStride) {         \
    beginDependent();                                                          \
    gemmHeads<type, fold, parts>(x, w, tokens, heads, n, k, out, xStride,      \
                                 outStride);                                   \
  }
DAYBREAK_HEAD_GEMM(bf16, kWeightBF16, 4, 3)
DAYBREAK_HEAD_GEMM(bf16_x1, kWeightBF16, 4, 1)
#undef DAYBREAK_HEAD_GEMM

//===----------------------------------------------------------------------===//
// The per-head GEMV (lm.head_matmul over bf16 [H, N, K] weights at decode's
// 1 to kHeadGemvMaxTokens tokens: MLA's absorbed W_UK and W_UV). The [H x N,
// K] rows are one stream of 16-byte chunks (8 bf16), K / 8 = kChunks a row;
// a warp takes kHeadGemvLoads x 32 consecutive chunks (4 KB: 256 / kChunks
// rows), issues all its loads at once (the weights are constant: before
// griddepcontrol.wait, so they overlap the kernel before), then multiplies
// each chunk by the 8 columns of x's row of the chunk row's head (fp32 FMA
// on the widened bf16: exact products, x rounded to bf16 first under
// --precision=bf16) and adds a row's lanes with shuffles in a fixed order.
// Every warp is one round trip and all of them fit the GPU at once (4096
// warps for DeepSeek's 16.8 MB matrices). On the H100 (bench/NOTES.md,
// session 40) it takes 10.1 and 10.5 us at one token against the GEMM's
// 12.9 and 15.4 with x in three parts, but 8.2 and 9.3 with bf16 x in one:
// headMatmul takes it for exact x.
//===----------------------------------------------------------------------===//

namespace {

constexpr int kHeadGemvLoads = 8;     // 16-byte chunks a lane
constexpr int kHeadGemvWarps = 8;

/// Block kHeadGemvWarps x 32 threads, grid ceil(H N kChunks / (32
/// kHeadGemvLoads) / kHeadGemvWarps). kChunks (K / 8) divides 32 or is a
/// multiple of it, at most 32 kHeadGemvLoads; the weight 16-byte aligned, x
/// rows 16-byte aligned (xStride a multiple of 4).
template <int kChunks>
__device__ __forceinline__ void
headGemv(const float *__restrict__ x, const uint16_t *__restrict__ w,
         int64_t tokens, int64_t heads, int64_t n, int64_t k,
         float *__restrict__ out, int64_t xStride, int64_t outStride,
         bool bf16Input) {
  constexpr int kRows = 32 * kHeadGemvLoads / kChunks; // a warp's rows
  constexpr int kLanes = kChunks < 32 ? kChunks : 32;  // lanes of a row
  const int lane = threadIdx.x & 31;
  const int64_t rowCount = heads * n;
  const int64_t row0 =
      (int64_t(blockIdx.x) * kHeadGemvWarps + (threadIdx.x >> 5)) * kRows;
  // Chunk lane + 32 j of the warp's span: row (lane + 32 j) / kChunks,
  // chunk column (lane + 32 j) % kChunks (rows past the last clamped to it,
  // never written).
  uint4 raw[kHeadGemvLoads];
#pragma unroll
  for (int j = 0; j < kHeadGemvLoads; ++j) {
    const int c = lane + 32 * j;
    const int64_t row = min(row0 + c / kChunks, rowCount - 1);
    raw[j] = ldgStream(w + row * k + (c % kChunks) * 8);
  }
  beginDependent();
  // Row q of the warp's kRows per lane group: its chunks' products on each
  // lane (kChunks > 32: loads q kPerLane .. on one row), then the sum over
  // its kLanes lanes, a token at a time.
  constexpr int kPerLane = kChunks > 32 ? kChunks / 32 : 1;
#pragma unroll
  for (int q = 0; q < kHeadGemvLoads / kPerLane; ++q) {
    const int c = lane + 32 * q * kPerLane;
    const int64_t row = row0 + c / kChunks;
    const int64_t head = min(row, rowCount - 1) / n;
    for (int t = 0; t < tokens; ++t) {
      const float *xRow = x + (t * heads + head) * xStride;
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int j = q * kPerLane + i;
        const float4 *xs = reinterpret_cast<const float4 *>(
            xRow + ((c + 32 * i) % kChunks) * 8);
        const float4 a = __ldg(xs), b = __ldg(xs + 1);
        const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        const uint32_t word[4] = {raw[j].x, raw[j].y, raw[j].z, raw[j].w};
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float xe =
              bf16Input ? __uint_as_float(roundX<kWeightBF16>(v[e], 0.0f) << 16)
                        : v[e];
          const uint32_t bits =
              e % 2 ? word[e / 2] & 0xFFFF0000u : word[e / 2] << 16;
          dot = fmaf(xe, __uint_as_float(bits), dot);
        }
        sum += dot;
      }
#pragma unroll
      for (int offset = kLanes / 2; offset > 0; offset /= 2)
        sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      if (lane % kLanes == 0 && row < rowCount)
        out[(t * heads + head) * outStride + row % n] = sum;
    }
  }
}

} // namespace

#define DAYBREAK_HEAD_GEMV(chunks)                                             \
  extern "C" __global__ void __launch_bounds__(kHeadGemvWarps * 32)            \
      daybreak_head_gemv_bf16_c##chunks(                                       \
          const float *x, Weight w, int64_t tokens, int64_t heads, int64_t n,  \
          int64_t k, float *out, int64_t xStride, int64_t outStride,           \
          int32_t bf16Input) {                                                 \
    headGemv<chunks>(x, static_cast<const uint16_t *>(w.data), tokens, heads,  \
                     n, k, out, xStride, outStride, bf16Input != 0);           \
  }
/// Per-head GEMVs (CudaKernels::headMatmul at decode sizes): bf16 [H, N, K]
/// weights of K = 8 x chunks, 64 to 1024.
DAYBREAK_HEAD_GEMV(8)
DAYBREAK_HEAD_GEMV(16)
DAYBREAK_HEAD_GEMV(32)
DAYBREAK_HEAD_GEMV(64)
DAYBREAK_HEAD_GEMV(128)
#undef DAYBREAK_HEAD_GEMV

/// out[i] = x[i] rounded to bf16 (nearest even), as an fp32 value: the
/// input of a matmul under `--precision=bf16` whose kernel has no rounding
/// form of its own. Grid-stride, one value a thread a step.
extern "C" __global__ void daybreak_round_bf16(const float *x, int64_t n,
                                               float *out) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    out[i] = __uint_as_float(roundX<kWeightBF16>(x[i], 0.0f) << 16);
}

/// Groups the rows of a grouped expert matmul by expert for the GEMM
/// above: one block of 1024 threads, dynamic shared memory 2 x E ints
/// (E <= 4096). Counts each expert's rows (an id outside [0, E) is an
/// empty slot), scans them, writes each expert's tiles of at most
/// `tileRows` rows (expert, first row in `order`, rows), their count
/// (tileCount[0]) and the rows of every tile (tileCount[1]), and places each
/// row in `order` by expert (atomics: the order within an expert varies
/// from run to run, the results do not: a row's output depends on that
/// row alone). Without routing weights, `zeroOut` ([rows, N]) gets zeros
/// in the rows of empty slots (the GEMM writes every other row once).
extern "C" __global__ void __launch_bounds__(1024)
    daybreak_expert_group(const int32_t *indices, int64_t rows, int64_t experts,
                          int32_t *order, int4 *tiles, int32_t *tileCount,
                          float *zeroOut, int64_t n, int32_t tileRows) {
  extern __shared__ int32_t groupShared[];
  __shared__ int2 totals[33];
  int32_t *count = groupShared, *cursor = groupShared + experts;
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x)
    count[e] = 0;
  __syncthreads();
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    int32_t e = indices[r];
    if (e >= 0 && e < experts)
      atomicAdd(&count[e], 1);
    else if (zeroOut)
      for (int64_t j = 0; j < n; ++j)
        zeroOut[r * n + j] = 0.0f;
  }
  __syncthreads();
  // Each thread scans a run of `per` experts: rows and tiles.
  const int64_t per = (experts + blockDim.x - 1) / blockDim.x;
  const int64_t first = min(int64_t(threadIdx.x) * per, experts);
  const int64_t last = min(first + per, experts);
  int2 mine = make_int2(0, 0);
  for (int64_t e = first; e < last; ++e) {
    mine.x += count[e];
    mine.y += (count[e] + tileRows - 1) / tileRows;
  }
  int2 sum;
  int2 at = blockExclusiveScan(mine, totals, sum);
  for (int64_t e = first; e < last; ++e) {
    int32_t rowsOf = count[e];
    for (int32_t j = 0; j * tileRows < rowsOf; ++j)
      tiles[at.y + j] = make_int4(int(e), at.x + j * tileRows,
                                  min(tileRows, rowsOf - j * tileRows), 0);
    cursor[e] = at.x;
    at.x += rowsOf;
    at.y += (rowsOf + tileRows - 1) / tileRows;
  }
  if (threadIdx.x == 0) {
    tileCount[0] = sum.y;
    tileCount[1] = sum.x;
  }
  __syncthreads();
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    int32_t e = indices[r];
    if (e >= 0 && e < experts)
      order[atomicAdd(&cursor[e], 1)] = int32_t(r);
  }
}

/// out[t] = sum over slots s in order of routingWeights[t, s] * y[t, s]
/// (empty slots skipped), as daybreak_expert_matmul combines. grid
/// (ceil(N / 256), tokens), block 256.
extern "C" __global__ void
daybreak_expert_combine(const float *y, const int32_t *indices,
                        const float *routingWeights, int64_t experts,
                        int64_t tokens, int64_t slots, int64_t n, float *out) {
  beginDependent();
  int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t t = blockIdx.y;
  if (col >= n)
    return;
  float combined = 0.0f;
  for (int64_t s = 0; s < slots; ++s) {
    int64_t e = indices[t * slots + s];
    if (e >= 0 && e < experts)
      combined += routingWeights[t * slots + s] * y[(t * slots + s) * n + col];
  }
  out[t * n + col] = combined;
}

//===----------------------------------------------------------------------===//
// Routed experts at decode sizes on the tensor cores (1 to 8 tokens):
// out[pair, N] = x[pair's row, K] W_e[N, K]^T (+ bias_e) for each (token,
// slot) pair and its expert e, on e4m3 (128 x 128 block scales, or any
// blockK a multiple of 128 and blockN of 16) or bf16 weights, with the
// decode GEMVs' numerics (see "Decode GEMVs on the tensor cores" above:
// the weight the mma A operand widened in registers, x in three 16-bit
// parts, each group's mma sum folded into fp32 with its block scale), and
// each picked expert's weights read once however many tokens picked it.
//
// Every block first groups the pairs by expert in shared memory, all
// blocks alike (at most kEgMaxPairs pairs; each pair counts the pairs
// before it in (expert, pair) order, a ballot scan numbers the groups; a
// few hundred cycles for 64 pairs): a group is up to 8 pairs of one
// expert in pair order (an expert picked more often, possible only when a
// token repeats an expert, takes several), groups in increasing expert
// order. The work is then (group, 64-row tile of N) tasks of one size;
// the grid (no more blocks than are resident at once, so no second wave)
// takes them in contiguous runs, so a block's tasks mostly share a group
// and the x it staged. A task's four warps each stream 16 weight rows over
// all of K with 16-byte loads, the next K group in registers while one is
// multiplied and kEgAhead more requested into L2 ahead of those loads
// (cp.async.bulk.prefetch: bytes in flight without registers); the block
// converts the group's x rows into shared memory in fragment order, a
// chunk of K groups at a time (kEgStageBytes): all of K for one or two
// pairs at DeepSeek-V3.2's and GLM-5.3's expert shapes, but for
// DeepSeek's 7168-column gate/up (two chunks a task); the first weights
// of a task are in flight while it stages. Two B layouts by the group's
// pairs r, both accumulating a k-step's products on the tensor cores and
// each group's sum in fp32:
// - r <= 2: B column 4j + p is part p of pair j (column 4j + 3 zero): one
//   mma a k-step, the m = 1 GEMV's layout with a second pair beside the
//   first; lanes t and t ^ 1 hold one pair's column sums and add them at
//   the end.
// - r > 2: B column j is pair j, one mma a part (three a k-step), the
//   m = 8 GEMV's layout; columns past r hold whatever the stage held and
//   are never written.
// Each (pair, row) result is written once, with the expert's bias: into
// `out` [pairs, N] (rows of empty pairs zeroed, each block a slice of the
// columns) or, with routing weights, into scratch that
// daybreak_expert_combine adds in slot order. Nothing depends on
// scheduling: the results are the same run to run.
//
// Roofline (H200, 132 SMs, 4.2 TB/s copy), a prediction: DeepSeek-V3.2
// gate/up [4096, 7168] at T = 1, top-8 reads 8 x 29.4 MB = 235 MB (56 us),
// down [7168, 2048] 117 MB (28 us); at T = 8 about 57 of the 256 experts
// are distinct (random top-8), 1.69 GB and 0.84 GB (400 and 200 us).
// GLM-5.3-Flash (288 experts, hidden 4096, moe 2048): gate/up 134 MB (32
// us), down 67 MB (16 us) at T = 1. (ModelBuilder emits gate and up as two
// launches of half those bytes each today.) Per 2 KB of weights (a warp's 16
// rows of one 128-column group) a lane issues 4 loads, 32 conversions, 8 B
// fragment loads, 8 mma (24 for r > 2) and the fold: about 60 warp
// instructions against the 512 issue slots that 2 KB of an SM's share of
// HBM (16 B a cycle) lasts, and 1024 conversions, half the conversion
// pipe's 16 a cycle: memory-bound at both T. Bytes in flight: 64 B a lane
// in registers and kEgAhead x 128 B a row in L2 requests, 40 KB a block.
// Tasks: 512 at T = 1 for both gate/ups and GLM's down, 896 for
// DeepSeek's down, against ~800 resident blocks; so the busiest SM has
// 2-4 % more than the mean. Expected: 75-80 % of the copy bandwidth on
// the large T = 1 launches (the dense GEMV's m = 1 level, plus deeper
// prefetch) and at T = 8, less on GLM's 67 MB down (~1 us of grouping and
// first loads against a 16 us launch).
//===----------------------------------------------------------------------===//

namespace {

constexpr int kEgMaxPairs = 256;       // kExpertGemvMaxPairs in CudaKernels.h
constexpr int kEgGroupPairs = 8;       // pairs a group holds at most
constexpr int kEgWarps = 4;            // a 16-row tile each
constexpr int kEgRows = 16 * kEgWarps; // kExpertGemvRows in CudaKernels.h
/// x's parts and inverse scales of a chunk of K groups
/// (kExpertGemvStageBytes in CudaKernels.h): 37 e4m3 groups (4736
/// columns) for one pair, 18 for two, 4 for more.
constexpr int kEgStageBytes = 28 * 1024;
/// K groups requested into L2 ahead of the register loads.
constexpr int kEgAhead = 4;
/// x's quads a thread loads at once when it stages them: 4 for the ring
/// forms, 1 for the registers form, whose next weights held in registers
/// leave no room for more (ptxas, CUDA 13.0: 2 or 4 spill).
template <int kStages> constexpr int kEgStageBatch = kStages == 0 ? 1 : 4;
/// The ring form's slot for one warp and K group: each lane's four 16-byte
/// chunks (rows g and g + 8, two chunks each) in lane order, then each
/// lane's block scale (kExpertGemvRingSlotBytes in CudaKernels.h).
constexpr int kEgRingSlotBytes = 4 * 32 * 16 + 32 * 4;
/// A split cluster's partial sums of one task (two buffers after the ring
/// forms' rings; kExpertGemvPartialBytes in CudaKernels.h).
constexpr int kEgPartialFloats = kEgRows * kEgGroupPairs;

/// The E2M1 expert GEMV's multiply of one K group (expertGemvTensor's
/// compute): for each of the 8 blocks, the two k-steps' mma over rows g and
/// g + 8 (`words`, word t of each block, transposed) and the staged x
/// (`entry`, `perStep` B entries a step), brought back to x's scale (inv0,
/// inv1: the lane's columns' pairs, times 2^14 for the weights' 2^-14) and
/// times the block's 2^(s - 127) into acc. `scales`: the quad lane's block
/// factors (blocks 2t, 2t + 1 of row g, then of row g + 8), which lane b / 2
/// of the quad gives block b. The weights enter the mma as
/// e2m1x8ToHalf2's f16s, the E2M1 values times 2^-14: code 0.5 is then the
/// f16 subnormal 2^-15, which the tensor cores must take as it is (a flush
/// to zero would fail CudaKernelsTest.Mxfp4ExpertMatmul, whose random
/// codes include it). Once per tile layout (kWide: r > 2, three tiles), so
/// neither issues the other's mma.
template <bool kWide>
__device__ __forceinline__ void
e2m1GroupProducts(const uint32_t (&words)[2][8], const float (&scales)[4],
                  const uint2 *entry, int perStep, float inv0, float inv1,
                  int r, float (&acc)[4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // r <= 2: this lane's B entry (column g: part g % 4 of pair g / 4;
  // zeros past the pairs); r > 2: the lane's entry of each part.
  const int j = g >> 2, p = g & 3;
  const bool live = kWide || (p < 3 && j < r);
  const uint2 *column =
      entry + (kWide ? lane : (live ? (j * 3 + p) * 4 + t : 0));
#pragma unroll
  for (int b = 0; b < 8; ++b) {
    // Lane t of the quad holds blocks 2t and 2t + 1.
    const int from = (lane & ~3) | (b >> 1);
    const float f0 = __shfl_sync(0xffffffffu, scales[b & 1], from),
                f1 = __shfl_sync(0xffffffffu, scales[2 + (b & 1)], from);
    uint32_t h0[4], h1[4];
    e2m1x8ToHalf2(words[0][b], h0);
    e2m1x8ToHalf2(words[1][b], h1);
    float c[4] = {};
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const uint2 *step = column + (2 * b + u) * perStep;
      const uint32_t a[4] = {h0[2 * u], h1[2 * u], h0[2 * u + 1],
                             h1[2 * u + 1]};
      if constexpr (kWide) {
#pragma unroll
        for (int part = 0; part < 3; ++part)
          mma16816<kWeightE2M1>(c, a, step[part * 32]);
      } else {
        mma16816<kWeightE2M1>(c, a, live ? *step : make_uint2(0u, 0u));
      }
    }
    if constexpr (kWide) {
      acc[0] = fmaf(c[0] * inv0, f0, acc[0]);
      acc[1] = fmaf(c[1] * inv1, f0, acc[1]);
      acc[2] = fmaf(c[2] * inv0, f1, acc[2]);
      acc[3] = fmaf(c[3] * inv1, f1, acc[3]);
    } else {
      acc[0] = fmaf((c[0] + c[1]) * inv0, f0, acc[0]);
      acc[1] = fmaf((c[2] + c[3]) * inv0, f1, acc[1]);
    }
  }
}

extern __shared__ __align__(16) uint8_t egStage[];

/// The decode expert GEMV (see above). Block kEgWarps x 32 threads, grid
/// at most the blocks resident at once, dynamic shared memory
/// kEgStageBytes (E2M1: then the transposition buffers,
/// kExpertGemvE2m1SharedBytes). Needs K a multiple of the group (E2M1: of
/// 64, the last group partial), the weight and x 16-byte aligned, and for
/// e4m3 blockK a multiple of 128 and blockN of 16
/// (CudaKernels::tensorExpertGemvApplies, mxfp4ExpertGemvApplies). An
/// expert id outside [0, E) is an empty pair.
template <int kType, int kStages>
__device__ __forceinline__ void
expertGemvTensor(const float *__restrict__ x, int32_t perSlotInput,
                 const Weight &w, const Weight &bias, int64_t experts,
                 int64_t n, int64_t k, const int32_t *__restrict__ indices,
                 int64_t pairCount, int64_t slotCount, int32_t zeroEmpty,
                 float *__restrict__ out) {
  using S = TcShape<kType>;
  constexpr bool kE4m3 = kType == kWeightE4M3;
  // E2M1: the register form only (no rings, no split clusters).
  constexpr bool kE2m1 = kType == kWeightE2M1;
  static_assert(!kE2m1 || kStages == 0, "E2M1 takes the register form");
  // f16 operands (e4m3 and E2M1 weights): x is staged scaled per (K group,
  // pair), whose inverse the results take.
  constexpr bool kHalf = kType != kWeightBF16;
  // E2M1's transposition buffers, after the stage: a warp's four chunk
  // sets of 32 lanes' 16 bytes, a quad pair's 16 bytes apart.
  constexpr int kE2m1SetWords = 32 * 4 + 4 * 4;
  constexpr int kE2m1TransposeWords = 4 * kE2m1SetWords;
  uint32_t *transposed = reinterpret_cast<uint32_t *>(egStage + kEgStageBytes);
  // What a group's load leaves for compute besides the values: e4m3's
  // block scale, or E2M1's scale bytes (rows g and g + 8, two each).
  using Scale = typename Pick<kE2m1, uint2, float>::type;
  // Launched as a programmatic dependent (it reads the routing at once); a
  // GEMV after it may stream its weights on the SMs this grid leaves.
  beginDependent();
  // Each pair's expert (-1: empty; padded to whole int4 reads), the valid
  // pairs in (expert, pair) order and which of those positions open a
  // group (every 8th of an expert), each group's first position (then
  // the valid count: group gi holds positions groupFirst[gi, gi + 1)).
  __shared__ __align__(16) int32_t pairExpert[kEgMaxPairs];
  __shared__ int32_t order[kEgMaxPairs], groupFirst[kEgMaxPairs + 1];
  __shared__ uint8_t opens[kEgMaxPairs];
  __shared__ int32_t warpOpens[kEgWarps];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int pairs = int(pairCount), slots = int(slotCount);
  const int padded = (pairs + 3) & ~3;

  int valid = 0; // the valid pairs, on every thread
  for (int p0 = 0; p0 < padded; p0 += blockDim.x) {
    const int p = p0 + tid;
    int32_t e = p < pairs ? indices[p] : -1;
    e = e >= 0 && e < experts ? e : -1;
    if (p < padded)
      pairExpert[p] = e;
    valid += __syncthreads_count(e >= 0);
  }
  // A pair's position: the valid pairs of lower experts, then the earlier
  // pairs of its own.
  for (int p = tid; p < pairs; p += blockDim.x) {
    const int32_t e = pairExpert[p];
    if (e < 0)
      continue;
    int lower = 0, before = 0;
    for (int q = 0; q < padded; q += 4) {
      const int4 f = *reinterpret_cast<const int4 *>(pairExpert + q);
      lower += (f.x >= 0 && f.x < e) + (f.y >= 0 && f.y < e) +
               (f.z >= 0 && f.z < e) + (f.w >= 0 && f.w < e);
      before += (f.x == e && q < p) + (f.y == e && q + 1 < p) +
                (f.z == e && q + 2 < p) + (f.w == e && q + 3 < p);
    }
    order[lower + before] = p;
    opens[lower + before] = before % kEgGroupPairs == 0;
  }
  __syncthreads();
  // Groups numbered by position: a ballot scan of the openings.
  int groupCount = 0;
  for (int at0 = 0; at0 < valid; at0 += blockDim.x) {
    const int at = at0 + tid;
    const bool open = at < valid && opens[at];
    const uint32_t ballot = __ballot_sync(0xffffffffu, open);
    if (lane == 0)
      warpOpens[warp] = __popc(ballot);
    __syncthreads();
    int before = groupCount + __popc(ballot & ((1u << lane) - 1u));
    for (int w2 = 0; w2 < kEgWarps; ++w2) {
      before += w2 < warp ? warpOpens[w2] : 0;
      groupCount += warpOpens[w2];
    }
    if (open)
      groupFirst[before] = at;
    __syncthreads(); // warpOpens is written again
  }
  if (tid == 0)
    groupFirst[groupCount] = valid;
  __syncthreads();
  // Group gi: its first position, pairs and expert.
  auto groupOf = [&](int gi, int &first, int &rows) {
    first = groupFirst[gi];
    rows = groupFirst[gi + 1] - first;
    return pairExpert[order[first]];
  };
  if (zeroEmpty) {
    const int64_t span = (n + gridDim.x - 1) / gridDim.x;
    const int64_t c1 = min(n, span * (blockIdx.x + 1));
    for (int p = 0; p < pairs; ++p)
      if (pairExpert[p] < 0)
        for (int64_t c = span * blockIdx.x + tid; c < c1; c += blockDim.x)
          out[int64_t(p) * n + c] = 0.0f;
  }

  // Tasks in tile-major order (task = tile x groups + group), a contiguous
  // run a block: a group's tasks spread over the blocks, so one of many
  // pairs (a shared expert's, every token's pair in one group), whose
  // tasks multiply more and restage x more often, loads no block more than
  // a task's worth. Where every group is one pair (a token's distinct
  // experts: decode at one token), tasks are group-major instead (task =
  // group x tiles + tile): a block's run then stays in one or two groups,
  // whose x it stages once while a stage chunk holds the block's K range.
  // Task, row and scale indices fit 32 bits (the launcher keeps N under
  // 2^24 and the scales under 2^31): registers are what bounds the blocks
  // an SM, so the loop keeps 32-bit state and reads sizes from the
  // kernel's parameters where used.
  //
  // The ring forms may run as clusters of C blocks that split K: every
  // block of a cluster takes the cluster's run of tasks, block `rank` the
  // K groups [gBegin, gBegin + gCount) of each, and the cluster adds the C
  // partial sums through distributed shared memory in rank order (fixed:
  // the same for every run). Finer work than whole tasks, so a launch's
  // tasks spread evenly over the few blocks a ring leaves an SM.
  const int rowTiles = int((n + kEgRows - 1) / kEgRows);
  const int tasks = groupCount * rowTiles;
  const bool groupMajor = valid == groupCount;
  auto groupOfTask = [&](int which) {
    return groupMajor ? which / rowTiles : which % groupCount;
  };
  // E2M1: the last group may be partial (K a multiple of 64: gpt-oss's
  // 2880 is 11 groups and two blocks); its missing blocks load as zeros.
  const int kGroups = int((k + (kE2m1 ? S::kGroupK - 1 : 0)) / S::kGroupK);
  const uint32_t clusters = kStages > 0 ? clusterSize() : 1u;
  const uint32_t rank = kStages > 0 ? clusterRank() : 0u;
  const int gBegin = int(int64_t(kGroups) * rank / clusters);
  const int gCount = int(int64_t(kGroups) * (rank + 1) / clusters) - gBegin;
  const int64_t cluster = blockIdx.x / clusters,
                clusterCount = gridDim.x / clusters;
  int task = int(int64_t(tasks) * cluster / clusterCount);
  const int last = int(int64_t(tasks) * (cluster + 1) / clusterCount);

  // This warp's rows of a task's tile, as the GEMV: lane (g, t) loads rows
  // g and g + 8 (clamped to the last row; such rows are never written;
  // the second `second` bytes after the first); `scaleAt` indexes the
  // tile's scale row.
  auto tileBaseOf = [&](int which) {
    return (groupMajor ? which % rowTiles : which / groupCount) * kEgRows;
  };
  auto tileRowOf = [&](int which) { return tileBaseOf(which) + warp * 16; };
  auto rowsOf = [&](int which, const uint8_t *&src0, int32_t &second,
                    int32_t &scaleAt) {
    int first, rows;
    const int e = groupOf(groupOfTask(which), first, rows);
    const int tileRow = tileRowOf(which);
    const int64_t row0 = min(int64_t(tileRow + g), n - 1),
                  row1 = min(int64_t(tileRow + g + 8), n - 1);
    if constexpr (kE2m1) {
      // Lane t loads block t of each half group; its scale bytes are
      // those of blocks 2t and 2t + 1 (K / 32 bytes a row).
      src0 = static_cast<const uint8_t *>(w.data) + (e * n + row0) * (k / 2) +
             16 * t;
      second = int32_t((row1 - row0) * (k / 2));
      scaleAt = int32_t((e * n + row0) * (k / 32) + 2 * t);
      return;
    } else {
      src0 = static_cast<const uint8_t *>(w.data) +
             ((e * n + row0) * k + t * 4 * S::kChunkSteps) * S::kBytes;
      second = int32_t((row1 - row0) * k * S::kBytes);
    }
    if (kE4m3)
      scaleAt = int32_t((e * ((n + w.blockN - 1) / w.blockN) +
                         min(int64_t(tileRow), n - 1) / w.blockN) *
                        ((k + w.blockK - 1) / w.blockK));
  };
  // The register form: a task's rows, its next groups in registers and
  // kEgAhead more requested into L2 by lanes t = 0 and 1.
  const uint8_t *src0 = nullptr;
  int32_t second = 0, scaleAt = 0;
  // Group gl's two 16-byte chunks of each row (the second 64 bytes on).
  // E2M1: raw[r] holds the two blocks' words as loaded (compute
  // transposes them when it needs them, so the loads stay in flight), and
  // `scale` the bits of four scale bytes: blocks 2t and 2t + 1 of row g
  // (low half) and of row g + 8. Past K the blocks load as zeros and their
  // scales as 2^0.
  auto load = [&](uint32_t(&raw)[2][8], Scale &scale, int gl) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const uint8_t *p = src0 + (r ? second : 0) + gl * 128;
      uint4 c0, c1;
      if constexpr (kE2m1) {
        const int64_t blocks = k / 32, block = int64_t(gl) * 8 + t;
        const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
        c0 = block < blocks ? ldgStream(p) : zero;
        c1 = block + 4 < blocks ? ldgStream(p + 64) : zero;
      } else {
        c0 = ldgStream(p);
        c1 = ldgStream(p + 64);
      }
      raw[r][0] = c0.x;
      raw[r][1] = c0.y;
      raw[r][2] = c0.z;
      raw[r][3] = c0.w;
      raw[r][4] = c1.x;
      raw[r][5] = c1.y;
      raw[r][6] = c1.z;
      raw[r][7] = c1.w;
    }
    if constexpr (kE2m1) {
      const uint8_t *bytes = reinterpret_cast<const uint8_t *>(w.scales);
      // Past K (a partial last group) the row's last two scale bytes,
      // whose blocks' values load as zeros there: the products stay zero
      // (or NaN where the row has a NaN scale, as its result is anyway).
      // Unpredicated, and not combined here, so nothing waits on them.
      const int32_t at =
          scaleAt + min(int32_t(gl * 8), int32_t(k / 32 - 2 - 2 * t));
      scale.x = __ldg(reinterpret_cast<const uint16_t *>(bytes + at));
      scale.y =
          __ldg(reinterpret_cast<const uint16_t *>(bytes + at + second / 16));
    } else if (kE4m3) {
      scale = __ldg(w.scales + scaleAt + gl * 128 / int(w.blockK));
    }
  };
  // Groups [gl, gl + count) of row g (lanes t = 0) or g + 8 (t = 1) into
  // L2; the second lane's loads start 16 bytes into the group.
  auto prefetch = [&](int gl, int count) {
    count = min(count, kGroups - gl);
    if (t < 2 && count > 0) {
      uint32_t bytes = uint32_t(count) * 128u;
      if (kE2m1) // not past the row (K / 2 bytes, a multiple of 32)
        bytes = min(bytes, uint32_t(k / 2 - int64_t(gl) * 128));
      prefetchStream(src0 + (t ? second - 16 : 0) + gl * 128, bytes);
    }
  };
  uint32_t rawA[2][8], rawB[2][8];
  Scale scaleA{}, scaleB{};
  auto start = [&](int which) {
    rowsOf(which, src0, second, scaleAt);
    load(rawA, scaleA, 0);
    if (kGroups > 1)
      load(rawB, scaleB, 1);
    prefetch(2, kEgAhead);
  };

  // The stage: per k-step, `perStep` B entries (8 bytes: a lane's b0, b1
  // of one part) in the group's layout, then the inverse x scales of each
  // (K group, pair) of the chunk.
  uint2 *entries = reinterpret_cast<uint2 *>(egStage);
  auto layout = [](int r, int groups, int &perStep, int &chunk) {
    perStep = r <= 2 ? 12 * r : 96;
    chunk = min(groups, kEgStageBytes /
                            (S::kSteps * perStep * 8 + (kHalf ? 4 * r : 0)));
  };
  // x's columns of K groups [c0, c0 + cg) of the block's range for the
  // group's r pairs, as the GEMV stages them: a quad of four columns a
  // thread, a warp one (K group, pair) for e4m3, scaled by a power of two
  // that puts its largest |x| in [2^14, 2^15).
  // A thread's quads are loaded kEgStageBatch at a time before any is
  // converted: each conversion waits on its load (the e4m3 scale's warp
  // maximum), so one at a time the stage costs a load latency a quad, and
  // a group of many pairs (a shared expert's slot, taken by every token)
  // restages K in many chunks a task.
  auto stage = [&](int first, int r, int perStep, int chunk, int c0, int cg) {
    float *inverse =
        reinterpret_cast<float *>(entries + chunk * S::kSteps * perStep);
    if constexpr (kE2m1) {
      // An octet of eight columns a thread, a warp one (K group, pair).
      // Octet o of a group meets word o % 4 of block o / 4 of each row,
      // whose codes i and i + 4 share an f16 pair (e2m1x8ToHalf2): so x's
      // columns i and i + 4 share a B entry, (0, 4) and (1, 5) in k-step
      // 2 (o / 4), (2, 6) and (3, 7) in the next, lane quarter o % 4.
      // Columns past K stage as zeros.
      constexpr int kOctets = S::kGroupK / 8;
      const int total = cg * r * kOctets;
      for (int q = tid; q < total; q += int(blockDim.x)) {
        const int o = q % kOctets, item = q / kOctets, j = item % r,
                  gl = item / r;
        const int pair = order[first + j];
        const int64_t row = perSlotInput ? pair : pair / slots;
        const int64_t column = int64_t(c0 + gl) * S::kGroupK + o * 8;
        float4 lo = make_float4(0.0f, 0.0f, 0.0f, 0.0f), hi = lo;
        if (column < k) {
          const float4 *src =
              reinterpret_cast<const float4 *>(x + row * k + column);
          lo = __ldg(src);
          hi = __ldg(src + 1);
        }
        float amax = warpMax(fmaxf(fmaxf(fmaxf(fabsf(lo.x), fabsf(lo.y)),
                                         fmaxf(fabsf(lo.z), fabsf(lo.w))),
                                   fmaxf(fmaxf(fabsf(hi.x), fabsf(hi.y)),
                                         fmaxf(fabsf(hi.z), fabsf(hi.w)))));
        const float2 scale = f16StageScale(amax);
        uint32_t p04[3], p15[3], p26[3], p37[3];
        splitX<kType>(lo.x * scale.x, hi.x * scale.x, p04);
        splitX<kType>(lo.y * scale.x, hi.y * scale.x, p15);
        splitX<kType>(lo.z * scale.x, hi.z * scale.x, p26);
        splitX<kType>(lo.w * scale.x, hi.w * scale.x, p37);
        if (o == 0)
          inverse[gl * r + j] = scale.y;
        const int quarter = o & 3;
        uint2 *entry = entries + (gl * S::kSteps + 2 * (o >> 2)) * perStep;
#pragma unroll
        for (int p = 0; p < 3; ++p) {
          const int at =
              r <= 2 ? (j * 3 + p) * 4 + quarter : p * 32 + j * 4 + quarter;
          entry[at] = make_uint2(p04[p], p15[p]);
          entry[perStep + at] = make_uint2(p26[p], p37[p]);
        }
      }
    } else {
      constexpr int kQuads = S::kGroupK / 4;
      const int total = cg * r * kQuads;
      for (int q0 = tid; q0 < total;
           q0 += kEgStageBatch<kStages> * int(blockDim.x)) {
        float4 loaded[kEgStageBatch<kStages>];
#pragma unroll
        for (int i = 0; i < kEgStageBatch<kStages>; ++i) {
          const int q = q0 + i * int(blockDim.x);
          if (q >= total)
            break;
          const int l = q % kQuads, item = q / kQuads, j = item % r,
                    gl = item / r;
          const int pair = order[first + j];
          const int64_t row = perSlotInput ? pair : pair / slots;
          loaded[i] = __ldg(reinterpret_cast<const float4 *>(
              x + row * k + int64_t(gBegin + c0 + gl) * S::kGroupK + l * 4));
        }
#pragma unroll
        for (int i = 0; i < kEgStageBatch<kStages>; ++i) {
          // Warp-uniform: total is a multiple of kQuads (32 for e4m3, whose
          // scale takes the warp maximum).
          const int q = q0 + i * int(blockDim.x);
          if (q >= total)
            break;
          const int l = q % kQuads, item = q / kQuads, j = item % r,
                    gl = item / r;
          float4 v = loaded[i];
          if (kE4m3) {
            float amax = warpMax(fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)),
                                       fmaxf(fabsf(v.z), fabsf(v.w))));
            const float2 scale = f16StageScale(amax);
            v.x *= scale.x;
            v.y *= scale.x;
            v.z *= scale.x;
            v.w *= scale.x;
            if (l == 0)
              inverse[gl * r + j] = scale.y;
          }
          uint32_t p01[3], p23[3];
          splitX<kType>(v.x, v.y, p01);
          splitX<kType>(v.z, v.w, p23);
          const int step =
              (l / (4 * S::kChunkSteps)) * S::kChunkSteps + l % S::kChunkSteps;
          const int quarter = (l / S::kChunkSteps) % 4;
          uint2 *entry = entries + (gl * S::kSteps + step) * perStep;
#pragma unroll
          for (int p = 0; p < 3; ++p)
            entry[r <= 2 ? (j * 3 + p) * 4 + quarter
                         : p * 32 + j * 4 + quarter] =
                make_uint2(p01[p], p23[p]);
        }
      }
    }
  };

  // The A fragment of k-step s from a group's loads (as the GEMV).
  auto fragment = [](const uint32_t(&raw)[2][8], int s, uint32_t(&a)[4]) {
    const int chunk = s / S::kChunkSteps, sub = s % S::kChunkSteps;
    if (kE4m3) {
      e4m3x4ToHalf2(raw[0][chunk * 4 + sub], a[0], a[2]);
      e4m3x4ToHalf2(raw[1][chunk * 4 + sub], a[1], a[3]);
    } else {
      a[0] = raw[0][chunk * 4 + 2 * sub];
      a[2] = raw[0][chunk * 4 + 2 * sub + 1];
      a[1] = raw[1][chunk * 4 + 2 * sub];
      a[3] = raw[1][chunk * 4 + 2 * sub + 1];
    }
  };
  // acc: r <= 2: rows g, g + 8 of this lane's pair t / 2 (its two
  // columns' sums); r > 2: (row g, pair 2t), (g, 2t + 1), (g + 8, 2t),
  // (g + 8, 2t + 1).
  float acc[4] = {};
  auto compute = [&](const uint32_t(&raw)[2][8], Scale scale, int gl, int r,
                     int perStep, int chunk) {
    const uint2 *entry = entries + gl * S::kSteps * perStep;
    const float *inverse =
        reinterpret_cast<const float *>(entries + chunk * S::kSteps * perStep) +
        gl * r;
    if constexpr (kE2m1) {
      // Each block of 32 values is two k-steps whose products c, brought
      // back to x's scale (times the inverse of its power of two: exact),
      // take the block's scales 2^(s - 127) of rows g and g + 8 (a power
      // of two, so the only rounding is the sum's, as on the CUDA cores;
      // in this order no scaled intermediate overflows where the result
      // does not). Scale bytes 0 and 255 (2^-127 and NaN) take
      // e8m0ToFloat, the others the exponent field alone.
      // The transposition through shared memory: each lane's four 16-byte
      // chunks (block t of each half group of rows g and g + 8) stored,
      // then one ldmatrix.x4 a chunk set gives lane (g, t) word t of each
      // of the four blocks of row g: matrix j's row i is the chunk lane
      // 4i + j stored. A quad pair's chunks sit 16 bytes past the pair
      // before, so neither the stores nor the matrices' rows share banks.
      uint32_t *mine = transposed + warp * kE2m1TransposeWords;
      auto chunkAt = [](int set, int from) {
        return set * kE2m1SetWords + 4 * from + 4 * (from >> 3);
      };
      uint32_t words[2][8];
      __syncwarp(); // this warp's previous group is read
#pragma unroll
      for (int set = 0; set < 4; ++set)
        *reinterpret_cast<uint4 *>(mine + chunkAt(set, lane)) = make_uint4(
            raw[set >> 1][4 * (set & 1)], raw[set >> 1][4 * (set & 1) + 1],
            raw[set >> 1][4 * (set & 1) + 2], raw[set >> 1][4 * (set & 1) + 3]);
      __syncwarp();
#pragma unroll
      for (int set = 0; set < 4; ++set) {
        uint32_t v[4];
        asm volatile(
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, "
            "[%4];"
            : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
            : "r"(gemmSharedAddress(
                mine + chunkAt(set, 4 * (lane & 7) + (lane >> 3)))));
#pragma unroll
        for (int i = 0; i < 4; ++i)
          words[set >> 1][4 * (set & 1) + i] = v[i];
      }
      const uint32_t bytes = scale.x | scale.y << 16;
      // Bit 7 of each byte that is 0 or 255 (exact SWAR tests), whose
      // factor is then 2^-127 or NaN, e8m0ToFloat's: the exponent field
      // alone gives 0 and inf, and bit 22 set makes them 2^-127 and NaN.
      const uint32_t low = bytes & 0x7F7F7F7Fu;
      const uint32_t zero = ~((low + 0x7F7F7F7Fu) | bytes | 0x7F7F7F7Fu);
      const uint32_t full = (low + 0x01010101u) & bytes & 0x80808080u;
      const uint32_t special = zero | full;
      float factors[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        factors[i] = __uint_as_float(((bytes >> 8 * i) & 0xFFu) << 23 |
                                     ((special >> (8 * i + 7)) & 1u) << 22);
      // The inverse x scales of the lane's columns' pairs, times 2^14
      // (exact: at most 2^126, f16StageScale's range).
      const float inv0 =
                      16384.0f * inverse[min(r <= 2 ? t >> 1 : 2 * t, r - 1)],
                  inv1 = 16384.0f *
                         inverse[min(r <= 2 ? t >> 1 : 2 * t + 1, r - 1)];
      if (r <= 2)
        e2m1GroupProducts<false>(words, factors, entry, perStep, inv0, inv1, r,
                                 acc);
      else
        e2m1GroupProducts<true>(words, factors, entry, perStep, inv0, inv1, r,
                                acc);
    } else {
      float c[4] = {};
      if (r <= 2) {
        // Lane (g, t) holds column g: part g % 4 of pair g / 4.
        const int j = g >> 2, p = g & 3;
        const bool live = p < 3 && j < r;
        const int at = (j * 3 + p) * 4 + t;
#pragma unroll
        for (int s = 0; s < S::kSteps; ++s) {
          uint32_t a[4];
          fragment(raw, s, a);
          uint2 b = live ? entry[s * perStep + at] : make_uint2(0u, 0u);
          mma16816<kType>(c, a, b);
        }
        float f = kE4m3 ? scale * inverse[min(t >> 1, r - 1)] : 1.0f;
        acc[0] = fmaf(c[0] + c[1], f, acc[0]);
        acc[1] = fmaf(c[2] + c[3], f, acc[1]);
      } else {
#pragma unroll
        for (int s = 0; s < S::kSteps; ++s) {
          uint32_t a[4];
          fragment(raw, s, a);
#pragma unroll
          for (int p = 0; p < 3; ++p)
            mma16816<kType>(c, a, entry[s * perStep + p * 32 + lane]);
        }
        float f0 = kE4m3 ? scale * inverse[min(2 * t, r - 1)] : 1.0f;
        float f1 = kE4m3 ? scale * inverse[min(2 * t + 1, r - 1)] : 1.0f;
        acc[0] = fmaf(c[0], f0, acc[0]);
        acc[1] = fmaf(c[1], f1, acc[1]);
        acc[2] = fmaf(c[2], f0, acc[2]);
        acc[3] = fmaf(c[3], f1, acc[3]);
      }
    }
  };
  auto biasAt = [&](int64_t i) { return bias.data ? weightAt(bias, i) : 0.0f; };

  // This lane's results of a task, after adding the lane pairs that hold
  // one pair's parts: four (pair j of its group or -1 for none, row of the
  // 64-row tile, value), at fixed places (registers, not a local array).
  struct Result {
    int j, local;
    float value;
  };
  auto results = [&](int r, Result(&list)[4]) {
    if (r <= 2) {
      // The pair's three parts: columns 4j .. 4j + 2 on lanes t and t ^ 1.
#pragma unroll
      for (int half = 0; half < 2; ++half)
        acc[half] += __shfl_xor_sync(0xffffffffu, acc[half], 1);
      const int j = (t & 1) == 0 && (t >> 1) < r ? t >> 1 : -1;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        list[half] = Result{j, warp * 16 + g + 8 * half, acc[half]};
        list[2 + half] = Result{-1, 0, 0.0f};
      }
    } else {
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int half = 0; half < 2; ++half)
          list[2 * jj + half] =
              Result{2 * t + jj < r ? 2 * t + jj : -1, warp * 16 + g + 8 * half,
                     acc[2 * half + jj]};
    }
  };
  // Each (pair, row) result of a task, written once with the expert's bias.
  auto writeBack = [&](int64_t e, int first, int r, int64_t tileBase) {
    Result list[4];
    results(r, list);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = tileBase + list[i].local;
      if (list[i].j >= 0 && row < n)
        out[int64_t(order[first + list[i].j]) * n + row] =
            list[i].value + biasAt(e * n + row);
    }
  };

  int stagedGroup = -1; // the group whose x of all of K the stage holds
  // Stages the chunk holding K group gl of `group` where one starts (every
  // block thread reaches it alike), unless the stage already holds all of
  // K for this group.
  auto ready = [&](int gl, int group, int first, int r, int perStep,
                   int chunk) {
    if (gl % chunk != 0 || (gl == 0 && stagedGroup == group))
      return;
    __syncthreads(); // every warp is done with the previous chunk
    stage(first, r, perStep, chunk, gl, min(chunk, gCount - gl));
    __syncthreads();
  };

  if constexpr (kStages == 0) {
    if (task < last)
      start(task);
    while (task < last) {
      const int group = groupOfTask(task);
      int first, r;
      const int64_t e = groupOf(group, first, r);
      int perStep, chunk;
      layout(r, kGroups, perStep, chunk);
#pragma unroll
      for (int q = 0; q < 4; ++q)
        acc[q] = 0.0f;
      // Groups gl and gl + 1 are in registers or on their way at the top;
      // L2 requests run kEgAhead groups past those, two a request.
      for (int gl = 0; gl < kGroups; gl += 2) {
        ready(gl, group, first, r, perStep, chunk);
        prefetch(gl + 2 + kEgAhead, 2);
        compute(rawA, scaleA, gl % chunk, r, perStep, chunk);
        if (gl + 2 < kGroups)
          load(rawA, scaleA, gl + 2);
        if (gl + 1 < kGroups) {
          ready(gl + 1, group, first, r, perStep, chunk);
          compute(rawB, scaleB, (gl + 1) % chunk, r, perStep, chunk);
          if (gl + 3 < kGroups)
            load(rawB, scaleB, gl + 3);
        }
      }
      stagedGroup = chunk >= kGroups ? group : -1;
      // The next task's first weights are in flight during the write-back.
      if (task + 1 < last)
        start(task + 1);
      writeBack(e, first, r, tileBaseOf(task));
      ++task;
    }
  } else {
    // The ring form: the block's tasks as one sequence of (task, K group)
    // steps, each lane copying its own chunks kStages - 1 steps ahead into
    // its warp's ring of kStages slots (cp.async: bytes in flight without
    // registers, across task boundaries) and reading them back itself, so
    // its own wait orders them; a slot is refilled one step after it was
    // read into registers and multiplied.
    uint8_t *ring = egStage + kEgStageBytes + warp * kStages * kEgRingSlotBytes;
    const int total = (last - task) * gCount;
    int issueTask = task, issueGroup = 0, issued = 0;
    const uint8_t *issueSrc = nullptr;
    int32_t issueSecond = 0, issueScale = 0;
    if (total > 0)
      rowsOf(issueTask, issueSrc, issueSecond, issueScale);
    auto issue = [&] {
      if (issued < total) {
        uint8_t *slot = ring + (issued % kStages) * kEgRingSlotBytes;
#pragma unroll
        for (int i = 0; i < 4; ++i)
          copyAsync16Stream(slot + (i * 32 + lane) * 16,
                            issueSrc + (i >= 2 ? issueSecond : 0) +
                                (gBegin + issueGroup) * 128 + (i & 1) * 64);
        if (kE4m3)
          copyAsync4(slot + 4 * 32 * 16 + lane * 4,
                     w.scales + issueScale +
                         (gBegin + issueGroup) * 128 / int(w.blockK),
                     true);
        if (++issueGroup == gCount && ++issueTask < last) {
          issueGroup = 0;
          rowsOf(issueTask, issueSrc, issueSecond, issueScale);
        }
      }
      ++issued;
      copyAsyncCommit(); // empty past the end: one group a step all along
    };
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i)
      issue();
    // Split clusters' partial sums: two buffers after the rings.
    float *partials = reinterpret_cast<float *>(
        egStage + kEgStageBytes + kEgWarps * kStages * kEgRingSlotBytes);
    int parity = 0;
    int pending = -1; // the task whose partial sums await their reduction
    // Adds task `which`'s partial sums at `partial` (every block's) in rank
    // order for this block's share of its (pair, row) results.
    auto reduce = [&](int which, const float *partial) {
      int first, r;
      const int64_t e = groupOf(groupOfTask(which), first, r);
      const int64_t tileBase = tileBaseOf(which);
      const int results = kEgRows * r;
      const int share = (results + int(clusters) - 1) / int(clusters);
      const int end = min(results, share * int(rank + 1));
      for (int i = share * int(rank) + tid; i < end; i += blockDim.x) {
        const int64_t row = tileBase + i % kEgRows;
        if (row >= n)
          continue;
        float sum = 0.0f;
        for (uint32_t c = 0; c < clusters; ++c)
          sum += clusterLoad(partial + i, c);
        out[int64_t(order[first + i / kEgRows]) * n + row] =
            sum + biasAt(e * n + row);
      }
    };
    int gl = 0, group = -1, first = 0, r = 0, perStep = 0, chunk = 1;
    int64_t e = 0;
    for (int step = 0; step < total; ++step) {
      issue();
      if (gl == 0) {
        group = groupOfTask(task);
        e = groupOf(group, first, r);
        layout(r, gCount, perStep, chunk);
#pragma unroll
        for (int q = 0; q < 4; ++q)
          acc[q] = 0.0f;
      }
      ready(gl, group, first, r, perStep, chunk);
      copyAsyncWait<kStages - 1>(); // this step's copies have landed
      const uint8_t *slot = ring + (step % kStages) * kEgRingSlotBytes;
      uint32_t raw[2][8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint4 v =
            *reinterpret_cast<const uint4 *>(slot + (i * 32 + lane) * 16);
        raw[i >> 1][(i & 1) * 4 + 0] = v.x;
        raw[i >> 1][(i & 1) * 4 + 1] = v.y;
        raw[i >> 1][(i & 1) * 4 + 2] = v.z;
        raw[i >> 1][(i & 1) * 4 + 3] = v.w;
      }
      const float scale =
          kE4m3 ? *reinterpret_cast<const float *>(slot + 4 * 32 * 16 + lane * 4)
                : 0.0f;
      compute(raw, scale, gl % chunk, r, perStep, chunk);
      if (++gl == gCount) {
        stagedGroup = chunk >= gCount ? group : -1;
        if (clusters == 1) {
          writeBack(e, first, r, tileBaseOf(task));
        } else {
          // C > 1: this block's partial sums [pair][row] in this task's
          // buffer; block `rank` adds its share of the previous task's
          // over the C blocks once this one is multiplied (the barrier's
          // wait hidden behind it). A buffer is written again two tasks
          // later, after a wait that no block passes before every block
          // has read it.
          if (pending >= 0) {
            clusterWait();
            reduce(pending, partials + (parity ^ 1) * kEgPartialFloats);
          }
          float *partial = partials + parity * kEgPartialFloats;
          Result list[4];
          results(r, list);
#pragma unroll
          for (int i = 0; i < 4; ++i)
            if (list[i].j >= 0)
              partial[list[i].j * kEgRows + list[i].local] = list[i].value;
          clusterArrive();
          pending = task;
          parity ^= 1;
        }
        gl = 0;
        ++task;
      }
    }
    copyAsyncWaitAll();
    if (clusters > 1) {
      if (pending >= 0) {
        clusterWait();
        reduce(pending, partials + (parity ^ 1) * kEgPartialFloats);
      }
      clusterArrive(); // no block leaves while others read its shared memory
      clusterWait();
    }
  }
}

} // namespace

/// The decode expert GEMVs (CudaKernels::tensorExpertGemv): x [pairs or
/// tokens, K], `indices` [pairs], `out` [pairs, N]; `zeroEmpty`: write
/// zeros in the rows of empty pairs (not needed when daybreak_expert_combine
/// skips them). The register form: six blocks an SM, 80 registers (ptxas,
/// CUDA 13.0: no spills), 24 warps, as the m = 1 GEMV. The ring forms
/// (_ring4, _ring8: slots a warp) are held to three and two blocks an SM
/// by their shared memory.
#define DAYBREAK_EXPERT_GEMV(name, type, stages, blocksPerSm)                  \
  extern "C" __global__ void __launch_bounds__(kEgWarps * 32, blocksPerSm)     \
      name(const float *x, int32_t perSlotInput, Weight w, Weight bias,        \
           int64_t experts, int64_t n, int64_t k, const int32_t *indices,      \
           int64_t pairs, int64_t slots, int32_t zeroEmpty, float *out) {      \
    expertGemvTensor<type, stages>(x, perSlotInput, w, bias, experts, n, k,    \
                                   indices, pairs, slots, zeroEmpty, out);     \
  }
DAYBREAK_EXPERT_GEMV(daybreak_expert_gemv_tc_e4m3, kWeightE4M3, 0, 6)
DAYBREAK_EXPERT_GEMV(daybreak_expert_gemv_tc_bf16, kWeightBF16, 0, 6)
DAYBREAK_EXPERT_GEMV(daybreak_expert_gemv_tc_e4m3_ring4, kWeightE4M3, 4, 3)
DAYBREAK_EXPERT_GEMV(daybreak_expert_gemv_tc_bf16_ring4, kWeightBF16, 4, 3)
DAYBREAK_EXPERT_GEMV(daybreak_expert_gemv_tc_e4m3_ring8, kWeightE4M3, 8, 2)
DAYBREAK_EXPERT_GEMV(daybreak_expert_gemv_tc_bf16_ring8, kWeightBF16, 8, 2)
// The MXFP4 direct route's decode GEMV: E2M1 values, E8M0 scale bytes
// (CudaKernels::mxfp4ExpertGemv), the register form: 128 registers (ptxas,
// CUDA 13.0: 8 bytes spilled in the task loop, none in the group loop), so
// four blocks an SM.
DAYBREAK_EXPERT_GEMV(daybreak_expert_gemv_tc_e2m1, kWeightE2M1, 0, 4)
#undef DAYBREAK_EXPERT_GEMV

/// Per-head matmul: x [T, H, K], w [H, K, N] (or [H, N, K] when
/// transposeWeight) -> out [T, H, N], each (token, head) row of x and out
/// xStride and outStride floats apart (K and N, or column views). grid
/// (ceil(N/64), ceil(T/64), H), block 256.
extern "C" __global__ void
daybreak_head_matmul(const float *x, Weight w, int32_t transposeWeight,
                     int64_t tokens, int64_t heads, int64_t k, int64_t n,
                     float *out, int64_t xStride, int64_t outStride) {
  beginDependent();
  int64_t h = blockIdx.z;
  const float *a = x + h * xStride;
  float *c = out + h * outStride;
  const int64_t lda = heads * xStride, ldc = heads * outStride;
  if (w.type == kWeightF32) {
    const float *b = static_cast<const float *>(w.data) + h * n * k;
    if (transposeWeight)
      sgemmTile<false>(a, lda, b, k, nullptr, c, ldc, tokens, n, k);
    else
      sgemmTile<true>(a, lda, b, n, nullptr, c, ldc, tokens, n, k);
    return;
  }
  // Stored (bf16): head h's matrix, [N, K] or [K, N], widened as loaded.
  StoredHeadB load{w, h, n, k, transposeWeight != 0};
  sgemmTileWith<false>(a, lda, load, FloatBias{nullptr}, c, ldc, tokens, n, k);
}

/// Rows of one token a RoPE block rotates, and the pairs it takes at most
/// (kRopeMaxPairs in CudaKernels.h).
constexpr int kRopeRows = 16, kRopeMaxPairs = 256;

namespace {

/// RoPE pair i's cosine and sine at `position`, in double (cpu::ropeAngles'
/// values): theta^(-2i/dim), YaRN's ramp between `low` and `high` when
/// `yarn`, times the attention factor.
__device__ __forceinline__ void
ropeAngle(int64_t i, double position, int64_t dim, double theta, int32_t yarn,
          double factor, double low, double high, double attentionFactor,
          double &cosine, double &sine) {
  double freq = pow(theta, -2.0 * double(i) / double(dim));
  if (yarn) {
    double ramp = fmin(fmax((double(i) - low) / (high - low), 0.0), 1.0);
    freq = freq / factor * ramp + freq * (1.0 - ramp);
  }
  double angle = position * freq;
  cosine = cos(angle) * attentionFactor;
  sine = sin(angle) * attentionFactor;
}

/// The bytes of the query prologue's angles for `tokens` tokens a block:
/// (cosine, sine) of each of the dim / 2 pairs (none without a prologue).
/// The indexer kernels keep them at the start of their dynamic shared
/// memory (a multiple of 16 bytes: the layouts after them keep their
/// alignment).
__device__ __forceinline__ int64_t queryRopeBytes(const QueryRope &r,
                                                  int64_t tokens) {
  return r.dim / 2 * tokens * int64_t(sizeof(double2));
}

/// The angles of tokens [t0, t0 + count) into `angles` [count][dim / 2]
/// (rows past `tokens` unrotated), in double as daybreak_rope computes
/// them. Block-wide; the caller synchronises before reading them.
__device__ __forceinline__ void queryRopeAngles(const QueryRope &r, int64_t t0,
                                                int64_t count, int64_t tokens,
                                                double2 *angles) {
  const int64_t half = r.dim / 2;
  for (int64_t j = threadIdx.x; j < count * half; j += blockDim.x) {
    const int64_t token = t0 + j / half;
    double cosine = 1.0, sine = 0.0;
    if (token < tokens)
      ropeAngle(j % half, double(r.positions[token]), r.dim, r.theta, r.yarn,
                r.factor, r.low, r.high, r.attentionFactor, cosine, sine);
    angles[j] = make_double2(cosine, sine);
  }
}

/// Query head `row`'s value x at column d after the prologue, with its
/// token's `angles` [dim / 2]: a rotated column combines with its pair's
/// value (read from `row`) as daybreak_rope combines them.
__device__ __forceinline__ float queryRopeValue(const QueryRope &r,
                                                const double2 *angles,
                                                const float *row, int64_t d,
                                                float x) {
  // Columns inside a head (at most 2 x kQueryRopeMaxPairs rotated): 32-bit.
  const int c = int(d - r.offset), half = int(r.dim) / 2;
  if (c < 0 || c >= int(r.dim))
    return x;
  const bool first = r.interleaved ? (c & 1) == 0 : c < half;
  const int pair = r.interleaved ? c >> 1 : (first ? c : c - half);
  const int other =
      r.interleaved ? (first ? c + 1 : c - 1) : (first ? c + half : c - half);
  const double2 a = angles[pair];
  const double own = x, partner = row[r.offset + other];
  return first ? float(own * a.x - partner * a.y)
               : float(own * a.x + partner * a.y);
}

/// queryRopeValue of the four values [d, d + 4) loaded as v.
__device__ __forceinline__ float4 queryRopeQuad(const QueryRope &r,
                                                const double2 *angles,
                                                const float *row, int64_t d,
                                                float4 v) {
  if (r.dim == 0 || d + 4 <= r.offset || d >= r.offset + r.dim)
    return v;
  return make_float4(queryRopeValue(r, angles, row, d, v.x),
                     queryRopeValue(r, angles, row, d + 1, v.y),
                     queryRopeValue(r, angles, row, d + 2, v.z),
                     queryRopeValue(r, angles, row, d + 3, v.w));
}

} // namespace

/// RoPE from x into out (in place when they are one), row r of token t at
/// t * xToken + r * xRow floats (out: outToken, outRow; runtime::RopeRows:
/// dense rows, column views, a token's row of heads). grid (tokens,
/// ceil(rowsPerToken / kRopeRows)), block 256: a block takes kRopeRows rows
/// of one token. Its first threads compute each pair's angle in double into
/// shared memory (once a block, not once a row), then every thread rotates
/// (row, pair) values in turn, consecutive threads on consecutive pairs; out
/// of place, the columns outside the rotated slice are copied. `low`/`high` are
/// YaRN's ramp ends (from the host; unused without yarn). dim / 2 <=
/// kRopeMaxPairs (CudaKernels::rope checks).
extern "C" __global__ void
daybreak_rope(const float *x, int64_t xToken, int64_t xRow, float *out,
              int64_t outToken, int64_t outRow, const int32_t *positions,
              int64_t tokens, int64_t rowsPerToken, int64_t rowDim,
              int32_t interleaved, int64_t offset, int64_t dim, double theta,
              int32_t yarn, double factor, double low, double high,
              double attentionFactor) {
  beginDependent();
  __shared__ double cosines[kRopeMaxPairs], sines[kRopeMaxPairs];
  const int64_t half = dim / 2, t = blockIdx.x;
  const double position = double(positions[t]);
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x)
    ropeAngle(i, position, dim, theta, yarn, factor, low, high, attentionFactor,
              cosines[i], sines[i]);
  __syncthreads();
  const int64_t r0 = int64_t(blockIdx.y) * kRopeRows;
  const int64_t rows = min(int64_t(kRopeRows), rowsPerToken - r0);
  if (out != x) {
    const int64_t kept = rowDim - dim;
    for (int64_t j = threadIdx.x; j < rows * kept; j += blockDim.x) {
      int64_t r = r0 + j / kept, c = j % kept;
      c = c < offset ? c : c + dim;
      out[t * outToken + r * outRow + c] = x[t * xToken + r * xRow + c];
    }
  }
  for (int64_t j = threadIdx.x; j < rows * half; j += blockDim.x) {
    int64_t r = r0 + j / half, i = j % half;
    int64_t a = interleaved ? 2 * i : i;
    int64_t b = interleaved ? 2 * i + 1 : i + half;
    const float *src = x + t * xToken + r * xRow + offset;
    float *row = out + t * outToken + r * outRow + offset;
    double xa = src[a], xb = src[b];
    row[a] = float(xa * cosines[i] - xb * sines[i]);
    row[b] = float(xb * cosines[i] + xa * sines[i]);
  }
}

/// grid (ceil(n/256)), block 256; in double as the CPU kernel.
extern "C" __global__ void daybreak_swiglu(const float *gate, const float *up,
                                           int64_t n, double alpha,
                                           int32_t hasLimit, double limit,
                                           double upOffset, float *out) {
  beginDependent(); // the down projection's GEMV follows
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  double g = gate[i], u = up[i];
  if (hasLimit) {
    g = fmin(g, limit);
    u = fmin(fmax(u, -limit), limit);
  }
  out[i] = float(g * sigmoidD(alpha * g) * (u + upOffset));
}

/// grid (ceil(n/256)), block 256.
extern "C" __global__ void daybreak_add(const float *a, const float *b,
                                        int64_t n, float *out) {
  beginDependent(); // a GEMV may follow a residual add
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = a[i] + b[i];
}

/// Experts a routing kernel takes at most (the launchers check).
constexpr int kMaxRouteExperts = 1024;

/// DeepSeek noaux_tc routing, exactly as cpu::moeRouteSigmoid (double
/// scores, group score = sum of the group's two best selection scores, ties
/// to the lower id; rows of topK + sharedExperts slots). grid (tokens), block
/// 256; experts <= kMaxRouteExperts and numGroups <= 64 (the launcher checks).
///
/// Every choice is a rank under the total order of `better`, computed by
/// all threads at once: an expert's rank in its group (0 and 1 are the
/// group's best two), a group's rank among the groups (kept below
/// topKGroups), and a candidate's rank among the candidates (the pick of
/// that number). Only a rank below what is wanted is needed, so each count
/// stops there. A warp picking one expert after another with warp-wide
/// maxima took 19 us a token on the H100 (ncu, DeepSeek-V3.2's 8 of 256 in
/// 4 of 8 groups), a chain of dependent double compares and shuffles.
extern "C" __global__ void daybreak_moe_route_sigmoid(
    const float *logits, const float *bias, int64_t tokens, int64_t experts,
    int64_t topK, int64_t numGroups, int64_t topKGroups, int32_t renormalize,
    double scalingFactor, int64_t sharedExperts, int32_t *indices,
    float *weights) {
  beginDependent();
  __shared__ double scores[kMaxRouteExperts], selects[kMaxRouteExperts];
  // The candidates, in no particular order: key (orderKey of the selection
  // score) and expert.
  __shared__ double candidateKeys[kMaxRouteExperts];
  __shared__ int32_t candidateIds[kMaxRouteExperts];
  __shared__ int32_t picks[kMaxRouteExperts];
  __shared__ double groupScores[64];
  __shared__ int32_t groupBest[64][2]; // the group's best two experts
  __shared__ bool keptGroup[64];
  __shared__ int32_t candidateCount;
  __shared__ double pickedSum;
  const int tid = int(threadIdx.x), threads = int(blockDim.x);
  // 32-bit indices: experts <= kMaxRouteExperts.
  const int count = int(experts), groups = int(numGroups);
  const int64_t t = blockIdx.x;
  const float *row = logits + t * experts;
  for (int e = tid; e < count; e += threads) {
    scores[e] = sigmoidD(row[e]);
    selects[e] = scores[e] + (bias ? bias[e] : 0.0f);
  }
  if (tid == 0)
    candidateCount = 0;
  const bool grouped = !(numGroups <= 1 || topKGroups >= numGroups);
  const int groupSize = grouped ? count / groups : count;
  if (grouped && tid < groups)
    groupBest[tid][0] = groupBest[tid][1] = -1;
  __syncthreads();
  if (grouped) {
    for (int e = tid; e < groups * groupSize; e += threads) {
      const int first = e / groupSize * groupSize;
      const double key = orderKey(selects[e]);
      int rank = 0;
      for (int f = first; f < first + groupSize && rank < 2; ++f)
        rank += better(orderKey(selects[f]), f, key, e);
      if (rank < 2)
        groupBest[e / groupSize][rank] = e;
    }
    __syncthreads();
    if (tid < groups) {
      double sum = 0.0;
      for (int i = 0; i < 2; ++i)
        if (groupBest[tid][i] >= 0)
          sum += selects[groupBest[tid][i]];
      groupScores[tid] = sum;
    }
    __syncthreads();
    if (tid < groups) {
      const double key = orderKey(groupScores[tid]);
      int rank = 0;
      for (int g = 0; g < groups && rank < topKGroups; ++g)
        rank += better(orderKey(groupScores[g]), g, key, tid);
      keptGroup[tid] = rank < topKGroups;
    }
    __syncthreads();
  }
  for (int e = tid; e < count; e += threads) {
    const bool candidate =
        !grouped ||
        (groupSize > 0 && e / groupSize < groups && keptGroup[e / groupSize]);
    if (candidate) {
      const int slot = atomicAdd(&candidateCount, 1);
      candidateKeys[slot] = orderKey(selects[e]);
      candidateIds[slot] = e;
    }
  }
  __syncthreads();
  const int candidates = candidateCount;
  const int picked =
      int(topK < candidates ? (topK > 0 ? topK : 0) : candidates);
  for (int j = tid; j < candidates; j += threads) {
    const double key = candidateKeys[j];
    const int e = candidateIds[j];
    int rank = 0;
    for (int i = 0; i < candidates && rank < picked; ++i)
      rank += better(candidateKeys[i], candidateIds[i], key, e);
    if (rank < picked)
      picks[rank] = e;
  }
  __syncthreads();
  if (tid == 0) {
    double sum = 0.0; // in pick order, as the CPU kernel
    for (int i = 0; i < picked; ++i)
      sum += scores[picks[i]];
    pickedSum = sum;
  }
  // Rows of topK slots, then the shared experts' (ids experts, experts +
  // 1, ..., weight 1).
  int32_t *outIdx = indices + t * (topK + sharedExperts);
  float *outW = weights + t * (topK + sharedExperts);
  for (int64_t s = tid; s < sharedExperts; s += threads) {
    outIdx[topK + s] = int32_t(experts + s);
    outW[topK + s] = 1.0f;
  }
  __syncthreads(); // pickedSum
  for (int64_t i = tid; i < topK; i += threads) {
    if (i >= picked) {
      outIdx[i] = -1;
      outW[i] = 0.0f;
      continue;
    }
    outIdx[i] = picks[i];
    double weight = scores[picks[i]];
    if (renormalize)
      weight /= pickedSum + 1e-20;
    outW[i] = float(weight * scalingFactor);
  }
}

/// gpt-oss routing (see cpu::moeRouteSoftmaxTopK): the topK best of logits
/// + bias under the total order, then the softmax of their unbiased logits
/// times scalingFactor, in double as the CPU kernel. grid (tokens), block
/// 256; experts <= kMaxRouteExperts (the launcher checks).
extern "C" __global__ void daybreak_moe_route_softmax_topk(
    const float *logits, const float *bias, int64_t tokens, int64_t experts,
    int64_t topK, double scalingFactor, int32_t *indices, float *weights) {
  beginDependent();
  __shared__ double selects[kMaxRouteExperts];
  __shared__ double warpKeys[32];
  __shared__ int32_t warpPicks[32], picks[kMaxRouteExperts];
  int64_t t = blockIdx.x;
  const float *row = logits + t * experts;
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x)
    selects[e] = double(row[e]) + (bias ? bias[e] : 0.0f);
  __syncthreads();
  int64_t picked = topK < experts ? topK : experts;
  if (picked < 0)
    picked = 0;
  // Pick i: the best expert strictly below pick i - 1 in the order (key,
  // then the lower id), found by the whole block: each thread over its
  // experts, then the warps' shuffles and warp 0 over the warps. The order
  // is total, so the result is the serial scan's. -1: no candidate.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  double prevKey = 0;
  int32_t prev = -1;
  auto take = [](double &key, int32_t &pick, double otherKey, int32_t other) {
    if (other >= 0 && (pick < 0 || better(otherKey, other, key, pick))) {
      key = otherKey;
      pick = other;
    }
  };
  for (int64_t i = 0; i < picked; ++i) {
    double key = 0;
    int32_t pick = -1;
    for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) {
      double ke = orderKey(selects[e]);
      if (prev < 0 || better(prevKey, prev, ke, e))
        take(key, pick, ke, int32_t(e));
    }
    for (int offset = 16; offset > 0; offset >>= 1)
      take(key, pick, __shfl_xor_sync(0xffffffffu, key, offset),
           __shfl_xor_sync(0xffffffffu, pick, offset));
    if (lane == 0) {
      warpKeys[warp] = key;
      warpPicks[warp] = pick;
    }
    __syncthreads();
    if (warp == 0) {
      key = lane < warps ? warpKeys[lane] : 0.0;
      pick = lane < warps ? warpPicks[lane] : -1;
      for (int offset = 16; offset > 0; offset >>= 1)
        take(key, pick, __shfl_xor_sync(0xffffffffu, key, offset),
             __shfl_xor_sync(0xffffffffu, pick, offset));
      if (lane == 0)
        picks[i] = pick;
    }
    __syncthreads();
    prev = picks[i];
    prevKey = prev >= 0 ? orderKey(selects[prev]) : 0.0;
  }
  if (threadIdx.x != 0)
    return;
  int32_t *outIdx = indices + t * topK;
  float *outW = weights + t * topK;
  double best = -__longlong_as_double(0x7FF0000000000000ll);
  for (int64_t i = 0; i < picked; ++i) {
    int32_t pick = picks[i];
    outIdx[i] = pick;
    // The maximum skips NaN, as the CPU kernel's std::max.
    if (double(row[pick]) > best)
      best = row[pick];
  }
  double sum = 0.0;
  for (int64_t i = 0; i < picked; ++i)
    sum += exp(double(row[outIdx[i]]) - best);
  for (int64_t i = 0; i < topK; ++i)
    if (i < picked) {
      outW[i] = float(exp(double(row[outIdx[i]]) - best) / sum * scalingFactor);
    } else {
      outIdx[i] = -1;
      outW[i] = 0.0f;
    }
}

/// Grouped expert matmul (see cpu::expertMatmul). grid (ceil(N/8), tokens),
/// block 256: each warp one output column n of token t, looping over its
/// slots in order (so the weighted sum adds in the CPU's order). An expert
/// id outside [0, E) counts as an empty slot. `bias` [E, N] (data null:
/// none) is added to a slot's product before its routing weight.
extern "C" __global__ void
daybreak_expert_matmul(const float *x, int32_t perSlotInput, Weight w,
                       int64_t experts, int64_t n, int64_t k,
                       const int32_t *indices, int64_t tokens, int64_t slots,
                       const float *routingWeights, Weight bias, float *out) {
  int lane = threadIdx.x & 31;
  int64_t col = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  int64_t t = blockIdx.y;
  if (col >= n)
    return;
  float combined = 0.0f;
  for (int64_t s = 0; s < slots; ++s) {
    int64_t e = indices[t * slots + s];
    bool valid = e >= 0 && e < experts;
    float y = 0.0f;
    if (valid) {
      const float *in = x + (perSlotInput ? t * slots + s : t) * k;
      int64_t first = (e * n + col) * k;
      float acc = 0.0f;
      if (w.type == kWeightE4M3) {
        // The row's scales, then one per blockK columns.
        int64_t scaleCols = (k + w.blockK - 1) / w.blockK;
        const float *rowScales =
            w.scales + (e * ((n + w.blockN - 1) / w.blockN) + col / w.blockN) *
                           scaleCols;
        const uint8_t *codes = static_cast<const uint8_t *>(w.data) + first;
        for (int64_t p = lane; p < k; p += 32)
          acc = fmaf(in[p],
                     e4m3Fast(codes[p]) * rowScales[uint32_t(p) / uint32_t(w.blockK)],
                     acc);
      } else {
        for (int64_t p = lane; p < k; p += 32)
          acc = fmaf(in[p], weightAt(w, first + p), acc);
      }
      y = warpSum(acc);
      if (bias.data)
        y += weightAt(bias, e * n + col);
    }
    if (routingWeights) {
      if (valid)
        combined += routingWeights[t * slots + s] * y;
    } else if (lane == 0) {
      out[(t * slots + s) * n + col] = y;
    }
  }
  if (routingWeights && lane == 0)
    out[t * n + col] = combined;
}

namespace {

/// Output rows (columns of the result) a block of
/// daybreak_mxfp4_expert_matmul owns (the launcher's kRows).
constexpr int kMxfp4Rows = 8;
/// Warps a block of daybreak_mxfp4_expert_matmul has (block 128).
constexpr int kMxfp4Warps = 4;
/// Words of the expert bitmaps of the MXFP4 kernels: at most
/// 32 x kMxfp4ExpertWords experts (the launchers check).
constexpr int kMxfp4ExpertWords = 64;
/// The most stages daybreak_mxfp4_expert_matmul_staged takes (the
/// launcher's kMxfp4Stages is at most this).
constexpr int kMxfp4MaxStages = 8;

/// One (expert, part of K) task of daybreak_mxfp4_expert_matmul for kPairs
/// (token, slot) pairs that picked the expert: lane l takes the blocks of
/// 32 values b = first + l, first + l + 32, .. < end of the block's
/// kMxfp4Rows rows `rows` (one 16-byte load and one scale byte a row and a
/// block), and dots each with the pairs' inputs `in`. The inputs are read
/// times 2^14 (exact below 2^114), which cancels the decode's 2^-14, so each
/// product is x v rounded once; a block's 32 products are summed in fp32
/// and the sum times the block's power of two added to the lane's
/// accumulator; the warp's sum of the lanes is the task's partial for
/// (pair, row). Eight rows share each input load; each value is decoded
/// once for the kPairs pairs. kStaged: the rows are a stage in shared
/// memory (rows 0 .. kMxfp4Rows - 1 of `expertValues` and
/// `expertScales`), not the expert's rows in global memory.
template <int kPairs, bool kStaged>
__device__ __forceinline__ void
mxfp4Task(const uint8_t *expertValues, const uint8_t *expertScales,
          int32_t row0, int32_t lastRow, int64_t blocks,
          const float *const (&in)[kPairs], int64_t first, int64_t end,
          float (&sums)[kMxfp4Rows][kPairs]) {
  int lane = threadIdx.x & 31;
  float acc[kMxfp4Rows][kPairs] = {};
  for (int64_t b = first + lane; b < end; b += 32) {
    uint4 packed[kMxfp4Rows];
    uint32_t exponent[kMxfp4Rows];
#pragma unroll
    for (int r = 0; r < kMxfp4Rows; ++r) {
      // Row offsets recomputed a block (not held: 8 rows of two 64-bit
      // pointers would cost 32 registers); a tail repeats the last row.
      int64_t row = min(row0 + r, lastRow);
      if (kStaged) {
        packed[r] = *reinterpret_cast<const uint4 *>(
            expertValues + row * blocks * 16 + 16 * b);
        exponent[r] = expertScales[row * blocks + b];
      } else {
        packed[r] = ldgStream(expertValues + row * blocks * 16 + 16 * b);
        exponent[r] = __ldg(expertScales + row * blocks + b);
      }
    }
    float block[kMxfp4Rows][kPairs] = {};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float xv[kPairs][8];
#pragma unroll
      for (int q = 0; q < kPairs; ++q) {
        const float4 *xp = reinterpret_cast<const float4 *>(in[q] + 32 * b);
        float4 lo = __ldg(xp + 2 * j), hi = __ldg(xp + 2 * j + 1);
        float raw[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int i = 0; i < 8; ++i)
          xv[q][i] = raw[i] * 16384.0f; // 2^14
      }
#pragma unroll
      for (int r = 0; r < kMxfp4Rows; ++r) {
        uint32_t word = j == 0   ? packed[r].x
                        : j == 1 ? packed[r].y
                        : j == 2 ? packed[r].z
                                 : packed[r].w;
        float v[8];
        e2m1x8ToFloat(word, v);
#pragma unroll
        for (int q = 0; q < kPairs; ++q)
#pragma unroll
          for (int i = 0; i < 8; ++i)
            block[r][q] = fmaf(xv[q][i], v[i], block[r][q]);
      }
    }
#pragma unroll
    for (int r = 0; r < kMxfp4Rows; ++r) {
      float scale = e8m0ToFloat(exponent[r]);
#pragma unroll
      for (int q = 0; q < kPairs; ++q)
        acc[r][q] = fmaf(block[r][q], scale, acc[r][q]);
    }
  }
#pragma unroll
  for (int r = 0; r < kMxfp4Rows; ++r)
#pragma unroll
    for (int q = 0; q < kPairs; ++q)
      sums[r][q] = warpSum(acc[r][q]);
}

/// mxfp4Task, as mxfp4ExpertMatmulBlock's Task (bench/mxfp4_variants.cu
/// passes variants of it).
struct Mxfp4DotTask {
  template <int kPairs, bool kStaged>
  static __device__ __forceinline__ void
  run(const uint8_t *expertValues, const uint8_t *expertScales, int32_t row0,
      int32_t lastRow, int64_t blocks, const float *const (&in)[kPairs],
      int64_t first, int64_t end, float (&sums)[kMxfp4Rows][kPairs]) {
    mxfp4Task<kPairs, kStaged>(expertValues, expertScales, row0, lastRow,
                               blocks, in, first, end, sums);
  }
};

/// The body of daybreak_mxfp4_expert_matmul (kStaged false: each task loads
/// its rows from global memory) and of daybreak_mxfp4_expert_matmul_staged
/// (the copy engine brings each distinct expert's rows into one of
/// `stages` shared-memory stages ahead of the tasks that read them), a
/// task's pairs dotted by Task::run.
template <bool kStaged, class Task = Mxfp4DotTask>
__device__ __forceinline__ void mxfp4ExpertMatmulBlock(
    const float *x, int32_t perSlotInput, const uint8_t *values,
    const uint8_t *scales, const Weight &bias, int64_t experts, int64_t n,
    int64_t k, const int32_t *indices, int64_t tokens, int64_t slots,
    const float *routingWeights, int64_t parts, int32_t stages, float *out) {
  __shared__ uint32_t used[kMxfp4ExpertWords];
  __shared__ int32_t distinct;
  // kStaged: a stage's copies, and its tasks finished.
  __shared__ uint64_t full[kStaged ? kMxfp4MaxStages : 1];
  __shared__ int32_t finished[kStaged ? kMxfp4MaxStages : 1];
  extern __shared__ __align__(16) uint8_t mxfp4Shared[];
  const int64_t pairs = tokens * slots, blocks = k / 32;
  // A stage: the expert's kMxfp4Rows rows of values, then their scales.
  const int64_t rowBytes = k / 2,
                stageBytes = kStaged ? kMxfp4Rows * (rowBytes + blocks) : 0;
  uint8_t *staging = mxfp4Shared;
  // [parts][pairs][kMxfp4Rows]
  float *partials =
      reinterpret_cast<float *>(mxfp4Shared + stages * stageBytes);
  int32_t *pairExpert =
      reinterpret_cast<int32_t *>(partials + parts * pairs * kMxfp4Rows);
  int32_t *expertList = pairExpert + pairs; // distinct experts, increasing
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int words = int((experts + 31) / 32);
  for (int i = threadIdx.x; i < words; i += blockDim.x)
    used[i] = 0;
  if (kStaged && threadIdx.x < stages) {
    barrierInit(&full[threadIdx.x], 1);
    finished[threadIdx.x] = 0;
  }
  if (kStaged)
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
    int32_t e = indices[p];
    bool valid = e >= 0 && e < experts;
    pairExpert[p] = valid ? e : -1;
    if (valid)
      atomicOr(&used[e >> 5], 1u << (e & 31));
  }
  __syncthreads();
  if (warp == 0) {
    // Lane l holds bitmap words 2l and 2l + 1; the prefix of their counts
    // places its experts in the list.
    uint32_t w0 = 2 * lane < words ? used[2 * lane] : 0,
             w1 = 2 * lane + 1 < words ? used[2 * lane + 1] : 0;
    int count = __popc(w0) + __popc(w1), before = count;
    for (int o = 1; o < 32; o <<= 1) {
      int v = __shfl_up_sync(0xffffffffu, before, o);
      if (lane >= o)
        before += v;
    }
    if (lane == 31)
      distinct = before;
    before -= count;
    for (; w0; w0 &= w0 - 1)
      expertList[before++] = 64 * lane + __ffs(w0) - 1;
    for (; w1; w1 &= w1 - 1)
      expertList[before++] = 64 * lane + 32 + __ffs(w1) - 1;
  }
  __syncthreads();

  int64_t row0 = int64_t(blockIdx.x) * kMxfp4Rows;
  // kStaged: distinct expert d's rows into stage d % stages (one thread).
  auto stageExpert = [&](int64_t d) {
    int64_t s = d % stages, row = expertList[d] * n + row0;
    uint8_t *stage = staging + s * stageBytes;
    barrierExpectBytes(&full[s], uint32_t(stageBytes));
    copyBulkStream(stage, values + row * rowBytes,
                   uint32_t(kMxfp4Rows * rowBytes), &full[s]);
    copyBulkStream(stage + kMxfp4Rows * rowBytes, scales + row * blocks,
                   uint32_t(kMxfp4Rows * blocks), &full[s]);
  };
  if (kStaged && threadIdx.x == 0)
    for (int64_t d = 0; d < stages && d < distinct; ++d)
      stageExpert(d);

  int64_t perPart = (blocks + parts - 1) / parts;
  for (int64_t task = warp; task < distinct * parts; task += kMxfp4Warps) {
    int64_t d = task / parts, part = task % parts;
    int32_t e = expertList[d];
    int64_t first = part * perPart;
    int64_t end = first + perPart < blocks ? first + perPart : blocks;
    const uint8_t *expertValues = values + e * n * rowBytes,
                  *expertScales = scales + e * n * blocks;
    int32_t taskRow0 = int32_t(row0), taskLastRow = int32_t(n - 1);
    if (kStaged) {
      barrierWait(&full[d % stages], uint32_t(d / stages) & 1u);
      expertValues = staging + (d % stages) * stageBytes;
      expertScales = expertValues + kMxfp4Rows * rowBytes;
      taskRow0 = 0;
      taskLastRow = kMxfp4Rows - 1;
    }
    // The pairs that picked e, two at a time, found 32 at a time.
    for (int64_t base = 0; base < pairs; base += 32) {
      uint32_t mine = __ballot_sync(
          0xffffffffu, base + lane < pairs && pairExpert[base + lane] == e);
      while (mine) {
        int64_t p0 = base + __ffs(mine) - 1;
        mine &= mine - 1;
        float *slot0 = partials + (part * pairs + p0) * kMxfp4Rows;
        const float *in0 = x + (perSlotInput ? p0 : p0 / slots) * k;
        if (mine) {
          int64_t p1 = base + __ffs(mine) - 1;
          mine &= mine - 1;
          float *slot1 = partials + (part * pairs + p1) * kMxfp4Rows;
          const float *in[2] = {in0, x + (perSlotInput ? p1 : p1 / slots) * k};
          float sums[kMxfp4Rows][2];
          Task::template run<2, kStaged>(expertValues, expertScales, taskRow0,
                                         taskLastRow, blocks, in, first, end,
                                         sums);
          if (lane == 0)
#pragma unroll
            for (int r = 0; r < kMxfp4Rows; ++r) {
              slot0[r] = sums[r][0];
              slot1[r] = sums[r][1];
            }
        } else {
          const float *in[1] = {in0};
          float sums[kMxfp4Rows][1];
          Task::template run<1, kStaged>(expertValues, expertScales, taskRow0,
                                         taskLastRow, blocks, in, first, end,
                                         sums);
          if (lane == 0)
#pragma unroll
            for (int r = 0; r < kMxfp4Rows; ++r)
              slot0[r] = sums[r][0];
        }
      }
    }
    if (kStaged && lane == 0) {
      // The task's reads of the stage are done (its sums used every
      // lane's loads). The last of the stage's `parts` tasks hands it to
      // the copy engine for the expert `stages` on, after the fence that
      // orders those reads before the engine's writes.
      __threadfence_block();
      int64_t s = d % stages;
      if (atomicAdd(&finished[s], 1) == parts - 1) {
        finished[s] = 0;
        if (d + stages < distinct) {
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          stageExpert(d + stages);
        }
      }
    }
  }
  __syncthreads();

  // Outputs: one thread per (output row, row of the block).
  int64_t outRows = routingWeights ? tokens : pairs;
  for (int64_t item = threadIdx.x; item < outRows * kMxfp4Rows;
       item += blockDim.x) {
    int64_t o = item / kMxfp4Rows, r = item % kMxfp4Rows, col = row0 + r;
    if (col >= n)
      continue;
    float combined = 0.0f;
    for (int64_t s = routingWeights ? 0 : o % slots,
                 last = routingWeights ? slots : s + 1;
         s < last; ++s) {
      int64_t p = routingWeights ? o * slots + s : o;
      int32_t e = pairExpert[p];
      float y = 0.0f;
      if (e >= 0) {
        for (int64_t part = 0; part < parts; ++part)
          y += partials[(part * pairs + p) * kMxfp4Rows + r];
        if (bias.data)
          y += weightAt(bias, e * n + col);
      }
      if (!routingWeights)
        combined = y;
      else if (e >= 0)
        combined += routingWeights[p] * y;
    }
    out[o * n + col] = combined;
  }
}

} // namespace

/// Grouped expert matmul over MXFP4 experts read as stored (see
/// cpu::mxfp4ExpertMatmul): values [E, N, K] two a byte, low nibble first,
/// one E8M0 scale byte per 32 along K. grid (ceil(N / kMxfp4Rows)), block
/// 128, dynamic shared memory (parts x pairs x kMxfp4Rows floats, then
/// pairs + min(E, pairs) ints; pairs = tokens x slots).
///
/// Expert-major: a block owns kMxfp4Rows output rows and streams those rows
/// of every *distinct* expert the pairs picked exactly once, however many
/// pairs picked it. Its warps take (expert, part of K) tasks, parts set by
/// the launcher so that a lane has one block of 32 values per row (K = 2880:
/// 90 blocks, 3 parts); a task's pairs go through mxfp4Task two at a time,
/// so an expert picked by one or two pairs is read once from HBM (a third
/// pair re-reads it from L2). Each (pair, part, row) partial lands in one
/// shared-memory slot; then one thread per (output row, row) adds the parts
/// in order, the bias, and the slots in slot order (weighted by the routing
/// weights, or written per slot): the result does not depend on scheduling.
/// An expert id outside [0, E) is an empty slot.
///
/// Roofline: an expert row of K = 2880 is 1440 bytes of values and 90 of
/// scales, 0.53125 B a value; gpt-oss-120b's T = 1 top-4 gate/up (5760
/// rows) reads 35.3 MB, 12.3 us at an H100's 2.88 TB/s copy rate. A task
/// loads its rows and then waits for them: that case reaches 1.2 TB/s, and the
/// same loads with next to no arithmetic 1.6 TB/s (bench/mxfp4_variants.cu,
/// session 50). The staged form below keeps each block's rows in flight
/// instead; the launcher takes it where CudaKernels::withMxfp4Staging allows
/// (not by default until it has run on a GPU).
extern "C" __global__ void __launch_bounds__(128) daybreak_mxfp4_expert_matmul(
    const float *x, int32_t perSlotInput, const uint8_t *values,
    const uint8_t *scales, Weight bias, int64_t experts, int64_t n, int64_t k,
    const int32_t *indices, int64_t tokens, int64_t slots,
    const float *routingWeights, int64_t parts, float *out) {
  mxfp4ExpertMatmulBlock<false>(x, perSlotInput, values, scales, bias, experts,
                                n, k, indices, tokens, slots, routingWeights,
                                parts, 0, out);
}

/// daybreak_mxfp4_expert_matmul with its rows brought by the copy engine:
/// each distinct expert's kMxfp4Rows rows of the block (contiguous: N a
/// multiple of kMxfp4Rows) are one stage, K / 2 bytes of values a row and
/// then K / 32 scale bytes a row (16-byte multiples: K a multiple of 64;
/// values and scales 16-byte aligned), in a ring of `stages` (2 ..
/// kMxfp4MaxStages) ahead of the tasks. Dynamic shared memory: the stages,
/// then daybreak_mxfp4_expert_matmul's. The last task to finish with a
/// stage refills it, so a block keeps `stages` experts' rows in flight
/// with no registers held for them: four stages of 12 KB at gpt-oss's
/// K = 2880 (52 KB a block with the sums), four blocks an SM (128
/// registers; the unstaged form's 168 allow three). The same sums in the
/// same order as daybreak_mxfp4_expert_matmul, so the same results bit for
/// bit (CudaKernelsTest.Mxfp4ExpertMatmul requires it).
extern "C" __global__ void __launch_bounds__(128)
    daybreak_mxfp4_expert_matmul_staged(
        const float *x, int32_t perSlotInput, const uint8_t *values,
        const uint8_t *scales, Weight bias, int64_t experts, int64_t n,
        int64_t k, const int32_t *indices, int64_t tokens, int64_t slots,
        const float *routingWeights, int64_t parts, int32_t stages,
        float *out) {
  mxfp4ExpertMatmulBlock<true>(x, perSlotInput, values, scales, bias, experts,
                               n, k, indices, tokens, slots, routingWeights,
                               parts, stages, out);
}

/// The E4M3 codes of four E2M1 codes, the nibbles of `packed` (low first),
/// one a byte: the magnitudes through a byte permutation of the 8-entry
/// table (E2M1 0, 0.5 .. 6 are E4M3 0x00, 0x30 .. 0x4C), the signs moved
/// from bit 3 of each nibble to bit 7 of each byte. As numerics::e2m1ToE4m3.
__device__ __forceinline__ uint32_t e2m1x4ToE4m3x4(uint32_t packed) {
  uint32_t magnitudes = __byte_perm(0x3C383000u, 0x4C484440u, packed & 0x7777u);
  uint32_t spread = (packed & 0x000Fu) | ((packed & 0x00F0u) << 4) |
                    ((packed & 0x0F00u) << 8) | ((packed & 0xF000u) << 12);
  return magnitudes | ((spread & 0x08080808u) << 4);
}

/// daybreak_mxfp4_to_fp8_experts' selection: the expert of workspace slot
/// `slot` (-1 past the distinct count); block (0, 0) writes the remapped
/// indices. Every thread of the block calls it.
__device__ int64_t mxfp4SelectedExpert(int64_t experts, const int32_t *indices,
                                       int64_t rows, int64_t slot,
                                       int32_t *remapped) {
  __shared__ uint32_t used[kMxfp4ExpertWords];
  __shared__ int32_t before[kMxfp4ExpertWords + 1];
  __shared__ int64_t expert;
  int words = int((experts + 31) / 32);
  for (int i = threadIdx.x; i < words; i += blockDim.x)
    used[i] = 0;
  __syncthreads();
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    int32_t e = indices[r];
    if (e >= 0 && e < experts)
      atomicOr(&used[e >> 5], 1u << (e & 31));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // Selected experts below each word, and the expert of this slot.
    before[0] = 0;
    expert = -1;
    for (int i = 0; i < words; ++i) {
      before[i + 1] = before[i] + __popc(used[i]);
      if (expert < 0 && slot < before[i + 1]) {
        uint32_t bits = used[i];
        for (int64_t skip = slot - before[i]; skip > 0; --skip)
          bits &= bits - 1; // drop the lowest set bit
        expert = int64_t(i) * 32 + __ffs(bits) - 1;
      }
    }
  }
  __syncthreads();
  if (blockIdx.x == 0 && blockIdx.y == 0)
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
      int32_t e = indices[r];
      remapped[r] =
          e >= 0 && e < experts
              ? before[e >> 5] + __popc(used[e >> 5] & ((1u << (e & 31)) - 1))
              : -1;
    }
  return expert;
}

/// The MXFP4 online route's conversion (cpu::mxfp4ToFp8Experts), by `mode`
/// (cuda::Mxfp4ConvertMode):
/// - 0, the selection: the distinct experts of indices [T, k], in
///   increasing id order, into the workspace's slots. Every block marks the
///   selected experts in a shared bitmap (the indices are few and in L2)
///   and finds its slot's expert from the bitmap's prefix counts; a block
///   whose slot is past the distinct count does nothing. Block (0, 0) also
///   writes the remapped indices;
/// - 1, every expert e into slot e (no indices read, none written);
/// - 2, only the remapped indices, as the indices themselves (every expert
///   is in its own slot): block (0, 0) alone.
/// grid (chunks, workspace slots), block 256. Each thread converts blocks
/// of 32 values of its chunk: one 16-byte load of packed values, two
/// 16-byte stores of E4M3 codes, the scale byte to fp32. An id outside [0,
/// E) counts as an empty slot (-1), as in daybreak_expert_matmul.
extern "C" __global__ void daybreak_mxfp4_to_fp8_experts(
    const uint8_t *values, const uint8_t *scales, Weight bias, int64_t experts,
    int64_t n, int64_t k, const int32_t *indices, int64_t rows,
    int64_t perThread, uint8_t *codes, float *blockScales, float *slotBias,
    int32_t *remapped, int32_t mode) {
  if (mode == 2) {
    if (blockIdx.x == 0 && blockIdx.y == 0)
      for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
        int32_t e = indices[r];
        remapped[r] = e >= 0 && e < experts ? e : -1;
      }
    return;
  }
  int64_t slot = blockIdx.y;
  int64_t e = mode == 1
                  ? slot
                  : mxfp4SelectedExpert(experts, indices, rows, slot, remapped);
  if (e < 0)
    return;
  int64_t groups = k / 32, items = n * groups;
  const uint4 *in = reinterpret_cast<const uint4 *>(values) + e * items;
  uint4 *out = reinterpret_cast<uint4 *>(codes) + slot * items * 2;
  const uint8_t *exponents = scales + e * items;
  float *scaleOut = blockScales + slot * items;
  int64_t first = int64_t(blockIdx.x) * blockDim.x * perThread;
  int64_t end = first + int64_t(blockDim.x) * perThread;
  int64_t last = end < items ? end : items;
  for (int64_t i = first + threadIdx.x; i < last; i += blockDim.x) {
    uint4 packed = in[i];
    out[2 * i] =
        make_uint4(e2m1x4ToE4m3x4(packed.x), e2m1x4ToE4m3x4(packed.x >> 16),
                   e2m1x4ToE4m3x4(packed.y), e2m1x4ToE4m3x4(packed.y >> 16));
    out[2 * i + 1] =
        make_uint4(e2m1x4ToE4m3x4(packed.z), e2m1x4ToE4m3x4(packed.z >> 16),
                   e2m1x4ToE4m3x4(packed.w), e2m1x4ToE4m3x4(packed.w >> 16));
    scaleOut[i] = e8m0ToFloat(exponents[i]);
  }
  if (blockIdx.x == 0)
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      slotBias[slot * n + j] = bias.data ? weightAt(bias, e * n + j) : 0.0f;
}

namespace {

/// Whether token t's row is not written: its slot is -1 or outside
/// [0, maxSeqLen), its sequence outside [0, batch), or a later token names
/// the same row (the last wins). Every thread of the block calls it.
__device__ bool cacheWriteSkips(const Cache &cache, const int32_t *slots,
                                const int32_t *sequences, int64_t tokens,
                                int64_t t, int64_t &seq, int64_t &slot) {
  __shared__ int laterWriter;
  seq = sequences ? sequences[t] : 0;
  slot = slots[t];
  if (slot < 0 || slot >= cache.maxSeqLen || seq < 0 || seq >= cache.batch)
    return true;
  if (threadIdx.x == 0)
    laterWriter = 0;
  __syncthreads();
  for (int64_t u = t + 1 + threadIdx.x; u < tokens; u += blockDim.x)
    if (slots[u] == slot && (sequences ? sequences[u] : 0) == seq)
      laterWriter = 1;
  __syncthreads();
  return laterWriter != 0;
}

/// Stores row `in` [width] (global or shared memory) as row (seq, slot) of
/// the cache, with the block's threads. Fp8Scaled: one warp per scale
/// tile.
__device__ void storeCacheRow(const Cache &cache, int64_t seq, int64_t slot,
                              const float *in) {
  uint8_t *dst = cacheRow(cache, seq, slot);
  if (cache.format == kF32) {
    float *d = reinterpret_cast<float *>(dst);
    for (int64_t i = threadIdx.x; i < cache.width; i += blockDim.x)
      d[i] = in[i];
    return;
  }
  if (cache.format == kBF16) {
    uint16_t *d = reinterpret_cast<uint16_t *>(dst);
    for (int64_t i = threadIdx.x; i < cache.width; i += blockDim.x)
      d[i] = floatToBf16(in[i]);
    return;
  }
  int64_t quantized = cache.width - cache.tailDim;
  int64_t tiles = quantized / cache.scaleBlock;
  uint8_t *scales = dst + quantized;
  uint16_t *tail = reinterpret_cast<uint16_t *>(scales + 4 * tiles);
  int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (int64_t tile = threadIdx.x / 32; tile < tiles; tile += warps) {
    const float *v = in + tile * cache.scaleBlock;
    float amax = 0.0f;
    for (int64_t i = lane; i < cache.scaleBlock; i += 32)
      amax = fmaxf(amax, fabsf(v[i]));
    amax = warpMax(amax);
    int exponent = fp8ScaleExponent(amax);
    float scale = ldexpf(1.0f, exponent);
    float inverse = ldexpf(1.0f, -exponent);
    if (lane == 0)
      reinterpret_cast<float *>(scales)[tile] = scale;
    for (int64_t i = lane; i < cache.scaleBlock; i += 32)
      dst[tile * cache.scaleBlock + i] = floatToE4m3(v[i] * inverse);
  }
  for (int64_t i = threadIdx.x; i < cache.tailDim; i += blockDim.x)
    tail[i] = floatToBf16(in[quantized + i]);
}

} // namespace

/// Writes values [T, width] (rows valuesStride floats apart) to rows
/// (sequences[t], slots[t]); grid (tokens), block 128. Slot -1, a slot outside
/// [0, maxSeqLen) or a sequence outside [0, batch) skips the token; when
/// several tokens name one row the last wins (the others skip).
extern "C" __global__ void
daybreak_cache_write(Cache cache, const float *values, int64_t valuesStride,
                     const int32_t *slots, const int32_t *sequences,
                     int64_t tokens) {
  beginDependent();
  int64_t t = blockIdx.x, seq, slot;
  if (cacheWriteSkips(cache, slots, sequences, tokens, t, seq, slot))
    return;
  storeCacheRow(cache, seq, slot, values + t * valuesStride);
}

/// daybreak_cache_write with lm.cache_write's prologue: grid (tokens), block
/// kRmsNormThreads, dynamic shared memory of a row (width floats). The row
/// is staged in shared memory, normalised over [0, normDim) (norm 1: as
/// daybreak_rms_norm computes a row, 2: as daybreak_layer_norm does; 0:
/// not), rotated over [ropeOffset, ropeOffset + ropeDim) of each head of
/// ropeHeadDim columns at positions[t] as daybreak_rope rotates (ropeDim 0:
/// not; low/high: YaRN's ramp ends), then
/// stored as daybreak_cache_write stores it.
extern "C" __global__ void daybreak_cache_write_rows(
    Cache cache, const float *values, int64_t valuesStride,
    const int32_t *slots, const int32_t *sequences, int64_t tokens,
    int32_t norm, Weight normWeight, Weight normBias, int64_t normDim,
    double eps, const int32_t *positions, int32_t interleaved,
    int64_t ropeOffset, int64_t ropeDim, int64_t ropeHeadDim, double theta,
    int32_t yarn, double factor, double low, double high,
    double attentionFactor) {
  extern __shared__ float row[];
  beginDependent();
  int64_t t = blockIdx.x, seq, slot;
  if (cacheWriteSkips(cache, slots, sequences, tokens, t, seq, slot))
    return;
  const float *in = values + t * valuesStride;
  for (int64_t i = threadIdx.x; i < cache.width; i += blockDim.x)
    row[i] = in[i];
  __syncthreads();
  if (norm == 1)
    rmsNormRow<0>(row, normWeight, normDim, eps, row, /*xStride=*/0,
                  /*outStride=*/0);
  else if (norm == 2)
    layerNormRow(row, normWeight, normBias, normDim, eps, row);
  __syncthreads();
  if (ropeDim > 0) {
    const int64_t half = ropeDim / 2, heads = cache.width / ropeHeadDim;
    const double position = double(positions[t]);
    for (int64_t j = threadIdx.x; j < heads * half; j += blockDim.x) {
      const int64_t i = j % half;
      float *rotated = row + (j / half) * ropeHeadDim + ropeOffset;
      double cosine, sine;
      ropeAngle(i, position, ropeDim, theta, yarn, factor, low, high,
                attentionFactor, cosine, sine);
      int64_t a = interleaved ? 2 * i : i;
      int64_t b = interleaved ? 2 * i + 1 : i + half;
      double xa = rotated[a], xb = rotated[b];
      rotated[a] = float(xa * cosine - xb * sine);
      rotated[b] = float(xb * cosine + xa * sine);
    }
    __syncthreads();
  }
  storeCacheRow(cache, seq, slot, row);
}

namespace {

/// Decodes a cache row into shared memory `out[width]` with the block's
/// threads `[first, first + count)` (no synchronisation). kWidth: the cache
/// width when known at compile time (0: c.width).
template <int kWidth = 0>
__device__ void readRow(const Cache &c, int64_t seq, int64_t pos, float *out,
                        int first, int count) {
  const int64_t width = kWidth > 0 ? int64_t(kWidth) : c.width;
  const uint8_t *src = cacheRow(c, seq, pos);
  int tid = int(threadIdx.x) - first;
  if (tid < 0 || tid >= count)
    return;
  if (c.format == kF32) {
    const float *s = reinterpret_cast<const float *>(src);
    for (int64_t i = tid; i < width; i += count)
      out[i] = s[i];
  } else if (c.format == kBF16) {
    const uint16_t *s = reinterpret_cast<const uint16_t *>(src);
    for (int64_t i = tid; i < width; i += count)
      out[i] = bf16ToFloat(s[i]);
  } else {
    // 32-bit indices (a row is far below 2^31 bytes): 64-bit division is a
    // long sequence per element.
    const int quantized = int(width - c.tailDim), block = int(c.scaleBlock);
    const float *scales = reinterpret_cast<const float *>(src + quantized);
    const uint16_t *tail = reinterpret_cast<const uint16_t *>(
        src + quantized + 4 * (quantized / block));
    for (int i = tid; i < int(width); i += count)
      out[i] = i < quantized ? e4m3Fast(src[i]) * scales[i / block]
                             : bf16ToFloat(tail[i - quantized]);
  }
}

} // namespace

namespace {

/// Keys a warp of daybreak_dsa_indexer_scores scores: each lane keeps
/// kIndexerWarpKeys x 2 dot products in registers.
constexpr int kIndexerWarpKeys = 8;

/// The padded row stride, in floats, of the indexer's shared q and key rows
/// of `dim` values: a multiple of 4 (float4 reads) whose quarter is odd, so
/// that the 8 lanes of a quarter-warp reading 8 heads' q rows at one offset
/// hit 8 distinct 4-bank groups.
__host__ __device__ __forceinline__ int64_t indexerStride(int64_t dim) {
  int64_t padded = (dim + 3) / 4 * 4;
  return (padded / 4) % 2 == 1 ? padded : padded + 4;
}

/// daybreak_dsa_indexer_scores' body for keys.width == kDim (0: at run
/// time).
template <int kDim>
__device__ __forceinline__ void
dsaIndexerScores(const float *q, const float *weights, const Cache &keys,
                 const int32_t *sequences, const int32_t *bounds, int64_t heads,
                 double scale, const QueryRope &rope, float *scores) {
  extern __shared__ __align__(16) float indexerShared[];
  const int64_t dim = kDim > 0 ? int64_t(kDim) : keys.width;
  const int64_t stride = indexerStride(dim);
  const int64_t padded = (dim + 3) / 4 * 4;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int64_t blockKeys = int64_t(blockDim.x / 32) * kIndexerWarpKeys;
  int64_t t = blockIdx.y;
  int64_t s0 = int64_t(blockIdx.x) * blockKeys;
  int64_t count =
      keys.maxSeqLen - s0 < blockKeys ? keys.maxSeqLen - s0 : blockKeys;
  int64_t seq = sequences ? sequences[t] : 0;
  float *out = scores + t * keys.maxSeqLen + s0;
  // Keys past the query's bound are 0 and not read: a block wholly past it
  // (most of a large cache at short contexts) only writes its zeros.
  int64_t visible = count;
  if (bounds) {
    int64_t bound = int64_t(bounds[t]) - s0;
    visible = bound < 0 ? 0 : bound < count ? bound : count;
  }
  if (seq < 0 || seq >= keys.batch)
    visible = 0;
  for (int64_t s = visible + threadIdx.x; s < count; s += blockDim.x)
    out[s] = 0.0f;
  if (visible == 0)
    return;
  // The prologue's angles, then the token's q rows [heads][stride] (rotated
  // as staged) and the visible keys [.][stride], both zero past `dim`.
  double2 *angles = reinterpret_cast<double2 *>(indexerShared);
  float *qs = indexerShared + queryRopeBytes(rope, 1) / int64_t(sizeof(float));
  float *ks = qs + heads * stride;
  const float *qt = q + t * heads * dim;
  if (rope.dim > 0) {
    queryRopeAngles(rope, t, 1, t + 1, angles);
    __syncthreads();
  }
  if (dim % 4 == 0) {
    const int quads = int(dim / 4);
#pragma unroll 4
    for (int i = threadIdx.x; i < int(heads) * quads; i += blockDim.x) {
      int h = i / quads, d = 4 * (i - h * quads);
      *reinterpret_cast<float4 *>(qs + h * stride + d) =
          queryRopeQuad(rope, angles, qt + h * dim, d,
                        reinterpret_cast<const float4 *>(qt)[i]);
    }
  } else {
    for (int64_t i = threadIdx.x; i < heads * padded; i += blockDim.x) {
      int64_t h = i / padded, d = i - h * padded;
      qs[h * stride + d] =
          d < dim ? (rope.dim > 0 ? queryRopeValue(rope, angles, qt + h * dim,
                                                   d, qt[h * dim + d])
                                  : qt[h * dim + d])
                  : 0.0f;
    }
  }
  // Four threads a key (blockKeys is blockDim.x / 4): one page-table lookup
  // each, and a quarter of the row's loads in flight at once.
  const int64_t row = threadIdx.x / 4;
  if (row < visible)
    readRow<kDim>(keys, seq, s0 + row, ks + row * stride, int(row * 4), 4);
  if (padded > dim)
    for (int64_t i = threadIdx.x; i < visible * 4; i += blockDim.x)
      if (dim + i % 4 < padded)
        ks[i / 4 * stride + dim + i % 4] = 0.0f;
  __syncthreads();
  // Warp w scores keys [8w, 8w + 8); lane l the heads l + 32j. Keys past
  // `visible` repeat the last visible one and are not written.
  const int64_t key0 = int64_t(warp) * kIndexerWarpKeys;
  if (key0 >= visible)
    return;
  const float *key[kIndexerWarpKeys];
#pragma unroll
  for (int k = 0; k < kIndexerWarpKeys; ++k)
    key[k] = ks + (key0 + k < visible ? key0 + k : visible - 1) * stride;
  const float *wt = weights + t * heads;
  float total[kIndexerWarpKeys] = {};
  for (int64_t h0 = lane; h0 < heads; h0 += 64) {
    const int64_t h1 = h0 + 32 < heads ? h0 + 32 : h0;
    const float *q0 = qs + h0 * stride, *q1 = qs + h1 * stride;
    float dot0[kIndexerWarpKeys] = {}, dot1[kIndexerWarpKeys] = {};
    for (int64_t d = 0; d < padded; d += 4) {
      float4 a = *reinterpret_cast<const float4 *>(q0 + d);
      float4 b = *reinterpret_cast<const float4 *>(q1 + d);
#pragma unroll
      for (int k = 0; k < kIndexerWarpKeys; ++k) {
        float4 v = *reinterpret_cast<const float4 *>(key[k] + d);
        dot0[k] = fmaf(a.x, v.x, dot0[k]);
        dot0[k] = fmaf(a.y, v.y, dot0[k]);
        dot0[k] = fmaf(a.z, v.z, dot0[k]);
        dot0[k] = fmaf(a.w, v.w, dot0[k]);
        dot1[k] = fmaf(b.x, v.x, dot1[k]);
        dot1[k] = fmaf(b.y, v.y, dot1[k]);
        dot1[k] = fmaf(b.z, v.z, dot1[k]);
        dot1[k] = fmaf(b.w, v.w, dot1[k]);
      }
    }
    const float w0 = wt[h0], w1 = h0 + 32 < heads ? wt[h1] : 0.0f;
#pragma unroll
    for (int k = 0; k < kIndexerWarpKeys; ++k)
      total[k] = fmaf(w1, fmaxf(dot1[k], 0.0f),
                      fmaf(w0, fmaxf(dot0[k], 0.0f), total[k]));
  }
#pragma unroll
  for (int k = 0; k < kIndexerWarpKeys; ++k) {
    float sum = warpSum(total[k]);
    if (lane == k && key0 + k < visible)
      out[key0 + k] = float(scale * double(sum));
  }
}

} // namespace

/// scores[t, s] = scale * sum_h weights[t, h] * ReLU(q[t, h] . key(seq_t, s))
/// for s < maxSeqLen, or with `bounds` (may be null) for s < bounds[t] and 0
/// past it; q[t, h] first rotated by `rope` (dim 0: as given). grid
/// (ceil(maxSeqLen / keysPerBlock), tokens), block 32 x warps threads,
/// keysPerBlock = 8 x warps (each warp scores 8 keys, its lanes splitting
/// the heads), dynamic shared memory queryRopeBytes(rope, 1) + (heads +
/// keysPerBlock) x indexerStride(width) x 4 bytes: the rotation's angles,
/// the token's q and the block's keys, decoded. A sequence outside [0,
/// batch) gives a row of zeros.
extern "C" __global__ void
daybreak_dsa_indexer_scores(const float *q, const float *weights, Cache keys,
                            const int32_t *sequences, const int32_t *bounds,
                            int64_t tokens, int64_t heads, double scale,
                            QueryRope rope, float *scores) {
  beginDependent();
  dsaIndexerScores<0>(q, weights, keys, sequences, bounds, heads, scale, rope,
                      scores);
}

/// daybreak_dsa_indexer_scores for keys.width == kDim.
template <int kDim>
__global__ void
daybreak_dsa_indexer_scores_t(const float *q, const float *weights, Cache keys,
                              const int32_t *sequences, const int32_t *bounds,
                              int64_t tokens, int64_t heads, double scale,
                              QueryRope rope, float *scores) {
  beginDependent();
  dsaIndexerScores<kDim>(q, weights, keys, sequences, bounds, heads, scale,
                         rope, scores);
}

//===----------------------------------------------------------------------===//
// The DSA indexer on the tensor cores (--precision=bf16 and fp8 take it, a
// token a block below kIndexerGroupMinTokens tokens): the same scores as
// daybreak_dsa_indexer_scores with q rounded to bf16 (to nearest even). A
// block takes one token and a chunk of keys: the token's heads are the M
// dimension of mma.sync m16n8k16 tiles (a warp a 16-head tile, zero rows past
// `heads`), 64 keys the N dimension of a step, the row of at most 128 values
// the K dimension. Keys arrive as stored: bf16 rows multiply as bf16 against
// q's bf16; FP8 rows (one power-of-two scale a row, no tail) widen exactly to
// f16 (one cvt per two codes) against q's bf16 value times a power of two per
// head that puts its largest |q| in [2^14, 2^15) (exact while the value stays a
// normal f16: down to 2^-28 of that largest), and the row's scale and the
// head's inverse power multiply the fp32 dot afterwards (both powers of two:
// exact). So every product is the fp32 product of bf16(q) and the key; the sums
// are fp32. ReLU, the head weights and the sum over heads follow in registers
// (a warp's 16 heads by shuffles, the warps' partial sums through shared memory
// in a fixed order: deterministic).
//
// A key tile's words are loaded into registers a tile ahead (rows keep only
// 4-byte alignment: FP8 rows are 4 bytes of scale longer than their codes),
// widened into a second shared buffer while the current one is multiplied.
//
// Its code is kept short. A decode step's launch finds the kernel's code in
// no cache (the step streams gigabytes of weights between two launches), and
// at one token a block runs through it once: the time is the instruction
// fetch. With a page lookup (three 64-bit divisions) and a division a loaded
// word, each unrolled at three call sites, it was 466 KB of SASS and took
// 40 us a launch in the 4-layer model's decode step on an H100; at 107 KB,
// 23 us (bench/NOTES.md, session 37).
// Per key and head, 2 D FLOP for D / 2 (FP8: D / 4) loaded bytes a key
// shared by the heads: at DeepSeek-V3.2's 64 heads x 128 the tensor cores
// bound it, not memory.
//===----------------------------------------------------------------------===//

namespace {

/// The indexer's q for the f16 mma on FP8 keys: a warp's head row, 4
/// values a lane, times the power of two that brings its largest |q| into
/// [2^14, 2^15) (so that bf16(q) converts to f16 exactly down to 2^-28 of
/// it); returns the inverse power. Every lane of the warp calls it.
__device__ __forceinline__ float scaleHeadIntoF16(float4 &v) {
  float amax =
      fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float2 scale = f16StageScale(amax);
  v.x *= scale.x;
  v.y *= scale.x;
  v.z *= scale.x;
  v.w *= scale.x;
  return scale.y;
}

constexpr int kIndexerTcKeys = 64;     // keys a step
constexpr int kIndexerTcStride = 136;  // halves a shared row: 128 + 8 (ldmatrix
                                       // rows on distinct banks)

} // namespace

namespace {

/// daybreak_dsa_indexer_tc's body: kType kWeightE4M3 for FP8 rows (f16
/// mma), kWeightBF16 for bf16 rows. Block: 32 x max(4, ceil(heads / 16))
/// threads; grid (G, tokens): block x takes the 64-key tiles x, x + G,
/// x + 2G, ... of its token's row, so that every context spreads over the
/// grid (a decode step's grid is sized once for the longest context, and
/// most steps see far fewer keys). Shared memory (CudaKernels.cpp's
/// indexerTcSharedBytes), m = ceil(heads / 16): q [16 m][136] halves, two
/// key tiles [64][136] halves, their rows' scales [2][64], the heads'
/// factors [16 m] and the warps' partial sums [m][64].
template <int kType>
__device__ __forceinline__ void
indexerTc(const float *__restrict__ q, const float *__restrict__ weights,
          const Cache &keys, const int32_t *sequences, const int32_t *bounds,
          int64_t heads, float scale, const QueryRope &rope,
          float *__restrict__ scores) {
  extern __shared__ __align__(16) uint8_t indexerTcShared[];
  beginDependent();
  const int mTiles = int((heads + 15) / 16);
  const int threads = int(blockDim.x);
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int dim = int(keys.width), steps = dim / 16;
  double2 *angles = reinterpret_cast<double2 *>(indexerTcShared);
  uint16_t *qs =
      reinterpret_cast<uint16_t *>(indexerTcShared + queryRopeBytes(rope, 1));
  uint16_t *ks = qs + 16 * mTiles * kIndexerTcStride;
  float *rowScale =
      reinterpret_cast<float *>(ks + 2 * kIndexerTcKeys * kIndexerTcStride);
  float *factor = rowScale + 2 * kIndexerTcKeys;
  float *partial = factor + 16 * mTiles;

  const int64_t token = blockIdx.y;
  const int64_t seq = sequences ? sequences[token] : 0;
  float *out = scores + token * keys.maxSeqLen;
  int64_t visible = keys.maxSeqLen;
  if (bounds) {
    const int64_t bound = bounds[token];
    visible = bound < 0 ? 0 : bound < visible ? bound : visible;
  }
  if (seq < 0 || seq >= keys.batch)
    visible = 0;
  // This block's tiles: zeros past the visible keys, then the visible ones.
  const int64_t stride = gridDim.x;
  auto tileKey = [&](int64_t i) {
    return (int64_t(blockIdx.x) + i * stride) * kIndexerTcKeys;
  };
  for (int64_t k0 = tileKey(0); k0 < keys.maxSeqLen;
       k0 += stride * kIndexerTcKeys) {
    const int64_t end = k0 + kIndexerTcKeys < keys.maxSeqLen
                            ? k0 + kIndexerTcKeys
                            : keys.maxSeqLen;
    for (int64_t s = (visible > k0 ? visible : k0) + tid; s < end; s += threads)
      out[s] = 0.0f;
  }
  const int64_t visibleTiles = (visible + kIndexerTcKeys - 1) / kIndexerTcKeys;
  if (int64_t(blockIdx.x) >= visibleTiles)
    return;
  const int64_t tiles = (visibleTiles - blockIdx.x + stride - 1) / stride;

  // q: warp w rounds heads 16w .. 16w + 15 (zeros past `heads`), a lane 4
  // values of a head, rotated first by the prologue; the head factor is its
  // weight (times the inverse power for f16). The 16 rows' loads go out
  // together.
  auto stageQuery = [&] {
    if (rope.dim > 0) {
      queryRopeAngles(rope, token, 1, token + 1, angles);
      __syncthreads();
    }
    for (int r = warp * 16; r < 16 * mTiles; r += 16 * (threads / 32)) {
      const int d = 4 * lane;
      float4 v[16];
      float w[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int h = r + i;
        v[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (h < heads && d < dim)
          v[i] = *reinterpret_cast<const float4 *>(
              q + (token * heads + h) * dim + d);
        w[i] = lane == 0 && h < heads ? weights[token * heads + h] : 0.0f;
      }
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int h = r + i;
        if (rope.dim > 0 && h < heads && d < dim)
          v[i] = queryRopeQuad(rope, angles, q + (token * heads + h) * dim, d,
                               v[i]);
        const float inverse =
            kType == kWeightE4M3 ? scaleHeadIntoF16(v[i]) : 1.0f;
        if (d < dim)
          *reinterpret_cast<uint2 *>(qs + h * kIndexerTcStride + d) =
              make_uint2(roundX<kType>(v[i].x, v[i].y),
                         roundX<kType>(v[i].z, v[i].w));
        if (lane == 0)
          factor[h] = w[i] * inverse;
      }
    }
  };

  // A key tile's words: thread i takes words i, i + threads, ... of the
  // tile's rows (dim bytes a row for FP8, 2 dim for bf16), zero past
  // `visible`; threads under 64 the row scales (FP8). A tile starts at a
  // multiple of 64 keys, so where pages (or the ring) hold a multiple of
  // 64 rows its rows are consecutive: one page lookup a tile, not one a
  // word.
  constexpr int kBytes = kType == kWeightE4M3 ? 1 : 2;
  const int rowWords = dim * kBytes / 4, tileWords = kIndexerTcKeys * rowWords;
  const bool consecutive =
      (keys.ringRows ? keys.ringRows : keys.pageSize) % kIndexerTcKeys == 0;
  // Word tid + i * threads is word `w` of key `key`: both advance by fixed
  // steps with i (one division here, none a word: this loop is unrolled
  // kMaxWords times in both functions below, and the kernel's code
  // is fetched from HBM at every launch of a decode step).
  const int keyStep = threads / rowWords, wordStep = threads % rowWords;
  const int key0 = tid / rowWords, word0 = tid - key0 * rowWords;
  auto advance = [&](int &key, int &w) {
    key += keyStep;
    w += wordStep;
    if (w >= rowWords) {
      w -= rowWords;
      ++key;
    }
  };
  // A thread's words of a tile: 64 rows of dim <= 128 bytes (FP8) or 2 dim
  // (bf16) over at least 128 threads.
  constexpr int kMaxWords = kType == kWeightE4M3 ? 16 : 32;
  uint32_t raw[kMaxWords];
  float nextScale = 0.0f;
  auto load = [&](int64_t k0) {
    const uint8_t *tile = consecutive ? cacheRow(keys, seq, k0) : nullptr;
    auto row = [&](int key) -> const uint8_t * {
      return tile ? tile + int64_t(key) * keys.bytesPerRow
                  : cacheRowOutOfLine(keys, seq, k0 + key);
    };
    int key = key0, w = word0;
#pragma unroll
    for (int i = 0; i < kMaxWords; ++i) {
      raw[i] = 0;
      if (tid + i * threads < tileWords && k0 + key < visible)
        raw[i] = __ldg(reinterpret_cast<const uint32_t *>(row(key)) + w);
      advance(key, w);
    }
    if (tid < kIndexerTcKeys) {
      nextScale = 0.0f;
      if (k0 + tid < visible)
        nextScale = kType == kWeightE4M3
                        ? __ldg(reinterpret_cast<const float *>(row(tid) + dim))
                        : 1.0f;
    }
  };
  auto store = [&](int buf) {
    uint16_t *tile = ks + buf * kIndexerTcKeys * kIndexerTcStride;
    int key = key0, w = word0;
#pragma unroll
    for (int i = 0; i < kMaxWords; ++i) {
      if (tid + i * threads < tileWords) {
        uint16_t *row = tile + key * kIndexerTcStride;
        if (kType == kWeightE4M3) {
          uint2 h;
          e4m3x4ToHalf2(raw[i], h.x, h.y);
          *reinterpret_cast<uint2 *>(row + 4 * w) = h;
        } else {
          *reinterpret_cast<uint32_t *>(row + 2 * w) = raw[i];
        }
      }
      advance(key, w);
    }
    if (tid < kIndexerTcKeys)
      rowScale[buf * kIndexerTcKeys + tid] = nextScale;
  };

  // The pipeline, one call site each (the code is what the launch waits
  // for, above): tile t + 2's words into registers while tile t + 1's are
  // widened into the other buffer and tile t is multiplied. The first
  // tile's loads go out before the query is staged.
  const bool multiplies = warp < mTiles;
  uint32_t a[8][4];
  float f0 = 0.0f, f1 = 0.0f;
  for (int64_t tile = -2; tile < tiles; ++tile) {
    const int buf = int(tile & 1);
    if (tile == -1 && multiplies) {
      // This warp's q fragments, once (warps past the head tiles only
      // load), staged in the iteration before.
#pragma unroll
      for (int s = 0; s < 8; ++s)
        if (s < steps)
          loadMatrixX4(a[s], qs + (warp * 16 + (lane & 15)) * kIndexerTcStride +
                                 s * 16 + (lane >> 4) * 8);
      f0 = factor[warp * 16 + g];
      f1 = factor[warp * 16 + g + 8];
    }
    if (tile >= 0) {
      const int64_t k0 = tileKey(tile);
      if (multiplies) {
        const uint16_t *kt = ks + buf * kIndexerTcKeys * kIndexerTcStride;
        float acc[8][4] = {};
#pragma unroll
        for (int s = 0; s < 8; ++s) {
          if (s >= steps)
            break;
#pragma unroll
          for (int np = 0; np < 4; ++np) {
            uint32_t b[4];
            loadMatrixX4(b, kt +
                                (np * 16 + (lane & 7) + ((lane >> 4) << 3)) *
                                    kIndexerTcStride +
                                s * 16 + ((lane >> 3) & 1) * 8);
            mma16816<kType>(acc[2 * np], a[s], make_uint2(b[0], b[1]));
            mma16816<kType>(acc[2 * np + 1], a[s], make_uint2(b[2], b[3]));
          }
        }
        // ReLU, the head factors, and the sum over the warp's 16 heads.
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          float v0 =
              f0 * fmaxf(acc[nt][0], 0.0f) + f1 * fmaxf(acc[nt][2], 0.0f);
          float v1 =
              f0 * fmaxf(acc[nt][1], 0.0f) + f1 * fmaxf(acc[nt][3], 0.0f);
#pragma unroll
          for (int o = 4; o < 32; o <<= 1) {
            v0 += __shfl_xor_sync(0xffffffffu, v0, o);
            v1 += __shfl_xor_sync(0xffffffffu, v1, o);
          }
          if (g == 0)
            *reinterpret_cast<float2 *>(partial + warp * kIndexerTcKeys +
                                        nt * 8 + 2 * t) = make_float2(v0, v1);
        }
      }
      __syncthreads();
      // The warps' sums in order, the row scale and `scale`.
      if (tid < kIndexerTcKeys && k0 + tid < visible) {
        float sum = 0.0f;
        for (int w = 0; w < mTiles; ++w)
          sum += partial[w * kIndexerTcKeys + tid];
        out[k0 + tid] = scale * (rowScale[buf * kIndexerTcKeys + tid] * sum);
      }
    }
    if (tile >= -1 && tile + 1 < tiles)
      store(buf ^ 1);
    if (tile + 2 < tiles)
      load(tileKey(tile + 2));
    if (tile == -2)
      stageQuery();
    __syncthreads();
  }
}

} // namespace

/// scores[t, s] = scale * sum_h weights[t, h] * ReLU(bf16(q[t, h]) . key(seq_t,
/// s)), as daybreak_dsa_indexer_scores otherwise (bounds, zeros past them, a
/// row of zeros for a sequence outside [0, batch)), on the tensor cores
/// (see above): keys of width 16..128 (a multiple of 16), at most 128
/// heads, q 16-byte aligned. _e4m3: FP8 rows with one scale a row and no
/// tail; _bf16: bf16 rows.
extern "C" __global__ void __launch_bounds__(256)
    daybreak_dsa_indexer_tc_e4m3(const float *q, const float *weights,
                                 Cache keys, const int32_t *sequences,
                                 const int32_t *bounds, int64_t heads,
                                 float scale, QueryRope rope, float *scores) {
  indexerTc<kWeightE4M3>(q, weights, keys, sequences, bounds, heads, scale,
                         rope, scores);
}
extern "C" __global__ void __launch_bounds__(256)
    daybreak_dsa_indexer_tc_bf16(const float *q, const float *weights,
                                 Cache keys, const int32_t *sequences,
                                 const int32_t *bounds, int64_t heads,
                                 float scale, QueryRope rope, float *scores) {
  indexerTc<kWeightBF16>(q, weights, keys, sequences, bounds, heads, scale,
                         rope, scores);
}

namespace {

constexpr int kIndexerTokensWarps = 8; // a block's warps: 16 keys each a tile

/// daybreak_dsa_indexer_tc_tokens' body: the indexer of daybreak_dsa_indexer_tc
/// for a group of kTokens consecutive tokens, the keys as the mma's M so
/// that one load of a key serves every token of the group. kHeadTiles: n8
/// tiles of heads (8: up to 64 heads, 4 tokens a block; 16: up to 128, 2
/// tokens). Block 256 (8 warps), grid (G, ceil(tokens / kTokens)): block x
/// takes the 128-key tiles x, x + G, x + 2G, ... of its tokens' rows (as
/// daybreak_dsa_indexer_tc's).
///
/// The q . k sums run over a permutation of the dimension that both
/// operands follow: lane t's columns (2t, 2t + 1) and (2t + 8, 2t + 9) of
/// k-step s are dimensions d4 t + 4 s + (0, 1) and (2, 3), d4 = dim / 4, so
/// that a lane's A fragments of a key row are `steps` consecutive words of
/// it (one 4-byte load each: FP8 rows are dim + 4 bytes). q is staged once
/// into shared memory in fragment order ([token][head tile][k-step][lane],
/// 8 bytes each: conflict-free), rounded as daybreak_dsa_indexer_tc rounds
/// it. Warp w then owns keys k0 + 16 w .. + 15 of each 128-key tile: it
/// loads them straight into A fragments (the next tile's words in flight
/// while it multiplies), and for each token of the group sums its heads
/// from the accumulators (a lane's columns, then the quad). No block
/// barrier past the staging. Tokens of the group on another sequence take
/// a pass of their own (prefill chunks are one sequence: one pass).
template <int kType, int kHeadTiles>
__device__ __forceinline__ void
indexerTcTokens(const float *__restrict__ q, const float *__restrict__ weights,
                const Cache &keys, const int32_t *sequences,
                const int32_t *bounds, int64_t tokens, int64_t heads,
                float scale, const QueryRope &rope,
                float *__restrict__ scores) {
  beginDependent();
  constexpr int kTokens = 32 / kHeadTiles;
  constexpr int kHeads = 8 * kHeadTiles;
  constexpr int kWords = kType == kWeightE4M3 ? 8 : 16; // a row's, at most
  extern __shared__ __align__(16) uint8_t indexerTokensShared[];
  __shared__ int32_t seqOf[kTokens];
  __shared__ int64_t visibleOf[kTokens];
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int dim = int(keys.width), steps = dim / 16, d4 = dim / 4;
  const int64_t ropeHalf = rope.dim / 2;
  double2 *angles = reinterpret_cast<double2 *>(indexerTokensShared);
  uint2 *qf = reinterpret_cast<uint2 *>(indexerTokensShared +
                                        queryRopeBytes(rope, kTokens));
  float *factor =
      reinterpret_cast<float *>(qf + kTokens * kHeadTiles * steps * 32);

  const int64_t t0 = int64_t(blockIdx.y) * kTokens;
  const int64_t stride = gridDim.x;
  auto tileKey = [&](int64_t i) {
    return (int64_t(blockIdx.x) + i * stride) * 128;
  };
  if (tid < kTokens) {
    const int64_t token = t0 + tid;
    int32_t seq = -1;
    int64_t visible = 0;
    if (token < tokens) {
      seq = sequences ? sequences[token] : 0;
      visible = keys.maxSeqLen;
      if (bounds) {
        const int64_t bound = bounds[token];
        visible = bound < 0 ? 0 : bound < visible ? bound : visible;
      }
      if (seq < 0 || seq >= keys.batch) {
        seq = -1;
        visible = 0;
      }
    }
    seqOf[tid] = seq;
    visibleOf[tid] = visible;
  }
  if (rope.dim > 0) {
    queryRopeAngles(rope, t0, kTokens, tokens, angles);
    __syncthreads();
  }

  // q in fragment order: warp w rounds rows (token, head) w, w + 8, ...; a
  // lane 4 consecutive values (rotated first by the prologue), which lie in
  // one lane's span of one k-step. Eight rows' loads go out together.
  constexpr int kRows = kTokens * kHeads, kBatch = 8;
  static_assert(kRows % (kIndexerTokensWarps * kBatch) == 0);
  const int d = 4 * lane;
  for (int r0 = warp; r0 < kRows; r0 += kIndexerTokensWarps * kBatch) {
    float4 v[kBatch];
    float w[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int r = r0 + j * kIndexerTokensWarps, i = r / kHeads,
                h = r % kHeads;
      const int64_t token = t0 + i;
      const bool real = token < tokens && h < heads;
      v[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (real && d < dim)
        v[j] = *reinterpret_cast<const float4 *>(q + (token * heads + h) * dim +
                                                 d);
      w[j] = lane == 0 && real ? weights[token * heads + h] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int r = r0 + j * kIndexerTokensWarps, i = r / kHeads,
                h = r % kHeads;
      const int64_t token = t0 + i;
      if (rope.dim > 0 && token < tokens && h < heads && d < dim)
        v[j] = queryRopeQuad(rope, angles + i * ropeHalf,
                             q + (token * heads + h) * dim, d, v[j]);
      // As daybreak_dsa_indexer_tc: the head's largest |q| into f16's range.
      const float inverse =
          kType == kWeightE4M3 ? scaleHeadIntoF16(v[j]) : 1.0f;
      if (d < dim) {
        const int span = d / d4, step = (d % d4) / 4;
        qf[((i * kHeadTiles + h / 8) * steps + step) * 32 + (h % 8) * 4 +
           span] = make_uint2(roundX<kType>(v[j].x, v[j].y),
                              roundX<kType>(v[j].z, v[j].w));
      }
      if (lane == 0)
        factor[i * kHeads + h] = w[j] * inverse;
    }
  }
  __syncthreads();

  // Zeros in this block's tiles that no pass below reaches: a token's tiles
  // from the first past the keys visible to its sequence's pass (every
  // tile for a token on no sequence). The passes write the rest.
  for (int i = 0; i < kTokens; ++i) {
    if (t0 + i >= tokens)
      break;
    int64_t reached = 0;
    for (int j = 0; j < kTokens; ++j)
      if (seqOf[j] == seqOf[i] && seqOf[i] >= 0 && visibleOf[j] > reached)
        reached = visibleOf[j];
    float *row = scores + (t0 + i) * keys.maxSeqLen;
    for (int64_t k0 = tileKey(0); k0 < keys.maxSeqLen; k0 += stride * 128) {
      if (k0 < reached)
        continue;
      const int64_t end = k0 + 128 < keys.maxSeqLen ? k0 + 128 : keys.maxSeqLen;
      for (int64_t s = k0 + tid; s < end; s += blockDim.x)
        row[s] = 0.0f;
    }
  }

  // A lane's words of its two rows (g and g + 8 of the warp's 16 keys) and
  // their scales; zeros past the pass's visible keys.
  constexpr int kBytes = kType == kWeightE4M3 ? 1 : 2;
  const int rowWords = steps * kBytes; // of a lane's span
  const bool consecutive =
      (keys.ringRows ? keys.ringRows : keys.pageSize) % 16 == 0;
  uint32_t raw[2][kWords];
  float rawScale[2];
  auto load = [&](int32_t seq, int64_t visible, int64_t k0) {
    const int64_t first = k0 + 16 * warp;
    const uint8_t *tile =
        consecutive && first < visible ? cacheRow(keys, seq, first) : nullptr;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t key = first + g + 8 * half;
      const uint8_t *row = key >= visible ? nullptr
                           : tile
                               ? tile + int64_t(g + 8 * half) * keys.bytesPerRow
                               : cacheRow(keys, seq, key);
      const uint32_t *words =
          row ? reinterpret_cast<const uint32_t *>(row) + t * rowWords
              : nullptr;
#pragma unroll
      for (int w = 0; w < kWords; ++w)
        raw[half][w] = words && w < rowWords ? __ldg(words + w) : 0u;
      rawScale[half] = !row ? 0.0f
                       : kType == kWeightE4M3
                           ? __ldg(reinterpret_cast<const float *>(row + dim))
                           : 1.0f;
    }
  };

  uint32_t done = 0;
  const uint32_t all = (1u << kTokens) - 1;
  for (int i = 0; i < kTokens; ++i)
    if (seqOf[i] < 0)
      done |= 1u << i;

  while (done != all) {
    const int32_t seq = seqOf[__ffs(~done & all) - 1];
    uint32_t active = 0;
    int64_t visible = 0;
    for (int i = 0; i < kTokens; ++i)
      if (!(done >> i & 1) && seqOf[i] == seq) {
        active |= 1u << i;
        visible = visibleOf[i] > visible ? visibleOf[i] : visible;
      }
    const int64_t visibleTiles = (visible + 127) / 128;
    const int64_t tiles =
        int64_t(blockIdx.x) < visibleTiles
            ? (visibleTiles - blockIdx.x + stride - 1) / stride
            : 0;
    if (tiles > 0)
      load(seq, visible, tileKey(0));
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t k0 = tileKey(tile);
      // This tile's A fragments; the next tile's words then load.
      uint32_t a[8][4];
#pragma unroll
      for (int s = 0; s < 8; ++s) {
        if (s >= steps)
          break;
        if (kType == kWeightE4M3) {
          e4m3x4ToHalf2(raw[0][s], a[s][0], a[s][2]);
          e4m3x4ToHalf2(raw[1][s], a[s][1], a[s][3]);
        } else {
          a[s][0] = raw[0][2 * s];
          a[s][2] = raw[0][2 * s + 1];
          a[s][1] = raw[1][2 * s];
          a[s][3] = raw[1][2 * s + 1];
        }
      }
      const int own = t & 1; // lanes t = 0, 1 write rows g, g + 8
      const float rowScale = rawScale[own];
      if (tile + 1 < tiles)
        load(seq, visible, tileKey(tile + 1));
      const int64_t key = k0 + 16 * warp + g + 8 * own;
      for (int i = 0; i < kTokens; ++i) {
        if (!(active >> i & 1))
          continue;
        float acc[kHeadTiles][4] = {};
        const uint2 *b = qf + i * kHeadTiles * steps * 32 + lane;
#pragma unroll
        for (int s = 0; s < 8; ++s) {
          if (s >= steps)
            break;
#pragma unroll
          for (int nt = 0; nt < kHeadTiles; ++nt)
            mma16816<kType>(acc[nt], a[s], b[(nt * steps + s) * 32]);
        }
        // ReLU, the head factors, the sum over the lane's heads, then the
        // quad's.
        const float *f = factor + i * kHeads + 2 * t;
        float v0 = 0.0f, v1 = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kHeadTiles; ++nt) {
          const float2 fh = *reinterpret_cast<const float2 *>(f + 8 * nt);
          v0 += fh.x * fmaxf(acc[nt][0], 0.0f) + fh.y * fmaxf(acc[nt][1], 0.0f);
          v1 += fh.x * fmaxf(acc[nt][2], 0.0f) + fh.y * fmaxf(acc[nt][3], 0.0f);
        }
#pragma unroll
        for (int o = 1; o < 4; o <<= 1) {
          v0 += __shfl_xor_sync(0xffffffffu, v0, o);
          v1 += __shfl_xor_sync(0xffffffffu, v1, o);
        }
        if (t < 2 && key < keys.maxSeqLen)
          scores[(t0 + i) * keys.maxSeqLen + key] =
              key < visibleOf[i] ? scale * (rowScale * (own ? v1 : v0)) : 0.0f;
      }
    }
    done |= active;
  }
}

} // namespace

/// daybreak_dsa_indexer_tc's scores for groups of tokens sharing each key
/// load (see indexerTcTokens): _e4m3 / _bf16 rows as there, up to 64 heads
/// (_64: 4 tokens a block) or 128 (_128: 2).
#define DAYBREAK_INDEXER_TOKENS(name, type, tiles)                             \
  extern "C" __global__ void __launch_bounds__(kIndexerTokensWarps * 32)       \
      name(const float *q, const float *weights, Cache keys,                   \
           const int32_t *sequences, const int32_t *bounds, int64_t tokens,    \
           int64_t heads, float scale, QueryRope rope, float *scores) {        \
    indexerTcTokens<type, tiles>(q, weights, keys, sequences, bounds, tokens,  \
                                 heads, scale, rope, scores);                  \
  }
DAYBREAK_INDEXER_TOKENS(daybreak_dsa_indexer_tc_tokens_e4m3_64, kWeightE4M3, 8)
DAYBREAK_INDEXER_TOKENS(daybreak_dsa_indexer_tc_tokens_e4m3_128, kWeightE4M3,
                        16)
DAYBREAK_INDEXER_TOKENS(daybreak_dsa_indexer_tc_tokens_bf16_64, kWeightBF16, 8)
DAYBREAK_INDEXER_TOKENS(daybreak_dsa_indexer_tc_tokens_bf16_128, kWeightBF16,
                        16)
#undef DAYBREAK_INDEXER_TOKENS

namespace {

/// (descending score, ascending index) as one ascending 64-bit key; NaN is
/// below every number, -0 equals +0.
__device__ __forceinline__ uint64_t selectKey(float v, int64_t index) {
  if (v != v)
    v = -__int_as_float(0x7F800000);
  if (v == 0.0f)
    v = 0.0f;
  uint32_t bits = __float_as_uint(v);
  uint32_t ordered = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
  return (uint64_t(~ordered) << 32) | uint64_t(uint32_t(index));
}

/// The sum of `value` over lanes 0 .. lane of the warp (all 32 take part).
__device__ __forceinline__ uint32_t warpInclusiveSum(uint32_t value, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    uint32_t v = __shfl_up_sync(0xffffffffu, value, o);
    if (lane >= o)
      value += v;
  }
  return value;
}

} // namespace

/// Per query row: the min(topK, bound) best of scores[t, 0 : bound] (bound
/// = bounds[t] clamped to [0, keys]; ties to the lower index) in ascending
/// key order, then -1. grid (tokens), block 1024 (32 warps). A row whose
/// every key is picked lists 0 .. bound - 1. Otherwise keys are
/// selectKey's 64-bit (score, index) values, unique per row, so "the k
/// best" is "the keys up to the k-th smallest": radix select finds that
/// key (a pass over the row per byte of the key, each counting the keys
/// that share the digits found so far into 256 bins, which one warp
/// scans; the passes stop once every key with the digits found is
/// wanted, after two or three bytes for distinct scores, so the index bytes are
/// only read for ties). Then the keys up to it are written in key order:
/// each warp counts them over its contiguous share of the row, a scan of
/// the 32 counts gives each warp its first slot, and a second sweep writes
/// them, a ballot ordering each 32. Deterministic, no sort: the consumers
/// take the selection as a set (lm.dsa_index_select). At T = 1 a decode
/// step waits on this block alone, so its chain of passes is the time.
extern "C" __global__ void daybreak_dsa_index_select(const float *scores,
                                                     const int32_t *bounds,
                                                     int64_t tokens,
                                                     int64_t keys, int64_t topK,
                                                     int32_t *indices) {
  beginDependent();
  __shared__ uint32_t bins[256];
  __shared__ uint32_t warpFirst[32];
  __shared__ uint64_t prefix, prefixMask;
  __shared__ int64_t rank;
  __shared__ bool settled;
  int64_t t = blockIdx.x;
  const float *row = scores + t * keys;
  int64_t bound = bounds[t];
  bound = bound < 0 ? 0 : (bound > keys ? keys : bound);
  int64_t picked = topK < bound ? topK : bound;
  int32_t *out = indices + t * topK;
  for (int64_t i = picked + threadIdx.x; i < topK; i += blockDim.x)
    out[i] = -1;
  if (picked == bound) {
    for (int64_t i = threadIdx.x; i < bound; i += blockDim.x)
      out[i] = int32_t(i);
    return;
  }
  if (threadIdx.x == 0) {
    prefix = 0;
    prefixMask = 0;
    rank = picked; // the wanted key is the rank-th smallest with the prefix
    settled = false;
  }
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256; d += blockDim.x)
      bins[d] = 0;
    __syncthreads();
    uint64_t want = prefix, mask = prefixMask;
    for (int64_t i = threadIdx.x; i < bound; i += blockDim.x) {
      uint64_t key = selectKey(row[i], i);
      if ((key & mask) == want)
        atomicAdd(&bins[(key >> shift) & 255], 1u);
    }
    __syncthreads();
    // The digit d whose bins, counted from 0, first reach the rank: a lane
    // sums 8 bins, the warp scans the sums, and the lane whose range holds
    // the rank walks its own 8.
    if (threadIdx.x < 32) {
      const int lane = threadIdx.x;
      uint32_t local[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        local[j] = bins[lane * 8 + j];
        sum += local[j];
      }
      const uint32_t through = warpInclusiveSum(sum, lane);
      const int64_t r = rank, before = through - sum;
      if (before < r && r <= int64_t(through)) {
        int64_t below = before;
        int j = 0;
        while (below + local[j] < r)
          below += local[j++];
        rank = r - below;
        prefix |= uint64_t(lane * 8 + j) << shift;
        prefixMask |= uint64_t(255) << shift;
        // Every key with these digits is wanted: the lower bytes need not
        // be told apart.
        settled = local[j] == uint32_t(r - below);
      }
    }
    __syncthreads();
    if (settled)
      break;
  }
  // The largest wanted key: with every byte found, the k-th smallest; once
  // settled, the largest with the prefix. Exactly `picked` keys are at most
  // it.
  const uint64_t threshold = prefix | ~prefixMask;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5,
            warps = blockDim.x >> 5;
  const int64_t share = ((bound + warps - 1) / warps + 31) / 32 * 32;
  const int64_t begin = warp * share,
                end = begin + share < bound ? begin + share : bound;
  uint32_t count = 0;
  for (int64_t base = begin; base < end; base += 32) {
    const int64_t i = base + lane;
    const bool wanted = i < end && selectKey(row[i], i) <= threshold;
    count += __popc(__ballot_sync(0xffffffffu, wanted));
  }
  if (lane == 0)
    warpFirst[warp] = count;
  __syncthreads();
  if (warp == 0) {
    const uint32_t own = lane < warps ? warpFirst[lane] : 0;
    const uint32_t through = warpInclusiveSum(own, lane);
    if (lane < warps)
      warpFirst[lane] = through - own;
  }
  __syncthreads();
  uint32_t slot = warpFirst[warp];
  for (int64_t base = begin; base < end; base += 32) {
    const int64_t i = base + lane;
    const bool wanted = i < end && selectKey(row[i], i) <= threshold;
    const uint32_t ballot = __ballot_sync(0xffffffffu, wanted);
    if (wanted)
      out[slot + __popc(ballot & ((1u << lane) - 1))] = int32_t(i);
    slot += __popc(ballot);
  }
}

/// A split attention partial for one (token, head): max, denominator, row
/// count, a float of padding, then the unnormalised accumulators, 16 bytes
/// in (kSparsePartialHeaderFloats in CudaKernels.h): the tensor-core
/// kernels store them in aligned pairs.
constexpr int kSparseHeaderFloats = 4;

/// One past the last valid row (inside [0, maxSeqLen)) of a token's
/// selection, 0 when it has none. A block-wide reduction through *slot (an
/// int of shared memory free until every thread has returned): every thread
/// of the block calls it.
__device__ int64_t selectionEnd(const int32_t *chosen, int64_t topK,
                                int64_t maxSeqLen, int *slot) {
  if (threadIdx.x == 0)
    *slot = -1;
  __syncthreads();
  // A thread's slots 8 at a time, their loads issued together: one L2
  // round trip for top-2048 over 256 or 384 threads, not one a slot.
  constexpr int kBatch = 8;
  int last = -1;
  for (int64_t i0 = threadIdx.x; i0 < topK; i0 += kBatch * blockDim.x) {
    int32_t pos[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int64_t i = i0 + int64_t(b) * blockDim.x;
      pos[b] = i < topK ? chosen[i] : -1;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      if (pos[b] >= 0 && pos[b] < maxSeqLen)
        last = int(i0 + int64_t(b) * blockDim.x);
  }
  for (int d = 16; d > 0; d >>= 1)
    last = max(last, __shfl_xor_sync(0xffffffffu, last, d));
  if ((threadIdx.x & 31) == 0 && last >= 0)
    atomicMax(slot, last);
  __syncthreads();
  return int64_t(*slot) + 1;
}

/// Split blockIdx.z of `splits`: rows [r0, r1) of a selection whose rows
/// from `end` on are padding. [0, end) goes out in equal runs of whole
/// tiles of `tile` rows, so that a short selection (context under top-k)
/// keeps every split busy instead of leaving the last ones only padding.
__device__ __forceinline__ void
splitRows(int64_t end, int32_t splits, int64_t tile, int64_t &r0, int64_t &r1) {
  int64_t per = (end + splits - 1) / splits;
  per = (per + tile - 1) / tile * tile;
  r0 = min(int64_t(blockIdx.z) * per, end);
  r1 = min(r0 + per, end);
}

namespace {

/// daybreak_sparse_attention's body for kv.width == kWidth and valueDim ==
/// kValueDim (0: at run time).
template <int kWidth, int kValueDim, bool kSplit>
__device__ __forceinline__ void
sparseAttention(const float *q, const Cache &kv, const int32_t *indices,
                int64_t topK, const int32_t *sequences, int64_t heads,
                double scale, int64_t valueDimArg, const float *sinks,
                float *out, int32_t headGroup, int32_t chunk, int32_t splits,
                float *partial) {
  constexpr int kAcc = 16;
  extern __shared__ float smem[];
  const int64_t width = kWidth > 0 ? int64_t(kWidth) : kv.width;
  const int64_t valueDim = kValueDim > 0 ? int64_t(kValueDim) : valueDimArg;
  float *qs = smem;                              // [headGroup, width]
  float *rows = qs + headGroup * width;          // [chunk, width]
  float *probs = rows + chunk * width;           // [headGroup, chunk]
  float *correction = probs + headGroup * chunk; // [headGroup]
  int64_t t = blockIdx.x;
  int64_t h0 = int64_t(blockIdx.y) * headGroup;
  int hn = int(heads - h0 < headGroup ? heads - h0 : headGroup);
  int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5,
      warps = blockDim.x >> 5;
  int64_t seq = sequences ? sequences[t] : 0;
  const int32_t *chosen = indices + t * topK;
  float *o = out + (t * heads + h0) * valueDim;
  int64_t outCount = int64_t(hn) * valueDim;
  // kSplit (daybreak_sparse_attention_split): block z takes rows [r0, r1)
  // of splitRows
  // and leaves, per head, its running max, denominator, row count and
  // unnormalised accumulators at partial + partialAt(h) for
  // daybreak_sparse_attention_combine; the sinks enter there. A template
  // parameter so that the unsplit kernels carry none of it: its registers
  // would cost them their second block per SM (128 -> 157 registers), and
  // they serve the large grids.
  auto partialAt = [&](int64_t h) {
    return ((t * heads + h0 + h) * splits + blockIdx.z) *
           (valueDim + kSparseHeaderFloats);
  };
  int64_t r0 = 0, r1 = topK;
  if (seq < 0 || seq >= kv.batch) {
    if (kSplit) {
      if (tid < hn)
        partial[partialAt(tid) + 2] = 0.0f; // no rows
    } else {
      for (int64_t e = tid; e < outCount; e += blockDim.x)
        o[e] = 0.0f;
    }
    return;
  }
  // (correction's first word is free until the first chunk's barrier.)
  if (kSplit)
    splitRows(selectionEnd(chosen, topK, kv.maxSeqLen,
                           reinterpret_cast<int *>(correction)),
              splits, chunk, r0, r1);
  for (int64_t e = tid; e < int64_t(hn) * width; e += blockDim.x)
    qs[e] = q[(t * heads + h0) * width + e];
  // Per head (threads h < hn): running max and denominator.
  float runMax = -__int_as_float(0x7F800000), runSum = 0.0f;
  if (tid < hn && sinks && !kSplit) {
    runMax = sinks[h0 + tid];
    runSum = 1.0f;
  }
  float acc[kAcc];
#pragma unroll
  for (int j = 0; j < kAcc; ++j)
    acc[j] = 0.0f;
  int64_t valid = 0;
  float fscale = float(scale);
  for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
    int cn = int(r1 - c0 < chunk ? r1 - c0 : chunk);
    __syncthreads(); // previous chunk's rows and probs are consumed
    // A warp a row: the rows' index, page-table and data loads are in
    // flight together rather than one row's after another's.
    for (int c = warp; c < cn; c += warps) {
      int64_t pos = chosen[c0 + c];
      if (pos >= 0 && pos < kv.maxSeqLen) {
        readRow<kWidth>(kv, seq, pos, rows + c * width, warp * 32, 32);
      } else {
        // A masked row weighs 0 in the sums below, but 0 times what shared
        // memory held before (a NaN pattern) is NaN: zeros instead.
        for (int64_t d = lane; d < width; d += 32)
          rows[c * width + d] = 0.0f;
      }
    }
    __syncthreads();
    // logits: one warp per (head, row) pair.
    for (int pair = warp; pair < hn * cn; pair += warps) {
      int h = pair / cn, c = pair % cn;
      int64_t pos = chosen[c0 + c];
      float dot = 0.0f;
      if (pos >= 0 && pos < kv.maxSeqLen) {
        for (int64_t d = lane; d < width; d += 32)
          dot = fmaf(qs[h * width + d], rows[c * width + d], dot);
        dot = warpSum(dot) * fscale;
      } else {
        dot = -__int_as_float(0x7F800000); // masked
      }
      if (lane == 0)
        probs[h * chunk + c] = dot;
    }
    __syncthreads();
    if (tid < hn) {
      float m = runMax;
      for (int c = 0; c < cn; ++c)
        m = fmaxf(m, probs[tid * chunk + c]);
      float corr = m == runMax ? 1.0f : expf(runMax - m);
      float sum = runSum * corr;
      for (int c = 0; c < cn; ++c) {
        float l = probs[tid * chunk + c];
        float p = l == -__int_as_float(0x7F800000) ? 0.0f : expf(l - m);
        probs[tid * chunk + c] = p;
        sum += p;
      }
      runMax = m;
      runSum = sum;
      correction[tid] = corr;
    }
    for (int c = 0; c < cn; ++c) {
      int64_t pos = chosen[c0 + c];
      valid += pos >= 0 && pos < kv.maxSeqLen;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kAcc; ++j) {
      int64_t e = tid + int64_t(j) * blockDim.x;
      if (e >= outCount)
        break;
      int h = int(e / valueDim);
      int64_t d = e % valueDim;
      float a = acc[j] * correction[h];
      for (int c = 0; c < cn; ++c)
        a = fmaf(probs[h * chunk + c], rows[c * width + d], a);
      acc[j] = a;
    }
  }
  if (kSplit) {
    if (tid < hn) {
      float *head = partial + partialAt(tid);
      head[0] = runMax;
      head[1] = runSum;
      head[2] = float(valid);
    }
#pragma unroll
    for (int j = 0; j < kAcc; ++j) {
      int64_t e = tid + int64_t(j) * blockDim.x;
      if (e >= outCount)
        break;
      partial[partialAt(e / valueDim) + kSparseHeaderFloats + e % valueDim] =
          acc[j];
    }
    return;
  }
  __syncthreads();
  if (tid < hn)
    correction[tid] = valid ? 1.0f / runSum : 0.0f;
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kAcc; ++j) {
    int64_t e = tid + int64_t(j) * blockDim.x;
    if (e >= outCount)
      break;
    o[e] = valid ? acc[j] * correction[e / valueDim] : 0.0f;
  }
}

} // namespace

/// Sparse MLA (absorbed), see cpu::sparseAttention. grid (tokens,
/// ceil(heads / headGroup)), block 256; each block runs an online softmax
/// for headGroup heads over the token's chosen rows, `chunk` rows at a time
/// decoded once into shared memory. Dynamic shared memory: (headGroup *
/// width + chunk * width + headGroup * chunk + headGroup) floats. Each
/// thread owns output elements e = tid + 256 j of the [headGroup, valueDim]
/// block (headGroup * valueDim <= 256 * 16). Indices outside [0, maxSeqLen)
/// are skipped; a sequence outside [0, batch) or no index gives zeros.
extern "C" __global__ void
daybreak_sparse_attention(const float *q, Cache kv, const int32_t *indices,
                          int64_t topK, const int32_t *sequences,
                          int64_t tokens, int64_t heads, double scale,
                          int64_t valueDim, const float *sinks, float *out,
                          int32_t headGroup, int32_t chunk) {
  beginDependent();
  sparseAttention<0, 0, false>(q, kv, indices, topK, sequences, heads, scale,
                               valueDim, sinks, out, headGroup, chunk, 1,
                               nullptr);
}

/// daybreak_sparse_attention for kv.width == kWidth, valueDim == kValueDim.
template <int kWidth, int kValueDim>
__global__ void
daybreak_sparse_attention_t(const float *q, Cache kv, const int32_t *indices,
                            int64_t topK, const int32_t *sequences,
                            int64_t tokens, int64_t heads, double scale,
                            int64_t valueDim, const float *sinks, float *out,
                            int32_t headGroup, int32_t chunk) {
  beginDependent();
  sparseAttention<kWidth, kValueDim, false>(q, kv, indices, topK, sequences,
                                            heads, scale, valueDim, sinks, out,
                                            headGroup, chunk, 1, nullptr);
}

/// daybreak_sparse_attention split over the selected rows as well (flash
/// decoding), for grids too small to fill the GPU: grid (tokens, head
/// groups, splits); block z takes its rows of splitRows (chunks) and leaves
/// per head its running max, denominator, row count and
/// unnormalised accumulators in `partial` [tokens, heads, splits,
/// valueDim + 4] for daybreak_sparse_attention_combine, which adds the
/// sinks.
extern "C" __global__ void daybreak_sparse_attention_split(
    const float *q, Cache kv, const int32_t *indices, int64_t topK,
    const int32_t *sequences, int64_t tokens, int64_t heads, double scale,
    int64_t valueDim, float *partial, int32_t headGroup, int32_t chunk,
    int32_t splits) {
  beginDependent();
  sparseAttention<0, 0, true>(q, kv, indices, topK, sequences, heads, scale,
                              valueDim, nullptr, nullptr, headGroup, chunk,
                              splits, partial);
}

/// kAttentionMaxSplits in CudaKernels.h.
constexpr int kSparseCombineMaxSplits = 64;

/// Merges daybreak_sparse_attention's per-split partials: per (token, head),
/// out = sum_s acc_s e^(m_s - M) / (sum_s l_s e^(m_s - M) + e^(sink - M)),
/// M the largest of the m_s and the sink; zeros when no split saw a row.
/// grid (tokens, heads), block 128, splits at most kSparseCombineMaxSplits.
///
/// A decode step's grid is a few hundred blocks of one (token, head) each,
/// so the time is the chain of dependent loads, not bytes: the splits'
/// maxima, denominators and row counts are loaded at once (a thread a
/// split), thread 0 walks them in shared memory in split order, and the
/// value loop then takes a thread's values four at a time, four splits'
/// loads of all four issued together: a value at a time left 16 splits x 4
/// values as 16 dependent round trips to L2 (15.8 us at T = 1 on the H100
/// for DeepSeek-V3.2's 4.2 MB of partials). The arithmetic and its order are
/// the sequential loop's.
extern "C" __global__ void
daybreak_sparse_attention_combine(const float *partial, int64_t heads,
                                  int32_t splits, int64_t valueDim,
                                  const float *sinks, float *out) {
  beginDependent();
  __shared__ float maxima[kSparseCombineMaxSplits],
      weights[kSparseCombineMaxSplits], counts[kSparseCombineMaxSplits];
  __shared__ int32_t used[kSparseCombineMaxSplits]; // the splits with rows
  __shared__ float total;
  __shared__ int32_t usedCount;
  int64_t t = blockIdx.x, h = blockIdx.y;
  int64_t stride = valueDim + kSparseHeaderFloats;
  const float *p = partial + (t * heads + h) * splits * stride;
  float *o = out + (t * heads + h) * valueDim;
  for (int s = threadIdx.x; s < splits; s += blockDim.x) {
    maxima[s] = p[s * stride];
    weights[s] = p[s * stride + 1]; // the denominator, until thread 0
    counts[s] = p[s * stride + 2];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = sinks ? sinks[h] : -__int_as_float(0x7F800000), valid = 0.0f;
    for (int s = 0; s < splits; ++s)
      if (counts[s] > 0.0f) {
        m = fmaxf(m, maxima[s]);
        valid += counts[s];
      }
    float sum = sinks ? expf(sinks[h] - m) : 0.0f;
    int32_t n = 0;
    for (int s = 0; s < splits; ++s) {
      float w = counts[s] > 0.0f ? expf(maxima[s] - m) : 0.0f;
      if (counts[s] > 0.0f) {
        sum += weights[s] * w;
        used[n++] = s;
      }
      weights[s] = w;
    }
    total = sum;
    usedCount = valid != 0.0f ? n : 0;
  }
  __syncthreads();
  if (usedCount == 0) {
    for (int64_t d = threadIdx.x; d < valueDim; d += blockDim.x)
      o[d] = 0.0f;
    return;
  }
  constexpr int kValues = 4; // all of a thread's at 512 values, 128 threads
  const int64_t step = blockDim.x;
  for (int64_t d0 = threadIdx.x; d0 < valueDim; d0 += kValues * step) {
    float a[kValues];
#pragma unroll
    for (int k = 0; k < kValues; ++k)
      a[k] = 0.0f;
      // Only the splits that saw rows (an empty split's values may hold
      // anything), in split order, so that no load waits on a branch.
#pragma unroll 4
    for (int u = 0; u < usedCount; ++u) {
      const int s = used[u];
      const float *values = p + s * stride + kSparseHeaderFloats;
      const float w = weights[s];
#pragma unroll
      for (int k = 0; k < kValues; ++k) {
        // Past the row the last value is loaded and its sum never stored.
        const int64_t d = d0 + k * step;
        a[k] = fmaf(values[d < valueDim ? d : valueDim - 1], w, a[k]);
      }
    }
#pragma unroll
    for (int k = 0; k < kValues; ++k)
      if (d0 + k * step < valueDim)
        o[d0 + k * step] = a[k] / total;
  }
}

/// grid (ceil(rows x cols / 256)), block 256: one thread a value, so a
/// slice one column wide (gpt-oss's de-interleaved gate and up, rows x 1)
/// fills the GPU as a wide one does. src and dst must not overlap.
extern "C" __global__ void
daybreak_copy_columns(const float *src, int64_t srcStride, int64_t srcOffset,
                      float *dst, int64_t dstStride, int64_t dstOffset,
                      int64_t rows, int64_t cols) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols)
    return;
  int64_t r = i / cols, c = i - r * cols;
  dst[r * dstStride + dstOffset + c] = src[r * srcStride + srcOffset + c];
}

/// bounds[t] = positions[t] + 1. grid (ceil(tokens/256)), block 256.
extern "C" __global__ void daybreak_causal_bounds(const int32_t *positions,
                                                  int64_t tokens,
                                                  int32_t *bounds) {
  beginDependent();
  int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < tokens)
    bounds[t] = positions[t] + 1;
}

/// Expert parallelism's renumbering (cpu's local_experts): ids in [first,
/// first + count) become id - first, every other id -1 (an empty slot).
/// grid (ceil(n/256)), block 256.
extern "C" __global__ void daybreak_local_experts(const int32_t *ids, int64_t n,
                                                  int64_t first, int64_t count,
                                                  int32_t *out) {
  beginDependent();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = ids[i] >= first && ids[i] < first + count ? int32_t(ids[i] - first)
                                                       : -1;
}

//===----------------------------------------------------------------------===//
// mHC residual streams: mhc_pre, mhc_post and mhc_post_pre
//===----------------------------------------------------------------------===//
//
// cpu::mhcPre, cpu::mhcPost and cpu::mhcPostPre (CpuResidual.cpp) hold the
// semantics: a token's n <= kMhcMaxStreams residual streams X [n, D],
// flattened to nD values; (2 + n) n mixing logits m = rms(X) fn X a token.
//
// mhc_pre runs in two kernels. daybreak_mhc_logits takes a tile of
// kMhcTokens tokens and a split of the nD columns; it stages the tile's
// streams in shared memory a chunk of kMhcChunk columns at a time and
// multiplies them by fn's rows, read from global memory once a tile (a warp
// owns every kMhcWarps-th row, a lane every 32nd column, and keeps its rows'
// products for all the tile's tokens in registers; it loads a batch of
// columns of all its rows before the products, so a batch waits for one
// round trip to L2). fp32 products and sums, one warp tree a row. It
// writes the rows' partial sums and the tile's sums of squares to the
// scratch, [T][(2 + n) n + 1][splits], splits a power of two up to 32:
// splitting the columns gives a decode step's few tokens the GPU.
// daybreak_mhc_pre adds the splits (a tree over lanes, in double) and
// finishes each token as the CPU kernel does, in double and in its order:
// the RMS factor, the pre and post gates, comb's row softmax and Sinkhorn
// rounds (a warp a token; lane a owns line a of the n x n matrix, kept in
// shared memory, sums it in the CPU's order and scales it by the sum's
// reciprocal), then the sublayer input sum_j pre_j X_j. Its grid also splits
// the D columns of the input, each block finding the pre gates itself, so a few
// tokens still fill the GPU; the blocks of the first column slice write post
// and comb.
//
// With the sublayer's RMSNorm fused (a norm weight), daybreak_mhc_pre_norm
// runs the same code with one column slice a block: a block's threads
// write all D fp32 inputs of each of its tokens while adding the squares
// of the stored values (in double, a warp tree, then the warps in order),
// then read their own writes back (from L2) and scale them by the norm
// factor and the weight, as cpu::mhcPre: no rms_norm pass over [T, D].
//
// mhc_post_pre (a sublayer's write-back and the next collapse) replaces
// mhc_post and the logits by daybreak_mhc_post_logits: the logits kernel
// whose staging computes the new streams X'_j = post_j y + sum_i comb[i, j]
// X_i (in double, as daybreak_mhc_post) instead of loading them. Its unit is
// a stream j of a chunk of kMhcChunk columns of D (unit c n + j for chunk
// c): thread i keeps column d = c kMhcChunk + i of every stream (copied
// asynchronously to its own shared-memory column while the previous
// unit's products run) and of y (registers) for the tile's tokens through
// the n units of the chunk, writes X'_j[d] to the result, adds its square
// and stages it for fn's column j D + d. Splits take runs of units, so the
// partials keep mhc_pre's layout and daybreak_mhc_pre(_norm) finishes on
// the new streams unchanged. Fused for n <= kMhcFusedStreams (the shared
// memory of four streams' columns) and kMhcTokens nD < 2^31 (its 32-bit
// offsets); other launches run mhc_post and mhc_pre
// (CudaKernels::mhcPostPre).
//
// Traffic a token, in values of 4 bytes: mhc_post reads (n + 1) D + n + n^2
// and writes nD (memory-bound); the logits read nD and fn's (2 + n) n x nD
// once a tile (from L2 but for the first tile), and write (2 + n) n + 1
// floats a split; daybreak_mhc_pre reads the partials and the nD values
// again (from L2 while they stay there) and writes D + n + n^2; a separate
// rms_norm reads D and writes D. daybreak_mhc_post_logits reads (n + 1) D
// and writes nD: the logits' nD read is gone; the fused norm reads its D
// inputs back from L2 and rewrites them in place (the lines merge there):
// the rms_norm's D read and D write leave HBM. At n = 4, counting
// daybreak_mhc_pre's re-read: 14D read and 6D written separately (post,
// logits, pre, rms_norm), 9D and 5D fused. The logits do (2 + n) n / 4
// FMAs a byte of streams: 6 at n = 4, about the H200's balance (~7 fp32
// FMAs a byte of HBM); 20 at n = 8, compute-bound.
//
//===----------------------------------------------------------------------===//

namespace {

/// As cpu::kMhcMaxStreams (kMhcMaxStreams in CudaKernels.h).
constexpr int kMhcMaxStreams = 8;
constexpr int kMhcMaxMixes = (2 + kMhcMaxStreams) * kMhcMaxStreams;
/// Streams daybreak_mhc_post_logits takes (kMhcFusedStreams in
/// CudaKernels.h): their columns of a tile, kept in registers.
constexpr int kMhcFusedStreams = 4;
/// Tokens a daybreak_mhc_logits tile and a daybreak_mhc_pre block (a warp
/// each); columns a logits chunk (a thread each); input columns a
/// daybreak_mhc_pre block writes (four a thread): kMhcTileTokens,
/// kMhcChunkColumns and kMhcSliceColumns in CudaKernels.h.
constexpr int kMhcTokens = 8;
constexpr int kMhcChunk = 256;
constexpr int kMhcWarps = kMhcChunk / 32;
constexpr int kMhcSlice = 4 * 32 * kMhcTokens;

__device__ __forceinline__ double mhcSigmoid(double x) {
  return 1.0 / (1.0 + exp(-x)); // as CpuResidual.cpp
}

/// The sum over each aligned group of `width` lanes (a power of two).
__device__ __forceinline__ double groupSum(double v, int width) {
  for (int o = width / 2; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// The logits kernels' products of one staged chunk: `tile` holds the
/// tile's values of fn's columns k0 + c for c < kMhcChunk, those below
/// `end` real (the others zeros); warp w adds rows w + kMhcWarps r of fn
/// times them to acc[r], loading `Cols` columns of its rows a lane at once.
template <int Rows, int Cols>
__device__ __forceinline__ void
mhcProducts(const float4 (&tile)[kMhcTokens / 4][kMhcChunk],
            const float *__restrict__ fn, int64_t flat, int64_t mixes,
            int64_t k0, int64_t end, float (&acc)[Rows][kMhcTokens]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int j0 = 0; j0 < kMhcChunk / 32; j0 += Cols) {
    float w[Cols][Rows];
#pragma unroll
    for (int j = 0; j < Cols; ++j) {
      int64_t k = k0 + lane + 32 * (j0 + j);
#pragma unroll
      for (int r = 0; r < Rows; ++r) {
        int64_t m = warp + kMhcWarps * r;
        w[j][r] = m < mixes && k < end ? __ldg(fn + m * flat + k) : 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < Cols; ++j) {
      float x[kMhcTokens];
#pragma unroll
      for (int q = 0; q < kMhcTokens / 4; ++q) {
        float4 v = tile[q][lane + 32 * (j0 + j)];
        x[4 * q] = v.x;
        x[4 * q + 1] = v.y;
        x[4 * q + 2] = v.z;
        x[4 * q + 3] = v.w;
      }
#pragma unroll
      for (int r = 0; r < Rows; ++r)
#pragma unroll
        for (int t = 0; t < kMhcTokens; ++t)
          acc[r][t] = fmaf(w[j][r], x[t], acc[r][t]);
    }
  }
}

/// The logits kernels' end: each row's sum (a warp tree) and the tile's
/// sums of squares (the warps' in order) to split blockIdx.y of the
/// partials [T][mixes + 1][splits].
template <int Rows>
__device__ __forceinline__ void
mhcStorePartials(float (&acc)[Rows][kMhcTokens], float (&squared)[kMhcTokens],
                 float (&squares)[kMhcWarps][kMhcTokens], int64_t tokens,
                 int64_t mixes, float *__restrict__ partials) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t0 = int64_t(blockIdx.x) * kMhcTokens;
#pragma unroll
  for (int t = 0; t < kMhcTokens; ++t) {
    float s = warpSum(squared[t]);
    if (lane == 0)
      squares[warp][t] = s;
  }
  const int64_t stride = mixes + 1, splits = gridDim.y;
  float *out = partials + t0 * stride * splits + blockIdx.y;
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
    int64_t m = warp + kMhcWarps * r;
    if (m >= mixes) // the same for the whole warp
      break;
#pragma unroll
    for (int t = 0; t < kMhcTokens; ++t) {
      float s = warpSum(acc[r][t]);
      if (lane == t && t0 + t < tokens)
        out[(t * stride + m) * splits] = s;
    }
  }
  __syncthreads();
  if (threadIdx.x < kMhcTokens && t0 + threadIdx.x < tokens) {
    float s = 0.0f;
    for (int w = 0; w < kMhcWarps; ++w)
      s += squares[w][threadIdx.x];
    out[(threadIdx.x * stride + mixes) * splits] = s;
  }
}

/// daybreak_mhc_logits for up to kMhcWarps x `Rows` rows, loading `Cols`
/// columns of them a lane at once: grid (tiles, splits), block kMhcChunk;
/// split s takes chunks [s, s + 1) x chunksPerSplit of the ceil(nD /
/// kMhcChunk) (none past the end: it writes zeros).
template <int Rows, int Cols>
__device__ __forceinline__ void
mhcLogits(const float *__restrict__ streams, const float *__restrict__ fn,
          int64_t tokens, int64_t flat, int64_t mixes, int64_t chunksPerSplit,
          float *__restrict__ partials) {
  // Column c's tokens 4q..4q+3 at tile[q][c]: a lane reads its column's
  // tokens in kMhcTokens / 4 conflict-free 16-byte loads.
  __shared__ float4 tile[kMhcTokens / 4][kMhcChunk];
  __shared__ float squares[kMhcWarps][kMhcTokens];
  const int64_t t0 = int64_t(blockIdx.x) * kMhcTokens;
  const int64_t chunks = (flat + kMhcChunk - 1) / kMhcChunk;
  const int64_t first = int64_t(blockIdx.y) * chunksPerSplit;
  const int64_t last = min(chunks, first + chunksPerSplit);
  float acc[Rows][kMhcTokens], squared[kMhcTokens], next[kMhcTokens];
#pragma unroll
  for (int t = 0; t < kMhcTokens; ++t) {
    squared[t] = 0.0f;
#pragma unroll
    for (int r = 0; r < Rows; ++r)
      acc[r][t] = 0.0f;
  }
  // Thread i stages column i of a chunk for every token of the tile,
  // loaded a chunk ahead; columns and tokens past the end read as zeros.
  auto fetch = [&](int64_t chunk) {
    int64_t k = chunk * kMhcChunk + threadIdx.x;
#pragma unroll
    for (int t = 0; t < kMhcTokens; ++t)
      next[t] =
          k < flat && t0 + t < tokens ? streams[(t0 + t) * flat + k] : 0.0f;
  };
  if (first < last)
    fetch(first);
  for (int64_t chunk = first; chunk < last; ++chunk) {
    __syncthreads(); // every warp is done with the previous chunk
#pragma unroll
    for (int t = 0; t < kMhcTokens; ++t)
      squared[t] = fmaf(next[t], next[t], squared[t]);
#pragma unroll
    for (int q = 0; q < kMhcTokens / 4; ++q)
      tile[q][threadIdx.x] = make_float4(next[4 * q], next[4 * q + 1],
                                         next[4 * q + 2], next[4 * q + 3]);
    __syncthreads();
    if (chunk + 1 < last)
      fetch(chunk + 1);
    mhcProducts<Rows, Cols>(tile, fn, flat, mixes, chunk * kMhcChunk, flat,
                            acc);
  }
  mhcStorePartials<Rows>(acc, squared, squares, tokens, mixes, partials);
}

/// Lane `line` of the calling warp divides line `line` of the n x n matrix
/// `c` (rows: `between` n and `within` 1; columns: 1 and n) by its sum +
/// eps, summed in order, as CpuResidual.cpp's normalise. It multiplies by
/// the reciprocal (within a double rounding of the CPU's quotients): n
/// divisions a line made the 20 Sinkhorn rounds three times slower.
__device__ __forceinline__ void mhcNormalise(double *c, int64_t n,
                                             int64_t between, int64_t within,
                                             double eps) {
  int line = threadIdx.x & 31;
  if (line < n) {
    double *l = c + line * between, v[kMhcMaxStreams];
    double sum = 0.0;
#pragma unroll
    for (int b = 0; b < kMhcMaxStreams; ++b)
      if (b < n) {
        v[b] = l[b * within];
        sum += v[b];
      }
    double inv = 1.0 / (sum + eps);
#pragma unroll
    for (int b = 0; b < kMhcMaxStreams; ++b)
      if (b < n)
        l[b * within] = v[b] * inv;
  }
  __syncwarp();
}

/// daybreak_mhc_pre, and with `Normed` daybreak_mhc_pre_norm: grid
/// (ceil(T / kMhcTokens), ceil(D / kMhcSlice), or 1 with `Normed`), block
/// 32 x kMhcTokens, a warp a token.
template <bool Normed>
__device__ __forceinline__ void
mhcFinish(const float *__restrict__ streams, const float *__restrict__ partials,
          const float *__restrict__ base, const float *__restrict__ scale,
          int64_t tokens, int64_t n, int64_t width, int64_t splits,
          int64_t sinkhornIters, double eps, double normEps, const Weight &norm,
          double inputEps, float *__restrict__ input, float *__restrict__ post,
          float *__restrict__ comb) {
  // Token u's (2 + n) n + 1 sums at logits[u * stride].
  __shared__ double logits[kMhcTokens * (kMhcMaxMixes + 1)];
  __shared__ double pre[kMhcTokens][kMhcMaxStreams];
  __shared__ double mix[kMhcTokens][kMhcMaxStreams * kMhcMaxStreams];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t0 = int64_t(blockIdx.x) * kMhcTokens, t = t0 + warp;
  const int64_t count = min(int64_t(kMhcTokens), tokens - t0);
  const int64_t flat = n * width, mixes = (2 + n) * n, stride = mixes + 1;
  // The first column slice finishes the tokens; the others need only the
  // pre gates.
  const bool finish = blockIdx.y == 0;

  // The splits' sums of the block's tokens, whose partials [count][stride]
  // [splits] follow each other: `splits` lanes a row, each lane a split,
  // then the lanes' tree; the same order every launch. 32-bit indices (at
  // most kMhcTokens x 81 x 32); the loads of kRounds rounds are issued
  // before their sums, so they wait for L2 together.
  constexpr int kRounds = 4;
  const float *p = partials + t0 * stride * splits;
  const int shift = __ffs(int(splits)) - 1;
  const int total = int(count * stride) << shift;
  for (int e0 = 0; e0 < total; e0 += kRounds * blockDim.x) { // whole warps
    double v[kRounds];
#pragma unroll
    for (int i = 0; i < kRounds; ++i) {
      int e = e0 + i * blockDim.x + threadIdx.x;
      v[i] = e < total ? double(p[e]) : 0.0;
    }
#pragma unroll
    for (int i = 0; i < kRounds; ++i) {
      int e = e0 + i * blockDim.x + threadIdx.x;
      v[i] = groupSum(v[i], int(splits));
      if (e < total && (e & (int(splits) - 1)) == 0)
        logits[e >> shift] = v[i];
    }
  }
  __syncthreads();

  double *f = logits + warp * stride;
  if (t < tokens) {
    // f = rmsNorm(flatten(X)) fn^T, the norm without a weight.
    double inv = 1.0 / sqrt(f[mixes] / double(flat) + normEps);
    for (int64_t m = lane; m < (finish ? mixes : n); m += 32)
      f[m] *= inv;
    __syncwarp();
    if (lane < n) {
      pre[warp][lane] = mhcSigmoid(f[lane] * scale[0] + base[lane]) + eps;
      if (finish)
        post[t * n + lane] =
            float(2.0 * mhcSigmoid(f[n + lane] * scale[1] + base[n + lane]));
    }
  }
  __syncthreads();

  if (finish && t < tokens) {
    // comb: a softmax along each row (lane i: row i), + eps, a column
    // normalisation, then sinkhornIters - 1 rounds of rows and columns.
    double *c = mix[warp];
    if (lane < n) {
      double r[kMhcMaxStreams];
      double top = -__longlong_as_double(0x7FF0000000000000ll);
#pragma unroll
      for (int j = 0; j < kMhcMaxStreams; ++j)
        if (j < n) {
          int64_t m = 2 * n + lane * n + j;
          r[j] = f[m] * scale[2] + base[m];
          top = top < r[j] ? r[j] : top; // std::max
        }
      double sum = 0.0;
#pragma unroll
      for (int j = 0; j < kMhcMaxStreams; ++j)
        if (j < n)
          sum += r[j] = exp(r[j] - top);
#pragma unroll
      for (int j = 0; j < kMhcMaxStreams; ++j)
        if (j < n)
          c[lane * n + j] = r[j] / sum + eps;
    }
    __syncwarp();
    mhcNormalise(c, n, 1, n, eps); // columns
    for (int64_t iter = 1; iter < sinkhornIters; ++iter) {
      mhcNormalise(c, n, n, 1, eps); // rows
      mhcNormalise(c, n, 1, n, eps);
    }
    for (int64_t i = lane; i < n * n; i += 32)
      comb[t * n * n + i] = float(c[i]);
  }

  // The sublayer inputs' columns of a slice, sum_j pre_j X_j in double
  // (the warps that ran Sinkhorn join when done); four columns a thread and
  // token, as float4 where the rows are 16-byte aligned. Normed, it returns
  // the sum of the squares of the fp32 values it wrote (0 otherwise).
  const float *x = streams + t0 * flat;
  float *o = input + t0 * width;
  unsigned long long addresses = reinterpret_cast<unsigned long long>(x) |
                                 reinterpret_cast<unsigned long long>(o);
  bool quads = (width & 3) == 0 && (addresses & 15) == 0;
  auto collapse = [&](int64_t u, int64_t d0) {
    const double *p = pre[u];
    const float *xu = x + u * flat;
    float *ou = o + u * width;
    double squares = 0.0;
    if (quads) {
      int64_t d = d0 + 4 * threadIdx.x;
      if (d >= width)
        return squares;
      float4 v[kMhcMaxStreams];
#pragma unroll
      for (int j = 0; j < kMhcMaxStreams; ++j)
        if (j < n)
          v[j] = *reinterpret_cast<const float4 *>(xu + j * width + d);
      double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
#pragma unroll
      for (int j = 0; j < kMhcMaxStreams; ++j)
        if (j < n) {
          s0 += p[j] * v[j].x;
          s1 += p[j] * v[j].y;
          s2 += p[j] * v[j].z;
          s3 += p[j] * v[j].w;
        }
      float4 r = make_float4(float(s0), float(s1), float(s2), float(s3));
      *reinterpret_cast<float4 *>(ou + d) = r;
      if (Normed)
        squares = double(r.x) * r.x + double(r.y) * r.y + double(r.z) * r.z +
                  double(r.w) * r.w;
      return squares;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int64_t d = d0 + threadIdx.x + i * blockDim.x;
      if (d >= width)
        break;
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j)
        sum += p[j] * xu[j * width + d];
      float r = float(sum);
      ou[d] = r;
      if (Normed)
        squares += double(r) * r;
    }
    return squares;
  };
  if constexpr (!Normed) {
    const int64_t d0 = int64_t(blockIdx.y) * kMhcSlice;
#pragma unroll 2
    for (int64_t u = 0; u < count; ++u)
      collapse(u, d0);
  } else {
    // Normed: every slice of each token, its squares a thread, a warp tree,
    // then the warps' sums in order (the same every launch); then each thread
    // reads back the inputs it wrote (no other thread's, so no fence) and
    // scales them by 1 / sqrt(mean + inputEps) and the weight, as cpu::mhcPre
    // (double products of the fp32 input, rounded once).
    __shared__ double inputSquares[kMhcWarps][kMhcTokens];
    for (int64_t u = 0; u < count; ++u) {
      double squares = 0.0;
      for (int64_t d0 = 0; d0 < width; d0 += kMhcSlice)
        squares += collapse(u, d0);
      squares = groupSum(squares, 32);
      if (lane == 0)
        inputSquares[warp][u] = squares;
    }
    __syncthreads();
    for (int64_t u = 0; u < count; ++u) {
      double sum = 0.0;
#pragma unroll
      for (int w = 0; w < kMhcWarps; ++w)
        sum += inputSquares[w][u];
      const double inv = 1.0 / sqrt(sum / double(width) + inputEps);
      float *ou = o + u * width;
      for (int64_t d0 = 0; d0 < width; d0 += kMhcSlice) {
        if (quads) {
          int64_t d = d0 + 4 * threadIdx.x;
          if (d >= width)
            continue;
          float4 v = *reinterpret_cast<const float4 *>(ou + d);
          v.x = float(v.x * inv * weightAt(norm, d));
          v.y = float(v.y * inv * weightAt(norm, d + 1));
          v.z = float(v.z * inv * weightAt(norm, d + 2));
          v.w = float(v.w * inv * weightAt(norm, d + 3));
          *reinterpret_cast<float4 *>(ou + d) = v;
          continue;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          int64_t d = d0 + threadIdx.x + i * blockDim.x;
          if (d >= width)
            break;
          ou[d] = float(ou[d] * inv * weightAt(norm, d));
        }
      }
    }
  }
}

} // namespace

/// mhc_pre's products for n <= 4 ((2 + n) n <= 24 rows, three a warp):
/// grid (ceil(T / kMhcTokens), splits), block kMhcChunk; three blocks an
/// SM.
extern "C" __global__ void __launch_bounds__(kMhcChunk, 3)
    daybreak_mhc_logits(const float *streams, const float *fn, int64_t tokens,
                        int64_t flat, int64_t mixes, int64_t chunksPerSplit,
                        float *partials) {
  mhcLogits<3, 8>(streams, fn, tokens, flat, mixes, chunksPerSplit, partials);
}

/// The same for n <= kMhcMaxStreams (up to 80 rows, ten a warp): a block
/// an SM, its 80 accumulators a thread in registers (a cap of 128 would
/// spill them).
extern "C" __global__ void __launch_bounds__(kMhcChunk, 1)
    daybreak_mhc_logits_wide(const float *streams, const float *fn,
                             int64_t tokens, int64_t flat, int64_t mixes,
                             int64_t chunksPerSplit, float *partials) {
  mhcLogits<kMhcMaxMixes / kMhcWarps, 4>(streams, fn, tokens, flat, mixes,
                                         chunksPerSplit, partials);
}

/// mhc_post_pre's first kernel for n <= kMhcFusedStreams: mhc_post's new
/// streams into `out` and daybreak_mhc_logits' partials of them. grid
/// (ceil(T / kMhcTokens), splits), block kMhcChunk; split s takes units
/// [s, s + 1) x unitsPerSplit of the n ceil(D / kMhcChunk) (unit c n + j:
/// stream j of column chunk c; none past the end: it writes zeros).
extern "C" __global__ void __launch_bounds__(kMhcChunk, 2)
    daybreak_mhc_post_logits(const float *__restrict__ streams,
                             const float *__restrict__ y,
                             const float *__restrict__ post,
                             const float *__restrict__ comb,
                             const float *__restrict__ fn, int64_t tokens,
                             int64_t n, int64_t width, int64_t unitsPerSplit,
                             float *__restrict__ out,
                             float *__restrict__ partials) {
  constexpr int kRows = 3, kCols = 8, kStreams = kMhcFusedStreams;
  __shared__ float4 tile[kMhcTokens / 4][kMhcChunk];
  __shared__ float squares[kMhcWarps][kMhcTokens];
  // A token's post_k, then comb [i, k] (daybreak_mhc_post's order); zeros
  // past the last token. fp32 as given: widened exactly where used.
  __shared__ float weights[kMhcTokens][kStreams * (kStreams + 1)];
  // Thread c's column c of a chunk of every stream for the tile's tokens:
  // only it writes (asynchronously) and reads them, so no barrier guards
  // them. (In registers, with y's, they took the kernel past 128.)
  __shared__ float xs[kStreams][kMhcTokens][kMhcChunk];
  const int64_t t0 = int64_t(blockIdx.x) * kMhcTokens;
  const int64_t flat = n * width, mixes = (2 + n) * n, each = n * (n + 1);
  const int64_t units = n * ((width + kMhcChunk - 1) / kMhcChunk);
  const int64_t first = int64_t(blockIdx.y) * unitsPerSplit;
  const int64_t last = min(units, first + unitsPerSplit);
  // Offsets within the tile in 32 bits (kMhcTokens nD < 2^31: the
  // launcher's condition): 64-bit ones per token and stream, hoisted out
  // of the loop, took the registers past 128.
  const int n32 = int(n), w32 = int(width), f32 = int(flat);
  float *tileOut = out + t0 * flat;
  for (int64_t i = threadIdx.x; i < kMhcTokens * each; i += blockDim.x) {
    int64_t u = i / each, e = i - u * each, t = t0 + u;
    weights[u][e] = t >= tokens ? 0.0f
                    : e < n     ? post[t * n + e]
                                : comb[t * n * n + e - n];
  }
  float acc[kRows][kMhcTokens], squared[kMhcTokens], ys[kMhcTokens];
#pragma unroll
  for (int t = 0; t < kMhcTokens; ++t) {
    squared[t] = 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      acc[r][t] = 0.0f;
  }
  // A chunk's columns for the n units that stage them: the streams'
  // copied to xs, y's to registers, issued while the previous unit's
  // products run; columns and tokens past the end read as zeros.
  auto fetch = [&](int64_t chunk) {
    int64_t d = chunk * kMhcChunk + threadIdx.x;
    const float *xt = streams + t0 * flat + d, *yt = y + t0 * width + d;
#pragma unroll
    for (int t = 0; t < kMhcTokens; ++t) {
      bool valid = d < width && t0 + t < tokens;
#pragma unroll
      for (int i = 0; i < kStreams; ++i)
        if (i < n)
          copyAsync4(&xs[i][t][threadIdx.x], xt + (t * n32 + i) * w32, valid);
      ys[t] = valid ? yt[t * w32] : 0.0f;
    }
    copyAsyncCommit();
  };
  if (first < last)
    fetch(first / n);
  for (int64_t unit = first; unit < last; ++unit) {
    const int64_t chunk = unit / n, j = unit - chunk * n;
    const int64_t d = chunk * kMhcChunk + threadIdx.x;
    copyAsyncWaitAll(); // this thread's columns of the chunk
    __syncthreads();    // the tile is free, the weights are there
    // X'_j[d] = post_j y[d] + sum_i comb[i, j] X_i[d], in double and in
    // daybreak_mhc_post's order, rounded once; stored, squared and staged.
    float v[kMhcTokens];
#pragma unroll
    for (int t = 0; t < kMhcTokens; ++t) {
      const float *w = weights[t];
      double sum = double(w[j]) * ys[t];
#pragma unroll
      for (int i = 0; i < kStreams; ++i)
        if (i < n)
          sum += double(w[n + i * n + j]) * xs[i][t][threadIdx.x];
      bool valid = d < width && t0 + t < tokens;
      v[t] = valid ? float(sum) : 0.0f;
      if (valid)
        tileOut[t * f32 + int(j * width + d)] = v[t];
      squared[t] = fmaf(v[t], v[t], squared[t]);
    }
#pragma unroll
    for (int q = 0; q < kMhcTokens / 4; ++q)
      tile[q][threadIdx.x] =
          make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
    __syncthreads();
    // The next chunk once this one's last unit is staged (its xs reads
    // are done: the tile stores above needed them).
    if (j == n - 1 && unit + 1 < last)
      fetch(chunk + 1);
    // Stream j's columns of the chunk: fn's j D + d, those under (j + 1) D.
    mhcProducts<kRows, kCols>(tile, fn, flat, mixes,
                              j * width + chunk * kMhcChunk, (j + 1) * width,
                              acc);
  }
  mhcStorePartials<kRows>(acc, squared, squares, tokens, mixes, partials);
}

/// mhc_pre's second pass over the logits' `splits` partials (a power of two
/// up to 32): grid (ceil(T / kMhcTokens), ceil(D / kMhcSlice)), block 32 x
/// kMhcTokens, a warp a token. Two blocks an SM: under 128 registers
/// ptxas spills. `norm` and `inputEps` are unused (daybreak_mhc_pre_norm's
/// parameters).
extern "C" __global__ void __launch_bounds__(32 * kMhcTokens, 2)
    daybreak_mhc_pre(const float *__restrict__ streams,
                     const float *__restrict__ partials,
                     const float *__restrict__ base,
                     const float *__restrict__ scale, int64_t tokens, int64_t n,
                     int64_t width, int64_t splits, int64_t sinkhornIters,
                     double eps, double normEps, Weight norm, double inputEps,
                     float *__restrict__ input, float *__restrict__ post,
                     float *__restrict__ comb) {
  mhcFinish<false>(streams, partials, base, scale, tokens, n, width, splits,
                   sinkhornIters, eps, normEps, norm, inputEps, input, post,
                   comb);
}

/// daybreak_mhc_pre with the sublayer's RMSNorm: `norm` [D] (fp32 or bf16)
/// and `inputEps`; grid (ceil(T / kMhcTokens), 1), a block all D columns.
extern "C" __global__ void __launch_bounds__(32 * kMhcTokens, 2)
    daybreak_mhc_pre_norm(const float *__restrict__ streams,
                          const float *__restrict__ partials,
                          const float *__restrict__ base,
                          const float *__restrict__ scale, int64_t tokens,
                          int64_t n, int64_t width, int64_t splits,
                          int64_t sinkhornIters, double eps, double normEps,
                          Weight norm, double inputEps,
                          float *__restrict__ input, float *__restrict__ post,
                          float *__restrict__ comb) {
  mhcFinish<true>(streams, partials, base, scale, tokens, n, width, splits,
                  sinkhornIters, eps, normEps, norm, inputEps, input, post,
                  comb);
}

/// X'_k = post_k y + sum_j comb[j, k] X_j in double, as cpu::mhcPost:
/// grid (T, ceil(D / 256)), block 256, a thread a column of every stream.
extern "C" __global__ void __launch_bounds__(256)
    daybreak_mhc_post(const float *__restrict__ streams,
                      const float *__restrict__ y,
                      const float *__restrict__ post,
                      const float *__restrict__ comb, int64_t n, int64_t width,
                      float *__restrict__ out) {
  // post_k, then comb [j, k].
  __shared__ double weights[kMhcMaxStreams * (kMhcMaxStreams + 1)];
  const int64_t t = blockIdx.x;
  for (int64_t i = threadIdx.x; i < n * (n + 1); i += blockDim.x)
    weights[i] = i < n ? post[t * n + i] : comb[t * n * n + i - n];
  __syncthreads();
  int64_t d = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (d >= width)
    return;
  const float *x = streams + t * n * width + d;
  float v[kMhcMaxStreams];
#pragma unroll
  for (int j = 0; j < kMhcMaxStreams; ++j)
    if (j < n)
      v[j] = x[j * width];
  double yd = y[t * width + d];
  // A loop over k, not unrolled: 30 registers, full occupancy.
#pragma unroll 1
  for (int64_t k = 0; k < n; ++k) {
    // Stream j feeds stream k through comb[j, k].
    double sum = weights[k] * yd;
#pragma unroll
    for (int j = 0; j < kMhcMaxStreams; ++j)
      if (j < n)
        sum += weights[n + j * n + k] * v[j];
    out[(t * n + k) * width + d] = float(sum);
  }
}

// Dense GQA attention: its own file, one translation unit with this one.
#include "CudaAttention.cuh"
// The warpgroup GEMMs (wgmma fed by the tensor copy engine).
#include "CudaGemm.cuh"
// Sparse MLA on the tensor cores, on CudaAttention.cuh's tile helpers and
// CudaGemm.cuh's barriers and wgmma fences.
#include "CudaSparseMla.cuh"
// Kimi Delta Attention and GLM-5.3's pooled indexer keys.
#include "CudaKda.cuh"
#include "CudaKpool.cuh"
