//===- InputsJsonFuzzer.cpp - Any text as a fixture's inputs.json ---------===//
//
// Feeds the reader of `daybreak-run logits --inputs` (runtime/executor/
// RunInputs.h: parseLogitsInputs) arbitrary text. What it accepts must be
// what runLogits relies on, a non-empty prompt and a decode list per
// sequence, and must be what the file says: every id equal to its JSON
// number, none wrapped into another.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/RunInputs.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

using namespace daybreak::runtime;

/// Whether `ids` holds exactly the integers of JSON array `list`.
static bool same(const std::vector<int32_t> &ids, const nlohmann::json &list) {
  if (!list.is_array() || list.size() != ids.size())
    return false;
  for (size_t i = 0; i < ids.size(); ++i) {
    const nlohmann::json &v = list[i];
    bool equal = v.is_number_unsigned()
                     ? ids[i] >= 0 && v.get<uint64_t>() == uint64_t(ids[i])
                     : v.is_number_integer() && v.get<int64_t>() == ids[i];
    if (!equal)
      return false;
  }
  return true;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  daybreak::StatusOr<LogitsInputs> inputs =
      parseLogitsInputs(text, "inputs.json");
  if (!inputs.ok())
    return 0;
  const nlohmann::json sequences =
      nlohmann::json::parse(text, nullptr, false)["sequences"];
  if (inputs->prompts.size() != sequences.size() ||
      inputs->decodes.size() != sequences.size())
    __builtin_trap();
  for (size_t i = 0; i < sequences.size(); ++i) {
    const nlohmann::json &seq = sequences[i];
    if (inputs->prompts[i].empty() ||
        !same(inputs->prompts[i], seq["prompt_ids"]) ||
        (seq.contains("decode_ids")
             ? !same(inputs->decodes[i], seq["decode_ids"])
             : !inputs->decodes[i].empty()))
      __builtin_trap();
  }
  return 0;
}
