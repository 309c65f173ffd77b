//===- FuseMhc.cpp - Fuse mHC collapses and write-backs -------------------===//
//
// mHC keeps n copies of the residual stream; every sublayer reads them for
// its mixing logits and its collapse and writes them back. This pass removes
// the passes over them that the separate ops would make: the collapse takes
// the sublayer's RMS norm, and a write-back takes the next collapse.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

namespace daybreak {
#define GEN_PASS_DEF_LMFUSEMHC
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

/// Whether every use of `values` but those by `except` lies after `at`, so
/// an op created at `at` can replace them.
bool usedOnlyAfter(DominanceInfo &dominance, Operation *at, ValueRange values,
                   Operation *except) {
  for (Value v : values)
    for (Operation *user : v.getUsers())
      if (user != except && !dominance.properlyDominates(at, user))
        return false;
  return true;
}

/// Folds the lm.rms_norm that is the only user of `pre`'s input into it,
/// placing the new collapse at the norm (where the weight is defined).
/// Returns the op that now stands for `pre`.
lm::MhcPreOp foldNorm(OpBuilder &b, DominanceInfo &dominance,
                      lm::MhcPreOp pre) {
  Value input = pre.getInput();
  if (pre.getNorm() || !input.hasOneUse())
    return pre;
  auto norm = dyn_cast<lm::RmsNormOp>(*input.getUsers().begin());
  if (!norm || norm.getInput() != input || norm.getType() != input.getType() ||
      !usedOnlyAfter(dominance, norm, {pre.getPost(), pre.getComb()}, norm))
    return pre;
  b.setInsertionPoint(norm);
  auto fused = lm::MhcPreOp::create(
      b, pre.getLoc(), pre.getResultTypes(), pre.getStreams(), pre.getFn(),
      pre.getBase(), pre.getScale(), norm.getWeight(),
      pre.getSinkhornItersAttr(), pre.getEpsAttr(), pre.getNormEpsAttr(),
      norm.getEpsAttr());
  norm.getResult().replaceAllUsesWith(fused.getInput());
  pre.getPost().replaceAllUsesWith(fused.getPost());
  pre.getComb().replaceAllUsesWith(fused.getComb());
  norm.erase();
  pre.erase();
  return fused;
}

/// Fuses the write-back that produced `pre`'s streams with `pre`: true if
/// it did.
bool fuseWriteBack(OpBuilder &b, DominanceInfo &dominance, lm::MhcPreOp pre) {
  auto post = pre.getStreams().getDefiningOp<lm::MhcPostOp>();
  if (!post || !usedOnlyAfter(dominance, pre, post.getResult(), pre))
    return false;
  b.setInsertionPoint(pre);
  auto fused = lm::MhcPostPreOp::create(
      b, pre.getLoc(), post.getType(), pre.getInput().getType(),
      pre.getPost().getType(), pre.getComb().getType(), post.getStreams(),
      post.getY(), post.getPost(), post.getComb(), pre.getFn(), pre.getBase(),
      pre.getScale(), pre.getNorm(), pre.getSinkhornItersAttr(),
      pre.getEpsAttr(), pre.getNormEpsAttr(), pre.getInputEpsAttr());
  pre.getInput().replaceAllUsesWith(fused.getInput());
  pre.getPost().replaceAllUsesWith(fused.getNextPost());
  pre.getComb().replaceAllUsesWith(fused.getNextComb());
  pre.erase();
  post.getResult().replaceAllUsesWith(fused.getResult());
  post.erase();
  return true;
}

struct FuseMhcPass : public daybreak::impl::LmFuseMhcBase<FuseMhcPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<lm::MhcPreOp> collapses;
    func.walk([&](lm::MhcPreOp pre) { collapses.push_back(pre); });
    OpBuilder b(func.getContext());
    // The rewrites add and erase ops within blocks, which leaves the
    // dominance tree as it was (order within a block is queried afresh).
    DominanceInfo dominance(func);
    for (lm::MhcPreOp pre : collapses) {
      lm::MhcPreOp folded = foldNorm(b, dominance, pre);
      if (folded != pre)
        ++numNorms;
      if (fuseWriteBack(b, dominance, folded))
        ++numWriteBacks;
    }
  }
};

} // namespace
