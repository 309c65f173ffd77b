//===- ImporterTest.cpp - Tests of the Hugging Face checkpoint importer ---===//

#include "compiler/importers/Checkpoint.h"
#include "compiler/importers/HfConfig.h"

#include "compiler/reference/Tensor.h"
#include "runtime/numerics/Numerics.h"
#include "test/unit/SafetensorsWriter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>

using namespace daybreak;
using namespace daybreak::importers;
using safetensors::DType;
using testutil::bytesOf;
using testutil::RawTensor;
using testutil::writeSafetensors;

namespace {

const char *const kFixture = "/work/shared/fixtures/deepseek_v32";
const char *const kFp8Fixture = "/work/shared/fixtures/deepseek_v32_fp8";
const char *const kQaProj = "model.layers.0.self_attn.q_a_proj.weight";

/// An empty directory under the test temp dir, fresh for every run.
std::string freshDir(const std::string &name) {
  std::string dir = ::testing::TempDir() + "importer_" + name;
  (void)llvm::sys::fs::remove_directories(dir);
  EXPECT_FALSE(llvm::sys::fs::create_directories(dir));
  return dir;
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  stream << text;
}

std::string readText(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(bool(buffer)) << path;
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

/// Expects `value` to be an error whose message contains every needle.
template <typename T>
void expectError(llvm::Expected<T> value,
                 std::initializer_list<std::string> needles) {
  ASSERT_FALSE(bool(value)) << "expected an error";
  std::string message = llvm::toString(value.takeError());
  for (const std::string &needle : needles)
    EXPECT_NE(message.find(needle), std::string::npos)
        << "'" << needle << "' not in: " << message;
}

/// The fixture's config.json after `edit`, as text.
std::string editedConfig(llvm::function_ref<void(llvm::json::Object &)> edit) {
  llvm::Expected<llvm::json::Value> value =
      llvm::json::parse(readText(std::string(kFixture) + "/config.json"));
  EXPECT_TRUE(bool(value));
  if (!value) {
    llvm::consumeError(value.takeError());
    return "{}";
  }
  edit(*value->getAsObject());
  std::string text;
  llvm::raw_string_ostream(text) << *value;
  return text;
}

llvm::Expected<DeepseekV32Config>
parseEdited(llvm::function_ref<void(llvm::json::Object &)> edit) {
  return parseDeepseekV32Config(editedConfig(edit), "edited/config.json");
}

//===----------------------------------------------------------------------===//
// Config
//===----------------------------------------------------------------------===//

TEST(HfConfigTest, ParsesFixture) {
  llvm::Expected<DeepseekV32Config> config = loadConfig(kFixture);
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  EXPECT_EQ(config->vocabSize, 512);
  EXPECT_EQ(config->hiddenSize, 256);
  EXPECT_EQ(config->intermediateSize, 512);
  EXPECT_EQ(config->moeIntermediateSize, 64);
  EXPECT_EQ(config->numLayers, 3);
  EXPECT_EQ(config->firstKDenseReplace, 1);
  EXPECT_EQ(config->numHeads, 4);
  EXPECT_EQ(config->qLoraRank, 128);
  EXPECT_EQ(config->kvLoraRank, 64);
  EXPECT_EQ(config->qkNopeHeadDim, 32);
  EXPECT_EQ(config->qkRopeHeadDim, 16);
  EXPECT_EQ(config->vHeadDim, 32);
  EXPECT_EQ(config->numRoutedExperts, 8);
  EXPECT_EQ(config->numSharedExperts, 1);
  EXPECT_EQ(config->numExpertsPerTok, 2);
  EXPECT_EQ(config->numGroups, 2);
  EXPECT_EQ(config->topkGroup, 1);
  EXPECT_EQ(config->indexNumHeads, 4);
  EXPECT_EQ(config->indexHeadDim, 32);
  EXPECT_EQ(config->indexTopk, 16);
  EXPECT_EQ(config->maxPositionEmbeddings, 2560);
  EXPECT_EQ(config->rmsNormEps, 1e-6);
  EXPECT_EQ(config->ropeTheta, 10000.0);
  EXPECT_EQ(config->routedScalingFactor, 2.5);
  EXPECT_TRUE(config->normTopkProb);
  EXPECT_FALSE(config->tieWordEmbeddings);
  ASSERT_TRUE(config->yarn.has_value());
  EXPECT_EQ(config->yarn->factor, 40.0);
  EXPECT_EQ(config->yarn->mscale, 1.0);
  EXPECT_EQ(config->yarn->mscaleAllDim, 1.0);
  EXPECT_EQ(config->yarn->betaFast, 32.0);
  EXPECT_EQ(config->yarn->betaSlow, 1.0);
  EXPECT_EQ(config->yarn->originalMaxPositions, 64);
  EXPECT_FALSE(config->fp8BlockSize.has_value());
  // Value computed by transformers (fixture README); tolerance: its 8 digits.
  EXPECT_NEAR(config->softmaxScale(), 0.27046756, 1e-7);
}

TEST(HfConfigTest, ParsesFp8BlockSize) {
  llvm::Expected<DeepseekV32Config> config = loadConfig(kFp8Fixture);
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  ASSERT_TRUE(config->fp8BlockSize.has_value());
  EXPECT_EQ((*config->fp8BlockSize)[0], 128);
  EXPECT_EQ((*config->fp8BlockSize)[1], 128);
}

TEST(HfConfigTest, AcceptsRopeParametersWithDefaults) {
  llvm::Expected<DeepseekV32Config> config =
      parseEdited([](llvm::json::Object &root) {
        root.erase("rope_scaling");
        root.erase("rope_theta");
        root["rope_parameters"] = llvm::json::Object{
            {"rope_type", "yarn"}, {"rope_theta", 50000.0}, {"factor", 4}};
      });
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  EXPECT_EQ(config->ropeTheta, 50000.0);
  ASSERT_TRUE(config->yarn.has_value());
  EXPECT_EQ(config->yarn->factor, 4.0);
  EXPECT_EQ(config->yarn->betaFast, 32.0);
  EXPECT_EQ(config->yarn->betaSlow, 1.0);
  EXPECT_EQ(config->yarn->mscale, 1.0);
  EXPECT_EQ(config->yarn->mscaleAllDim, 0.0);
  EXPECT_EQ(config->yarn->originalMaxPositions, 2560);
  // mscale_all_dim 0: no YaRN correction of the softmax scale.
  EXPECT_DOUBLE_EQ(config->softmaxScale(), 1.0 / std::sqrt(48.0));
}

TEST(HfConfigTest, NullOrDefaultRopeScalingMeansNoYarn) {
  llvm::Expected<DeepseekV32Config> config = parseEdited(
      [](llvm::json::Object &root) { root["rope_scaling"] = nullptr; });
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  EXPECT_FALSE(config->yarn.has_value());
  config = parseEdited([](llvm::json::Object &root) {
    root["rope_parameters"] =
        llvm::json::Object{{"rope_type", "default"}, {"rope_theta", 1e6}};
  });
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  EXPECT_FALSE(config->yarn.has_value());
  EXPECT_EQ(config->ropeTheta, 1e6);
}

TEST(HfConfigTest, RejectsUnsupportedModelType) {
  std::string dir = freshDir("llama_config");
  writeText(dir + "/config.json", "{\"model_type\": \"llama\"}");
  expectError(loadConfig(dir), {"unsupported model_type 'llama' in " + dir +
                                "/config.json (supported: deepseek_v32)"});
  expectError(loadConfig(freshDir("no_config")),
              {"cannot read", "config.json"});
}

TEST(HfConfigTest, RejectsMalformedJson) {
  expectError(parseDeepseekV32Config("{\"model_type\": ", "bad/config.json"),
              {"malformed JSON in bad/config.json"});
  expectError(parseDeepseekV32Config("[1, 2]", "bad/config.json"),
              {"not a JSON object"});
}

TEST(HfConfigTest, RejectsMissingField) {
  expectError(
      parseEdited([](llvm::json::Object &root) { root.erase("hidden_size"); }),
      {"missing field 'hidden_size' in edited/config.json"});
  expectError(
      parseEdited([](llvm::json::Object &root) { root.erase("rope_theta"); }),
      {"missing field 'rope_theta'"});
  expectError(parseEdited([](llvm::json::Object &root) {
                root.getObject("rope_scaling")->erase("factor");
              }),
              {"missing field 'rope_scaling.factor'"});
}

TEST(HfConfigTest, RejectsWrongType) {
  expectError(parseEdited([](llvm::json::Object &root) {
                root["hidden_size"] = "256";
              }),
              {"field 'hidden_size' in edited/config.json must be an integer, "
               "not a string"});
  expectError(parseEdited([](llvm::json::Object &root) {
                root["hidden_size"] = 256.5;
              }),
              {"'hidden_size'", "must be an integer"});
  expectError(
      parseEdited([](llvm::json::Object &root) { root["norm_topk_prob"] = 1; }),
      {"'norm_topk_prob'", "must be a boolean, not a number"});
  expectError(parseEdited([](llvm::json::Object &root) {
                root["rope_scaling"] = "yarn";
              }),
              {"'rope_scaling'", "must be an object"});
}

TEST(HfConfigTest, RejectsBadValues) {
  struct Case {
    const char *key;
    llvm::json::Value value;
    const char *needle;
  };
  Case cases[] = {
      {"hidden_size", 0,
       "'hidden_size' in edited/config.json must be "
       "positive, got 0"},
      {"rms_norm_eps", -1.0, "'rms_norm_eps'"},
      {"num_experts_per_tok", 9, "must be <= n_routed_experts (8), got 9"},
      {"n_routed_experts", 7,
       "'n_group' in edited/config.json must divide n_routed_experts (7), "
       "got 2"},
      {"topk_group", 3,
       "'topk_group' in edited/config.json must be <= "
       "n_group (2), got 3"},
      {"num_experts_per_tok", 5, "topk_group * n_routed_experts / n_group"},
      {"first_k_dense_replace", 4, "'first_k_dense_replace'"},
      {"qk_rope_head_dim", 15, "must be even"},
      {"rope_scaling", llvm::json::Object{{"type", "linear"}, {"factor", 2}},
       "unsupported RoPE scaling 'linear'"},
      {"rope_scaling", llvm::json::Object{{"type", "yarn"}, {"factor", 0.5}},
       "'rope_scaling.factor' in edited/config.json must be >= 1, got 0.5"},
      {"quantization_config", llvm::json::Object{{"quant_method", "gptq"}},
       "unsupported quantization 'gptq'"},
      {"quantization_config",
       llvm::json::Object{{"quant_method", "fp8"},
                          {"weight_block_size", llvm::json::Array{128}}},
       "'quantization_config.weight_block_size'"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.key);
    expectError(
        parseEdited([&](llvm::json::Object &root) { root[c.key] = c.value; }),
        {c.needle});
  }
}

//===----------------------------------------------------------------------===//
// gpt_oss config
//===----------------------------------------------------------------------===//

const char *const kGptOssFixture = "test/fixtures/shared/gpt_oss_mxfp4";

/// The config.json of the fixture `dir` after `edit`, parsed by `parse`.
template <typename Config>
llvm::Expected<Config>
parseEdited(const char *dir,
            llvm::Expected<Config> (*parse)(llvm::StringRef, llvm::StringRef),
            llvm::function_ref<void(llvm::json::Object &)> edit) {
  std::string path =
      std::string(DAYBREAK_SOURCE_DIR) + "/" + dir + "/config.json";
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(readText(path));
  EXPECT_TRUE(bool(value));
  if (!value)
    return value.takeError();
  edit(*value->getAsObject());
  std::string text;
  llvm::raw_string_ostream(text) << *value;
  return parse(text, "edited/config.json");
}

/// The gpt-oss fixture's config.json after `edit`, parsed.
llvm::Expected<GptOssConfig>
parseGptOssEdited(llvm::function_ref<void(llvm::json::Object &)> edit) {
  return parseEdited(kGptOssFixture, parseGptOssConfig, edit);
}

TEST(GptOssConfigTest, ParsesFixture) {
  llvm::Expected<GptOssConfig> config =
      parseGptOssEdited([](llvm::json::Object &) {});
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  EXPECT_EQ(config->vocabSize, 512);
  EXPECT_EQ(config->hiddenSize, 128);
  EXPECT_EQ(config->numLayers, 2);
  EXPECT_EQ(config->numHeads, 4);
  EXPECT_EQ(config->numKeyValueHeads, 2);
  EXPECT_EQ(config->headDim, 32);
  EXPECT_EQ(config->numLocalExperts, 8);
  EXPECT_EQ(config->numExpertsPerTok, 4);
  EXPECT_EQ(config->slidingWindow, 8);
  EXPECT_EQ(config->slidingLayers, (std::vector<bool>{true, false}));
  EXPECT_EQ(config->eosTokenIds, (std::vector<int64_t>{2}));
  EXPECT_DOUBLE_EQ(config->swigluLimit, 7.0);
  EXPECT_DOUBLE_EQ(config->swigluAlpha, 1.702);
  EXPECT_DOUBLE_EQ(config->ropeTheta, 150000.0);
  EXPECT_TRUE(config->attentionBias);
  EXPECT_FALSE(config->tieWordEmbeddings);
  EXPECT_TRUE(config->mxfp4Experts);
  EXPECT_EQ(config->modulesToNotConvert.size(), 4u);
  ASSERT_TRUE(config->yarn.has_value());
  EXPECT_DOUBLE_EQ(config->yarn->factor, 32.0);
  EXPECT_EQ(config->yarn->originalMaxPositions, 4096);
  EXPECT_FALSE(config->yarn->truncate);
  EXPECT_FALSE(config->yarn->attentionFactor.has_value());
}

TEST(GptOssConfigTest, ReadsOptionalSpellings) {
  llvm::Expected<GptOssConfig> config =
      parseGptOssEdited([](llvm::json::Object &root) {
        // Only OpenAI's spelling of the top-k, every EOS id of a list,
        // transformers' default layer types, an explicit attention factor.
        root.erase("num_experts_per_tok");
        root["eos_token_id"] = llvm::json::Array{2, 7};
        root.erase("layer_types");
        root["rope_scaling"].getAsObject()->insert(
            {"attention_factor", 1.25});
        root.erase("quantization_config");
      });
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  EXPECT_EQ(config->numExpertsPerTok, 4);
  EXPECT_EQ(config->eosTokenIds, (std::vector<int64_t>{2, 7}));
  EXPECT_EQ(config->slidingLayers, (std::vector<bool>{true, false}));
  ASSERT_TRUE(config->yarn.has_value());
  EXPECT_EQ(config->yarn->attentionFactor.value_or(0.0), 1.25);
  EXPECT_FALSE(config->mxfp4Experts);
}

TEST(GptOssConfigTest, RejectsBadConfigs) {
  struct Case {
    std::function<void(llvm::json::Object &)> edit;
    const char *needle;
  };
  Case cases[] = {
      {[](llvm::json::Object &r) { r.erase("head_dim"); },
       "missing field 'head_dim' in edited/config.json"},
      {[](llvm::json::Object &r) {
         r.erase("num_experts_per_tok");
         r.erase("experts_per_token");
       },
       "missing field 'num_experts_per_tok' (or 'experts_per_token')"},
      {[](llvm::json::Object &r) { r["experts_per_token"] = 2; },
       "'experts_per_token' in edited/config.json must equal "
       "num_experts_per_tok (4), got 2"},
      {[](llvm::json::Object &r) { r["num_key_value_heads"] = 3; },
       "'num_attention_heads' in edited/config.json must be a multiple of "
       "num_key_value_heads (3), got 4"},
      {[](llvm::json::Object &r) {
         r["layer_types"] = llvm::json::Array{"sliding_attention"};
       },
       "'layer_types' in edited/config.json must list num_hidden_layers (2) "
       "entries, got 1"},
      {[](llvm::json::Object &r) {
         r["layer_types"] =
             llvm::json::Array{"sliding_attention", "chunked_attention"};
       },
       "got 'chunked_attention'"},
      {[](llvm::json::Object &r) { r.erase("sliding_window"); },
       "missing field 'sliding_window'"},
      {[](llvm::json::Object &r) { r["sliding_window"] = 0; },
       "'sliding_window' in edited/config.json must be positive, got 0"},
      {[](llvm::json::Object &r) {
         r["num_experts_per_tok"] = 9;
         r.erase("experts_per_token");
       },
       "must be <= num_local_experts (8), got 9"},
      {[](llvm::json::Object &r) { r["head_dim"] = 31; },
       "'head_dim' in edited/config.json must be even, got 31"},
      {[](llvm::json::Object &r) {
         r["quantization_config"] =
             llvm::json::Object{{"quant_method", "fp8"}};
       },
       "'quantization_config.quant_method' in edited/config.json names "
       "unsupported quantization 'fp8' (supported: mxfp4)"},
      {[](llvm::json::Object &r) {
         r["quantization_config"] = llvm::json::Object{
             {"quant_method", "mxfp4"},
             {"modules_to_not_convert",
              llvm::json::Array{"model.layers.*.mlp.experts"}}};
       },
       "unconverted experts in an mxfp4 checkpoint are not supported"},
      {[](llvm::json::Object &r) { r["eos_token_id"] = "2"; },
       "'eos_token_id' in edited/config.json must be an integer or a list "
       "of integers"},
      {[](llvm::json::Object &r) { r["swiglu_limit"] = "7"; },
       "'swiglu_limit' in edited/config.json must be a number, not a "
       "string"},
      {[](llvm::json::Object &r) {
         (*r["rope_scaling"].getAsObject())["truncate"] = 0;
       },
       "'rope_scaling.truncate' in edited/config.json must be a boolean"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.needle);
    expectError(parseGptOssEdited(c.edit), {c.needle});
  }
}

//===----------------------------------------------------------------------===//
// kimi_linear config.json
//===----------------------------------------------------------------------===//

const char *const kKimiLinearFixture = "test/fixtures/shared/kimi_linear";

/// The kimi_linear fixture's config.json after `edit`, parsed.
llvm::Expected<KimiLinearConfig>
parseKimiLinearEdited(llvm::function_ref<void(llvm::json::Object &)> edit) {
  return parseEdited(kKimiLinearFixture, parseKimiLinearConfig, edit);
}

TEST(KimiLinearConfigTest, ParsesFixture) {
  llvm::Expected<KimiLinearConfig> config =
      parseKimiLinearEdited([](llvm::json::Object &) {});
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  EXPECT_EQ(config->vocabSize, 512);
  EXPECT_EQ(config->hiddenSize, 128);
  EXPECT_EQ(config->numLayers, 4);
  EXPECT_EQ(config->maxPositionEmbeddings, 1048576);
  EXPECT_EQ(config->intermediateSize, 256);
  EXPECT_EQ(config->firstKDenseReplace, 1);
  EXPECT_EQ(config->numHeads, 2);
  EXPECT_EQ(config->qLoraRank, 0); // null: a plain q_proj
  EXPECT_EQ(config->kvLoraRank, 32);
  EXPECT_EQ(config->qkNopeHeadDim, 32);
  EXPECT_EQ(config->qkRopeHeadDim, 16);
  EXPECT_EQ(config->vHeadDim, 32);
  EXPECT_EQ(config->numExperts, 8);
  EXPECT_EQ(config->numExpertsPerToken, 2);
  EXPECT_EQ(config->numSharedExperts, 1);
  EXPECT_EQ(config->moeIntermediateSize, 64);
  EXPECT_EQ(config->numExpertGroups, 1);
  EXPECT_EQ(config->topkGroup, 1);
  EXPECT_DOUBLE_EQ(config->routedScalingFactor, 2.446);
  EXPECT_TRUE(config->moeRenormalize);
  EXPECT_EQ(config->kdaHeads, 2);
  EXPECT_EQ(config->kdaHeadDim, 32);
  EXPECT_EQ(config->shortConvKernel, 4);
  // kda_layers [1, 2, 3], full_attn_layers [4]: 1-based.
  EXPECT_EQ(config->kdaLayers, (std::vector<bool>{true, true, true, false}));
  EXPECT_DOUBLE_EQ(config->rmsNormEps, 1e-5);
  EXPECT_FALSE(config->tieWordEmbeddings);
  EXPECT_EQ(config->eosTokenIds, (std::vector<int64_t>{2}));
  EXPECT_DOUBLE_EQ(config->softmaxScale(), 1.0 / std::sqrt(48.0));
}

TEST(KimiLinearConfigTest, ReadsAliasesAndDefaults) {
  llvm::Expected<KimiLinearConfig> config =
      parseKimiLinearEdited([](llvm::json::Object &root) {
        // transformers' aliases; no layer lists (every fourth layer MLA);
        // one list only (the other its complement) is checked below.
        root["num_local_experts"] = 8;
        root.erase("num_experts");
        root["num_experts_per_tok"] = 2;
        root.erase("num_experts_per_token");
        root["n_shared_experts"] = 2;
        root.erase("num_shared_experts");
        root["norm_topk_prob"] = false;
        root.erase("moe_renormalize");
        root["max_position_embeddings"] = 4096;
        root.erase("model_max_length");
        root["num_hidden_layers"] = 8;
        auto *linear = root["linear_attn_config"].getAsObject();
        linear->erase("kda_layers");
        linear->erase("full_attn_layers");
      });
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  EXPECT_EQ(config->numExperts, 8);
  EXPECT_EQ(config->numExpertsPerToken, 2);
  EXPECT_EQ(config->numSharedExperts, 2);
  EXPECT_FALSE(config->moeRenormalize);
  EXPECT_EQ(config->maxPositionEmbeddings, 4096);
  EXPECT_EQ(config->kdaLayers, (std::vector<bool>{true, true, true, false, true,
                                                  true, true, false}));

  llvm::Expected<KimiLinearConfig> fullOnly =
      parseKimiLinearEdited([](llvm::json::Object &root) {
        root["linear_attn_config"].getAsObject()->erase("kda_layers");
        (*root["linear_attn_config"].getAsObject())["full_attn_layers"] =
            llvm::json::Array{2};
      });
  ASSERT_TRUE(bool(fullOnly)) << llvm::toString(fullOnly.takeError());
  EXPECT_EQ(fullOnly->kdaLayers, (std::vector<bool>{true, false, true, true}));
}

TEST(KimiLinearConfigTest, RejectsBadConfigs) {
  struct Case {
    std::function<void(llvm::json::Object &)> edit;
    const char *needle;
  };
  auto linear = [](llvm::json::Object &r) -> llvm::json::Object & {
    return *r["linear_attn_config"].getAsObject();
  };
  Case cases[] = {
      {[](llvm::json::Object &r) { r.erase("kv_lora_rank"); },
       "missing field 'kv_lora_rank' in edited/config.json"},
      {[](llvm::json::Object &r) { r.erase("linear_attn_config"); },
       "missing field 'linear_attn_config' in edited/config.json"},
      {[&](llvm::json::Object &r) { linear(r).erase("head_dim"); },
       "missing field 'linear_attn_config.head_dim'"},
      {[&](llvm::json::Object &r) {
         linear(r)["kda_layers"] = llvm::json::Array{1, 2, 5};
       },
       "'linear_attn_config.kda_layers' in edited/config.json must hold "
       "1-based layer numbers in [1, 4]"},
      {[&](llvm::json::Object &r) {
         linear(r)["kda_layers"] = llvm::json::Array{1, 2, 3, 4};
       },
       "names layer 4 twice"},
      {[&](llvm::json::Object &r) {
         linear(r)["kda_layers"] = llvm::json::Array{1, 2};
       },
       "leave layer 3 (1-based) in neither"},
      {[](llvm::json::Object &r) { r["mla_use_nope"] = false; },
       "'mla_use_nope' in edited/config.json is false: rotary MLA in "
       "kimi_linear is not supported"},
      {[](llvm::json::Object &r) {
         r["moe_router_activation_func"] = "softmax";
       },
       "names 'softmax' (supported: sigmoid)"},
      {[](llvm::json::Object &r) { r["num_experts_per_token"] = 9; },
       "must be <= num_experts (8), got 9"},
      {[](llvm::json::Object &r) { r["num_expert_group"] = 3; },
       "must divide num_experts (8), got 3"},
      {[&](llvm::json::Object &r) { linear(r)["gate_lower_bound"] = -5.0; },
       "the bounded KDA gate is not supported for kimi_linear"},
      {[&](llvm::json::Object &r) { linear(r)["short_conv_kernel_size"] = 0; },
       "'linear_attn_config.short_conv_kernel_size' in edited/config.json "
       "must be positive, got 0"},
      {[](llvm::json::Object &r) { r["model_type"] = "deepseek_v3"; },
       "model_type 'deepseek_v3' in edited/config.json is not kimi_linear"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.needle);
    expectError(parseKimiLinearEdited(c.edit), {c.needle});
  }
}

//===----------------------------------------------------------------------===//
// GLM-5.3 (glm5_next) config
//===----------------------------------------------------------------------===//

const char *const kGlm5NextFixture = "test/fixtures/shared/glm5_next";

/// The glm5_next fixture's config.json after `edit` (of its text_config),
/// parsed.
llvm::Expected<Glm5NextConfig>
parseGlm5NextEdited(llvm::function_ref<void(llvm::json::Object &)> edit) {
  return parseEdited(kGlm5NextFixture, parseGlm5NextConfig,
                     [&](llvm::json::Object &root) {
                       edit(*root["text_config"].getAsObject());
                     });
}

TEST(Glm5NextConfigTest, ParsesFixtures) {
  for (const char *dir :
       {kGlm5NextFixture, "test/fixtures/shared/glm5_next_fp8"}) {
    SCOPED_TRACE(dir);
    llvm::Expected<Glm5NextConfig> config =
        parseEdited(dir, parseGlm5NextConfig, [](llvm::json::Object &) {});
    ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
    EXPECT_EQ(config->vocabSize, 512);
    EXPECT_EQ(config->hiddenSize, 128);
    EXPECT_EQ(config->numLayers, 5);
    // layer_types: KDA, DSA, DSA, KDA, DSA (linear_attn_config's lists,
    // which transformers does not read, agree here).
    EXPECT_EQ(config->kdaLayers,
              (std::vector<bool>{true, false, false, true, false}));
    EXPECT_EQ(config->denseMlp,
              (std::vector<bool>{true, false, false, false, false}));
    EXPECT_EQ(config->sharedIndexer,
              (std::vector<bool>{false, false, true, false, false}));
    EXPECT_EQ(config->kdaHeads, 2);
    EXPECT_EQ(config->kdaHeadDim, 32);
    EXPECT_EQ(config->shortConvKernel, 4);
    ASSERT_TRUE(config->gateLowerBound.has_value());
    EXPECT_EQ(*config->gateLowerBound, -5.0);
    EXPECT_EQ(config->numHeads, 4);
    EXPECT_EQ(config->qLoraRank, 64);
    EXPECT_EQ(config->kvLoraRank, 32);
    EXPECT_EQ(config->qkNopeHeadDim, 32);
    EXPECT_EQ(config->vHeadDim, 32);
    EXPECT_EQ(config->indexHeads, 4);
    EXPECT_EQ(config->indexHeadDim, 32);
    EXPECT_EQ(config->indexTopk, 16);
    EXPECT_EQ(config->indexKpool, 4);
    EXPECT_EQ(config->hcMult, 4);
    EXPECT_EQ(config->hcSinkhornIters, 20);
    EXPECT_EQ(config->hcEps, 1e-6);
    EXPECT_EQ(config->numExperts, 8);
    EXPECT_EQ(config->numExpertsPerToken, 2);
    EXPECT_EQ(config->numSharedExperts, 1);
    EXPECT_EQ(config->moeIntermediateSize, 64);
    EXPECT_EQ(config->intermediateSize, 256);
    EXPECT_EQ(config->numExpertGroups, 2);
    EXPECT_EQ(config->topkGroup, 1);
    EXPECT_EQ(config->routedScalingFactor, 2.5);
    EXPECT_TRUE(config->moeRenormalize);
    ASSERT_TRUE(config->swigluLimit.has_value());
    EXPECT_EQ(*config->swigluLimit, 3.0);
    EXPECT_EQ(config->rmsNormEps, 1e-5);
    EXPECT_EQ(config->eosTokenIds, std::vector<int64_t>{1});
    EXPECT_DOUBLE_EQ(config->softmaxScale(), 1.0 / std::sqrt(32.0));
  }
}

TEST(Glm5NextConfigTest, ReadsFlatConfigsAndDefaults) {
  // A flat text-only config (transformers forwards top-level text fields),
  // without the schedules: DSA where i % 4 == 3, the first 3 MLPs dense,
  // every indexer full; index_kpool 16; an unbounded gate.
  llvm::Expected<Glm5NextConfig> config = parseEdited(
      kGlm5NextFixture, parseGlm5NextConfig, [](llvm::json::Object &root) {
        llvm::json::Object text = std::move(*root["text_config"].getAsObject());
        text["model_type"] = "glm5_next";
        text["num_hidden_layers"] = 8;
        text["index_topk"] = 32;
        for (const char *key :
             {"layer_types", "mlp_layer_types", "indexer_types", "index_kpool"})
          text.erase(key);
        text["linear_attn_config"].getAsObject()->erase("gate_lower_bound");
        root = std::move(text);
      });
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  EXPECT_EQ(config->kdaLayers, (std::vector<bool>{true, true, true, false, true,
                                                  true, true, false}));
  EXPECT_EQ(config->denseMlp, (std::vector<bool>{true, true, true, false, false,
                                                 false, false, false}));
  EXPECT_EQ(config->sharedIndexer, std::vector<bool>(8, false));
  EXPECT_EQ(config->indexKpool, 16);
  EXPECT_FALSE(config->gateLowerBound.has_value());
  // index_topk_pattern: one letter a layer.
  config = parseGlm5NextEdited([](llvm::json::Object &t) {
    t.erase("indexer_types");
    t["index_topk_pattern"] = "FFSFF";
  });
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  EXPECT_EQ(config->sharedIndexer,
            (std::vector<bool>{false, false, true, false, false}));
}

TEST(Glm5NextConfigTest, RejectsBadConfigs) {
  struct Case {
    std::function<void(llvm::json::Object &)> edit;
    const char *needle;
  };
  auto linear = [](llvm::json::Object &t) -> llvm::json::Object & {
    return *t["linear_attn_config"].getAsObject();
  };
  Case cases[] = {
      {[](llvm::json::Object &t) { t.erase("index_topk"); },
       "missing field 'text_config.index_topk' in edited/config.json"},
      {[](llvm::json::Object &t) { t.erase("linear_attn_config"); },
       "missing field 'text_config.linear_attn_config'"},
      {[&](llvm::json::Object &t) { linear(t).erase("head_dim"); },
       "missing field 'text_config.linear_attn_config.head_dim'"},
      {[](llvm::json::Object &t) { t["qk_rope_head_dim"] = 64; },
       "'text_config.qk_rope_head_dim' in edited/config.json must be 0 "
       "(glm5_next's MLA has no rope), got 64"},
      {[](llvm::json::Object &t) { t["num_key_value_heads"] = 2; },
       "must equal num_attention_heads (4), got 2"},
      {[](llvm::json::Object &t) {
         t["index_kpool_always_select_tail"] = false;
       },
       "attends to future tokens"},
      {[](llvm::json::Object &t) { t["index_topk"] = 18; },
       "must be a multiple of index_kpool (4), got 18"},
      {[](llvm::json::Object &t) { t["q_lora_rank"] = nullptr; },
       "missing field 'text_config.q_lora_rank'"},
      {[](llvm::json::Object &t) { t["pad_token_id"] = 154820; },
       "'text_config.pad_token_id' in edited/config.json must be in [0, "
       "vocab_size), got 154820"},
      {[](llvm::json::Object &t) { t["hidden_act"] = "gelu"; },
       "names 'gelu' (supported: silu)"},
      {[&](llvm::json::Object &t) { linear(t)["gate_lower_bound"] = 1.0; },
       "'text_config.linear_attn_config.gate_lower_bound' in "
       "edited/config.json must be negative"},
      {[](llvm::json::Object &t) {
         t["layer_types"] =
             llvm::json::Array{"linear_attention", "deepseek_sparse_attention"};
       },
       "'text_config.layer_types' in edited/config.json has 2 entries for 5 "
       "layers"},
      {[](llvm::json::Object &t) {
         t["mlp_layer_types"] =
             llvm::json::Array{"dense", "sparse", "moe", "sparse", "sparse"};
       },
       "entry 2 is not one of dense, sparse"},
      // A shared layer after a KDA layer, and two shared in a row.
      {[](llvm::json::Object &t) {
         t["indexer_types"] =
             llvm::json::Array{"full", "full", "full", "full", "shared"};
       },
       "makes layer 4 shared without a full DSA layer just before it"},
      {[](llvm::json::Object &t) {
         t["layer_types"] =
             llvm::json::Array{"linear_attention", "deepseek_sparse_attention",
                               "deepseek_sparse_attention",
                               "deepseek_sparse_attention", "linear_attention"};
         t["indexer_types"] =
             llvm::json::Array{"full", "full", "shared", "shared", "full"};
       },
       "makes layer 3 shared"},
      {[](llvm::json::Object &t) { t["n_group"] = 3; },
       "must divide n_routed_experts (8), got 3"},
      {[](llvm::json::Object &t) { t["hc_mult"] = 0; },
       "'text_config.hc_mult' in edited/config.json must be positive, got 0"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.needle);
    expectError(parseGlm5NextEdited(c.edit), {c.needle});
  }
  // index_topk_freq is refused where it would be read (no indexer_types),
  // and ignored where indexer_types is given, as transformers does.
  expectError(parseGlm5NextEdited([](llvm::json::Object &t) {
                t.erase("indexer_types");
                t["index_topk_freq"] = 2;
              }),
              {"'text_config.index_topk_freq' in edited/config.json other "
               "than 1 without indexer_types is not supported"});
  llvm::Expected<Glm5NextConfig> ignored = parseGlm5NextEdited(
      [](llvm::json::Object &t) { t["index_topk_freq"] = 2; });
  EXPECT_TRUE(bool(ignored)) << llvm::toString(ignored.takeError());
  expectError(parseEdited(kGlm5NextFixture, parseGlm5NextConfig,
                          [](llvm::json::Object &root) {
                            root["model_type"] = "kimi_linear";
                          }),
              {"model_type 'kimi_linear' in edited/config.json is not "
               "glm5_next"});
}

//===----------------------------------------------------------------------===//
// Checkpoint
//===----------------------------------------------------------------------===//

TEST(CheckpointTest, ReadsFixtureTensor) {
  llvm::Expected<Checkpoint> checkpoint = Checkpoint::open(kFixture);
  ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
  EXPECT_TRUE(checkpoint->has(kQaProj));
  EXPECT_FALSE(checkpoint->has("model.layers.3.self_attn.q_a_proj.weight"));

  // Independent read of the raw bytes: header length, JSON, data offsets.
  std::string file = readText(std::string(kFixture) + "/model.safetensors");
  ASSERT_GE(file.size(), 8u);
  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i)
    headerSize = headerSize << 8 | uint8_t(file[i]);
  llvm::Expected<llvm::json::Value> header =
      llvm::json::parse(llvm::StringRef(file).substr(8, headerSize));
  ASSERT_TRUE(bool(header)) << llvm::toString(header.takeError());
  const llvm::json::Object &entries = *header->getAsObject();
  size_t expectedCount = entries.size() - (entries.get("__metadata__") ? 1 : 0);
  std::vector<std::string> names = checkpoint->tensorNames();
  EXPECT_EQ(names.size(), expectedCount);
  EXPECT_TRUE(llvm::is_sorted(names));
  const llvm::json::Array &offsets =
      *entries.getObject(kQaProj)->getArray("data_offsets");
  int64_t begin = 8 + int64_t(headerSize) + *offsets[0].getAsInteger();

  llvm::Expected<const safetensors::TensorView *> view =
      checkpoint->get(kQaProj, {128, 256}, {DType::BF16});
  ASSERT_TRUE(bool(view)) << llvm::toString(view.takeError());
  llvm::Expected<ref::Tensor> tensor = Checkpoint::toTensor(**view);
  ASSERT_TRUE(bool(tensor)) << llvm::toString(tensor.takeError());
  EXPECT_EQ(tensor->type(), ref::ElementType::BF16);
  EXPECT_EQ(tensor->shape(), (std::vector<int64_t>{128, 256}));
  ASSERT_EQ(tensor->floats().size(), 128u * 256u);
  bool anyNonZero = false;
  for (size_t i = 0; i < tensor->floats().size(); ++i) {
    uint16_t bits = uint16_t(uint8_t(file[begin + 2 * i]) |
                             uint8_t(file[begin + 2 * i + 1]) << 8);
    ASSERT_EQ(tensor->floats()[i], numerics::bf16ToFloat(bits)) << i;
    anyNonZero |= bits != 0;
  }
  EXPECT_TRUE(anyNonZero);

  // The one float32 tensor of the fixture.
  llvm::Expected<const safetensors::TensorView *> bias = checkpoint->get(
      "model.layers.1.mlp.gate.e_score_correction_bias", {8}, {DType::F32});
  ASSERT_TRUE(bool(bias)) << llvm::toString(bias.takeError());
  llvm::Expected<ref::Tensor> biasTensor = Checkpoint::toTensor(**bias);
  ASSERT_TRUE(bool(biasTensor)) << llvm::toString(biasTensor.takeError());
  EXPECT_EQ(biasTensor->type(), ref::ElementType::F32);
  float first;
  std::memcpy(&first, (*bias)->data, 4);
  EXPECT_EQ(biasTensor->floats()[0], first);
}

TEST(CheckpointTest, ReportsMissingTensorWrongShapeAndDtype) {
  llvm::Expected<Checkpoint> checkpoint = Checkpoint::open(kFixture);
  ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
  std::string file = std::string(kFixture) + "/model.safetensors";
  expectError(checkpoint->get("model.layers.9.self_attn.q_a_proj.weight",
                              {128, 256}, {DType::BF16}),
              {"missing tensor 'model.layers.9.self_attn.q_a_proj.weight' in " +
               std::string(kFixture)});
  expectError(checkpoint->get(kQaProj, {256, 128}, {DType::BF16}),
              {"tensor '" + std::string(kQaProj) + "' in " + file +
               " has shape [128, 256], expected [256, 128]"});
  expectError(checkpoint->get(kQaProj, {128, 256}, {DType::F8E4M3, DType::F32}),
              {"tensor '" + std::string(kQaProj) + "' in " + file +
               " has dtype BF16, expected F8_E4M3 or F32"});
  expectError(Checkpoint::open(freshDir("empty")),
              {"no model.safetensors or model.safetensors.index.json"});
}

TEST(CheckpointTest, ConvertsEveryExactDtype) {
  std::string dir = freshDir("dtypes");
  writeSafetensors(
      dir + "/model.safetensors",
      {{"e4m3", "F8_E4M3", {4}, {0x38, 0xb8, 0x7e, 0x01}},
       {"f16", "F16", {2}, bytesOf<uint16_t>({0x3c00, 0xc500})},
       {"u8", "U8", {3}, {0, 7, 255}},
       {"i32", "I32", {2}, bytesOf<int32_t>({-5, 1 << 30})},
       {"i64", "I64", {1}, bytesOf<int64_t>({-(int64_t(1) << 40)})},
       {"f64", "F64", {1}, bytesOf<double>({0.1})}});
  llvm::Expected<Checkpoint> checkpoint = Checkpoint::open(dir);
  ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());

  auto tensorOf = [&](const char *name, std::vector<int64_t> shape,
                      DType dtype) -> ref::Tensor {
    llvm::Expected<const safetensors::TensorView *> view =
        checkpoint->get(name, shape, {dtype});
    EXPECT_TRUE(bool(view)) << name;
    if (!view) {
      llvm::consumeError(view.takeError());
      return ref::Tensor();
    }
    llvm::Expected<ref::Tensor> tensor = Checkpoint::toTensor(**view);
    EXPECT_TRUE(bool(tensor)) << name;
    if (!tensor) {
      llvm::consumeError(tensor.takeError());
      return ref::Tensor();
    }
    return std::move(*tensor);
  };

  ref::Tensor e4m3 = tensorOf("e4m3", {4}, DType::F8E4M3);
  EXPECT_EQ(e4m3.type(), ref::ElementType::F8E4M3FN);
  ASSERT_EQ(e4m3.floats().size(), 4u);
  EXPECT_EQ(e4m3.floats()[0], 1.0f);
  EXPECT_EQ(e4m3.floats()[1], -1.0f);
  EXPECT_EQ(e4m3.floats()[2], 448.0f);
  EXPECT_EQ(e4m3.floats()[3], std::ldexp(1.0f, -9)); // Smallest subnormal.

  ref::Tensor f16 = tensorOf("f16", {2}, DType::F16);
  EXPECT_EQ(f16.type(), ref::ElementType::F16);
  EXPECT_EQ(f16.floats(), (std::vector<float>{1.0f, -5.0f}));

  ref::Tensor u8 = tensorOf("u8", {3}, DType::U8);
  EXPECT_EQ(u8.type(), ref::ElementType::UI8);
  EXPECT_EQ(u8.ints(), (std::vector<int64_t>{0, 7, 255}));

  ref::Tensor i32 = tensorOf("i32", {2}, DType::I32);
  EXPECT_EQ(i32.type(), ref::ElementType::I32);
  EXPECT_EQ(i32.ints(), (std::vector<int64_t>{-5, 1 << 30}));

  ref::Tensor i64 = tensorOf("i64", {1}, DType::I64);
  EXPECT_EQ(i64.type(), ref::ElementType::I64);
  EXPECT_EQ(i64.ints(), (std::vector<int64_t>{-(int64_t(1) << 40)}));

  llvm::Expected<const safetensors::TensorView *> f64 =
      checkpoint->get("f64", {1}, {DType::F64});
  ASSERT_TRUE(bool(f64)) << llvm::toString(f64.takeError());
  expectError(Checkpoint::toTensor(**f64),
              {"tensor 'f64' has dtype F64", "no exact host tensor type"});
}

/// Writes two shards and an index mapping each name to `shardOf(name)`.
std::string writeShards(const std::string &name,
                        const std::map<std::string, std::string> &weightMap,
                        bool writeSecond = true) {
  std::string dir = freshDir(name);
  writeSafetensors(dir + "/model-00001-of-00002.safetensors",
                   {{"a", "BF16", {2}, bytesOf<uint16_t>({0x3f80, 0xc000})},
                    {"b", "F32", {1}, bytesOf<float>({0.25f})}});
  if (writeSecond)
    writeSafetensors(dir + "/model-00002-of-00002.safetensors",
                     {{"c", "I32", {2}, bytesOf<int32_t>({3, -4})}});
  llvm::json::Object map;
  for (const auto &[tensor, shard] : weightMap)
    map[tensor] = shard;
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(
      llvm::json::Object{{"metadata", llvm::json::Object{{"total_size", 14}}},
                         {"weight_map", std::move(map)}});
  writeText(dir + "/model.safetensors.index.json", text);
  return dir;
}

const char *const kShard1 = "model-00001-of-00002.safetensors";
const char *const kShard2 = "model-00002-of-00002.safetensors";

TEST(CheckpointTest, OpensShardedCheckpoint) {
  std::string dir =
      writeShards("sharded", {{"a", kShard1}, {"b", kShard1}, {"c", kShard2}});
  llvm::Expected<Checkpoint> checkpoint = Checkpoint::open(dir);
  ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
  EXPECT_EQ(checkpoint->tensorNames(),
            (std::vector<std::string>{"a", "b", "c"}));

  // Moving the checkpoint keeps views valid.
  Checkpoint moved = std::move(*checkpoint);
  llvm::Expected<const safetensors::TensorView *> a =
      moved.get("a", {2}, {DType::BF16, DType::F16});
  ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
  llvm::Expected<ref::Tensor> aTensor = Checkpoint::toTensor(**a);
  ASSERT_TRUE(bool(aTensor)) << llvm::toString(aTensor.takeError());
  EXPECT_EQ(aTensor->floats(), (std::vector<float>{1.0f, -2.0f}));

  llvm::Expected<const safetensors::TensorView *> c =
      moved.get("c", {2}, {DType::I32});
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  llvm::Expected<ref::Tensor> cTensor = Checkpoint::toTensor(**c);
  ASSERT_TRUE(bool(cTensor)) << llvm::toString(cTensor.takeError());
  EXPECT_EQ(cTensor->ints(), (std::vector<int64_t>{3, -4}));
  expectError(moved.get("c", {2}, {DType::I64}),
              {"tensor 'c' in " + dir + "/" + kShard2 +
               " has dtype I32, expected I64"});
}

TEST(CheckpointTest, RejectsBadShardIndex) {
  // A name mapped to the wrong shard.
  std::string dir = writeShards(
      "wrong_shard", {{"a", kShard1}, {"b", kShard2}, {"c", kShard2}});
  expectError(Checkpoint::open(dir),
              {"tensor 'b' mapped to " + std::string(kShard2),
               "is in " + dir + "/" + kShard1 + " instead"});

  // A name the index lists that no shard holds.
  dir = writeShards(
      "absent_name",
      {{"a", kShard1}, {"b", kShard1}, {"c", kShard2}, {"d", kShard2}});
  expectError(Checkpoint::open(dir),
              {"tensor 'd' mapped to " + std::string(kShard2),
               "is not in " + dir + "/" + kShard2});

  // A shard file that is not there.
  dir = writeShards("missing_shard",
                    {{"a", kShard1}, {"b", kShard1}, {"c", kShard2}},
                    /*writeSecond=*/false);
  expectError(Checkpoint::open(dir),
              {"cannot open checkpoint file " + dir + "/" + kShard2});

  // The same name in two shards.
  dir = writeShards("duplicate",
                    {{"a", kShard1}, {"b", kShard1}, {"c", kShard2}});
  writeSafetensors(dir + "/" + kShard2,
                   {{"a", "BF16", {2}, bytesOf<uint16_t>({0, 0})}});
  expectError(Checkpoint::open(dir), {"tensor 'a' is in both"});

  // Index entries must stay inside the checkpoint folder.
  dir = writeShards("escape", {{"a", "../" + std::string(kShard1)}});
  expectError(Checkpoint::open(dir), {"weight_map entry 'a'"});

  dir = freshDir("bad_index");
  writeText(dir + "/model.safetensors.index.json", "{\"metadata\": {}}");
  expectError(Checkpoint::open(dir), {"missing object 'weight_map'"});
}

} // namespace
