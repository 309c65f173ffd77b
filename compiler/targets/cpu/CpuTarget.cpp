//===- CpuTarget.cpp - The CPU target -------------------------------------===//

#include "compiler/targets/cpu/CpuTarget.h"

#include "compiler/artifact/ArtifactEmitter.h"
#include "compiler/targets/Target.h"
#include "compiler/targets/cpu/CpuCodegen.h"
#include "dialects/plan/PlanOps.h"

using namespace mlir;
using namespace daybreak;

namespace {
class CpuTarget final : public targets::Target {
public:
  llvm::StringRef getName() const override { return "cpu"; }
  llvm::StringRef getCodePhase() const override { return "llvm"; }

  llvm::Error printCode(ModuleOp module,
                        llvm::raw_ostream &out) const override {
    ModuleOp kernels = plan::findGeneratedKernels(module);
    if (!kernels)
      return llvm::Error::success();
    return targets::cpu::compileToSharedObject(kernels, &out).takeError();
  }

  llvm::Error serialize(ModuleOp module, artifact::EmitInfo &info,
                        llvm::raw_ostream &) const override {
    // The generated kernels through LLVM into one x86-64 shared object; the
    // library kernels are the runtime's own C++ code.
    ModuleOp kernels = plan::findGeneratedKernels(module);
    if (!kernels)
      return llvm::Error::success();
    auto shared = targets::cpu::compileToSharedObject(kernels, nullptr);
    if (!shared)
      return shared.takeError();
    info.cpuCode = std::move(*shared);
    return llvm::Error::success();
  }
};
} // namespace

const targets::Target &targets::cpu::getCpuTarget() {
  static const CpuTarget target;
  return target;
}
