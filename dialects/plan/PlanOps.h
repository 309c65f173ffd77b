//===- PlanOps.h - Ops of the plan dialect ----------------------*- C++ -*-===//

#ifndef DAYBREAK_DIALECTS_PLAN_PLANOPS_H
#define DAYBREAK_DIALECTS_PLAN_PLANOPS_H

#include "dialects/lm/LmAttrs.h"
#include "dialects/plan/PlanDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/plan/PlanEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/PlanAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.h.inc"

namespace daybreak::plan {

/// Launch-level attributes of plan.launch beside the kernel's parameters:
/// how many of its arguments are results, which declared optional operands
/// it leaves absent, and the library instantiation a target chose for it.
inline constexpr llvm::StringLiteral kNumResultsAttr = "num_results";
inline constexpr llvm::StringLiteral kAbsentAttr = "absent";
inline constexpr llvm::StringLiteral kSpecializedAttr = "specialized";
/// The launch's queue: absent or 0 the step's main queue, 1 the side queue
/// (plan-overlap-conversions). A side launch runs after every launch before
/// it on the main queue and beside the main launches after it, until a
/// launch joins it; side launches run in program order among themselves.
/// A device may run the queues as one, in order: that is always a valid
/// schedule.
inline constexpr llvm::StringLiteral kQueueAttr = "queue";
/// On a main-queue launch, `join_queue = n`: first wait for the step's
/// first n side launches (in program order) to finish.
inline constexpr llvm::StringLiteral kJoinQueueAttr = "join_queue";
/// Whether `name` is one of the launch-level attributes above (not a kernel
/// parameter).
inline bool isLaunchLevelAttr(llvm::StringRef name) {
  return name == kNumResultsAttr || name == kAbsentAttr ||
         name == kSpecializedAttr || name == kQueueAttr ||
         name == kJoinQueueAttr;
}

/// The nested module of kernels the compiler generates (fused elementwise
/// bodies), which each target's code generator compiles: target-neutral.
inline constexpr llvm::StringLiteral kGeneratedKernelsModule =
    "generated_kernels";
/// That module in `module`, or null when the plan launches none.
mlir::ModuleOp findGeneratedKernels(mlir::ModuleOp module);

/// The plan.code_image of the CUDA library kernels compiled for the plan's
/// shapes (plan-specialize-library-kernels); the artifact's code module of
/// the same name.
inline constexpr llvm::StringLiteral kLibraryCodeImage = "library";
/// The names of the MXFP4 online route's workspace buffers (codes, block
/// scales, bias rows). Every MoE layer's conversion writes buffers of these
/// names, which plan-assign-workspace makes one allocation each (sized for
/// the largest layer), and the memory plan reports them. Overlapped
/// conversions (all_from_tokens) alternate between two sets, the role
/// prefixed by the set: "mxfp4_workspace.0.codes", "mxfp4_workspace.1.codes".
inline constexpr llvm::StringLiteral kMxfp4WorkspaceCodes =
    "mxfp4_workspace.codes";
inline constexpr llvm::StringLiteral kMxfp4WorkspaceScales =
    "mxfp4_workspace.scales";
inline constexpr llvm::StringLiteral kMxfp4WorkspaceBias =
    "mxfp4_workspace.bias";

/// Checks `launch` against the declaration of kernel `entry`
/// (runtime/abi/Kernels.def): operands and results by declared position,
/// absent operands optional, every parameter declared and of its type, every
/// required parameter present. Errors name the launch and the kernel.
mlir::LogicalResult verifyKernelAbi(LaunchOp launch, llvm::StringRef entry);

} // namespace daybreak::plan

#endif // DAYBREAK_DIALECTS_PLAN_PLANOPS_H
