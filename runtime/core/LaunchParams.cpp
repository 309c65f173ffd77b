//===- LaunchParams.cpp - Prepared parameters as kernel parameter structs -===//

#include "runtime/core/LaunchParams.h"

using namespace daybreak;

runtime::RopeParams runtime::ropeParams(const PreparedLaunch &l) {
  using P = abi::Rope::P;
  runtime::RopeParams p;
  p.interleaved = l.i(P::style) == abi::Rope::interleaved;
  p.offset = l.i(P::offset);
  p.dim = l.i(P::dim);
  p.theta = l.f(P::theta);
  // prepareSteps checked that the YaRN fields come all or none.
  p.yarn = l.has(P::yarn_factor);
  if (p.yarn) {
    p.factor = l.f(P::yarn_factor);
    p.originalMaxPositions = l.i(P::yarn_original_max_positions);
    p.betaFast = l.f(P::yarn_beta_fast);
    p.betaSlow = l.f(P::yarn_beta_slow);
    p.attentionFactor = l.f(P::yarn_attention_factor);
    p.truncate = l.i(P::yarn_truncate) != 0;
  }
  return p;
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
    runtime::RopeParams &r = p.ropeParams;
    r.interleaved = l.i(P::rope_style) == abi::CacheWrite::interleaved;
    r.offset = l.i(P::rope_offset);
    r.dim = l.i(P::rope_dim);
    r.theta = l.f(P::theta);
    p.ropeHeadDim = l.has(P::rope_head_dim) ? l.i(P::rope_head_dim) : 0;
    r.yarn = l.has(P::yarn_factor);
    if (r.yarn) {
      r.factor = l.f(P::yarn_factor);
      r.originalMaxPositions = l.i(P::yarn_original_max_positions);
      r.betaFast = l.f(P::yarn_beta_fast);
      r.betaSlow = l.f(P::yarn_beta_slow);
      r.attentionFactor = l.f(P::yarn_attention_factor);
      r.truncate = l.i(P::yarn_truncate) != 0;
    }
  }
  return p;
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
