//===- SocketGroup.h - Ranks in separate processes, over TCP ----*- C++ -*-===//
//
// A launcher (torchrun, mpirun, or a script setting the same variables)
// starts one process a rank; each runs its own rank's artifact and its
// collectives meet the other processes' through a SocketCommunicator. The
// ranks rendezvous at MASTER_ADDR: rank 0 listens, the others connect to
// it (retrying until it is up), and every collective goes through rank 0,
// which checks that all ranks reached the same one with the same size,
// adds the inputs in rank order (as LoopbackGroup does, so results are
// the same bit for bit) and sends the result back. A rank that stops
// closes its connection: every other rank's next or pending collective
// fails naming it, and rank 0 then closes the others', so no rank hangs;
// a rank that never comes fails the others after the timeout.
//
// It carries the CPU device's collectives between processes (and is where
// NCCL's unique id will be exchanged); it is not a substitute for NCCL on
// GPUs.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_CORE_SOCKETGROUP_H
#define DAYBREAK_RUNTIME_CORE_SOCKETGROUP_H

#include "runtime/core/Communicator.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace daybreak::runtime {

/// What the launcher told this process.
struct LaunchEnvironment {
  int64_t rank = 0, worldSize = 1;
  /// The rank among those of its host: its GPU (cuda:localRank).
  int64_t localRank = 0;
  /// Where rank 0 listens.
  std::string address = "127.0.0.1";
  int port = 0;
  /// How long a rank waits for the others (connecting, and in each
  /// collective).
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

/// The launcher's variables, read through `get` (the environment's by
/// default): RANK and WORLD_SIZE as torchrun and torch.distributed set
/// them, or Open MPI's OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE;
/// LOCAL_RANK (or OMPI_COMM_WORLD_LOCAL_RANK; default RANK), the GPU;
/// MASTER_ADDR (default 127.0.0.1) and MASTER_PORT. torchrun's agent
/// already serves its own store on MASTER_PORT
/// (TORCHELASTIC_USE_AGENT_STORE=True), so there rank 0 listens on
/// MASTER_PORT + 1; DAYBREAK_PORT overrides either.
/// DAYBREAK_COLLECTIVE_TIMEOUT is the timeout in seconds (default 300).
/// Nothing when no variable names a world of more than one process; an
/// error naming the variable for a malformed or missing value.
StatusOr<std::optional<LaunchEnvironment>> launchEnvironment(
    const std::function<const char *(const char *)> &get = nullptr);

class SocketCommunicator final : public Communicator {
public:
  /// Joins the group `env` describes: rank 0 listens on env.port and
  /// waits for every other rank; the others connect to it. An error when
  /// a rank does not come within env.timeout or one says another world.
  static StatusOr<std::unique_ptr<SocketCommunicator>>
  connect(const LaunchEnvironment &env);
  ~SocketCommunicator() override;
  SocketCommunicator(const SocketCommunicator &) = delete;
  SocketCommunicator &operator=(const SocketCommunicator &) = delete;

  int64_t rank() const override { return index; }
  int64_t size() const override { return ranks; }
  std::chrono::milliseconds timeout() const override { return waitLimit; }
  Status allReduceSum(const float *in, float *out, int64_t count) override;
  Status allGather(const float *in, float *out, int64_t rows,
                   int64_t width) override;

private:
  SocketCommunicator(int64_t index, int64_t ranks,
                     std::chrono::milliseconds waitLimit)
      : index(index), ranks(ranks), waitLimit(waitLimit) {}
  /// One collective: every rank's `count` floats at `in` meet at rank 0,
  /// which passes them (rank order) to `combine` to fill `result` of
  /// `resultCount` floats, and sends that to every rank.
  Status collective(uint32_t kind, const float *in, int64_t count,
                    float *result, int64_t resultCount,
                    const std::function<void(const std::vector<const float *> &)>
                        &combine);
  /// Closes every connection after a failure (the other ranks' collectives
  /// then fail too) and keeps `error` for every later call.
  Status fail(Status error);

  int64_t index, ranks;
  std::chrono::milliseconds waitLimit;
  /// Rank 0: the socket of rank r at [r] ([0] unused); others: [0] is
  /// rank 0's.
  std::vector<int> sockets;
  /// Rank 0's buffers, kept from one collective to the next: the other
  /// ranks' inputs, all inputs in rank order, and a sum.
  std::vector<std::vector<float>> received;
  std::vector<const float *> inputs;
  std::vector<float> sum;
  std::optional<Status> broken;
};

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_CORE_SOCKETGROUP_H
