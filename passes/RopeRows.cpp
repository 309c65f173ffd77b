//===- RopeRows.cpp - Rotate a projection's rows, not a reshape of them ---===//
//
// A builder splits a projection's rows [T, H * D] into heads [T, H, D]
// (tensor.expand_shape) and rotates the heads (lm.rope). The reshape makes
// the rope read something that is no column view, so the projection cannot
// join the others of its input (gpt-oss's q, beside its k and v, which
// lm-fuse-cache-write has already made cache-write prologues). Rotating the
// rows themselves, each head of D columns (lm.rope's head_dim), and
// reshaping the result computes every value as before: the rope then reads
// the projection's rows in its VIEW slot, and lm-fuse-projections can stack
// the projection with the others.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace daybreak {
#define GEN_PASS_DEF_LMROPEROWS
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

/// The head size D when `expand` splits rows [T, H * D] of a static width
/// into heads [T, H, D]; else nullopt.
std::optional<int64_t> headSplit(tensor::ExpandShapeOp expand) {
  auto source = cast<RankedTensorType>(expand.getSrc().getType());
  auto result = cast<RankedTensorType>(expand.getResultType());
  SmallVector<ReassociationIndices> groups = expand.getReassociationIndices();
  if (source.getRank() != 2 || result.getRank() != 3 ||
      source.isDynamicDim(1) || result.isDynamicDim(2) ||
      groups.size() != 2 || groups[0].size() != 1 || groups[1].size() != 2)
    return std::nullopt;
  return result.getDimSize(2);
}

struct RopeRowsPass : public daybreak::impl::LmRopeRowsBase<RopeRowsPass> {
  void runOnOperation() override {
    SmallVector<lm::RopeOp> ropes;
    getOperation().walk([&](lm::RopeOp rope) {
      if (!rope.getHeadDim())
        ropes.push_back(rope);
    });
    OpBuilder b(&getContext());
    for (lm::RopeOp rope : ropes) {
      auto expand = rope.getInput().getDefiningOp<tensor::ExpandShapeOp>();
      std::optional<int64_t> head = expand ? headSplit(expand) : std::nullopt;
      if (!head)
        continue;
      b.setInsertionPoint(rope);
      auto rows = cast<lm::RopeOp>(b.clone(*rope));
      rows->setOperand(0, expand.getSrc());
      rows.getResult().setType(
          cast<RankedTensorType>(expand.getSrc().getType()));
      rows.setHeadDim(*head);
      auto heads = cast<tensor::ExpandShapeOp>(b.clone(*expand));
      heads->setOperand(0, rows.getResult());
      rope.getResult().replaceAllUsesWith(heads.getResult());
      rope.erase();
      if (expand->use_empty())
        expand.erase();
      ++numRewritten;
    }
  }
};

} // namespace
