//===- Commands.h - What daybreak-run does, as library calls ----*- C++ -*-===//

#ifndef DAYBREAK_RUNTIME_EXECUTOR_COMMANDS_H
#define DAYBREAK_RUNTIME_EXECUTOR_COMMANDS_H

#include "runtime/executor/Model.h"
#include "runtime/sampling/Sampler.h"

#include <iosfwd>

namespace daybreak::runtime {

/// Runs every sequence of a fixture's inputs.json together: one prefill
/// over all prompts (chunked to the compiled max tokens per step), then
/// teacher-forced decode steps; writes `seq{i}.prefill_logits` [P, vocab]
/// and `seq{i}.decode_logits` [D, vocab] as F32 safetensors (none for an
/// empty `outputPath`: the ranks after the first of a tensor-parallel run).
Status runLogits(Model &model, const std::string &inputsPath,
                 const std::string &outputPath, std::ostream &log);

struct GenerateOptions {
  std::vector<int32_t> promptIds;
  int64_t maxNewTokens = 16;
  SamplingOptions sampling;
};
/// Prefills the prompt and decodes up to maxNewTokens tokens (stopping at
/// the model's end-of-sequence token); prints the tokens and the timing.
Status generate(Model &model, const GenerateOptions &options,
                std::ostream &out);

/// `daybreak-run compare`'s options.
struct CompareOptions {
  std::string expected; ///< the reference logits
  double atol = 1e-4;
  /// Logits of runs under the bf16 modes' model of rounding
  /// (`--rounding-noise`), at least kMinSpreadSamples of them: each value's
  /// tolerance becomes atol + kSpreadSigmas x the RMS of those runs'
  /// differences from the reference (docs/bf16-tolerance.md). Empty: atol.
  std::vector<std::string> spread;
};
/// The derived tolerance's constants (docs/bf16-tolerance.md says why).
inline constexpr int64_t kMinSpreadSamples = 32;
inline constexpr double kSpreadSigmas = 7.0;

/// Compares every F32 tensor of `actualPath` with the tensor of the same name
/// in options.expected: each |diff| against its tolerance, and top-1 (argmax
/// of each row of the last dim) agreement: at every row with atol alone;
/// with a spread, at the rows whose expected top-1 leads every other logit
/// by more than the two values' tolerances (the rows the tolerance decides).
/// Fails if any tensor is missing, differs in shape, exceeds its tolerance,
/// or disagrees on a top-1 choice that is checked.
Status compareLogits(const std::string &actualPath,
                     const CompareOptions &options, std::ostream &out);

/// Prints the artifact: model, limits, weights, caches, steps, memory plan.
void inspect(const artifact::Manifest &manifest, std::ostream &out);

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_EXECUTOR_COMMANDS_H
