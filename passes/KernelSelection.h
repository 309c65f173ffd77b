//===- KernelSelection.h - The runtime kernel of an lm op -------*- C++ -*-===//
//
// lm-lower-to-plan launches, for each op of a function body, one runtime
// kernel (runtime/abi/Kernels.def) or none (ops that only name or view a
// value). lm-check-target asks the same question before lowering, to reject
// an op the target cannot run at the op; both read the answer here.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_PASSES_KERNELSELECTION_H
#define DAYBREAK_PASSES_KERNELSELECTION_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace mlir {
class OpOperand;
class Operation;
class Value;
} // namespace mlir

namespace daybreak {

/// The abi::targetMask of pass `pass`'s `target` option; 0, after an error
/// on `op` naming the pass, the option and the targets there are, when it
/// names none.
uint8_t targetMaskOrError(mlir::Operation *op, llvm::StringRef pass,
                          llvm::StringRef target);

/// The name of the runtime kernel lm-lower-to-plan launches for `op`, an op
/// of a function body: "" for an op that launches nothing (constants, sizes,
/// weight references, reshapes, FP8 codes an expert matmul reads as they
/// are), std::nullopt for an op the lowering has no rule for. The name need
/// not be declared in Kernels.def: then no runtime kernel runs the op.
std::optional<llvm::StringRef> loweredKernelName(mlir::Operation *op);

/// Whether the kernel `use`'s owner launches takes a column view in the
/// operand's slot (a VIEW slot of Kernels.def, filled one operand a slot).
bool takesColumnView(mlir::OpOperand &use);

/// Whether the kernel that computes `value` can write it as a column view.
bool writesColumnView(mlir::Value value);

} // namespace daybreak

#endif // DAYBREAK_PASSES_KERNELSELECTION_H
