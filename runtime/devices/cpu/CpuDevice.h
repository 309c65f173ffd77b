//===- CpuDevice.h - Running artifact launches on the CPU -------*- C++ -*-===//
//
// The CPU device: weights read as stored (f32, bf16, e4m3 with block scales)
// where the artifact is mapped, caches with paged views, one arena,
// the generated x86-64 kernels loaded from the artifact with dlopen, and
// prepared launches dispatched to the kernels of CpuKernels.h on a thread
// pool through one launcher per declared kernel.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_DEVICES_CPU_CPUDEVICE_H
#define DAYBREAK_RUNTIME_DEVICES_CPU_CPUDEVICE_H

#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/core/Device.h"
#include "runtime/core/Dispatch.h"

#include <cstdlib>
#include <map>
#include <memory>

namespace daybreak::cpu {

class CpuDevice final : public runtime::Device {
public:
  explicit CpuDevice(unsigned threads) : pool(threads) {}
  ~CpuDevice() override;

  std::string name() const override { return "cpu"; }
  Status prepare(const artifact::ArtifactFile &file,
                 const std::vector<runtime::PreparedStep> &steps) override;
  Status writeArena(uint64_t offset, const void *data, size_t bytes) override;
  Status readArena(uint64_t offset, void *data, size_t bytes) override;
  Status launch(const runtime::PreparedLaunch &launch,
                int64_t tokens) override;
  uint64_t residentBytes() const override;
  Status copyCacheRows(int cache, int64_t srcSeq, int64_t srcPos,
                       int64_t dstSeq, int64_t dstPos, int64_t rows) override;
  Status readCacheRows(int cache, int64_t seq, int64_t pos, int64_t rows,
                       void *out) override;
  /// memcpy between two buffers of `bytes` (capped at 1 GiB).
  StatusOr<double> copyBandwidth(uint64_t bytes) override;

  /// What the dispatch binds launches to.
  uint64_t arenaAddress() const {
    return reinterpret_cast<uintptr_t>(arena.data.get());
  }
  const uint64_t *weightAddresses() const { return weightAddressTable.data(); }
  /// The kernels this device implements.
  static const runtime::LauncherTable<CpuDevice> &launchers();

private:
  /// Row (seq, pos) of cache `cache`, after checking that `rows` rows from
  /// there lie inside the slot.
  StatusOr<uint8_t *> cacheRows(int cache, int64_t seq, int64_t pos,
                                int64_t rows) const;
  /// dlopens the generated kernels of the "code.x86_64" section.
  Status loadGeneratedCode(const artifact::ArtifactFile &file);

  friend struct CpuLaunchers;
  using ElementwiseFn = void (*)(int64_t, const float *const *, float *);

  /// Zeroed allocations that report failure instead of aborting.
  struct Allocation {
    std::unique_ptr<uint8_t, void (*)(void *)> data{nullptr, free};
    size_t size = 0;
  };
  static Status allocate(Allocation &a, uint64_t bytes, const std::string &what);

  const artifact::Manifest *manifest = nullptr;
  const std::vector<runtime::PreparedStep> *steps = nullptr;
  ThreadPool pool;
  /// Each manifest weight's bytes as stored, in the mapped artifact.
  std::vector<uint64_t> weightAddressTable;
  uint64_t weightBytes = 0;
  /// Weights assembled from several referenced pieces.
  std::vector<Allocation> assembled;
  std::vector<Allocation> cacheBytes;
  std::vector<CacheView> caches;
  std::vector<int32_t> pageTable;
  Allocation arena;
  void *codeHandle = nullptr;
  /// The generated kernel of each elementwise launch, by launch ordinal.
  std::vector<ElementwiseFn> generated;
};

} // namespace daybreak::cpu

#endif // DAYBREAK_RUNTIME_DEVICES_CPU_CPUDEVICE_H
