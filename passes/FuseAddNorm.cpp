//===- FuseAddNorm.cpp - Fuse residual adds with the norms that read them -===//
//
// A block ends with its residual update, h = x + sublayer(x), and the next
// sublayer (or the final norm) begins with rms_norm(h): two launches, and h
// written and read back between them. Where the target implements
// lm.add_rms_norm, the two become one op that writes h and its norm in one
// pass over the rows.
//
//===----------------------------------------------------------------------===//

#include "passes/KernelSelection.h"
#include "passes/Passes.h"
#include "runtime/abi/KernelAbi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

namespace daybreak {
#define GEN_PASS_DEF_LMFUSEADDNORM
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {
struct FuseAddNormPass
    : public daybreak::impl::LmFuseAddNormBase<FuseAddNormPass> {
  using LmFuseAddNormBase::LmFuseAddNormBase;

  void runOnOperation() override {
    uint8_t mask =
        targetMaskOrError(getOperation(), "lm-fuse-add-norm", target);
    if (!mask)
      return signalPassFailure();
    const abi::KernelDecl *decl = abi::findKernel("add_rms_norm");
    if (!decl || !(decl->targets & mask))
      return;
    DominanceInfo &dominance = getAnalysis<DominanceInfo>();
    SmallVector<lm::RmsNormOp> norms;
    getOperation().walk([&](lm::RmsNormOp norm) { norms.push_back(norm); });
    OpBuilder b(&getContext());
    for (lm::RmsNormOp norm : norms) {
      auto add = norm.getInput().getDefiningOp<arith::AddFOp>();
      if (!add || add->getBlock() != norm->getBlock() ||
          add.getLhs().getType() != add.getType() ||
          add.getRhs().getType() != add.getType())
        continue;
      // The sum is produced where the norm is: every other reader of h
      // must come after it.
      if (llvm::any_of(add->getUsers(), [&](Operation *user) {
            return user != norm &&
                   !dominance.properlyDominates(norm.getOperation(), user);
          }))
        continue;
      b.setInsertionPoint(norm);
      auto fused = lm::AddRmsNormOp::create(
          b, norm.getLoc(), TypeRange{add.getType(), norm.getType()},
          add.getLhs(), add.getRhs(), norm.getWeight(), norm.getEpsAttr());
      norm.getResult().replaceAllUsesWith(fused.getResult());
      norm.erase();
      add.getResult().replaceAllUsesWith(fused.getSum());
      add.erase();
      ++numFused;
    }
  }
};
} // namespace
