//===- Passes.h - Daybreak's passes -----------------------------*- C++ -*-===//

#ifndef DAYBREAK_PASSES_PASSES_H
#define DAYBREAK_PASSES_PASSES_H

#include "compiler/reference/Evaluator.h"
#include "dialects/lm/LmOps.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace daybreak {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// lm-fold-weights with the weights of an already open checkpoint.
std::unique_ptr<mlir::Pass> createLmFoldWeightsPass(ref::WeightProvider weights);

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace daybreak

#endif // DAYBREAK_PASSES_PASSES_H
