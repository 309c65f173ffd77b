//===- RunInputs.cpp - What daybreak-run reads from its user --------------===//

#include "runtime/executor/RunInputs.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

using namespace daybreak;
using namespace daybreak::runtime;

StatusOr<RunFlags>
runtime::parseRunFlags(const std::vector<std::string> &args) {
  RunFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg.rfind("--", 0) != 0)
      return Status::error("unexpected argument '" + arg + "'");
    size_t eq = arg.find('=');
    if (eq != std::string::npos)
      flags[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
    else if (i + 1 < args.size())
      flags[arg.substr(2)] = args[++i];
    else
      return Status::error("flag '" + arg + "' needs a value");
  }
  return flags;
}

bool runtime::parseInteger(const std::string &text, int64_t min, int64_t max,
                           int64_t &out) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size() || value < min ||
      value > max)
    return false;
  out = value;
  return true;
}

bool runtime::parseNumber(const std::string &text, double &out) {
  if (text.empty())
    return false;
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(value))
    return false;
  out = value;
  return true;
}

bool runtime::parseIntegerList(const std::string &text, int64_t min,
                               int64_t max, std::vector<int64_t> &out) {
  out.clear();
  // getline drops an empty last item: "1,2," would read as "1,2".
  if (!text.empty() && text.back() == ',')
    return false;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    int64_t value;
    if (!parseInteger(item, min, max, value))
      return false;
    out.push_back(value);
  }
  return true;
}

/// The value of flag `name`, or `fallback` where it is not given.
static std::string flag(const RunFlags &flags, const std::string &name,
                        const std::string &fallback) {
  auto it = flags.find(name);
  return it == flags.end() ? fallback : it->second;
}

/// Parses flag `name` (or `fallback`) into the integer field `out`.
template <typename T>
static bool integerFlag(const RunFlags &flags, const std::string &name,
                        const std::string &fallback, int64_t min, int64_t max,
                        T &out) {
  int64_t value;
  if (!parseInteger(flag(flags, name, fallback), min, max, value))
    return false;
  out = static_cast<T>(value);
  return true;
}

Status runtime::parseLoadOptions(const RunFlags &flags, LoadOptions &out) {
  out.device = flag(flags, "device", "");
  if (!integerFlag(flags, "threads", "0", 0, kMaxRunThreads, out.threads))
    return Status::error("--threads expects a number of threads from 0 (all "
                         "hardware threads) to " +
                         std::to_string(kMaxRunThreads));
  std::string precision = flag(flags, "precision", "exact");
  if (precision != "exact" && precision != "bf16" && precision != "fp8")
    return Status::error("--precision=" + precision +
                         ": expected exact, bf16 or fp8");
  out.bf16MatmulInputs = precision != "exact";
  out.fp8MatmulInputs = precision == "fp8";
  // bf16 and fp8 take the attention tensor cores too, unless --attention
  // says.
  std::string attention =
      flag(flags, "attention", precision != "exact" ? "tensor-cores" : "exact");
  if (attention != "exact" && attention != "tensor-cores")
    return Status::error("--attention=" + attention +
                         ": expected exact or tensor-cores");
  out.tensorCoreAttention = attention == "tensor-cores";
  if (std::string noise = flag(flags, "rounding-noise", ""); !noise.empty()) {
    int64_t seed = 0;
    if (!parseInteger(noise, 1, std::numeric_limits<int64_t>::max(), seed))
      return Status::error("--rounding-noise expects a seed of at least 1");
    if (!out.bf16MatmulInputs && !out.tensorCoreAttention)
      return Status::error("--rounding-noise needs --precision=bf16 or fp8, "
                           "or --attention=tensor-cores: the exact mode "
                           "rounds nothing");
    out.roundingNoiseSeed = uint64_t(seed);
  }
  out.mxfp4Kernel = flag(flags, "mxfp4-kernel", "auto");
  if (out.mxfp4Kernel != "auto" && out.mxfp4Kernel != "cuda-cores" &&
      out.mxfp4Kernel != "tensor-cores" && out.mxfp4Kernel != "warpgroup")
    return Status::error("--mxfp4-kernel=" + out.mxfp4Kernel +
                         ": expected auto, cuda-cores, tensor-cores or "
                         "warpgroup");
  std::string checkFinite = flag(flags, "check-finite", "0");
  if (checkFinite != "0" && checkFinite != "1")
    return Status::error("--check-finite expects 0 or 1");
  out.checkFinite = checkFinite == "1";
  return Status::success();
}

Status runtime::parseCompareOptions(const RunFlags &flags,
                                    CompareOptions &out) {
  out.expected = flag(flags, "expected", "");
  if (out.expected.empty())
    return Status::error("compare needs --expected FILE, the logits to "
                         "compare against");
  if (!parseNumber(flag(flags, "atol", "1e-4"), out.atol) || out.atol < 0)
    return Status::error("--atol expects a number of at least 0");
  out.spread.clear();
  std::stringstream files(flag(flags, "spread", ""));
  for (std::string file; std::getline(files, file, ',');)
    if (!file.empty())
      out.spread.push_back(file);
  if (flags.count("spread") && int64_t(out.spread.size()) < kMinSpreadSamples)
    return Status::error(
        "--spread holds " + std::to_string(out.spread.size()) +
        " logits files; the derived tolerance needs at least " +
        std::to_string(kMinSpreadSamples) + " (docs/bf16-tolerance.md)");
  return Status::success();
}

Status runtime::parseBenchOptions(const RunFlags &flags, BenchOptions &out) {
  for (auto [name, list] :
       {std::pair{"batch", &out.batches}, std::pair{"context", &out.contexts},
        std::pair{"prefill", &out.prompts}})
    if (flags.count(name) &&
        !parseIntegerList(flags.at(name), INT64_MIN, INT64_MAX, *list))
      return Status::error("--batch, --context and --prefill expect "
                           "comma-separated numbers");
  int kernels = 1;
  if (!integerFlag(flags, "warmup", "3", INT_MIN, INT_MAX, out.warmup) ||
      !integerFlag(flags, "iterations", "20", INT_MIN, INT_MAX,
                   out.iterations) ||
      !integerFlag(flags, "prefill-iterations", "3", INT_MIN, INT_MAX,
                   out.prefillIterations) ||
      !integerFlag(flags, "fill-tokens", "512", INT64_MIN, INT64_MAX,
                   out.fillTokens) ||
      !parseNumber(flag(flags, "max-case-seconds", "60"), out.maxCaseSeconds) ||
      !integerFlag(flags, "kernels", "1", INT_MIN, INT_MAX, kernels) ||
      !integerFlag(flags, "seed", "1", 0, INT64_MAX, out.seed))
    return Status::error("--warmup, --iterations, --prefill-iterations, "
                         "--fill-tokens, --max-case-seconds, --kernels and "
                         "--seed expect numbers");
  out.kernels = kernels != 0;
  return Status::success();
}

Status runtime::parseGenerateOptions(const RunFlags &flags,
                                     GenerateOptions &out) {
  std::string text = flag(flags, "prompt-ids", "");
  if (!text.empty() && text.back() == ',')
    return Status::error("--prompt-ids: '" + text + "' ends with ','");
  std::stringstream ids(text);
  for (std::string item; std::getline(ids, item, ',');) {
    int64_t id;
    if (!parseInteger(item, INT32_MIN, INT32_MAX, id))
      return Status::error("--prompt-ids: '" + item + "' is not a token id");
    out.promptIds.push_back(int32_t(id));
  }
  if (!integerFlag(flags, "max-new-tokens", "16", INT64_MIN, INT64_MAX,
                   out.maxNewTokens) ||
      !parseNumber(flag(flags, "temperature", "0"), out.sampling.temperature) ||
      !parseNumber(flag(flags, "top-p", "1"), out.sampling.topP) ||
      !integerFlag(flags, "seed", "0", 0, INT64_MAX, out.sampling.seed))
    return Status::error("--max-new-tokens, --temperature, --top-p and "
                         "--seed expect numbers");
  return Status::success();
}

static Status intList(const nlohmann::json &seq, const char *key,
                      const std::string &path, std::vector<int32_t> &out) {
  auto it = seq.find(key);
  if (it == seq.end() || !it->is_array())
    return Status::error(path + ": a sequence lacks the list '" + key + "'");
  for (const nlohmann::json &v : *it) {
    if (!v.is_number_integer())
      return Status::error(path + ": '" + key + "' holds a non-integer");
    // Wider ids would wrap around into plausible ones.
    if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(INT32_MAX)
                               : v.get<int64_t>() < INT32_MIN)
      return Status::error(path + ": '" + key + "' holds " + v.dump() +
                           ", not a 32-bit token id");
    out.push_back(v.get<int32_t>());
  }
  return Status::success();
}

StatusOr<LogitsInputs> runtime::parseLogitsInputs(const std::string &text,
                                                  const std::string &path) {
  nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object() || !json.contains("sequences") ||
      !json["sequences"].is_array())
    return Status::error(path + ": not JSON with a 'sequences' list");
  if (json["sequences"].empty())
    return Status::error(path + ": the 'sequences' list is empty");
  LogitsInputs inputs;
  for (const nlohmann::json &seq : json["sequences"]) {
    if (!seq.is_object())
      return Status::error(path + ": a sequence is not an object");
    inputs.prompts.emplace_back();
    inputs.decodes.emplace_back();
    Status status = intList(seq, "prompt_ids", path, inputs.prompts.back());
    if (status.ok() && seq.contains("decode_ids"))
      status = intList(seq, "decode_ids", path, inputs.decodes.back());
    if (!status.ok())
      return status;
    if (inputs.prompts.back().empty())
      return Status::error(path + ": an empty prompt");
  }
  return inputs;
}
