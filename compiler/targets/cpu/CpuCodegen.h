//===- CpuCodegen.h - Generated CPU kernels through LLVM --------*- C++ -*-===//
//
// Compiles the generated kernels of a lowered module (the functions of its
// nested `generated_kernels` module: fused elementwise chains) through MLIR's LLVM
// lowering and LLVM's x86-64 backend into one position-independent shared
// object, which the artifact carries and the runtime loads with dlopen.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_TARGETS_CPU_CPUCODEGEN_H
#define DAYBREAK_COMPILER_TARGETS_CPU_CPUCODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <vector>

namespace daybreak::targets::cpu {

/// Lowers the kernels of `cpuCode` (left unchanged) to LLVM IR, optimises it
/// at O3 for x86-64-v2, and links a shared object with the system's C
/// compiler driver (`cc`). With `llvmIR`, prints the optimised LLVM IR there.
llvm::Expected<std::vector<uint8_t>>
compileToSharedObject(mlir::ModuleOp cpuCode, llvm::raw_ostream *llvmIR);

} // namespace daybreak::targets::cpu

#endif // DAYBREAK_COMPILER_TARGETS_CPU_CPUCODEGEN_H
