//===- FuseGateUpTest.cpp - lm-fuse-gate-up against the evaluator ---------===//
//
// A checkpoint of random weights in each form the pass stacks (FP8 experts
// with 128 x 128 block scales, FP8 dense weights of two row blocks, bf16
// dense weights) and one it must leave (FP8 weights whose row block would
// straddle the halves), a module of SwiGLUs over them, and the reference
// evaluator on random inputs before and after the pass: the stacked weights
// are what the artifact will hold, read through their interleaved sources,
// and every output is bit for bit what the separate projections computed.
//
//===----------------------------------------------------------------------===//

#include "compiler/importers/Checkpoint.h"
#include "compiler/importers/WeightLoader.h"
#include "compiler/reference/Evaluator.h"
#include "dialects/lm/LmDialect.h"
#include "passes/Passes.h"
#include "test/unit/PassEquivalence.h"
#include "test/unit/SafetensorsWriter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"

#include "gtest/gtest.h"

#include <random>

using namespace mlir;
using namespace daybreak;
using testutil::randomBf16s;
using testutil::randomBlockScales;
using testutil::randomE4m3Codes;
using testutil::RawTensor;

namespace {

constexpr int64_t kHidden = 160, kExperts = 3, kTopK = 2, kTokens = 5;

const char *kModule = R"mlir(
  lm.weight @eg : tensor<3x128x160xf8E4M3FN> {sources = ["e.0.gate", "e.1.gate", "e.2.gate"]}
  lm.weight @egs : tensor<3x1x2xf32> {sources = ["e.0.gate_s", "e.1.gate_s", "e.2.gate_s"]}
  lm.weight @eu : tensor<3x128x160xf8E4M3FN> {sources = ["e.0.up", "e.1.up", "e.2.up"]}
  lm.weight @eus : tensor<3x1x2xf32> {sources = ["e.0.up_s", "e.1.up_s", "e.2.up_s"]}
  lm.weight @dg : tensor<256x160xf8E4M3FN> {sources = ["d.gate"]}
  lm.weight @dgs : tensor<2x2xf32> {sources = ["d.gate_s"]}
  lm.weight @du : tensor<256x160xf8E4M3FN> {sources = ["d.up"]}
  lm.weight @dus : tensor<2x2xf32> {sources = ["d.up_s"]}
  lm.weight @sg : tensor<96x160xf8E4M3FN> {sources = ["s.gate"]}
  lm.weight @sgs : tensor<1x2xf32> {sources = ["s.gate_s"]}
  lm.weight @su : tensor<96x160xf8E4M3FN> {sources = ["s.up"]}
  lm.weight @sus : tensor<1x2xf32> {sources = ["s.up_s"]}
  lm.weight @pg : tensor<40x160xbf16> {sources = ["p.gate"]}
  lm.weight @pu : tensor<40x160xbf16> {sources = ["p.up"]}
  func.func @f(%x: tensor<?x160xf32>, %idx: tensor<?x2xi32>)
      -> (tensor<?x2x128xf32>, tensor<?x256xf32>, tensor<?x96xf32>, tensor<?x40xf32>) {
    %eg8 = lm.weight_ref @eg : tensor<3x128x160xf8E4M3FN>
    %egs = lm.weight_ref @egs : tensor<3x1x2xf32>
    %egw = lm.fp8_dequant %eg8, %egs {block_size = array<i64: 128, 128>}
        : (tensor<3x128x160xf8E4M3FN>, tensor<3x1x2xf32>) -> tensor<3x128x160xf32>
    %eu8 = lm.weight_ref @eu : tensor<3x128x160xf8E4M3FN>
    %eus = lm.weight_ref @eus : tensor<3x1x2xf32>
    %euw = lm.fp8_dequant %eu8, %eus {block_size = array<i64: 128, 128>}
        : (tensor<3x128x160xf8E4M3FN>, tensor<3x1x2xf32>) -> tensor<3x128x160xf32>
    %eg = lm.expert_matmul %x, %egw, %idx
        : (tensor<?x160xf32>, tensor<3x128x160xf32>, tensor<?x2xi32>) -> tensor<?x2x128xf32>
    %eu = lm.expert_matmul %x, %euw, %idx
        : (tensor<?x160xf32>, tensor<3x128x160xf32>, tensor<?x2xi32>) -> tensor<?x2x128xf32>
    %e = lm.swiglu %eg, %eu : (tensor<?x2x128xf32>, tensor<?x2x128xf32>) -> tensor<?x2x128xf32>

    %dg8 = lm.weight_ref @dg : tensor<256x160xf8E4M3FN>
    %dgs = lm.weight_ref @dgs : tensor<2x2xf32>
    %du8 = lm.weight_ref @du : tensor<256x160xf8E4M3FN>
    %dus = lm.weight_ref @dus : tensor<2x2xf32>
    %dg = lm.fp8_matmul %x, %dg8, %dgs {block_size = array<i64: 128, 128>}
        : (tensor<?x160xf32>, tensor<256x160xf8E4M3FN>, tensor<2x2xf32>) -> tensor<?x256xf32>
    %du = lm.fp8_matmul %x, %du8, %dus {block_size = array<i64: 128, 128>}
        : (tensor<?x160xf32>, tensor<256x160xf8E4M3FN>, tensor<2x2xf32>) -> tensor<?x256xf32>
    %d = lm.swiglu %dg, %du : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>

    %sg8 = lm.weight_ref @sg : tensor<96x160xf8E4M3FN>
    %sgs = lm.weight_ref @sgs : tensor<1x2xf32>
    %su8 = lm.weight_ref @su : tensor<96x160xf8E4M3FN>
    %sus = lm.weight_ref @sus : tensor<1x2xf32>
    %sg = lm.fp8_matmul %x, %sg8, %sgs {block_size = array<i64: 128, 128>}
        : (tensor<?x160xf32>, tensor<96x160xf8E4M3FN>, tensor<1x2xf32>) -> tensor<?x96xf32>
    %su = lm.fp8_matmul %x, %su8, %sus {block_size = array<i64: 128, 128>}
        : (tensor<?x160xf32>, tensor<96x160xf8E4M3FN>, tensor<1x2xf32>) -> tensor<?x96xf32>
    %s = lm.swiglu %sg, %su : (tensor<?x96xf32>, tensor<?x96xf32>) -> tensor<?x96xf32>

    %pgw = lm.weight_ref @pg : tensor<40x160xbf16>
    %puw = lm.weight_ref @pu : tensor<40x160xbf16>
    %pg = lm.matmul %x, %pgw : (tensor<?x160xf32>, tensor<40x160xbf16>) -> tensor<?x40xf32>
    %pu = lm.matmul %x, %puw : (tensor<?x160xf32>, tensor<40x160xbf16>) -> tensor<?x40xf32>
    %p = lm.swiglu %pg, %pu : (tensor<?x40xf32>, tensor<?x40xf32>) -> tensor<?x40xf32>
    return %e, %d, %s, %p : tensor<?x2x128xf32>, tensor<?x256xf32>, tensor<?x96xf32>, tensor<?x40xf32>
  })mlir";

TEST(FuseGateUp, StackedProjectionsComputeTheSameValues) {
  std::mt19937 rng(20261204);
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("fuse-gate-up", dir));
  std::vector<RawTensor> tensors;
  for (int64_t e = 0; e < kExperts; ++e)
    for (const char *which : {"gate", "up"}) {
      std::string name = "e." + std::to_string(e) + "." + which;
      tensors.push_back({name,
                         "F8_E4M3",
                         {128, kHidden},
                         randomE4m3Codes(rng, 128 * kHidden)});
      tensors.push_back(
          {name + "_s", "F32", {1, 2}, randomBlockScales(rng, 2)});
    }
  for (const char *which : {"gate", "up"}) {
    tensors.push_back({std::string("d.") + which,
                       "F8_E4M3",
                       {256, kHidden},
                       randomE4m3Codes(rng, 256 * kHidden)});
    tensors.push_back({std::string("d.") + which + "_s",
                       "F32",
                       {2, 2},
                       randomBlockScales(rng, 4)});
    tensors.push_back({std::string("s.") + which,
                       "F8_E4M3",
                       {96, kHidden},
                       randomE4m3Codes(rng, 96 * kHidden)});
    tensors.push_back({std::string("s.") + which + "_s",
                       "F32",
                       {1, 2},
                       randomBlockScales(rng, 2)});
    tensors.push_back({std::string("p.") + which,
                       "BF16",
                       {40, kHidden},
                       randomBf16s(rng, 40 * kHidden)});
  }
  testutil::writeSafetensors((dir + "/model.safetensors").str(), tensors);
  auto checkpoint = importers::Checkpoint::open(dir.str().str());
  ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
  ref::WeightProvider weights = ref::checkpointWeights(*checkpoint);

  MLIRContext context(testutil::lmTestDialects());
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &context);
  ASSERT_TRUE(!!module);

  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(kTokens * kHidden);
  for (float &v : x)
    v = normal(rng);
  // An empty slot (-1) and an expert picked by two tokens.
  std::vector<int64_t> idx = {0, 2, 1, -1, 2, 0, 1, 2, 0, 1};
  std::vector<ref::Tensor> inputs = {
      ref::Tensor::fromFloats({kTokens, kHidden}, x),
      ref::Tensor::fromInts({kTokens, kTopK}, idx)};
  auto before = ref::Evaluator(*module, weights).run("f", inputs);
  ASSERT_TRUE(bool(before)) << llvm::toString(before.takeError());

  PassManager pm(&context);
  pm.addPass(createLmFuseGateUp());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  ASSERT_TRUE(succeeded(verify(*module)));
  // Experts, FP8 dense and bf16 dense stack; the straddling pair does not.
  int experts = 0, fp8 = 0, plain = 0;
  module->walk([&](Operation *op) {
    experts += isa<lm::ExpertMatmulOp>(op);
    fp8 += isa<lm::Fp8MatmulOp>(op);
    plain += isa<lm::MatmulOp>(op);
  });
  EXPECT_EQ(experts, 1);
  EXPECT_EQ(fp8, 3);
  EXPECT_EQ(plain, 1);
  auto stacked = module->lookupSymbol<lm::WeightOp>("eg+eu");
  ASSERT_TRUE(stacked);
  EXPECT_EQ(cast<RankedTensorType>(stacked.getType()).getShape(),
            ArrayRef<int64_t>({kExperts, 256, kHidden}));
  EXPECT_FALSE(module->lookupSymbol<lm::WeightOp>("eg"));
  EXPECT_TRUE(module->lookupSymbol<lm::WeightOp>("sg"));

  auto after = ref::Evaluator(*module, weights).run("f", inputs);
  ASSERT_TRUE(bool(after)) << llvm::toString(after.takeError());
  testutil::expectSameOutputs(*before, *after);
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
