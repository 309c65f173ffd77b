//===- Mxfp4Route.cpp - Choose how MXFP4 experts are stored and read ------===//
//
// Rewrites lm.mxfp4_expert_matmul for the route chosen at compile time
// (docs/mxfp4.md): direct leaves it; offline widens the packed weights to
// E4M3 codes and f32 block scales (arith.extf, folded by lm-fold-weights)
// read by lm.expert_matmul; online converts the step's selected experts into
// a workspace (lm.mxfp4_to_fp8_experts) that lm.expert_matmul reads with
// remapped indices, in every step but decode (unless convert-in-decode;
// none with convert-in-prefill false).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace daybreak {
#define GEN_PASS_DEF_LMMXFP4ROUTE
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

/// The block of one E8M0 scale: one row, 32 values along K.
constexpr int64_t kMxfp4Block = 32;

struct Mxfp4RoutePass
    : public daybreak::impl::LmMxfp4RouteBase<Mxfp4RoutePass> {
  using LmMxfp4RouteBase::LmMxfp4RouteBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (route != "online" && route != "offline" && route != "direct") {
      module.emitError("lm-mxfp4-route: unknown route '")
          << route << "' (expected online, offline or direct)";
      return signalPassFailure();
    }
    SmallVector<lm::Mxfp4ExpertMatmulOp> matmuls;
    module.walk([&](lm::Mxfp4ExpertMatmulOp op) { matmuls.push_back(op); });
    if (matmuls.empty())
      return;
    OpBuilder b(module.getContext());
    module->setAttr("lm.mxfp4_route", b.getStringAttr(route));
    if (route == "direct")
      return;
    for (lm::Mxfp4ExpertMatmulOp op : matmuls) {
      if (route == "online" &&
          !(isInDecodeStep(op) ? convertInDecode : convertInPrefill))
        continue;
      b.setInsertionPoint(op);
      if (failed(route == "online" ? rewriteOnline(b, op)
                                   : rewriteOffline(b, op)))
        return signalPassFailure();
      ++numRewritten;
    }
  }

  /// Whether `op` is in the decode step function, which the online route
  /// leaves direct (see the pass description).
  static bool isInDecodeStep(Operation *op) {
    auto func = op->getParentOfType<func::FuncOp>();
    return func && func.getSymName() == "decode";
  }

  /// The weight's codes and scales widened at compile time (lm-fold-weights
  /// evaluates the arith.extf and stores the results).
  LogicalResult rewriteOffline(OpBuilder &b, lm::Mxfp4ExpertMatmulOp op) {
    Location loc = op.getLoc();
    auto weightType = cast<RankedTensorType>(op.getWeight().getType());
    auto scaleType = cast<RankedTensorType>(op.getScales().getType());
    Value codes = arith::ExtFOp::create(
        b, loc, weightType.clone(b.getType<Float8E4M3FNType>()),
        op.getWeight());
    Value scales = arith::ExtFOp::create(
        b, loc, scaleType.clone(b.getF32Type()), op.getScales());
    Value dense = dequant(b, loc, codes, scales);
    replace(b, op, dense, op.getIndices(), op.getBias());
    return success();
  }

  /// The selected experts converted per step into a workspace of
  /// min(E, max-tokens x k) slots, the largest number one step selects.
  LogicalResult rewriteOnline(OpBuilder &b, lm::Mxfp4ExpertMatmulOp op) {
    Location loc = op.getLoc();
    auto weightType = cast<RankedTensorType>(op.getWeight().getType());
    auto scaleType = cast<RankedTensorType>(op.getScales().getType());
    auto indexType = cast<RankedTensorType>(op.getIndices().getType());
    int64_t experts = weightType.getDimSize(0), topK = indexType.getDimSize(1);
    if (ShapedType::isDynamic(experts) || ShapedType::isDynamic(topK) ||
        !weightType.hasStaticShape())
      return op.emitOpError("the online MXFP4 route needs static expert "
                            "shapes and a static top-k, got ")
             << weightType << " and " << indexType;
    if (maxTokens <= 0)
      return op.emitOpError("the online MXFP4 route needs a positive "
                            "max-tokens, got ")
             << maxTokens;
    int64_t slots = std::min<int64_t>(experts, maxTokens * topK);
    // Not in decode (convert-in-decode): its graph-replayed steps of a
    // batch's tokens would fork and join a side stream inside the graph for
    // a conversion that below the threshold does nothing.
    std::optional<int64_t> allFrom;
    if (overlap && !isInDecodeStep(op))
      allFrom = allExpertsFromTokens(experts, topK);
    if (allFrom && (*allFrom > maxTokens || maxTokens * topK < experts))
      allFrom.reset(); // no step of this limit selects nearly every expert
    if (allFrom)
      slots = experts;
    int64_t n = weightType.getDimSize(1);
    auto convert = lm::Mxfp4ToFp8ExpertsOp::create(
        b, loc,
        RankedTensorType::get({slots, n, weightType.getDimSize(2)},
                              b.getType<Float8E4M3FNType>()),
        RankedTensorType::get({slots, n, scaleType.getDimSize(2)},
                              b.getF32Type()),
        RankedTensorType::get({slots, n}, b.getF32Type()), indexType,
        op.getWeight(), op.getScales(), op.getIndices(), op.getBias(),
        allFrom ? b.getI64IntegerAttr(*allFrom) : IntegerAttr());
    Value dense = dequant(b, loc, convert.getCodes(), convert.getBlockScales());
    replace(b, op, dense, convert.getSlots(),
            op.getBias() ? convert.getSlotBias() : Value());
    return success();
  }

  /// The least token count T at which uniformly routed tokens, k distinct
  /// experts each of E, leave at most a tenth of the experts unselected in
  /// expectation: (1 - k / E)^T <= 0.1. From there converting every expert
  /// moves at most about 1 / 0.9 of the selection's bytes.
  static std::optional<int64_t> allExpertsFromTokens(int64_t experts,
                                                     int64_t topK) {
    if (topK < 1 || experts < 1)
      return std::nullopt;
    if (topK >= experts)
      return 1;
    double missed = 1.0, keep = 1.0 - double(topK) / double(experts);
    for (int64_t tokens = 1; tokens <= (int64_t(1) << 20); ++tokens)
      if ((missed *= keep) <= 0.1)
        return tokens;
    return std::nullopt;
  }

  /// E4M3 codes times their [1, 32] block scales: the form lm.expert_matmul
  /// reads FP8 experts in (the lowering hands it the codes and scales).
  Value dequant(OpBuilder &b, Location loc, Value codes, Value scales) {
    auto type = cast<RankedTensorType>(codes.getType());
    return lm::Fp8DequantOp::create(b, loc, type.clone(b.getF32Type()), codes,
                                    scales,
                                    b.getDenseI64ArrayAttr({1, kMxfp4Block}))
        .getResult();
  }

  void replace(OpBuilder &b, lm::Mxfp4ExpertMatmulOp op, Value weight,
               Value indices, Value bias) {
    Value result = lm::ExpertMatmulOp::create(b, op.getLoc(), op.getType(),
                                              op.getInput(), weight, indices,
                                              op.getRoutingWeights(), bias)
                       .getResult();
    op.replaceAllUsesWith(result);
    op.erase();
  }
};

} // namespace
