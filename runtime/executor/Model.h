//===- Model.h - A loaded artifact ready to run steps -----------*- C++ -*-===//
//
// Loads a verified .daybreak artifact onto a device (which loads the weights
// and allocates the caches and the step arena once) and runs steps: `run`
// checks the request against the compiled limits, writes the inputs, walks
// the step's launches on the device and reads the logits back. Nothing is
// allocated per step. One Model serves one caller at a time (steps mutate
// its caches).
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_EXECUTOR_MODEL_H
#define DAYBREAK_RUNTIME_EXECUTOR_MODEL_H

#include "runtime/artifact/ArtifactFile.h"
#include "runtime/core/Device.h"
#include "runtime/support/Status.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace daybreak::runtime {

struct LoadOptions {
  std::string device = "cpu"; ///< "cpu" (later "cuda:N")
  unsigned threads = 0;       ///< CPU threads; 0: all hardware threads
  /// CUDA: dense attention on the tensor cores wherever a launch does not
  /// split over keys (prefill, large decode batches; bf16 and fp8 caches),
  /// and sparse MLA on them with Q and P in bf16: faster and not exact
  /// (CudaAttention.cuh, CudaSparseMla.cuh). CPU: sparse MLA with those
  /// roundings, the GPU path's oracle.
  bool tensorCoreAttention = false;
  /// `--precision=bf16`: every matmul on a weight stored below fp32 takes
  /// its input rounded to bf16 (to nearest even), on both devices (the
  /// CPU's is the CUDA device's oracle); fp32 weights (routers) stay exact.
  bool bf16MatmulInputs = false;
  /// `--precision=fp8` (with bf16MatmulInputs): as bf16, but a matmul on an
  /// e4m3 weight of DeepSeek's 128 x 128 blocks (runtime::fp8InputsApply)
  /// takes its input quantized to FP8 per row and 128 columns, as
  /// DeepSeek's own inference and DeepGEMM do; on CUDA the FP8 GEMMs.
  bool fp8MatmulInputs = false;
  /// `--mxfp4-kernel` (CUDA, testing and benchmarks): the kernel every
  /// MXFP4 expert matmul takes, "auto" (the default: the device's rule),
  /// "cuda-cores", "tensor-cores" (the decode GEMV) or "warpgroup" (the
  /// grouped warpgroup GEMM), so that a fixture's few tokens run a path
  /// Auto keeps for more. A forced kernel fails where it does not apply.
  std::string mxfp4Kernel = "auto";
  /// `--rounding-noise SEED` (CPU): the derived tolerances' model of each
  /// rounding in place of rounding to nearest even
  /// (CpuDevice::modelRoundingAsNoise); 0: off.
  uint64_t roundingNoiseSeed = 0;
  /// Debugging: report every launch whose floating-point results hold NaN
  /// or infinities on stderr (Device::checkFiniteResults). Slow.
  bool checkFinite = false;
  /// The rank's link to the others, for an artifact of one rank of a
  /// tensor-parallel model (not owned; runRanks gives each rank its own);
  /// null for a model of one rank.
  Communicator *communicator = nullptr;
};

/// The tokens of one step: token t belongs to sequence sequences[t] (a cache
/// slot in [0, max_batch)) at position positions[t].
struct StepInputs {
  std::vector<int32_t> ids;
  std::vector<int32_t> positions;
  std::vector<int32_t> sequences;
  /// Whose logits the step returns: every token's, in order, or, when
  /// `everyLogitRow` is false, those of the tokens `logitRows` lists (by
  /// index into `ids`; none is allowed), in its order. A prefill step
  /// compiled with --max-logit-rows R computes at most R rows: every
  /// token's only when the step has at most R tokens.
  bool everyLogitRow = true;
  std::vector<int32_t> logitRows;
};

class Model {
public:
  static StatusOr<std::unique_ptr<Model>> load(const std::string &path,
                                               const LoadOptions &options);

  const artifact::Manifest &manifest() const { return file.manifest(); }
  int64_t vocabSize() const { return manifest().vocab_size(); }
  int64_t maxBatch() const { return manifest().max_batch(); }
  int64_t maxSeqLen() const { return manifest().max_seq_len(); }
  int64_t maxTokens() const { return manifest().max_tokens(); }

  /// The step `name` ("prefill" or "decode"), decoded at load.
  StatusOr<const PreparedStep *> step(const std::string &name) const;
  /// The most token rows whose logits one run of `step` returns.
  int64_t maxLogitRows(const PreparedStep &step) const {
    return step.maxLogitRows ? step.maxLogitRows : maxTokens();
  }

  /// Runs `step` and fills `logits` with [rows, vocab] floats, the rows
  /// `inputs` asks for. Checks the inputs against the compiled limits.
  /// Allocates nothing on the host when `logits` already holds as many
  /// floats and the step has run at this token count before (the first run
  /// records a CUDA graph or grows the CPU kernels' scratch).
  Status run(const PreparedStep &step, const StepInputs &inputs,
             std::vector<float> &logits);
  /// The same for the step named `name`.
  Status run(const std::string &name, const StepInputs &inputs,
             std::vector<float> &logits);

  /// Checks `inputs` against the compiled limits, gives every token's row
  /// a cache page (taking pages as sequences grow) and copies the inputs
  /// into the input buffers of `step`. Out of pages: an error, and the step
  /// does not run.
  Status stage(const PreparedStep &step, const StepInputs &inputs);
  /// The same for the step named `name`, which is returned.
  StatusOr<const PreparedStep *> stage(const std::string &name,
                                       const StepInputs &inputs);
  /// Runs step `name` on `inputs` without reading its outputs back and
  /// returns the device time of its launches in milliseconds.
  StatusOr<double> time(const std::string &name, const StepInputs &inputs);
  /// Runs each launch of step `name` on its own: milliseconds per launch.
  StatusOr<std::vector<double>> profile(const std::string &name,
                                        const StepInputs &inputs);
  //===--------------------------------------------------------------------===//
  // Cache pages and per-slot state (runtime/core/CacheState.h).
  //===--------------------------------------------------------------------===//

  /// Gives rows [0, rows) of slot `seq` cache pages now (steps do so for
  /// the rows they write).
  Status reserve(int64_t seq, int64_t rows);
  /// Returns slot `seq`'s pages to the pool.
  Status release(int64_t seq);
  /// Prepares slot `seq` for a new sequence: its pages returned, its
  /// slot state zeroed.
  Status resetSlot(int64_t seq);
  const PageAllocator &pages() const { return pageAllocator; }
  const CachePlan &cachePlan() const { return device->cachePlan(); }

  /// The device, for probes and cache copies.
  Device &onDevice() { return *device; }

  /// Bytes the device holds for the model (weights as loaded, arena,
  /// caches).
  uint64_t residentBytes() const { return device->residentBytes(); }
  uint64_t measuredResidentBytes() const {
    return device->measuredResidentBytes();
  }
  const std::string deviceName() const { return device->name(); }

private:
  Model(artifact::ArtifactFile file, std::unique_ptr<Device> device)
      : file(std::move(file)), device(std::move(device)) {}

  artifact::ArtifactFile file;
  /// Decoded from `file`'s manifest, which they point into.
  std::vector<PreparedStep> steps;
  std::unique_ptr<Device> device;
  PageAllocator pageAllocator;
  /// The logit_rows input as written (padded), reused by every step.
  std::vector<int32_t> logitRowsScratch;
};

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_EXECUTOR_MODEL_H
