//===- HfConfig.cpp - Hugging Face config.json for supported models -------===//
//
// Field readers record only the first problem and let parsing continue with
// zeros, so the parser reads as a flat list of fields instead of a chain of
// early returns; the value checks run only once every field was read.
//
//===----------------------------------------------------------------------===//

#include "compiler/importers/HfConfig.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstdio>
#include <string>

using namespace llvm;

namespace daybreak::importers {

namespace {

Error makeError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

/// The deepest model a config may describe: far past any released, and
/// small enough that the per-layer tables the parsers fill stay small.
constexpr int64_t kMaxLayers = 1 << 16;

/// json::Value::getAsInteger without its one undefined case: the double
/// 2^63 passes its range check (double(INT64_MAX) rounds up to 2^63), and
/// converting it to int64 overflows.
std::optional<int64_t> asInteger(const json::Value &value) {
  if (!value.getAsUINT64() && value.getAsNumber().value_or(0) >= 0x1p63)
    return std::nullopt;
  return value.getAsInteger();
}

std::string formatDouble(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

const char *describeKind(const json::Value &value) {
  switch (value.kind()) {
  case json::Value::Null:
    return "null";
  case json::Value::Boolean:
    return "a boolean";
  case json::Value::Number:
    return "a number";
  case json::Value::String:
    return "a string";
  case json::Value::Array:
    return "an array";
  case json::Value::Object:
    return "an object";
  }
  return "?";
}

/// Reads typed fields of one JSON object. Readers of nested objects share the
/// first-error slot of their parent, so one message comes out in the end.
class FieldReader {
public:
  FieldReader(const json::Object &object, StringRef path, std::string &error,
              StringRef prefix = "")
      : object(object), path(path), error(error), prefix(prefix.str()) {}

  FieldReader nested(const json::Object &child, StringRef key) const {
    return FieldReader(child, path, error, qualified(key) + ".");
  }

  /// Null counts as absent: HF writes `"rope_scaling": null` for "none".
  const json::Value *lookup(StringRef key) const {
    const json::Value *value = object.get(key);
    return value && value->kind() != json::Value::Null ? value : nullptr;
  }
  bool has(StringRef key) const { return lookup(key) != nullptr; }

  std::optional<int64_t> optionalInteger(StringRef key) {
    const json::Value *value = lookup(key);
    if (!value)
      return std::nullopt;
    if (std::optional<int64_t> result = asInteger(*value))
      return result;
    wrongType(key, "an integer", *value);
    return 0;
  }
  int64_t integer(StringRef key) {
    if (!has(key)) {
      missing(key);
      return 0;
    }
    return *optionalInteger(key);
  }
  /// An integer that sizes per-item tables (num_hidden_layers): above
  /// `max` it is an error, and 0, so that no table is sized by it.
  int64_t count(StringRef key, int64_t max) {
    int64_t value = integer(key);
    check(value <= max, key,
          "must be at most " + Twine(max) + ", got " + Twine(value));
    return value <= max ? value : 0;
  }

  std::optional<double> optionalNumber(StringRef key) {
    const json::Value *value = lookup(key);
    if (!value)
      return std::nullopt;
    if (std::optional<double> result = value->getAsNumber())
      return result;
    wrongType(key, "a number", *value);
    return 0.0;
  }
  double number(StringRef key) {
    if (!has(key)) {
      missing(key);
      return 0.0;
    }
    return *optionalNumber(key);
  }

  std::optional<bool> optionalBoolean(StringRef key) {
    const json::Value *value = lookup(key);
    if (!value)
      return std::nullopt;
    if (std::optional<bool> result = value->getAsBoolean())
      return result;
    wrongType(key, "a boolean", *value);
    return false;
  }
  bool boolean(StringRef key) {
    if (!has(key)) {
      missing(key);
      return false;
    }
    return *optionalBoolean(key);
  }

  std::optional<StringRef> optionalString(StringRef key) {
    const json::Value *value = lookup(key);
    if (!value)
      return std::nullopt;
    if (std::optional<StringRef> result = value->getAsString())
      return result;
    wrongType(key, "a string", *value);
    return StringRef();
  }
  StringRef string(StringRef key) {
    if (!has(key)) {
      missing(key);
      return StringRef();
    }
    return *optionalString(key);
  }

  const json::Object *optionalObject(StringRef key) {
    const json::Value *value = lookup(key);
    if (!value)
      return nullptr;
    if (const json::Object *result = value->getAsObject())
      return result;
    wrongType(key, "an object", *value);
    return nullptr;
  }

  const json::Array *optionalArray(StringRef key) {
    const json::Value *value = lookup(key);
    if (!value)
      return nullptr;
    if (const json::Array *result = value->getAsArray())
      return result;
    wrongType(key, "an array", *value);
    return nullptr;
  }
  const json::Array *array(StringRef key) {
    if (!has(key)) {
      missing(key);
      return nullptr;
    }
    return optionalArray(key);
  }

  /// Records "field 'key' in <path> <message>" unless `ok`.
  void check(bool ok, StringRef key, const Twine &message) {
    if (!ok)
      fail("field '" + qualified(key) + "' in " + path + " " + message);
  }
  void checkPositive(StringRef key, int64_t value) {
    check(value > 0, key, "must be positive, got " + Twine(value));
  }
  void checkPositive(StringRef key, double value) {
    check(value > 0, key, "must be positive, got " + formatDouble(value));
  }

  void fail(const Twine &message) {
    if (error.empty())
      error = message.str();
  }
  bool failed() const { return !error.empty(); }
  StringRef getPath() const { return path; }

private:
  std::string qualified(StringRef key) const { return prefix + key.str(); }
  void missing(StringRef key) {
    fail("missing field '" + qualified(key) + "' in " + path);
  }
  void wrongType(StringRef key, StringRef expected, const json::Value &value) {
    fail("field '" + qualified(key) + "' in " + path + " must be " + expected +
         ", not " + describeKind(value));
  }

  const json::Object &object;
  StringRef path;
  std::string &error;
  std::string prefix;
};

/// Reads `rope_parameters` (transformers >= 5) or the hub's `rope_scaling`;
/// sets `ropeTheta` and `yarn` (whose original context defaults to
/// `maxPositions`).
void readRope(FieldReader &reader, int64_t maxPositions, double &ropeTheta,
              std::optional<YarnConfig> &yarnConfig) {
  StringRef ropeKey =
      reader.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const json::Object *rope = reader.optionalObject(ropeKey);
  std::optional<FieldReader> ropeReader;
  if (rope)
    ropeReader.emplace(reader.nested(*rope, ropeKey));

  // rope_parameters carries rope_theta; the hub spelling keeps it top level.
  if (ropeReader && ropeReader->has("rope_theta"))
    ropeTheta = ropeReader->number("rope_theta");
  else
    ropeTheta = reader.number("rope_theta");
  if (!ropeReader)
    return;

  // Both spellings of the type key occur in the wild, in either object.
  StringRef typeKey = ropeReader->has("rope_type") ? "rope_type" : "type";
  StringRef type = ropeReader->string(typeKey);
  if (reader.failed() || type == "default")
    return;
  // Any other scaling would change the rotation angles; refuse rather than
  // silently compile plain RoPE.
  ropeReader->check(type == "yarn", typeKey,
                    "names unsupported RoPE scaling '" + type +
                        "' (supported: yarn, default)");
  YarnConfig yarn;
  yarn.factor = ropeReader->number("factor");
  ropeReader->check(yarn.factor >= 1.0, "factor",
                    "must be >= 1, got " + formatDouble(yarn.factor));
  // Defaults as in transformers' _compute_yarn_parameters.
  yarn.originalMaxPositions =
      ropeReader->optionalInteger("original_max_position_embeddings")
          .value_or(maxPositions);
  ropeReader->checkPositive("original_max_position_embeddings",
                            yarn.originalMaxPositions);
  yarn.betaFast = ropeReader->optionalNumber("beta_fast").value_or(32.0);
  yarn.betaSlow = ropeReader->optionalNumber("beta_slow").value_or(1.0);
  yarn.mscale = ropeReader->optionalNumber("mscale").value_or(1.0);
  yarn.mscaleAllDim =
      ropeReader->optionalNumber("mscale_all_dim").value_or(0.0);
  yarn.truncate = ropeReader->optionalBoolean("truncate").value_or(true);
  yarn.attentionFactor = ropeReader->optionalNumber("attention_factor");
  if (yarn.attentionFactor)
    ropeReader->checkPositive("attention_factor", *yarn.attentionFactor);
  yarnConfig = yarn;
}

/// MoE routing fields that must agree, under the names the family's config
/// gives them: top-k within the experts, expert groups that divide the
/// experts, kept groups within the groups.
void checkRouting(FieldReader &reader, StringRef expertsKey, int64_t experts,
                  StringRef perTokenKey, int64_t perToken, StringRef groupsKey,
                  int64_t groups, int64_t topkGroup) {
  reader.check(perToken <= experts, perTokenKey,
               "must be <= " + expertsKey + " (" + Twine(experts) + "), got " +
                   Twine(perToken));
  reader.check(experts % groups == 0, groupsKey,
               "must divide " + expertsKey + " (" + Twine(experts) + "), got " +
                   Twine(groups));
  reader.check(topkGroup <= groups, "topk_group",
               "must be <= " + groupsKey + " (" + Twine(groups) + "), got " +
                   Twine(topkGroup));
}

/// eos_token_id: an id or a list of ids; generation stops at any of them.
void readEosTokenIds(FieldReader &reader, std::vector<int64_t> &ids) {
  const json::Value *eos = reader.lookup("eos_token_id");
  if (!eos)
    return;
  if (std::optional<int64_t> id = asInteger(*eos)) {
    ids.push_back(*id);
    return;
  }
  const json::Array *list = eos->getAsArray();
  reader.check(list != nullptr, "eos_token_id",
               "must be an integer or a list of integers");
  if (!list)
    return;
  for (const json::Value &v : *list) {
    std::optional<int64_t> id = asInteger(v);
    reader.check(id.has_value(), "eos_token_id",
                 "must be an integer or a list of integers");
    if (id)
      ids.push_back(*id);
  }
}

/// Reads `quantization_config` into `config.fp8BlockSize`; only
/// block-scaled FP8 is understood, and any other scheme is refused because
/// the weights would be misread.
template <typename Config>
void readQuantization(FieldReader &reader, Config &config) {
  const json::Object *quant = reader.optionalObject("quantization_config");
  if (!quant)
    return;
  FieldReader quantReader = reader.nested(*quant, "quantization_config");
  StringRef method = quantReader.string("quant_method");
  if (reader.failed())
    return;
  quantReader.check(method == "fp8", "quant_method",
                    "names unsupported quantization '" + method +
                        "' (supported: fp8)");
  if (std::optional<StringRef> fmt = quantReader.optionalString("fmt"))
    quantReader.check(*fmt == "e4m3", "fmt",
                      "names unsupported FP8 format '" + *fmt +
                          "' (supported: e4m3)");
  const json::Array *block = quantReader.array("weight_block_size");
  if (reader.failed())
    return;
  std::array<int64_t, 2> blockSize = {0, 0};
  quantReader.check(block->size() == 2, "weight_block_size",
                    "must have 2 entries, got " + Twine(block->size()));
  for (size_t i = 0; i < 2 && i < block->size(); ++i) {
    std::optional<int64_t> entry = asInteger((*block)[i]);
    quantReader.check(entry && *entry > 0, "weight_block_size",
                      "must hold positive integers");
    blockSize[i] = entry.value_or(0);
  }
  config.fp8BlockSize = blockSize;
}

/// Checks that the values fit together; runs only on fully read configs so
/// divisions are safe.
void validate(FieldReader &reader, const DeepseekV32Config &config) {
  std::pair<StringRef, int64_t> positives[] = {
      {"vocab_size", config.vocabSize},
      {"hidden_size", config.hiddenSize},
      {"intermediate_size", config.intermediateSize},
      {"moe_intermediate_size", config.moeIntermediateSize},
      {"num_hidden_layers", config.numLayers},
      {"num_attention_heads", config.numHeads},
      {"q_lora_rank", config.qLoraRank},
      {"kv_lora_rank", config.kvLoraRank},
      {"qk_nope_head_dim", config.qkNopeHeadDim},
      {"qk_rope_head_dim", config.qkRopeHeadDim},
      {"v_head_dim", config.vHeadDim},
      {"n_routed_experts", config.numRoutedExperts},
      {"num_experts_per_tok", config.numExpertsPerTok},
      {"n_group", config.numGroups},
      {"topk_group", config.topkGroup},
      {"index_n_heads", config.indexNumHeads},
      {"index_head_dim", config.indexHeadDim},
      {"index_topk", config.indexTopk},
      {"max_position_embeddings", config.maxPositionEmbeddings},
  };
  for (auto [key, value] : positives)
    reader.checkPositive(key, value);
  reader.checkPositive("rms_norm_eps", config.rmsNormEps);
  reader.checkPositive("rope_theta", config.ropeTheta);
  reader.checkPositive("routed_scaling_factor", config.routedScalingFactor);
  reader.check(config.numSharedExperts >= 0, "n_shared_experts",
               "must not be negative, got " + Twine(config.numSharedExperts));
  reader.check(config.firstKDenseReplace >= 0 &&
                   config.firstKDenseReplace <= config.numLayers,
               "first_k_dense_replace",
               "must be in [0, num_hidden_layers = " + Twine(config.numLayers) +
                   "], got " + Twine(config.firstKDenseReplace));
  if (reader.failed())
    return;

  // RoPE rotates pairs of dimensions.
  reader.check(config.qkRopeHeadDim % 2 == 0, "qk_rope_head_dim",
               "must be even, got " + Twine(config.qkRopeHeadDim));
  // The indexer head is [rope | nope] with the MLA rope width.
  reader.check(config.indexHeadDim >= config.qkRopeHeadDim, "index_head_dim",
               "must be >= qk_rope_head_dim (" + Twine(config.qkRopeHeadDim) +
                   "), got " + Twine(config.indexHeadDim));
  checkRouting(reader, "n_routed_experts", config.numRoutedExperts,
               "num_experts_per_tok", config.numExpertsPerTok, "n_group",
               config.numGroups, config.topkGroup);
  if (reader.failed())
    return;
  // Group-limited routing picks its top-k among the experts of the kept
  // groups only; fewer than k there makes the top-k undefined.
  int64_t reachable =
      config.topkGroup * (config.numRoutedExperts / config.numGroups);
  reader.check(config.numExpertsPerTok <= reachable, "num_experts_per_tok",
               "must be <= topk_group * n_routed_experts / n_group (" +
                   Twine(reachable) + "), got " +
                   Twine(config.numExpertsPerTok));
}

Expected<DeepseekV32Config> parseDeepseekV32(const json::Object &root,
                                             StringRef path) {
  std::string error;
  FieldReader reader(root, path, error);
  DeepseekV32Config config;
  config.vocabSize = reader.integer("vocab_size");
  config.hiddenSize = reader.integer("hidden_size");
  config.intermediateSize = reader.integer("intermediate_size");
  config.moeIntermediateSize = reader.integer("moe_intermediate_size");
  config.numLayers = reader.count("num_hidden_layers", kMaxLayers);
  config.firstKDenseReplace = reader.integer("first_k_dense_replace");
  config.numHeads = reader.integer("num_attention_heads");
  config.qLoraRank = reader.integer("q_lora_rank");
  config.kvLoraRank = reader.integer("kv_lora_rank");
  config.qkNopeHeadDim = reader.integer("qk_nope_head_dim");
  config.qkRopeHeadDim = reader.integer("qk_rope_head_dim");
  config.vHeadDim = reader.integer("v_head_dim");
  config.numRoutedExperts = reader.integer("n_routed_experts");
  config.numSharedExperts = reader.integer("n_shared_experts");
  config.numExpertsPerTok = reader.integer("num_experts_per_tok");
  config.numGroups = reader.integer("n_group");
  config.topkGroup = reader.integer("topk_group");
  config.indexNumHeads = reader.integer("index_n_heads");
  config.indexHeadDim = reader.integer("index_head_dim");
  config.indexTopk = reader.integer("index_topk");
  config.maxPositionEmbeddings = reader.integer("max_position_embeddings");
  config.rmsNormEps = reader.number("rms_norm_eps");
  config.routedScalingFactor = reader.number("routed_scaling_factor");
  config.normTopkProb = reader.boolean("norm_topk_prob");
  // transformers' PretrainedConfig default; hub configs spell it out anyway.
  config.tieWordEmbeddings =
      reader.optionalBoolean("tie_word_embeddings").value_or(false);
  readEosTokenIds(reader, config.eosTokenIds);
  readRope(reader, config.maxPositionEmbeddings, config.ropeTheta,
           config.yarn);
  readQuantization(reader, config);
  if (!reader.failed())
    validate(reader, config);
  if (reader.failed())
    return makeError(error);
  return config;
}

/// Reads gpt-oss's `quantization_config`: absent (dequantised experts) or
/// MXFP4 experts. Any other scheme is refused: the experts would be misread.
void readGptOssQuantization(FieldReader &reader, GptOssConfig &config) {
  const json::Object *quant = reader.optionalObject("quantization_config");
  if (!quant)
    return;
  FieldReader quantReader = reader.nested(*quant, "quantization_config");
  StringRef method = quantReader.string("quant_method");
  if (reader.failed())
    return;
  quantReader.check(method == "mxfp4", "quant_method",
                    "names unsupported quantization '" + method +
                        "' (supported: mxfp4)");
  config.mxfp4Experts = true;
  if (const json::Array *modules =
          quantReader.optionalArray("modules_to_not_convert"))
    for (const json::Value &module : *modules) {
      std::optional<StringRef> name = module.getAsString();
      quantReader.check(name.has_value(), "modules_to_not_convert",
                        "must hold strings");
      if (!name)
        continue;
      // The experts are what MXFP4 converts; a checkpoint that keeps them
      // unconverted would store them in a layout this importer does not read.
      quantReader.check(!name->contains("mlp.experts"),
                        "modules_to_not_convert",
                        "lists '" + *name +
                            "': unconverted experts in an mxfp4 checkpoint "
                            "are not supported");
      config.modulesToNotConvert.push_back(name->str());
    }
}

/// layer_types, or transformers' default (sliding on even layers).
void readLayerTypes(FieldReader &reader, GptOssConfig &config) {
  const json::Array *types = reader.optionalArray("layer_types");
  if (reader.failed())
    return;
  if (!types) {
    for (int64_t l = 0; l < config.numLayers; ++l)
      config.slidingLayers.push_back((l + 1) % 2 != 0);
    return;
  }
  reader.check(static_cast<int64_t>(types->size()) == config.numLayers,
               "layer_types",
               "must list num_hidden_layers (" + Twine(config.numLayers) +
                   ") entries, got " + Twine(types->size()));
  for (const json::Value &type : *types) {
    std::optional<StringRef> name = type.getAsString();
    bool known =
        name && (*name == "sliding_attention" || *name == "full_attention");
    std::string got = name ? ", got '" + name->str() + "'" : "";
    reader.check(known, "layer_types",
                 "must hold \"sliding_attention\" or \"full_attention\"" +
                     got);
    config.slidingLayers.push_back(name && *name == "sliding_attention");
  }
}

Expected<GptOssConfig> parseGptOss(const json::Object &root, StringRef path) {
  std::string error;
  FieldReader reader(root, path, error);
  GptOssConfig config;
  config.vocabSize = reader.integer("vocab_size");
  config.hiddenSize = reader.integer("hidden_size");
  config.intermediateSize = reader.integer("intermediate_size");
  config.numLayers = reader.count("num_hidden_layers", kMaxLayers);
  config.numHeads = reader.integer("num_attention_heads");
  config.numKeyValueHeads = reader.integer("num_key_value_heads");
  config.headDim = reader.integer("head_dim");
  config.numLocalExperts = reader.integer("num_local_experts");
  // The hub config spells the top-k both ways (transformers reads
  // num_experts_per_tok, OpenAI's reference experts_per_token).
  std::optional<int64_t> topK = reader.optionalInteger("num_experts_per_tok");
  std::optional<int64_t> perToken = reader.optionalInteger("experts_per_token");
  if (!topK && !perToken)
    reader.fail("missing field 'num_experts_per_tok' (or 'experts_per_token') "
                "in " + path);
  if (topK && perToken)
    reader.check(*topK == *perToken, "experts_per_token",
                 "must equal num_experts_per_tok (" + Twine(*topK) +
                     "), got " + Twine(*perToken));
  config.numExpertsPerTok = topK.value_or(perToken.value_or(0));
  config.maxPositionEmbeddings = reader.integer("max_position_embeddings");
  config.rmsNormEps = reader.number("rms_norm_eps");
  config.swigluLimit = reader.optionalNumber("swiglu_limit").value_or(7.0);
  config.swigluAlpha = reader.optionalNumber("swiglu_alpha").value_or(1.702);
  config.attentionBias =
      reader.optionalBoolean("attention_bias").value_or(true);
  config.tieWordEmbeddings =
      reader.optionalBoolean("tie_word_embeddings").value_or(false);
  readEosTokenIds(reader, config.eosTokenIds);
  readRope(reader, config.maxPositionEmbeddings, config.ropeTheta,
           config.yarn);
  readGptOssQuantization(reader, config);
  if (reader.failed())
    return makeError(error);

  std::pair<StringRef, int64_t> positives[] = {
      {"vocab_size", config.vocabSize},
      {"hidden_size", config.hiddenSize},
      {"intermediate_size", config.intermediateSize},
      {"num_hidden_layers", config.numLayers},
      {"num_attention_heads", config.numHeads},
      {"num_key_value_heads", config.numKeyValueHeads},
      {"head_dim", config.headDim},
      {"num_local_experts", config.numLocalExperts},
      {topK ? "num_experts_per_tok" : "experts_per_token",
       config.numExpertsPerTok},
      {"max_position_embeddings", config.maxPositionEmbeddings},
  };
  for (auto [key, value] : positives)
    reader.checkPositive(key, value);
  reader.checkPositive("rms_norm_eps", config.rmsNormEps);
  reader.checkPositive("rope_theta", config.ropeTheta);
  reader.checkPositive("swiglu_limit", config.swigluLimit);
  reader.checkPositive("swiglu_alpha", config.swigluAlpha);
  if (reader.failed())
    return makeError(error);
  readLayerTypes(reader, config);
  // Half-split RoPE rotates pairs (i, i + head_dim / 2).
  reader.check(config.headDim % 2 == 0, "head_dim",
               "must be even, got " + Twine(config.headDim));
  reader.check(config.numHeads % config.numKeyValueHeads == 0,
               "num_attention_heads",
               "must be a multiple of num_key_value_heads (" +
                   Twine(config.numKeyValueHeads) + "), got " +
                   Twine(config.numHeads));
  reader.check(config.numExpertsPerTok <= config.numLocalExperts,
               topK ? "num_experts_per_tok" : "experts_per_token",
               "must be <= num_local_experts (" +
                   Twine(config.numLocalExperts) + "), got " +
                   Twine(config.numExpertsPerTok));
  if (llvm::is_contained(config.slidingLayers, true)) {
    // Only read when a layer slides: transformers ignores it otherwise.
    config.slidingWindow = reader.integer("sliding_window");
    reader.checkPositive("sliding_window", config.slidingWindow);
  }
  if (config.mxfp4Experts) {
    // MXFP4 scales blocks of 32 input features of each expert matrix.
    reader.check(config.hiddenSize % 32 == 0, "hidden_size",
                 "must be a multiple of 32 for MXFP4 experts, got " +
                     Twine(config.hiddenSize));
    reader.check(config.intermediateSize % 32 == 0, "intermediate_size",
                 "must be a multiple of 32 for MXFP4 experts, got " +
                     Twine(config.intermediateSize));
  }
  if (reader.failed())
    return makeError(error);
  return config;
}

/// The first of `keys` the config has (HF aliases), or `keys[0]` to name
/// a missing field.
StringRef aliasOf(FieldReader &reader, std::initializer_list<StringRef> keys) {
  for (StringRef key : keys)
    if (reader.has(key))
      return key;
  return *keys.begin();
}

/// linear_attn_config's layer lists (1-based), or transformers' default.
void readKdaLayers(FieldReader &reader, const json::Object *linear,
                   KimiLinearConfig &config) {
  int64_t layers = config.numLayers;
  config.kdaLayers.assign(layers, true);
  FieldReader linearReader = reader.nested(*linear, "linear_attn_config");
  const json::Array *kda = linearReader.optionalArray("kda_layers");
  const json::Array *full = linearReader.optionalArray("full_attn_layers");
  if (!kda && !full) {
    for (int64_t i = 0; i < layers; ++i)
      config.kdaLayers[i] = (i + 1) % 4 != 0;
    return;
  }
  // Each layer in exactly one list (a list left out: the other's
  // complement).
  std::vector<int> seen(layers, 0);
  auto mark = [&](const json::Array *list, StringRef key, bool isKda) {
    if (!list)
      return;
    for (const json::Value &v : *list) {
      std::optional<int64_t> layer = asInteger(v);
      linearReader.check(layer && *layer >= 1 && *layer <= layers, key,
                         "must hold 1-based layer numbers in [1, " +
                             Twine(layers) + "]");
      if (!layer || *layer < 1 || *layer > layers)
        continue;
      linearReader.check(!seen[*layer - 1], key,
                         "names layer " + Twine(*layer) +
                             " twice (or in both kda_layers and "
                             "full_attn_layers)");
      seen[*layer - 1] = 1;
      config.kdaLayers[*layer - 1] = isKda;
    }
  };
  mark(kda, "kda_layers", true);
  mark(full, "full_attn_layers", false);
  if (kda && full)
    for (int64_t i = 0; i < layers && !reader.failed(); ++i)
      linearReader.check(seen[i], "kda_layers",
                         "and full_attn_layers leave layer " + Twine(i + 1) +
                             " (1-based) in neither");
  else
    for (int64_t i = 0; i < layers; ++i)
      if (!seen[i])
        config.kdaLayers[i] = !kda; // the listed kind's complement
}

Expected<KimiLinearConfig> parseKimiLinear(const json::Object &root,
                                           StringRef path) {
  std::string error;
  FieldReader reader(root, path, error);
  KimiLinearConfig config;
  config.vocabSize = reader.integer("vocab_size");
  config.hiddenSize = reader.integer("hidden_size");
  config.numLayers = reader.count("num_hidden_layers", kMaxLayers);
  config.maxPositionEmbeddings = reader.integer(
      aliasOf(reader, {"model_max_length", "max_position_embeddings"}));
  config.intermediateSize = reader.integer("intermediate_size");
  config.firstKDenseReplace =
      reader.optionalInteger("first_k_dense_replace").value_or(0);
  config.numHeads = reader.integer("num_attention_heads");
  config.qLoraRank = reader.optionalInteger("q_lora_rank").value_or(0);
  config.kvLoraRank = reader.integer("kv_lora_rank");
  config.qkNopeHeadDim = reader.integer("qk_nope_head_dim");
  config.qkRopeHeadDim = reader.integer("qk_rope_head_dim");
  config.vHeadDim = reader.integer("v_head_dim");
  config.numExperts =
      reader.integer(aliasOf(reader, {"num_experts", "num_local_experts"}));
  config.numExpertsPerToken = reader.integer(
      aliasOf(reader, {"num_experts_per_token", "num_experts_per_tok"}));
  config.numSharedExperts =
      reader
          .optionalInteger(
              aliasOf(reader, {"num_shared_experts", "n_shared_experts"}))
          .value_or(0);
  config.moeIntermediateSize = reader.integer("moe_intermediate_size");
  config.numExpertGroups =
      reader.optionalInteger(aliasOf(reader, {"num_expert_group", "n_group"}))
          .value_or(1);
  config.topkGroup = reader.optionalInteger("topk_group").value_or(1);
  config.routedScalingFactor =
      reader.optionalNumber("routed_scaling_factor").value_or(1.0);
  config.moeRenormalize =
      reader
          .optionalBoolean(
              aliasOf(reader, {"moe_renormalize", "norm_topk_prob"}))
          .value_or(true);
  config.rmsNormEps = reader.number("rms_norm_eps");
  config.tieWordEmbeddings =
      reader.optionalBoolean("tie_word_embeddings").value_or(false);
  readEosTokenIds(reader, config.eosTokenIds);
  // What this importer builds, and refuses otherwise: NoPE MLA (HF infers
  // it from qk_rope_head_dim == 0 too), sigmoid routing, SiLU experts, a
  // MoE every layer after the dense ones.
  bool nope = reader.optionalBoolean("mla_use_nope")
                  .value_or(config.qkRopeHeadDim == 0);
  reader.check(nope, "mla_use_nope",
               "is false: rotary MLA in kimi_linear is not supported");
  std::optional<StringRef> router =
      reader.optionalString("moe_router_activation_func");
  reader.check(!router || *router == "sigmoid", "moe_router_activation_func",
               "names '" + router.value_or("") + "' (supported: sigmoid)");
  std::optional<StringRef> act = reader.optionalString("hidden_act");
  reader.check(!act || *act == "silu", "hidden_act",
               "names '" + act.value_or("") + "' (supported: silu)");
  std::optional<int64_t> freq = reader.optionalInteger("moe_layer_freq");
  reader.check(!freq || *freq == 1, "moe_layer_freq",
               "must be 1 (a MoE every layer after the dense ones), got " +
                   Twine(freq.value_or(0)));
  const json::Object *linear = reader.optionalObject("linear_attn_config");
  if (!linear)
    reader.fail("missing field 'linear_attn_config' in " + path);
  if (reader.failed())
    return makeError(error);
  FieldReader linearReader = reader.nested(*linear, "linear_attn_config");
  config.kdaHeads = linearReader.integer("num_heads");
  config.kdaHeadDim = linearReader.integer("head_dim");
  config.shortConvKernel = linearReader.integer("short_conv_kernel_size");
  // Kimi K3's variants (a bounded gate, a full-rank output gate) are other
  // math; refused here rather than misread.
  linearReader.check(!linearReader.has("gate_lower_bound"), "gate_lower_bound",
                     "is set: the bounded KDA gate is not supported for "
                     "kimi_linear");
  linearReader.check(
      !linearReader.optionalBoolean("use_full_rank_gate").value_or(false),
      "use_full_rank_gate",
      "is true: a full-rank output gate is not supported for kimi_linear");
  if (reader.failed())
    return makeError(error);

  std::pair<StringRef, int64_t> positives[] = {
      {"vocab_size", config.vocabSize},
      {"hidden_size", config.hiddenSize},
      {"num_hidden_layers", config.numLayers},
      {"intermediate_size", config.intermediateSize},
      {"num_attention_heads", config.numHeads},
      {"kv_lora_rank", config.kvLoraRank},
      {"qk_nope_head_dim", config.qkNopeHeadDim},
      {"v_head_dim", config.vHeadDim},
      {"num_experts", config.numExperts},
      {"num_experts_per_token", config.numExpertsPerToken},
      {"moe_intermediate_size", config.moeIntermediateSize},
      {"num_expert_group", config.numExpertGroups},
      {"topk_group", config.topkGroup},
      {"linear_attn_config.num_heads", config.kdaHeads},
      {"linear_attn_config.head_dim", config.kdaHeadDim},
      {"linear_attn_config.short_conv_kernel_size", config.shortConvKernel},
  };
  for (auto [key, value] : positives)
    reader.checkPositive(key, value);
  reader.checkPositive("rms_norm_eps", config.rmsNormEps);
  reader.checkPositive("routed_scaling_factor", config.routedScalingFactor);
  reader.check(config.qLoraRank >= 0, "q_lora_rank",
               "must be null or positive, got " + Twine(config.qLoraRank));
  reader.check(config.qkRopeHeadDim >= 0, "qk_rope_head_dim",
               "must be >= 0, got " + Twine(config.qkRopeHeadDim));
  reader.check(config.numSharedExperts >= 0, "num_shared_experts",
               "must be >= 0, got " + Twine(config.numSharedExperts));
  reader.check(config.firstKDenseReplace >= 0 &&
                   config.firstKDenseReplace <= config.numLayers,
               "first_k_dense_replace",
               "must be in [0, num_hidden_layers], got " +
                   Twine(config.firstKDenseReplace));
  if (reader.failed())
    return makeError(error);
  checkRouting(reader, "num_experts", config.numExperts,
               "num_experts_per_token", config.numExpertsPerToken,
               "num_expert_group", config.numExpertGroups, config.topkGroup);
  readKdaLayers(reader, linear, config);
  if (reader.failed())
    return makeError(error);
  return config;
}

/// A per-layer schedule from the string list `key` (each entry one of
/// `names`, mapped to its flag), or `fallback(i)` when absent.
void readLayerSchedule(FieldReader &reader, StringRef key, int64_t layers,
                       ArrayRef<std::pair<StringRef, bool>> names,
                       function_ref<bool(int64_t)> fallback,
                       std::vector<bool> &out) {
  out.assign(layers, false);
  const json::Array *list = reader.optionalArray(key);
  if (!list) {
    for (int64_t i = 0; i < layers; ++i)
      out[i] = fallback(i);
    return;
  }
  reader.check(int64_t(list->size()) == layers, key,
               "has " + Twine(list->size()) + " entries for " + Twine(layers) +
                   " layers");
  std::string known;
  for (auto [name, flag] : names)
    known += (known.empty() ? "" : ", ") + name.str();
  for (int64_t i = 0; i < layers && i < int64_t(list->size()); ++i) {
    std::optional<StringRef> name = (*list)[i].getAsString();
    const std::pair<StringRef, bool> *match = nullptr;
    for (const auto &entry : names)
      if (name && *name == entry.first)
        match = &entry;
    reader.check(match != nullptr, key,
                 "entry " + Twine(i) + " is not one of " + known);
    if (match)
      out[i] = match->second;
  }
}

Expected<Glm5NextConfig> parseGlm5Next(const json::Object &root,
                                       StringRef path) {
  std::string error;
  FieldReader top(root, path, error);
  // The text model's fields: text_config, or the top level of a flat
  // text-only config (transformers forwards those into text_config).
  const json::Object *text = top.optionalObject("text_config");
  if (top.failed())
    return makeError(error);
  FieldReader reader = text ? top.nested(*text, "text_config") : top;
  Glm5NextConfig config;
  // The FP8 release says so at the top level, next to text_config.
  readQuantization(top, config);
  config.vocabSize = reader.integer("vocab_size");
  config.hiddenSize = reader.integer("hidden_size");
  config.numLayers = reader.count("num_hidden_layers", kMaxLayers);
  config.maxPositionEmbeddings = reader.integer("max_position_embeddings");
  config.intermediateSize = reader.integer("intermediate_size");
  config.numHeads = reader.integer("num_attention_heads");
  int64_t kvHeads =
      reader.optionalInteger("num_key_value_heads").value_or(config.numHeads);
  config.qLoraRank = reader.integer("q_lora_rank");
  config.kvLoraRank = reader.integer("kv_lora_rank");
  config.qkNopeHeadDim = reader.integer("qk_nope_head_dim");
  int64_t ropeDim = reader.optionalInteger("qk_rope_head_dim").value_or(0);
  config.vHeadDim = reader.integer("v_head_dim");
  config.indexHeads = reader.integer("index_n_heads");
  config.indexHeadDim = reader.integer("index_head_dim");
  config.indexTopk = reader.integer("index_topk");
  config.indexKpool = reader.optionalInteger("index_kpool").value_or(16);
  bool tail =
      reader.optionalBoolean("index_kpool_always_select_tail").value_or(true);
  config.hcMult = reader.optionalInteger("hc_mult").value_or(4);
  config.hcSinkhornIters =
      reader.optionalInteger("hc_sinkhorn_iters").value_or(20);
  config.hcEps = reader.optionalNumber("hc_eps").value_or(1e-6);
  config.numExperts = reader.integer("n_routed_experts");
  config.numExpertsPerToken = reader.integer("num_experts_per_tok");
  config.numSharedExperts =
      reader.optionalInteger("n_shared_experts").value_or(0);
  config.moeIntermediateSize = reader.integer("moe_intermediate_size");
  config.numExpertGroups = reader.optionalInteger("n_group").value_or(1);
  config.topkGroup = reader.optionalInteger("topk_group").value_or(1);
  config.routedScalingFactor =
      reader.optionalNumber("routed_scaling_factor").value_or(1.0);
  config.moeRenormalize =
      reader.optionalBoolean("norm_topk_prob").value_or(true);
  config.swigluLimit = reader.optionalNumber("swiglu_limit");
  config.rmsNormEps = reader.number("rms_norm_eps");
  config.tieWordEmbeddings =
      reader.optionalBoolean("tie_word_embeddings").value_or(false);
  readEosTokenIds(reader, config.eosTokenIds);
  std::optional<StringRef> act = reader.optionalString("hidden_act");
  reader.check(!act || *act == "silu", "hidden_act",
               "names '" + act.value_or("") + "' (supported: silu)");
  reader.check(ropeDim == 0, "qk_rope_head_dim",
               "must be 0 (glm5_next's MLA has no rope), got " +
                   Twine(ropeDim));
  reader.check(kvHeads == config.numHeads, "num_key_value_heads",
               "must equal num_attention_heads (" + Twine(config.numHeads) +
                   "), got " + Twine(kvHeads));
  reader.check(tail, "index_kpool_always_select_tail",
               "is false: transformers then attends to future tokens "
               "(unsupported)");
  std::optional<int64_t> pad = reader.optionalInteger("pad_token_id");
  reader.check(!pad || (*pad >= 0 && *pad < config.vocabSize), "pad_token_id",
               "must be in [0, vocab_size), got " + Twine(pad.value_or(0)));
  const json::Object *linear = reader.optionalObject("linear_attn_config");
  if (!linear)
    reader.fail("missing field '" + Twine(text ? "text_config." : "") +
                "linear_attn_config' in " + path);
  if (reader.failed())
    return makeError(error);
  FieldReader linearReader = reader.nested(*linear, "linear_attn_config");
  config.kdaHeads = linearReader.integer("num_heads");
  config.kdaHeadDim = linearReader.integer("head_dim");
  config.shortConvKernel = linearReader.integer("short_conv_kernel_size");
  config.gateLowerBound = linearReader.optionalNumber("gate_lower_bound");
  if (reader.failed())
    return makeError(error);

  std::pair<StringRef, int64_t> positives[] = {
      {"vocab_size", config.vocabSize},
      {"hidden_size", config.hiddenSize},
      {"num_hidden_layers", config.numLayers},
      {"intermediate_size", config.intermediateSize},
      {"num_attention_heads", config.numHeads},
      {"q_lora_rank", config.qLoraRank},
      {"kv_lora_rank", config.kvLoraRank},
      {"qk_nope_head_dim", config.qkNopeHeadDim},
      {"v_head_dim", config.vHeadDim},
      {"index_n_heads", config.indexHeads},
      {"index_head_dim", config.indexHeadDim},
      {"index_topk", config.indexTopk},
      {"index_kpool", config.indexKpool},
      {"hc_mult", config.hcMult},
      {"hc_sinkhorn_iters", config.hcSinkhornIters},
      {"n_routed_experts", config.numExperts},
      {"num_experts_per_tok", config.numExpertsPerToken},
      {"moe_intermediate_size", config.moeIntermediateSize},
      {"n_group", config.numExpertGroups},
      {"topk_group", config.topkGroup},
      {"linear_attn_config.num_heads", config.kdaHeads},
      {"linear_attn_config.head_dim", config.kdaHeadDim},
      {"linear_attn_config.short_conv_kernel_size", config.shortConvKernel},
  };
  for (auto [key, value] : positives)
    reader.checkPositive(key, value);
  reader.checkPositive("rms_norm_eps", config.rmsNormEps);
  reader.checkPositive("hc_eps", config.hcEps);
  reader.checkPositive("routed_scaling_factor", config.routedScalingFactor);
  if (config.swigluLimit)
    reader.checkPositive("swiglu_limit", *config.swigluLimit);
  if (config.gateLowerBound)
    linearReader.check(*config.gateLowerBound < 0, "gate_lower_bound",
                       "must be negative, got " +
                           formatDouble(*config.gateLowerBound));
  reader.check(config.numSharedExperts >= 0, "n_shared_experts",
               "must be >= 0, got " + Twine(config.numSharedExperts));
  if (reader.failed())
    return makeError(error);
  reader.check(config.indexTopk % config.indexKpool == 0, "index_topk",
               "must be a multiple of index_kpool (" +
                   Twine(config.indexKpool) + "), got " +
                   Twine(config.indexTopk));
  checkRouting(reader, "n_routed_experts", config.numExperts,
               "num_experts_per_tok", config.numExpertsPerToken, "n_group",
               config.numExpertGroups, config.topkGroup);

  int64_t layers = config.numLayers;
  readLayerSchedule(
      reader, "layer_types", layers,
      {{"linear_attention", true},
       {"deepseek_sparse_attention", false},
       {"full_attention", false},
       {"indexed_attention", false}},
      [](int64_t i) { return i % 4 != 3; }, config.kdaLayers);
  readLayerSchedule(
      reader, "mlp_layer_types", layers, {{"dense", true}, {"sparse", false}},
      [](int64_t i) { return i < 3; }, config.denseMlp);
  if (std::optional<StringRef> pattern =
          reader.optionalString("index_topk_pattern");
      pattern && !reader.has("indexer_types")) {
    // One letter a layer: F(ull) or S(hared).
    reader.check(int64_t(pattern->size()) == layers &&
                     pattern->find_first_not_of("FS") == StringRef::npos,
                 "index_topk_pattern",
                 "must be " + Twine(layers) + " letters F or S");
    config.sharedIndexer.assign(layers, false);
    for (int64_t i = 0; i < layers && i < int64_t(pattern->size()); ++i)
      config.sharedIndexer[i] = (*pattern)[i] == 'S';
  } else {
    // index_topk_freq / index_skip_topk_offset other than their defaults
    // (every layer full) are not read: refused rather than guessed.
    std::optional<int64_t> freq = reader.optionalInteger("index_topk_freq");
    reader.check(reader.has("indexer_types") || !freq || *freq == 1,
                 "index_topk_freq",
                 "other than 1 without indexer_types is not supported, got " +
                     Twine(freq.value_or(0)));
    readLayerSchedule(
        reader, "indexer_types", layers, {{"full", false}, {"shared", true}},
        [](int64_t) { return false; }, config.sharedIndexer);
  }
  if (reader.failed())
    return makeError(error);
  for (int64_t i = 0; i < layers; ++i) {
    if (!config.sharedIndexer[i] || config.kdaLayers[i])
      continue; // a KDA layer's indexer type means nothing
    reader.check(i > 0 && !config.kdaLayers[i - 1] &&
                     !config.sharedIndexer[i - 1],
                 "indexer_types",
                 "makes layer " + Twine(i) +
                     " shared without a full DSA layer just before it "
                     "(transformers hands a selection on only to the next "
                     "layer)");
  }
  if (reader.failed())
    return makeError(error);
  return config;
}

/// Parses `jsonText` and returns its top-level object.
Expected<json::Value> parseRoot(StringRef jsonText, StringRef path) {
  Expected<json::Value> value = json::parse(jsonText);
  if (!value)
    return makeError("malformed JSON in " + path + ": " +
                     toString(value.takeError()));
  if (!value->getAsObject())
    return makeError("malformed config " + path +
                     ": top level is not a JSON object");
  return value;
}

Expected<DeepseekV32Config> dispatch(const json::Object &root, StringRef path) {
  std::string error;
  FieldReader reader(root, path, error);
  StringRef modelType = reader.string("model_type");
  if (reader.failed())
    return makeError(error);
  if (modelType != "deepseek_v32")
    return makeError("unsupported model_type '" + modelType + "' in " + path +
                     " (supported: deepseek_v32)");
  return parseDeepseekV32(root, path);
}

} // namespace

double DeepseekV32Config::softmaxScale() const {
  double scale = 1.0 / std::sqrt(double(qkNopeHeadDim + qkRopeHeadDim));
  // HF yarn_get_mscale returns 1 for factor <= 1.
  if (yarn && yarn->mscaleAllDim != 0.0 && yarn->factor > 1.0) {
    double mscale = 0.1 * yarn->mscaleAllDim * std::log(yarn->factor) + 1.0;
    scale *= mscale * mscale;
  }
  return scale;
}

Expected<DeepseekV32Config> parseDeepseekV32Config(StringRef jsonText,
                                                   StringRef path) {
  Expected<json::Value> root = parseRoot(jsonText, path);
  if (!root)
    return root.takeError();
  return dispatch(*root->getAsObject(), path);
}

double KimiLinearConfig::softmaxScale() const {
  return 1.0 / std::sqrt(double(qkNopeHeadDim + qkRopeHeadDim));
}

/// Parses `jsonText` as a config of `family` with `parse`; any other
/// model_type is an error naming it.
template <typename Config>
static Expected<Config>
parseFamilyConfig(StringRef jsonText, StringRef path, StringRef family,
                  Expected<Config> (*parse)(const json::Object &, StringRef)) {
  Expected<json::Value> root = parseRoot(jsonText, path);
  if (!root)
    return root.takeError();
  const json::Object &object = *root->getAsObject();
  std::string error;
  FieldReader reader(object, path, error);
  StringRef modelType = reader.string("model_type");
  if (reader.failed())
    return makeError(error);
  if (modelType != family)
    return makeError("model_type '" + modelType + "' in " + path + " is not " +
                     family);
  return parse(object, path);
}

Expected<KimiLinearConfig> parseKimiLinearConfig(StringRef jsonText,
                                                 StringRef path) {
  return parseFamilyConfig(jsonText, path, "kimi_linear", parseKimiLinear);
}

double Glm5NextConfig::softmaxScale() const {
  return 1.0 / std::sqrt(double(qkNopeHeadDim));
}

Expected<Glm5NextConfig> parseGlm5NextConfig(StringRef jsonText,
                                             StringRef path) {
  return parseFamilyConfig(jsonText, path, "glm5_next", parseGlm5Next);
}

Expected<GptOssConfig> parseGptOssConfig(StringRef jsonText, StringRef path) {
  return parseFamilyConfig(jsonText, path, "gpt_oss", parseGptOss);
}

Expected<DeepseekV32Config> loadConfig(StringRef dir) {
  SmallString<256> path(dir);
  sys::path::append(path, "config.json");
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return makeError("cannot read " + path + ": " +
                     buffer.getError().message());
  return parseDeepseekV32Config((*buffer)->getBuffer(), path);
}

} // namespace daybreak::importers
