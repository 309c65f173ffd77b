//===- CompileOptionsFuzzer.cpp - Any values for daybreak-compile's limits ===//
//
// Feeds daybreak-compile's limit options (compiler/pipeline/Limits.h) the
// input's lines: --max-seq-len, --max-batch, --max-tokens,
// --kv-cache-tokens and --max-logit-rows as the tool reads them (an empty line:
// not given), then the model's max_position_embeddings; the limits it accepts
// go through chooseLimits as `compile` does. What comes out must keep
// chooseLimits' promise, which the passes' int64 arithmetic relies on.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/Limits.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

using namespace daybreak::pipeline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef rest(reinterpret_cast<const char *>(data), size);
  Limits given;
  static const char *const flags[] = {"max-seq-len", "max-batch", "max-tokens",
                                      "kv-cache-tokens", "max-logit-rows"};
  int64_t *fields[] = {&given.maxSeqLen, &given.maxBatch, &given.maxTokens,
                       &given.kvCacheTokens, &given.maxLogitRows};
  for (int i = 0; i < 5; ++i) {
    auto [line, next] = rest.split('\n');
    rest = next;
    if (line.empty())
      continue;
    if (llvm::Error error = parseLimit(flags[i], line, *fields[i])) {
      llvm::consumeError(std::move(error));
      return 0;
    }
    if (*fields[i] <= 0)
      __builtin_trap();
  }
  int64_t maxPositions = 2560;
  if (rest.split('\n').first.getAsInteger(10, maxPositions))
    maxPositions = 2560;

  llvm::Expected<Limits> chosen =
      chooseLimits(given, maxPositions, llvm::nulls());
  if (!chosen) {
    llvm::consumeError(chosen.takeError());
    return 0;
  }
  const Limits &l = *chosen;
  for (int64_t limit : {l.maxSeqLen, l.maxBatch, l.maxTokens})
    if (limit <= 0 || limit > kMaxLimit)
      __builtin_trap();
  if (l.kvCacheTokens < 0 || l.kvCacheTokens > kMaxLimit ||
      l.maxSeqLen > maxPositions || l.maxBatch > kMaxLimit / l.maxSeqLen ||
      l.maxTokens > l.maxBatch * l.maxSeqLen ||
      l.maxLogitRows < std::min(l.maxBatch, l.maxTokens) ||
      l.maxLogitRows > l.maxTokens)
    __builtin_trap();
  // A limit given is kept, but --max-tokens and --max-logit-rows, which may
  // be lowered.
  bool rowsLowered = given.maxLogitRows > l.maxTokens;
  if (rowsLowered && l.maxLogitRows != l.maxTokens)
    __builtin_trap();
  const int64_t kept[] = {l.maxSeqLen, l.maxBatch, given.maxTokens,
                          l.kvCacheTokens,
                          rowsLowered ? given.maxLogitRows : l.maxLogitRows};
  for (int i = 0; i < 5; ++i)
    if (*fields[i] && *fields[i] != kept[i])
      __builtin_trap();
  return 0;
}
