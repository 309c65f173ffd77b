//===- Communicator.cpp - Collectives between tensor-parallel ranks -------===//

#include "runtime/core/Communicator.h"

#include <algorithm>
#include <cstring>

using namespace daybreak;
using namespace daybreak::runtime;

Status Communicator::broadcastBytes(void *data, size_t bytes, int64_t root) {
  if (root < 0 || root >= size())
    return Status::error("broadcast from rank " + std::to_string(root) +
                         " of " + std::to_string(size()));
  int64_t width =
      static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
  std::vector<float> mine(width, 0.0f), all(width * size());
  std::memcpy(mine.data(), data, bytes);
  if (Status s = allGather(mine.data(), all.data(), 1, width); !s)
    return s;
  std::memcpy(data, all.data() + root * width, bytes);
  return Status::success();
}

Status Communicator::checkGroup(const char *what, int64_t group) const {
  if (group >= 1 && group <= size() && size() % group == 0)
    return Status::success();
  return Status::error(std::string(what) + " over groups of " +
                       std::to_string(group) + " ranks in a world of " +
                       std::to_string(size()) +
                       " (a group size must divide the world)");
}

Status Communicator::groupAllReduceSum(const float *in, float *out,
                                       int64_t count, int64_t group) {
  if (Status s = checkGroup("all_reduce", group); !s)
    return s;
  if (group == size())
    return allReduceSum(in, out, count);
  groupScratch.resize(size_t(count * size()));
  if (Status s = allGather(in, groupScratch.data(), 1, count); !s)
    return s;
  const int64_t first = rank() / group * group;
  for (int64_t i = 0; i < count; ++i) {
    float sum = 0.0f;
    for (int64_t r = first; r < first + group; ++r)
      sum += groupScratch[r * count + i];
    out[i] = sum;
  }
  return Status::success();
}

Status Communicator::groupAllGather(const float *in, float *out, int64_t rows,
                                    int64_t width, int64_t group) {
  if (Status s = checkGroup("all_gather", group); !s)
    return s;
  if (group == size())
    return allGather(in, out, rows, width);
  const int64_t n = size();
  groupScratch.resize(size_t(rows * width * n));
  if (Status s = allGather(in, groupScratch.data(), rows, width); !s)
    return s;
  // The world's [rows, n * width]: this group's columns, in rank order.
  const int64_t first = rank() / group * group;
  for (int64_t row = 0; row < rows; ++row)
    std::copy_n(groupScratch.data() + (row * n + first) * width, group * width,
                out + row * group * width);
  return Status::success();
}

namespace {
/// One rank of a LoopbackGroup: reduces or gathers from every rank's
/// input on its own thread, then writes its output once all have read.
class LoopbackRank final : public Communicator {
public:
  LoopbackRank(LoopbackGroup &group, int64_t index)
      : group(group), index(index) {}

  int64_t rank() const override { return index; }
  int64_t size() const override { return group.size(); }
  std::chrono::milliseconds timeout() const override {
    return group.collectiveTimeout();
  }

  Status allReduceSum(const float *in, float *out, int64_t count) override {
    // Summed into a buffer of this rank's and written after every rank has
    // read the inputs (`in` may be `out`, and is another rank's input).
    scratch.assign(count, 0.0f);
    Status s = group.meet(index, "all_reduce", in, count,
                          [&](const std::vector<const float *> &all) {
                            for (const float *part : all)
                              for (int64_t i = 0; i < count; ++i)
                                scratch[i] += part[i];
                          });
    if (!s)
      return s;
    std::copy(scratch.begin(), scratch.end(), out);
    return Status::success();
  }

  Status allGather(const float *in, float *out, int64_t rows,
                   int64_t width) override {
    int64_t n = size();
    return group.meet(index, "all_gather", in, rows * width,
                      [&](const std::vector<const float *> &all) {
                        for (int64_t r = 0; r < n; ++r)
                          for (int64_t row = 0; row < rows; ++row)
                            std::copy_n(all[r] + row * width, width,
                                        out + (row * n + r) * width);
                      });
  }

private:
  LoopbackGroup &group;
  int64_t index;
  std::vector<float> scratch;
};
} // namespace

LoopbackGroup::LoopbackGroup(int64_t size, std::chrono::milliseconds timeout)
    : timeout(timeout), came(size, false), inputs(size, nullptr) {
  for (int64_t r = 0; r < size; ++r)
    members.push_back(std::make_unique<LoopbackRank>(*this, r));
}

LoopbackGroup::~LoopbackGroup() = default;

void LoopbackGroup::abort(const std::string &reason) {
  std::lock_guard<std::mutex> lock(mutex);
  if (failure.empty())
    failure = reason;
  crossed.notify_all();
}

Status LoopbackGroup::arrive(int64_t rank, const char *what, const float *in,
                             int64_t count) {
  std::unique_lock<std::mutex> lock(mutex);
  auto failed = [&] {
    return Status::error("rank " + std::to_string(rank) + ", " + what + ": " +
                         failure);
  };
  if (!failure.empty())
    return failed();
  if (arrived == 0) {
    current = what;
    currentCount = count;
  } else if (current != what || currentCount != count) {
    failure = "ranks disagree: " + std::string(what) + " of " +
              std::to_string(count) + " values on rank " +
              std::to_string(rank) + ", " + current + " of " +
              std::to_string(currentCount) + " on the others";
    crossed.notify_all();
    return failed();
  }
  if (in)
    inputs[rank] = in;
  came[rank] = true;
  uint64_t mine = generation;
  if (++arrived == size()) {
    came.assign(size(), false);
    arrived = 0;
    ++generation;
    crossed.notify_all();
    return Status::success();
  }
  if (!crossed.wait_for(lock, timeout, [&] {
        return generation != mine || !failure.empty();
      })) {
    std::string missing;
    for (int64_t r = 0; r < size(); ++r)
      if (!came[r])
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    failure = "timed out after " + std::to_string(timeout.count()) +
              " ms waiting for rank(s) " + missing;
    crossed.notify_all();
    return failed();
  }
  return generation != mine ? Status::success() : failed();
}
