//===- TeacherForcing.h - The steps of a teacher-forced run -----*- C++ -*-===//
//
// The fixtures' expected logits come from teacher-forced runs: every prompt,
// then the given decode tokens one step at a time. The tests that replay
// them through the reference evaluator take their step inputs from here.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_TEST_UNIT_TEACHERFORCING_H
#define DAYBREAK_TEST_UNIT_TEACHERFORCING_H

#include "compiler/reference/Evaluator.h"

#include <cstdint>
#include <vector>

namespace daybreak::testutil {

/// One step's function and token inputs.
struct ForcedStep {
  const char *function;
  std::vector<int64_t> ids, positions, sequences;
};

/// One prefill step over every prompt (sequence i's tokens at positions 0,
/// 1, ...), then one decode step a forced token: every sequence's next one
/// (all sequences have as many).
inline std::vector<ForcedStep>
teacherForcedSteps(const std::vector<std::vector<int64_t>> &prompts,
                   const std::vector<std::vector<int64_t>> &decodes) {
  std::vector<ForcedStep> steps(1, ForcedStep{"prefill", {}, {}, {}});
  for (size_t i = 0; i < prompts.size(); ++i)
    for (size_t p = 0; p < prompts[i].size(); ++p) {
      steps[0].ids.push_back(prompts[i][p]);
      steps[0].positions.push_back(p);
      steps[0].sequences.push_back(i);
    }
  for (size_t t = 0; !decodes.empty() && t < decodes[0].size(); ++t) {
    ForcedStep step{"decode", {}, {}, {}};
    for (size_t i = 0; i < prompts.size(); ++i) {
      step.ids.push_back(decodes[i][t]);
      step.positions.push_back(prompts[i].size() + t);
      step.sequences.push_back(i);
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

/// Runs `step` through `evaluator` with `caches` (the step function's
/// arguments after its token ids, positions and sequences), which it
/// replaces with the step's updated ones; returns the logits rows.
inline llvm::Expected<std::vector<float>>
runForcedStep(ref::Evaluator &evaluator, const ForcedStep &step,
              std::vector<ref::Tensor> &caches) {
  int64_t n = step.ids.size();
  std::vector<ref::Tensor> args = {ref::Tensor::fromInts({n}, step.ids),
                                   ref::Tensor::fromInts({n}, step.positions),
                                   ref::Tensor::fromInts({n}, step.sequences)};
  args.insert(args.end(), caches.begin(), caches.end());
  auto out = evaluator.run(step.function, args);
  if (!out)
    return out.takeError();
  caches.assign(out->begin() + 1, out->end());
  return std::move((*out)[0].floats());
}

} // namespace daybreak::testutil

#endif // DAYBREAK_TEST_UNIT_TEACHERFORCING_H
