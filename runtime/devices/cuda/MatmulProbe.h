//===- MatmulProbe.h - The GPU's attainable tensor-core rate ----*- C++ -*-===//
//
// What a dense bf16 GEMM attains on this GPU, as the roofline that prefill
// is measured against: cuBLAS's GEMM (bf16 inputs, fp32 accumulation),
// opened with dlopen like the driver, so nothing links against it. Used by
// `daybreak-run bench`; an error says why when cuBLAS is not there.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_DEVICES_CUDA_MATMULPROBE_H
#define DAYBREAK_RUNTIME_DEVICES_CUDA_MATMULPROBE_H

#include "runtime/devices/cuda/CudaDriver.h"

namespace daybreak::cuda {

/// FLOP/s of the best of several n x n x n bf16 GEMMs on `stream` (random
/// inputs; 2n^3 FLOPs each). `how` describes the measurement. The library
/// is $DAYBREAK_CUBLAS, else libcublas.so.13 / libcublas.so on the loader's
/// path or in /usr/local/cuda/lib64.
StatusOr<double> cublasMatmulRate(const Driver &driver, CUstream stream,
                                  int64_t n, std::string &how);
/// The same for out [m, n] = x [m, k] . w [n, k]^T (both row-major, bf16),
/// out fp32 (`f32Out`, as Daybreak's GEMMs write) or bf16.
StatusOr<double> cublasMatmulRate(const Driver &driver, CUstream stream,
                                  int64_t m, int64_t n, int64_t k, bool f32Out,
                                  std::string &how);

} // namespace daybreak::cuda

#endif // DAYBREAK_RUNTIME_DEVICES_CUDA_MATMULPROBE_H
