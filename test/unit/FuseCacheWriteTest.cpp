//===- FuseCacheWriteTest.cpp - lm-fuse-cache-write against the evaluator -===//
//
// DeepSeek-V3.2's two key rows as the pipeline leaves them (the latent row
// [rms_norm(c_kv) | rope(k_pe)] as lm-narrow-rope narrows it, from a
// projection fused with the indexer key's; the indexer key layer-normed and
// rotated), written to batched caches, evaluated before and after
// lm-fuse-cache-write on random data: the same caches bit for bit, with
// both writes given a prologue and no norm or rope left.
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

constexpr int64_t kTokens = 6;

// kv: columns [8, 88) of the fused projection [T, 120] (latent 64 + rope 16),
// the indexer key its columns [88, 120).
constexpr const char *kModule = R"mlir(
  func.func @f(%proj: tensor<?x120xf32>, %pos: tensor<?xi32>,
               %seq: tensor<?xi32>, %latent: tensor<2x16x80xf32>,
               %keys: tensor<2x16x32xf32>, %w: tensor<64xbf16>,
               %kw: tensor<32xf32>, %kb: tensor<32xbf16>)
      -> (tensor<2x16x80xf32>, tensor<2x16x32xf32>) {
    %c0 = arith.constant 0 : index
    %t = tensor.dim %proj, %c0 : tensor<?x120xf32>
    %head = tensor.extract_slice %proj[0, 8] [%t, 64] [1, 1]
        : tensor<?x120xf32> to tensor<?x64xf32>
    %n = lm.rms_norm %head, %w {eps = 1.0e-06 : f64}
        : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
    %tail = tensor.extract_slice %proj[0, 72] [%t, 16] [1, 1]
        : tensor<?x120xf32> to tensor<?x16xf32>
    %r = lm.rope %tail, %pos interleaved {offset = 0 : i64, dim = 16 : i64,
        theta = 1.0e+04 : f64,
        yarn = #lm.yarn<factor = 40.0, original_max_positions = 64,
                        beta_fast = 32.0, beta_slow = 1.0,
                        attention_factor = 1.0, truncate = true>}
        : (tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
    %row = tensor.concat dim(1) %n, %r
        : (tensor<?x64xf32>, tensor<?x16xf32>) -> tensor<?x80xf32>
    %l1 = lm.cache_write %latent, %row, %pos sequences %seq
        : (tensor<2x16x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>)
        -> tensor<2x16x80xf32>
    %k = tensor.extract_slice %proj[0, 88] [%t, 32] [1, 1]
        : tensor<?x120xf32> to tensor<?x32xf32>
    %kn = lm.layer_norm %k, %kw bias %kb {eps = 1.0e-06 : f64}
        : (tensor<?x32xf32>, tensor<32xf32>, tensor<32xbf16>) -> tensor<?x32xf32>
    %kr = lm.rope %kn, %pos half_split {offset = 0 : i64, dim = 16 : i64,
        theta = 1.0e+04 : f64} : (tensor<?x32xf32>, tensor<?xi32>) -> tensor<?x32xf32>
    %k1 = lm.cache_write %keys, %kr, %pos sequences %seq
        : (tensor<2x16x32xf32>, tensor<?x32xf32>, tensor<?xi32>, tensor<?xi32>)
        -> tensor<2x16x32xf32>
    return %l1, %k1 : tensor<2x16x80xf32>, tensor<2x16x32xf32>
  })mlir";

TEST(FuseCacheWrite, ProloguesWriteTheSameRows) {
  std::mt19937 rng(20261206);
  MLIRContext context(testutil::lmTestDialects());
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &context);
  ASSERT_TRUE(!!module);

  auto random = [&](int64_t count) {
    return testutil::normalFloats(rng, count);
  };
  // Two sequences; a skipped token (slot -1) and a row written twice.
  std::vector<int64_t> positions = {0, 5, 15, -1, 5, 9};
  std::vector<int64_t> sequences = {0, 1, 1, 0, 1, 0};
  std::vector<ref::Tensor> inputs = {
      ref::Tensor::fromFloats({kTokens, 120}, random(kTokens * 120)),
      ref::Tensor::fromInts({kTokens}, positions),
      ref::Tensor::fromInts({kTokens}, sequences),
      ref::Tensor::fromFloats({2, 16, 80}, random(2 * 16 * 80)),
      ref::Tensor::fromFloats({2, 16, 32}, random(2 * 16 * 32)),
      ref::Tensor::fromFloats({64}, random(64), ref::ElementType::BF16),
      ref::Tensor::fromFloats({32}, random(32)),
      ref::Tensor::fromFloats({32}, random(32), ref::ElementType::BF16)};
  auto before = ref::Evaluator(*module).run("f", inputs);
  ASSERT_TRUE(bool(before)) << llvm::toString(before.takeError());

  PassManager pm(&context);
  pm.addNestedPass<func::FuncOp>(createLmFuseCacheWrite());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  ASSERT_TRUE(succeeded(verify(*module)));
  int prologues = 0, others = 0;
  module->walk([&](Operation *op) {
    if (auto write = dyn_cast<lm::CacheWriteOp>(op))
      prologues += write.hasPrologue();
    others += isa<lm::RmsNormOp, lm::LayerNormOp, lm::RopeOp>(op);
  });
  EXPECT_EQ(prologues, 2);
  EXPECT_EQ(others, 0);

  auto after = ref::Evaluator(*module).run("f", inputs);
  ASSERT_TRUE(bool(after)) << llvm::toString(after.takeError());
  testutil::expectSameOutputs(*before, *after);
}

} // namespace
