//===- SpecializeLibraryKernels.cpp - CUDA library kernels for the shapes -===//
//
// Runs the NVRTC specialisation of compiler/targets/cuda/LibraryKernels on the
// plan and keeps its result in the IR: the `specialized` attribute of each
// launch an instantiation serves, and the PTX as plan.code_image @library.
//
//===----------------------------------------------------------------------===//

#include "compiler/targets/cuda/LibraryKernels.h"
#include "passes/Passes.h"
#include "runtime/devices/cuda/GemmTiles.h"

#include "mlir/IR/Builders.h"

namespace daybreak {
#define GEN_PASS_DEF_PLANSPECIALIZELIBRARYKERNELS
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {
struct SpecializeLibraryKernelsPass
    : public daybreak::impl::PlanSpecializeLibraryKernelsBase<
          SpecializeLibraryKernelsPass> {
  using PlanSpecializeLibraryKernelsBase::PlanSpecializeLibraryKernelsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkGemmTiles(module)))
      return signalPassFailure();
    auto library = targets::cuda::specializeLibraryKernels(module, chip);
    if (!library) {
      module.emitError("plan-specialize-library-kernels: ")
          << llvm::toString(library.takeError());
      return signalPassFailure();
    }
    if (!*library) {
      module.emitError("plan-specialize-library-kernels: this build has no "
                       "NVRTC (nvrtc.h and libnvrtc were not found when it "
                       "was configured)");
      return signalPassFailure();
    }
    // Re-running the pass replaces the library it recorded before.
    if (Operation *old = module.lookupSymbol(plan::kLibraryCodeImage))
      old->erase();
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    SmallVector<NamedAttribute> instantiations;
    for (const auto &[expression, entry] : (*library)->instantiations)
      instantiations.push_back(
          b.getNamedAttr(expression, b.getStringAttr(entry)));
    plan::CodeImageOp::create(b, module.getLoc(), plan::kLibraryCodeImage,
                              "ptx", chip, b.getDictionaryAttr(instantiations),
                              (*library)->ptx);
    numInstantiations = (*library)->instantiations.size();
    numSpecialized = (*library)->launches;
  }

  /// Each fp8_matmul's `cuda_tile` (lm-tile's, or written by hand) must be
  /// a tile daybreak_gemm_wg_fp8_t takes before NVRTC instantiates it.
  LogicalResult checkGemmTiles(ModuleOp module) {
    llvm::StringMap<std::string> kernelEntry;
    for (auto kernel : module.getOps<plan::KernelOp>())
      kernelEntry[kernel.getSymName()] = kernel.getEntry().str();
    WalkResult walk = module.walk([&](plan::LaunchOp launch) {
      auto entry = kernelEntry.find(launch.getKernel());
      auto tile = launch->getAttrOfType<DenseI64ArrayAttr>("cuda_tile");
      if (entry == kernelEntry.end() || entry->second != "fp8_matmul" || !tile)
        return WalkResult::advance();
      if (cuda::fp8GemmTileFrom(tile.asArrayRef().data(), tile.size()))
        return WalkResult::advance();
      launch.emitError("plan-specialize-library-kernels: cuda_tile is not a "
                       "tile the FP8 GEMM takes: ")
          << cuda::fp8GemmTileRule();
      return WalkResult::interrupt();
    });
    return failure(walk.wasInterrupted());
  }
};
} // namespace
