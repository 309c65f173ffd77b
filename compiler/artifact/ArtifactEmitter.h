//===- ArtifactEmitter.h - plan IR to a .daybreak artifact ------*- C++ -*-===//
//
// Serialises a lowered module (plan weights, cache pools, kernels, steps)
// into the manifest, and the weights into section 0: checkpoint tensors
// byte for byte (stacked experts concatenated), folded weights from their
// values. The result is deterministic for a given module and checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_ARTIFACT_ARTIFACTEMITTER_H
#define DAYBREAK_COMPILER_ARTIFACT_ARTIFACTEMITTER_H

#include "compiler/importers/Checkpoint.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include "Manifest.pb.h"

namespace daybreak::artifact {

struct EmitInfo {
  std::string modelType;
  std::string configJson;
  int64_t vocabSize = 0;
  /// Every token that ends generation (the config's eos_token_id list).
  std::vector<int64_t> eosTokenIds;
  std::string target = "cpu";
  /// Rank `rank` of ranks(): heads and features split over
  /// `tensorParallel` ranks, routed experts over `expertParallel` ones.
  int64_t tensorParallel = 1, expertParallel = 1;
  int64_t rank = 0;
  int64_t ranks() const {
    return tensorParallel > expertParallel ? tensorParallel : expertParallel;
  }
  /// Keep checkpoint tensors in the checkpoint's files (recorded by path,
  /// size and XXH3 hashes) instead of copying them into the artifact;
  /// weights the compiler computes are stored in the artifact either way.
  bool weightsByReference = false;
  /// The generated CPU kernels as an x86-64 shared object (section
  /// "code.x86_64"); empty when the plan launches none.
  std::vector<uint8_t> cpuCode;
  /// GPU code modules: PTX, and a cubin for `arch` when ptxas was there.
  struct GpuKernel {
    std::string name;
    int registers = 0;
    int64_t sharedBytes = 0;
    int block = 0;
  };
  struct GpuModule {
    std::string name; ///< "library", "generated"
    std::string arch;
    std::string ptx;
    std::vector<uint8_t> cubin;
    std::vector<GpuKernel> kernels;
    uint64_t libraryFingerprint = 0; ///< "library": CodeImage's field
    bool dependentLaunch = false;    ///< CodeImage's dependent_launch
  };
  std::vector<GpuModule> gpuModules;
};

/// Builds the manifest of `module` (after plan-assign-workspace) and writes
/// the artifact to `path`. Returns the manifest for reporting.
llvm::Expected<Manifest> emitArtifact(mlir::ModuleOp module,
                                      const importers::Checkpoint &checkpoint,
                                      const EmitInfo &info,
                                      const std::string &path);

} // namespace daybreak::artifact

#endif // DAYBREAK_COMPILER_ARTIFACT_ARTIFACTEMITTER_H
