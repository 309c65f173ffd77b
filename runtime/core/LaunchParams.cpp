//===- LaunchParams.cpp - Prepared parameters as kernel parameter structs -===//

#include "runtime/core/LaunchParams.h"

#include <algorithm>
#include <cmath>

using namespace daybreak;

/// The YaRN fields of a launch that declares them (rope, the prologues of
/// cache_write and dsa_indexer_scores); prepareSteps checked that they come
/// all or none.
template <typename P>
static void readYarn(const runtime::PreparedLaunch &l, runtime::RopeParams &p) {
  p.yarn = l.has(P::yarn_factor);
  if (!p.yarn)
    return;
  p.factor = l.f(P::yarn_factor);
  p.originalMaxPositions = l.i(P::yarn_original_max_positions);
  p.betaFast = l.f(P::yarn_beta_fast);
  p.betaSlow = l.f(P::yarn_beta_slow);
  p.attentionFactor = l.f(P::yarn_attention_factor);
  p.truncate = l.i(P::yarn_truncate) != 0;
}

/// A prologue's RoPE (rope_style, rope_offset, rope_dim, theta and YaRN's
/// fields) of a launch that has one; `interleaved`: rope_style's choice.
template <typename P>
static runtime::RopeParams readRopePrologue(const runtime::PreparedLaunch &l,
                                            int64_t interleaved) {
  runtime::RopeParams r;
  r.interleaved = l.i(P::rope_style) == interleaved;
  r.offset = l.i(P::rope_offset);
  r.dim = l.i(P::rope_dim);
  r.theta = l.f(P::theta);
  readYarn<P>(l, r);
  return r;
}

void runtime::yarnRampEnds(const RopeParams &p, double &low, double &high) {
  low = 0.0;
  high = 1.0;
  if (!p.yarn)
    return;
  // HF `find_correction_dim`: the fractional pair index that turns
  // `rotations` times over the original context.
  constexpr double kPi = 3.14159265358979323846;
  auto correctionDim = [&](double rotations) {
    return double(p.dim) *
           std::log(double(p.originalMaxPositions) / (rotations * 2.0 * kPi)) /
           (2.0 * std::log(p.theta));
  };
  low = correctionDim(p.betaFast);
  high = correctionDim(p.betaSlow);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(p.dim - 1));
  if (low == high)
    high += 0.001;
}

runtime::RopeParams runtime::ropeParams(const PreparedLaunch &l) {
  using P = abi::Rope::P;
  runtime::RopeParams p;
  p.interleaved = l.i(P::style) == abi::Rope::interleaved;
  p.offset = l.i(P::offset);
  p.dim = l.i(P::dim);
  p.theta = l.f(P::theta);
  readYarn<P>(l, p);
  return p;
}

runtime::RopeLayout runtime::ropeLayout(const BoundLaunch &l) {
  using P = abi::Rope::P;
  const BoundArg &x = l.in(abi::Rope::In::input), &out = l.out(0);
  RopeLayout at;
  if (l->has(P::head_dim)) {
    // Rows [T, W] (prepareSteps checked): a token's heads lie head_dim
    // apart in its row.
    at.rowDim = l->i(P::head_dim);
    at.rowsPerToken = out.back() / at.rowDim;
    at.input = {x.stride(), at.rowDim};
    at.output = {out.stride(), at.rowDim};
    return at;
  }
  at.rowDim = out.back();
  at.rowsPerToken = out.numel() / std::max<int64_t>(l.tokens * at.rowDim, 1);
  at.input = RopeRows::dense(at.rowsPerToken, x.stride());
  at.output = RopeRows::dense(at.rowsPerToken, out.stride());
  return at;
}

runtime::CacheWritePrologue
runtime::cacheWritePrologue(const PreparedLaunch &l) {
  using P = abi::CacheWrite::P;
  runtime::CacheWritePrologue p;
  if (l.has(P::norm)) {
    p.norm = l.i(P::norm) == abi::CacheWrite::layer
                 ? runtime::CacheWritePrologue::Norm::Layer
                 : runtime::CacheWritePrologue::Norm::Rms;
    p.normDim = l.i(P::norm_dim);
    p.eps = l.f(P::eps);
  }
  p.rope = l.has(P::rope_style);
  if (p.rope) {
    p.ropeParams = readRopePrologue<P>(l, abi::CacheWrite::interleaved);
    p.ropeHeadDim = l.has(P::rope_head_dim) ? l.i(P::rope_head_dim) : 0;
  }
  return p;
}

std::optional<runtime::RopeParams>
runtime::indexerQueryRope(const PreparedLaunch &l) {
  using P = abi::DsaIndexerScores::P;
  if (!l.has(P::rope_style))
    return std::nullopt;
  return readRopePrologue<P>(l, abi::DsaIndexerScores::interleaved);
}

StatusOr<runtime::RouteParams>
runtime::routeParams(const PreparedLaunch &l, const char *device) {
  using P = abi::MoeRoute::P;
  runtime::RouteParams p;
  if (l.i(P::routing) == abi::MoeRoute::sigmoid)
    p.score = runtime::RouteScore::Sigmoid;
  else if (l.i(P::routing) == abi::MoeRoute::softmax_topk)
    p.score = runtime::RouteScore::SoftmaxTopK;
  else
    return Status::error(std::string("softmax routing does not run on the ") +
                         device + " device (sigmoid and softmax_topk do)");
  p.topK = l.i(P::top_k);
  p.numGroups = l.i(P::num_groups);
  p.topKGroups = l.i(P::top_k_groups);
  p.renormalize = l.i(P::renormalize) != 0;
  p.scalingFactor = l.f(P::scaling_factor);
  p.sharedExperts = l.has(P::shared_experts) ? l.i(P::shared_experts) : 0;
  if (p.sharedExperts < 0)
    return Status::error("moe_route: shared_experts " +
                         std::to_string(p.sharedExperts) + " is negative");
  return p;
}
