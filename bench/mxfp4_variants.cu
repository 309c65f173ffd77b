//===- mxfp4_variants.cu - the CUDA-core MXFP4 expert kernel's decode -----===//
//
// Standalone bench (nvcc on the GPU machine, no MLIR): the library's
// daybreak_mxfp4_expert_matmul and its staged form against variants of its
// task loop at gpt-oss-120b's expert shapes (128 experts, K = 2880; gate/up
// N = 5760, down N = 2880), T tokens routed to 4 experts each, with a copy
// probe in the same process. Each launch takes its experts from a rotating set,
// so the weights stream from HBM (128 experts of gate/up are 1.1 GB). Every
// variant's output is checked against the library kernel's. Build and run:
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 \
//        -o mv bench/mxfp4_variants.cu && ./mv
// MV_ONCE=1 launches each kernel once (for ncu).
//
//===----------------------------------------------------------------------===//

#include "KernelProbe.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

/// The decode of a variant: kDecodeHalf is the library's (f16 pairs widened
/// by cvt), kDecodeBf16 builds bf16-placed pairs (the E2M1 bits at the fp32
/// exponent's low bits: value times 2^-126, 0.5 on the fp32 subnormal) and
/// widens them with a shift and a mask, no conversion; kLoadsOnly keeps the
/// loads and folds the words with a few integer operations (the access
/// pattern's floor, not a result).
enum Decode { kDecodeHalf, kDecodeBf16, kLoadsOnly };

/// The input scale that cancels a decode's power of two, and what is left
/// to multiply a block's sum by.
template <int kDecode> struct DecodeScale;
template <> struct DecodeScale<kDecodeHalf> {
  static constexpr float kInput = 16384.0f; // 2^14
  static constexpr float kBlock = 1.0f;
};
template <> struct DecodeScale<kDecodeBf16> {
  static constexpr float kInput = 0x1p64f;
  static constexpr float kBlock = 0x1p62f; // 2^(126 - 64)
};
template <> struct DecodeScale<kLoadsOnly> {
  static constexpr float kInput = 1.0f;
  static constexpr float kBlock = 1.0f;
};

__device__ __forceinline__ void e2m1x8ToFloatBf16(uint32_t word,
                                                  float (&v)[8]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t sign = (word << (12 - 4 * i)) & 0x80008000u;
    uint32_t bits =
        (i < 2 ? word << (6 - 4 * i) : word >> (4 * i - 6)) & 0x01C001C0u;
    uint32_t h = sign | bits;
    v[i] = __uint_as_float(h << 16);
    v[i + 4] = __uint_as_float(h & 0xFFFF0000u);
  }
}

template <int kPairs, int kDecode>
__device__ __forceinline__ void
variantTask(const uint8_t *expertValues, const uint8_t *expertScales,
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
      int64_t row = min(row0 + r, lastRow);
      packed[r] = ldgStream(expertValues + row * blocks * 16 + 16 * b);
      exponent[r] = __ldg(expertScales + row * blocks + b);
    }
    float block[kMxfp4Rows][kPairs] = {};
    if (kDecode == kLoadsOnly) {
      float x0[kPairs];
#pragma unroll
      for (int q = 0; q < kPairs; ++q)
        x0[q] = __ldg(in[q] + 32 * b);
#pragma unroll
      for (int r = 0; r < kMxfp4Rows; ++r) {
        uint32_t s = packed[r].x ^ packed[r].y ^ packed[r].z ^ packed[r].w;
#pragma unroll
        for (int q = 0; q < kPairs; ++q)
          block[r][q] =
              __uint_as_float((s & 0x007FFFFFu) | 0x3F800000u) * x0[q];
      }
    } else {
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
            xv[q][i] = raw[i] * DecodeScale<kDecode>::kInput;
        }
#pragma unroll
        for (int r = 0; r < kMxfp4Rows; ++r) {
          uint32_t word = j == 0   ? packed[r].x
                          : j == 1 ? packed[r].y
                          : j == 2 ? packed[r].z
                                   : packed[r].w;
          float v[8];
          if (kDecode == kDecodeHalf)
            e2m1x8ToFloat(word, v);
          else
            e2m1x8ToFloatBf16(word, v);
#pragma unroll
          for (int q = 0; q < kPairs; ++q)
#pragma unroll
            for (int i = 0; i < 8; ++i)
              block[r][q] = fmaf(xv[q][i], v[i], block[r][q]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kMxfp4Rows; ++r) {
      float scale = e8m0ToFloat(exponent[r]);
#pragma unroll
      for (int q = 0; q < kPairs; ++q)
        acc[r][q] =
            fmaf(block[r][q] * DecodeScale<kDecode>::kBlock, scale, acc[r][q]);
    }
  }
#pragma unroll
  for (int r = 0; r < kMxfp4Rows; ++r)
#pragma unroll
    for (int q = 0; q < kPairs; ++q)
      sums[r][q] = warpSum(acc[r][q]);
}

/// variantTask as mxfp4ExpertMatmulBlock's Task.
template <int kDecode> struct VariantTask {
  template <int kPairs, bool kStaged>
  static __device__ __forceinline__ void
  run(const uint8_t *expertValues, const uint8_t *expertScales, int32_t row0,
      int32_t lastRow, int64_t blocks, const float *const (&in)[kPairs],
      int64_t first, int64_t end, float (&sums)[kMxfp4Rows][kPairs]) {
    static_assert(!kStaged, "the variants load their rows themselves");
    variantTask<kPairs, kDecode>(expertValues, expertScales, row0, lastRow,
                                 blocks, in, first, end, sums);
  }
};

/// daybreak_mxfp4_expert_matmul's body with variantTask<kDecode> (no bias,
/// routing weights given).
template <int kDecode>
__global__ void __launch_bounds__(128)
    variantMatmul(const float *x, const uint8_t *values, const uint8_t *scales,
                  int64_t experts, int64_t n, int64_t k, const int32_t *indices,
                  int64_t tokens, int64_t slots, const float *routingWeights,
                  int64_t parts, float *out) {
  Weight noBias{};
  mxfp4ExpertMatmulBlock<false, VariantTask<kDecode>>(
      x, 0, values, scales, noBias, experts, n, k, indices, tokens, slots,
      routingWeights, parts, 0, out);
}

/// One load round trip a warp: grid (ceil(N / kMxfp4Rows), pairs), kParts
/// warps a block. Block (x, p) takes rows x kMxfp4Rows .. of pair p's expert
/// and warp w part w of K (the library's parts: ceil(K / 32 / kParts) blocks
/// of 32 values each), each lane one block of 32 values of every row at
/// gpt-oss's K (variantTask: all its rows' loads issued, then the dots).
/// The warps' sums add in part order, as the library's output stage adds
/// its parts, so each pair's product is the library's bit for bit;
/// pairOut [pairs, N] (combineSlots weights them). kMinBlocks: the blocks an
/// SM the registers must allow (5: at most 136 registers, fifteen warps an
/// SM against the library kernel's twelve; 8: 85). Without it ptxas takes
/// 207 (three blocks).
template <int kParts, int kDecode, int kMinBlocks = 5>
__global__ void __launch_bounds__(32 * kParts, kMinBlocks)
    pairBlocks(const float *x, const uint8_t *values, const uint8_t *scales,
               int64_t experts, int64_t n, int64_t k, const int32_t *indices,
               int64_t slots, float *pairOut) {
  __shared__ float partSums[kParts][kMxfp4Rows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t p = blockIdx.y, blocks = k / 32;
  const int64_t row0 = int64_t(blockIdx.x) * kMxfp4Rows;
  const int32_t e = indices[p];
  float sums[kMxfp4Rows][1] = {};
  if (e >= 0 && e < experts) {
    const int64_t perPart = (blocks + kParts - 1) / kParts;
    const int64_t first = warp * perPart,
                  end = first + perPart < blocks ? first + perPart : blocks;
    const float *in[1] = {x + (p / slots) * k};
    variantTask<1, kDecode>(values + e * n * (k / 2), scales + e * n * blocks,
                            int32_t(row0), int32_t(n - 1), blocks, in, first,
                            end, sums);
  }
  if (lane == 0)
#pragma unroll
    for (int r = 0; r < kMxfp4Rows; ++r)
      partSums[warp][r] = sums[r][0];
  __syncthreads();
  if (threadIdx.x < kMxfp4Rows && row0 + threadIdx.x < n) {
    float y = 0.0f;
#pragma unroll
    for (int w = 0; w < kParts; ++w)
      y += partSums[w][threadIdx.x];
    pairOut[p * n + row0 + threadIdx.x] = e >= 0 && e < experts ? y : 0.0f;
  }
}

/// out[t, c] = the routing-weighted sum of pairOut's rows of token t, in
/// slot order (the library's combine).
__global__ void combineSlots(const float *pairOut, const int32_t *indices,
                             const float *weights, int64_t experts,
                             int64_t tokens, int64_t slots, int64_t n,
                             float *out) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * n)
    return;
  int64_t t = i / n, c = i % n;
  float combined = 0.0f;
  for (int64_t s = 0; s < slots; ++s) {
    int32_t e = indices[t * slots + s];
    if (e >= 0 && e < experts)
      combined += weights[t * slots + s] * pairOut[(t * slots + s) * n + c];
  }
  out[i] = combined;
}

constexpr int64_t kExperts = 128, kK = 2880, kSlots = 4, kSets = 32;

struct Case {
  const char *name;
  int64_t n, tokens;
};

} // namespace

int main() {
  const bool once = std::getenv("MV_ONCE") != nullptr;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);

  // Copy probe: 1 GiB read and written.
  {
    int64_t n4 = (int64_t(1) << 30) / 16;
    float4 *a, *b;
    CK(cudaMalloc(&a, n4 * 16));
    CK(cudaMalloc(&b, n4 * 16));
    CK(cudaMemset(a, 1, n4 * 16));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    copyProbe<<<prop.multiProcessorCount * 8, 512>>>(a, b, n4);
    CK(cudaEventRecord(e0));
    const int reps = once ? 1 : 10;
    for (int i = 0; i < reps; ++i)
      copyProbe<<<prop.multiProcessorCount * 8, 512>>>(a, b, n4);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    std::printf("copy: %.0f GB/s (read + written)\n",
                2.0 * n4 * 16 * reps / (ms * 1e-3) / 1e9);
    CK(cudaFree(a));
    CK(cudaFree(b));
  }

  std::mt19937 rng(7);
  const Case cases[] = {{"gate/up T=1", 5760, 1},   {"down T=1", 2880, 1},
                        {"gate/up T=8", 5760, 8},   {"down T=8", 2880, 8},
                        {"gate/up T=64", 5760, 64}, {"down T=64", 2880, 64}};
  for (const Case &c : cases) {
    const int64_t n = c.n, blocks = kK / 32, pairs = c.tokens * kSlots;
    const int64_t valueBytes = kExperts * n * kK / 2,
                  scaleBytes = kExperts * n * blocks;
    std::vector<uint8_t> hv(valueBytes), hs(scaleBytes);
    for (auto &v : hv)
      v = uint8_t(rng());
    // Scales around 2^-6 as trained weights have them.
    for (auto &s : hs)
      s = uint8_t(127 - 9 + rng() % 6);
    std::vector<float> hx(c.tokens * kK), hw(pairs);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto &v : hx)
      v = normal(rng);
    for (auto &v : hw)
      v = 0.25f + 0.1f * normal(rng);
    // kSets index sets: distinct experts within a token.
    std::vector<int32_t> hi(kSets * pairs);
    for (int64_t s = 0; s < kSets; ++s)
      for (int64_t t = 0; t < c.tokens; ++t) {
        std::vector<int32_t> pick;
        while (int64_t(pick.size()) < kSlots) {
          int32_t e = int32_t(rng() % kExperts);
          bool seen = false;
          for (int32_t q : pick)
            seen |= q == e;
          if (!seen)
            pick.push_back(e);
        }
        for (int64_t q = 0; q < kSlots; ++q)
          hi[(s * c.tokens + t) * kSlots + q] = pick[q];
      }
    uint8_t *dv, *ds;
    float *dx, *dw, *out0, *out1;
    int32_t *di;
    CK(cudaMalloc(&dv, valueBytes));
    CK(cudaMalloc(&ds, scaleBytes));
    CK(cudaMalloc(&dx, hx.size() * 4));
    CK(cudaMalloc(&dw, hw.size() * 4));
    CK(cudaMalloc(&di, hi.size() * 4));
    CK(cudaMalloc(&out0, c.tokens * n * 4));
    CK(cudaMalloc(&out1, c.tokens * n * 4));
    float *pairScratch;
    CK(cudaMalloc(&pairScratch, pairs * n * 4));
    CK(cudaMemcpy(dv, hv.data(), valueBytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(ds, hs.data(), scaleBytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dx, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dw, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(di, hi.data(), hi.size() * 4, cudaMemcpyHostToDevice));

    const int64_t parts = 3;
    const int64_t shared = parts * pairs * kMxfp4Rows * 4 +
                           (pairs + std::min(kExperts, pairs)) * 4;
    const unsigned grid = unsigned((n + kMxfp4Rows - 1) / kMxfp4Rows);
    // Distinct experts over the sets, for the bytes a launch streams.
    double distinct = 0;
    for (int64_t s = 0; s < kSets; ++s) {
      std::vector<bool> used(kExperts);
      for (int64_t p = 0; p < pairs; ++p)
        used[hi[s * pairs + p]] = true;
      for (bool u : used)
        distinct += u;
    }
    distinct /= kSets;
    const double bytes = distinct * n * (kK / 2 + blocks);

    Weight noBias{};
    const int64_t stageBytes = kMxfp4Rows * (kK / 2 + blocks);
    // CudaKernels.h's mxfp4StagedStages (kMxfp4Stages, 72 KiB).
    const int32_t stages =
        int32_t(std::min<int64_t>(4, (72 * 1024 - shared) / stageBytes));
    CK(cudaFuncSetAttribute(daybreak_mxfp4_expert_matmul_staged,
                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                            72 * 1024));
    CK(cudaFuncSetAttribute(daybreak_mxfp4_expert_matmul_staged,
                            cudaFuncAttributePreferredSharedMemoryCarveout,
                            100));
    auto launch = [&](int which, int64_t set, float *out) {
      const int32_t *idx = di + set * pairs;
      int64_t experts = kExperts, nn = n, kk = kK, tokens = c.tokens,
              slots = kSlots, p = parts;
      if (which == 0) {
        int32_t perSlot = 0;
        daybreak_mxfp4_expert_matmul<<<grid, 128, shared>>>(
            dx, perSlot, dv, ds, noBias, experts, nn, kk, idx, tokens, slots,
            dw, p, out);
      } else if (which == 1) {
        variantMatmul<kDecodeBf16><<<grid, 128, shared>>>(
            dx, dv, ds, experts, nn, kk, idx, tokens, slots, dw, p, out);
      } else if (which == 2) {
        variantMatmul<kDecodeHalf><<<grid, 128, shared>>>(
            dx, dv, ds, experts, nn, kk, idx, tokens, slots, dw, p, out);
      } else if (which == 3) {
        variantMatmul<kLoadsOnly><<<grid, 128, shared>>>(
            dx, dv, ds, experts, nn, kk, idx, tokens, slots, dw, p, out);
      } else if (which >= 5) {
        // One round trip a warp, then (but 7) the slots' combine.
        dim3 pairGrid(grid, unsigned(pairs));
        if (which == 5 || which == 7)
          pairBlocks<3, kDecodeHalf><<<pairGrid, 96>>>(
              dx, dv, ds, experts, nn, kk, idx, slots, pairScratch);
        else if (which == 6)
          pairBlocks<3, kLoadsOnly><<<pairGrid, 96>>>(
              dx, dv, ds, experts, nn, kk, idx, slots, pairScratch);
        else
          pairBlocks<3, kDecodeHalf, 8><<<pairGrid, 96>>>(
              dx, dv, ds, experts, nn, kk, idx, slots, pairScratch);
        if (which != 7)
          combineSlots<<<unsigned((tokens * nn + 255) / 256), 256>>>(
              pairScratch, idx, dw, experts, tokens, slots, nn, out);
      } else if (which == 4) {
        // The staged form as the launcher sizes it.
        int32_t perSlot = 0;
        daybreak_mxfp4_expert_matmul_staged<<<grid, 128,
                                              shared + stages * stageBytes>>>(
            dx, perSlot, dv, ds, noBias, experts, nn, kk, idx, tokens, slots,
            dw, p, stages, out);
      }
    };
    // Pair blocks: with the combine (the launch a weighted step takes);
    // "pair, no combine" alone (a step of per-slot outputs, gate/up);
    // "pair, 8/SM" with the registers of eight blocks an SM.
    const char *names[] = {"library",     "bf16 decode",      "library copy",
                           "loads only",  "staged",           "pair blocks",
                           "pair loads",  "pair, no combine", "pair, 8/SM"};
    // Check every variant (but loads only) against the library on set 0.
    std::vector<float> ref(c.tokens * n), got(c.tokens * n);
    launch(0, 0, out0);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(ref.data(), out0, ref.size() * 4, cudaMemcpyDeviceToHost));
    for (int which : {1, 2, 4, 5, 8}) {
      CK(cudaMemset(out1, 0xFF, got.size() * 4));
      launch(which, 0, out1);
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(got.data(), out1, got.size() * 4, cudaMemcpyDeviceToHost));
      double worst = 0, scale = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        worst = std::max(worst, double(std::fabs(ref[i] - got[i])));
        scale = std::max(scale, double(std::fabs(ref[i])));
      }
      std::printf("%s %s: worst |diff| %.3g of max |y| %.3g %s\n", c.name,
                  names[which], worst, scale, worst <= 0.0 ? "(equal)" : "");
      if (!(worst <= 1e-6 * scale)) {
        std::printf("FAIL\n");
        return 1;
      }
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int reps = once ? 1 : 256;
    for (int which = 0; which < 9; ++which) {
      for (int i = 0; i < (once ? 0 : 8); ++i)
        launch(which, i % kSets, out1);
      CK(cudaEventRecord(e0));
      for (int i = 0; i < reps; ++i)
        launch(which, i % kSets, out1);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      CK(cudaGetLastError());
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      double us = ms * 1e3 / reps;
      std::printf("%-12s %-13s %8.2f us  %6.0f GB/s  (%.1f distinct experts, "
                  "%.1f MB)\n",
                  c.name, names[which], us, bytes / (us * 1e-6) / 1e9, distinct,
                  bytes / 1e6);
    }
    CK(cudaFree(dv));
    CK(cudaFree(ds));
    CK(cudaFree(dx));
    CK(cudaFree(dw));
    CK(cudaFree(di));
    CK(cudaFree(out0));
    CK(cudaFree(out1));
    CK(cudaFree(pairScratch));
  }
  return 0;
}
