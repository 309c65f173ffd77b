//===- Limits.h - The serving limits daybreak-compile is given --*- C++ -*-===//
//
// --max-seq-len, --max-batch, --max-tokens, --kv-cache-tokens and
// --max-logit-rows: how the tool reads them and how `compile` checks them
// against the model and chooses those left out. Kept apart from the pipeline
// (plain LLVM Support) so that the tool, the pipeline and the fuzzer share one
// reading. Pure functions.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_PIPELINE_LIMITS_H
#define DAYBREAK_COMPILER_PIPELINE_LIMITS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>

namespace daybreak::pipeline {

/// The longest default --max-seq-len. Caches are allocated whole at load for
/// max_batch x max_seq_len tokens: DeepSeek-V3.2's full 163840 positions
/// would need about 59 GiB of FP8 caches at the default 8 sequences (788 B
/// per token and layer, 61 layers), 4096 about 1.5 GiB. Longer contexts are
/// an explicit choice.
constexpr int64_t kDefaultMaxSeqLenCap = 4096;
/// The default --max-batch.
constexpr int64_t kDefaultMaxBatch = 8;
/// The default --max-logit-rows, unless --max-batch is larger: the rows of
/// logits a prefill step computes (lm-select-logit-rows). Enough for every
/// prompt a step finishes to sample from, and for scoring (every row's
/// logits) to take steps of 256 tokens; 129280 ids of fp32 take 126 MiB.
constexpr int64_t kDefaultMaxLogitRows = 256;

/// The largest value a chosen limit takes, and the most cache rows
/// (max_batch x max_seq_len): the passes multiply and round limits up to
/// pages in int64, which this bound keeps far from overflowing.
constexpr int64_t kMaxLimit = int64_t(1) << 40;

/// Parses the value of limit flag `flag` (its name, for messages) as cl
/// reads integers (decimal, 0x hex, 0 octal, 0b binary), refusing 0 and
/// negative values: 0 is what "not given" means to `chooseLimits`.
llvm::Error parseLimit(llvm::StringRef flag, llvm::StringRef text,
                       int64_t &value);

/// Serving limits; 0 is "not given".
struct Limits {
  int64_t maxSeqLen = 0;
  int64_t maxBatch = 0;
  int64_t maxTokens = 0;
  int64_t kvCacheTokens = 0;
  int64_t maxLogitRows = 0;
};

/// Checks the limits `given` against a model of `maxPositions` positions
/// and chooses those not given: the model's context up to
/// kDefaultMaxSeqLenCap, kDefaultMaxBatch sequences and a step that holds
/// one full sequence, and max(maxBatch, kDefaultMaxLogitRows) logit rows.
/// --max-tokens above the cache rows is lowered to them, --max-logit-rows
/// above --max-tokens to it (each with a note on `log`); --max-logit-rows
/// below min(maxBatch, maxTokens), the prompts one step may finish, is an
/// error. What comes back is positive (kvCacheTokens may stay 0, "every
/// sequence at full length"), at most kMaxLimit, with maxSeqLen <=
/// maxPositions, maxTokens <= maxBatch x maxSeqLen <= kMaxLimit and
/// min(maxBatch, maxTokens) <= maxLogitRows <= maxTokens.
llvm::Expected<Limits> chooseLimits(const Limits &given, int64_t maxPositions,
                                    llvm::raw_ostream &log);

} // namespace daybreak::pipeline

#endif // DAYBREAK_COMPILER_PIPELINE_LIMITS_H
