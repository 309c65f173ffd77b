//===- Target.cpp - The target registry and what targets share ------------===//

#include "compiler/targets/Target.h"

#include "compiler/targets/cpu/CpuTarget.h"
#include "compiler/targets/cuda/CudaTarget.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace daybreak;
using namespace daybreak::targets;

Target::~Target() = default;

std::vector<const abi::KernelDecl *> Target::getKernels() const {
  std::vector<const abi::KernelDecl *> kernels;
  for (unsigned id = 0; id < abi::kNumKernels; ++id) {
    const abi::KernelDecl &kernel = abi::kernel(static_cast<abi::KernelId>(id));
    if (implements(kernel))
      kernels.push_back(&kernel);
  }
  return kernels;
}

void Target::buildLmPipeline(OpPassManager &pm, int64_t maxBatch,
                             int64_t maxTokens) const {
  // lm-tile knows each target's kernels: the CPU GEMM splits its thread-pool
  // jobs by the tiles it records; for CUDA it chooses the FP8 GEMM's tile
  // of each fp8_matmul for its phase's most rows.
  LmTileOptions tile;
  tile.target = getName().str();
  if (maxBatch > 0)
    tile.maxBatch = maxBatch;
  if (maxTokens > 0)
    tile.maxTokens = maxTokens;
  pm.addPass(createLmTile(tile));
  addLmPasses(pm);
  // Last before lowering, on the ops the lowering will launch: an op this
  // target cannot run fails here, at its location.
  LmCheckTargetOptions check;
  check.target = getName().str();
  pm.addPass(createLmCheckTarget(check));
}

/// Every target, in the order --help and errors list them.
static llvm::ArrayRef<const Target *> registeredTargets() {
  static const Target *const all[] = {&targets::cpu::getCpuTarget(),
                                      &targets::cuda::getCudaTarget()};
  return all;
}

const Target *targets::getTarget(llvm::StringRef name) {
  for (const Target *target : registeredTargets())
    if (target->getName() == name)
      return target;
  return nullptr;
}

std::vector<llvm::StringRef> targets::getTargetNames() {
  std::vector<llvm::StringRef> names;
  for (const Target *target : registeredTargets())
    names.push_back(target->getName());
  return names;
}
