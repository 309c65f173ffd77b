//===- Ranks.h - Every rank of a parallel model -----------------*- C++ -*-===//
//
// daybreak-compile --tensor-parallel N writes one artifact a rank
// (model.rank{r}-of-{N}.daybreak, docs/parallel.md). runRanks loads them
// all, each on a device of its own (the CPU, or one GPU a rank), and runs
// each rank on a thread of its own; their collectives meet through a
// LoopbackGroup (GPUs: through NCCL, whose group joins through it). Every
// rank runs the same command on the same inputs, so the ranks take the same
// steps and meet the same collectives in the same order; the command's
// outputs are rank 0's (every rank holds the gathered logits).
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_EXECUTOR_RANKS_H
#define DAYBREAK_RUNTIME_EXECUTOR_RANKS_H

#include "runtime/core/SocketGroup.h"
#include "runtime/executor/Model.h"

#include <functional>
#include <string>
#include <vector>

namespace daybreak::runtime {

/// The artifacts of every rank of the model `path` (whose manifest is
/// `manifest`) is one rank of, in rank order: the siblings daybreak-compile
/// wrote beside it; {path} for a model of one rank. An error names a path
/// that does not follow daybreak-compile's naming.
StatusOr<std::vector<std::string>>
rankArtifacts(const std::string &path, const artifact::Manifest &manifest);

/// Loads each of `paths` (rankArtifacts) with `options` on a device of its
/// own (options.device "cuda:N": rank r on cuda:N+r), rank r with rank r's
/// communicator of one LoopbackGroup (CPU threads
/// shared out among the ranks when options.threads is 0), and runs
/// `body(model, r)` for each on a thread of its own. The first rank to fail
/// stops the others (their collectives return errors), and its error,
/// naming the rank, is returned.
Status runRanks(const std::vector<std::string> &paths, LoadOptions options,
                const std::function<Status(Model &, int64_t rank)> &body);

/// When a launcher (torchrun, mpirun) started one process a rank, `env`
/// says which this one is: loads its rank's artifact of `paths`
/// (rankArtifacts; on a GPU, cuda:N+env.localRank for options.device
/// "cuda:N") with a SocketCommunicator joined to the other
/// processes, and runs `body(model, env.rank)`. An error, naming this
/// rank, when the launcher's world is not the model's rank count, the
/// group cannot form, or a rank fails (every rank reports it).
Status
runLaunchedRank(const std::vector<std::string> &paths,
                const LaunchEnvironment &env, LoadOptions options,
                const std::function<Status(Model &, int64_t rank)> &body);

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_EXECUTOR_RANKS_H
