//===- Communicator.h - Collectives between tensor-parallel ranks -*- C++ -*-===//
//
// A tensor-parallel model (docs/parallel.md) runs one plan per rank; their
// collectives (the all_reduce and all_gather launches) meet through a
// Communicator the runtime gives each rank's device. Every call returns once
// every rank has made the same call, or with an error naming the collective
// when a rank failed (abort) or did not come within the timeout, so a dead
// rank is reported by the others instead of hanging them.
//
// LoopbackGroup runs every rank in one process, each on a thread of its own
// (the CPU device's stand-in for NCCL, and the reference evaluator's through
// ref::LoopbackGroup): sums are taken in rank order, so runs are
// deterministic. It is not a substitute for NCCL in any multi-GPU result.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_CORE_COMMUNICATOR_H
#define DAYBREAK_RUNTIME_CORE_COMMUNICATOR_H

#include "runtime/support/Status.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace daybreak::runtime {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  /// out[i] = the sum over the ranks of their in[i], i < count (`in` may
  /// be `out`).
  virtual Status allReduceSum(const float *in, float *out, int64_t count) = 0;
  /// out[row][r * width + i] = rank r's in[row][i]: every rank's [rows,
  /// width] concatenated along the last dim, in rank order.
  virtual Status allGather(const float *in, float *out, int64_t rows,
                           int64_t width) = 0;
  /// Every rank's `bytes` bytes at `data` become rank `root`'s (NCCL's
  /// unique id on its way to every rank). This one: through allGather,
  /// whose copies keep every bit.
  virtual Status broadcastBytes(void *data, size_t bytes, int64_t root);
  /// How long a rank waits for the others in a collective; a device's own
  /// collectives over the same group (NCCL's) keep it too.
  virtual std::chrono::milliseconds timeout() const {
    return std::chrono::seconds(300);
  }

  /// allReduceSum and allGather within each consecutive group of `group`
  /// ranks (`group` divides size(); the world's own collective when equal):
  /// rank r meets the ranks of group r / `group`, and every rank of the
  /// world makes the call. A collective "over N ranks" of a plan whose
  /// world is larger (attention split over T ranks inside expert-parallel
  /// groups, docs/parallel.md). These: through the world's allGather, the
  /// group's parts summed in rank order as allReduceSum sums them.
  virtual Status groupAllReduceSum(const float *in, float *out, int64_t count,
                                   int64_t group);
  virtual Status groupAllGather(const float *in, float *out, int64_t rows,
                                int64_t width, int64_t group);

private:
  /// An error unless `group` divides the world (what: the collective).
  Status checkGroup(const char *what, int64_t group) const;
  /// The world's inputs of a group collective (sized once per shape).
  std::vector<float> groupScratch;
};

class LoopbackGroup {
public:
  explicit LoopbackGroup(int64_t size, std::chrono::milliseconds timeout =
                                           std::chrono::seconds(300));
  ~LoopbackGroup();
  LoopbackGroup(const LoopbackGroup &) = delete;
  LoopbackGroup &operator=(const LoopbackGroup &) = delete;

  int64_t size() const { return static_cast<int64_t>(members.size()); }
  std::chrono::milliseconds collectiveTimeout() const { return timeout; }
  /// Rank `r`'s communicator (0 <= r < size()), owned by the group.
  Communicator &rank(int64_t r) { return *members[r]; }
  /// Fails every collective waiting or yet to come with `reason` (a rank
  /// that stopped).
  void abort(const std::string &reason);

  /// The collective `what` of rank `rank`, whose input is `count` floats
  /// at `in`: waits for every rank, calls `use` with all ranks' inputs (in
  /// rank order; they stay valid and unchanged during the call), then waits
  /// until every rank has used them. Errors name the collective and the
  /// ranks missing.
  template <typename Use>
  Status meet(int64_t rank, const char *what, const float *in, int64_t count,
              Use use) {
    if (Status s = arrive(rank, what, in, count); !s)
      return s;
    use(inputs);
    return arrive(rank, what, nullptr, count);
  }

private:
  /// One barrier crossing: publishes `in` (the first crossing of a
  /// collective) and waits for every rank.
  Status arrive(int64_t rank, const char *what, const float *in,
                int64_t count);

  std::vector<std::unique_ptr<Communicator>> members;
  std::chrono::milliseconds timeout;

  std::mutex mutex;
  std::condition_variable crossed;
  /// The crossing being gathered: its collective, element count, the ranks
  /// come so far and their inputs.
  std::string current;
  int64_t currentCount = 0;
  std::vector<bool> came;
  int64_t arrived = 0;
  std::vector<const float *> inputs;
  /// Counts completed crossings.
  uint64_t generation = 0;
  std::string failure;
};

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_CORE_COMMUNICATOR_H
