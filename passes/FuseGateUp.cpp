//===- FuseGateUp.cpp - One projection for a GLU's gate and up ------------===//
//
// A gated linear unit reads two projections of one input, the gate and the
// up projection, each its own matmul launch over its own weight. Stacking
// the two weights along N makes them one matmul of twice the rows: one
// launch instead of two, one read of the input, and for decode's GEMVs a
// weight stream twice as long (the small ones are bound by their fixed
// cost, not their bytes). The GLU then reads the two halves of the result
// as column slices, which lm-lower-to-plan hands to the generated kernel as
// views: nothing is copied.
//
// The stacked weight is declared with both checkpoints' tensors as its
// sources, in order, so the artifact holds the same bytes it did and
// nothing is computed at compile time:
// - plain matmul weights [N, K]: sources (gate, up), [2N, K];
// - FP8 weights [N, K] with [N / bn, K / bk] block scales, where bn divides
//   N (a block of rows never spans both halves): codes and scales stacked
//   alike;
// - stacked experts [E, N, K] (of either kind): the experts' tensors
//   interleaved (gate 0, up 0, gate 1, ...), so expert e's rows are its gate
//   rows, then its up rows: [E, 2N, K].
// The rewrite is exact: every output element is the same dot product.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/WeightStacking.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace daybreak {
#define GEN_PASS_DEF_LMFUSEGATEUP
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

class GateUpFusion {
public:
  GateUpFusion(ModuleOp module) : module(module), b(module.getContext()) {}

  /// Rewrites `glu` if its gate and up are fusable projections.
  template <typename GluOp> bool run(GluOp glu);

  /// lm.weight declarations that may no longer be referenced (the separate
  /// ones, and stacked ones a failed rewrite left unread), to erase if so.
  llvm::SetVector<lm::WeightOp> replaced;

private:
  /// The weight stacking `gate` and `up` (declared once), sources
  /// interleaved per expert when `experts` > 0; null if they cannot stack.
  Value stacked(Location loc, Value gate, Value up, int64_t experts);
  /// Both halves of `both` along its last dim.
  std::pair<Value, Value> halves(Location loc, Value both);

  ModuleOp module;
  OpBuilder b;
};

Value GateUpFusion::stacked(Location loc, Value gate, Value up,
                            int64_t experts) {
  lm::WeightOp g = sourcedWeight(module, gate), u = sourcedWeight(module, up);
  if (!g || !u || g == u || g.getType() != u.getType())
    return {};
  // A plain weight has one source, [N, K].
  auto type = cast<RankedTensorType>(g.getType());
  if (experts == 0 && (type.getRank() != 2 || g.getSources().size() != 1 ||
                       u.getSources().size() != 1))
    return {};
  lm::WeightOp weight = stackedWeight(module, {g, u}, experts);
  if (!weight)
    return {};
  replaced.insert(weight);
  replaced.insert(g);
  replaced.insert(u);
  return lm::WeightRefOp::create(b, loc, weight.getType(), weight.getSymName())
      .getResult();
}

std::pair<Value, Value> GateUpFusion::halves(Location loc, Value both) {
  auto type = cast<RankedTensorType>(both.getType());
  int64_t rank = type.getRank(), half = type.getShape().back() / 2;
  auto slice = [&](int64_t offset) {
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (int64_t d = 0; d < rank; ++d) {
      bool last = d + 1 == rank;
      offsets.push_back(b.getIndexAttr(last ? offset : 0));
      if (last)
        sizes.push_back(b.getIndexAttr(half));
      else if (type.isDynamicDim(d))
        sizes.push_back(tensor::DimOp::create(b, loc, both, d).getResult());
      else
        sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
      strides.push_back(b.getIndexAttr(1));
    }
    return tensor::ExtractSliceOp::create(b, loc, both, offsets, sizes, strides)
        .getResult();
  };
  return {slice(0), slice(half)};
}

/// The result type of a projection with twice the output features.
static RankedTensorType doubled(Value result) {
  auto type = cast<RankedTensorType>(result.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.back() *= 2;
  return RankedTensorType::get(shape, type.getElementType());
}

/// A stacked expert weight's type [E, 2N, K] for [E, N, K].
static RankedTensorType doubledRows(Value weight) {
  auto type = cast<RankedTensorType>(weight.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[shape.size() - 2] *= 2;
  return RankedTensorType::get(shape, type.getElementType());
}

template <typename GluOp> bool GateUpFusion::run(GluOp glu) {
  Operation *gateOp = glu.getGate().getDefiningOp();
  Operation *upOp = glu.getUp().getDefiningOp();
  if (!gateOp || !upOp || gateOp == upOp ||
      gateOp->getName() != upOp->getName() || !glu.getGate().hasOneUse() ||
      !glu.getUp().hasOneUse() || gateOp->getBlock() != glu->getBlock() ||
      upOp->getBlock() != glu->getBlock() ||
      // The new projection carries the ops' own attributes only: one that
      // another pass recorded (lm-tile's tiles) would be lost.
      !gateOp->getDiscardableAttrDictionary().empty() ||
      !upOp->getDiscardableAttrDictionary().empty())
    return false;
  // The later of the two is where both inputs are defined.
  Operation *later = gateOp->isBeforeInBlock(upOp) ? upOp : gateOp;
  Location loc = glu.getLoc();
  Value both;
  if (auto gate = dyn_cast<lm::MatmulOp>(gateOp)) {
    auto up = cast<lm::MatmulOp>(upOp);
    if (gate.getInput() != up.getInput() || gate.getBias() || up.getBias())
      return false;
    b.setInsertionPoint(later);
    Value weight = stacked(loc, gate.getWeight(), up.getWeight(), 0);
    if (!weight)
      return false;
    both = lm::MatmulOp::create(b, loc, doubled(gate.getResult()),
                                gate.getInput(), weight, Value())
               .getResult();
  } else if (auto gate = dyn_cast<lm::Fp8MatmulOp>(gateOp)) {
    auto up = cast<lm::Fp8MatmulOp>(upOp);
    ArrayRef<int64_t> block = gate.getBlockSize();
    int64_t rows =
        cast<RankedTensorType>(gate.getWeight().getType()).getDimSize(0);
    if (gate.getInput() != up.getInput() || block != up.getBlockSize() ||
        block.size() != 2 || block[0] <= 0 || rows % block[0] != 0)
      return false;
    b.setInsertionPoint(later);
    Value weight = stacked(loc, gate.getWeight(), up.getWeight(), 0);
    Value scales = weight
                       ? stacked(loc, gate.getScaleInv(), up.getScaleInv(), 0)
                       : Value();
    if (!scales) {
      if (weight)
        weight.getDefiningOp()->erase();
      return false;
    }
    both = lm::Fp8MatmulOp::create(b, loc, doubled(gate.getResult()),
                                   gate.getInput(), weight, scales,
                                   gate.getBlockSizeAttr())
               .getResult();
  } else if (auto gate = dyn_cast<lm::ExpertMatmulOp>(gateOp)) {
    auto up = cast<lm::ExpertMatmulOp>(upOp);
    if (gate.getInput() != up.getInput() ||
        gate.getIndices() != up.getIndices() || gate.getRoutingWeights() ||
        up.getRoutingWeights() || gate.getBias() || up.getBias())
      return false;
    auto weightType = cast<RankedTensorType>(gate.getWeight().getType());
    int64_t experts = weightType.getDimSize(0);
    b.setInsertionPoint(later);
    auto gateDequant = gate.getWeight().getDefiningOp<lm::Fp8DequantOp>();
    auto upDequant = up.getWeight().getDefiningOp<lm::Fp8DequantOp>();
    Value weight;
    if (gateDequant && upDequant) {
      // FP8 experts: the codes and the block scales stack alike.
      ArrayRef<int64_t> block = gateDequant.getBlockSize();
      if (block != upDequant.getBlockSize() || block.size() != 2 ||
          block[0] <= 0 || weightType.getDimSize(1) % block[0] != 0)
        return false;
      Value codes =
          stacked(loc, gateDequant.getWeight(), upDequant.getWeight(), experts);
      Value scales = codes ? stacked(loc, gateDequant.getScaleInv(),
                                     upDequant.getScaleInv(), experts)
                           : Value();
      if (!scales) {
        if (codes)
          codes.getDefiningOp()->erase();
        return false;
      }
      weight =
          lm::Fp8DequantOp::create(b, loc, doubledRows(gate.getWeight()), codes,
                                   scales, gateDequant.getBlockSizeAttr())
              .getResult();
    } else if (!gateDequant && !upDequant) {
      weight = stacked(loc, gate.getWeight(), up.getWeight(), experts);
    }
    if (!weight)
      return false;
    both = lm::ExpertMatmulOp::create(b, loc, doubled(gate.getResult()),
                                      gate.getInput(), weight,
                                      gate.getIndices(), Value(), Value())
               .getResult();
  } else {
    return false;
  }
  auto [g, u] = halves(loc, both);
  glu.getGateMutable().assign(g);
  glu.getUpMutable().assign(u);
  for (Operation *dead : {gateOp, upOp}) {
    SmallVector<Value> operands(dead->getOperands());
    dead->erase();
    // The old weight references and dequantisations, now unread.
    for (Value operand : operands)
      if (Operation *def = operand.getDefiningOp();
          def && def->use_empty() &&
          isa<lm::WeightRefOp, lm::Fp8DequantOp>(def)) {
        SmallVector<Value> inner(def->getOperands());
        def->erase();
        for (Value v : inner)
          if (Operation *ref = v.getDefiningOp<lm::WeightRefOp>();
              ref && ref->use_empty())
            ref->erase();
      }
  }
  return true;
}

struct FuseGateUpPass
    : public daybreak::impl::LmFuseGateUpBase<FuseGateUpPass> {
  using LmFuseGateUpBase::LmFuseGateUpBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    GateUpFusion fusion(module);
    SmallVector<Operation *> glus;
    module.walk([&](Operation *op) {
      if (isa<lm::SwigluOp, lm::SituOp>(op))
        glus.push_back(op);
    });
    for (Operation *op : glus) {
      bool fused = llvm::TypeSwitch<Operation *, bool>(op)
                       .Case<lm::SwigluOp, lm::SituOp>(
                           [&](auto glu) { return fusion.run(glu); })
                       .Default([](Operation *) { return false; });
      if (fused)
        ++numFused;
    }
    // The separate declarations, where nothing reads them any more.
    for (lm::WeightOp weight : fusion.replaced)
      if (SymbolTable::symbolKnownUseEmpty(weight, module))
        weight.erase();
  }
};

} // namespace
