//===- Target.h - A device the compiler generates code for ------*- C++ -*-===//
//
// Everything the pipeline knows about one device is behind `Target`: which
// runtime kernels it implements (the targets column of
// runtime/abi/Kernels.def), the passes it adds to the pipeline (its codegen
// pipeline: legality and tiling on lm, library specialisation on plan), how
// it prints its generated code (`--compile-to=llvm|ptx`) and how it
// serialises its code into the artifact (code images). The pipeline and the
// tools look targets up by name with getTarget; nothing else branches on the
// target.
//
// Targets are stateless singletons that live for the whole program:
// thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_TARGETS_TARGET_H
#define DAYBREAK_COMPILER_TARGETS_TARGET_H

#include "runtime/abi/KernelAbi.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace daybreak::artifact {
struct EmitInfo;
} // namespace daybreak::artifact

namespace daybreak::targets {

class Target {
public:
  virtual ~Target();

  /// The name `--target=` takes: "cpu", "cuda".
  virtual llvm::StringRef getName() const = 0;

  /// The bit of this target in Kernels.def's targets column.
  uint8_t getKernelMask() const { return abi::targetMask(getName()); }
  /// Whether the target's device implements the runtime kernel `kernel`.
  bool implements(const abi::KernelDecl &kernel) const {
    return kernel.targets & getKernelMask();
  }
  /// Every runtime kernel the target implements, in declaration order.
  std::vector<const abi::KernelDecl *> getKernels() const;

  /// Adds the target's passes on lm, after the target-neutral ones: lm-tile
  /// for this target, its own (addLmPasses), then lm-check-target, last
  /// before lowering so that it checks the ops the lowering will launch.
  /// `maxBatch` and `maxTokens` bound the rows of @decode and @prefill (0:
  /// lm-tile's defaults).
  void buildLmPipeline(mlir::OpPassManager &pm, int64_t maxBatch,
                       int64_t maxTokens) const;
  /// Adds the target's passes on plan, after workspace planning.
  virtual void buildPlanPipeline(mlir::OpPassManager &pm) const {}

  /// The `--compile-to` phase that prints the target's generated code:
  /// "llvm" (CPU: optimised LLVM IR), "ptx" (CUDA).
  virtual llvm::StringRef getCodePhase() const = 0;
  /// Prints the generated kernels of a lowered module in the form of
  /// getCodePhase(); nothing when the plan launches none.
  virtual llvm::Error printCode(mlir::ModuleOp module,
                                llvm::raw_ostream &out) const = 0;

  /// The MXFP4 expert route (lm-mxfp4-route) when --mxfp4-route is not
  /// given: "direct" by default (docs/mxfp4.md says why per target).
  virtual llvm::StringRef getDefaultMxfp4Route() const { return "direct"; }
  /// Whether the online MXFP4 route overlaps its conversions by default
  /// (lm-mxfp4-route's overlap). No target does yet: on the CPU one queue
  /// gains nothing, and on CUDA the FP8 expert GEMM's blocks take a whole
  /// SM's registers, so the side stream's conversion finds no room beside
  /// them and the step takes as long (docs/mxfp4.md), with a second
  /// workspace.
  virtual bool getDefaultMxfp4Overlap() const { return false; }
  /// Whether the online MXFP4 route converts in the steps other than
  /// decode by default (lm-mxfp4-route's convert-in-prefill): where the
  /// target's kernels read packed experts slower at prefill sizes than a
  /// conversion plus the FP8 GEMM.
  virtual bool getDefaultMxfp4ConvertInPrefill() const { return true; }

  /// Why this build cannot write the target's artifacts, or "" when it can.
  virtual std::string getArtifactUnavailableReason() const { return ""; }
  /// Compiles what remains of the target's code (the generated kernels,
  /// assembling where the toolkit is here) and puts every code image of a
  /// lowered module into `info`; notes what it did on `log`.
  virtual llvm::Error serialize(mlir::ModuleOp module, artifact::EmitInfo &info,
                                llvm::raw_ostream &log) const = 0;

protected:
  /// The target's own passes on lm, after tiling; none by default.
  virtual void addLmPasses(mlir::OpPassManager &pm) const {}
};

/// The target `--target=name` selects, or null when there is none.
const Target *getTarget(llvm::StringRef name);
/// Every target's name, in registration order.
std::vector<llvm::StringRef> getTargetNames();

} // namespace daybreak::targets

#endif // DAYBREAK_COMPILER_TARGETS_TARGET_H
