//===- CpuGemm.cpp - Cache-blocked fp32 GEMM with an AVX2 fast path -------===//
//
// BLIS-style blocking: W is packed into NR-wide panels of KC rows (L1/L2),
// x into MR-row slivers of an MC x KC block, and an MR x NR register tile
// accumulates each KC block before it is added to the output. The same
// template is compiled for baseline x86-64 (SSE, 4 x 8 tiles) and, chosen at
// run time, for AVX2+FMA (6 x 16 tiles); artifacts therefore run anywhere.
// Few-row products against [N, K] weights (decode) skip packing and stream W
// once with vectorised dot products.
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cpu/CpuGemm.h"
#include "runtime/devices/cpu/Scratch.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define DAYBREAK_X86 1
#endif

namespace daybreak::cpu::detail {
namespace {

#define DAYBREAK_INLINE inline __attribute__((always_inline))

typedef float V4 __attribute__((vector_size(16)));
typedef float V8 __attribute__((vector_size(32)));

constexpr int64_t KC = 256, MC = 96, NC = 256;

namespace baseline {
#include "runtime/devices/cpu/CpuGemmKernels.inc"
} // namespace baseline

#ifdef DAYBREAK_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
#include "runtime/devices/cpu/CpuGemmKernels.inc"
} // namespace avx2
#pragma GCC pop_options
#endif

void gemmBaseline(const float *x, int64_t lda, const float *w, int64_t ldw,
                  bool wIsKN, const float *bias, float *out, int64_t ldc,
                  int64_t m, int64_t n0, int64_t n1, int64_t k) {
  baseline::gemmImpl<V4, 4, 8, false>(x, lda, w, ldw, wIsKN, bias, out, ldc, m,
                                      n0, n1, k);
}

#ifdef DAYBREAK_X86
__attribute__((target("avx2,fma"))) void
gemmAvx2(const float *x, int64_t lda, const float *w, int64_t ldw, bool wIsKN,
         const float *bias, float *out, int64_t ldc, int64_t m, int64_t n0,
         int64_t n1, int64_t k) {
  avx2::gemmImpl<V8, 6, 16, true>(x, lda, w, ldw, wIsKN, bias, out, ldc, m, n0,
                                  n1, k);
}

bool hasAvx2() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
#endif

} // namespace

void gemm(const float *x, int64_t lda, const float *w, int64_t ldw, bool wIsKN,
          const float *bias, float *out, int64_t ldc, int64_t m, int64_t n0,
          int64_t n1, int64_t k) {
#ifdef DAYBREAK_X86
  if (hasAvx2())
    return gemmAvx2(x, lda, w, ldw, wIsKN, bias, out, ldc, m, n0, n1, k);
#endif
  gemmBaseline(x, lda, w, ldw, wIsKN, bias, out, ldc, m, n0, n1, k);
}

} // namespace daybreak::cpu::detail
