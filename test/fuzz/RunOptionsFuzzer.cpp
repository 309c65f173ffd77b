//===- RunOptionsFuzzer.cpp - Any arguments as daybreak-run's flags -------===//
//
// Feeds daybreak-run's option parsing (runtime/executor/RunInputs.h) the
// input's lines as the arguments after the command and the artifact, into
// every command's options. What it accepts must fit what consumes it:
// --threads at most kMaxRunThreads (a pool of more fails to start), every
// number finite; generate's sampling options then drive the sampler over a
// few logits, which must pick one of them.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/RunInputs.h"
#include "runtime/sampling/Sampler.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

using namespace daybreak;
using namespace daybreak::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string> args;
  std::istringstream lines(
      std::string(reinterpret_cast<const char *>(data), size));
  for (std::string line; std::getline(lines, line);)
    args.push_back(line);
  StatusOr<RunFlags> flags = parseRunFlags(args);
  if (!flags.ok())
    return 0;

  LoadOptions load;
  if (parseLoadOptions(*flags, load).ok() &&
      int64_t(load.threads) > kMaxRunThreads)
    __builtin_trap();
  CompareOptions compare;
  if (parseCompareOptions(*flags, compare).ok() &&
      (!std::isfinite(compare.atol) || compare.atol < 0 ||
       (!compare.spread.empty() &&
        int64_t(compare.spread.size()) < kMinSpreadSamples)))
    __builtin_trap();
  BenchOptions bench;
  if (parseBenchOptions(*flags, bench).ok() &&
      !std::isfinite(bench.maxCaseSeconds))
    __builtin_trap();
  GenerateOptions generate;
  if (!parseGenerateOptions(*flags, generate).ok())
    return 0;
  if (!std::isfinite(generate.sampling.temperature) ||
      !std::isfinite(generate.sampling.topP))
    __builtin_trap();
  const float logits[] = {0.5f, 1.0f, 1.0f, -2.0f, 3.0f, 3.0f, 0.0f, -1.0f};
  Sampler sampler(generate.sampling);
  for (int i = 0; i < 4; ++i) {
    int32_t token = sampler.sample(logits, 8);
    if (token < 0 || token >= 8)
      __builtin_trap();
  }
  return 0;
}
