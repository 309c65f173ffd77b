//===- RunInputs.h - What daybreak-run reads from its user ------*- C++ -*-===//
//
// The flags of daybreak-run (`--name value` or `--name=value` after the
// command and the artifact), read into the executor's option structs, and
// the inputs.json of `daybreak-run logits`. Every number must be all of its
// text and fit its field (a finite number, an integer of the field's
// range), so that a bad value is an error naming the flag or the file,
// never a number wrapped or truncated on the way in. Pure functions, with
// no device behind them (the fuzz targets link them alone).
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_EXECUTOR_RUNINPUTS_H
#define DAYBREAK_RUNTIME_EXECUTOR_RUNINPUTS_H

#include "runtime/executor/Bench.h"
#include "runtime/executor/Commands.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace daybreak::runtime {

/// The most CPU threads --threads asks for: far more than any host has, far
/// fewer than a pool can fail to start.
constexpr int64_t kMaxRunThreads = 4096;

/// daybreak-run's flags by name (without the dashes), each with its value.
using RunFlags = std::map<std::string, std::string>;

/// Reads the arguments after the command and the path; an argument that is
/// not a flag, or a last flag without a value, is an error.
StatusOr<RunFlags> parseRunFlags(const std::vector<std::string> &args);

/// Parses all of `text` (leading spaces and a sign allowed) as a decimal
/// integer in [min, max].
bool parseInteger(const std::string &text, int64_t min, int64_t max,
                  int64_t &out);
/// Parses all of `text` as a finite number.
bool parseNumber(const std::string &text, double &out);
/// Parses comma-separated integers in [min, max] into `out` (a trailing
/// comma allowed).
bool parseIntegerList(const std::string &text, int64_t min, int64_t max,
                      std::vector<int64_t> &out);

/// --device (default "": the artifact's target), --threads (0: all
/// hardware threads; at most kMaxRunThreads), --attention=exact|tensor-cores,
/// --precision=exact|bf16|fp8, --rounding-noise SEED (a rounding mode),
/// --check-finite 0|1.
Status parseLoadOptions(const RunFlags &flags, LoadOptions &out);
/// compare's --expected (required), --atol (default 1e-4) and --spread
/// (comma-separated logits files, at least kMinSpreadSamples).
Status parseCompareOptions(const RunFlags &flags, CompareOptions &out);
/// bench's --batch, --context and --prefill (lists), --warmup, --iterations,
/// --prefill-iterations (int), --fill-tokens, --max-case-seconds,
/// --kernels (non-zero: on) and --seed (>= 0); runBench checks what they
/// must be.
Status parseBenchOptions(const RunFlags &flags, BenchOptions &out);
/// generate's --prompt-ids (int32 ids), --max-new-tokens, --temperature,
/// --top-p and --seed (>= 0); generate checks what they must be.
Status parseGenerateOptions(const RunFlags &flags, GenerateOptions &out);

/// The sequences of a fixture's inputs.json: each a prompt and the
/// teacher-forced decode tokens that follow it (possibly none).
struct LogitsInputs {
  std::vector<std::vector<int32_t>> prompts, decodes;
};
/// Parses the text of an inputs.json, `{"sequences": [{"prompt_ids": [...],
/// "decode_ids": [...]}, ...]}` (decode_ids optional); `path` names it in
/// errors. Ids must be int32; their range is the model's to check.
StatusOr<LogitsInputs> parseLogitsInputs(const std::string &text,
                                         const std::string &path);

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_EXECUTOR_RUNINPUTS_H
