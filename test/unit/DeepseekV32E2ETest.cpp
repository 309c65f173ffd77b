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
#include "compiler/reference/CheckpointWeights.h"
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
  options.maxBatch = 2;
  auto module = models::buildDeepseekV32(context, *config, *checkpoint,
                                         options);
  ASSERT_TRUE(!!module) << llvm::toString(module.takeError());
  ASSERT_TRUE(succeeded(verify(**module)));

  ref::Evaluator evaluator(**module, ref::checkpointWeights(*checkpoint));
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

  std::vector<ref::Tensor> caches;
  for (int64_t l = 0; l < config->numLayers; ++l) {
    caches.push_back(ref::Tensor::zeros(
        ref::ElementType::F32, {options.maxBatch, options.maxSeqLen, kvWidth}));
    caches.push_back(ref::Tensor::zeros(
        ref::ElementType::F32,
        {options.maxBatch, options.maxSeqLen, config->indexHeadDim}));
  }
  auto step = [&](llvm::StringRef fn, const std::vector<int64_t> &ids,
                  const std::vector<int64_t> &positions,
                  const std::vector<int64_t> &seqs) -> std::vector<float> {
    int64_t n = ids.size();
    std::vector<ref::Tensor> args = {ref::Tensor::fromInts({n}, ids),
                                     ref::Tensor::fromInts({n}, positions),
                                     ref::Tensor::fromInts({n}, seqs)};
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
  std::vector<int64_t> ids, positions, seqs;
  for (int64_t i = 0; i < batch; ++i)
    for (size_t p = 0; p < prompts[i].size(); ++p) {
      ids.push_back(prompts[i][p]);
      positions.push_back(p);
      seqs.push_back(i);
    }
  std::vector<float> got = step("prefill", ids, positions, seqs);
  ASSERT_EQ(got.size(), ids.size() * vocab);
  size_t row = 0;
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<int64_t> shape;
    std::string prefix = "seq" + std::to_string(i);
    std::vector<float> want =
        readF32(expected, prefix + ".prefill_logits", &shape);
    ASSERT_EQ(want.size(), prompts[i].size() * vocab);
    double worst = 0;
    for (size_t j = 0; j < want.size(); ++j)
      worst = std::max(worst,
                       std::fabs(double(got[row * vocab + j]) - want[j]));
    row += prompts[i].size();
    EXPECT_LE(worst, kTolerance) << prefix << " prefill";
    std::printf("%s %s prefill: %zu logits, max |diff| %.3g\n", GetParam(),
                prefix.c_str(), want.size(), worst);
  }

  std::vector<double> worstDecode(batch, 0.0);
  std::vector<std::vector<float>> wantDecode(batch);
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<int64_t> shape;
    wantDecode[i] = readF32(expected, "seq" + std::to_string(i) +
                                          ".decode_logits", &shape);
  }
  for (size_t t = 0; t < decodes[0].size(); ++t) {
    ids.clear();
    positions.clear();
    seqs.clear();
    for (int64_t i = 0; i < batch; ++i) {
      ids.push_back(decodes[i][t]);
      positions.push_back(prompts[i].size() + t);
      seqs.push_back(i);
    }
    std::vector<float> rows = step("decode", ids, positions, seqs);
    ASSERT_EQ(static_cast<int64_t>(rows.size()), batch * vocab);
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t j = 0; j < vocab; ++j)
        worstDecode[i] = std::max(
            worstDecode[i], std::fabs(double(rows[i * vocab + j]) -
                                      wantDecode[i][t * vocab + j]));
  }
  for (int64_t i = 0; i < batch; ++i) {
    EXPECT_LE(worstDecode[i], kTolerance) << "seq" << i << " decode";
    std::printf("%s seq%lld decode: %zu steps, max |diff| %.3g\n", GetParam(),
                static_cast<long long>(i), decodes[i].size(), worstDecode[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeepseekV32E2E,
                         ::testing::Values("test/fixtures/shared/deepseek_v32",
                                           "test/fixtures/shared/deepseek_v32_fp8",
                                           "test/fixtures/deepseek_v32_small",
                                           "test/fixtures/deepseek_v32_small_fp8"));

} // namespace
