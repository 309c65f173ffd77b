//===- StepFunctionTest.cpp - The toolkit's cache and state declarations --===//
//
// A step built with StepFunction: inputs and outputs carry their roles,
// caches and state are threaded from arguments to results, declared state
// gets its storage from lm-assign-kv-layout (`state-dtype`) and lowers to a
// plan.state_pool of one slot per sequence beside the caches' pools.
//
//===----------------------------------------------------------------------===//

#include "compiler/models/StepFunction.h"
#include "dialects/lm/LmDialect.h"
#include "dialects/lm/LmOps.h"
#include "dialects/plan/PlanDialect.h"
#include "dialects/plan/PlanOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace daybreak;

namespace {

class StepFunctionTest : public ::testing::Test {
protected:
  StepFunctionTest() {
    DialectRegistry registry;
    registry.insert<lm::LmDialect, plan::PlanDialect, func::FuncDialect,
                    arith::ArithDialect, tensor::TensorDialect>();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// @decode: writes a cache row per token and keeps a [2, 4, 8] state per
  /// sequence (passed through: no kernel reads state yet).
  OwningOpRef<ModuleOp> build(bool withCache = true) {
    OpBuilder b(&context);
    Location loc = b.getUnknownLoc();
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    models::StepFunction step(b, loc, "decode");
    auto ids = RankedTensorType::get({ShapedType::kDynamic}, b.getI32Type());
    auto rows = RankedTensorType::get({ShapedType::kDynamic, 8}, b.getF32Type());
    unsigned positions = step.addInput("positions", ids);
    unsigned sequences = step.addInput("sequences", ids);
    unsigned values = step.addInput("values", rows);
    step.addOutput("logits", rows);
    unsigned cache = 0;
    if (withCache)
      cache = step.addCache(RankedTensorType::get({2, 64, 8}, b.getF32Type()));
    step.addState(RankedTensorType::get({2, 4, 8}, b.getF32Type()));
    step.create(*module);
    if (withCache) {
      Value &c = step.cache(cache);
      c = lm::CacheWriteOp::create(b, loc, c.getType(), c, step.input(values),
                                   step.input(positions),
                                   step.input(sequences), nullptr)
              .getResult();
    }
    step.finish({step.input(values)});
    EXPECT_TRUE(succeeded(verify(*module)));
    return module;
  }

  LogicalResult lower(ModuleOp module, StringRef stateDtype) {
    PassManager pm(&context);
    LmAssignKVLayoutOptions layout;
    layout.stateDtype = stateDtype.str();
    pm.addPass(createLmAssignKVLayout(layout));
    LmLowerToPlanOptions lowering;
    lowering.maxTokens = 4;
    pm.addPass(createLmLowerToPlan(lowering));
    return pm.run(module);
  }

  MLIRContext context;
};

TEST_F(StepFunctionTest, RolesAndThreading) {
  OwningOpRef<ModuleOp> module = build();
  auto func = cast<func::FuncOp>(module->getBody()->front());
  EXPECT_EQ(func.getArgAttrOfType<StringAttr>(0, "lm.role").getValue(),
            "positions");
  EXPECT_EQ(func.getResultAttrOfType<StringAttr>(0, "lm.role").getValue(),
            "logits");
  // The state, last argument, is marked and returned last.
  EXPECT_TRUE(func.getArgAttr(4, "lm.state"));
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  ASSERT_EQ(ret.getNumOperands(), 3u);
  EXPECT_TRUE(ret.getOperand(1).getDefiningOp<lm::CacheWriteOp>());
  EXPECT_EQ(ret.getOperand(2), func.getArgument(4));
}

TEST_F(StepFunctionTest, StateLowersToOneSlotPerSequence) {
  for (StringRef dtype : {"f32", "bf16"}) {
    OwningOpRef<ModuleOp> module = build();
    ASSERT_TRUE(succeeded(lower(*module, dtype)));
    auto pools = module->getOps<plan::StatePoolOp>();
    ASSERT_EQ(std::distance(pools.begin(), pools.end()), 1);
    plan::StatePoolOp pool = *pools.begin();
    EXPECT_EQ(pool.getBatch(), 2u);
    EXPECT_EQ(pool.getLayers(), 1u);
    EXPECT_EQ(SmallVector<int64_t>(pool.getSlotShape()),
              (SmallVector<int64_t>{4, 8}));
    int64_t bytes = dtype == "f32" ? 4 : 2;
    EXPECT_EQ(pool.getSlotBytes(), 4 * 8 * bytes);
    EXPECT_EQ(pool.getLayout().getStorageType().getIntOrFloatBitWidth(),
              unsigned(8 * bytes));
    // The cache beside it is paged.
    auto caches = module->getOps<plan::CachePoolOp>();
    ASSERT_EQ(std::distance(caches.begin(), caches.end()), 1);
    EXPECT_EQ((*caches.begin()).getLayout().getWindow(), 0);
  }
}

TEST_F(StepFunctionTest, StateWithoutLayoutIsRejected) {
  OwningOpRef<ModuleOp> module = build(/*withCache=*/false);
  PassManager pm(&context);
  pm.addPass(createLmLowerToPlan());
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  EXPECT_TRUE(failed(pm.run(*module)));
  EXPECT_NE(message.find("state argument 3 has no #lm.state_layout (run "
                         "lm-assign-kv-layout)"),
            std::string::npos)
      << message;
}

} // namespace
