//===- SpecializedKernels.cu - Library templates at the tests' shapes -----===//
//
// The library kernels (runtime/devices/cuda/CudaKernels.cu) plus explicit
// instantiations of their shape-specialised templates at the shapes
// CudaKernelsTest runs them, compiled to PTX by nvcc at build time. The
// compiler instantiates the same templates with NVRTC for a model's shapes
// (compiler/targets/cuda/LibraryKernels.cpp); the fixtures' GPU runs cover
// that path end to end, this covers the templates at shapes no fixture has.
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cuda/CudaKernels.cu"

#define DAYBREAK_RMS_NORM(D)                                                   \
  template __global__ void daybreak_rms_norm_t<D>(const float *, Weight,       \
                                                  int64_t, int64_t, double,    \
                                                  float *, int64_t, int64_t);
DAYBREAK_RMS_NORM(7)
DAYBREAK_RMS_NORM(1000)
DAYBREAK_RMS_NORM(7168)

#define DAYBREAK_ADD_RMS_NORM(D)                                               \
  template __global__ void daybreak_add_rms_norm_t<D>(                         \
      const float *, const float *, Weight, int64_t, int64_t, double, float *, \
      float *);
DAYBREAK_ADD_RMS_NORM(7)
DAYBREAK_ADD_RMS_NORM(1000)
DAYBREAK_ADD_RMS_NORM(7168)

#define DAYBREAK_MATMUL(K)                                                     \
  template __global__ void daybreak_matmul_small_m_t<K>(                       \
      const float *, const float *, const float *, int64_t, int64_t, int64_t,  \
      float *);
DAYBREAK_MATMUL(7168)
DAYBREAK_MATMUL(300)
DAYBREAK_MATMUL(257)

#define DAYBREAK_INDEXER(D)                                                    \
  template __global__ void daybreak_dsa_indexer_scores_t<D>(                   \
      const float *, const float *, Cache, const int32_t *, const int32_t *,   \
      int64_t, int64_t, double, QueryRope, float *);
DAYBREAK_INDEXER(128)
DAYBREAK_INDEXER(64)
DAYBREAK_INDEXER(32)
DAYBREAK_INDEXER(30)

#define DAYBREAK_SPARSE(W, V)                                                  \
  template __global__ void daybreak_sparse_attention_t<W, V>(                  \
      const float *, Cache, const int32_t *, int64_t, const int32_t *,         \
      int64_t, int64_t, double, int64_t, const float *, float *, int32_t,      \
      int32_t);
DAYBREAK_SPARSE(576, 512)
DAYBREAK_SPARSE(80, 64)

// The FP8 GEMM at stage counts the library's own entries do not have (the
// compiler's choice may differ from them).
#define DAYBREAK_FP8_GEMM(R, S)                                                \
  template __global__ void daybreak_gemm_wg_fp8_t<R, S>(                       \
      const __grid_constant__ TensorMap, const __grid_constant__ TensorMap,    \
      const float *, Weight, Weight, int64_t, int64_t, int64_t, float *);
DAYBREAK_FP8_GEMM(64, 4)
DAYBREAK_FP8_GEMM(64, 6)
DAYBREAK_FP8_GEMM(128, 4)
DAYBREAK_FP8_GEMM(128, 7)
