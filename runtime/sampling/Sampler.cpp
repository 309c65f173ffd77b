//===- Sampler.cpp - Choosing the next token from logits ------------------===//

#include "runtime/sampling/Sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

using namespace daybreak::runtime;

int32_t Sampler::sample(const float *logits, int64_t vocab) {
  if (options.temperature <= 0.0) {
    // Ties go to the lower id, as argmax conventionally does.
    return static_cast<int32_t>(std::max_element(logits, logits + vocab) -
                                logits);
  }
  double maxLogit = *std::max_element(logits, logits + vocab);
  std::vector<double> probs(vocab);
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i)
    sum += probs[i] = std::exp((logits[i] - maxLogit) / options.temperature);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return probs[a] > probs[b];
  });
  // The nucleus: the most likely tokens until their mass reaches top-p.
  double mass = 0.0;
  int64_t kept = 0;
  while (kept < vocab && (kept == 0 || mass < options.topP * sum))
    mass += probs[order[kept++]];
  std::uniform_real_distribution<double> uniform(0.0, mass);
  double r = uniform(rng), acc = 0.0;
  for (int64_t i = 0; i < kept; ++i) {
    acc += probs[order[i]];
    if (r < acc)
      return order[i];
  }
  return order[kept - 1];
}
