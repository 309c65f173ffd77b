//===- FuseProjectionsTest.cpp - lm-fuse-projections against the evaluator ===//
//
// A checkpoint of random weights shaped as DeepSeek-V3.2's attention input
// projections at small size (FP8 q_a of two 128-row blocks, the indexer's wk
// of one, kv_a of a partial block, each with its block scales), two bf16
// projections with biases, and a module reading each through kernels that
// take column views (rms_norm, layer_norm with its bias, rope); the
// reference evaluator on random inputs before and after lm-fuse-projections
// and lm-narrow-rope: the stacked weights are read through their sources of
// unequal rows (the weight loader concatenates them, as the artifact
// does), and every output is bit for bit what the separate projections
// computed.
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

constexpr int64_t kHidden = 160, kTokens = 5;

const char *kModule = R"mlir(
  lm.weight @qa : tensor<256x160xf8E4M3FN> {sources = ["q_a"]}
  lm.weight @qas : tensor<2x2xf32> {sources = ["q_a_s"]}
  lm.weight @kva : tensor<80x160xf8E4M3FN> {sources = ["kv_a"]}
  lm.weight @kvas : tensor<1x2xf32> {sources = ["kv_a_s"]}
  lm.weight @wk : tensor<128x160xf8E4M3FN> {sources = ["wk"]}
  lm.weight @wks : tensor<1x2xf32> {sources = ["wk_s"]}
  lm.weight @p : tensor<40x160xbf16> {sources = ["p"]}
  lm.weight @pb : tensor<40xbf16> {sources = ["p_b"]}
  lm.weight @q : tensor<24x160xbf16> {sources = ["q"]}
  lm.weight @qb : tensor<24xbf16> {sources = ["q_b"]}
  lm.weight @n256 : tensor<256xbf16> {sources = ["n256"]}
  lm.weight @n64 : tensor<64xbf16> {sources = ["n64"]}
  lm.weight @n128 : tensor<128xbf16> {sources = ["n128"]}
  lm.weight @b128 : tensor<128xbf16> {sources = ["b128"]}
  lm.weight @n40 : tensor<40xbf16> {sources = ["n40"]}
  lm.weight @n24 : tensor<24xbf16> {sources = ["n24"]}
  func.func @f(%x: tensor<?x160xf32>, %pos: tensor<?xi32>)
      -> (tensor<?x256xf32>, tensor<?x64xf32>, tensor<?x16xf32>,
          tensor<?x128xf32>, tensor<?x40xf32>, tensor<?x24xf32>) {
    %c0 = arith.constant 0 : index
    %qa = lm.weight_ref @qa : tensor<256x160xf8E4M3FN>
    %qas = lm.weight_ref @qas : tensor<2x2xf32>
    %q = lm.fp8_matmul %x, %qa, %qas {block_size = array<i64: 128, 128>}
        : (tensor<?x160xf32>, tensor<256x160xf8E4M3FN>, tensor<2x2xf32>) -> tensor<?x256xf32>
    %n256 = lm.weight_ref @n256 : tensor<256xbf16>
    %qn = lm.rms_norm %q, %n256 {eps = 1.0e-6 : f64}
        : (tensor<?x256xf32>, tensor<256xbf16>) -> tensor<?x256xf32>
    %kva = lm.weight_ref @kva : tensor<80x160xf8E4M3FN>
    %kvas = lm.weight_ref @kvas : tensor<1x2xf32>
    %kv = lm.fp8_matmul %x, %kva, %kvas {block_size = array<i64: 128, 128>}
        : (tensor<?x160xf32>, tensor<80x160xf8E4M3FN>, tensor<1x2xf32>) -> tensor<?x80xf32>
    %t = tensor.dim %kv, %c0 : tensor<?x80xf32>
    %latent = tensor.extract_slice %kv[0, 0] [%t, 64] [1, 1]
        : tensor<?x80xf32> to tensor<?x64xf32>
    %n64 = lm.weight_ref @n64 : tensor<64xbf16>
    %ln = lm.rms_norm %latent, %n64 {eps = 1.0e-6 : f64}
        : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
    %r = lm.rope %kv, %pos interleaved {offset = 64 : i64, dim = 16 : i64, theta = 10000.0 : f64}
        : (tensor<?x80xf32>, tensor<?xi32>) -> tensor<?x80xf32>
    %t2 = tensor.dim %r, %c0 : tensor<?x80xf32>
    %pe = tensor.extract_slice %r[0, 64] [%t2, 16] [1, 1]
        : tensor<?x80xf32> to tensor<?x16xf32>
    %wk = lm.weight_ref @wk : tensor<128x160xf8E4M3FN>
    %wks = lm.weight_ref @wks : tensor<1x2xf32>
    %k = lm.fp8_matmul %x, %wk, %wks {block_size = array<i64: 128, 128>}
        : (tensor<?x160xf32>, tensor<128x160xf8E4M3FN>, tensor<1x2xf32>) -> tensor<?x128xf32>
    %n128 = lm.weight_ref @n128 : tensor<128xbf16>
    %b128 = lm.weight_ref @b128 : tensor<128xbf16>
    %kn = lm.layer_norm %k, %n128 bias %b128 {eps = 1.0e-6 : f64}
        : (tensor<?x128xf32>, tensor<128xbf16>, tensor<128xbf16>) -> tensor<?x128xf32>
    %pw = lm.weight_ref @p : tensor<40x160xbf16>
    %pb = lm.weight_ref @pb : tensor<40xbf16>
    %yp = lm.matmul %x, %pw bias %pb
        : (tensor<?x160xf32>, tensor<40x160xbf16>, tensor<40xbf16>) -> tensor<?x40xf32>
    %n40 = lm.weight_ref @n40 : tensor<40xbf16>
    %zp = lm.rms_norm %yp, %n40 {eps = 1.0e-6 : f64}
        : (tensor<?x40xf32>, tensor<40xbf16>) -> tensor<?x40xf32>
    %qw = lm.weight_ref @q : tensor<24x160xbf16>
    %qb = lm.weight_ref @qb : tensor<24xbf16>
    %yq = lm.matmul %x, %qw bias %qb
        : (tensor<?x160xf32>, tensor<24x160xbf16>, tensor<24xbf16>) -> tensor<?x24xf32>
    %n24 = lm.weight_ref @n24 : tensor<24xbf16>
    %zq = lm.rms_norm %yq, %n24 {eps = 1.0e-6 : f64}
        : (tensor<?x24xf32>, tensor<24xbf16>) -> tensor<?x24xf32>
    return %qn, %ln, %pe, %kn, %zp, %zq
        : tensor<?x256xf32>, tensor<?x64xf32>, tensor<?x16xf32>,
          tensor<?x128xf32>, tensor<?x40xf32>, tensor<?x24xf32>
  })mlir";

TEST(FuseProjections, StackedProjectionsComputeTheSameValues) {
  std::mt19937 rng(20261205);
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("fuse-projections", dir));
  std::vector<RawTensor> tensors;
  auto fp8 = [&](const char *name, int64_t rows, int64_t blocks) {
    tensors.push_back({name,
                       "F8_E4M3",
                       {rows, kHidden},
                       randomE4m3Codes(rng, rows * kHidden)});
    tensors.push_back({std::string(name) + "_s",
                       "F32",
                       {blocks, 2},
                       randomBlockScales(rng, blocks * 2)});
  };
  fp8("q_a", 256, 2);
  fp8("kv_a", 80, 1);
  fp8("wk", 128, 1);
  for (auto [name, rows] :
       {std::pair<const char *, int64_t>{"p", 40}, {"q", 24}}) {
    tensors.push_back({name,
                       "BF16",
                       {rows, kHidden},
                       randomBf16s(rng, rows * kHidden, 0.0f)});
    tensors.push_back({std::string(name) + "_b",
                       "BF16",
                       {rows},
                       randomBf16s(rng, rows, 0.0f)});
  }
  for (auto [name, size] : {std::pair<const char *, int64_t>{"n256", 256},
                            {"n64", 64},
                            {"n128", 128},
                            {"b128", 128},
                            {"n40", 40},
                            {"n24", 24}})
    tensors.push_back({name, "BF16", {size}, randomBf16s(rng, size, 1.0f)});
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
  std::vector<int64_t> positions = {0, 5, 17, 300, 4095};
  std::vector<ref::Tensor> inputs = {
      ref::Tensor::fromFloats({kTokens, kHidden}, x),
      ref::Tensor::fromInts({kTokens}, positions)};
  auto before = ref::Evaluator(*module, weights).run("f", inputs);
  ASSERT_TRUE(bool(before)) << llvm::toString(before.takeError());

  PassManager pm(&context);
  pm.addPass(createLmFuseProjections());
  pm.addNestedPass<func::FuncOp>(createLmNarrowRope());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  ASSERT_TRUE(succeeded(verify(*module)));
  // One FP8 projection (q_a | wk | kv_a) and one bf16 one (p | q).
  int fp8Matmuls = 0, matmuls = 0;
  module->walk([&](Operation *op) {
    fp8Matmuls += isa<lm::Fp8MatmulOp>(op);
    matmuls += isa<lm::MatmulOp>(op);
  });
  EXPECT_EQ(fp8Matmuls, 1);
  EXPECT_EQ(matmuls, 1);
  auto stacked = module->lookupSymbol<lm::WeightOp>("qa+wk+kva");
  ASSERT_TRUE(stacked);
  EXPECT_EQ(cast<RankedTensorType>(stacked.getType()).getShape(),
            ArrayRef<int64_t>({464, kHidden}));
  EXPECT_TRUE(module->lookupSymbol<lm::WeightOp>("pb+qb"));
  EXPECT_FALSE(module->lookupSymbol<lm::WeightOp>("kva"));

  auto after = ref::Evaluator(*module, weights).run("f", inputs);
  ASSERT_TRUE(bool(after)) << llvm::toString(after.takeError());
  testutil::expectSameOutputs(*before, *after);
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
