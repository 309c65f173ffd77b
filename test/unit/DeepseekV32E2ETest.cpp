//===- DeepseekV32E2ETest.cpp - lm IR of DeepSeek-V3.2 vs transformers ----===//
//
// Imports the golden DeepSeek-V3.2 checkpoints (made by transformers, see each
// fixture's README), builds their lm IR, runs @prefill over each prompt and
// @decode over the teacher-forced tokens with the reference evaluator, and
// compares every logit with transformers' float32 output. Prompts are longer
// than index_topk, so the sparse path decides the result.
//
//===----------------------------------------------------------------------===//

#include "compiler/importers/WeightLoader.h"
#include "compiler/models/DeepseekV32.h"
#include "compiler/pipeline/Pipeline.h"
#include "compiler/reference/CheckpointWeights.h"
#include "compiler/reference/Collectives.h"
#include "compiler/reference/Evaluator.h"
#include "dialects/lm/LmDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include "test/unit/TeacherForcing.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

using namespace mlir;
using namespace daybreak;

namespace {

/// The float32 tensor `name` of a safetensors file, row-major.
std::vector<float> readF32(const safetensors::File &file,
                           const std::string &name,
                           std::vector<int64_t> *shape) {
  const safetensors::TensorView *view = file.find(name);
  EXPECT_NE(view, nullptr) << "missing " << name;
  if (!view)
    return {};
  EXPECT_EQ(view->dtype, safetensors::DType::F32);
  *shape = view->shape;
  std::vector<float> values(view->byteSize / 4);
  std::memcpy(values.data(), view->data, view->byteSize);
  return values;
}

std::vector<int64_t> intList(const llvm::json::Object &seq, llvm::StringRef key) {
  std::vector<int64_t> out;
  if (const llvm::json::Array *a = seq.getArray(key))
    for (const llvm::json::Value &v : *a)
      out.push_back(*v.getAsInteger());
  return out;
}

/// A fixture directory, the tensor-parallel ranks to split it over,
/// whether each rank's module goes through the lm pipeline (f32 caches)
/// before it is evaluated, and the expert-parallel ranks (1, or a multiple
/// of the tensor-parallel ones: attention split over groups of those).
struct E2ECase {
  const char *fixture;
  int64_t tensorParallel;
  bool lmPipeline = false;
  int64_t expertParallel = 1;
};

class DeepseekV32E2E : public ::testing::TestWithParam<E2ECase> {};

TEST_P(DeepseekV32E2E, LogitsMatchTransformers) {
  const char *fixture = GetParam().fixture;
  int64_t ranks =
      std::max(GetParam().tensorParallel, GetParam().expertParallel);
  std::string dir = std::string(DAYBREAK_SOURCE_DIR) + "/" + fixture;
  auto config = importers::loadConfig(dir);
  ASSERT_TRUE(!!config) << llvm::toString(config.takeError());
  auto checkpoint = importers::Checkpoint::open(dir);
  ASSERT_TRUE(!!checkpoint) << llvm::toString(checkpoint.takeError());

  auto inputsText = llvm::MemoryBuffer::getFile(dir + "/inputs.json");
  ASSERT_TRUE(!!inputsText);
  auto inputs = llvm::json::parse((*inputsText)->getBuffer());
  ASSERT_TRUE(!!inputs) << llvm::toString(inputs.takeError());
  const llvm::json::Array *sequences =
      inputs->getAsObject()->getArray("sequences");
  ASSERT_NE(sequences, nullptr);

  safetensors::File expected;
  safetensors::Status status =
      safetensors::File::open(dir + "/expected.safetensors", expected);
  ASSERT_TRUE(status.ok) << status.message;

  // One module per rank, each over its shards of the weights.
  MLIRContext context;
  models::BuildOptions options;
  options.maxSeqLen = 64;
  options.maxBatch = 2;
  options.tensorParallel = GetParam().tensorParallel;
  options.expertParallel = GetParam().expertParallel;
  std::vector<OwningOpRef<ModuleOp>> modules;
  for (int64_t r = 0; r < ranks; ++r) {
    options.rank = r;
    auto module =
        models::buildDeepseekV32(context, *config, *checkpoint, options);
    ASSERT_TRUE(!!module) << llvm::toString(module.takeError());
    ASSERT_TRUE(succeeded(verify(**module)));
    if (GetParam().lmPipeline) {
      pipeline::Options lmOptions;
      lmOptions.kvCacheDtype = "f32";
      PassManager pm(&context);
      pipeline::buildLmPipeline(pm, lmOptions,
                                ref::checkpointWeights(*checkpoint));
      ASSERT_TRUE(succeeded(pm.run(**module))) << "rank " << r;
    }
    modules.push_back(std::move(*module));
  }
  int64_t kvWidth = config->kvLoraRank + config->qkRopeHeadDim;
  int64_t vocab = config->vocabSize;

  // All sequences run together: one prefill over the flattened prompts,
  // then decode steps of one token per sequence.
  std::vector<std::vector<int64_t>> prompts, decodes;
  for (const llvm::json::Value &seqValue : *sequences) {
    const llvm::json::Object &seq = *seqValue.getAsObject();
    prompts.push_back(intList(seq, "prompt_ids"));
    decodes.push_back(intList(seq, "decode_ids"));
    ASSERT_GT(static_cast<int64_t>(prompts.back().size()), config->indexTopk)
        << "the prompt must exceed index_topk to test the sparse path";
  }
  int64_t batch = prompts.size();
  ASSERT_LE(batch, options.maxBatch);

  // A rank's logits: the prefill's rows, then each decode step's. Every
  // rank holds whole caches (MLA's latent and the indexer's keys are not
  // split) and, after the LM head's all-gather, every logit.
  struct Logits {
    std::vector<float> prefill;
    std::vector<std::vector<float>> decode;
    std::string error;
  };
  auto runRank = [&](ModuleOp module, ref::Collectives *group) {
    Logits result;
    ref::Evaluator evaluator(module, ref::checkpointWeights(*checkpoint));
    evaluator.setCollectives(group);
    std::vector<ref::Tensor> caches;
    for (int64_t l = 0; l < config->numLayers; ++l) {
      caches.push_back(
          ref::Tensor::zeros(ref::ElementType::F32,
                             {options.maxBatch, options.maxSeqLen, kvWidth}));
      caches.push_back(ref::Tensor::zeros(
          ref::ElementType::F32,
          {options.maxBatch, options.maxSeqLen, config->indexHeadDim}));
    }
    for (const testutil::ForcedStep &forced :
         testutil::teacherForcedSteps(prompts, decodes)) {
      auto rows = testutil::runForcedStep(evaluator, forced, caches);
      if (!rows) {
        result.error = llvm::toString(rows.takeError());
        return result;
      }
      if (result.prefill.empty())
        result.prefill = std::move(*rows);
      else
        result.decode.push_back(std::move(*rows));
    }
    return result;
  };
  std::vector<Logits> logits(ranks);
  if (ranks == 1) {
    logits[0] = runRank(*modules[0], nullptr);
  } else {
    runtime::LoopbackGroup group(ranks);
    std::vector<std::thread> threads;
    for (int64_t r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        ref::CommunicatorCollectives collectives(group.rank(r));
        logits[r] = runRank(*modules[r], &collectives);
        if (!logits[r].error.empty())
          group.abort("rank " + std::to_string(r) + " failed");
      });
    for (std::thread &t : threads)
      t.join();
  }

  // Tolerance: 1e-4 absolute on logits of magnitude ~4 (fp32 vs fp32;
  // transformers' own fp32-vs-fp64 spread is 5.4e-6, fixture README). The
  // split over ranks only reorders f32 sums (each rank's partial products
  // summed by the all-reduce), an error of the same order as that spread.
  constexpr double kTolerance = 1e-4;
  for (int64_t r = 0; r < ranks; ++r) {
    const Logits &got = logits[r];
    ASSERT_EQ(got.error, "") << "rank " << r;
    std::string who = ranks == 1 ? ""
                                 : " (rank " + std::to_string(r) + " of " +
                                       std::to_string(ranks) + ")";
    size_t row = 0;
    for (int64_t i = 0; i < batch; ++i) {
      std::vector<int64_t> shape;
      std::string prefix = "seq" + std::to_string(i);
      std::vector<float> want =
          readF32(expected, prefix + ".prefill_logits", &shape);
      ASSERT_EQ(want.size(), prompts[i].size() * vocab);
      ASSERT_GE(got.prefill.size(), (row + prompts[i].size()) * vocab);
      double worst = 0;
      for (size_t j = 0; j < want.size(); ++j)
        worst = std::max(
            worst, std::fabs(double(got.prefill[row * vocab + j]) - want[j]));
      row += prompts[i].size();
      EXPECT_LE(worst, kTolerance) << prefix << " prefill" << who;
      std::printf("%s%s %s prefill: %zu logits, max |diff| %.3g\n", fixture,
                  who.c_str(), prefix.c_str(), want.size(), worst);
    }
    ASSERT_EQ(got.decode.size(), decodes[0].size());
    for (int64_t i = 0; i < batch; ++i) {
      std::vector<int64_t> shape;
      std::vector<float> want = readF32(
          expected, "seq" + std::to_string(i) + ".decode_logits", &shape);
      double worst = 0;
      for (size_t t = 0; t < got.decode.size(); ++t) {
        ASSERT_EQ(static_cast<int64_t>(got.decode[t].size()), batch * vocab);
        for (int64_t j = 0; j < vocab; ++j)
          worst =
              std::max(worst, std::fabs(double(got.decode[t][i * vocab + j]) -
                                        want[t * vocab + j]));
      }
      EXPECT_LE(worst, kTolerance) << "seq" << i << " decode" << who;
      std::printf("%s%s seq%lld decode: %zu steps, max |diff| %.3g\n", fixture,
                  who.c_str(), static_cast<long long>(i), got.decode.size(),
                  worst);
    }
  }
}

std::string caseName(const ::testing::TestParamInfo<E2ECase> &info) {
  std::string name =
      llvm::StringRef(info.param.fixture).rsplit('/').second.str();
  return name + "_tp" + std::to_string(info.param.tensorParallel) +
         (info.param.expertParallel > 1
              ? "_ep" + std::to_string(info.param.expertParallel)
              : "") +
         (info.param.lmPipeline ? "_lm_pipeline" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, DeepseekV32E2E,
    ::testing::Values(E2ECase{"test/fixtures/shared/deepseek_v32", 1},
                      E2ECase{"test/fixtures/shared/deepseek_v32_fp8", 1},
                      E2ECase{"test/fixtures/deepseek_v32_small", 1},
                      E2ECase{"test/fixtures/deepseek_v32_small_fp8", 1},
                      E2ECase{"test/fixtures/shared/deepseek_v32", 2},
                      E2ECase{"test/fixtures/shared/deepseek_v32", 4},
                      E2ECase{"test/fixtures/deepseek_v32_small", 2},
                      E2ECase{"test/fixtures/deepseek_v32_small", 4},
                      E2ECase{"test/fixtures/deepseek_v32_tp_fp8", 1},
                      E2ECase{"test/fixtures/deepseek_v32_tp_fp8", 2},
                      E2ECase{"test/fixtures/deepseek_v32_tp_fp8", 4},
                      E2ECase{"test/fixtures/deepseek_v32_tp_fp8", 1, true},
                      E2ECase{"test/fixtures/deepseek_v32_tp_fp8", 2, true},
                      E2ECase{"test/fixtures/shared/deepseek_v32", 4, true},
                      E2ECase{"test/fixtures/deepseek_v32_tp_fp8", 1, false, 2},
                      E2ECase{"test/fixtures/deepseek_v32_tp_fp8", 1, true, 4},
                      E2ECase{"test/fixtures/deepseek_v32_tp_fp8", 2, false, 2},
                      E2ECase{"test/fixtures/shared/deepseek_v32", 2, true, 2},
                      E2ECase{"test/fixtures/deepseek_v32_tp_fp8", 2, false, 4},
                      E2ECase{"test/fixtures/deepseek_v32_tp_fp8", 2, true, 4}),
    caseName);

// An FP8 projection whose rows a rank would take from two 128-row scale
// blocks cannot be split: its local rows would read the wrong scales. The
// shared fixture's q_b ([4 heads x 48, 96]) is such a case at two ranks.
TEST(DeepseekV32TensorParallel, Fp8SplitsKeepScaleBlocksWhole) {
  std::string dir = std::string(DAYBREAK_SOURCE_DIR) +
                    "/test/fixtures/shared/deepseek_v32_fp8";
  auto config = importers::loadConfig(dir);
  ASSERT_TRUE(!!config) << llvm::toString(config.takeError());
  auto checkpoint = importers::Checkpoint::open(dir);
  ASSERT_TRUE(!!checkpoint) << llvm::toString(checkpoint.takeError());
  MLIRContext context;
  models::BuildOptions options;
  options.tensorParallel = 2;
  options.rank = 1;
  auto module =
      models::buildDeepseekV32(context, *config, *checkpoint, options);
  ASSERT_FALSE(!!module);
  EXPECT_EQ(llvm::toString(module.takeError()),
            "FP8 weight 'model.layers.0.self_attn.q_b_proj.weight': this "
            "rank's rows [96, 192) split its scale blocks of 128");
  // Three ranks do not divide the four heads.
  options.tensorParallel = 3;
  options.rank = 0;
  module = models::buildDeepseekV32(context, *config, *checkpoint, options);
  ASSERT_FALSE(!!module);
  EXPECT_EQ(llvm::toString(module.takeError()),
            "num_attention_heads (4) does not split evenly over 3 "
            "tensor-parallel ranks");
  options.rank = 3;
  module = models::buildDeepseekV32(context, *config, *checkpoint, options);
  ASSERT_FALSE(!!module);
  EXPECT_EQ(llvm::toString(module.takeError()),
            "rank 3 of 3 ranks does not exist");
}

} // namespace
