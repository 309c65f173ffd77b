//===- Collectives.h - Ranks of one process for the evaluator ---*- C++ -*-===//
//
// The stand-in for NCCL when the reference evaluator runs a tensor- or
// expert-parallel model: every rank's Evaluator runs on a thread of its own
// in one process, and their collectives meet here. Sums are taken in rank
// order, so a run is deterministic. A rank that fails calls abort(), and the
// others' collectives return an error instead of waiting for it; a rank that
// never comes fails the others after the timeout. This is a test oracle, not
// a substitute for NCCL in any multi-GPU result.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_REFERENCE_COLLECTIVES_H
#define DAYBREAK_COMPILER_REFERENCE_COLLECTIVES_H

#include "compiler/reference/Evaluator.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace daybreak::ref {

class LoopbackGroup {
public:
  explicit LoopbackGroup(int64_t size, std::chrono::milliseconds timeout =
                                           std::chrono::seconds(120));
  ~LoopbackGroup();

  int64_t size() const { return static_cast<int64_t>(ranks.size()); }
  /// Rank `r`'s collectives (0 <= r < size()), owned by the group.
  Collectives &rank(int64_t r) { return *ranks[r]; }
  /// Fails every collective waiting or yet to come with `reason`.
  void abort(const std::string &reason);

  /// Every rank's `value`, in rank order, once all have given theirs to the
  /// collective `what`; errors name it and the ranks missing.
  llvm::Expected<std::shared_ptr<const std::vector<Tensor>>>
  exchange(int64_t rank, llvm::StringRef what, const Tensor &value);

private:
  std::vector<std::unique_ptr<Collectives>> ranks;
  std::chrono::milliseconds timeout;

  std::mutex mutex;
  std::condition_variable arrivedAll;
  /// The collective being gathered: its name, the ranks' values so far
  /// (empty for those not yet come) and how many came.
  std::string current;
  std::vector<Tensor> pending;
  std::vector<bool> came;
  int64_t arrived = 0;
  /// Counts completed collectives; `done` holds the last one's values.
  uint64_t generation = 0;
  std::shared_ptr<const std::vector<Tensor>> done;
  std::string failure;
};

} // namespace daybreak::ref

#endif // DAYBREAK_COMPILER_REFERENCE_COLLECTIVES_H
