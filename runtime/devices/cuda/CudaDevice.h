//===- CudaDevice.h - Running artifact launches on an NVIDIA GPU -*- C++ -*-===//
//
// The CUDA device: weights decoded to fp32 once and uploaded once, the
// arena, caches and page tables allocated once in device memory, the
// artifact's kernel modules (the library and the generated kernels, as PTX
// the driver compiles for the GPU at load) loaded once. A step launches on
// one stream and synchronises only to read its outputs back.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_DEVICES_CUDA_CUDADEVICE_H
#define DAYBREAK_RUNTIME_DEVICES_CUDA_CUDADEVICE_H

#include "runtime/core/Device.h"
#include "runtime/core/Dispatch.h"
#include "runtime/devices/cuda/CudaKernels.h"
#include "runtime/devices/cuda/Nccl.h"

#include <map>
#include <optional>

namespace daybreak::cuda {

class CudaDevice final : public runtime::Device {
public:
  /// The device `ordinal` of the driver; fails with the driver's reason.
  static StatusOr<std::unique_ptr<CudaDevice>> open(int ordinal);
  /// Dense attention on the tensor cores where they apply and a launch does
  /// not split over keys (prefill, large decode batches; bf16 and fp8
  /// caches): 5-10x faster, not the exact mode's precision
  /// (CudaAttention.cuh); sparse MLA on the tensor cores wherever it
  /// applies (bf16 Q and P, CudaSparseMla.cuh). Off by default.
  void preferTensorCoreAttention(bool prefer) {
    attentionPath =
        prefer ? AttentionPath::PreferTensorCores : AttentionPath::Auto;
  }
  /// Matmul inputs rounded to bf16 where the weight is stored below fp32
  /// (`daybreak-run --precision=bf16`, InputRounding); with `fp8`
  /// (`--precision=fp8`), those of e4m3 weights that
  /// runtime::fp8InputsApply names quantized to FP8 (the FP8 GEMMs)
  /// instead. Before prepare().
  void roundMatmulInputs(bool bf16, bool fp8 = false) {
    bf16Inputs = bf16 || fp8;
    fp8Inputs = fp8;
  }
  /// The kernel every mxfp4_expert_matmul takes (`daybreak-run
  /// --mxfp4-kernel`; Mxfp4Kernel::Auto, the default, by its rule), so that
  /// a fixture's few tokens can run a path Auto keeps for more: prepare()
  /// then plans the forced kernel's scratch at every size. A forced kernel
  /// fails a launch it does not apply to. Before prepare().
  void forceMxfp4Kernel(Mxfp4Kernel kernel) { mxfp4Kernel = kernel; }
  ~CudaDevice() override;

  std::string name() const override {
    return "cuda:" + std::to_string(ordinal);
  }
  /// cuDeviceGetName.
  std::string hardware() const override;
  Status prepare(const artifact::ArtifactFile &file,
                 const std::vector<runtime::PreparedStep> &steps) override;
  Status writeArena(uint64_t offset, const void *data, size_t bytes) override;
  Status readArena(uint64_t offset, void *data, size_t bytes) override;
  Status launch(const runtime::PreparedLaunch &launch,
                int64_t tokens) override;
  uint64_t residentBytes() const override { return allocated; }
  /// Prefill launches directly; decode replays a CUDA graph recorded the
  /// first time each token count (batch size) is seen. Side-queue launches
  /// (PreparedLaunch::queue) run on a second stream, forked from the main
  /// one where they stand and joined where a launch says or at the end.
  Status runLaunches(const runtime::PreparedStep &step,
                     int64_t tokens) override;
  /// CUDA events around the launches (a decode step's graph replay).
  StatusOr<double> timeLaunches(const runtime::PreparedStep &step,
                                int64_t tokens) override;
  /// CUDA events between the launches: recorded into a graph and replayed
  /// for a decode step (as runLaunches runs it), issued one by one else.
  /// The graph runs the step twice (a warm-up, then the timed replay): a
  /// step with recurrent state advances it twice, as repeated timed runs do.
  StatusOr<std::vector<double>>
  profileLaunches(const runtime::PreparedStep &step,
                  int64_t tokens) override;
  /// cuMemcpyDtoDAsync between two allocations outside the pool.
  StatusOr<double> copyBandwidth(uint64_t bytes) override;
  /// cuBLAS's bf16 GEMM with fp32 accumulation (see MatmulProbe.h).
  StatusOr<double> matmulRate(std::string &how) override;
  /// Decode graphs recorded so far.
  size_t graphCount() const { return graphs.size(); }
  /// How the kernel modules were loaded: "cubin (sm_90a)" or "ptx (...)".
  std::string codeLoadedAs() const {
    return "library " + libraryLoadedAs +
           (generatedLoadedAs.empty() ? "" : ", generated " + generatedLoadedAs);
  }
  /// The model's device memory as cuMemGetInfo saw it taken at load.
  uint64_t measuredResidentBytes() const override { return measuredBytes; }
  /// Free and total device memory now (cuMemGetInfo).
  StatusOr<std::pair<size_t, size_t>> memoryInfo() const;

  /// What the dispatch binds launches to.
  uint64_t arenaAddress() const { return arena; }
  const uint64_t *weightAddresses() const { return weightAddressTable.data(); }
  /// The kernels this device implements.
  static const runtime::LauncherTable<CudaDevice> &launchers();

protected:
  /// Copies of the host's entries on the stream.
  Status uploadPageTable(int64_t first, int64_t count) override;
  Status copyCacheBytes(int cache, uint64_t dst, uint64_t src,
                        uint64_t bytes) override;
  Status readCacheBytes(int cache, uint64_t src, void *out,
                        uint64_t bytes) override;
  Status writeCacheBytes(int cache, uint64_t dst, const void *in,
                         uint64_t bytes) override;
  Status zeroCacheBytes(int cache, uint64_t offset, uint64_t bytes) override;

private:
  CudaDevice(const Driver &driver, int ordinal, CUdevice device,
             CUcontext context)
      : driver(driver), ordinal(ordinal), device(device), context(context) {}

  /// Launches on the side stream after the main stream's work so far.
  Status launchOnSideQueue(const runtime::PreparedLaunch &launch,
                           int64_t tokens);
  /// Makes the main stream wait for the side stream's work so far, or for
  /// its first `count` launches of the step.
  Status joinSideQueue();
  Status joinSideQueue(uint32_t count);

  /// The `i`th of the events timing uses, created on first use.
  StatusOr<CUevent> event(size_t i);
  /// Milliseconds between two recorded events, after waiting for the end.
  StatusOr<double> elapsed(CUevent start, CUevent end);
  /// A 256-byte-aligned piece of the pool.
  StatusOr<CUdeviceptr> allocate(size_t bytes, const std::string &what);
  Status upload(CUdeviceptr dst, const void *src, size_t bytes);

  friend struct CudaLaunchers;

  const Driver &driver;
  int ordinal;
  CUdevice device;
  CUcontext context;
  const artifact::Manifest *manifest = nullptr;
  const std::vector<runtime::PreparedStep> *steps = nullptr;
  /// The stream the launchers issue on: the main one, or the side one
  /// while launchOnSideQueue runs a launcher.
  CUstream stream = nullptr;
  /// The side queue's stream, the event that forks it from the main stream
  /// and one recorded after each side launch of a step (sideDone[i] after
  /// its launch i: made at prepare, for the step with the most); the
  /// step's last side launch the main stream has not waited for (-1: none);
  /// whether launches ignore the queues (profiles and finite checks, which
  /// read each launch's results after it).
  CUstream sideStream = nullptr;
  CUevent forkEvent = nullptr;
  std::vector<CUevent> sideDone;
  int64_t sidePending = -1;
  bool serialQueues = false;
  std::vector<CUevent> events;
  /// Recorded decode steps by (step, token count).
  std::map<std::pair<const runtime::PreparedStep *, int64_t>, CUgraphExec>
      graphs;
  CUdeviceptr pool = 0;
  size_t poolSize = 0, poolUsed = 0;
  uint64_t allocated = 0;
  /// Device memory the pool took, by cuMemGetInfo before and after.
  uint64_t measuredBytes = 0;
  CUmodule libraryModule = nullptr, generatedModule = nullptr;
  /// The generated kernels begin as programmatic dependents (their code
  /// image's dependent_launch): launched so.
  bool generatedDependent = false;
  std::string libraryLoadedAs, generatedLoadedAs;
  std::optional<CudaKernels> kernels;
  Mxfp4Kernel mxfp4Kernel = Mxfp4Kernel::Auto;
  /// Per launch ordinal: the specialised library kernel (or null), the
  /// generated kernel and the device array of its input pointers
  /// (elementwise launches).
  std::vector<CUfunction> specializedFns, generatedFns;
  /// The FP8 GEMM tile the compiler recorded on each launch (`cuda_tile`;
  /// rows 0: none, the launcher chooses), by ordinal.
  std::vector<Fp8GemmTile> gemmTiles;
  std::vector<CUdeviceptr> inputTables;
  std::vector<CUdeviceptr> weights;
  std::vector<uint64_t> weightAddressTable; ///< the same, for the dispatch
  std::vector<DeviceCacheView> caches;
  CUdeviceptr pageTable = 0;
  CUdeviceptr arena = 0;
  uint64_t arenaSize = 0;
  /// Scratch of sparse and dense attention launches split over their keys.
  CUdeviceptr attentionPartials = 0;
  AttentionPath attentionPath = AttentionPath::Auto;
  int64_t attentionPartialFloats = 0;
  /// Scratch of grouped expert matmuls on the tensor cores (rows ordered
  /// by expert, tiles, per-slot results), sized for the largest launch at
  /// the step's maximum token count.
  CUdeviceptr expertScratch = 0;
  int64_t expertScratchBytes = 0;
  /// kda_chunk's scratch (CudaKernels::kdaChunkScratchBytes) for the
  /// largest launch at the step's maximum token count.
  CUdeviceptr kdaScratch = 0;
  uint64_t kdaScratchBytes = 0;
  /// mhc_pre's and mhc_post_pre's partial sums (mhcPreScratchBytes) for
  /// the largest launch at the step's maximum token count.
  CUdeviceptr mhcScratch = 0;
  uint64_t mhcScratchBytes = 0;
  /// roundMatmulInputs: on or off, and the rounded copies' scratch, sized
  /// for the largest input a launch rounds outside the tensor-core GEMMs.
  bool bf16Inputs = false, fp8Inputs = false;
  CUdeviceptr roundScratch = 0;
  int64_t roundScratchFloats = 0;
  InputRounding rounding() const {
    return {bf16Inputs, roundScratch, roundScratchFloats, fp8Inputs};
  }
  /// The collectives of a rank's plan (all_reduce, all_gather): NCCL over
  /// the group of the communicator the runtime gave the device, made at
  /// prepare; and all_gather's rank-major result before it is laid out
  /// along the last dim, sized for the largest launch.
  std::unique_ptr<NcclCommunicator> nccl;
  CUdeviceptr gatherScratch = 0;
  uint64_t gatherScratchBytes = 0;
  /// Waits for the stream: through NCCL's watch of its collectives (which
  /// times out naming the wait) when the plan has any.
  Status synchronize(const char *what);
};

} // namespace daybreak::cuda

#endif // DAYBREAK_RUNTIME_DEVICES_CUDA_CUDADEVICE_H
