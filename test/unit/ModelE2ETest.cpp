//===- ModelE2ETest.cpp - lm IR of each family vs transformers ------------===//
//
// Imports golden checkpoints (made by transformers, see each fixture's
// README) through the model registry, builds their lm IR, runs @prefill over
// all prompts as one batch and @decode over the teacher-forced tokens with
// the reference evaluator, threading every cache and state from step to
// step, and compares every logit with transformers' float32 output:
// - gpt-oss (MXFP4 experts): prompts longer than the sliding window, so
//   sliding layers mask keys their full layers see;
// - Kimi Linear: KDA layers' per-sequence state (convolution windows and
//   the recurrent state) through a batched prefill of two prompts of
//   different lengths and batched decode, NoPE MLA over the latent cache.
//
//===----------------------------------------------------------------------===//

#include "compiler/importers/WeightLoader.h"
#include "compiler/models/ModelRegistry.h"
#include "compiler/reference/CheckpointWeights.h"
#include "compiler/reference/Evaluator.h"
#include "runtime/safetensors/Safetensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include "test/unit/TeacherForcing.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <cstring>

using namespace mlir;
using namespace daybreak;

namespace {

std::vector<int64_t> intList(const llvm::json::Object &seq,
                             llvm::StringRef key) {
  std::vector<int64_t> out;
  if (const llvm::json::Array *a = seq.getArray(key))
    for (const llvm::json::Value &v : *a)
      out.push_back(*v.getAsInteger());
  return out;
}

/// The float32 tensor `name` of a safetensors file, row-major.
std::vector<float> readF32(const safetensors::File &file,
                           const std::string &name) {
  const safetensors::TensorView *view = file.find(name);
  EXPECT_NE(view, nullptr) << "missing " << name;
  if (!view || view->dtype != safetensors::DType::F32)
    return {};
  std::vector<float> values(view->byteSize / 4);
  std::memcpy(values.data(), view->data, view->byteSize);
  return values;
}

struct Fixture {
  const char *path, *modelType;
};

class ModelE2E : public ::testing::TestWithParam<Fixture> {};

TEST_P(ModelE2E, LogitsMatchTransformers) {
  std::string dir = std::string(DAYBREAK_SOURCE_DIR) + "/" + GetParam().path;
  auto model = models::loadModel(dir);
  ASSERT_TRUE(!!model) << llvm::toString(model.takeError());
  ASSERT_EQ((*model)->modelType(), GetParam().modelType);
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

  std::vector<std::vector<int64_t>> prompts, decodes;
  for (const llvm::json::Value &seqValue : *sequences) {
    prompts.push_back(intList(*seqValue.getAsObject(), "prompt_ids"));
    decodes.push_back(intList(*seqValue.getAsObject(), "decode_ids"));
  }
  int64_t batch = prompts.size();
  // Room for the longest sequence, in whole pages of 64.
  int64_t longest = 0;
  for (size_t i = 0; i < prompts.size(); ++i)
    longest = std::max<int64_t>(longest, prompts[i].size() + decodes[i].size());

  MLIRContext context;
  models::BuildOptions options;
  options.maxSeqLen = (longest + 63) / 64 * 64;
  options.maxBatch = batch;
  auto module = (*model)->build(context, *checkpoint, options);
  ASSERT_TRUE(!!module) << llvm::toString(module.takeError());
  ASSERT_TRUE(succeeded(verify(**module)));

  // MXFP4 bytes are read as the values their weights declare, as the
  // pipeline's lm-fold-weights reads them.
  ref::Evaluator evaluator(**module, ref::checkpointWeights(*checkpoint));
  // The caches and states are the step's arguments after its three inputs
  // (token ids, positions, sequences); they start zeroed.
  auto prefill = (*module)->lookupSymbol<func::FuncOp>("prefill");
  ASSERT_TRUE(prefill);
  std::vector<ref::Tensor> caches;
  for (Type type : prefill.getArgumentTypes().drop_front(3)) {
    auto shape = cast<RankedTensorType>(type).getShape();
    caches.push_back(
        ref::Tensor::zeros(ref::ElementType::F32,
                           std::vector<int64_t>(shape.begin(), shape.end())));
  }
  auto step = [&](const testutil::ForcedStep &forced) -> std::vector<float> {
    auto rows = testutil::runForcedStep(evaluator, forced, caches);
    EXPECT_TRUE(!!rows) << llvm::toString(rows.takeError());
    return rows ? std::move(*rows) : std::vector<float>();
  };

  // Tolerance: 1e-4 absolute on logits of magnitude ~4 (fp32 vs fp32;
  // transformers' own fp32-vs-fp64 spread is ~4e-6, fixture READMEs).
  constexpr double kTolerance = 1e-4;
  int64_t vocab = (*model)->vocabSize();
  std::vector<testutil::ForcedStep> steps =
      testutil::teacherForcedSteps(prompts, decodes);
  const testutil::ForcedStep &first = steps.front();
  std::vector<float> got = step(first);
  ASSERT_EQ(got.size(), first.ids.size() * vocab);
  size_t row = 0;
  for (int64_t i = 0; i < batch; ++i) {
    std::string prefix = "seq" + std::to_string(i);
    std::vector<float> want = readF32(expected, prefix + ".prefill_logits");
    ASSERT_EQ(want.size(), prompts[i].size() * vocab);
    double worst = 0;
    for (size_t j = 0; j < want.size(); ++j)
      worst =
          std::max(worst, std::fabs(double(got[row * vocab + j]) - want[j]));
    row += prompts[i].size();
    EXPECT_LE(worst, kTolerance) << prefix << " prefill";
    std::printf("%s %s prefill: %zu logits, max |diff| %.3g\n", GetParam().path,
                prefix.c_str(), want.size(), worst);
  }

  std::vector<double> worstDecode(batch, 0.0);
  std::vector<std::vector<float>> wantDecode(batch);
  for (int64_t i = 0; i < batch; ++i)
    wantDecode[i] =
        readF32(expected, "seq" + std::to_string(i) + ".decode_logits");
  for (size_t t = 0; t + 1 < steps.size(); ++t) {
    const testutil::ForcedStep &forced = steps[t + 1];
    std::vector<float> rows = step(forced);
    ASSERT_EQ(static_cast<int64_t>(rows.size()), batch * vocab);
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t j = 0; j < vocab; ++j)
        worstDecode[i] =
            std::max(worstDecode[i], std::fabs(double(rows[i * vocab + j]) -
                                               wantDecode[i][t * vocab + j]));
  }
  for (int64_t i = 0; i < batch; ++i) {
    EXPECT_LE(worstDecode[i], kTolerance) << "seq" << i << " decode";
    std::printf("%s seq%lld decode: %zu steps, max |diff| %.3g\n",
                GetParam().path, static_cast<long long>(i), decodes[i].size(),
                worstDecode[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ModelE2E,
    ::testing::Values(Fixture{"test/fixtures/shared/gpt_oss_mxfp4", "gpt_oss"},
                      Fixture{"test/fixtures/gpt_oss_small", "gpt_oss"},
                      Fixture{"test/fixtures/shared/kimi_linear",
                              "kimi_linear"},
                      Fixture{"test/fixtures/kimi_linear_long", "kimi_linear"}),
    [](const ::testing::TestParamInfo<Fixture> &info) {
      std::string name = info.param.path;
      return name.substr(name.rfind('/') + 1);
    });

} // namespace
