//===- CheckTarget.cpp - Reject ops the target cannot run -----------------===//
//
// Each op of a function body lowers to the runtime kernel loweredKernelName
// names (or to none); the kernel's declaration says which targets implement
// it. An op is legal for a target when it needs no kernel or its kernel is
// declared for the target. Every illegal op is reported, then the pass fails.
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
    uint8_t mask = abi::targetMask(target);
    if (!mask) {
      getOperation().emitError("lm-check-target: unknown target '")
          << target << "' (expected "
          << abi::targetNames(abi::CpuAndCuda, " or ") << ")";
      return signalPassFailure();
    }
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
    return success();
  }
};
} // namespace
