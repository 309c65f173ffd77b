//===- CudaDriver.h - The CUDA driver API, loaded at run time ---*- C++ -*-===//
//
// Daybreak's runtime has no link-time CUDA dependency: the driver is opened
// with dlopen("libcuda.so.1") and every entry point it uses is resolved with
// cuGetProcAddress at a fixed ABI version, so one binary runs on machines
// with and without a GPU. Every call is checked; failures become a Status
// naming the call and the CUDA error (e.g. "cuMemAlloc:
// CUDA_ERROR_OUT_OF_MEMORY (out of memory)"). The loaded driver is a
// process-wide immutable table; thread-safe after `get`.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_DEVICES_CUDA_CUDADRIVER_H
#define DAYBREAK_RUNTIME_DEVICES_CUDA_CUDADRIVER_H

#include "runtime/support/Status.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>
#include <vector>

namespace daybreak::cuda {

/// The entry points Daybreak uses: name, typedef, the ABI version asked of
/// cuGetProcAddress.
#define DAYBREAK_CUDA_ENTRY_POINTS(X)                                          \
  X(cuInit, PFN_cuInit_v2000, 2000)                                            \
  X(cuDriverGetVersion, PFN_cuDriverGetVersion_v2020, 2020)                    \
  X(cuGetErrorName, PFN_cuGetErrorName_v6000, 6000)                            \
  X(cuGetErrorString, PFN_cuGetErrorString_v6000, 6000)                        \
  X(cuDeviceGetCount, PFN_cuDeviceGetCount_v2000, 2000)                        \
  X(cuDeviceGet, PFN_cuDeviceGet_v2000, 2000)                                  \
  X(cuDeviceGetName, PFN_cuDeviceGetName_v2000, 2000)                          \
  X(cuDeviceTotalMem, PFN_cuDeviceTotalMem_v3020, 3020)                        \
  X(cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000, 2000)                \
  X(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000, 7000)        \
  X(cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000, 11000)    \
  X(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000, 4000)                          \
  X(cuCtxSynchronize, PFN_cuCtxSynchronize_v2000, 2000)                        \
  X(cuModuleLoadDataEx, PFN_cuModuleLoadDataEx_v2010, 2010)                    \
  X(cuModuleUnload, PFN_cuModuleUnload_v2000, 2000)                            \
  X(cuModuleGetFunction, PFN_cuModuleGetFunction_v2000, 2000)                  \
  X(cuModuleGetGlobal, PFN_cuModuleGetGlobal_v3020, 3020)                      \
  X(cuMemAlloc, PFN_cuMemAlloc_v3020, 3020)                                    \
  X(cuMemFree, PFN_cuMemFree_v3020, 3020)                                      \
  X(cuMemGetInfo, PFN_cuMemGetInfo_v3020, 3020)                                \
  X(cuMemcpyHtoD, PFN_cuMemcpyHtoD_v3020, 3020)                                \
  X(cuMemcpyDtoH, PFN_cuMemcpyDtoH_v3020, 3020)                                \
  X(cuMemsetD8, PFN_cuMemsetD8_v3020, 3020)                                    \
  X(cuMemsetD8Async, PFN_cuMemsetD8Async_v3020, 3020)                          \
  X(cuMemcpyDtoDAsync, PFN_cuMemcpyDtoDAsync_v3020, 3020)                      \
  X(cuEventCreate, PFN_cuEventCreate_v2000, 2000)                              \
  X(cuEventRecord, PFN_cuEventRecord_v2000, 2000)                              \
  X(cuEventRecordWithFlags, PFN_cuEventRecordWithFlags_v11010, 11010)          \
  X(cuEventSynchronize, PFN_cuEventSynchronize_v2000, 2000)                    \
  X(cuEventElapsedTime, PFN_cuEventElapsedTime_v2000, 2000)                    \
  X(cuEventDestroy, PFN_cuEventDestroy_v4000, 4000)                            \
  X(cuLaunchKernel, PFN_cuLaunchKernel_v4000, 4000)                            \
  X(cuLaunchKernelEx, PFN_cuLaunchKernelEx_v11060, 11060)                      \
  X(cuFuncSetAttribute, PFN_cuFuncSetAttribute_v9000, 9000)                    \
  X(cuStreamCreate, PFN_cuStreamCreate_v2000, 2000)                            \
  X(cuStreamDestroy, PFN_cuStreamDestroy_v4000, 4000)                          \
  X(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000, 2000)                  \
  X(cuStreamQuery, PFN_cuStreamQuery_v2000, 2000)                              \
  X(cuStreamWaitEvent, PFN_cuStreamWaitEvent_v3020, 3020)                      \
  X(cuMemcpy2DAsync, PFN_cuMemcpy2DAsync_v3020, 3020)                          \
  X(cuMemcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020, 3020)                      \
  X(cuMemcpyDtoHAsync, PFN_cuMemcpyDtoHAsync_v3020, 3020)                      \
  X(cuStreamBeginCapture, PFN_cuStreamBeginCapture_v10010, 10010)              \
  X(cuStreamEndCapture, PFN_cuStreamEndCapture_v10000, 10000)                  \
  X(cuGraphInstantiateWithFlags, PFN_cuGraphInstantiateWithFlags_v11040,       \
    11040)                                                                     \
  X(cuGraphLaunch, PFN_cuGraphLaunch_v10000, 10000)                            \
  X(cuGraphExecDestroy, PFN_cuGraphExecDestroy_v10000, 10000)                  \
  X(cuGraphDestroy, PFN_cuGraphDestroy_v10000, 10000)                          \
  X(cuCtxGetDevice, PFN_cuCtxGetDevice_v2000, 2000)                            \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor,                               \
    PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050, 6050)               \
  X(cuOccupancyMaxActiveClusters, PFN_cuOccupancyMaxActiveClusters_v11070,     \
    11070)                                                                     \
  X(cuTensorMapEncodeTiled, PFN_cuTensorMapEncodeTiled_v12000, 12000)

class Driver {
public:
  /// Opens and initialises the driver once per process. An error says why
  /// (no libcuda.so.1, a stub library, a missing entry point, cuInit
  /// failing) so callers can fall back to the CPU with a clear message.
  static StatusOr<const Driver *> get();

#define DAYBREAK_DECLARE_ENTRY(name, type, version) type name = nullptr;
  DAYBREAK_CUDA_ENTRY_POINTS(DAYBREAK_DECLARE_ENTRY)
#undef DAYBREAK_DECLARE_ENTRY

  /// "CUDA_ERROR_X (description)".
  std::string describe(CUresult result) const;
  /// Success, or an error "<call>: CUDA_ERROR_X (description)".
  Status check(CUresult result, const char *call) const;

  int version = 0; ///< e.g. 13000 for CUDA 13.0
};

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int computeMajor = 0, computeMinor = 0;
  size_t totalMemory = 0;
  int multiprocessors = 0;
};

/// Every CUDA device the driver sees.
StatusOr<std::vector<DeviceInfo>> listDevices(const Driver &driver);

} // namespace daybreak::cuda

#endif // DAYBREAK_RUNTIME_DEVICES_CUDA_CUDADRIVER_H
