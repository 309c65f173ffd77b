//===- CudaCodegen.h - Generated kernels for NVIDIA GPUs --------*- C++ -*-===//
//
// Turns the generated kernels of a lowered module (the functions of its
// nested `generated_kernels` module: fused elementwise chains over `n` elements) into
// GPU kernels — the element loop becomes a grid-stride loop over threads —
// and lowers them through MLIR's gpu and nvvm dialects and LLVM's NVPTX
// backend to PTX for a given chip (sm_90a by default; math functions come
// from libdevice).
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_TARGETS_CUDA_CUDACODEGEN_H
#define DAYBREAK_COMPILER_TARGETS_CUDA_CUDACODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace daybreak::targets::cuda {

/// PTX for every function of `cpuCode` (left unchanged), each an
/// `.entry` with the same name and parameters (i64 n, ptr inputs, ptr out).
llvm::Expected<std::string> compileToPtx(mlir::ModuleOp cpuCode,
                                         llvm::StringRef chip = "sm_90a");

/// What ptxas reports for one kernel.
struct KernelResources {
  std::string name;
  int registers = 0;
  int64_t sharedBytes = 0;
};

/// A cubin assembled from PTX by the toolkit's ptxas, with its kernels'
/// resources.
struct Cubin {
  std::vector<uint8_t> bytes;
  std::vector<KernelResources> kernels;
};

/// Assembles `ptx` for `chip` with ptxas (from $CUDA_HOME/bin, PATH or
/// /usr/local/cuda/bin). std::nullopt when no ptxas is installed; an error
/// when ptxas rejects the PTX.
llvm::Expected<std::optional<Cubin>> assembleWithPtxas(llvm::StringRef ptx,
                                                       llvm::StringRef chip);

} // namespace daybreak::targets::cuda

#endif // DAYBREAK_COMPILER_TARGETS_CUDA_CUDACODEGEN_H
