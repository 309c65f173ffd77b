//===- KernelProbe.cuh - What the standalone kernel benches share -*- CUDA
//-*-===//
//
// Included first by the standalone benches (kda_step_variants.cu,
// mxfp4_variants.cu), which nvcc builds whole on the GPU machine: the
// kernel library itself, the host side it needs there, an error check and
// a copy probe.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_BENCH_KERNELPROBE_CUH
#define DAYBREAK_BENCH_KERNELPROBE_CUH

#include "../runtime/devices/cuda/CudaKernels.cu"

#include <cstdio>
#include <cstdlib>

// The library declares its L2 flag `extern "C" __constant__` with an
// initialiser, which nvcc's whole-program host pass leaves undefined (the
// runtime loads the PTX and never registers it): define the host shadow.
#if !defined(__CUDA_ARCH__)
__asm__(".pushsection .data\n.globl daybreak_l2_evict_first\n.balign 4\n"
        "daybreak_l2_evict_first: .long 1\n.popsection");
#endif

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));    \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

/// Copies n float4 (grid-stride): the copy bandwidth the benches report
/// their rates against.
__global__ void copyProbe(const float4 *in, float4 *out, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

#endif // DAYBREAK_BENCH_KERNELPROBE_CUH
