//===- Model.h - A loaded artifact ready to run steps -----------*- C++ -*-===//
//
// Loads a verified .daybreak artifact on the CPU device: weights converted
// once to fp32 (FP8 matmul weights dequantised with their block scales), the
// step arena, the caches and their page tables allocated once. Afterwards a
// step allocates nothing: `run` walks the step's launches over the arena.
// One Model serves one caller at a time (steps mutate its caches).
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_EXECUTOR_MODEL_H
#define DAYBREAK_RUNTIME_EXECUTOR_MODEL_H

#include "runtime/artifact/ArtifactFile.h"
#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/support/Status.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace daybreak::runtime {

struct LoadOptions {
  unsigned threads = 0; ///< 0: all hardware threads
};

/// The tokens of one step: token t belongs to sequence sequences[t] (a cache
/// slot in [0, max_batch)) at position positions[t].
struct StepInputs {
  std::vector<int32_t> ids;
  std::vector<int32_t> positions;
  std::vector<int32_t> sequences;
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
  /// Bytes this model holds (weights as loaded, arena, caches).
  uint64_t residentBytes() const;

  /// Runs step `name` ("prefill" or "decode") and fills `logits` with
  /// [tokens, vocab] floats. Checks the inputs against the compiled limits.
  Status run(const std::string &name, const StepInputs &inputs,
             std::vector<float> &logits);

private:
  explicit Model(artifact::ArtifactFile file, unsigned threads)
      : file(std::move(file)), pool(threads) {}
  Status prepare();
  /// dlopens the generated kernels of the "code.x86_64" section.
  Status loadGeneratedCode();

  using ElementwiseFn = void (*)(int64_t, const float *const *, float *);

  struct Tensor {
    void *data = nullptr;
    artifact::DType dtype = artifact::DTYPE_UNSPECIFIED;
    std::vector<int64_t> shape;
    const cpu::CacheView *cache = nullptr;
    int64_t numel() const;
  };
  StatusOr<Tensor> operand(const artifact::Step &step,
                           const artifact::Operand &op, int64_t tokens);
  Status launch(const artifact::Step &step, const artifact::Launch &launch,
                int64_t tokens);

  artifact::ArtifactFile file;
  cpu::ThreadPool pool;
  std::vector<std::vector<float>> weights; ///< fp32, per manifest weight
  /// Zeroed allocations that report failure instead of aborting.
  struct Allocation {
    std::unique_ptr<uint8_t, void (*)(void *)> data{nullptr, free};
    size_t size = 0;
  };
  static Status allocate(Allocation &a, uint64_t bytes, const std::string &what);

  std::vector<Allocation> cacheBytes;
  std::vector<cpu::CacheView> caches;
  std::vector<int32_t> pageTable;
  Allocation arena;
  void *codeHandle = nullptr;
  std::map<std::string, ElementwiseFn> generated;

public:
  ~Model();
};

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_EXECUTOR_MODEL_H
