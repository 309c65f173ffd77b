//===- TensorParallelTest.cpp - Sharded weights and collectives -----------===//
//
// The sharding math of tensor parallelism (docs/parallel.md) on the
// reference evaluator: a random checkpoint; a SwiGLU MLP (column-parallel
// gate and up, row-parallel down), an FP8 pair of projections with 128 x 128
// block scales (column- then row-parallel, the scales cut by blocks) and an
// LM head split by vocabulary rows; and each of T ranks' functions run on a
// thread of its own, meeting at lm.all_reduce and lm.all_gather through the
// in-process runtime::LoopbackGroup. Every rank's logits must be the one-rank
// function's, within the reordering of the row-parallel sums. Also: the
// shards stack under lm-fuse-gate-up, the artifact writer stores exactly a
// shard's bytes, and a rank that fails stops the others instead of hanging.
//
//===----------------------------------------------------------------------===//

#include "compiler/artifact/ArtifactEmitter.h"
#include "compiler/importers/Checkpoint.h"
#include "compiler/importers/WeightLoader.h"
#include "compiler/pipeline/Pipeline.h"
#include "compiler/reference/CheckpointWeights.h"
#include "compiler/reference/Collectives.h"
#include "compiler/reference/Evaluator.h"
#include "compiler/targets/Target.h"
#include "passes/Passes.h"
#include "runtime/artifact/ArtifactFile.h"
#include "runtime/executor/Model.h"
#include "runtime/executor/Ranks.h"
#include "test/unit/PassEquivalence.h"
#include "test/unit/SafetensorsWriter.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cmath>
#include <map>
#include <random>
#include <thread>

using namespace mlir;
using namespace daybreak;
using testutil::RawTensor;

namespace {

// Hidden 256 (two FP8 column blocks), MLP 64, FP8 projection 512 (four row
// blocks, so four ranks hold one each), vocabulary 96.
constexpr int64_t kHidden = 256, kMlp = 64, kProj = 512, kVocab = 96,
                  kTokens = 3, kBlock = 128;

/// The attribute cutting `size / ranks` indices of `dim` for `rank`, or
/// nothing for one rank.
std::string shard(int64_t dim, int64_t size, int64_t rank, int64_t ranks) {
  if (ranks == 1)
    return "";
  return llvm::formatv(", shard = #lm.shard<dim = {0}, offset = {1}, "
                       "size = {2}>",
                       dim, rank * (size / ranks), size / ranks)
      .str();
}

/// Rank `rank` of `ranks`'s function @f: [T, hidden] -> [T, vocab] logits.
/// With `everyRankFirst`, every rank takes rank 0's shards (a wrong split
/// the comparison must catch).
std::string rankModule(int64_t rank, int64_t ranks,
                       bool everyRankFirst = false) {
  int64_t r = everyRankFirst ? 0 : rank;
  int64_t mlp = kMlp / ranks, proj = kProj / ranks, vocab = kVocab / ranks;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv(R"mlir(
  lm.weight @gate : tensor<{0}x256xbf16> {{sources = ["mlp.gate"]{1}}
  lm.weight @up : tensor<{0}x256xbf16> {{sources = ["mlp.up"]{1}}
  lm.weight @down : tensor<256x{0}xbf16> {{sources = ["mlp.down"]{2}}
  lm.weight @q : tensor<{3}x256xf8E4M3FN> {{sources = ["attn.q"]{4}}
  lm.weight @qs : tensor<{5}x2xf32> {{sources = ["attn.q_s"]{6}}
  lm.weight @o : tensor<256x{3}xf8E4M3FN> {{sources = ["attn.o"]{7}}
  lm.weight @os : tensor<2x{5}xf32> {{sources = ["attn.o_s"]{8}}
  lm.weight @head : tensor<{9}x256xbf16> {{sources = ["head"]{10}}
)mlir",
                      mlp, shard(0, kMlp, r, ranks), shard(1, kMlp, r, ranks),
                      proj, shard(0, kProj, r, ranks), proj / kBlock,
                      shard(0, kProj / kBlock, r, ranks),
                      shard(1, kProj, r, ranks),
                      shard(1, kProj / kBlock, r, ranks), vocab,
                      shard(0, kVocab, r, ranks));
  os << llvm::formatv(R"mlir(
  func.func @f(%x: tensor<?x256xf32>) -> tensor<?x96xf32> {{
    %wg = lm.weight_ref @gate : tensor<{0}x256xbf16>
    %wu = lm.weight_ref @up : tensor<{0}x256xbf16>
    %wd = lm.weight_ref @down : tensor<256x{0}xbf16>
    %g = lm.matmul %x, %wg : (tensor<?x256xf32>, tensor<{0}x256xbf16>) -> tensor<?x{0}xf32>
    %u = lm.matmul %x, %wu : (tensor<?x256xf32>, tensor<{0}x256xbf16>) -> tensor<?x{0}xf32>
    %h = lm.swiglu %g, %u : (tensor<?x{0}xf32>, tensor<?x{0}xf32>) -> tensor<?x{0}xf32>
    %pd = lm.matmul %h, %wd : (tensor<?x{0}xf32>, tensor<256x{0}xbf16>) -> tensor<?x256xf32>
    %y = lm.all_reduce %pd over {4} ranks : tensor<?x256xf32>

    %wq = lm.weight_ref @q : tensor<{1}x256xf8E4M3FN>
    %sq = lm.weight_ref @qs : tensor<{2}x2xf32>
    %wo = lm.weight_ref @o : tensor<256x{1}xf8E4M3FN>
    %so = lm.weight_ref @os : tensor<2x{2}xf32>
    %q = lm.fp8_matmul %y, %wq, %sq {{block_size = array<i64: 128, 128>}
        : (tensor<?x256xf32>, tensor<{1}x256xf8E4M3FN>, tensor<{2}x2xf32>) -> tensor<?x{1}xf32>
    %po = lm.fp8_matmul %q, %wo, %so {{block_size = array<i64: 128, 128>}
        : (tensor<?x{1}xf32>, tensor<256x{1}xf8E4M3FN>, tensor<2x{2}xf32>) -> tensor<?x256xf32>
    %z = lm.all_reduce %po over {4} ranks : tensor<?x256xf32>

    %wh = lm.weight_ref @head : tensor<{3}x256xbf16>
    %l = lm.matmul %z, %wh : (tensor<?x256xf32>, tensor<{3}x256xbf16>) -> tensor<?x{3}xf32>
    %logits = lm.all_gather %l over {4} ranks : tensor<?x{3}xf32> -> tensor<?x96xf32>
    return %logits : tensor<?x96xf32>
  }
)mlir",
                      mlp, proj, proj / kBlock, vocab, ranks);
  return s;
}

class TensorParallel : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tensor-parallel", dir));
    std::mt19937 rng(20261205);
    tensors = {
        {"mlp.gate", "BF16", {kMlp, kHidden},
         testutil::randomBf16s(rng, kMlp * kHidden)},
        {"mlp.up", "BF16", {kMlp, kHidden},
         testutil::randomBf16s(rng, kMlp * kHidden)},
        {"mlp.down", "BF16", {kHidden, kMlp},
         testutil::randomBf16s(rng, kHidden * kMlp)},
        {"attn.q", "F8_E4M3", {kProj, kHidden},
         testutil::randomE4m3Codes(rng, kProj * kHidden)},
        {"attn.q_s", "F32", {kProj / kBlock, kHidden / kBlock},
         testutil::randomBlockScales(rng, kProj / kBlock * kHidden / kBlock)},
        {"attn.o", "F8_E4M3", {kHidden, kProj},
         testutil::randomE4m3Codes(rng, kHidden * kProj)},
        {"attn.o_s", "F32", {kHidden / kBlock, kProj / kBlock},
         testutil::randomBlockScales(rng, kHidden / kBlock * kProj / kBlock)},
        {"head", "BF16", {kVocab, kHidden},
         testutil::randomBf16s(rng, kVocab * kHidden)},
    };
    testutil::writeSafetensors((dir + "/model.safetensors").str(), tensors);
    auto opened = importers::Checkpoint::open(dir.str().str());
    ASSERT_TRUE(bool(opened)) << llvm::toString(opened.takeError());
    checkpoint.emplace(std::move(*opened));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(kTokens * kHidden);
    for (float &v : x)
      v = normal(rng);
    input = ref::Tensor::fromFloats({kTokens, kHidden}, x);
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  /// Each rank's logits, every rank's module evaluated on a thread of its
  /// own; fails the test if a rank fails.
  std::vector<ref::Tensor> runRanks(ArrayRef<OwningOpRef<ModuleOp>> modules) {
    int64_t ranks = modules.size();
    runtime::LoopbackGroup group(ranks);
    std::vector<ref::Tensor> logits(ranks);
    std::vector<std::string> errors(ranks);
    std::vector<std::thread> threads;
    for (int64_t r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        ref::Evaluator evaluator(*modules[r],
                                 ref::checkpointWeights(*checkpoint));
        ref::CommunicatorCollectives collectives(group.rank(r));
        evaluator.setCollectives(&collectives);
        auto out = evaluator.run("f", {input});
        if (!out) {
          errors[r] = llvm::toString(out.takeError());
          group.abort("rank " + std::to_string(r) + " failed");
          return;
        }
        logits[r] = std::move((*out)[0]);
      });
    for (std::thread &t : threads)
      t.join();
    for (int64_t r = 0; r < ranks; ++r)
      EXPECT_EQ(errors[r], "") << "rank " << r;
    return logits;
  }

  std::vector<OwningOpRef<ModuleOp>> parseRanks(int64_t ranks,
                                                bool everyRankFirst = false) {
    std::vector<OwningOpRef<ModuleOp>> modules;
    for (int64_t r = 0; r < ranks; ++r) {
      modules.push_back(parseSourceString<ModuleOp>(
          rankModule(r, ranks, everyRankFirst), &context));
      EXPECT_TRUE(modules.back() && succeeded(verify(*modules.back())));
    }
    return modules;
  }

  llvm::SmallString<128> dir;
  std::vector<RawTensor> tensors;
  std::optional<importers::Checkpoint> checkpoint;
  ref::Tensor input;
  MLIRContext context{testutil::lmTestDialects()};
};

/// The largest |a - b| over two tensors of one shape.
float maxDifference(const ref::Tensor &a, const ref::Tensor &b) {
  float worst = 0.0f;
  for (size_t i = 0; i < a.floats().size(); ++i)
    worst = std::max(worst, std::fabs(a.floats()[i] - b.floats()[i]));
  return worst;
}

float maxMagnitude(const ref::Tensor &a) {
  float worst = 0.0f;
  for (float v : a.floats())
    worst = std::max(worst, std::fabs(v));
  return worst;
}

TEST_F(TensorParallel, RanksComputeTheOneRankLogits) {
  std::vector<ref::Tensor> one = runRanks(parseRanks(1));
  ASSERT_EQ(one[0].shape(), std::vector<int64_t>({kTokens, kVocab}));
  float scale = maxMagnitude(one[0]);
  ASSERT_GT(scale, 0.0f);
  // The split changes only the order of the f32 sums behind the two
  // all-reduces: each rank's partial rounds once more, and the reduction
  // adds T of them, so a reduced value moves by at most ~2T ulps of the
  // partials' magnitudes. The f32 matmuls after it change that by their
  // gain (weights of ~0.1 over 256 inputs, FP8 codes up to 2^8 times
  // scales of 2^-5: far below 10 here), and the bf16 weights are read
  // identically. 1e-5 of the logits' magnitude bounds 4 ranks' 2^-24 x 8
  // x 10 with room; a wrong split moves them by their own size.
  for (int64_t ranks : {2, 4}) {
    std::vector<ref::Tensor> logits = runRanks(parseRanks(ranks));
    for (int64_t r = 0; r < ranks; ++r) {
      ASSERT_EQ(logits[r].shape(), one[0].shape()) << ranks << " ranks";
      EXPECT_LE(maxDifference(logits[r], one[0]), 1e-5f * scale)
          << "rank " << r << " of " << ranks;
      // Every rank holds the same gathered logits.
      EXPECT_EQ(logits[r].floats(), logits[0].floats())
          << "rank " << r << " of " << ranks;
    }
  }
  // The comparison sees a wrong split: every rank reading rank 0's shards.
  std::vector<ref::Tensor> wrong = runRanks(parseRanks(2, true));
  EXPECT_GT(maxDifference(wrong[0], one[0]), 0.1f * scale);
}

TEST_F(TensorParallel, ShardsStackUnderFuseGateUp) {
  std::vector<OwningOpRef<ModuleOp>> modules = parseRanks(2);
  std::vector<ref::Tensor> unfused = runRanks(modules);
  for (int64_t r = 0; r < 2; ++r) {
    PassManager pm(&context);
    pm.addPass(createLmFuseGateUp());
    ASSERT_TRUE(succeeded(pm.run(*modules[r])));
    // Each source cut the same way, then stacked: [gate rows | up rows].
    auto stacked = modules[r]->lookupSymbol<lm::WeightOp>("gate+up");
    ASSERT_TRUE(stacked) << "rank " << r;
    EXPECT_EQ(stacked.getShardAttr(),
              lm::ShardAttr::get(&context, 0, r * kMlp / 2, kMlp / 2));
    EXPECT_EQ(cast<RankedTensorType>(stacked.getType()).getShape(),
              ArrayRef<int64_t>({kMlp, kHidden}));
  }
  testutil::expectSameOutputs(unfused, runRanks(modules));
}

TEST_F(TensorParallel, LoaderCutsEachSourceAndNamesABadShard) {
  // Rows 32..63 of the up projection: the bf16 values at those rows.
  auto rows = importers::loadWeight(*checkpoint, {"mlp.up"}, std::nullopt,
                                    importers::SourceSlice{0, 32, 32});
  ASSERT_TRUE(bool(rows)) << llvm::toString(rows.takeError());
  auto whole = importers::loadWeight(*checkpoint, {"mlp.up"});
  ASSERT_TRUE(bool(whole));
  ASSERT_EQ(rows->shape(), std::vector<int64_t>({32, kHidden}));
  for (int64_t i = 0; i < 32; ++i)
    for (int64_t k = 0; k < kHidden; ++k)
      ASSERT_EQ(rows->floats()[i * kHidden + k],
                whole->floats()[(32 + i) * kHidden + k]);
  // Columns 128..255 of gate and up, stacked: each source cut first.
  auto columns =
      importers::loadWeight(*checkpoint, {"mlp.gate", "mlp.up"}, std::nullopt,
                            importers::SourceSlice{1, 128, 128});
  ASSERT_TRUE(bool(columns)) << llvm::toString(columns.takeError());
  auto gate = importers::loadWeight(*checkpoint, {"mlp.gate"});
  ASSERT_TRUE(bool(gate));
  ASSERT_EQ(columns->shape(), std::vector<int64_t>({2, kMlp, 128}));
  for (int64_t n = 0; n < kMlp; ++n)
    for (int64_t k = 0; k < 128; ++k) {
      ASSERT_EQ(columns->floats()[n * 128 + k],
                gate->floats()[n * kHidden + 128 + k]);
      ASSERT_EQ(columns->floats()[(kMlp + n) * 128 + k],
                whole->floats()[n * kHidden + 128 + k]);
    }
  auto outside = importers::loadWeight(*checkpoint, {"mlp.up"}, std::nullopt,
                                       importers::SourceSlice{0, 48, 32});
  ASSERT_FALSE(bool(outside));
  EXPECT_EQ(llvm::toString(outside.takeError()),
            "'mlp.up' (bf16[64x256]) has no indices [48, 80) of dim 0");
}

/// The bytes of `source` a shard holds: indices [offset, offset + size) of
/// `dim`, row-major, computed from the shape alone.
std::vector<uint8_t> shardBytes(const RawTensor &source, int64_t dim,
                                int64_t offset, int64_t size) {
  int64_t outer = 1, inner = source.bytes.size();
  for (int64_t d = 0; d < dim; ++d)
    outer *= source.shape[d];
  inner /= outer * source.shape[dim];
  std::vector<uint8_t> out;
  for (int64_t o = 0; o < outer; ++o) {
    auto row = source.bytes.begin() + (o * source.shape[dim] + offset) * inner;
    out.insert(out.end(), row, row + size * inner);
  }
  return out;
}

TEST_F(TensorParallel, ArtifactHoldsEachRanksShardBytes) {
  // Rank 1 of 2, lowered and written with its weights embedded and by
  // reference: rows of a projection are one range of the checkpoint file,
  // columns one range per row (embedded either way).
  for (bool byReference : {false, true}) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"mlir(
      lm.weight @up : tensor<32x256xbf16> {sources = ["mlp.up"], shard = #lm.shard<dim = 0, offset = 32, size = 32>}
      lm.weight @down : tensor<256x32xbf16> {sources = ["mlp.down"], shard = #lm.shard<dim = 1, offset = 32, size = 32>}
      lm.weight @q : tensor<256x256xf8E4M3FN> {sources = ["attn.q"], shard = #lm.shard<dim = 0, offset = 256, size = 256>}
      lm.weight @qs : tensor<2x2xf32> {sources = ["attn.q_s"], shard = #lm.shard<dim = 0, offset = 2, size = 2>}
      func.func @decode(%x: tensor<?x256xf32>) -> (tensor<?x256xf32>, tensor<?x256xf32>) {
        %wu = lm.weight_ref @up : tensor<32x256xbf16>
        %wd = lm.weight_ref @down : tensor<256x32xbf16>
        %wq = lm.weight_ref @q : tensor<256x256xf8E4M3FN>
        %sq = lm.weight_ref @qs : tensor<2x2xf32>
        %u = lm.matmul %x, %wu : (tensor<?x256xf32>, tensor<32x256xbf16>) -> tensor<?x32xf32>
        %d = lm.matmul %u, %wd : (tensor<?x32xf32>, tensor<256x32xbf16>) -> tensor<?x256xf32>
        %q = lm.fp8_matmul %x, %wq, %sq {block_size = array<i64: 128, 128>}
            : (tensor<?x256xf32>, tensor<256x256xf8E4M3FN>, tensor<2x2xf32>) -> tensor<?x256xf32>
        return %d, %q : tensor<?x256xf32>, tensor<?x256xf32>
      })mlir",
                                                                   &context);
    ASSERT_TRUE(!!module);
    pipeline::Options options;
    options.target = "cpu";
    options.maxTokens = 4;
    options.maxBatch = 1;
    options.weightsByReference = byReference;
    PassManager pm(&context);
    pipeline::buildLowerToPlanPipeline(pm, options);
    ASSERT_TRUE(succeeded(pm.run(*module)));
    const targets::Target *target = targets::getTarget("cpu");
    ASSERT_TRUE(target);
    artifact::EmitInfo info;
    info.modelType = "tensor_parallel_test";
    info.vocabSize = kVocab;
    info.target = "cpu";
    info.weightsByReference = byReference;
    llvm::Error serialized = target->serialize(*module, info, llvm::nulls());
    ASSERT_FALSE(serialized) << llvm::toString(std::move(serialized));
    std::string path = (dir + "/rank1.daybreak").str();
    auto manifest = artifact::emitArtifact(*module, *checkpoint, info, path);
    ASSERT_TRUE(bool(manifest)) << llvm::toString(manifest.takeError());

    auto file = artifact::ArtifactFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message();
    std::map<std::string, std::vector<uint8_t>> expected = {
        {"up", shardBytes(tensors[1], 0, 32, 32)},
        {"down", shardBytes(tensors[2], 1, 32, 32)},
        {"q", shardBytes(tensors[3], 0, 256, 256)},
        {"qs", shardBytes(tensors[4], 0, 2, 2)},
    };
    ASSERT_EQ(file->manifest().weights_size(), 4);
    for (const artifact::Weight &w : file->manifest().weights()) {
      std::vector<uint8_t> stored;
      for (auto [data, size] : file->weightPieces(w))
        stored.insert(stored.end(), data, data + size);
      EXPECT_EQ(stored, expected[w.name()]) << w.name();
      // By reference, a cut of rows stays in the checkpoint's file.
      if (byReference) {
        EXPECT_EQ(w.pieces_size(), w.name() == "down" ? 0 : 1) << w.name();
      }
    }
  }
}

TEST_F(TensorParallel, FailingRankStopsTheOthers) {
  // Rank 1 never reaches the all-reduce; rank 0 must return, naming it.
  runtime::LoopbackGroup group(2);
  std::string error;
  std::vector<float> out(input.numel());
  std::thread waiting([&] {
    Status s = group.rank(0).allReduceSum(input.floats().data(), out.data(),
                                          input.numel());
    error = s.message();
  });
  group.abort("rank 1 failed: no such weight");
  waiting.join();
  EXPECT_EQ(error, "rank 0, all_reduce: rank 1 failed: no such weight");

  // A rank that never comes: the others time out, naming it.
  runtime::LoopbackGroup slow(3, std::chrono::milliseconds(50));
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> gathered(3 * input.numel());
      Status s = slow.rank(r).allGather(input.floats().data(), gathered.data(),
                                        kTokens, kHidden);
      errors[r] = s.message();
    });
  for (std::thread &t : threads)
    t.join();
  for (const std::string &e : errors)
    EXPECT_NE(e.find("waiting for rank(s) 2"), std::string::npos) << e;

  // Ranks that reach different collectives (plans built differently) are
  // told so instead of exchanging mismatched buffers.
  runtime::LoopbackGroup disagree(2);
  std::vector<std::string> mismatch(2);
  std::vector<float> sum(input.numel()), gathered(2 * input.numel());
  std::thread other([&] {
    mismatch[1] =
        disagree.rank(1)
            .allGather(input.floats().data(), gathered.data(), kTokens, kHidden)
            .message();
  });
  mismatch[0] =
      disagree.rank(0)
          .allReduceSum(input.floats().data(), sum.data(), input.numel())
          .message();
  other.join();
  for (const std::string &e : mismatch)
    EXPECT_NE(e.find("ranks disagree: "), std::string::npos) << e;
}

TEST(TensorParallelRuntime, RankArtifactsLoadOnlyWithTheirRanks) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tp-artifacts", dir));
  pipeline::Options options;
  options.checkpoint =
      std::string(DAYBREAK_SOURCE_DIR) + "/test/fixtures/deepseek_v32_tp_fp8";
  options.output = (dir + "/model.daybreak").str();
  options.maxSeqLen = 64;
  options.maxBatch = 2;
  options.tensorParallel = 2;
  std::string log;
  llvm::raw_string_ostream logStream(log);
  llvm::Error compiled = pipeline::compile(options, llvm::nulls(), logStream);
  ASSERT_FALSE(compiled) << llvm::toString(std::move(compiled)) << log;
  std::string rank0 = (dir + "/model.rank0-of-2.daybreak").str();

  // Alone, or as the wrong rank, or in a group of another size: refused.
  runtime::LoadOptions load;
  load.threads = 1;
  auto alone = runtime::Model::load(rank0, load);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.error().message(),
            rank0 + ": rank 0 of 2 ranks, loaded alone (run "
                    "it with the other ranks' artifacts: runtime::runRanks, "
                    "as daybreak-run does)");
  runtime::LoopbackGroup two(2), three(3);
  load.communicator = &two.rank(1);
  auto wrongRank = runtime::Model::load(rank0, load);
  ASSERT_FALSE(wrongRank.ok());
  EXPECT_EQ(wrongRank.error().message(),
            rank0 + ": the artifact of rank 0, loaded as rank 1");
  load.communicator = &three.rank(0);
  auto wrongSize = runtime::Model::load(rank0, load);
  ASSERT_FALSE(wrongSize.ok());
  EXPECT_EQ(wrongSize.error().message(),
            rank0 + ": rank 0 of 2 ranks, loaded as one of 3");

  // The siblings daybreak-compile wrote, from either rank's manifest.
  auto file = artifact::ArtifactFile::open(rank0);
  ASSERT_TRUE(file.ok()) << file.error().message();
  auto paths = runtime::rankArtifacts(rank0, file->manifest());
  ASSERT_TRUE(paths.ok()) << paths.error().message();
  EXPECT_EQ(*paths, std::vector<std::string>(
                        {rank0, (dir + "/model.rank1-of-2.daybreak").str()}));
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
