//===- WeightStacking.h - Checkpoint weights declared as one ----*- C++ -*-===//
//
// Projections of one input become one projection over their weights stacked
// along the output rows (lm-fuse-gate-up, lm-fuse-projections). A stacked
// weight is an lm.weight whose sources are its parts' sources in order: the
// artifact holds the same bytes and nothing is computed at compile time.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_PASSES_WEIGHTSTACKING_H
#define DAYBREAK_PASSES_WEIGHTSTACKING_H

#include "dialects/lm/LmOps.h"

#include "mlir/IR/BuiltinOps.h"

namespace daybreak {

/// The lm.weight `value` refers to, if it is a reference to one read from
/// the checkpoint (not a folded value); else null.
lm::WeightOp sourcedWeight(mlir::ModuleOp module, mlir::Value value);

/// The weight stacking `parts` (all read from the checkpoint) along dim 0,
/// their sources concatenated in order; or, when `experts` > 0, stacked
/// experts [E, N, K] along dim 1, the parts' sources interleaved per expert
/// (part 0's expert 0, part 1's expert 0, ..., part 0's expert 1, ...).
/// Declared once, before the first part, named by joining the parts' names
/// with '+'. Null if the parts do not stack: element types, shards or any
/// other dim differ, or a part's sources are not one an expert.
lm::WeightOp stackedWeight(mlir::ModuleOp module,
                           llvm::ArrayRef<lm::WeightOp> parts,
                           int64_t experts = 0);

} // namespace daybreak

#endif // DAYBREAK_PASSES_WEIGHTSTACKING_H
