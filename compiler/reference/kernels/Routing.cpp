//===- Routing.cpp - Reference MoE router (noaux_tc, softmax, gpt-oss) ----===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/kernels/KernelUtils.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace daybreak::ref {

using namespace detail;

namespace {

/// The experts a token may pick from under DeepSeek's group limit: groups are
/// ranked by the sum of their two best selection scores and only the best
/// `topKGroups` groups stay eligible.
std::vector<int64_t> groupLimitedCandidates(const std::vector<double> &select,
                                            const RoutingParams &params) {
  int64_t experts = static_cast<int64_t>(select.size());
  std::vector<int64_t> all(experts);
  std::iota(all.begin(), all.end(), 0);
  if (params.numGroups <= 1 || params.topKGroups >= params.numGroups)
    return all;

  int64_t groupSize = experts / params.numGroups;
  std::vector<double> groupScores(params.numGroups);
  for (int64_t g = 0; g < params.numGroups; ++g) {
    std::vector<int64_t> members(groupSize);
    std::iota(members.begin(), members.end(), g * groupSize);
    double score = 0.0;
    for (int64_t e : selectTopK(select, members, 2))
      score += select[e];
    groupScores[g] = score;
  }
  std::vector<int64_t> groups(params.numGroups);
  std::iota(groups.begin(), groups.end(), 0);
  std::vector<int64_t> candidates;
  for (int64_t g : selectTopK(groupScores, groups, params.topKGroups))
    for (int64_t e = g * groupSize; e < (g + 1) * groupSize; ++e)
      candidates.push_back(e);
  return candidates;
}

} // namespace

Routing moeRoute(const Tensor &logits, const Tensor &bias,
                 const RoutingParams &params) {
  int64_t tokens = logits.dim(0), experts = logits.dim(1);
  int64_t k = params.topK, slots = k + params.sharedExperts;
  Routing routing;
  routing.indices = Tensor::zeros(ElementType::I32, {tokens, slots});
  routing.weights = Tensor::zeros(ElementType::F32, {tokens, slots});

  std::vector<double> scores(experts), select(experts);
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = logits.floats().data() + t * experts;
    // `scores` feed the weights, `select` (scores + bias) the choice.
    double maxLogit = -std::numeric_limits<double>::infinity();
    for (int64_t e = 0; e < experts; ++e)
      maxLogit = std::max(maxLogit, static_cast<double>(row[e]));
    double sumExp = 0.0;
    for (int64_t e = 0; e < experts; ++e)
      sumExp += std::exp(row[e] - maxLogit);
    for (int64_t e = 0; e < experts; ++e) {
      switch (params.score) {
      case RoutingScore::Sigmoid:
        scores[e] = sigmoidOf(row[e]);
        break;
      case RoutingScore::Softmax:
        scores[e] = std::exp(row[e] - maxLogit) / sumExp;
        break;
      case RoutingScore::SoftmaxTopK:
        scores[e] = row[e];
        break;
      }
      select[e] = scores[e] + (bias.empty() ? 0.0 : bias.floats()[e]);
    }

    std::vector<int64_t> candidates;
    if (params.score == RoutingScore::Sigmoid) {
      candidates = groupLimitedCandidates(select, params);
    } else {
      candidates.resize(experts);
      std::iota(candidates.begin(), candidates.end(), 0);
    }
    std::vector<int64_t> chosen = selectTopK(select, candidates, k);

    // Fewer than k eligible experts leave -1 slots with zero weight.
    int64_t picked = static_cast<int64_t>(chosen.size());
    std::vector<double> weights(picked);
    double sum = 0.0;
    if (params.score == RoutingScore::SoftmaxTopK) {
      // gpt-oss: softmax over the selected logits only.
      double best = -std::numeric_limits<double>::infinity();
      for (int64_t e : chosen)
        best = std::max(best, scores[e]);
      for (int64_t i = 0; i < picked; ++i)
        sum += weights[i] = std::exp(scores[chosen[i]] - best);
      for (double &w : weights)
        w /= sum;
    } else {
      for (int64_t i = 0; i < picked; ++i)
        sum += weights[i] = scores[chosen[i]];
      if (params.renormalize)
        for (double &w : weights)
          w /= sum + 1e-20; // as HF, so an all-zero row stays finite
    }
    for (int64_t i = 0; i < k; ++i) {
      routing.indices.ints()[t * slots + i] = i < picked ? chosen[i] : -1;
      routing.weights.floats()[t * slots + i] =
          i < picked ? static_cast<float>(weights[i] * params.scalingFactor)
                     : 0.0f;
    }
    // The shared experts, stacked after the routed ones, weight 1.
    for (int64_t s = 0; s < params.sharedExperts; ++s) {
      routing.indices.ints()[t * slots + k + s] = experts + s;
      routing.weights.floats()[t * slots + k + s] = 1.0f;
    }
  }
  return routing;
}

} // namespace daybreak::ref
