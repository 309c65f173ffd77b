//===- CudaTarget.h - The CUDA target ---------------------------*- C++ -*-===//
//
// NVIDIA Hopper GPUs (sm_90a): the CUDA kernel library (CudaKernels.cu),
// specialised for the plan's shapes with NVRTC by
// plan-specialize-library-kernels, and the generated kernels compiled by
// CudaCodegen to PTX; each goes into the artifact as PTX and, where ptxas is
// installed, as a cubin.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_TARGETS_CUDA_CUDATARGET_H
#define DAYBREAK_COMPILER_TARGETS_CUDA_CUDATARGET_H

namespace daybreak::targets {
class Target;
} // namespace daybreak::targets

namespace daybreak::targets::cuda {

/// The `cuda` target (a singleton; look it up with getTarget("cuda")).
const Target &getCudaTarget();

} // namespace daybreak::targets::cuda

#endif // DAYBREAK_COMPILER_TARGETS_CUDA_CUDATARGET_H
