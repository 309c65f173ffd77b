//===- Limits.cpp - The serving limits daybreak-compile is given ----------===//

#include "compiler/pipeline/Limits.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>

using namespace daybreak;
using namespace daybreak::pipeline;

static llvm::Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error pipeline::parseLimit(llvm::StringRef flag, llvm::StringRef text,
                                 int64_t &value) {
  // cl's own reading of an int64 option.
  if (text.getAsInteger(0, value))
    return errorf("--" + flag + " '" + text + "' is not an integer");
  if (value <= 0)
    return errorf("--" + flag + " " + llvm::Twine(value) + " must be positive");
  return llvm::Error::success();
}

llvm::Expected<Limits> pipeline::chooseLimits(const Limits &given,
                                              int64_t maxPositions,
                                              llvm::raw_ostream &log) {
  if (given.maxTokens < 0 || given.maxBatch < 0 || given.maxSeqLen < 0)
    return errorf("--max-seq-len, --max-batch and --max-tokens must be "
                  "positive");
  if (given.kvCacheTokens < 0)
    return errorf("--kv-cache-tokens must be positive");
  if (maxPositions <= 0)
    return errorf("the model's max_position_embeddings " +
                  llvm::Twine(maxPositions) + " leaves no positions");
  if (given.maxSeqLen > maxPositions)
    return errorf("--max-seq-len " + llvm::Twine(given.maxSeqLen) +
                  " exceeds the model's max_position_embeddings " +
                  llvm::Twine(maxPositions));
  // Limits left at 0 are chosen here: the model's context up to the cap, and
  // a step that holds one full sequence.
  Limits chosen = given;
  if (!chosen.maxSeqLen)
    chosen.maxSeqLen = std::min(maxPositions, kDefaultMaxSeqLenCap);
  if (!chosen.maxBatch)
    chosen.maxBatch = kDefaultMaxBatch;
  if (!chosen.maxTokens)
    chosen.maxTokens = chosen.maxSeqLen;
  // The caches hold max_batch x max_seq_len tokens; a step cannot hold more.
  int64_t cacheRows;
  if (__builtin_mul_overflow(chosen.maxBatch, chosen.maxSeqLen, &cacheRows) ||
      cacheRows > kMaxLimit)
    return errorf("--max-batch " + llvm::Twine(chosen.maxBatch) +
                  " x --max-seq-len " + llvm::Twine(chosen.maxSeqLen) +
                  " cache rows exceed the supported 2^40");
  if (chosen.kvCacheTokens > kMaxLimit)
    return errorf("--kv-cache-tokens " + llvm::Twine(chosen.kvCacheTokens) +
                  " exceeds the supported 2^40");
  // A step never holds more tokens than the caches do.
  if (chosen.maxTokens > cacheRows) {
    log << "note: --max-tokens " << given.maxTokens << " lowered to "
        << cacheRows << ", the tokens the caches hold\n";
    chosen.maxTokens = cacheRows;
  }
  return chosen;
}
