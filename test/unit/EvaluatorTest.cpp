//===- EvaluatorTest.cpp - Tests of the lm IR interpreter -----------------===//
//
// The kernels have their own tests (reference/*Test.cpp); these check what
// the interpreter adds: attribute plumbing, rounding to declared types,
// upstream ops, calls, and error reporting.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Evaluator.h"
#include "compiler/reference/Kernels.h"
#include "dialects/lm/LmDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace mlir;
using namespace daybreak;
using namespace daybreak::ref;

namespace {
class EvaluatorTest : public ::testing::Test {
protected:
  EvaluatorTest() {
    DialectRegistry registry;
    registry.insert<lm::LmDialect, func::FuncDialect, arith::ArithDialect,
                    tensor::TensorDialect>();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Parses `source` and runs @main on `args`.
  llvm::Expected<std::vector<Tensor>> run(llvm::StringRef source,
                                          std::vector<Tensor> args) {
    module = parseSourceString<ModuleOp>(source, &context);
    if (!module)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "parse failed");
    Evaluator evaluator(*module);
    return evaluator.run("main", args);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

Tensor floats(std::vector<int64_t> shape, std::vector<float> values) {
  return Tensor::fromFloats(std::move(shape), std::move(values));
}
} // namespace

// rms_norm of [3, 4] with weight [1, 2]: rms = sqrt((9 + 16) / 2) = 3.5355339
// -> [0.8485281, 2.2627417]; the bf16 result rounds each to 8 significant
// bits: 0.8485281 -> 0.84765625, 2.2627417 -> 2.265625.
TEST_F(EvaluatorTest, RoundsResultsToTheDeclaredType) {
  auto out = run(R"mlir(
    func.func @main(%x: tensor<1x2xf32>, %w: tensor<2xf32>) -> tensor<1x2xbf16> {
      %y = lm.rms_norm %x, %w {eps = 1.0e-30 : f64}
          : (tensor<1x2xf32>, tensor<2xf32>) -> tensor<1x2xbf16>
      return %y : tensor<1x2xbf16>
    })mlir",
                 {floats({1, 2}, {3, 4}), floats({2}, {1, 2})});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  ASSERT_EQ(out->size(), 1u);
  const Tensor &y = (*out)[0];
  EXPECT_EQ(y.type(), ElementType::BF16);
  EXPECT_EQ(y.floats()[0], 0.84765625f);
  EXPECT_EQ(y.floats()[1], 2.265625f);
}

// Upstream ops around lm ops: a slice, a reshape, a concat and arithmetic,
// all hand-checked.
TEST_F(EvaluatorTest, RunsUpstreamTensorAndArithOps) {
  auto out = run(R"mlir(
    func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x2xf32>, tensor<6xf32>, tensor<4x2xf32>) {
      %s = tensor.extract_slice %x[0, 1] [2, 2] [1, 1] : tensor<2x3xf32> to tensor<2x2xf32>
      %c = arith.constant dense<[[10.0, 20.0], [30.0, 40.0]]> : tensor<2x2xf32>
      %a = arith.addf %s, %c : tensor<2x2xf32>
      %m = arith.mulf %a, %c : tensor<2x2xf32>
      %f = tensor.collapse_shape %x [[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
      %cat = tensor.concat dim(0) %a, %m : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
      return %a, %f, %cat : tensor<2x2xf32>, tensor<6xf32>, tensor<4x2xf32>
    })mlir",
                 {floats({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  EXPECT_EQ((*out)[0].floats(), (std::vector<float>{12, 23, 35, 46}));
  EXPECT_EQ((*out)[1].floats(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ((*out)[2].floats(),
            (std::vector<float>{12, 23, 35, 46, 120, 460, 1050, 1840}));
}

// Attributes reach the kernel: a YaRN RoPE through the evaluator equals the
// kernel called with the same parameters written out by hand.
TEST_F(EvaluatorTest, PassesRopeAttributesThrough) {
  Tensor x = Tensor::zeros(ElementType::F32, {3, 2, 8});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.floats()[i] = std::sin(0.7f * i);
  Tensor pos = Tensor::fromInts({3}, {0, 5, 4000});
  auto out = run(R"mlir(
    func.func @main(%x: tensor<3x2x8xf32>, %p: tensor<3xi32>) -> tensor<3x2x8xf32> {
      %y = lm.rope %x, %p interleaved {offset = 2 : i64, dim = 6 : i64,
          theta = 10000.0 : f64,
          yarn = #lm.yarn<factor = 40.0, original_max_positions = 64,
                          beta_fast = 32.0, beta_slow = 1.0,
                          attention_factor = 1.25, truncate = false>}
          : (tensor<3x2x8xf32>, tensor<3xi32>) -> tensor<3x2x8xf32>
      return %y : tensor<3x2x8xf32>
    })mlir",
                 {x, pos});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  RopeParams p;
  p.style = RopeStyle::Interleaved;
  p.offset = 2;
  p.dim = 6;
  p.theta = 10000.0;
  YarnParams y;
  y.factor = 40.0;
  y.originalMaxPositions = 64;
  y.betaFast = 32.0;
  y.betaSlow = 1.0;
  y.attentionFactor = 1.25;
  y.truncate = false;
  p.yarn = y;
  Tensor expected = rope(x, pos, p);
  EXPECT_EQ((*out)[0].floats(), expected.floats());
  // The first two dims of every head are outside the rotated slice.
  EXPECT_EQ((*out)[0].floats()[16 + 8], x.floats()[16 + 8]);
}

// func.call runs the callee with the caller's tensors.
TEST_F(EvaluatorTest, FollowsCalls) {
  auto out = run(R"mlir(
    func.func @double(%x: tensor<2xf32>) -> tensor<2xf32> {
      %y = arith.addf %x, %x : tensor<2xf32>
      return %y : tensor<2xf32>
    }
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %y = func.call @double(%x) : (tensor<2xf32>) -> tensor<2xf32>
      %z = func.call @double(%y) : (tensor<2xf32>) -> tensor<2xf32>
      return %z : tensor<2xf32>
    })mlir",
                 {floats({2}, {1.5f, -2})});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  EXPECT_EQ((*out)[0].floats(), (std::vector<float>{6, -8}));
}

static const char *kEmbedding = R"mlir(
  func.func @main(%t: tensor<4x2xf32>, %ids: tensor<?xi32>) -> tensor<?x2xf32> {
    %h = lm.embedding %t, %ids : (tensor<4x2xf32>, tensor<?xi32>) -> tensor<?x2xf32>
    return %h : tensor<?x2xf32>
  })mlir";

TEST_F(EvaluatorTest, ReportsBadDataWithTheOpAndValue) {
  Tensor table = floats({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto out = run(kEmbedding, {table, Tensor::fromInts({2}, {1, 9})});
  ASSERT_FALSE(!!out);
  std::string message = llvm::toString(out.takeError());
  EXPECT_NE(message.find("lm.embedding"), std::string::npos) << message;
  EXPECT_NE(message.find("9"), std::string::npos) << message;
}

TEST_F(EvaluatorTest, ChecksArgumentsAgainstTheSignature) {
  Tensor table = floats({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor ids = Tensor::fromInts({2}, {1, 3});
  // A dynamic dim accepts any size.
  auto ok = run(kEmbedding, {table, ids});
  ASSERT_TRUE(!!ok) << llvm::toString(ok.takeError());
  EXPECT_EQ((*ok)[0].floats(), (std::vector<float>{2, 3, 6, 7}));

  auto wrongShape = run(kEmbedding, {floats({3, 2}, {0, 1, 2, 3, 4, 5}), ids});
  ASSERT_FALSE(!!wrongShape);
  EXPECT_NE(llvm::toString(wrongShape.takeError()).find("argument 0"),
            std::string::npos);

  auto wrongType = run(kEmbedding, {table, Tensor::fromInts({2}, {1, 3},
                                                            ElementType::I64)});
  ASSERT_FALSE(!!wrongType);
  EXPECT_NE(llvm::toString(wrongType.takeError()).find("i32"),
            std::string::npos);

  auto wrongCount = run(kEmbedding, {table});
  ASSERT_FALSE(!!wrongCount);
  EXPECT_NE(llvm::toString(wrongCount.takeError()).find("takes 2 arguments"),
            std::string::npos);
}

TEST_F(EvaluatorTest, GathersRows) {
  // Rows in any order, repeated; an index past the input's rows is an error
  // naming the op and the row.
  static const char *kGather = R"mlir(
    func.func @main(%x: tensor<?x2xf32>, %rows: tensor<4xi32>) -> tensor<4x2xf32> {
      %g = lm.gather_rows %x, %rows : (tensor<?x2xf32>, tensor<4xi32>) -> tensor<4x2xf32>
      return %g : tensor<4x2xf32>
    })mlir";
  Tensor x = floats({3, 2}, {0, 1, 2, 3, 4, 5});
  auto out = run(kGather, {x, Tensor::fromInts({4}, {2, 0, 2, 1})});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  EXPECT_EQ((*out)[0].floats(), (std::vector<float>{4, 5, 0, 1, 4, 5, 2, 3}));
  auto bad = run(kGather, {x, Tensor::fromInts({4}, {0, 3, 0, 0})});
  ASSERT_FALSE(!!bad);
  std::string message = llvm::toString(bad.takeError());
  EXPECT_NE(message.find("lm.gather_rows"), std::string::npos) << message;
  EXPECT_NE(message.find("row 3 at index 1 is outside the input's [0, 3)"),
            std::string::npos)
      << message;
}

TEST_F(EvaluatorTest, RejectsUnknownFunctions) {
  module = parseSourceString<ModuleOp>("module {}", &context);
  ASSERT_TRUE(!!module);
  Evaluator evaluator(*module);
  auto out = evaluator.run("missing", {});
  ASSERT_FALSE(!!out);
  EXPECT_NE(llvm::toString(out.takeError()).find("@missing"),
            std::string::npos);
}
