//===- FuseQueryRopeTest.cpp - lm-fuse-query-rope against the evaluator ---===//
//
// DeepSeek-V3.2's indexer query as the builder leaves it (the projection's
// rows seen as [T, H, D] heads, rotated over their first columns with YaRN,
// then scored against a batched key cache with causal bounds), and a second
// indexer whose rotated query has another reader, evaluated before and
// after lm-fuse-query-rope on random data: the same scores bit for bit,
// the first rope fused into its indexer and the second left as it is.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Evaluator.h"
#include "passes/Passes.h"
#include "test/unit/PassEquivalence.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "gtest/gtest.h"

#include <random>

using namespace mlir;
using namespace daybreak;
namespace {

constexpr int64_t kTokens = 5;

// q: [T, 4 x 24] heads of 24, the first 16 columns rotated (half-split,
// YaRN); q2 [T, 3, 8] rotated interleaved over [2, 8) and also returned.
constexpr const char *kModule = R"mlir(
  func.func @f(%q: tensor<?x96xf32>, %q2: tensor<?x3x8xf32>,
               %pos: tensor<?xi32>, %seq: tensor<?xi32>,
               %bounds: tensor<?xi32>, %keys: tensor<2x16x24xf32>,
               %keys2: tensor<2x16x8xf32>, %w: tensor<?x4xf32>,
               %w2: tensor<?x3xf32>)
      -> (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x3x8xf32>) {
    %c0 = arith.constant 0 : index
    %t = tensor.dim %q, %c0 : tensor<?x96xf32>
    %heads = tensor.expand_shape %q [[0], [1, 2]] output_shape [%t, 4, 24]
        : tensor<?x96xf32> into tensor<?x4x24xf32>
    %r = lm.rope %heads, %pos half_split {offset = 0 : i64, dim = 16 : i64,
        theta = 1.0e+04 : f64,
        yarn = #lm.yarn<factor = 40.0, original_max_positions = 4,
                        beta_fast = 32.0, beta_slow = 1.0,
                        attention_factor = 1.1, truncate = true>}
        : (tensor<?x4x24xf32>, tensor<?xi32>) -> tensor<?x4x24xf32>
    %s = lm.dsa_indexer_scores %r, %keys, %w sequences %seq bounds %bounds
        {scale = 0.25 : f64}
        : (tensor<?x4x24xf32>, tensor<2x16x24xf32>, tensor<?x4xf32>,
           tensor<?xi32>, tensor<?xi32>) -> tensor<?x16xf32>
    %r2 = lm.rope %q2, %pos interleaved {offset = 2 : i64, dim = 6 : i64,
        theta = 5.0e+02 : f64}
        : (tensor<?x3x8xf32>, tensor<?xi32>) -> tensor<?x3x8xf32>
    %s2 = lm.dsa_indexer_scores %r2, %keys2, %w2 sequences %seq
        {scale = 0.5 : f64}
        : (tensor<?x3x8xf32>, tensor<2x16x8xf32>, tensor<?x3xf32>,
           tensor<?xi32>) -> tensor<?x16xf32>
    return %s, %s2, %r2 : tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x3x8xf32>
  })mlir";

TEST(FuseQueryRope, RotatedQueriesScoreTheSame) {
  std::mt19937 rng(20261206);
  MLIRContext context(testutil::lmTestDialects());
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &context);
  ASSERT_TRUE(!!module);

  auto random = [&](int64_t count) {
    return testutil::normalFloats(rng, count);
  };
  // Two sequences, positions far past YaRN's original context.
  std::vector<int64_t> positions = {0, 15, 7, 3, 1000};
  std::vector<int64_t> sequences = {0, 1, 1, 0, 0};
  std::vector<int64_t> bounds = {1, 16, 8, 4, 16};
  std::vector<ref::Tensor> inputs = {
      ref::Tensor::fromFloats({kTokens, 96}, random(kTokens * 96)),
      ref::Tensor::fromFloats({kTokens, 3, 8}, random(kTokens * 24)),
      ref::Tensor::fromInts({kTokens}, positions),
      ref::Tensor::fromInts({kTokens}, sequences),
      ref::Tensor::fromInts({kTokens}, bounds),
      ref::Tensor::fromFloats({2, 16, 24}, random(2 * 16 * 24)),
      ref::Tensor::fromFloats({2, 16, 8}, random(2 * 16 * 8)),
      ref::Tensor::fromFloats({kTokens, 4}, random(kTokens * 4)),
      ref::Tensor::fromFloats({kTokens, 3}, random(kTokens * 3))};
  auto before = ref::Evaluator(*module).run("f", inputs);
  ASSERT_TRUE(bool(before)) << llvm::toString(before.takeError());

  PassManager pm(&context);
  pm.addNestedPass<func::FuncOp>(createLmFuseQueryRope());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  ASSERT_TRUE(succeeded(verify(*module)));
  int prologues = 0, ropes = 0;
  module->walk([&](Operation *op) {
    if (auto scores = dyn_cast<lm::DsaIndexerScoresOp>(op))
      prologues += bool(scores.getPositions());
    ropes += isa<lm::RopeOp>(op);
  });
  EXPECT_EQ(prologues, 1);
  EXPECT_EQ(ropes, 1); // %r2 has another reader

  auto after = ref::Evaluator(*module).run("f", inputs);
  ASSERT_TRUE(bool(after)) << llvm::toString(after.takeError());
  testutil::expectSameOutputs(*before, *after);
}

} // namespace
