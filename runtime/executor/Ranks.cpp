//===- Ranks.cpp - Every rank of a tensor-parallel model in one process ---===//

#include "runtime/executor/Ranks.h"

#include "runtime/core/Communicator.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <thread>

using namespace daybreak;
using namespace daybreak::runtime;

StatusOr<std::vector<std::string>>
runtime::rankArtifacts(const std::string &path,
                       const artifact::Manifest &manifest) {
  int64_t ranks = std::max<int64_t>(manifest.ranks(), 1);
  if (ranks == 1)
    return std::vector<std::string>{path};
  int64_t rank = manifest.rank();
  std::string suffix = ".rank" + std::to_string(rank) + "-of-" +
                       std::to_string(ranks) + ".daybreak";
  if (path.size() <= suffix.size() ||
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0)
    return Status::error(path + ": rank " + std::to_string(rank) + " of " +
                         std::to_string(ranks) + " ranks, but not named '*" +
                         suffix +
                         "' as daybreak-compile names it, so the other "
                         "ranks' artifacts cannot be found");
  std::string output =
      path.substr(0, path.size() - suffix.size()) + ".daybreak";
  std::vector<std::string> paths;
  for (int64_t r = 0; r < ranks; ++r)
    paths.push_back(artifact::rankArtifactPath(output, r, ranks));
  return paths;
}

/// Rank `index`'s device when the ranks share `device`'s host: the CPU
/// for "cpu"; "cuda" or "cuda:N" is the first of consecutive GPUs, one a
/// rank (a malformed name is left for Model::load to refuse).
static std::string rankDevice(const std::string &device, int64_t index) {
  if (device == "cuda")
    return "cuda:" + std::to_string(index);
  const std::string cuda = "cuda:";
  if (device.compare(0, cuda.size(), cuda) != 0 ||
      device.size() == cuda.size() || device.size() > cuda.size() + 4 ||
      device.find_first_not_of("0123456789", cuda.size()) != std::string::npos)
    return device;
  return cuda +
         std::to_string(
             std::strtoll(device.c_str() + cuda.size(), nullptr, 10) + index);
}

Status runtime::runLaunchedRank(
    const std::vector<std::string> &paths, const LaunchEnvironment &env,
    LoadOptions options,
    const std::function<Status(Model &, int64_t rank)> &body) {
  const std::string self = "rank " + std::to_string(env.rank);
  if (env.worldSize != int64_t(paths.size()))
    return Status::error(self + ": the launcher started " +
                         std::to_string(env.worldSize) + " processes, but " +
                         paths.front() + " is a model of " +
                         std::to_string(paths.size()) +
                         (paths.size() == 1 ? " rank" : " ranks"));
  StatusOr<std::unique_ptr<SocketCommunicator>> comm =
      SocketCommunicator::connect(env);
  if (!comm.ok())
    return comm.error();
  options.communicator = comm->get();
  options.device = rankDevice(options.device, env.localRank);
  StatusOr<std::unique_ptr<Model>> model =
      Model::load(paths[env.rank], options);
  if (!model.ok())
    return model.error().withContext(self);
  Status status = body(**model, env.rank);
  return status ? status : status.withContext(self);
}

Status runtime::runRanks(
    const std::vector<std::string> &paths, LoadOptions options,
    const std::function<Status(Model &, int64_t rank)> &body) {
  int64_t ranks = paths.size();
  if (options.threads == 0 && ranks > 1)
    options.threads =
        std::max(1u, std::thread::hardware_concurrency() / unsigned(ranks));
  LoopbackGroup group(ranks);
  std::mutex mutex;
  Status first = Status::success();
  auto run = [&](int64_t r) {
    LoadOptions own = options;
    own.communicator = ranks > 1 ? &group.rank(r) : nullptr;
    own.device = rankDevice(options.device, r);
    Status status = [&]() -> Status {
      StatusOr<std::unique_ptr<Model>> model = Model::load(paths[r], own);
      if (!model.ok())
        return model.error();
      return body(**model, r);
    }();
    if (status.ok())
      return;
    std::lock_guard<std::mutex> lock(mutex);
    // The first failure is the cause; the others stop because of it.
    if (first.ok()) {
      first = ranks > 1 ? status.withContext("rank " + std::to_string(r))
                        : status;
      group.abort("rank " + std::to_string(r) + " failed");
    }
  };
  std::vector<std::thread> threads;
  for (int64_t r = 1; r < ranks; ++r)
    threads.emplace_back(run, r);
  run(0);
  for (std::thread &t : threads)
    t.join();
  return first;
}
