//===- Nccl.cpp - NCCL, loaded at run time --------------------------------===//

#include "runtime/devices/cuda/Nccl.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <thread>

#if __has_include(<nccl.h>)
#include <nccl.h>
// The declarations of Nccl.h against NCCL's own.
static_assert(sizeof(daybreak::cuda::nccl::UniqueId) == sizeof(ncclUniqueId));
static_assert(daybreak::cuda::nccl::kSuccess == ncclSuccess);
static_assert(daybreak::cuda::nccl::kInProgress == ncclInProgress);
static_assert(daybreak::cuda::nccl::kFloat32 == ncclFloat32);
static_assert(daybreak::cuda::nccl::kSum == ncclSum);
static_assert(sizeof(ncclResult_t) == sizeof(daybreak::cuda::nccl::Result));
#endif

using namespace daybreak;
using namespace daybreak::cuda;

Status Nccl::check(nccl::Result result, const char *call,
                   nccl::CommHandle comm) const {
  if (result == nccl::kSuccess)
    return Status::success();
  std::string message = std::string(call) + ": ";
  const char *name = ncclGetErrorString ? ncclGetErrorString(result) : nullptr;
  message += name ? name : "NCCL error " + std::to_string(result);
  const char *last = ncclGetLastError ? ncclGetLastError(comm) : nullptr;
  if (last && *last)
    message += std::string(" (") + last + ")";
  return Status::error(message);
}

StatusOr<std::unique_ptr<Nccl>> Nccl::open(const std::string &path) {
  void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return Status::error(
        "no NCCL (" + path + "): " + dlerror() +
        "; the CUDA device's collectives need it (DAYBREAK_NCCL_LIBRARY "
        "names the library's path)");
  auto nccl = std::make_unique<Nccl>();
  nccl->path = path;
#define DAYBREAK_RESOLVE_ENTRY(name, ...)                                      \
  nccl->name = reinterpret_cast<FunctionPointer<__VA_ARGS__>>(                 \
      dlsym(library, #name));                                                  \
  if (!nccl->name)                                                             \
    return Status::error(path + " lacks " #name);
  DAYBREAK_NCCL_ENTRY_POINTS(DAYBREAK_RESOLVE_ENTRY)
#undef DAYBREAK_RESOLVE_ENTRY
  nccl->ncclGetLastError = reinterpret_cast<decltype(nccl->ncclGetLastError)>(
      dlsym(library, "ncclGetLastError"));
  if (Status s = nccl->check(nccl->ncclGetVersion(&nccl->version),
                             "ncclGetVersion");
      !s)
    return s;
  return std::move(nccl);
}

StatusOr<const Nccl *> Nccl::get() {
  static std::once_flag once;
  static std::unique_ptr<Nccl> opened;
  static StatusOr<const Nccl *> loaded = Status::error("not loaded");
  std::call_once(once, [] {
    const char *configured = std::getenv("DAYBREAK_NCCL_LIBRARY");
    StatusOr<std::unique_ptr<Nccl>> nccl =
        open(configured && *configured ? configured : "libnccl.so.2");
    if (!nccl.ok()) {
      loaded = nccl.error();
      return;
    }
    opened = std::move(*nccl);
    loaded = static_cast<const Nccl *>(opened.get());
  });
  return loaded;
}

StatusOr<std::unique_ptr<NcclCommunicator>>
NcclCommunicator::create(const Driver &driver, runtime::Communicator &host) {
  // Every rank asks for the library before the exchange, so a rank without
  // it fails the exchange (and so every rank) instead of leaving the others
  // in ncclCommInitRank.
  StatusOr<const Nccl *> library = Nccl::get();
  nccl::UniqueId id = {};
  Status made = library.ok() ? Status::success() : library.error();
  if (host.rank() == 0 && made.ok())
    made = (*library)->check((*library)->ncclGetUniqueId(&id),
                             "ncclGetUniqueId");
  // Whether every rank can go on, each rank's as one value of a gather;
  // then rank 0's id.
  std::vector<float> flags(host.size());
  float mine = made.ok() ? 1.0f : 0.0f;
  if (Status s = host.allGather(&mine, flags.data(), 1, 1); !s)
    return s;
  for (int64_t r = 0; r < host.size(); ++r)
    if (flags[r] != 1.0f) {
      if (!made.ok())
        return made;
      return Status::error("rank " + std::to_string(r) +
                           " could not open NCCL or make its unique id");
    }
  if (Status s = host.broadcastBytes(&id, sizeof(id), 0); !s)
    return s;
  nccl::CommHandle comm = nullptr;
  if (Status s = (*library)->check(
          (*library)->ncclCommInitRank(&comm, static_cast<int>(host.size()),
                                       id, static_cast<int>(host.rank())),
          "ncclCommInitRank");
      !s)
    return s.withContext("rank " + std::to_string(host.rank()) + " of " +
                         std::to_string(host.size()));
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(
      driver, **library, comm, host.rank(), host.size(), host.timeout()));
}

NcclCommunicator::~NcclCommunicator() {
  if (!comm)
    return;
  if (broken)
    library.ncclCommAbort(comm);
  else
    library.ncclCommDestroy(comm);
}

Status NcclCommunicator::fail(Status error) {
  if (!broken) {
    library.ncclCommAbort(comm);
    comm = nullptr;
    broken = error;
  }
  return *broken;
}

Status NcclCommunicator::allReduceSum(CUdeviceptr in, CUdeviceptr out,
                                      int64_t count, CUstream stream) {
  if (broken)
    return *broken;
  return library.check(
      library.ncclAllReduce(reinterpret_cast<const void *>(in),
                            reinterpret_cast<void *>(out),
                            static_cast<size_t>(count), nccl::kFloat32,
                            nccl::kSum, comm, stream),
      "ncclAllReduce", comm);
}

Status NcclCommunicator::allGather(CUdeviceptr in, CUdeviceptr out,
                                   int64_t count, CUstream stream) {
  if (broken)
    return *broken;
  return library.check(
      library.ncclAllGather(reinterpret_cast<const void *>(in),
                            reinterpret_cast<void *>(out),
                            static_cast<size_t>(count), nccl::kFloat32, comm,
                            stream),
      "ncclAllGather", comm);
}

Status NcclCommunicator::wait(CUstream stream, const char *what) {
  if (broken)
    return *broken;
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    CUresult query = driver.cuStreamQuery(stream);
    if (query == CUDA_SUCCESS)
      return Status::success();
    if (query != CUDA_ERROR_NOT_READY)
      return fail(driver.check(query, "cuStreamQuery").withContext(what));
    nccl::Result async = nccl::kSuccess;
    Status s = library.check(library.ncclCommGetAsyncError(comm, &async),
                             "ncclCommGetAsyncError", comm);
    if (s.ok() && async != nccl::kSuccess && async != nccl::kInProgress)
      s = library.check(async, "NCCL", comm);
    if (!s.ok())
      return fail(s.withContext(what));
    auto waited = std::chrono::steady_clock::now() - start;
    if (waited > timeout)
      return fail(Status::error(
          std::string(what) + ": rank " + std::to_string(index) + " of " +
          std::to_string(ranks) + " waited " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                             timeout)
                             .count()) +
          " s for its collectives (a rank stopped, or did not reach the "
          "same collective); the NCCL communicator is aborted"));
    // A decode step takes milliseconds and its latency counts: the first
    // 50 ms are polled as often as the scheduler allows, then every 1 ms.
    if (waited < std::chrono::milliseconds(50))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
