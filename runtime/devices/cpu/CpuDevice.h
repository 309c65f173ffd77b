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
  /// Sparse MLA with the CUDA tensor-core kernel's roundings (bf16 Q and
  /// probabilities; cpu::sparseAttention's rounding), the oracle of
  /// `--attention=tensor-cores` on a GPU. Dense attention and the DSA
  /// indexer stay exact, as the GPU runs them in that mode. Off by default.
  void emulateTensorCoreAttention(bool emulate) {
    tensorCoreRounding = emulate;
  }
  /// Matmul inputs rounded to bf16 (to nearest even) where the weight is
  /// stored below fp32: `daybreak-run --precision=bf16`, the oracle of the
  /// CUDA device's InputRounding; with `fp8` (`--precision=fp8`), inputs
  /// of e4m3 weights that runtime::fp8InputsApply names quantized to FP8
  /// instead. Off by default.
  void roundMatmulInputs(bool bf16, bool fp8 = false) {
    bf16Inputs = bf16 || fp8;
    fp8Inputs = fp8;
  }
  /// For the derived tolerances (docs/bf16-tolerance.md): every rounding
  /// the modes above make (matmul inputs to bf16 or, under `fp8`, to e4m3;
  /// the indexer's q, sparse MLA's q and probabilities) becomes
  /// numerics::OperandRounding's model of it, seeded by `seed` (non-zero),
  /// instead of rounding to nearest even.
  void modelRoundingAsNoise(uint64_t seed) { noiseSeed = seed; }
  Status prepare(const artifact::ArtifactFile &file,
                 const std::vector<runtime::PreparedStep> &steps) override;
  Status writeArena(uint64_t offset, const void *data, size_t bytes) override;
  Status readArena(uint64_t offset, void *data, size_t bytes) override;
  Status launch(const runtime::PreparedLaunch &launch,
                int64_t tokens) override;
  uint64_t residentBytes() const override;
  /// memcpy between two buffers of `bytes` (capped at 1 GiB).
  StatusOr<double> copyBandwidth(uint64_t bytes) override;

  /// What the dispatch binds launches to.
  uint64_t arenaAddress() const {
    return reinterpret_cast<uintptr_t>(arena.data.get());
  }
  const uint64_t *weightAddresses() const { return weightAddressTable.data(); }
  /// The kernels this device implements.
  static const runtime::LauncherTable<CpuDevice> &launchers();

protected:
  Status uploadPageTable(int64_t first, int64_t count) override;
  Status copyCacheBytes(int cache, uint64_t dst, uint64_t src,
                        uint64_t bytes) override;
  Status readCacheBytes(int cache, uint64_t src, void *out,
                        uint64_t bytes) override;
  Status writeCacheBytes(int cache, uint64_t dst, const void *in,
                         uint64_t bytes) override;
  Status zeroCacheBytes(int cache, uint64_t offset, uint64_t bytes) override;

private:
  /// dlopens the generated kernels of the "code.x86_64" section.
  Status loadGeneratedCode(const artifact::ArtifactFile &file);

  friend struct CpuLaunchers;
  /// A generated elementwise kernel over elements [begin, end).
  using ElementwiseFn = void (*)(int64_t begin, int64_t end,
                                 const float *const *inputs, float *out);

  /// Zeroed allocations that report failure instead of aborting.
  struct Allocation {
    std::unique_ptr<uint8_t, void (*)(void *)> data{nullptr, free};
    size_t size = 0;
  };
  static Status allocate(Allocation &a, uint64_t bytes, const std::string &what);

  const artifact::Manifest *manifest = nullptr;
  const std::vector<runtime::PreparedStep> *steps = nullptr;
  ThreadPool pool;
  bool tensorCoreRounding = false;
  bool bf16Inputs = false, fp8Inputs = false;
  /// modelRoundingAsNoise's seed (0: round to nearest even), and the
  /// roundings made so far: each call's noise stream.
  uint64_t noiseSeed = 0, roundingCalls = 0;
  /// How the next call rounds its operands (under the model, a fresh noise
  /// stream).
  numerics::OperandRounding nextRounding() {
    if (!noiseSeed)
      return numerics::OperandRounding::nearestEven();
    return numerics::OperandRounding::noise(noiseSeed, ++roundingCalls);
  }
  /// roundMatmulInputs' rounded copy of the current launch's input (grown
  /// to the largest input seen, then reused).
  std::vector<float> roundedInput;
  /// Each manifest weight's bytes as stored, in the mapped artifact.
  std::vector<uint64_t> weightAddressTable;
  uint64_t weightBytes = 0;
  /// Weights assembled from several referenced pieces.
  std::vector<Allocation> assembled;
  std::vector<Allocation> cacheBytes;
  std::vector<CacheView> caches;
  Allocation arena;
  void *codeHandle = nullptr;
  /// The memfd holding the generated kernels, open while they are loaded.
  int codeFd = -1;
  /// The generated kernel of each elementwise launch, by launch ordinal.
  std::vector<ElementwiseFn> generated;
};

} // namespace daybreak::cpu

#endif // DAYBREAK_RUNTIME_DEVICES_CPU_CPUDEVICE_H
