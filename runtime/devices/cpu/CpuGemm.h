//===- CpuGemm.h - The serial fp32 GEMM core of the CPU kernels -*- C++ -*-===//
//
// Private to runtime/devices/cpu: one serial, cache-blocked GEMM that the
// matmul, head, expert and attention kernels call on their own tiles of work.
// Each output element's arithmetic depends only on m, k and the layouts, never
// on how callers split columns, so results do not change with thread count.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_DEVICES_CPU_CPUGEMM_H
#define DAYBREAK_RUNTIME_DEVICES_CPU_CPUGEMM_H

#include <cstdint>

namespace daybreak::cpu::detail {

/// out[i * ldc + j] = sum_p x[i * lda + p] * W(j, p) (+ bias[j]) for i < m and
/// j in [n0, n1), where W(j, p) is w[j * ldw + p] (weights [N, K]) or, with
/// wIsKN, w[p * ldw + j] (weights [K, N]). bias may be null. Accumulates in
/// fp32 in blocks of K, each block summed separately. Thread-safe: the packed
/// panels come from currentScratch() (Scratch.h).
void gemm(const float *x, int64_t lda, const float *w, int64_t ldw, bool wIsKN,
          const float *bias, float *out, int64_t ldc, int64_t m, int64_t n0,
          int64_t n1, int64_t k);

} // namespace daybreak::cpu::detail

#endif // DAYBREAK_RUNTIME_DEVICES_CPU_CPUGEMM_H
