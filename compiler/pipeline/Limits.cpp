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
  if (given.maxLogitRows < 0)
    return errorf("--max-logit-rows must be positive");
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
  // A prefill step finishes at most min(max_batch, max_tokens) prompts, and
  // each samples from its last row's logits.
  int64_t finished = std::min(chosen.maxBatch, chosen.maxTokens);
  if (!chosen.maxLogitRows)
    chosen.maxLogitRows = std::min(
        chosen.maxTokens, std::max(chosen.maxBatch, kDefaultMaxLogitRows));
  if (chosen.maxLogitRows < finished)
    return errorf("--max-logit-rows " + llvm::Twine(chosen.maxLogitRows) +
                  " is below the " + llvm::Twine(finished) +
                  " prompts a prefill step may finish (the smaller of "
                  "--max-batch and --max-tokens), each sampling from its "
                  "last row's logits");
  if (chosen.maxLogitRows > chosen.maxTokens) {
    log << "note: --max-logit-rows " << given.maxLogitRows << " lowered to "
        << chosen.maxTokens << ", the tokens a step holds\n";
    chosen.maxLogitRows = chosen.maxTokens;
  }
  return chosen;
}
