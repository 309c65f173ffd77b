//===- CompiledModelTest.cpp - Compiled artifacts vs the reference --------===//
//
// For each KV-cache storage (fp8 as DeepSeek deploys it, bf16, f32), the
// artifact the pipeline compiles, run by the CPU runtime, must give the
// logits the reference evaluator computes on the same lm IR (after weight
// folding and KV layout assignment, whose cache writes round like the
// device cache). This checks every generated launch and library kernel
// together, including the FP8 cache path the transformers fixtures cannot
// check (transformers keeps an fp32 cache).
//
//===----------------------------------------------------------------------===//

#include "compiler/importers/HfConfig.h"
#include "compiler/importers/WeightLoader.h"
#include "compiler/models/DeepseekV32.h"
#include "compiler/pipeline/Pipeline.h"
#include "compiler/reference/CheckpointWeights.h"
#include "compiler/reference/Evaluator.h"
#include "runtime/executor/Model.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace daybreak;

namespace {

struct Case {
  const char *fixture;
  const char *kvCacheDtype;
  /// fp32 vs fp32 differs only in summation order (~1e-6). A quantized
  /// cache turns that noise into whole quantization steps wherever a value
  /// sits within ~1e-7 of a rounding midpoint (one bf16 step is 2^-8
  /// relative, one e4m3 step 2^-3), so those tolerances are wider.
  double tolerance;
};

class CompiledModel : public ::testing::TestWithParam<Case> {};

TEST_P(CompiledModel, RuntimeMatchesReferenceEvaluator) {
  std::string dir = std::string(DAYBREAK_SOURCE_DIR) + "/" + GetParam().fixture;
  pipeline::Options options;
  options.checkpoint = dir;
  options.output = ::testing::TempDir() + "/compiled_" +
                   GetParam().kvCacheDtype + ".daybreak";
  options.maxSeqLen = 64;
  options.maxBatch = 2;
  options.maxTokens = 64;
  options.kvCacheDtype = GetParam().kvCacheDtype;
  std::string log;
  llvm::raw_string_ostream logStream(log);
  llvm::Error err = pipeline::compile(options, llvm::nulls(), logStream);
  ASSERT_FALSE(err) << llvm::toString(std::move(err));

  // The reference: the same lm IR after the lm phase.
  auto config = importers::loadConfig(dir);
  auto checkpoint = importers::Checkpoint::open(dir);
  ASSERT_TRUE(config && checkpoint);
  MLIRContext context;
  models::BuildOptions build;
  build.maxSeqLen = options.maxSeqLen;
  build.maxBatch = options.maxBatch;
  auto module = models::buildDeepseekV32(context, *config, *checkpoint, build);
  ASSERT_TRUE(!!module) << llvm::toString(module.takeError());
  auto weights = ref::checkpointWeights(*checkpoint);
  PassManager pm(&context);
  pipeline::buildLmPipeline(pm, options, weights);
  ASSERT_TRUE(succeeded(pm.run(**module)));
  ref::Evaluator evaluator(**module, weights);

  runtime::LoadOptions load;
  load.threads = 2;
  auto model = runtime::Model::load(options.output, load);
  ASSERT_TRUE(model.ok()) << model.error().message();

  // Two sequences of different lengths in one prefill, then decode steps.
  int64_t width = config->kvLoraRank + config->qkRopeHeadDim;
  std::vector<ref::Tensor> caches;
  for (int64_t l = 0; l < config->numLayers; ++l) {
    caches.push_back(ref::Tensor::zeros(ref::ElementType::F32,
                                        {build.maxBatch, build.maxSeqLen, width}));
    caches.push_back(ref::Tensor::zeros(
        ref::ElementType::F32,
        {build.maxBatch, build.maxSeqLen, config->indexHeadDim}));
  }
  // The fixture's prompts: chosen (see its README) so that no indexer top-k
  // boundary is a near tie, which summation order could flip.
  auto text = llvm::MemoryBuffer::getFile(dir + "/inputs.json");
  ASSERT_TRUE(!!text);
  auto json = llvm::json::parse((*text)->getBuffer());
  ASSERT_TRUE(!!json) << llvm::toString(json.takeError());
  runtime::StepInputs step;
  int seqIndex = 0;
  for (const llvm::json::Value &seq :
       *json->getAsObject()->getArray("sequences")) {
    int p = 0;
    for (const llvm::json::Value &id :
         *seq.getAsObject()->getArray("prompt_ids")) {
      step.ids.push_back(*id.getAsInteger());
      step.positions.push_back(p++);
      step.sequences.push_back(seqIndex);
    }
    ++seqIndex;
  }
  double worst = 0;
  int64_t rows = 0, agree = 0;
  for (int iteration = 0; iteration < 4; ++iteration) {
    const char *fn = iteration == 0 ? "prefill" : "decode";
    int64_t n = step.ids.size();
    std::vector<int64_t> ids(step.ids.begin(), step.ids.end());
    std::vector<int64_t> pos(step.positions.begin(), step.positions.end());
    std::vector<int64_t> seq(step.sequences.begin(), step.sequences.end());
    std::vector<ref::Tensor> args = {ref::Tensor::fromInts({n}, ids),
                                     ref::Tensor::fromInts({n}, pos),
                                     ref::Tensor::fromInts({n}, seq)};
    args.insert(args.end(), caches.begin(), caches.end());
    auto expected = evaluator.run(fn, args);
    ASSERT_TRUE(!!expected) << llvm::toString(expected.takeError());
    caches.assign(expected->begin() + 1, expected->end());
    std::vector<float> got;
    Status status = (*model)->run(fn, step, got);
    ASSERT_TRUE(status.ok()) << status.message();
    const std::vector<float> &want = (*expected)[0].floats();
    ASSERT_EQ(got.size(), want.size());
    double stepWorst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      stepWorst = std::max(stepWorst, std::fabs(double(got[i]) - want[i]));
    if (getenv("DAYBREAK_DEBUG")) {
      for (size_t i = 0; i < got.size(); ++i)
        if (std::fabs(double(got[i]) - want[i]) > 1e-4) {
          std::printf("  %s first diff at row %zu\n", fn, i / config->vocabSize);
          break;
        }
    }
    worst = std::max(worst, stepWorst);
    int64_t vocab0 = config->vocabSize;
    for (int64_t r = 0; r < n; ++r) {
      const float *a = got.data() + r * vocab0, *b = want.data() + r * vocab0;
      rows += 1;
      agree += (std::max_element(a, a + vocab0) - a) ==
               (std::max_element(b, b + vocab0) - b);
    }
    // Next: one greedy token per sequence from the last logits of each.
    runtime::StepInputs next;
    int64_t vocab = config->vocabSize;
    for (int s = 0; s < 2; ++s) {
      int64_t last = -1;
      for (int64_t t = 0; t < n; ++t)
        if (step.sequences[t] == s)
          last = t;
      const float *row = got.data() + last * vocab;
      next.ids.push_back(std::max_element(row, row + vocab) - row);
      next.positions.push_back(step.positions[last] + 1);
      next.sequences.push_back(s);
    }
    step = next;
  }
  // fp32 on both sides over identical cache rounding: the differences are
  // summation order only (blocked GEMMs vs fp64 accumulation).
  EXPECT_LE(worst, GetParam().tolerance) << GetParam().kvCacheDtype;
  EXPECT_EQ(agree, rows) << "top-1 disagreements";
  std::printf("%s kv %s: runtime vs reference max |diff| %.3g, top-1 "
              "%lld/%lld\n",
              GetParam().fixture, GetParam().kvCacheDtype, worst,
              static_cast<long long>(agree), static_cast<long long>(rows));
}

INSTANTIATE_TEST_SUITE_P(
    Caches, CompiledModel,
    ::testing::Values(
        Case{"test/fixtures/deepseek_v32_small_fp8", "fp8", 5e-2},
        Case{"test/fixtures/deepseek_v32_small_fp8", "bf16", 5e-3},
        Case{"test/fixtures/deepseek_v32_small_fp8", "f32", 1e-4},
        Case{"test/fixtures/shared/deepseek_v32", "fp8", 5e-2},
        Case{"test/fixtures/shared/deepseek_v32", "f32", 1e-4}));

} // namespace
