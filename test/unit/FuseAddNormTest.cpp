//===- FuseAddNormTest.cpp - lm-fuse-add-norm against the evaluator -------===//
//
// Two blocks' residual stream as the builders emit it (an update, the norm
// of the next sublayer, another update, the final norm), evaluated before
// and after lm-fuse-add-norm on random data: the same outputs bit for bit,
// with both norms fused, their adds gone, and a bf16 norm weight.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Evaluator.h"
#include "passes/Passes.h"
#include "test/unit/PassEquivalence.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
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

constexpr int64_t kTokens = 5, kHidden = 96;

constexpr const char *kModule = R"mlir(
  func.func @f(%x: tensor<?x96xf32>, %attn: tensor<?x96xf32>,
               %w1: tensor<96xf32>, %w2: tensor<96xbf16>)
      -> (tensor<?x96xf32>, tensor<?x96xf32>, tensor<?x96xf32>) {
    %h = arith.addf %x, %attn : tensor<?x96xf32>
    %n = lm.rms_norm %h, %w1 {eps = 1.0e-06 : f64}
        : (tensor<?x96xf32>, tensor<96xf32>) -> tensor<?x96xf32>
    %m = lm.silu %n : tensor<?x96xf32>
    %h2 = arith.addf %h, %m : tensor<?x96xf32>
    %y = lm.rms_norm %h2, %w2 {eps = 1.0e-05 : f64}
        : (tensor<?x96xf32>, tensor<96xbf16>) -> tensor<?x96xf32>
    return %n, %h2, %y : tensor<?x96xf32>, tensor<?x96xf32>, tensor<?x96xf32>
  })mlir";

TEST(FuseAddNorm, FusedNormsComputeTheSameValues) {
  std::mt19937 rng(20261205);
  MLIRContext context(testutil::lmTestDialects());
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &context);
  ASSERT_TRUE(!!module);

  auto random = [&](int64_t count) {
    return testutil::normalFloats(rng, count);
  };
  std::vector<ref::Tensor> inputs = {
      ref::Tensor::fromFloats({kTokens, kHidden}, random(kTokens * kHidden)),
      ref::Tensor::fromFloats({kTokens, kHidden}, random(kTokens * kHidden)),
      ref::Tensor::fromFloats({kHidden}, random(kHidden)),
      ref::Tensor::fromFloats({kHidden}, random(kHidden),
                              ref::ElementType::BF16)};
  auto before = ref::Evaluator(*module).run("f", inputs);
  ASSERT_TRUE(bool(before)) << llvm::toString(before.takeError());

  PassManager pm(&context);
  LmFuseAddNormOptions options;
  options.target = "cpu";
  pm.addNestedPass<func::FuncOp>(createLmFuseAddNorm(options));
  ASSERT_TRUE(succeeded(pm.run(*module)));
  ASSERT_TRUE(succeeded(verify(*module)));
  int fused = 0, norms = 0, adds = 0;
  module->walk([&](Operation *op) {
    fused += isa<lm::AddRmsNormOp>(op);
    norms += isa<lm::RmsNormOp>(op);
    adds += isa<arith::AddFOp>(op);
  });
  EXPECT_EQ(fused, 2);
  EXPECT_EQ(norms, 0);
  EXPECT_EQ(adds, 0);

  auto after = ref::Evaluator(*module).run("f", inputs);
  ASSERT_TRUE(bool(after)) << llvm::toString(after.takeError());
  testutil::expectSameOutputs(*before, *after);
}

} // namespace
