//===- DeepseekV32IndexerTest.cpp - DSA top-k selections vs transformers --===//
//
// The golden DeepSeek-V3.2 fixtures record the key positions transformers'
// lightning indexer selects, at every layer, for the last prompt token of each
// sequence (`seq{i}.indexer_topk_last_prefill.layer{L}`, see each fixture's
// README). This runs @prefill over the fixture's prompts with the reference
// evaluator, captures what every lm.dsa_index_select selects, and compares
// those selections with transformers' as sets: exactly, since a set is only
// well defined when the k-th and (k+1)-th scores differ, which is checked on
// both sides (transformers' smallest gap from the fixture's
// generation_report.json, Daybreak's from the scores the op received).
//
//===----------------------------------------------------------------------===//

#include "compiler/importers/WeightLoader.h"
#include "compiler/models/DeepseekV32.h"
#include "compiler/pipeline/Pipeline.h"
#include "compiler/reference/CheckpointWeights.h"
#include "compiler/reference/Evaluator.h"
#include "dialects/lm/LmOps.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>

using namespace mlir;
using namespace daybreak;

namespace {

struct Case {
  const char *fixture;
  /// Whether the lm pipeline (weight folding, KV layouts, fusion, tiling)
  /// runs before evaluation, with f32 caches; otherwise the imported lm IR.
  bool lmPipeline;
};

std::vector<int64_t> intList(const llvm::json::Object &seq,
                             llvm::StringRef key) {
  std::vector<int64_t> out;
  if (const llvm::json::Array *a = seq.getArray(key))
    for (const llvm::json::Value &v : *a)
      out.push_back(*v.getAsInteger());
  return out;
}

/// What one lm.dsa_index_select received and selected.
struct Selection {
  ref::Tensor scores;  ///< [T, S] f32
  ref::Tensor bounds;  ///< [T] visible keys per query
  ref::Tensor indices; ///< [T, top_k], -1 padded
};

class DeepseekV32Indexer : public ::testing::TestWithParam<Case> {};

TEST_P(DeepseekV32Indexer, TopkSetsMatchTransformers) {
  std::string dir = std::string(DAYBREAK_SOURCE_DIR) + "/" + GetParam().fixture;
  auto config = importers::loadConfig(dir);
  ASSERT_TRUE(!!config) << llvm::toString(config.takeError());
  auto checkpoint = importers::Checkpoint::open(dir);
  ASSERT_TRUE(!!checkpoint) << llvm::toString(checkpoint.takeError());

  auto readJson = [&](const std::string &name) -> llvm::json::Value {
    auto text = llvm::MemoryBuffer::getFile(dir + "/" + name);
    EXPECT_TRUE(!!text) << "cannot read " << dir << "/" << name;
    if (!text)
      return nullptr;
    auto json = llvm::json::parse((*text)->getBuffer());
    EXPECT_TRUE(!!json) << name << ": " << llvm::toString(json.takeError());
    return json ? std::move(*json) : llvm::json::Value(nullptr);
  };
  llvm::json::Value inputs = readJson("inputs.json");
  llvm::json::Value report = readJson("generation_report.json");
  ASSERT_TRUE(inputs.getAsObject() && report.getAsObject());
  const llvm::json::Array *sequences =
      inputs.getAsObject()->getArray("sequences");
  const llvm::json::Object *margins =
      report.getAsObject()->getObject("margins");
  ASSERT_TRUE(sequences && margins)
      << dir << ": inputs.json needs `sequences`, generation_report.json "
      << "`margins`";

  safetensors::File expected;
  safetensors::Status status =
      safetensors::File::open(dir + "/expected.safetensors", expected);
  ASSERT_TRUE(status.ok) << status.message;

  MLIRContext context;
  models::BuildOptions build;
  build.maxSeqLen = 64;
  build.maxBatch = 2;
  auto module = models::buildDeepseekV32(context, *config, *checkpoint, build);
  ASSERT_TRUE(!!module) << llvm::toString(module.takeError());
  ASSERT_TRUE(succeeded(verify(**module)));
  ref::WeightProvider weights = ref::checkpointWeights(*checkpoint);
  if (GetParam().lmPipeline) {
    pipeline::Options options;
    options.kvCacheDtype = "f32";
    PassManager pm(&context);
    pipeline::buildLmPipeline(pm, options, weights);
    ASSERT_TRUE(succeeded(pm.run(**module)));
  }
  ref::Evaluator evaluator(**module, weights);
  std::vector<Selection> selections;
  evaluator.setOpObserver([&](Operation *op,
                              llvm::ArrayRef<const ref::Tensor *> operands,
                              llvm::ArrayRef<const ref::Tensor *> results) {
    if (isa<lm::DsaIndexSelectOp>(op))
      selections.push_back({*operands[0], *operands[1], *results[0]});
  });

  // One prefill over all prompts, as the runtime batches them.
  std::vector<std::vector<int64_t>> prompts;
  std::vector<int64_t> ids, positions, seqs;
  for (const llvm::json::Value &seqValue : *sequences) {
    prompts.push_back(intList(*seqValue.getAsObject(), "prompt_ids"));
    ASSERT_GT(static_cast<int64_t>(prompts.back().size()), config->indexTopk)
        << "the prompt must exceed index_topk for a selection to be made";
    for (size_t p = 0; p < prompts.back().size(); ++p) {
      ids.push_back(prompts.back()[p]);
      positions.push_back(p);
      seqs.push_back(prompts.size() - 1);
    }
  }
  ASSERT_LE(static_cast<int64_t>(prompts.size()), build.maxBatch);
  int64_t n = ids.size();
  std::vector<ref::Tensor> args = {ref::Tensor::fromInts({n}, ids),
                                   ref::Tensor::fromInts({n}, positions),
                                   ref::Tensor::fromInts({n}, seqs)};
  int64_t kvWidth = config->kvLoraRank + config->qkRopeHeadDim;
  for (int64_t l = 0; l < config->numLayers; ++l) {
    args.push_back(ref::Tensor::zeros(
        ref::ElementType::F32, {build.maxBatch, build.maxSeqLen, kvWidth}));
    args.push_back(ref::Tensor::zeros(
        ref::ElementType::F32,
        {build.maxBatch, build.maxSeqLen, config->indexHeadDim}));
  }
  auto out = evaluator.run("prefill", args);
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  // The builder emits one selection per layer, in layer order.
  ASSERT_EQ(static_cast<int64_t>(selections.size()), config->numLayers);

  int64_t k = config->indexTopk;
  int64_t row = -1, compared = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string seq = "seq" + std::to_string(i);
    row += prompts[i].size(); // the last prompt token of sequence i
    // transformers' side: its smallest k-th vs (k+1)-th gap over every
    // query row and layer, as the generator measured it.
    const llvm::json::Object *theirs = margins->getObject(seq + "_indexer");
    ASSERT_NE(theirs, nullptr)
        << "generation_report.json: no margins." << seq << "_indexer";
    std::optional<double> theirGap = theirs->getNumber("min_gap_abs");
    if (!theirGap)
      theirGap = theirs->getNumber("min_gap_kth_vs_next");
    ASSERT_TRUE(theirGap.has_value())
        << "generation_report.json: margins." << seq << "_indexer has no gap";
    ASSERT_GT(*theirGap, 0.0)
        << seq << ": transformers' scores tie at a top-k boundary, so its "
        << "selection depends on tie breaking and is no oracle";

    for (int64_t layer = 0; layer < config->numLayers; ++layer) {
      std::string name =
          seq + ".indexer_topk_last_prefill.layer" + std::to_string(layer);
      const safetensors::TensorView *view = expected.find(name);
      ASSERT_NE(view, nullptr) << "expected.safetensors: missing " << name;
      ASSERT_EQ(view->dtype, safetensors::DType::I32) << name;
      ASSERT_EQ(view->shape, std::vector<int64_t>{k}) << name;
      std::vector<int32_t> want(k);
      std::memcpy(want.data(), view->data, k * sizeof(int32_t));
      std::set<int64_t> wantSet(want.begin(), want.end());
      ASSERT_EQ(static_cast<int64_t>(wantSet.size()), k) << name;

      const Selection &s = selections[layer];
      ASSERT_EQ(s.indices.dim(1), k);
      ASSERT_EQ(s.bounds.ints()[row], static_cast<int64_t>(prompts[i].size()))
          << name << ": the last prompt token sees the whole prompt";
      std::set<int64_t> gotSet(s.indices.ints().begin() + row * k,
                               s.indices.ints().begin() + (row + 1) * k);
      ASSERT_EQ(gotSet.count(-1), 0u)
          << name << ": fewer than top_k keys selected";

      // Daybreak's side: the k-th and (k+1)-th of the visible keys' scores.
      int64_t width = s.scores.dim(1);
      std::vector<float> visible(s.scores.floats().begin() + row * width,
                                 s.scores.floats().begin() + row * width +
                                     prompts[i].size());
      std::vector<float> sorted = visible;
      std::sort(sorted.begin(), sorted.end(), std::greater<float>());
      double ourGap = double(sorted[k - 1]) - sorted[k];
      EXPECT_GT(ourGap, 0.0)
          << name << ": Daybreak's scores tie at the k-th boundary ("
          << sorted[k - 1] << ") where transformers' are at least " << *theirGap
          << " apart";

      EXPECT_EQ(gotSet, wantSet) << [&] {
        std::string diff;
        for (int64_t p : wantSet)
          if (!gotSet.count(p))
            diff += " missing " + std::to_string(p) + " (score " +
                    std::to_string(visible[p]) + ")";
        for (int64_t p : gotSet)
          if (!wantSet.count(p))
            diff +=
                " extra " + std::to_string(p) + " (score " +
                std::to_string(p < int64_t(visible.size()) ? visible[p] : NAN) +
                ")";
        return name + ": k-th score " + std::to_string(sorted[k - 1]) + "," +
               diff;
      }();
      std::printf("%s %s%s: %lld of %lld keys, gap at the k-th score %.3g "
                  "(transformers' smallest %.3g)\n",
                  GetParam().fixture,
                  GetParam().lmPipeline ? "(lm pipeline) " : "", name.c_str(),
                  static_cast<long long>(k),
                  static_cast<long long>(prompts[i].size()), ourGap, *theirGap);
      ++compared;
    }
  }
  EXPECT_EQ(compared, static_cast<int64_t>(prompts.size()) * config->numLayers);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, DeepseekV32Indexer,
    ::testing::Values(Case{"test/fixtures/shared/deepseek_v32", false},
                      Case{"test/fixtures/shared/deepseek_v32_fp8", false},
                      Case{"test/fixtures/deepseek_v32_small", false},
                      Case{"test/fixtures/deepseek_v32_small_fp8", false},
                      Case{"test/fixtures/shared/deepseek_v32", true},
                      Case{"test/fixtures/deepseek_v32_small_fp8", true}));

} // namespace
