//===- Sampler.h - Choosing the next token from logits ----------*- C++ -*-===//
//
// Greedy (temperature 0), or temperature + nucleus (top-p) sampling from a
// seeded generator, so a run is reproducible. One Sampler per sequence;
// not thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_SAMPLING_SAMPLER_H
#define DAYBREAK_RUNTIME_SAMPLING_SAMPLER_H

#include <cstdint>
#include <random>

namespace daybreak::runtime {

struct SamplingOptions {
  double temperature = 0.0; ///< 0: greedy
  double topP = 1.0;        ///< keep the smallest set with this mass
  uint64_t seed = 0;
};

class Sampler {
public:
  explicit Sampler(const SamplingOptions &options)
      : options(options), rng(options.seed) {}
  /// The next token from `vocab` logits.
  int32_t sample(const float *logits, int64_t vocab);

private:
  SamplingOptions options;
  std::mt19937_64 rng;
};

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_SAMPLING_SAMPLER_H
