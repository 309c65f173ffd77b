//===- LaunchParams.h - Launch attributes as kernel parameters -*- C++ -*-===//
//
// The CPU and CUDA kernels take the same parameter structs (KernelParams.h);
// these fill them from a prepared launch's typed parameters, for both
// devices.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_EXECUTOR_LAUNCHPARAMS_H
#define DAYBREAK_RUNTIME_EXECUTOR_LAUNCHPARAMS_H

#include "runtime/core/KernelParams.h"
#include "runtime/core/PreparedLaunch.h"

#include <optional>
#include <string>

namespace daybreak::runtime {

/// YaRN's ramp ends (models.md §1.4): pair i keeps its frequency below
/// `low`, takes it divided by `factor` above `high`, a blend between; 0 and
/// 1 without YaRN (unused). Both devices' RoPE kernels take them from here.
void yarnRampEnds(const RopeParams &p, double &low, double &high);

/// A `rope` launch's rotation: style, slice, theta and the YaRN fields.
runtime::RopeParams ropeParams(const PreparedLaunch &l);

/// Where a bound `rope` launch's rows lie: each token's rowsPerToken rows
/// of rowDim columns, in its input and in its output (heads of head_dim
/// columns of rows [T, W], else the rows of the last dim).
struct RopeLayout {
  RopeRows input, output;
  int64_t rowsPerToken = 0, rowDim = 0;
};
RopeLayout ropeLayout(const BoundLaunch &l);

/// A `cache_write` launch's prologue (none when it has no norm or rope
/// parameters; prepareSteps checked that each part's come together).
runtime::CacheWritePrologue cacheWritePrologue(const PreparedLaunch &l);

/// A `dsa_indexer_scores` launch's query rotation: nullopt without the
/// prologue (prepareSteps checked that its fields come together).
std::optional<runtime::RopeParams> indexerQueryRope(const PreparedLaunch &l);

/// A `moe_route` launch's parameters; an error naming `device` for
/// `softmax` routing (the devices run `sigmoid` and `softmax_topk`).
StatusOr<runtime::RouteParams> routeParams(const PreparedLaunch &l,
                                           const char *device);

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_EXECUTOR_LAUNCHPARAMS_H
