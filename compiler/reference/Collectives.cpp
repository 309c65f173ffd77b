//===- Collectives.cpp - Ranks of one process for the evaluator ----------===//

#include "compiler/reference/Collectives.h"

#include "llvm/ADT/Twine.h"

using namespace daybreak;
using namespace daybreak::ref;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str());
}

namespace {
/// One rank's collectives, reduced on its own thread from every rank's
/// values.
class LoopbackRank final : public Collectives {
public:
  LoopbackRank(LoopbackGroup &group, int64_t index)
      : group(group), index(index) {}

  int64_t rank() const override { return index; }
  int64_t size() const override { return group.size(); }

  llvm::Expected<Tensor> allReduceSum(const Tensor &value) override {
    auto all = group.exchange(index, "all_reduce", value);
    if (!all)
      return all.takeError();
    if (llvm::Error err = sameShapes(**all, "all_reduce"))
      return std::move(err);
    Tensor sum = Tensor::zeros(value.type(), value.shape());
    std::vector<float> &out = sum.floats();
    for (const Tensor &part : **all)
      for (size_t i = 0; i < out.size(); ++i)
        out[i] += part.floats()[i];
    return sum;
  }

  llvm::Expected<Tensor> allGather(const Tensor &value) override {
    auto all = group.exchange(index, "all_gather", value);
    if (!all)
      return all.takeError();
    if (llvm::Error err = sameShapes(**all, "all_gather"))
      return std::move(err);
    std::vector<int64_t> shape = value.shape();
    int64_t part = shape.back(), rows = value.numel() / part, n = size();
    shape.back() *= n;
    Tensor gathered = Tensor::zeros(value.type(), shape);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t row = 0; row < rows; ++row)
        std::copy_n((**all)[r].floats().begin() + row * part, part,
                    gathered.floats().begin() + (row * n + r) * part);
    return gathered;
  }

private:
  /// Every rank gave a float tensor of one type and shape.
  llvm::Error sameShapes(const std::vector<Tensor> &all,
                         llvm::StringRef what) const {
    for (size_t r = 0; r < all.size(); ++r)
      if (!all[r].isFloat() || all[r].type() != all[0].type() ||
          all[r].shape() != all[0].shape() || all[r].rank() < 1)
        return makeError(what + ": rank " + llvm::Twine(r) + " gave " +
                         all[r].describe() + ", rank 0 " + all[0].describe());
    return llvm::Error::success();
  }

  LoopbackGroup &group;
  int64_t index;
};
} // namespace

LoopbackGroup::LoopbackGroup(int64_t size, std::chrono::milliseconds timeout)
    : timeout(timeout), pending(size), came(size, false) {
  for (int64_t r = 0; r < size; ++r)
    ranks.push_back(std::make_unique<LoopbackRank>(*this, r));
}

LoopbackGroup::~LoopbackGroup() = default;

void LoopbackGroup::abort(const std::string &reason) {
  std::lock_guard<std::mutex> lock(mutex);
  if (failure.empty())
    failure = reason;
  arrivedAll.notify_all();
}

llvm::Expected<std::shared_ptr<const std::vector<Tensor>>>
LoopbackGroup::exchange(int64_t rank, llvm::StringRef what,
                        const Tensor &value) {
  std::unique_lock<std::mutex> lock(mutex);
  auto failed = [&] {
    return makeError("rank " + llvm::Twine(rank) + ", " + what + ": " +
                     failure);
  };
  if (!failure.empty())
    return failed();
  if (arrived == 0) {
    current = what.str();
  } else if (current != what) {
    failure = ("ranks disagree: " + what + " on rank " + llvm::Twine(rank) +
               ", " + current + " on the others")
                  .str();
    arrivedAll.notify_all();
    return failed();
  }
  pending[rank] = value;
  came[rank] = true;
  uint64_t mine = generation;
  if (++arrived == size()) {
    done = std::make_shared<const std::vector<Tensor>>(std::move(pending));
    pending = std::vector<Tensor>(size());
    came.assign(size(), false);
    arrived = 0;
    ++generation;
    arrivedAll.notify_all();
    return done;
  }
  // The collective this rank joined completes before any later one can
  // (this rank has not joined that), so `done` is ours when it does.
  if (!arrivedAll.wait_for(lock, timeout, [&] {
        return generation != mine || !failure.empty();
      })) {
    std::string missing;
    for (int64_t r = 0; r < size(); ++r)
      if (!came[r])
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    failure = ("timed out after " + llvm::Twine(timeout.count()) +
               " ms waiting for rank(s) " + missing)
                  .str();
    arrivedAll.notify_all();
    return failed();
  }
  if (generation != mine)
    return done;
  return failed();
}
