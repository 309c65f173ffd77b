//===- Nccl.h - NCCL, loaded at run time ------------------------*- C++ -*-===//
//
// The CUDA device's collectives (docs/parallel.md) run through NCCL, opened
// as the driver is: dlopen of the library DAYBREAK_NCCL_LIBRARY names, else
// "libnccl.so.2", so one binary serves machines with and without it and a
// machine without it gets an error naming the library, not a link failure.
// The few types of NCCL's C ABI the runtime passes (stable since NCCL 2.0)
// are declared here, so the runtime builds without NCCL's headers; where
// nccl.h is present, Nccl.cpp checks them against it.
//
// An NcclCommunicator is one rank's member of a group whose ranks already
// meet through a host runtime::Communicator (threads of one process, or
// processes started by a launcher and joined over TCP): rank 0 makes
// NCCL's unique id and the host communicator carries it to the others.
// Collectives are queued on the device's stream, so they record into its
// CUDA graphs like any launch. NCCL itself never times out, so a rank that
// died would hang the others: `wait` polls the stream and NCCL's
// asynchronous error, and past the timeout aborts the communicator and
// returns an error naming the wait, so every surviving rank reports instead
// of hanging.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_DEVICES_CUDA_NCCL_H
#define DAYBREAK_RUNTIME_DEVICES_CUDA_NCCL_H

#include "runtime/core/Communicator.h"
#include "runtime/devices/cuda/CudaDriver.h"

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace daybreak::cuda {

/// NCCL's C ABI, as nccl.h 2.x declares it.
namespace nccl {
struct Comm;
using CommHandle = Comm *;
struct UniqueId {
  char internal[128];
};
using Result = int; ///< ncclResult_t; 0 is ncclSuccess
inline constexpr Result kSuccess = 0;
inline constexpr Result kInProgress = 7; ///< ncclInProgress
using DataType = int;
inline constexpr DataType kFloat32 = 7; ///< ncclFloat32
using RedOp = int;
inline constexpr RedOp kSum = 0; ///< ncclSum
} // namespace nccl

/// A pointer to a function of type F.
template <typename F> using FunctionPointer = F *;

/// The entry points Daybreak uses: name, function type.
#define DAYBREAK_NCCL_ENTRY_POINTS(X)                                          \
  X(ncclGetVersion, nccl::Result(int *))                                       \
  X(ncclGetErrorString, const char *(nccl::Result))                            \
  X(ncclGetUniqueId, nccl::Result(nccl::UniqueId *))                           \
  X(ncclCommInitRank,                                                          \
    nccl::Result(nccl::CommHandle *, int, nccl::UniqueId, int))                \
  X(ncclCommDestroy, nccl::Result(nccl::CommHandle))                           \
  X(ncclCommAbort, nccl::Result(nccl::CommHandle))                             \
  X(ncclCommGetAsyncError, nccl::Result(nccl::CommHandle, nccl::Result *))     \
  X(ncclAllReduce, nccl::Result(const void *, void *, size_t, nccl::DataType,  \
                                nccl::RedOp, nccl::CommHandle, CUstream))      \
  X(ncclAllGather, nccl::Result(const void *, void *, size_t, nccl::DataType,  \
                                nccl::CommHandle, CUstream))

class Nccl {
public:
  /// Opens the library once per process: DAYBREAK_NCCL_LIBRARY's path if
  /// set, else libnccl.so.2 on the loader's path. The error names the
  /// library and the loader's reason, or the missing entry point.
  static StatusOr<const Nccl *> get();
  /// Opens the library at `path` (a name the loader searches for, or a
  /// path): what get() does once. The library stays loaded.
  static StatusOr<std::unique_ptr<Nccl>> open(const std::string &path);

#define DAYBREAK_DECLARE_ENTRY(name, ...)                                      \
  FunctionPointer<__VA_ARGS__> name = nullptr;
  DAYBREAK_NCCL_ENTRY_POINTS(DAYBREAK_DECLARE_ENTRY)
#undef DAYBREAK_DECLARE_ENTRY
  /// NCCL 2.13 and later; null before.
  const char *(*ncclGetLastError)(nccl::CommHandle) = nullptr;

  /// Success, or "<call>: <ncclGetErrorString> (<ncclGetLastError>)".
  Status check(nccl::Result result, const char *call,
               nccl::CommHandle comm = nullptr) const;

  int version = 0; ///< ncclGetVersion's, e.g. 22805 for 2.28.5
  std::string path; ///< the library opened
};

class NcclCommunicator {
public:
  /// Joins `host`'s group on the current context's device: rank 0 makes
  /// the unique id, `host` carries it to every rank, and every rank calls
  /// ncclCommInitRank (which returns once all have). `host`'s timeout
  /// bounds every later `wait`.
  static StatusOr<std::unique_ptr<NcclCommunicator>>
  create(const Driver &driver, runtime::Communicator &host);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;

  int64_t rank() const { return index; }
  int64_t size() const { return ranks; }
  /// Queues out[i] = the sum over the ranks of their in[i] on `stream`.
  Status allReduceSum(CUdeviceptr in, CUdeviceptr out, int64_t count,
                      CUstream stream);
  /// Queues out[r * count + i] = rank r's in[i] (rank-major) on `stream`.
  Status allGather(CUdeviceptr in, CUdeviceptr out, int64_t count,
                   CUstream stream);
  /// Waits until `stream` is idle, checking NCCL's asynchronous error as
  /// it goes. An error (and the communicator aborted, so it fails at once
  /// from then on) when NCCL reports one or the timeout passes: a rank
  /// that stopped, or never reached the same collective.
  Status wait(CUstream stream, const char *what);

private:
  NcclCommunicator(const Driver &driver, const Nccl &library,
                   nccl::CommHandle comm, int64_t index, int64_t ranks,
                   std::chrono::milliseconds timeout)
      : driver(driver), library(library), comm(comm), index(index),
        ranks(ranks), timeout(timeout) {}
  /// Aborts the communicator and keeps `error` for every later call.
  Status fail(Status error);

  const Driver &driver;
  const Nccl &library;
  nccl::CommHandle comm;
  int64_t index, ranks;
  std::chrono::milliseconds timeout;
  std::optional<Status> broken;
};

} // namespace daybreak::cuda

#endif // DAYBREAK_RUNTIME_DEVICES_CUDA_NCCL_H
