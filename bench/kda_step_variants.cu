//===- kda_step_variants.cu - kda_step layouts against the copy probe ----===//
//
// Standalone bench (nvcc on the H200, no MLIR): the library's kda_step
// against candidate variants at Kimi-Linear-48B's dims (32 heads x 128 x
// 128, fp32 state), B sequences of one token each, and a copy probe in the
// same process. Every variant's state and outputs are checked against the
// library kernel's. Build and run:
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 \
//        -o kv bench/kda_step_variants.cu && ./kv
//
//===----------------------------------------------------------------------===//

#include "KernelProbe.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

namespace {

constexpr int kH = 32, kD = 128;

__device__ __forceinline__ uint32_t sa(const void *p) {
  return uint32_t(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarInit(uint64_t *bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sa(bar)));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void bulkLoad(void *dst, const void *src,
                                         uint32_t bytes, uint64_t *bar) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(bar)),
      "r"(bytes)
      : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
               "bytes [%0], [%1], %2, [%3];" ::"r"(sa(dst)),
               "l"(src), "r"(bytes), "r"(sa(bar))
               : "memory");
}
__device__ __forceinline__ void mbarWait(uint64_t *bar, uint32_t phase) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 "
                 "p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(sa(bar)), "r"(phase)
                 : "memory");
}
__device__ __forceinline__ void bulkStore(void *dst, const void *src,
                                          uint32_t bytes) {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile(
      "cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
      "r"(sa(src)), "r"(bytes)
      : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
template <int N> __device__ __forceinline__ void bulkWaitRead() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/// One token of one head on a [128, 128] state in shared memory, 512
/// threads: thread (rg, c) owns column c, rows 32 rg .. 32 rg + 31.
__device__ __forceinline__ void headToken(float *S, const float *q,
                                          const float *k, const float *v,
                                          const float *g, const float *beta,
                                          int64_t row, double scale, float *out,
                                          float *qs, float *ks, float *gs,
                                          float (*part)[kD], float *norms) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int c = tid & (kD - 1), rg = tid >> 7;
  float qd = 0.0f, kd = 0.0f;
  if (tid < kD) {
    qd = q[row * kD + tid];
    kd = k[row * kD + tid];
    qs[tid] = qd;
    ks[tid] = kd;
    gs[tid] = __expf(g[row * kD + tid]);
  }
  const float vc = v[row * kD + c], b = beta[row];
  float qq = warpSum(qd * qd), kk = warpSum(kd * kd);
  if (tid < kD && lane == 0) {
    norms[warp] = qq;
    norms[4 + warp] = kk;
  }
  __syncthreads();
  float qt = norms[0] + norms[1] + norms[2] + norms[3];
  float kt = norms[4] + norms[5] + norms[6] + norms[7];
  float qf = float(scale / sqrt(double(qt) + 1e-6));
  float kf = float(1.0 / sqrt(double(kt) + 1e-6));
  float *col = S + (32 * rg) * kD + c;
  float acc = 0.0f;
#pragma unroll 8
  for (int i = 0; i < 32; ++i) {
    float x = col[i * kD] * gs[32 * rg + i];
    col[i * kD] = x;
    acc = fmaf(ks[32 * rg + i] * kf, x, acc);
  }
  part[rg][c] = acc;
  __syncthreads();
  float u = b * (vc - (part[0][c] + part[1][c] + part[2][c] + part[3][c]));
  acc = 0.0f;
#pragma unroll 8
  for (int i = 0; i < 32; ++i) {
    float x = fmaf(ks[32 * rg + i] * kf, u, col[i * kD]);
    col[i * kD] = x;
    acc = fmaf(qs[32 * rg + i] * qf, x, acc);
  }
  __syncthreads();
  part[4 + rg][c] = acc;
  __syncthreads();
  if (rg == 0)
    out[row * kD + c] = part[4][c] + part[5][c] + part[6][c] + part[7][c];
}

/// V3: a block per (head, token), the head's 64 KiB by one bulk copy.
__global__ void __launch_bounds__(512, 3)
    stepBulk(const float *q, const float *k, const float *v, const float *g,
             const float *beta, float *state, const int32_t *sequences,
             int64_t tokens, double scale, float *out) {
  extern __shared__ __align__(128) float S[];
  __shared__ float qs[kD], ks[kD], gs[kD], part[8][kD], norms[8];
  __shared__ __align__(8) uint64_t bar;
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int slot = sequences[t];
  float *src = state + (int64_t(slot) * kH + h) * kD * kD;
  if (threadIdx.x == 0) {
    mbarInit(&bar);
    bulkLoad(S, src, kD * kD * 4, &bar);
  }
  bool earlier = false;
  for (int64_t i = threadIdx.x; i < tokens; i += blockDim.x)
    earlier |= i != t && sequences[i] == slot;
  __syncthreads();
  mbarWait(&bar, 0);
  (void)__syncthreads_or(earlier);
  headToken(S, q, k, v, g, beta, t * kH + h, scale, out, qs, ks, gs, part,
            norms);
  __syncthreads();
  if (threadIdx.x == 0) {
    bulkStore(src, S, kD * kD * 4);
    bulkWaitRead<0>();
  }
}

/// V4: persistent, one block an SM, kStages heads in flight.
template <int kStages>
__global__ void __launch_bounds__(512, 1)
    stepPersistent(const float *q, const float *k, const float *v,
                   const float *g, const float *beta, float *state,
                   const int32_t *sequences, int64_t tokens, double scale,
                   float *out) {
  extern __shared__ __align__(128) float S[];
  __shared__ float qs[kD], ks[kD], gs[kD], part[8][kD], norms[8];
  __shared__ __align__(8) uint64_t bars[kStages];
  const int64_t items = tokens * kH;
  auto head = [&](int64_t item) {
    int64_t t = item / kH;
    return state + (int64_t(sequences[t]) * kH + item % kH) * kD * kD;
  };
  constexpr uint32_t kBytes = kD * kD * 4;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s)
      mbarInit(&bars[s]);
    for (int s = 0; s < kStages - 1; ++s) {
      int64_t item = blockIdx.x + int64_t(s) * gridDim.x;
      if (item < items)
        bulkLoad(S + s * kD * kD, head(item), kBytes, &bars[s]);
    }
  }
  __syncthreads();
  int n = 0;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x, ++n) {
    const int stage = n % kStages;
    float *buf = S + stage * kD * kD;
    mbarWait(&bars[stage], (n / kStages) & 1);
    headToken(buf, q, k, v, g, beta, item, scale, out, qs, ks, gs, part, norms);
    __syncthreads();
    if (threadIdx.x == 0) {
      bulkStore(head(item), buf, kBytes);
      int64_t next = item + int64_t(kStages - 1) * gridDim.x;
      if (next < items) {
        // The stage it goes to was stored one item ago.
        bulkWaitRead<1>();
        int ns = (n + kStages - 1) % kStages;
        bulkLoad(S + ns * kD * kD, head(next), kBytes, &bars[ns]);
      }
    }
  }
  if (threadIdx.x == 0)
    bulkWaitRead<0>();
}

/// V1: the library kernel with the column halves of a head adjacent in
/// launch order and no look for later tokens (decode only here).
template <int kMinBlocks, bool kAdjacent = true>
__global__ void __launch_bounds__(kKdaStepThreads, kMinBlocks)
    stepRegs(const float *q, const float *k, const float *v, const float *g,
             const float *beta, float *state, const int32_t *sequences,
             int64_t tokens, double scale, float *out) {
  __shared__ float qs[kKdaMaxKeyDim], ks[kKdaMaxKeyDim], gs[kKdaMaxKeyDim];
  __shared__ __align__(16) float part[16][kKdaStepColumns];
  __shared__ float norms[2][8];
  const int z = kAdjacent ? blockIdx.x & 1 : blockIdx.z;
  const int h = kAdjacent ? blockIdx.x >> 1 : blockIdx.y;
  const int64_t t = kAdjacent ? blockIdx.y : blockIdx.x;
  const int slot = sequences[t];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t c0 = int64_t(z) * kKdaStepColumns + 2 * lane;
  float *p = state + (int64_t(slot) * kH + h) * kD * kD + 16 * warp * kD + c0;
  float s[16][2];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    float2 x = *reinterpret_cast<const float2 *>(p + i * kD);
    s[i][0] = x.x;
    s[i][1] = x.y;
  }
  bool earlier = false;
  for (int64_t i = threadIdx.x; i < tokens; i += blockDim.x)
    earlier |= i != t && sequences[i] == slot;
  if (__syncthreads_or(earlier))
    return;
  kdaStepToken(s, q, k, v, g, beta, t * kH + h, kD, kD, c0, scale, 1, qs, ks,
               gs, part, norms, out);
#pragma unroll
  for (int i = 0; i < 16; ++i)
    *reinterpret_cast<float2 *>(p + i * kD) = make_float2(s[i][0], s[i][1]);
}

float timeIt(int reps, const std::function<void()> &f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i)
    f();
  CK(cudaEventRecord(a));
  for (int i = 0; i < reps; ++i)
    f();
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms / reps;
}

float *devFill(int64_t n, float lo, float hi, unsigned seed) {
  std::vector<float> h(n);
  srand(seed);
  for (auto &x : h)
    x = lo + (hi - lo) * float(rand()) / float(RAND_MAX);
  float *d;
  CK(cudaMalloc(&d, n * 4));
  CK(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice));
  return d;
}

} // namespace

int main() {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  {
    int64_t n = (int64_t(1) << 30) / 16;
    float4 *a, *b;
    CK(cudaMalloc(&a, n * 16));
    CK(cudaMalloc(&b, n * 16));
    CK(cudaMemset(a, 0, n * 16));
    float ms = timeIt(10, [&] { copyProbe<<<sms * 8, 512>>>(a, b, n); });
    std::printf("copy probe: 1 GiB in %.3f ms = %.0f GB/s (read + write)\n", ms,
                2.0 * n * 16 / ms / 1e6);
    ms = timeIt(10, [&] {
      CK(cudaMemcpyAsync(b, a, n * 16, cudaMemcpyDeviceToDevice));
    });
    std::printf("cudaMemcpy: 1 GiB in %.3f ms = %.0f GB/s (read + write)\n", ms,
                2.0 * n * 16 / ms / 1e6);
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  const int bulkSmem = kD * kD * 4;
  CK(cudaFuncSetAttribute(stepBulk, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          bulkSmem));
  CK(cudaFuncSetAttribute(stepPersistent<2>,
                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                          2 * bulkSmem));
  CK(cudaFuncSetAttribute(stepPersistent<3>,
                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                          3 * bulkSmem));
  for (int64_t B : {1, 8, 64, 256}) {
    int64_t rows = B * kH;
    float *q = devFill(rows * kD, -1, 1, 1), *k = devFill(rows * kD, -1, 1, 2),
          *v = devFill(rows * kD, -1, 1, 3),
          *g = devFill(rows * kD, -0.1f, 0, 4), *beta = devFill(rows, 0, 1, 5);
    int64_t stateN = B * kH * kD * kD;
    float *init = devFill(stateN, -1, 1, 6), *st, *out, *refState, *refOut;
    CK(cudaMalloc(&st, stateN * 4));
    CK(cudaMalloc(&refState, stateN * 4));
    CK(cudaMalloc(&out, rows * kD * 4));
    CK(cudaMalloc(&refOut, rows * kD * 4));
    std::vector<int32_t> seqs(B);
    for (int64_t i = 0; i < B; ++i)
      seqs[i] = int32_t((i * 7) % B); // a permutation for B in {1, 8, 64, 256}
    int32_t *dSeq;
    CK(cudaMalloc(&dSeq, B * 4));
    CK(cudaMemcpy(dSeq, seqs.data(), B * 4, cudaMemcpyHostToDevice));
    const double scale = 1.0 / std::sqrt(double(kD));
    int64_t slotBytes = int64_t(kH) * kD * kD * 4;
    auto library = [&](float *s, float *o) {
      daybreak_kda_step<<<B * kH * 2, 256>>>(
          q, k, v, g, beta, reinterpret_cast<uint8_t *>(s), slotBytes, 0, dSeq,
          B, kH, B, kD, kD, scale, 1, o);
    };
    auto regs = [&](float *s, float *o) {
      stepRegs<3>
          <<<dim3(2 * kH, B), 256>>>(q, k, v, g, beta, s, dSeq, B, scale, o);
    };
    auto regsLib = [&](float *s, float *o) {
      stepRegs<3, false>
          <<<dim3(B, kH, 2), 256>>>(q, k, v, g, beta, s, dSeq, B, scale, o);
    };
    auto regs4 = [&](float *s, float *o) {
      stepRegs<4>
          <<<dim3(2 * kH, B), 256>>>(q, k, v, g, beta, s, dSeq, B, scale, o);
    };
    auto bulk = [&](float *s, float *o) {
      stepBulk<<<dim3(kH, B), 512, bulkSmem>>>(q, k, v, g, beta, s, dSeq, B,
                                               scale, o);
    };
    auto pers2 = [&](float *s, float *o) {
      stepPersistent<2>
          <<<sms, 512, 2 * bulkSmem>>>(q, k, v, g, beta, s, dSeq, B, scale, o);
    };
    auto pers3 = [&](float *s, float *o) {
      stepPersistent<3>
          <<<sms, 512, 3 * bulkSmem>>>(q, k, v, g, beta, s, dSeq, B, scale, o);
    };
    // Reference: one library step from `init`.
    CK(cudaMemcpy(refState, init, stateN * 4, cudaMemcpyDeviceToDevice));
    library(refState, refOut);
    CK(cudaDeviceSynchronize());
    std::vector<float> rs(stateN), ro(rows * kD), ts(stateN), to(rows * kD);
    CK(cudaMemcpy(rs.data(), refState, stateN * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ro.data(), refOut, rows * kD * 4, cudaMemcpyDeviceToHost));
    double bytes = 2.0 * stateN * 4 + double(rows) * (5 * kD + 1) * 4;
    struct V {
      const char *name;
      std::function<void(float *, float *)> f;
    } variants[] = {{"library", library},    {"regs-token-major", regsLib},
                    {"regs-adjacent", regs}, {"regs-adjacent-4", regs4},
                    {"bulk-3/SM", bulk},     {"persistent-2", pers2},
                    {"persistent-3", pers3}};
    for (auto &var : variants) {
      CK(cudaMemcpy(st, init, stateN * 4, cudaMemcpyDeviceToDevice));
      var.f(st, out);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(ts.data(), st, stateN * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(to.data(), out, rows * kD * 4, cudaMemcpyDeviceToHost));
      double es = 0, eo = 0;
      for (int64_t i = 0; i < stateN; ++i)
        es = std::max(es, double(std::fabs(ts[i] - rs[i])));
      for (int64_t i = 0; i < rows * kD; ++i)
        eo = std::max(eo, double(std::fabs(to[i] - ro[i])));
      // Timing on a state that keeps evolving (values stay bounded: g <= 0,
      // beta < 1, unit q and k).
      float ms = timeIt(B >= 64 ? 50 : 500, [&] { var.f(st, out); });
      std::printf("B=%-4lld %-15s %8.2f us %6.0f GB/s  max|dstate| %.1e "
                  "max|dout| %.1e\n",
                  (long long)B, var.name, ms * 1e3, bytes / ms / 1e6, es, eo);
    }
    for (float *p : {q, k, v, g, beta, init, st, out, refState, refOut})
      CK(cudaFree(p));
    CK(cudaFree(dSeq));
  }
  return 0;
}
