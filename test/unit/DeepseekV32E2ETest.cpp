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
#include "compiler/reference/Evaluator.h"
#include "dialects/lm/LmDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <cstring>

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

class DeepseekV32E2E : public ::testing::TestWithParam<const char *> {};

TEST_P(DeepseekV32E2E, LogitsMatchTransformers) {
  std::string dir = std::string(DAYBREAK_SOURCE_DIR) + "/" + GetParam();
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

  MLIRContext context;
  models::BuildOptions options;
  options.maxSeqLen = 64;
  auto module = models::buildDeepseekV32(context, *config, *checkpoint,
                                         options);
  ASSERT_TRUE(!!module) << llvm::toString(module.takeError());
  ASSERT_TRUE(succeeded(verify(**module)));

  ref::Evaluator evaluator(
      **module, [&](llvm::StringRef, Type, llvm::ArrayRef<std::string> srcs) {
        return importers::loadWeight(*checkpoint, srcs);
      });
  int64_t kvWidth = config->kvLoraRank + config->qkRopeHeadDim;

  for (auto [i, seqValue] : llvm::enumerate(*sequences)) {
    const llvm::json::Object &seq = *seqValue.getAsObject();
    std::vector<int64_t> prompt = intList(seq, "prompt_ids");
    std::vector<int64_t> decode = intList(seq, "decode_ids");
    ASSERT_GT(static_cast<int64_t>(prompt.size()), config->indexTopk)
        << "the prompt must exceed index_topk to test the sparse path";

    std::vector<ref::Tensor> caches;
    for (int64_t l = 0; l < config->numLayers; ++l) {
      caches.push_back(ref::Tensor::zeros(ref::ElementType::F32,
                                          {options.maxSeqLen, kvWidth}));
      caches.push_back(ref::Tensor::zeros(
          ref::ElementType::F32, {options.maxSeqLen, config->indexHeadDim}));
    }
    auto step = [&](llvm::StringRef fn, std::vector<int64_t> ids,
                    int64_t start) -> std::vector<float> {
      std::vector<int64_t> positions(ids.size());
      for (size_t t = 0; t < ids.size(); ++t)
        positions[t] = start + t;
      int64_t n = ids.size();
      std::vector<ref::Tensor> args = {ref::Tensor::fromInts({n}, ids),
                                       ref::Tensor::fromInts({n}, positions)};
      args.insert(args.end(), caches.begin(), caches.end());
      auto out = evaluator.run(fn, args);
      EXPECT_TRUE(!!out) << llvm::toString(out.takeError());
      if (!out)
        return {};
      caches.assign(out->begin() + 1, out->end());
      return (*out)[0].floats();
    };

    // Tolerance: 1e-4 absolute on logits of magnitude ~4 (fp32 vs fp32;
    // transformers' own fp32-vs-fp64 spread is 5.4e-6, fixture README).
    constexpr double kTolerance = 1e-4;
    std::vector<int64_t> shape;
    std::string prefix = "seq" + std::to_string(i);
    std::vector<float> want =
        readF32(expected, prefix + ".prefill_logits", &shape);
    std::vector<float> got = step("prefill", prompt, 0);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    for (size_t j = 0; j < got.size(); ++j)
      worst = std::max(worst, std::fabs(double(got[j]) - want[j]));
    EXPECT_LE(worst, kTolerance) << prefix << " prefill";
    std::printf("%s %s prefill: %zu logits, max |diff| %.3g\n", GetParam(),
                prefix.c_str(), got.size(), worst);

    std::vector<float> wantDecode =
        readF32(expected, prefix + ".decode_logits", &shape);
    int64_t vocab = config->vocabSize;
    worst = 0;
    for (size_t t = 0; t < decode.size(); ++t) {
      std::vector<float> row =
          step("decode", {decode[t]}, prompt.size() + t);
      ASSERT_EQ(static_cast<int64_t>(row.size()), vocab);
      for (int64_t j = 0; j < vocab; ++j)
        worst = std::max(worst,
                         std::fabs(double(row[j]) - wantDecode[t * vocab + j]));
    }
    EXPECT_LE(worst, kTolerance) << prefix << " decode";
    std::printf("%s %s decode: %zu steps, max |diff| %.3g\n", GetParam(),
                prefix.c_str(), decode.size(), worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeepseekV32E2E,
                         ::testing::Values("test/fixtures/shared/deepseek_v32",
                                           "test/fixtures/shared/deepseek_v32_fp8"));

} // namespace
