//===- CudaTarget.cpp - The CUDA target -----------------------------------===//

#include "compiler/targets/cuda/CudaTarget.h"

#include "compiler/artifact/ArtifactEmitter.h"
#include "compiler/targets/Target.h"
#include "compiler/targets/cuda/CudaCodegen.h"
#include "compiler/targets/cuda/LibraryKernels.h"
#include "passes/Passes.h"
#ifdef DAYBREAK_HAVE_CUDA
#include "runtime/devices/cuda/CudaKernels.h"
#endif

#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace daybreak;

namespace {
class CudaTarget final : public targets::Target {
public:
  /// The architecture PTX is generated for and cubins assembled for.
  static constexpr llvm::StringLiteral kChip = "sm_90a";

  llvm::StringRef getName() const override { return "cuda"; }
  llvm::StringRef getCodePhase() const override { return "ptx"; }
  /// The experts stay packed on the device (docs/mxfp4.md).
  llvm::StringRef getDefaultMxfp4Route() const override { return "online"; }
  /// No step converts by default: the grouped warpgroup GEMM reads E2M1
  /// and widens it in shared memory faster than the conversion and the
  /// FP8 expert GEMM take at every prefill size measured (gpt-oss-120b's
  /// experts at 64 to 8192 tokens on an H100: bench/NOTES.md, session 47),
  /// and the decode GEMVs read the packed experts already.
  bool getDefaultMxfp4ConvertInPrefill() const override { return false; }

  void buildPlanPipeline(OpPassManager &pm) const override {
    // The library kernels compiled for the plan's shapes, recorded in the
    // plan; without NVRTC the artifact keeps the prebuilt generic library.
    if (!targets::cuda::haveNvrtc())
      return;
    PlanSpecializeLibraryKernelsOptions specialize;
    specialize.chip = kChip.str();
    pm.addPass(createPlanSpecializeLibraryKernels(specialize));
  }

  llvm::Error printCode(ModuleOp module,
                        llvm::raw_ostream &out) const override {
    ModuleOp kernels = plan::findGeneratedKernels(module);
    if (!kernels)
      return llvm::Error::success();
    auto ptx = targets::cuda::compileToPtx(kernels, kChip);
    if (!ptx)
      return ptx.takeError();
    out << *ptx;
    return llvm::Error::success();
  }

  std::string getArtifactUnavailableReason() const override {
#ifdef DAYBREAK_HAVE_CUDA
    return "";
#else
    return "--target=cuda artifacts need the CUDA kernel library, which this "
           "build lacks (nvcc was not found when it was built)";
#endif
  }

  llvm::Error serialize(ModuleOp module, artifact::EmitInfo &info,
                        llvm::raw_ostream &log) const override {
    // Two code modules, each as PTX the driver compiles for any GPU at load
    // and as a cubin when ptxas is installed here (with the registers and
    // shared memory it reports): "library", the kernel library as the plan
    // recorded it specialised (each served launch names its entry point in
    // `specialized`) or else the prebuilt shape-generic PTX, and
    // "generated", the generated kernels.
    struct Source {
      std::string name, arch, ptx;
    };
    std::vector<Source> sources;
    if (auto library =
            module.lookupSymbol<plan::CodeImageOp>(plan::kLibraryCodeImage)) {
      int64_t served = 0;
      module.walk([&](plan::LaunchOp launch) {
        served += launch->hasAttr(plan::kSpecializedAttr);
      });
      log << "library kernels: " << library.getInstantiations().size()
          << " specialised for the model's shapes (NVRTC), serving " << served
          << " launches\n";
      sources.push_back({library.getSymName().str(), library.getArch().str(),
                         library.getCode().str()});
    } else {
#ifdef DAYBREAK_HAVE_CUDA
      sources.push_back({plan::kLibraryCodeImage.str(), kChip.str(),
                         daybreak::cuda::cudaKernelsPtx()});
#else
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     getArtifactUnavailableReason());
#endif
    }
    if (ModuleOp kernels = plan::findGeneratedKernels(module)) {
      auto ptx = targets::cuda::compileToPtx(kernels, kChip);
      if (!ptx)
        return ptx.takeError();
      sources.push_back({"generated", kChip.str(), std::move(*ptx)});
    }
    for (Source &source : sources) {
      artifact::EmitInfo::GpuModule image;
      image.name = source.name;
      image.arch = source.arch;
      auto cubin = targets::cuda::assembleWithPtxas(source.ptx, image.arch);
      if (!cubin)
        return cubin.takeError();
      image.ptx = std::move(source.ptx);
#ifdef DAYBREAK_HAVE_CUDA
      // Specialised or not, the library's kernels are these sources'.
      if (image.name == plan::kLibraryCodeImage)
        image.libraryFingerprint = daybreak::cuda::cudaKernelsFingerprint();
#endif
      // compileToPtx begins every generated kernel with the grid
      // dependency control of a programmatic dependent.
      image.dependentLaunch = image.name == "generated";
      if (*cubin) {
        image.cubin = std::move((*cubin)->bytes);
        // Generated kernels run 256 threads a block; the library kernels
        // choose theirs.
        for (const targets::cuda::KernelResources &k : (*cubin)->kernels)
          image.kernels.push_back({k.name, k.registers, k.sharedBytes,
                                   image.name == "generated" ? 256 : 0});
      }
      info.gpuModules.push_back(std::move(image));
    }
    return llvm::Error::success();
  }
};
} // namespace

const targets::Target &targets::cuda::getCudaTarget() {
  static const CudaTarget target;
  return target;
}
