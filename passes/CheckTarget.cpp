//===- CheckTarget.cpp - Reject ops the target cannot run -----------------===//
//
// Each op of a function body lowers to the runtime kernel loweredKernelName
// names (or to none); the kernel's declaration says which targets implement
// it. An op is legal for a target when it needs no kernel or its kernel is
// declared for the target, and (CUDA) its shapes are within what the
// target's kernel takes. Every illegal op is reported, then the pass fails.
//
//===----------------------------------------------------------------------===//

#include "passes/KernelSelection.h"
#include "passes/Passes.h"
#include "runtime/abi/KernelAbi.h"

namespace daybreak {
#define GEN_PASS_DEF_LMCHECKTARGET
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {
struct CheckTargetPass
    : public daybreak::impl::LmCheckTargetBase<CheckTargetPass> {
  using LmCheckTargetBase::LmCheckTargetBase;

  void runOnOperation() override {
    uint8_t mask = targetMaskOrError(getOperation(), "lm-check-target", target);
    if (!mask)
      return signalPassFailure();
    bool legal = true;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      for (Operation &op : func.getBody().getOps()) {
        if (isa<func::ReturnOp>(op))
          continue;
        if (failed(check(&op, mask)))
          legal = false;
      }
    }
    if (!legal)
      signalPassFailure();
  }

  LogicalResult check(Operation *op, uint8_t mask) {
    std::optional<StringRef> name = loweredKernelName(op);
    if (!name)
      return op->emitOpError("has no lowering to a runtime kernel, so target '")
             << target << "' cannot run it";
    if (name->empty())
      return success();
    ++numLaunching;
    const abi::KernelDecl *decl = abi::findKernel(*name);
    if (!decl)
      return op->emitOpError("has no runtime kernel: no declaration of '")
             << *name << "' in runtime/abi/Kernels.def, so target '" << target
             << "' cannot run it";
    if (!(decl->targets & mask))
      return op->emitOpError("runs runtime kernel '")
             << *name << "', which target '" << target
             << "' does not implement (Kernels.def declares it for "
             << abi::targetNames(decl->targets) << ")";
    if (mask & abi::Cuda)
      return checkCudaLimits(op);
    return success();
  }

  /// The shapes the CUDA kernels take (abi::kCudaKdaMaxKeyDim and
  /// friends); dynamic dims are left to the device's launch checks.
  LogicalResult checkCudaLimits(Operation *op) {
    auto dim = [](Value v, int64_t i) {
      auto type = dyn_cast<RankedTensorType>(v.getType());
      return type && i < type.getRank() ? type.getDimSize(i)
                                        : ShapedType::kDynamic;
    };
    Value q;
    if (auto chunk = dyn_cast<lm::KdaChunkOp>(op))
      q = chunk.getQ();
    else if (auto step = dyn_cast<lm::KdaStepOp>(op))
      q = step.getQ();
    if (q) {
      int64_t keyDim = dim(q, 2);
      if (!ShapedType::isDynamic(keyDim) && keyDim > abi::kCudaKdaMaxKeyDim)
        return op->emitOpError("has key dim ")
               << keyDim << "; target '" << target
               << "' runs KDA with key dims up to " << abi::kCudaKdaMaxKeyDim;
    }
    if (auto conv = dyn_cast<lm::ShortConvOp>(op)) {
      int64_t width = dim(conv.getWeight(), 1);
      if (!ShapedType::isDynamic(width) &&
          (width < abi::kCudaShortConvMinWidth ||
           width > abi::kCudaShortConvMaxWidth))
        return op->emitOpError("has kernel width ")
               << width << "; target '" << target
               << "' runs short convolutions of width "
               << abi::kCudaShortConvMinWidth << " to "
               << abi::kCudaShortConvMaxWidth;
    }
    return success();
  }
};
} // namespace
